"""Two Land workers racing one target (WG's exit canary) on real git and real processes."""
from __future__ import annotations

from wgk.conformance.oracle import land_race as lr
from wgk.conformance.reports import gate, gate_real


def test_the_gates_races_run_two_land_workers_on_real_git(monkeypatch):
    monkeypatch.setattr(gate_real, "RACES", ())
    monkeypatch.setattr(gate_real, "DEPENDENCY_RACES", ())
    monkeypatch.setitem(gate.BUDGETS, "quick", {"races": {"processes": 2, "rounds": 1, "lands": 1}})
    [check] = gate_real.race_checks("quick", None)
    assert check.verdict == "pass", check.detail
    assert check.name == "two-lands-race-one-target (sqlite)"
    assert check.data["world"] == "sqlite, real git, real processes"
    assert check.data["answers"] == {"applied": 1, "rejected:cas-moved": 1}
    assert sum(check.data["winners"].values()) == 1


def test_without_lands_in_the_budget_no_land_race_runs(monkeypatch):
    monkeypatch.setattr(gate_real, "RACES", ())
    monkeypatch.setattr(gate_real, "DEPENDENCY_RACES", ())
    monkeypatch.setitem(gate.BUDGETS, "quick", {"races": {"processes": 2, "rounds": 1}})
    assert gate_real.race_checks("quick", None) == []


def test_swapping_exchanges_the_two_tasks_everywhere():
    step = {"env": "edit", "task": "b", "content": "c-b2", "onto": "c-a1",
            "request": {"key": "revise:b:25", "token": "tok-b-1", "session": "s-a"},
            "expect-facts": {"tasks": {"a": {"status": "done"}}}}
    assert lr.swapped(step) == {
        "env": "edit", "task": "a", "content": "c-a2", "onto": "c-b1",
        "request": {"key": "revise:a:25", "token": "tok-a-1", "session": "s-b"},
        "expect-facts": {"tasks": {"b": {"status": "done"}}}}
    assert lr.swapped(lr.swapped(step)) == step


def test_a_kernel_that_lets_both_lands_win_fails_the_race(monkeypatch):
    class BothWin(lr.Kernel):
        def handle(self, body, credential=None):
            answer = super().handle(body, credential)
            if body.get("kind") == "commit-effect" and answer.get("code") == "cas-moved":
                return {"decision": "applied"}
            return answer
    monkeypatch.setattr(lr, "Kernel", BothWin)
    r = lr.land_race(1)
    assert not r.ok and r.problems[0].startswith("2 winners"), r.problems
