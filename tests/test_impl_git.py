"""The real backends: git worktrees, WorkSave refs, the CAS land, exact cleanup, and owner
liveness from /proc (pid plus birth time)."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from wgk.impl import Environment, Kernel, ManualClock, Pragmas, TaskPolicy
from wgk.impl.world.git import SNAPSHOT_IDENTITY, GitError, GitRepository, init_repository, safe
from wgk.impl.world.proc import ProcProcessTable

FAST = Pragmas(synchronous="OFF")


@pytest.fixture
def repo(tmp_path):
    init_repository(str(tmp_path / "repo"), files={"a.txt": "one\n", "b.txt": "two\n"})
    r = GitRepository(str(tmp_path / "repo"), worktrees=str(tmp_path / "wt"))
    yield r
    r.remove_all_worktrees()


def commit_all(path: str, message: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="w", GIT_AUTHOR_EMAIL="w@x", GIT_COMMITTER_NAME="w",
               GIT_COMMITTER_EMAIL="w@x")
    subprocess.run(["git", "-C", path, "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", path, "commit", "-qm", message], check=True, env=env)
    return subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], check=True,
                          capture_output=True).stdout.decode().strip()


def files_of(repo: GitRepository, commit: str) -> dict[str, str]:
    names = repo.out("ls-tree", "-r", "--name-only", commit).splitlines()
    return {n: repo.out("show", f"{commit}:{n}") for n in names}


def test_a_clean_worktree_is_its_head_and_dirty_bytes_are_a_deterministic_snapshot(repo):
    base = repo.target()
    repo.create_worktree("a/f1", base)
    path = repo.worktree_path("a/f1")
    assert repo.observe_worktree("a/f1").content == base            # clean tree: the start
    with open(os.path.join(path, "a.txt"), "w") as f:
        f.write("changed\n")                                           # tracked, modified
    os.remove(os.path.join(path, "b.txt"))                            # tracked, deleted
    with open(os.path.join(path, "new.txt"), "w") as f:
        f.write("untracked\n")                                         # untracked
    first = repo.observe_worktree("a/f1").content
    assert first != base and repo.observe_worktree("a/f1").content == first
    assert files_of(repo, first) == {"a.txt": "changed", "new.txt": "untracked"}
    assert repo.out("rev-parse", f"{first}^") == base                  # bound to its base
    # observing changed nothing the worker sees
    status = repo.out("status", "--porcelain", cwd=path)
    assert "new.txt" in status and "b.txt" in status


def test_worksave_refs_are_immutable_and_a_clean_tree_is_saved_too(repo):
    base = repo.target()
    repo.pin("worksave/a/f1-v1", base)
    repo.pin("worksave/a/f1-v1", base)                                  # idempotent replay
    with pytest.raises(Exception, match="immutable"):
        repo.pin("worksave/a/f1-v1", repo.move_target("x"))
    assert repo.resolve(repo.ref("worksave/a/f1-v1")) == base


def test_land_is_a_compare_and_swap_that_never_forces(repo):
    base = repo.target()
    repo.create_worktree("a/f1", base)
    cand = commit_all_in(repo, "a/f1", "a.txt", "work\n")
    assert not repo.effect_observed("a/g0-f1-v1")
    moved = repo.move_target("someone else")
    assert repo.land("a/g0-f1-v1", cand, base) is False                # CAS refused
    assert repo.target() == moved and not repo.effect_observed("a/g0-f1-v1")
    with pytest.raises(GitError, match="does not descend from base"):
        repo.land("a/g0-f1-v1", cand, moved)                           # would drop `moved`
    assert repo.target() == moved and not repo.effect_observed("a/g0-f1-v1")
    path = repo.worktree_path("a/f1")
    subprocess.run(["git", "-C", path, "merge", "-q", "--no-edit", moved], check=True,
                   capture_output=True, env=dict(os.environ, **SNAPSHOT_IDENTITY))
    merged = repo.out("rev-parse", "HEAD", cwd=path)
    assert repo.land("a/g0-f1-v1", merged, moved) is True
    assert repo.target() == merged and repo.effect_observed("a/g0-f1-v1")
    assert repo.descends(merged, moved) and repo.descends(merged, base)
    assert not repo.effect_observed("a/g0-f1-v2")


def test_the_target_moves_on_a_machine_with_no_git_identity(repo, tmp_path, monkeypatch):
    """A fresh machine configures no git identity: the environment's other committer has
    its own, so the gate's real-git checks run there too."""
    for name in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME",
                 "GIT_COMMITTER_EMAIL", "EMAIL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    before = repo.target()
    moved = repo.move_target("someone else")
    assert moved != before and repo.target() == moved
    assert repo.out("log", "-1", "--format=%an <%ae>", moved) == \
        "someone-else <someone-else@localhost>"


def commit_all_in(repo: GitRepository, wt: str, name: str, text: str) -> str:
    path = repo.worktree_path(wt)
    with open(os.path.join(path, name), "w") as f:
        f.write(text)
    return commit_all(path, f"change {name}")


def test_cleanup_removes_exactly_the_planned_worktree(repo):
    base = repo.target()
    for wt in ("a/f1", "b/f1", "a/f10"):
        repo.create_worktree(wt, base)
    repo.remove_worktree("a/f1")
    assert not repo.observe_worktree("a/f1").present
    assert repo.observe_worktree("b/f1").present and repo.observe_worktree("a/f10").present
    repo.remove_worktree("a/f1")                                       # already gone: fine


def test_names_are_made_safe_for_refs_and_directories(repo):
    assert safe("fix bug: ~1") == "fix%20bug%3A%20%7E1"
    repo.pin("worksave/fix bug: ~1/f1-v1", repo.target())
    assert repo.resolve(repo.ref("worksave/fix bug: ~1/f1-v1")) == repo.target()


# --- /proc -----------------------------------------------------------------------------------


def test_birth_time_identifies_a_process_and_detects_its_death():
    procs = ProcProcessTable()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        birth = procs.birth_of(child.pid)
        assert isinstance(birth, int) and birth == procs.birth_of(child.pid)
        assert procs.birth_of(os.getpid()) != birth
        procs.kill(child.pid)
        assert procs.birth_of(child.pid) is None
    finally:
        child.kill()
        child.wait()
    assert procs.birth_of(0) is None and procs.birth_of(2**22 + 17) is None


def test_a_zombie_is_not_alive():
    procs = ProcProcessTable()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    for _ in range(200):                           # exited but not reaped: a zombie
        with open(f"/proc/{child.pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.01)
    assert procs.birth_of(child.pid) is None
    child.wait()


# --- the kernel on real git and real processes ------------------------------------------------


def real_kernel(tmp_path, repo: GitRepository, clock: ManualClock) -> Kernel:
    env = Environment(ProcProcessTable(), repo, clock)
    return Kernel(str(tmp_path / "k.db"), env, pragmas=FAST)


def cap(k: Kernel, task: str) -> dict:
    t = k.record(task)
    return {"graph": "g", "task": task, "generation": t.generation, "attempt": t.attempt,
            "fence": t.fence, "lease-epoch": t.lease_epoch}


def dispatch_to_a_real_process(k: Kernel, task: str) -> subprocess.Popen:
    """Dispatch ``task`` to a real sleeping child process, by its exact pid and birth time (the
    caller kills it)."""
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        pid, birth = ProcProcessTable().owner(worker.pid)
        assert k.handle({"kind": "dispatch", "actor": "daemon", "task": task, "key": "d",
                         "expected-attempt": 0, "owner": {"pid": pid, "birth": birth,
                                                          "session": "s"}})["decision"] == "applied"
    except BaseException:
        worker.kill()
        worker.wait()
        raise
    return worker


def tx(k: Kernel, task: str, kind: str, actor: str, **params) -> dict:
    t = k.record(task)
    return k.handle({"kind": kind, "actor": actor, "task": task, "cap": cap(k, task),
                     "key": f"{kind}:{t.fence}:{t.revision}", "expected-phase": t.visible_phase,
                     "expected-revision": t.revision, **params})


def test_a_real_completion_lands_by_cas_and_removes_its_worktree(tmp_path, repo):
    clock = ManualClock()
    k = real_kernel(tmp_path, repo, clock)
    k.create_graph("g", [TaskPolicy("a")])
    base = repo.target()
    worker = dispatch_to_a_real_process(k, "a")
    try:
        path = repo.worktree_path("a/f1")
        assert k.project()["tasks"]["a"]["worktree"] == {"present": True, "content": base,
                                                         "origin": base}
        cand = commit_all_in(repo, "a/f1", "a.txt", "the work\n")
        with open(os.path.join(path, "scratch.txt"), "w") as f:
            f.write("uncommitted too\n")
        content = repo.observe_worktree("a/f1").content
        assert tx(k, "a", "submit", "worker") == {"decision": "applied"}
        k.converge()                                     # quiesce, save-work, seal
        t = k.record("a")
        assert (t.phase, t.candidate, t.base) == ("candidate-sealed", content, base)
        assert repo.resolve(repo.ref("worksave/a/f1-v1")) == content
        assert files_of(repo, content)["scratch.txt"] == "uncommitted too"
        assert repo.out("rev-parse", f"{content}^") == cand
        assert tx(k, "a", "validate", "validator", candidate=content, verdict="pass")["decision"] \
            == "applied"
        report = k.converge()
        assert k.status("a") == "done", report.to_json()
        assert repo.target() == content and not os.path.exists(path)
        a = k.project()["tasks"]["a"]
        assert a["worktree"] == {"present": False, "content": content, "origin": base}
        assert a["promotions"] == 1 and k.audit().ok and k.rebuild().ok
    finally:
        worker.kill()
        worker.wait()


def test_a_dead_owner_is_proven_by_birth_time_and_its_dirty_work_retained(tmp_path, repo):
    clock = ManualClock()
    k = real_kernel(tmp_path, repo, clock)
    k.create_graph("g", [TaskPolicy("a")])
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    pid, birth = ProcProcessTable().owner(worker.pid)
    k.handle({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d",
              "expected-attempt": 0, "owner": {"pid": pid, "birth": birth, "session": "s"}})
    with open(os.path.join(repo.worktree_path("a/f1"), "half.txt"), "w") as f:
        f.write("half done\n")
    k.converge()
    assert k.record("a").owner_seen == "live"            # the exact owner is alive
    k.handle({"kind": "heartbeat-timeout", "actor": "daemon", "task": "a", "key": "hbt",
              "cap": cap(k, "a"), "evidence": "no heartbeat for 5m"})
    k.converge()                                         # suspect, probed: still live, running
    assert (k.record("a").attempt_state, k.record("a").owner_seen) == ("running", "live")
    worker.kill()
    worker.wait()
    report = k.converge()
    assert k.record("a").owner_seen == "dead" and k.status("a") == "in-progress"
    clock.advance(1)
    report = k.converge()
    assert [s.request["kind"] for s in report.sent] == ["declare-lost"]
    t = k.record("a")
    assert t.attempt_state == "lost" and t.retained is not None
    assert files_of(repo, t.retained)["half.txt"] == "half done"
    assert repo.resolve(repo.ref("retained/a/f1")) == t.retained
    assert k.plan("a").action == "dispatch"


def test_a_reused_pid_is_not_the_owner(tmp_path, repo):
    """The pid is alive, but its birth time differs from the owner's: proven death."""
    k = real_kernel(tmp_path, repo, ManualClock())
    k.create_graph("g", [TaskPolicy("a")])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        pid, birth = ProcProcessTable().owner(other.pid)
        k.handle({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d",
                  "expected-attempt": 0,
                  "owner": {"pid": pid, "birth": birth - 1, "session": "s"}})
        d = k.handle({"kind": "probe-owner", "actor": "process-observer", "task": "a", "key": "p",
                      "cap": cap(k, "a"), "evidence": f"pid:{pid}"})
        assert d == {"decision": "applied"} and k.record("a").owner_seen == "dead"
    finally:
        other.kill()
        other.wait()
