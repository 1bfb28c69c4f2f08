"""The planner's rows are kept for the database state they were read in (``planner.plans``,
``ReadCache.answers_now``, ``Store.state_mark``).

A projection of an unchanged store does not run the planner's statement again; anything that
may change a plan is seen at once: a row written by this connection, a transaction rolled
back after it wrote, another connection's commit, the clock.
"""
from __future__ import annotations

import sqlite3

import pytest

from wgk.impl import Kernel, MemoryWorld, TaskPolicy
from wgk.impl.decisions import planner


@pytest.fixture
def world():
    return MemoryWorld.create(target="main-0")


@pytest.fixture
def kernel(tmp_path, world):
    k = Kernel(str(tmp_path / "kernel.db"), world.environment())
    k.create_graph("g", [TaskPolicy("a"), TaskPolicy("b", deps=("a",))])
    yield k
    k.close()


def _planner_statements(kernel) -> list[str]:
    ran: list[str] = []
    kernel.conn.set_trace_callback(lambda sql: ran.append(sql) if "seen (task" in sql else None)
    return ran


def _action(kernel, name: str) -> str:
    """The plan as the planner gives it, without the kernel's own cache check first."""
    return planner.plan(kernel, name, kernel.observe(name)).action


def test_an_unchanged_store_is_planned_once(kernel):
    ran = _planner_statements(kernel)
    first = kernel.project()
    assert len(ran) == 1
    assert kernel.project() == first and kernel.ready() == ["a"]
    assert kernel.plan("a").action == "dispatch" and kernel.plan("b").action == "await-dependencies"
    assert len(ran) == 1                        # the projection, the ready list, each plan: kept
    kernel.audit()
    assert len(ran) == 1


def test_a_row_written_after_a_kept_plan_is_seen(kernel):
    assert _action(kernel, "a") == "dispatch"
    kernel.conn.execute("UPDATE tasks SET paused = 1 WHERE name = 'a'")      # this connection
    assert _action(kernel, "a") == "await-operator"
    assert kernel.plan("a").reason == "paused"


def test_a_rolled_back_write_after_a_kept_plan_is_seen(kernel):
    assert _action(kernel, "a") == "dispatch"
    with kernel.store.atomic() as unit:
        kernel.conn.execute("UPDATE tasks SET paused = 1 WHERE name = 'a'")
        assert _action(kernel, "a") == "await-operator"          # kept inside the transaction
        unit.abandon()
    assert _action(kernel, "a") == "dispatch"                    # the rows it read are gone


def test_another_connections_commit_after_a_kept_plan_is_seen(kernel, tmp_path):
    assert _action(kernel, "a") == "dispatch"
    other = sqlite3.connect(str(tmp_path / "kernel.db"), isolation_level=None)
    try:
        other.execute("UPDATE tasks SET paused = 1 WHERE name = 'a'")
    finally:
        other.close()
    assert _action(kernel, "a") == "await-operator"


def test_the_clock_is_part_of_a_kept_plan(kernel, world):
    kernel.conn.execute("UPDATE tasks SET not_before = ? WHERE name = 'a'",
                        (world.clock.now() + 5,))
    assert _action(kernel, "a") == "await-not-before"
    world.clock.advance(10)
    assert _action(kernel, "a") == "dispatch"
