"""The planner is one query over the stored facts (``impl/decisions/planner.py``).

Lockstep compares its plans with the model's at every step; these tests show what the
comparison cannot reach: a plan reads the primary facts, never the derived status view,
and a planner whose ways overlap or leave a state uncovered plans the fail-closed hold
instead of a guess (the ways are exclusive by construction, so only a planted second
bug reaches that hold).
"""
from __future__ import annotations

import pytest

from wgk.impl import Kernel, MemoryWorld, TaskPolicy
from wgk.impl.decisions import planner


@pytest.fixture
def kernel(tmp_path):
    world = MemoryWorld.create(target="main-0")
    k = Kernel(str(tmp_path / "kernel.db"), world.environment())
    k.create_graph("g", [TaskPolicy("a"), TaskPolicy("b", deps=("a",))])
    yield k
    k.close()


def test_plans_of_an_open_graph(kernel):
    assert kernel.plan("a").to_json() == {"task": "a", "way": "runnable", "action": "dispatch",
                                          "reason": "dispatch", "deadline": 0}
    assert kernel.plan("b").action == "await-dependencies"


def test_a_status_written_behind_the_kernels_back_does_not_change_a_plan(kernel):
    kernel.conn.execute("UPDATE task_view SET status = 'done', satisfied = 1")
    kernel._forget()
    assert kernel.plan("a").action == "dispatch"             # not finished: no GraphSave
    assert kernel.plan("b").action == "await-dependencies"   # a is not Done either


def _with_condition(monkeypatch, way: str, condition: str) -> None:
    conditions = {**planner._CONDITIONS, way: condition}
    monkeypatch.setattr(planner, "WAYS_SQL", planner.WAYS_SQL.replace(
        planner._flag(planner._CONDITIONS[way]), planner._flag(conditions[way]), 1))


def test_two_ways_at_once_is_a_named_hold(kernel, monkeypatch):
    _with_condition(monkeypatch, "live-owner", "1 = 1")       # a planted overlap
    p = kernel.plan("a")
    assert (p.way, p.action, p.reason) == ("hold", "await-operator",
                                           "several ways: dispatch, live-owner")


def test_no_way_at_all_is_a_named_hold(kernel, monkeypatch):
    _with_condition(monkeypatch, "dispatch", "1 = 0")         # a planted gap
    p = kernel.plan("a")
    assert (p.way, p.reason) == ("hold", "no way forward")
