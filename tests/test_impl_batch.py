"""Group commit: ``Kernel.handle_batch`` decides like ``handle``, with one commit per batch.

Every answer equals the one-request-at-a-time answer; a crash before the batch's
commit loses every answer of the batch together and a re-send gives the same
answers; an effect never runs behind uncommitted requests.
"""
from __future__ import annotations

import pytest

from wgk.impl import BadRequest, Crash, CrashAt, Kernel, Recorder

from test_impl_crash import CAP_A, FAST, SCRIPT, fresh
from wgk.impl.protocol.world_steps import apply_env

OWNER_B = {"pid": 4002, "birth": 922, "session": "s2"}


def heartbeat(n: int) -> dict:
    return {"kind": "heartbeat", "actor": "worker", "task": "a", "key": f"hb{n}", "cap": CAP_A,
            "evidence": f"beat-{n}"}


def workload() -> list:
    """The full completion of a, with heartbeats, a duplicate, an idempotency conflict, a
    stale capability and a request for b that must wait for a, between its edges."""
    steps = []
    for n, step in enumerate(SCRIPT):
        steps.append(step)
        if 2 <= n <= 6:
            steps.append(heartbeat(n))
    steps.insert(5, dict(SCRIPT[2]))                                   # duplicate of submit
    steps.insert(7, {**heartbeat(3), "evidence": "other-bytes"})      # conflict on key hb3
    steps.insert(9, {**heartbeat(99), "cap": {**CAP_A, "fence": 7}})  # stale capability
    steps.insert(4, {"kind": "dispatch", "actor": "daemon", "task": "b", "key": "early-b",
                     "expected-attempt": 0, "owner": OWNER_B})       # b's dependency not Done
    return steps


def one_by_one(tmp_path) -> tuple[list[dict], dict]:
    k, world, _ = fresh(tmp_path, "single.db")
    answers = []
    for step in workload():
        if "env" in step:
            apply_env(k, step)
        else:
            answers.append(k.handle(step))
    return answers, k.project()


def batched(k: Kernel, size: int) -> list[dict]:
    answers, batch = [], []

    def flush():
        answers.extend(k.handle_batch(batch))
        batch.clear()
    for step in workload():
        if "env" in step:
            flush()
            apply_env(k, step)
            continue
        batch.append(step)
        if len(batch) == size:
            flush()
    flush()
    return answers


@pytest.mark.parametrize("size", [1, 3, 50])
def test_batched_answers_and_state_equal_one_request_at_a_time(tmp_path, size):
    expected, projection = one_by_one(tmp_path)
    assert {a["decision"] for a in expected} >= {"applied", "evidence-only", "duplicate", "rejected"}
    k, _, _ = fresh(tmp_path, f"batch-{size}.db")
    assert batched(k, size) == expected
    assert k.project() == projection
    assert k.verify_ledger().ok and k.rebuild().ok


def test_one_commit_carries_many_requests(tmp_path):
    rec = Recorder()
    k, _, _ = fresh(tmp_path, "k.db", hook=rec)
    k.handle(SCRIPT[0])
    start = len(rec.seen)
    answers = k.handle_batch([heartbeat(n) for n in range(20)])
    commits = [b for b in rec.seen[start:] if b.describe().startswith("after commit")]
    assert [a["decision"] for a in answers] == ["evidence-only"] * 20
    assert len(commits) == 1


def test_an_effect_never_runs_behind_uncommitted_requests(tmp_path):
    rec = Recorder()
    k, world, _ = fresh(tmp_path, "k.db", hook=rec)
    k.handle(SCRIPT[0])
    world_steps = [s for s in SCRIPT[1:] if "env" in s]
    for s in world_steps:
        apply_env(k, s)
    for step in SCRIPT[2:10]:
        k.handle(step)                                  # up to prepare-effect
    start = len(rec.seen)
    answers = k.handle_batch([heartbeat(1), heartbeat(2), SCRIPT[10], heartbeat(3)])
    assert [a["decision"] for a in answers] == ["evidence-only", "evidence-only", "applied",
                                                "evidence-only"]
    seen = [b.describe() for b in rec.seen[start:]]
    land = next(i for i, d in enumerate(seen) if d.startswith("before ref-update"))
    assert seen[:land] == ["before commit [batch:hb1]", "after commit [batch:hb1]"]
    assert seen[land + 2:] == ["before commit [batch:commit-effect:a]",
                               "after commit [batch:commit-effect:a]"]


def test_a_crash_before_the_commit_loses_the_whole_batch_and_a_resend_repeats_it(tmp_path):
    k, world, path = fresh(tmp_path, "k.db")
    k.handle(SCRIPT[0])
    k.close()
    crash = CrashAt(0, kind="commit", when="before", key="batch:hb0")
    k = Kernel(path, world.environment(), pragmas=FAST, hook=crash)
    batch = [heartbeat(n) for n in range(5)]
    with pytest.raises(Crash):
        k.handle_batch(batch)
    k.close()
    k = Kernel(path, world.environment(), pragmas=FAST)
    assert k.project(journal_keys=[r["key"] for r in batch])["journal"] == {}
    assert [a["decision"] for a in k.handle_batch(batch)] == ["evidence-only"] * 5
    assert [a["decision"] for a in k.handle_batch(batch)] == ["duplicate"] * 5


def test_a_malformed_request_refuses_the_batch_before_anything_runs(tmp_path):
    k, _, _ = fresh(tmp_path, "k.db")
    k.handle(SCRIPT[0])
    with pytest.raises(BadRequest, match="request 1"):
        k.handle_batch([heartbeat(1), {"kind": "no-such-kind", "key": "x"}])
    assert k.handle(heartbeat(1))["decision"] == "evidence-only"       # hb1 was never decided
