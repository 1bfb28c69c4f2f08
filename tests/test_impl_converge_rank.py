"""The implementation's convergence lowers each task's rank on every applied action, and a
task whose applied action does not is reported stalled instead of acted on again."""
from __future__ import annotations

from wgk.impl import Kernel, MemoryWorld, Pragmas, TaskPolicy
from wgk.impl.decisions.projection import convergence_rank
from wgk.impl.protocol.world_steps import apply_env

OWNER = {"pid": 4001, "birth": 911, "session": "s1"}


def dead_owner(tmp_path):
    world = MemoryWorld.create(target="main-0")
    k = Kernel(str(tmp_path / "k.db"), world.environment(), pragmas=Pragmas(synchronous="OFF"))
    k.create_graph("g", [TaskPolicy("a")])
    k.handle({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d:a",
              "expected-attempt": 0, "owner": OWNER})
    apply_env(k, {"env": "owner-dies", "task": "a"})
    k.converge()                                   # the probe proves the death
    world.clock.advance()                          # declare-lost is due
    return k


def test_an_applied_convergence_action_lowers_the_rank(tmp_path):
    k = dead_owner(tmp_path)
    before = convergence_rank(k.record("a"))
    report = k.converge()
    assert [(s.request["kind"], s.response["decision"]) for s in report.sent] == \
        [("declare-lost", "applied")]
    assert convergence_rank(k.record("a")) < before and report.stalled == []
    assert "stalled" not in report.to_json()


def test_an_action_that_changes_nothing_is_reported_stalled_not_repeated(tmp_path):
    k = dead_owner(tmp_path)
    real = k.handle

    def applied_but_nothing_changes(request, credential=None):
        if request["kind"] == "declare-lost":
            return {"decision": "applied"}
        return real(request, credential)
    k.handle = applied_but_nothing_changes
    report = k.converge()
    assert [s.request["kind"] for s in report.sent] == ["declare-lost"]   # once, not 64 times
    assert report.stalled == ["a"] and report.to_json()["stalled"] == ["a"]
    assert k.record("a").attempt_state == "running"
