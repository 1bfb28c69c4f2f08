"""Names never alias, on real git: one grammar for graph ids, task names and content ids, checked
at ``task add``, at import and on the wire; refs and worktree paths derived injectively and
disjointly; cleanup removes only the exact worktree it recorded (BRIEF §9)."""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from wgk.conformance.cli.main import main
from wgk.impl import Environment, GraphError, Kernel, ManualClock, TaskPolicy
from wgk.impl.contract import names as impl_names
from wgk.impl.world.git import GitError, GitRepository, init_repository
from wgk.impl.front.legacy import LegacyError
from wgk.impl.world.proc import ProcProcessTable
from wgk.model import names as model_names

from test_impl_git import FAST, commit_all_in

#: Each way a task name has gone wrong before, and the rule that refuses it.
BAD = [("a/f1", "name-charset"), ("x/f1-v1", "name-charset"), ("a//b", "name-charset"),
       ("/abs/path", "name-start"), ("a\x00b", "name-charset"), ("..", "name-start"),
       ("é" * 60, "name-start"), ("b" + "é" * 59, "name-charset"), ("x" * 65, "name-length"),
       ("", "name-length"), ("-upload-pack=x", "name-start"), ("Main", "name-start"),
       ("a b", "name-charset"), ("a:b", "name-charset"), ("\ud800", "name-start")]


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


def kernel(tmp_path, repo) -> Kernel:
    return Kernel(str(tmp_path / "k.db"), Environment(ProcProcessTable(), repo, ManualClock()),
                  pragmas=FAST)


def dispatch(k: Kernel, task: str, worker, key: str = "d") -> dict:
    pid, birth = ProcProcessTable().owner(worker.pid)
    return k.handle({"kind": "dispatch", "actor": "daemon", "task": task, "key": key,
                     "expected-attempt": k.record(task).attempt,
                     "owner": {"pid": pid, "birth": birth, "session": "s"}})


def cap(k: Kernel, task: str) -> dict:
    t = k.record(task)
    return {"graph": k.graph_id, "task": task, "generation": t.generation, "attempt": t.attempt,
            "fence": t.fence, "lease-epoch": t.lease_epoch}


def tx(k: Kernel, task: str, kind: str, actor: str, **params) -> dict:
    t = k.record(task)
    return k.handle({"kind": kind, "actor": actor, "task": task, "cap": cap(k, task),
                     "key": f"{kind}:{t.fence}:{t.revision}", "expected-phase": t.visible_phase,
                     "expected-revision": t.revision, **params})


def file_bytes(path: str) -> str:
    return hashlib.sha256(b"".join(open(p, "rb").read() for p in (path, path + "-wal")
                                   if os.path.exists(p))).hexdigest()


# --- the grammar -------------------------------------------------------------------------------


@pytest.mark.parametrize("name,rule", BAD, ids=[repr(n)[:20] for n, _ in BAD])
def test_each_bad_name_breaks_its_named_rule_in_model_and_implementation(name, rule):
    assert model_names.broken_rule(name) == rule
    assert impl_names.problem(name)[0] == rule
    line = impl_names.describe("task", name)
    assert f"rule {rule}" in line and "\n" not in line and len(line) < 260


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=70), st.from_regex(r"[a-z0-9][a-z0-9._-]{0,70}", fullmatch=True)))
def test_model_and_implementation_share_one_grammar(s):
    assert model_names.is_name(s) == impl_names.is_name(s) == (impl_names.problem(s) is None)
    assert model_names.broken_rule(s) == (None if impl_names.problem(s) is None
                                          else impl_names.problem(s)[0])


# --- refused at task add, at import, on the wire ----------------------------------------------


def test_every_bad_name_is_refused_at_task_add_on_a_real_repository(tmp_path, repo):
    k = kernel(tmp_path, repo)
    k.create_graph("g", [TaskPolicy("a")])
    before = k.verify_ledger().events
    for name, rule in BAD:
        with pytest.raises(GraphError, match=f"rule {rule}"):
            k.add_tasks([TaskPolicy(name)])
    with pytest.raises(GraphError, match="dependency .*rule name-charset"):
        k.add_tasks([TaskPolicy("b", deps=("a/f1",))])
    with pytest.raises(GraphError, match="graph id 'G/1': rule name-start"):
        Kernel(str(tmp_path / "other.db"), k.env, pragmas=FAST).create_graph("G/1")
    assert k.verify_ledger().events == before and k.names() == ["a"]
    k.close()


def test_the_cli_refuses_a_bad_name_in_one_line_exit_2_database_untouched(tmp_path, capsys,
                                                                          monkeypatch):
    init_repository(str(tmp_path / "repo"))
    db = str(tmp_path / "k.db")
    assert main(["kernel", "--db", db, "init", "--graph", "g", "--repo", str(tmp_path / "repo")]) == 0
    monkeypatch.setenv("WGK_CREDENTIAL_FILE", db + ".credential")
    assert main(["kernel", "--db", db, "task", "add", "a"]) == 0
    before = file_bytes(db)
    for name, rule in BAD:
        if "\x00" in name or "\ud800" in name:
            continue                        # not an argument a command line can carry
        capsys.readouterr()
        assert main(["kernel", "--db", db, "task", "add", "--", name]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"rule {rule}" in err, err
    capsys.readouterr()
    assert main(["kernel", "--db", db, "send", '{"kind": "message", "actor": "operator", '
                 '"task": "a/f1", "key": "m"}']) == 2
    assert "request: request field '/task' 'a/f1': rule name-charset" in capsys.readouterr().err
    assert main(["kernel", "--db", db, "init", "--graph", "G", "--repo", str(tmp_path / "repo")]) == 2
    assert file_bytes(db) == before
    GitRepository(str(tmp_path / "repo")).remove_all_worktrees()


def test_legacy_import_refuses_a_bad_name_naming_path_and_line(tmp_path, repo):
    k = kernel(tmp_path, repo)
    k.create_graph("g", [])
    f = tmp_path / "graph.jsonl"
    f.write_text('{"id": "a", "status": "done"}\n{"id": "a/f1", "after": ["a"]}\n')
    with pytest.raises(LegacyError, match=r"graph.jsonl:2: task 'a/f1': rule name-charset"):
        k.import_legacy(str(f))
    f.write_text('{"id": "b", "after": ["../a"]}\n')
    with pytest.raises(LegacyError, match=r"graph.jsonl:1: dependency '../a': rule name-start"):
        k.import_legacy(str(f))
    assert k.names() == [] and k.verify_ledger().events == 1
    k.close()


@pytest.mark.parametrize("field,value", [
    ("task", "a/f1"), ("cap", {"graph": "g/x", "task": "a"}), ("cap", {"graph": "g", "task": "A"}),
    ("candidate", "--upload-pack=touch x"), ("base", "HEAD~1"), ("base", "main-0:a.txt")])
def test_a_bad_name_on_the_wire_is_bad_name_and_writes_nothing(tmp_path, repo, worker, field,
                                                               value):
    k = kernel(tmp_path, repo)
    k.create_graph("g", [TaskPolicy("a")])
    assert dispatch(k, "a", worker) == {"decision": "applied"}
    request = {"kind": "save-work", "actor": "wrapper", "task": "a", "key": "w",
               "cap": cap(k, "a"), "expected-phase": "absent", "expected-revision": 0,
               "candidate": repo.target(), "base": repo.target()}
    if field == "cap":
        request["cap"] = dict(request["cap"], **value)
    else:
        request[field] = value
    before, ledger = k.project(), k.verify_ledger()
    assert k.handle(request) == {"decision": "rejected", "code": "bad-name"}
    assert k.handle_batch([request]) == [{"decision": "rejected", "code": "bad-name"}]
    assert k.project() == before and k.verify_ledger() == ledger      # nothing journaled
    good = {"kind": "heartbeat", "actor": "worker", "task": "a", "key": "w", "cap": cap(k, "a"),
            "evidence": "hb"}
    assert k.handle(good) == {"decision": "evidence-only"}            # the key stayed free
    k.close()


# --- derived refs and paths: injective and disjoint -------------------------------------------


def test_refs_and_worktrees_of_names_that_once_clashed_are_disjoint_on_real_git(repo):
    """A database made before the grammar may hold tasks ``a`` and ``a/f1``, ``x`` and
    ``x/f1-v1``: their worktrees are siblings and their refs never prefix each other."""
    base = repo.target()
    for wt in ("a/f1", "a/f1/f1", "a//b/f1", "/abs/path/f1"):
        repo.create_worktree(wt, base)
    paths = [os.path.realpath(repo.worktree_path(w))
             for w in ("a/f1", "a/f1/f1", "a//b/f1", "/abs/path/f1")]
    root = os.path.realpath(repo.worktrees)
    assert len(set(paths)) == 4
    assert all(os.path.dirname(os.path.dirname(p)) == root for p in paths)      # no nesting
    assert not any(p.startswith(q + os.sep) for p in paths for q in paths)
    for ref in ("worksave/x/f1-v1", "worksave/x/f1-v1/f1-v1", "retained/x/f1", "retained/x/f1/f1"):
        repo.pin(ref, base)                          # git refuses a ref inside another's
        assert repo.resolve(repo.ref(ref)) == base
    full = [repo.ref(r) for r in ("worksave/x/f1-v1", "worksave/x/f1-v1/f1-v1")]
    assert not full[1].startswith(full[0] + "/") and full[0].count("/") == full[1].count("/")
    repo.remove_worktree("a/f1")
    assert repo.observe_worktree("a/f1/f1").present and repo.observe_worktree("a//b/f1").present
    with pytest.raises(GitError, match="not a kernel name"):
        repo.worktree_path("f1")


def test_longest_names_work_end_to_end_on_real_git(tmp_path, repo, worker):
    """A name at every limit of the grammar is dispatched, saved, landed and cleaned up."""
    name = "0." + "a_-." * 15 + "z9"
    assert len(name) == 64 and impl_names.is_name(name)
    k = kernel(tmp_path, repo)
    k.create_graph("g." * 31 + "g1", [TaskPolicy(name)])
    assert dispatch(k, name, worker) == {"decision": "applied"}
    wt = k.record(name).worktree_id
    cand = commit_all_in(repo, wt, "a.txt", "work\n")
    assert tx(k, name, "submit", "worker") == {"decision": "applied"}
    k.converge()
    assert tx(k, name, "validate", "validator", candidate=cand, verdict="pass")["decision"] == "applied"
    k.converge()
    assert k.status(name) == "done" and repo.target() == cand
    assert not os.path.exists(repo.worktree_path(wt)) and k.audit().ok
    k.close()


def test_cleanup_never_removes_a_worktree_holding_another(tmp_path, repo, worker):
    """A worktree someone made inside the attempt's worktree is not removed with it: the
    cleanup is refused (``worktree-unsaved``, the removal itself refuses too), and both
    worktrees keep their bytes."""
    k = kernel(tmp_path, repo)
    k.create_graph("g", [TaskPolicy("a")])
    assert dispatch(k, "a", worker) == {"decision": "applied"}
    commit_all_in(repo, "a/f1", "a.txt", "work\n")
    inner = os.path.join(repo.worktree_path("a/f1"), "nested")
    repo.git("worktree", "add", "--detach", inner, repo.target())
    with open(os.path.join(inner, "live.txt"), "w") as f:
        f.write("someone's unsaved work\n")
    assert tx(k, "a", "submit", "worker") == {"decision": "applied"}
    k.converge()                                    # saves the work (the nested tree a gitlink)
    assert tx(k, "a", "validate", "validator", candidate=k.record("a").candidate,
              verdict="pass")["decision"] == "applied"
    report = k.converge()
    assert report.sent[-1].request["kind"] == "commit-cleanup"
    assert report.sent[-1].response == {"decision": "rejected", "code": "worktree-unsaved"}
    assert k.record("a").phase == "cleanup-prepared"
    with pytest.raises(GitError, match="holds what no ref keeps .*nested"):
        repo.remove_worktree("a/f1")
    assert open(os.path.join(inner, "live.txt")).read() == "someone's unsaved work\n"
    assert os.path.exists(os.path.join(repo.worktree_path("a/f1"), "a.txt"))
    assert k.audit().ok and k.rebuild().ok
    k.close()
