"""Crash cuts with a real ``kill -9``: SQLite and git recover for real.

A child process drives a completion on a real repository and is killed by its
own durability hook at a chosen boundary; the parent reopens the database,
lets convergence resume, and checks the effect happened exactly once.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from wgk.impl import Environment, Kernel, ManualClock
from wgk.impl.world.git import GitRepository, init_repository
from wgk.impl.world.proc import ProcProcessTable

CHILD = textwrap.dedent("""
    import hashlib, os, subprocess, sys
    from wgk.impl import CrashAt, Environment, Kernel, ManualClock, TaskPolicy
    from wgk.impl.world.git import GitRepository
    from wgk.impl.world.proc import ProcProcessTable
    db, repo, kind, when, key = sys.argv[1:6]
    env = Environment(ProcProcessTable(), GitRepository(repo, worktrees=repo + "-wt"), ManualClock())
    k = Kernel(db, env)
    k.create_graph("g", [TaskPolicy("a")])
    pid, birth = ProcProcessTable().owner()
    k.handle({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d", "expected-attempt": 0,
              "owner": {"pid": pid, "birth": birth, "session": "s"},
              "mint": hashlib.sha256(b"the-token").hexdigest()})
    wt = env.repository.worktree_path("a/f1")
    open(os.path.join(wt, "work.txt"), "w").write("the work\\n")
    cap = {"graph": "g", "task": "a", "generation": 0, "attempt": 1, "fence": 1, "lease-epoch": 1}
    k.handle({"kind": "submit", "actor": "worker", "task": "a", "key": "s", "cap": cap,
              "token": "the-token", "expected-phase": "absent", "expected-revision": 0})
    k.converge()
    t = k.record("a")
    k.handle({"kind": "validate", "actor": "validator", "task": "a", "key": "v", "cap": cap,
              "expected-phase": "candidate-sealed", "expected-revision": t.revision,
              "candidate": t.candidate, "verdict": "pass"})
    k.hook = CrashAt(0, kind=kind, when=when, key=key, mode="kill")
    k.converge()
    sys.exit(7)          # not reached: the hook kills this process
""")

EFFECT = "converge:a:g0:f1:r8:commit-effect"
CLEANUP = "converge:a:g0:f1:r10:commit-cleanup"


@pytest.mark.parametrize("kind, when, key, phase_after", [
    ("ref-update", "before", EFFECT, "effect-prepared"),
    ("ref-update", "after", EFFECT, "effect-prepared"),
    ("commit", "after", EFFECT, "effect-committed"),
    ("worktree-remove", "after", CLEANUP, "cleanup-prepared"),
    ("commit", "before", CLEANUP, "cleanup-prepared"),
])
def test_kill_9_at_a_boundary_then_recover_from_disk(tmp_path, kind, when, key, phase_after):
    repo = str(tmp_path / "repo")
    base = init_repository(repo)
    db = str(tmp_path / "k.db")
    child = subprocess.run([sys.executable, "-c", CHILD, db, repo, kind, when, key])
    assert child.returncode == -signal.SIGKILL
    git = GitRepository(repo, worktrees=repo + "-wt")
    k = Kernel(db, Environment(ProcProcessTable(), git, ManualClock()))
    t = k.record("a")
    assert t.phase == phase_after
    moved = not (kind == "ref-update" and when == "before")
    assert (git.target() != base) == moved                     # the CAS happened (or not yet)
    a = k.project()["tasks"]["a"]
    assert a["effect-done"] == moved and a["promotions"] == int(moved)
    k.converge()
    assert k.status("a") == "done"
    assert git.target() == k.record("a").candidate
    reflog = git.out("reflog", "show", "--format=%gs", "refs/heads/main").splitlines()
    assert sum(1 for m in reflog if m.startswith("wgk-effect")) == 1     # promoted exactly once
    assert k.project()["tasks"]["a"]["promotions"] == 1
    assert not os.path.exists(git.worktree_path("a/f1"))
    assert k.verify_ledger().ok and k.audit().ok and k.rebuild().ok
    k.close()
    git.remove_all_worktrees()
