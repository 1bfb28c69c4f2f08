"""Ignored files on real git: a WorkSave captures them beside the saved content (never in the
candidate), and cleanup refuses to delete ignored bytes that no ref keeps (BRIEF §9)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from wgk.impl import Environment, Kernel, ManualClock, TaskPolicy
from wgk.impl.world.git import GitError, GitRepository, init_repository
from wgk.impl.world.proc import ProcProcessTable

from test_impl_git import FAST, commit_all_in, files_of, tx


@pytest.fixture
def repo(tmp_path):
    init_repository(str(tmp_path / "repo"), files={"a.txt": "one\n",
                                                    ".gitignore": "build/\n*.log\n"})
    r = GitRepository(str(tmp_path / "repo"), worktrees=str(tmp_path / "wt"))
    yield r
    r.remove_all_worktrees()


@pytest.fixture
def worker():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield p
    p.kill()
    p.wait()


def to_cleanup(tmp_path, repo, worker, ignored: dict[str, str]) -> Kernel:
    """Task ``a`` dispatched, its work committed beside ``ignored`` files, submitted,
    saved, validated: convergence then lands it and cleans up."""
    k = Kernel(str(tmp_path / "k.db"), Environment(ProcProcessTable(), repo, ManualClock()),
               pragmas=FAST)
    k.create_graph("g", [TaskPolicy("a")])
    pid, birth = ProcProcessTable().owner(worker.pid)
    assert k.handle({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d",
                     "expected-attempt": 0,
                     "owner": {"pid": pid, "birth": birth, "session": "s"}})["decision"] == "applied"
    commit_all_in(repo, "a/f1", "a.txt", "the work\n")
    write(repo, ignored)
    assert tx(k, "a", "submit", "worker") == {"decision": "applied"}
    k.converge()                                             # quiesce, save-work, seal
    assert tx(k, "a", "validate", "validator", candidate=k.record("a").candidate,
              verdict="pass")["decision"] == "applied"
    return k


def write(repo: GitRepository, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = os.path.join(repo.worktree_path("a/f1"), name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def test_a_worksave_captures_ignored_files_beside_the_candidate(tmp_path, repo, worker):
    ignored = {"build/out.bin": "compiled\n", "build/deep/cache": "cache\n", "run.log": "log\n"}
    k = to_cleanup(tmp_path, repo, worker, ignored)
    cand = k.record("a").candidate
    kept = repo.resolve(repo.ref("ignored/a/f1-v1"))
    assert kept is not None and repo.out("rev-parse", f"{kept}^") == repo.out(
        "rev-parse", f"{cand}") and files_of(repo, kept)["build/deep/cache"] == "cache"
    assert {n: files_of(repo, kept)[n] + "\n" for n in ignored} == ignored
    assert not any(n in files_of(repo, cand) for n in ignored)        # never in the candidate
    k.converge()
    assert k.status("a") == "done" and repo.target() == cand
    assert not os.path.exists(repo.worktree_path("a/f1"))             # removed: nothing lost
    assert "build/out.bin" not in files_of(repo, repo.target())
    pins = {p["ref"]: p["content"] for p in k.show("a")["pins"]}
    assert pins == {"worksave/a/f1-v1": cand, "ignored/a/f1-v1": kept}
    assert k.audit().ok and k.rebuild().ok
    k.close()


def test_a_clean_worktree_without_ignored_files_pins_nothing_more(tmp_path, repo, worker):
    k = to_cleanup(tmp_path, repo, worker, {})
    assert repo.resolve(repo.ref("ignored/a/f1-v1")) is None
    k.converge()
    assert k.status("a") == "done" and [p["ref"] for p in k.show("a")["pins"]] == ["worksave/a/f1-v1"]
    k.close()


def test_cleanup_refuses_ignored_bytes_written_after_the_worksave(tmp_path, repo, worker):
    """Bytes the WorkSave never saw (an ignored file written after it) are not deleted: the
    cleanup is rejected, the worktree and the file stay, nothing is recorded."""
    k = to_cleanup(tmp_path, repo, worker, {"run.log": "first\n"})
    write(repo, {"build/late.bin": "written after the save\n"})
    report = k.converge()
    assert report.sent[-1].request["kind"] == "commit-cleanup"
    assert report.sent[-1].response == {"decision": "rejected", "code": "worktree-unsaved"}
    assert k.record("a").phase == "cleanup-prepared" and k.status("a") == "completing"
    late = os.path.join(repo.worktree_path("a/f1"), "build", "late.bin")
    assert open(late).read() == "written after the save\n"
    with pytest.raises(GitError, match=r"holds what no ref keeps \(build/late.bin"):
        repo.remove_worktree("a/f1")
    assert os.path.exists(late) and k.audit().ok
    assert k.converge().sent[-1].response["decision"] == "duplicate"     # asked again: the same
    os.remove(late)                                 # the operator keeps or drops it: here drops
    k.converge()
    assert k.status("a") == "done" and not os.path.exists(repo.worktree_path("a/f1"))
    k.close()
