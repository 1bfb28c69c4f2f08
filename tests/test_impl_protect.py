"""Protected control-plane paths: the glob grammar (the model's and the implementation's
copies agree), the real diff on git (hostile names, renames out of a protected directory),
and the kernel holding a candidate that touches one in needs-repair on real git."""
from __future__ import annotations

import json
import os

import pytest

from wgk.impl import Environment, GraphError, Kernel, ManualClock, Pragmas, TaskPolicy
from wgk.impl.contract import protect
from wgk.impl.world.git import GitRepository, init_repository
from wgk.impl.world.proc import ProcProcessTable
from wgk.model import protected as model_protect

from test_impl_git import dispatch_to_a_real_process, tx   # the real-git tests' helpers

FAST = Pragmas(synchronous="OFF")
POLICY = [".ci/**", "policy/*.toml", "deploy/?/key"]

CASES = [
    (".ci/**", ".ci/deploy.yml", True),
    (".ci/**", ".ci/a/b/c.yml", True),
    (".ci/**", ".ci", True),                      # ** matches zero segments
    (".ci/**", ".cix/deploy.yml", False),
    (".ci/**", "src/.ci/deploy.yml", False),      # anchored at the root
    ("policy/*.toml", "policy/rules.toml", True),
    ("policy/*.toml", "policy/.toml", True),
    ("policy/*.toml", "policy/a/rules.toml", False),  # * never crosses a /
    ("policy/*.toml", "Policy/rules.toml", False),    # case-sensitive
    ("deploy/?/key", "deploy/x/key", True),
    ("deploy/?/key", "deploy/xy/key", False),
    ("**/secrets.env", "secrets.env", True),
    ("**/secrets.env", "a/b/secrets.env", True),
    ("a/**/b", "a/b", True),
    ("a/**/b", "a/x/y/b", True),
    ("a/**/b", "a/x/y/c", False),
    ("*", "-rf", True),                           # names starting with a dash are names
    ("ci/*", "ci/new\nline", True),               # a newline in a name
    ("ci/a.b", "ci/aXb", False),                  # a dot is itself
    ("ci/[ab]", "ci/[ab]", True),                 # brackets are themselves
    ("ci/[ab]", "ci/a", False),
]


@pytest.mark.parametrize("pattern,path,expected", CASES)
def test_the_grammar_matches_alike_in_the_model_and_the_implementation(pattern, path, expected):
    assert model_protect.pattern_problem(pattern) is None and protect.problem(pattern) is None
    assert model_protect.matches(pattern, path) is expected
    assert protect.matches(pattern, path) is expected


BAD = ["", "/abs", "trailing/", "a//b", "./a", "a/../b", "a**/b", "a/**b", "x\0y", "a" * 257]


@pytest.mark.parametrize("pattern", BAD)
def test_a_pattern_outside_the_grammar_is_refused_alike_and_nothing_is_written(tmp_path, pattern):
    assert model_protect.pattern_problem(pattern) is not None
    assert protect.problem(pattern) is not None
    from wgk.impl.world.env import MemoryWorld
    k = Kernel(str(tmp_path / "k.db"), MemoryWorld.create(target="main-0").environment(),
               pragmas=FAST)
    with pytest.raises(GraphError, match="protected path 1"):
        k.create_graph("g", [TaskPolicy("a")], protected_paths=[".ci/**", pattern])
    assert k.graph_id is None and k.names() == []


@pytest.fixture
def repo(tmp_path):
    init_repository(str(tmp_path / "repo"), files={"a.txt": "one\n", ".ci/old.yml": "ci\n"})
    r = GitRepository(str(tmp_path / "repo"), worktrees=str(tmp_path / "wt"))
    yield r
    r.remove_all_worktrees()


def _write(path: str, name: str | bytes, text: str = "x\n") -> None:
    full = os.path.join(os.fsencode(path), os.fsencode(name))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as f:
        f.write(text)


def test_the_real_diff_lists_hostile_names_exactly(repo):
    base = repo.target()
    repo.create_worktree("a/f1", base)
    path = repo.worktree_path("a/f1")
    hostile = ["-rf", "new\nline.txt", "tab\there", 'quote"d', "sp ace/x.txt", "ünï.txt",
               os.fsdecode(b"raw\xff.bin"), "policy/x.toml"]
    for name in hostile:
        _write(path, name)
    cand = repo.observe_worktree("a/f1").content
    assert sorted(repo.changed_paths(base, cand)) == sorted(hostile)
    assert repo.changed_paths(base, base) == []
    assert protect.protected_change(POLICY, repo.changed_paths(base, cand)) == \
        ("policy/x.toml", "policy/*.toml")


def test_a_file_moved_out_of_a_protected_directory_is_a_change_to_it(repo):
    """Rename detection would list only the new path; the diff names both."""
    base = repo.target()
    repo.create_worktree("a/f1", base)
    path = repo.worktree_path("a/f1")
    os.makedirs(os.path.join(path, "docs"))
    os.rename(os.path.join(path, ".ci/old.yml"), os.path.join(path, "docs/old.yml"))
    cand = repo.observe_worktree("a/f1").content
    changed = repo.changed_paths(base, cand)
    assert sorted(changed) == [".ci/old.yml", "docs/old.yml"]
    renamed = repo.out("diff", "-M", "--name-only", base, cand).splitlines()
    assert renamed == ["docs/old.yml"]          # what a diff with renames would have said
    assert protect.protected_change(POLICY, changed) == (".ci/old.yml", ".ci/**")


def test_an_edit_holds_exactly_its_own_files(repo):
    """The edit step on real git: files an earlier edit wrote and this one does not are gone."""
    base = repo.target()
    repo.create_worktree("a/f1", base)
    repo.write("a/f1", "v1", ("src/app.py", ".ci/deploy.yml"))
    first = repo.observe_worktree("a/f1").content
    assert sorted(repo.changed_paths(base, first)) == [".ci/deploy.yml", "src/app.py", "work.txt"]
    repo.write("a/f1", "v2", ("src/app.py",))
    second = repo.observe_worktree("a/f1").content
    assert sorted(repo.changed_paths(base, second)) == ["src/app.py", "work.txt"]
    with pytest.raises(Exception, match="not a relative path"):
        repo.write("a/f1", "v3", (".git/hooks/pre-commit",))


def test_the_kernel_holds_a_candidate_touching_a_protected_path_on_real_git(tmp_path, repo):
    k = Kernel(str(tmp_path / "k.db"), Environment(ProcProcessTable(), repo, ManualClock()),
               pragmas=FAST)
    k.create_graph("g", [TaskPolicy("a")], protected_paths=POLICY)
    worker = dispatch_to_a_real_process(k, "a")
    try:
        path = repo.worktree_path("a/f1")
        _write(path, "src/app.py")
        _write(path, "deploy/x/key", "stolen\n")
        content = repo.observe_worktree("a/f1").content
        assert tx(k, "a", "submit", "worker") == {"decision": "applied"}
        k.converge()                                     # quiesce, save-work, seal
        t = k.record("a")
        assert (t.phase, t.exit, t.reason, t.candidate) == \
            ("work-saved", "needs-repair", "protected-path", content)
        assert k.status("a") == "needs-repair"
        # the validator's pass changes nothing
        assert tx(k, "a", "validate", "validator", candidate=content, verdict="pass") == \
            {"decision": "rejected", "code": "illegal-phase-edge"}
        assert k.record("a").reason == "protected-path"
        facts = [json.loads(body) for (body,) in k.conn.execute(
            "SELECT body FROM ledger WHERE event = 'request'")]
        held = [f for b in facts for f in b.get("facts", []) if f[0] == "protected-path"]
        assert held == [["protected-path", {"path": "deploy/x/key", "pattern": "deploy/?/key"}]]
        assert k.audit().ok and k.rebuild().ok
        assert k.protected_paths() == tuple(POLICY)
    finally:
        worker.kill()
        worker.wait()
