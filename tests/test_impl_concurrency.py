"""Several real processes on one database: every race ends with one winner, no event is lost.

Each racer is a separate Python process that opens the kernel on the shared
database (and the shared git repository), waits at a barrier file, then sends
its requests; the parent collects every response and checks the ledger.
"""
from __future__ import annotations

from honest_tokens import honest_mint, honest_secret

import json
import os
import subprocess
import sys
import textwrap

import pytest

from wgk.impl import Environment, Kernel, ManualClock, TaskPolicy
from wgk.impl.world.git import GitRepository, init_repository
from wgk.impl.world.proc import ProcProcessTable

CHILD = textwrap.dedent("""
    import json, os, sys, time
    from wgk.impl import Environment, Kernel, ManualClock
    from wgk.impl.world.git import GitRepository
    from wgk.impl.world.proc import ProcProcessTable
    db, repo, barrier, me = sys.argv[1:5]
    requests = json.loads(sys.argv[5])
    loops = int(sys.argv[6])
    pause = float(sys.argv[7])
    env = Environment(ProcProcessTable(), GitRepository(repo, worktrees=repo + "-wt"), ManualClock())
    k = Kernel(db, env)
    open(os.path.join(barrier, "ready-" + me), "w").close()
    while not os.path.exists(os.path.join(barrier, "go")):
        time.sleep(0.001)
    out = []
    for r in requests:
        out.append(k.handle(r))
        time.sleep(pause)
    for _ in range(loops):
        out.append({"converged": len(k.converge().sent)})
    print(json.dumps(out))
""")


@pytest.fixture
def shared(tmp_path):
    repo = str(tmp_path / "repo")
    init_repository(repo)
    env = Environment(ProcProcessTable(), GitRepository(repo, worktrees=repo + "-wt"), ManualClock())
    db = str(tmp_path / "k.db")
    k = Kernel(db, env)
    yield k, db, repo, tmp_path
    k.close()
    GitRepository(repo, worktrees=repo + "-wt").remove_all_worktrees()


def race(tmp_path, db: str, repo: str, batches: list[list[dict]], loops: list[int] | None = None,
         pause: float = 0.0):
    """Run one process per batch, released together; returns each process's responses."""
    barrier = tmp_path / f"barrier-{len(list(tmp_path.iterdir()))}"
    barrier.mkdir()
    loops = loops or [0] * len(batches)
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, db, repo, str(barrier), str(i),
                               json.dumps(batch), str(loops[i]), str(pause)],
                              stdout=subprocess.PIPE)
             for i, batch in enumerate(batches)]
    for i in range(len(batches)):
        while not (barrier / f"ready-{i}").exists():
            if procs[i].poll() is not None:
                raise AssertionError(f"racer {i} died before the barrier")
    (barrier / "go").touch()
    outs = []
    for p in procs:
        stdout, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        outs.append(json.loads(stdout))
    return outs


def cap(k: Kernel, task: str) -> dict:
    k._sync()
    t = k.record(task)
    return {"graph": "g", "task": task, "generation": t.generation, "attempt": t.attempt,
            "fence": t.fence, "lease-epoch": t.lease_epoch}


def no_lost_event(k: Kernel, sent: int) -> None:
    k._sync()
    requests = k.conn.execute("SELECT count(*) FROM ledger WHERE event = 'request'").fetchone()[0]
    assert requests == sent == k.conn.execute("SELECT count(*) FROM journal").fetchone()[0]
    assert k.verify_ledger().ok and k.audit().ok and k.rebuild().ok


def test_four_dispatchers_race_on_one_open_task_and_one_attempt_opens(shared):
    k, db, repo, tmp = shared
    k.create_graph("g", [TaskPolicy("a")])
    batches = [[{"kind": "dispatch", "actor": "daemon", "task": "a", "key": f"dispatcher-{i}",
                 "expected-attempt": 0,
                 "owner": {"pid": 7000 + i, "birth": 1, "session": f"s{i}"},
                 "mint": honest_mint("a", f"dispatcher-{i}")}] for i in range(4)]
    outs = [o[0] for o in race(tmp, db, repo, batches)]
    assert sorted(d["decision"] for d in outs) == ["applied", "rejected", "rejected", "rejected"]
    assert {d.get("code") for d in outs if d["decision"] == "rejected"} == {"cas-moved"}
    winner = outs.index({"decision": "applied"})
    k._sync()
    t = k.record("a")
    assert (t.attempt, t.fence, t.owner_pid) == (1, 1, 7000 + winner)
    assert len(GitRepository(repo, worktrees=repo + "-wt")._registered()) == 2   # main + one
    no_lost_event(k, 4)


def test_reset_racing_completion_first_durable_terminal_reservation_wins(shared):
    k, db, repo, tmp = shared
    k.create_graph("g", [TaskPolicy(f"t{i}") for i in range(6)])
    for i in range(6):
        k.handle({"kind": "dispatch", "actor": "daemon", "task": f"t{i}", "key": f"d{i}",
                  "expected-attempt": 0, "owner": {"pid": 7100 + i, "birth": 1, "session": "s"}})
    submits = [[{"kind": "submit", "actor": "worker", "task": f"t{i}", "key": f"submit-{i}",
                 "cap": cap(k, f"t{i}"), "token": honest_secret(f"t{i}", f"d{i}"),
                 "expected-phase": "absent", "expected-revision": 0}
                for i in reversed(range(6))]]
    resets = [[{"kind": "reset", "actor": "operator", "task": f"t{i}", "key": f"reset-{i}",
                "expected-generation": 0} for i in range(6)]]
    (submitted, reset) = race(tmp, db, repo, [submits[0], resets[0]], pause=0.004)
    submitted.reverse()
    k._sync()
    for i in range(6):
        pair = (submitted[i], reset[i])
        assert pair in [({"decision": "applied"}, {"decision": "rejected", "code": "terminal-already"}),
                        ({"decision": "rejected", "code": "stale-capability"}, {"decision": "applied"})]
        t = k.record(f"t{i}")
        if pair[0]["decision"] == "applied":
            assert (t.generation, t.phase, t.attempt_state) == (0, "prepared", "running")
        else:
            assert (t.generation, t.reopening) == (0, True)   # over a live owner: its intent
    no_lost_event(k, 6 + 12)


def test_two_terminal_reports_first_wins_the_other_is_evidence(shared):
    k, db, repo, tmp = shared
    k.create_graph("g", [TaskPolicy(f"t{i}") for i in range(5)])
    for i in range(5):
        k.handle({"kind": "dispatch", "actor": "daemon", "task": f"t{i}", "key": f"d{i}",
                  "expected-attempt": 0, "owner": {"pid": 7200 + i, "birth": 1, "session": "s"}})
    batches = [[{"kind": "fail", "actor": actor, "task": f"t{i}", "key": f"{actor}-fail-{i}",
                 "cap": cap(k, f"t{i}"), "token": honest_secret(f"t{i}", f"d{i}"),
                 "evidence": f"{actor}-exit-{i}"} for i in range(5)]
               for actor in ("worker", "wrapper")]
    worker, wrapper = race(tmp, db, repo, batches, pause=0.002)
    k._sync()
    for i in range(5):
        assert sorted([worker[i]["decision"], wrapper[i]["decision"]]) == ["applied", "evidence-only"]
        assert k.record(f"t{i}").attempt_state == "failed"
        evidence = k.project()["tasks"][f"t{i}"]["evidence"]
        assert ["fail", f"worker-exit-{i}"] in evidence
        assert ["fail", f"wrapper-exit-{i}"] in evidence
    no_lost_event(k, 5 + 10)


def test_workers_and_a_daemon_interleave_without_losing_an_event(shared):
    k, db, repo, tmp = shared
    k.create_graph("g", [TaskPolicy(f"w{i}") for i in range(3)])
    for i in range(3):
        k.handle({"kind": "dispatch", "actor": "daemon", "task": f"w{i}", "key": f"d{i}",
                  "expected-attempt": 0,
                  "owner": {"pid": os.getpid(), "birth": ProcProcessTable().birth_of(os.getpid()),
                            "session": "s"}})
    batches = []
    for i in range(3):
        c, tok = cap(k, f"w{i}"), honest_secret(f"w{i}", f"d{i}")
        batch = [{"kind": "heartbeat", "actor": "worker", "task": f"w{i}", "key": f"hb-{i}-{n}",
                  "cap": c, "token": tok, "evidence": f"hb-{n}"} for n in range(25)]
        batch += [{"kind": "log", "actor": "worker", "task": f"w{i}", "key": f"log-{i}-{n}",
                   "cap": c, "token": tok} for n in range(10)]
        batch += [{"kind": "heartbeat", "actor": "worker", "task": f"w{i}", "key": f"hb-{i}-{n}",
                   "cap": c, "token": tok, "evidence": f"hb-{n}"} for n in range(5)]  # replays
        batches.append(batch)
    outs = race(tmp, db, repo, batches + [[]], loops=[0, 0, 0, 15])
    for out in outs[:3]:
        assert [d["decision"] for d in out[:35]] == ["evidence-only"] * 25 + ["applied"] * 10
        assert [d["decision"] for d in out[35:]] == ["duplicate"] * 5
    k._sync()
    probes = k.conn.execute("SELECT count(*) FROM journal WHERE key LIKE 'converge:%'").fetchone()[0]
    assert probes >= 3                       # the daemon probed the live owners, once per belief
    for i in range(3):
        assert k.record(f"w{i}").owner_seen == "live"
        assert k.project()["tasks"][f"w{i}"]["counters"]["logs"] == 10
    no_lost_event(k, 3 + 3 * 35 + probes)
