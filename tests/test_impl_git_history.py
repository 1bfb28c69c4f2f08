"""Content has history, on real git: the base of an attempt is the kernel's fact and a land
never drops a commit from the target (BRIEF §9; incident trace 12b)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from wgk.impl import Environment, Kernel, ManualClock, TaskPolicy
from wgk.impl.world.git import SNAPSHOT_IDENTITY, GitRepository, init_repository
from wgk.impl.world.proc import ProcProcessTable

from test_impl_git import FAST, cap, commit_all_in, tx


@pytest.fixture
def repo(tmp_path):
    init_repository(str(tmp_path / "repo"), files={"a.txt": "one\n"})
    r = GitRepository(str(tmp_path / "repo"), worktrees=str(tmp_path / "wt"))
    yield r
    r.remove_all_worktrees()


@pytest.fixture
def worker():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield p
    p.kill()
    p.wait()


def dispatched(tmp_path, repo, worker) -> Kernel:
    k = Kernel(str(tmp_path / "k.db"), Environment(ProcProcessTable(), repo, ManualClock()),
               pragmas=FAST)
    k.create_graph("g", [TaskPolicy("a")])
    pid, birth = ProcProcessTable().owner(worker.pid)
    d = k.handle({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d",
                  "expected-attempt": 0, "owner": {"pid": pid, "birth": birth, "session": "s"}})
    assert d["decision"] == "applied"
    return k


def to_effect_prepared(k: Kernel, content: str) -> None:
    for kind, actor, params in (
            ("seal-candidate", "daemon", {"candidate": content}),
            ("validate", "validator", {"candidate": content, "verdict": "pass"}),
            ("accept", "daemon", {"candidate": content, "verdict": "not-required"}),
            ("record-disposition", "wrapper", {"disposition": "land"}),
            ("prepare-effect", "promoter", {})):
        assert tx(k, "a", kind, actor, **params) == {"decision": "applied"}, kind


def test_a_save_work_naming_the_moved_target_is_refused_and_nothing_is_dropped(tmp_path, repo,
                                                                               worker):
    t0 = repo.target()
    k = dispatched(tmp_path, repo, worker)
    cand = commit_all_in(repo, "a/f1", "a.txt", "built on T0\n")
    t1 = repo.move_target("someone else's commit")                   # T0 -> T1 after dispatch
    assert tx(k, "a", "submit", "worker") == {"decision": "applied"}
    assert tx(k, "a", "quiesce", "wrapper") == {"decision": "applied"}
    before = k.project()
    d = tx(k, "a", "save-work", "wrapper", candidate=cand, base=t1, key="bad-base")
    assert d == {"decision": "rejected", "code": "base-mismatch"}
    after = k.project()
    assert after.pop("journal") == dict(before.pop("journal"), **{"bad-base": d})
    assert after == before and k.record("a").base_hint == t0
    assert tx(k, "a", "save-work", "wrapper", candidate=cand, base=t0) == {"decision": "applied"}
    assert k.record("a").base == t0
    to_effect_prepared(k, cand)
    d = tx(k, "a", "commit-effect", "promoter", candidate=cand, base=t0)
    assert d == {"decision": "rejected", "code": "cas-moved"}
    assert tx(k, "a", "mark-repair", "daemon") == {"decision": "applied"}
    t = k.record("a")
    assert (t.exit, t.reason, t.candidate) == ("needs-repair", "target-moved", cand)
    assert repo.target() == t1 and repo.descends(repo.target(), t1)
    assert repo.resolve(repo.ref("worksave/a/f1-v1")) == cand          # the candidate is kept
    assert k.audit().ok


def test_a_revision_lands_only_when_it_descends_from_the_moved_target(tmp_path, repo, worker):
    t0 = repo.target()
    k = dispatched(tmp_path, repo, worker)
    cand = commit_all_in(repo, "a/f1", "a.txt", "built on T0\n")
    t1 = repo.move_target("someone else's commit")
    assert tx(k, "a", "submit", "worker") == {"decision": "applied"}
    assert tx(k, "a", "quiesce", "wrapper") == {"decision": "applied"}
    assert tx(k, "a", "save-work", "wrapper", candidate=cand, base=t0) == {"decision": "applied"}
    to_effect_prepared(k, cand)
    assert tx(k, "a", "mark-repair", "daemon") == {"decision": "applied"}
    # a revision that names the old base is refused: the new version is built on the target now
    d = tx(k, "a", "revise", "worker", candidate=cand, base=t0, key="bad-revise")
    assert d == {"decision": "rejected", "code": "base-mismatch"}
    path = repo.worktree_path("a/f1")
    subprocess.run(["git", "-C", path, "merge", "-q", "--no-edit", t1], check=True,
                   capture_output=True, env=dict(os.environ, **SNAPSHOT_IDENTITY))
    merged = repo.observe_worktree("a/f1").content
    assert tx(k, "a", "revise", "worker", candidate=merged, base=t1) == {"decision": "applied"}
    to_effect_prepared(k, merged)
    assert tx(k, "a", "commit-effect", "promoter", candidate=merged, base=t1) \
        == {"decision": "applied"}
    assert repo.target() == merged and repo.descends(merged, t1) and repo.descends(merged, t0)
    assert k.audit().ok


def test_a_revision_that_does_not_descend_from_its_base_is_refused(tmp_path, repo, worker):
    k = dispatched(tmp_path, repo, worker)
    cand = commit_all_in(repo, "a/f1", "a.txt", "built on T0\n")
    t1 = repo.move_target("someone else's commit")
    assert tx(k, "a", "submit", "worker") == {"decision": "applied"}
    assert tx(k, "a", "quiesce", "wrapper") == {"decision": "applied"}
    assert tx(k, "a", "save-work", "wrapper", candidate=cand, base=k.record("a").base_hint) \
        == {"decision": "applied"}
    to_effect_prepared(k, cand)
    assert tx(k, "a", "mark-repair", "daemon") == {"decision": "applied"}
    # the worker revises without taking the moved target in: refused before anything is
    # recorded, so no land can be attempted with it and convergence is never stalled by it
    before = k.project()["tasks"]["a"]
    assert tx(k, "a", "revise", "worker", candidate=cand, base=t1) == \
        {"decision": "rejected", "code": "base-mismatch"}
    assert k.project()["tasks"]["a"] == before and before["status"] == "needs-repair"
    assert repo.target() == t1 and k.converge().failed == {}


def test_the_audit_finds_a_landed_commit_dropped_from_the_target(tmp_path, repo, worker):
    t0 = repo.target()
    k = dispatched(tmp_path, repo, worker)
    cand = commit_all_in(repo, "a/f1", "a.txt", "built on T0\n")
    assert tx(k, "a", "submit", "worker") == {"decision": "applied"}
    assert tx(k, "a", "quiesce", "wrapper") == {"decision": "applied"}
    assert tx(k, "a", "save-work", "wrapper", candidate=cand, base=t0) == {"decision": "applied"}
    to_effect_prepared(k, cand)
    assert tx(k, "a", "commit-effect", "promoter", candidate=cand, base=t0) \
        == {"decision": "applied"}
    assert repo.target() == cand and k.audit().ok
    # someone force-moves the target back to T0: the landed candidate is no longer in its history
    repo.git("update-ref", repo.target_ref, t0, cand)
    findings = k.audit().findings
    assert [f.check for f in findings] == ["target-history-grows"]
    assert findings[0].task == "a" and cand[:12] in findings[0].detail
