"""Crash cuts in-process: every durable boundary of a full completion, crashed just before
and just after, restarted from disk, the unacknowledged request re-sent with its key.

After recovery the kernel's records equal the crash-free run's after the acknowledged
prefix (or prefix + 1 when the commit landed but the response was lost); the final
projection equals the crash-free one; the effect happened exactly once.
"""
from __future__ import annotations

import pytest

from wgk.impl import Crash, CrashAt, Kernel, MemoryWorld, Pragmas, Recorder, TaskPolicy
from wgk.impl.protocol.world_steps import apply_env

FAST = Pragmas(synchronous="OFF")
CAP_A = {"graph": "g", "task": "a", "generation": 0, "attempt": 1, "fence": 1, "lease-epoch": 1}


def edge(n: int, kind: str, actor: str, phase: str, **params) -> dict:
    return {"kind": kind, "actor": actor, "task": "a", "key": f"{kind}:a", "cap": CAP_A,
            "expected-phase": phase, "expected-revision": n, **params}


SCRIPT = [
    {"kind": "dispatch", "actor": "daemon", "task": "a", "key": "dispatch:a", "expected-attempt": 0,
     "owner": {"pid": 4001, "birth": 911, "session": "s1"}},
    {"env": "edit", "task": "a", "content": "c-a1"},
    edge(0, "submit", "worker", "absent"),
    edge(1, "quiesce", "wrapper", "prepared"),
    edge(2, "save-work", "wrapper", "quiescing", candidate="c-a1", base="main-0"),
    edge(3, "seal-candidate", "daemon", "work-saved", candidate="c-a1"),
    edge(4, "validate", "validator", "candidate-sealed", candidate="c-a1", verdict="pass"),
    edge(5, "accept", "daemon", "validated", candidate="c-a1", verdict="not-required"),
    edge(6, "record-disposition", "wrapper", "accepted", disposition="land"),
    edge(7, "prepare-effect", "promoter", "disposition-recorded"),
    edge(8, "commit-effect", "promoter", "effect-prepared", candidate="c-a1", base="main-0"),
    edge(9, "prepare-cleanup", "cleanup", "effect-committed"),
    edge(10, "commit-cleanup", "cleanup", "cleanup-prepared"),
    edge(11, "save-graph", "daemon", "cleanup-committed"),
    {"kind": "dispatch", "actor": "daemon", "task": "b", "key": "dispatch:b", "expected-attempt": 0,
     "owner": {"pid": 4002, "birth": 922, "session": "s2"}},
]
SPECS = [TaskPolicy("a"), TaskPolicy("b", deps=("a",))]


def fresh(tmp_path, name: str, hook=None) -> tuple[Kernel, MemoryWorld, str]:
    world = MemoryWorld.create(target="main-0")
    path = str(tmp_path / name)
    k = Kernel(path, world.environment(), pragmas=FAST)
    k.create_graph("g", SPECS)
    k.close()
    kw = {"hook": hook} if hook else {}
    return Kernel(path, world.environment(), pragmas=FAST, **kw), world, path


def records(k: Kernel) -> dict:
    return {n: k.record(n) for n in k.names()}


def crash_free(tmp_path):
    rec = Recorder()
    k, world, _ = fresh(tmp_path, "free.db", rec)
    snapshots = [records(k)]
    cuts = []
    for i, step in enumerate(SCRIPT):
        before = len(rec.seen)
        if "env" in step:
            apply_env(k, step)
        else:
            assert k.handle(step)["decision"] == "applied", step
        cuts += [(i, j) for j in range(before, len(rec.seen))]
        snapshots.append(records(k))
    return k.project(), snapshots, cuts, rec.seen


def test_every_boundary_of_a_completion(tmp_path):
    final, snapshots, cuts, boundaries = crash_free(tmp_path)
    kinds = {b.kind for b in boundaries}
    assert kinds == {"commit", "ref-update", "worktree-add", "worktree-remove"}
    assert len(cuts) == len(boundaries) >= 2 * 15
    for n, (step_index, boundary_index) in enumerate(cuts):
        crash = CrashAt(boundary_index)
        k, world, path = fresh(tmp_path, f"cut{n}.db", crash)
        resent = None
        for i, step in enumerate(SCRIPT):
            if "env" in step:
                apply_env(k, step)
                continue
            try:
                d = k.handle(step)
                assert d["decision"] == "applied"
            except Crash:
                assert i == step_index
                k.close()
                k = Kernel(path, world.environment(), pragmas=FAST)          # restart from disk
                recovered = records(k)
                assert recovered in (snapshots[i], snapshots[i + 1]), crash.fired
                resent = k.handle(step)                                       # same key
                landed = recovered == snapshots[i + 1]
                expected = {"decision": "duplicate", "original": {"decision": "applied"}} \
                    if landed else {"decision": "applied"}
                assert resent == expected, (crash.fired, resent)
        assert crash.fired is not None and resent is not None
        assert k.project() == final, crash.fired
        assert world.repository.effects == {"a/g0-f1-v1": ("land", "c-a1")}
        assert k.audit().ok and k.rebuild().ok
        k.close()


def test_crash_between_the_ref_update_and_the_commit_is_re_observed(tmp_path):
    """The promoter moved the target, then the kernel died before recording it."""
    crash = CrashAt(0, kind="ref-update", when="after")
    k, world, path = fresh(tmp_path, "k.db")
    for step in SCRIPT[:10]:
        apply_env(k, step) if "env" in step else k.handle(step)
    k.hook = crash
    with pytest.raises(Crash):
        k.handle(SCRIPT[10])
    k = Kernel(path, world.environment(), pragmas=FAST)
    a = k.project()["tasks"]["a"]
    assert world.repository.target() == "c-a1"
    assert (a["phase"], a["effect-done"], a["promotions"]) == ("effect-prepared", True, 1)
    assert k.plan("a").action == "drive-transaction"           # not mark-repair: it happened
    assert k.handle(dict(edge(8, "mark-repair", "daemon", "effect-prepared"), key="mr")) == \
        {"decision": "rejected", "code": "illegal-phase-edge"}
    assert k.handle(SCRIPT[10]) == {"decision": "applied"}     # re-observed, not redone
    body = k.conn.execute("SELECT body FROM ledger WHERE key = 'commit-effect:a'").fetchone()[0]
    assert '"re-observed":true' in body
    a = k.project()["tasks"]["a"]
    assert (a["phase"], a["promotions"], world.repository.target()) == ("effect-committed", 1, "c-a1")


def test_convergence_resumes_an_interrupted_completion_at_every_cut(tmp_path):
    """The owner submitted; the daemon drives the rest and crashes at each boundary."""
    def prepare(k):
        for step in SCRIPT[:3]:
            apply_env(k, step) if "env" in step else k.handle(step)

    k, world, _ = fresh(tmp_path, "free.db")
    prepare(k)
    rec = Recorder()
    k.hook = rec
    k.converge()
    k.handle(edge(4, "validate", "validator", "candidate-sealed", candidate="c-a1", verdict="pass"))
    k.converge()
    expected = k.project()
    assert expected["tasks"]["a"]["status"] == "done"
    for index in range(len(rec.seen)):
        crash = CrashAt(index)
        k, world, path = fresh(tmp_path, f"conv{index}.db")
        prepare(k)
        k.hook = crash
        validated = False
        for _ in range(6):
            try:
                k.converge()
                if not validated and k.record("a").phase == "candidate-sealed":
                    k.handle(edge(4, "validate", "validator", "candidate-sealed",
                                  candidate="c-a1", verdict="pass"))
                    validated = True
                    continue
                if k.status("a") == "done":
                    break
            except Crash:
                k.close()
                k = Kernel(path, world.environment(), pragmas=FAST)
        got = k.project()
        assert got["tasks"] == expected["tasks"], crash.fired
        assert len(world.repository.effects) == 1
        k.close()
