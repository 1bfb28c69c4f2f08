"""Secrets in the implementation: a bad credential is an answer, never a crash; token and
credential files are created by the kernel (0600, exclusively, never through a symlink) and
read only when private; worktrees stay under their root; the database is private whatever
the umask."""
from __future__ import annotations

import hashlib
import os
import sqlite3
import stat

import pytest

from wgk.conformance.cli.main import main
from wgk.impl import Kernel, MemoryWorld, Pragmas, TaskPolicy
from wgk.impl.world.git import GitRepository, init_repository

from pg_support import pg_dsn, pg_server  # noqa: F401  (fixtures)

OWNER = {"pid": 4001, "birth": 911, "session": "s1"}
#: Credentials that name no principal, of every shape a caller may send.
BAD_CREDENTIALS = [
    "\ud800", "operator.\ud800", "\udcff.x", "operator\ud800.secret", b"operator.x",
    bytearray(b"operator.x"), 7, 3.5, ["operator.x"], {"operator": "x"}, True, "",
    "operator", "operator\x00.x", "operator.\x00", "\x00", "." * 5, "operator.a.b.c",
    "a.b.c.d", ".x", "operator.", "x" * 5000 + "." + "y" * 5000, "operator." + "z" * 10 ** 6,
]


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "k.db")
    return request.getfixturevalue("pg_dsn")


def closed(db: str) -> tuple[Kernel, str]:
    k = Kernel(db, MemoryWorld.create(target="main-0").environment(),
               pragmas=Pragmas(synchronous="OFF"))
    k.create_graph("g", [TaskPolicy("a")])
    return k, k.principals.add("operator", ["operator", "daemon"])


def journal_and_ledger(k: Kernel) -> tuple:
    return (k.ledger_head(), sorted(k.project(tasks=False)["journal"]))


def test_any_bad_credential_is_not_authenticated_and_journals_nothing(db):
    k, good = closed(db)
    try:
        reset = {"kind": "reset", "actor": "operator", "task": "a", "key": "r1",
                 "expected-generation": 0}
        before = journal_and_ledger(k)
        denied = {"decision": "rejected", "code": "not-authenticated"}
        for credential in BAD_CREDENTIALS + [good + "\ud800", good.replace(".", ".\ud800", 1)]:
            assert k.handle(reset, credential) == denied, repr(credential)[:40]
            assert k.handle({**reset, "key": "\ud800"}, credential) == denied
            assert k.handle_batch([reset, {**reset, "key": "r2"}], credential) == [denied] * 2
            assert journal_and_ledger(k) == before, repr(credential)[:40]
        assert k.handle(reset, good)["decision"] == "applied"      # the kernel still answers
    finally:
        k.close()


def test_a_bad_credential_to_an_open_kernel_is_ignored_like_any_other(db):
    """An open kernel (no principal yet) reads no credential: a bad one changes nothing."""
    k = Kernel(db, MemoryWorld.create(target="main-0").environment(),
               pragmas=Pragmas(synchronous="OFF"))
    try:
        k.create_graph("g", [TaskPolicy("a")])
        for n, credential in enumerate(BAD_CREDENTIALS):
            r = k.handle({"kind": "message", "actor": "operator", "task": "a", "key": f"m{n}",
                          "evidence": f"e{n}"}, credential)
            assert r["decision"] == "evidence-only", (repr(credential)[:40], r)
    finally:
        k.close()


# --- credential files -----------------------------------------------------------------------


@pytest.fixture
def kernel_db(tmp_path, monkeypatch):
    init_repository(str(tmp_path / "repo"))
    db = str(tmp_path / "k.db")
    assert main(["kernel", "--db", db, "init", "--graph", "g", "--repo", str(tmp_path / "repo")]) == 0
    monkeypatch.delenv("WGK_CREDENTIAL_FILE", raising=False)
    assert main(["kernel", "--db", db, "--credential", db + ".credential", "task", "add", "a"]) == 0
    yield db, tmp_path
    GitRepository(str(tmp_path / "repo")).remove_all_worktrees()


def run(capsys, *argv) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["kernel", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def fingerprint(db: str) -> str:
    c = sqlite3.connect(db)
    rows = [r for t in ("tasks", "journal", "ledger", "principals", "attempts") for r in
            c.execute(f"SELECT * FROM {t}").fetchall()]
    c.close()
    return hashlib.sha256(repr(rows).encode()).hexdigest()


#: Every ``wgk kernel`` command that reads the credential file (its arguments after --db).
COMMANDS = [("status",), ("show", "a"), ("converge",), ("audit",), ("verify-ledger",),
            ("rebuild",), ("task", "add", "b"), ("dispatch", "a", "--pid", "1"),
            ("reset", "a"), ("send", "{}"), ("principal", "list"),
            ("principal", "add", "w", "--role", "worker", "--out", "never.credential"),
            ("principal", "revoke", "operator"), ("import-legacy", "graph.jsonl"),
            ("anchor", "never.anchors")]


def bad_files(tmp):
    """Credential files the kernel must refuse, and what the refusal says."""
    def private(name, data):
        p = tmp / name
        p.write_bytes(data)
        p.chmod(0o600)
        return p
    (tmp / "a-directory").mkdir(exist_ok=True)
    loose = private("loose.credential", b"operator.x\n")
    loose.chmod(0o644)
    return [(private("latin1.credential", b"operator.\xe9t\xe9\n"), "not UTF-8 (byte 10)"),
            (private("surrogate.credential", b"operator.\xed\xa0\x80\n"), "not UTF-8"),
            (private("empty.credential", b""), "is empty"),
            (private("blank.credential", b"  \n\n"), "is empty"),
            (private("nodot.credential", b"operator\n"), "not a credential"),
            (private("twolines.credential", b"operator.x\noperator.y\n"), "more than one line"),
            (private("huge.credential", b"operator." + b"x" * 70000), "larger than"),
            (tmp / "a-directory", "not a regular file"),
            (tmp / "missing.credential", "No such file or directory"),
            (loose, "accessible by group or others (mode 0644")]


def test_a_bad_credential_file_is_one_line_naming_it_for_every_command(kernel_db, capsys):
    db, tmp = kernel_db
    before = fingerprint(db)
    os.chdir(tmp)
    for path, message in bad_files(tmp):
        for command in COMMANDS:
            code, out, err = run(capsys, "--db", db, "--credential", str(path), *command)
            assert (code, out) == (2, ""), (path.name, command, code, err)
            assert err.count("\n") == 1 and str(path) in err and message in err, (command, err)
            assert "Traceback" not in err
    assert not (tmp / "never.credential").exists() and not (tmp / "never.anchors").exists()
    assert fingerprint(db) == before


def test_a_credential_file_open_to_others_is_used_only_when_told_to(kernel_db, capsys):
    db, tmp = kernel_db
    cred = tmp / "k.db.credential"
    assert stat.S_IMODE(cred.stat().st_mode) == 0o600
    assert run(capsys, "--db", db, "--credential", str(cred), "status")[0] == 0
    for mode in (0o640, 0o604, 0o620, 0o601):
        cred.chmod(mode)
        code, _, err = run(capsys, "--db", db, "--credential", str(cred), "status")
        assert code == 2 and f"mode {mode:04o}" in err and "--insecure-credential-file" in err
        code, _, err = run(capsys, "--db", db, "--credential", str(cred),
                           "--insecure-credential-file", "status")
        assert code == 0, err


# --- secrets created, never adopted ---------------------------------------------------------


@pytest.fixture
def live(tmp_path):
    import subprocess
    import sys
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield p
    p.kill()
    p.wait()


def token_hashes(db: str) -> list[str]:
    c = sqlite3.connect(db)
    out = [h for (h,) in c.execute("SELECT token_hash FROM attempts ORDER BY fence")]
    c.close()
    return out


def test_a_token_file_is_created_0600_whatever_the_umask_and_holds_the_attempts_token(
        kernel_db, capsys, live):
    db, tmp = kernel_db
    token = tmp / "a.token"
    old = os.umask(0)
    try:
        code, _, err = run(capsys, "--db", db, "--credential", db + ".credential", "dispatch",
                           "a", "--pid", str(live.pid), "--token-file", str(token))
    finally:
        os.umask(old)
    assert code == 0, err
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    secret = token.read_text().strip()
    assert token_hashes(db) == [hashlib.sha256(secret.encode()).hexdigest()]


def test_an_existing_token_file_or_symlink_is_refused_before_anything_is_sent(
        kernel_db, capsys, live):
    db, tmp = kernel_db
    planted = tmp / "planted.token"
    planted.write_text("the planter's token\n")
    planted.chmod(0o600)
    elsewhere = tmp / "elsewhere"
    (tmp / "dangling.token").symlink_to(elsewhere)
    (tmp / "linked.token").symlink_to(planted)
    before = fingerprint(db)
    for path, why in ((planted, "exists already (refused"),
                      (tmp / "dangling.token", "exists already (a symlink)"),
                      (tmp / "linked.token", "exists already (a symlink)")):
        for command in (("dispatch", "a"), ("retry", "a")):
            code, out, err = run(capsys, "--db", db, "--credential", db + ".credential",
                                 *command, "--pid", str(live.pid), "--token-file", str(path))
            assert (code, out) == (2, "") and str(path) in err and why in err, err
            assert err.count("\n") == 1
    assert planted.read_text() == "the planter's token\n" and not elsewhere.exists()
    assert fingerprint(db) == before


def test_a_token_file_whose_request_is_not_applied_is_removed(kernel_db, capsys, live):
    db, tmp = kernel_db
    cred = ("--db", db, "--credential", db + ".credential")
    assert run(capsys, *cred, "dispatch", "a", "--pid", str(live.pid), "--key", "d1",
               "--token-file", str(tmp / "1.token"))[0] == 0
    # the same key again (a fresh token: another request under a used key) is refused
    code, out, _ = run(capsys, *cred, "dispatch", "a", "--pid", str(live.pid), "--key", "d1",
                       "--token-file", str(tmp / "2.token"))
    assert code == 1 and "rejected" in out and not (tmp / "2.token").exists()
    code, _, _ = run(capsys, *cred, "dispatch", "a", "--pid", str(2 ** 22 + 3),
                     "--token-file", str(tmp / "3.token"))
    assert code == 2 and not (tmp / "3.token").exists()
    assert (tmp / "1.token").exists() and len(token_hashes(db)) == 1


def test_a_credential_file_is_created_before_its_principal_and_never_adopted(kernel_db, capsys):
    db, tmp = kernel_db
    cred = ("--db", db, "--credential", db + ".credential")
    planted = tmp / "w.credential"
    planted.write_text("mine\n")
    before = fingerprint(db)
    code, out, err = run(capsys, *cred, "principal", "add", "w", "--role", "worker",
                         "--out", str(planted))
    assert code == 2 and "exists already" in err and planted.read_text() == "mine\n"
    assert fingerprint(db) == before, "no principal whose credential nobody holds"
    (tmp / "link.credential").symlink_to(tmp / "nowhere")
    code, _, err = run(capsys, *cred, "principal", "add", "w", "--role", "worker",
                       "--out", str(tmp / "link.credential"))
    assert code == 2 and "(a symlink)" in err and not (tmp / "nowhere").exists()
    old = os.umask(0o022)
    try:
        assert run(capsys, *cred, "principal", "add", "w", "--role", "worker",
                   "--out", str(tmp / "new.credential"))[0] == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp / "new.credential").stat().st_mode) == 0o600
    # a principal that cannot be added leaves no credential file behind
    code, _, err = run(capsys, *cred, "principal", "add", "w", "--role", "worker",
                       "--out", str(tmp / "again.credential"))
    assert code == 2 and "exists already" in err and not (tmp / "again.credential").exists()


def test_init_refuses_a_planted_credential_file_before_it_makes_the_database(tmp_path, capsys):
    init_repository(str(tmp_path / "repo"))
    db = str(tmp_path / "k.db")
    (tmp_path / "k.db.credential").write_text("planted\n")
    code, _, err = run(capsys, "--db", db, "init", "--graph", "g", "--repo",
                       str(tmp_path / "repo"))
    assert code == 2 and "k.db.credential: the credential file exists already" in err
    assert not os.path.exists(db)
    os.unlink(tmp_path / "k.db.credential")
    old = os.umask(0)
    try:
        assert run(capsys, "--db", db, "init", "--graph", "g", "--repo",
                   str(tmp_path / "repo"))[0] == 0
    finally:
        os.umask(old)
    for path in (db, db + ".credential"):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path


# --- the database is private ----------------------------------------------------------------


@pytest.mark.parametrize("umask", [0o022, 0o002, 0])
def test_the_database_and_its_log_files_are_created_0600_whatever_the_umask(tmp_path, umask):
    path = str(tmp_path / "k.db")
    old = os.umask(umask)
    try:
        k = Kernel(path, MemoryWorld.create(target="main-0").environment())
        k.create_graph("g", [TaskPolicy("a")])
        assert k.handle({"kind": "message", "actor": "operator", "task": "a", "key": "m",
                         "evidence": "e"})["decision"] == "evidence-only"
        modes = {p: stat.S_IMODE(os.stat(path + p).st_mode) for p in ("", "-wal", "-shm")}
        k.close()
    finally:
        os.umask(old)
    assert modes == {"": 0o600, "-wal": 0o600, "-shm": 0o600}


# --- worktrees stay under their root --------------------------------------------------------


@pytest.fixture
def repo(tmp_path):
    init_repository(str(tmp_path / "repo"))
    g = GitRepository(str(tmp_path / "repo"), worktrees=str(tmp_path / "wts"))
    yield g
    g.remove_all_worktrees()


def registered(g: GitRepository) -> list[str]:
    return [line for line in g.out("worktree", "list", "--porcelain").splitlines()
            if line.startswith("worktree ")]


@pytest.mark.parametrize("where", ["task", "leaf"])
def test_a_symlink_planted_in_the_worktrees_root_is_refused_and_nothing_is_made_outside(
        repo, tmp_path, where):
    from wgk.impl.world.git import GitError
    outside = tmp_path / "outside"
    outside.mkdir()
    os.makedirs(repo.worktrees, exist_ok=True)
    if where == "task":
        os.symlink(outside, os.path.join(repo.worktrees, "a"))
    else:
        os.mkdir(os.path.join(repo.worktrees, "a"))
        os.symlink(outside, os.path.join(repo.worktrees, "a", "f1"))
    before = registered(repo)
    with pytest.raises(GitError, match="is a symlink"):
        repo.create_worktree("a/f1", repo.target())
    assert os.listdir(outside) == [] and registered(repo) == before
    with pytest.raises(GitError, match="is a symlink"):
        repo.observe_worktree("a/f1")


def test_a_worktree_replaced_by_a_symlink_is_neither_read_nor_removed_through_it(repo, tmp_path):
    from wgk.impl.world.git import GitError
    repo.create_worktree("a/f1", repo.target())
    assert repo.observe_worktree("a/f1").present
    elsewhere = tmp_path / "elsewhere"
    repo.create_worktree("b/f1", repo.target())                 # a real worktree to aim at
    os.rename(repo.worktree_path("b/f1"), elsewhere)
    repo.git("worktree", "repair", str(elsewhere))
    os.rename(os.path.join(repo.worktrees, "a"), tmp_path / "a-moved")
    os.symlink(tmp_path / "b-link", os.path.join(repo.worktrees, "a"))
    os.mkdir(tmp_path / "b-link")
    os.symlink(elsewhere, tmp_path / "b-link" / "f1")
    for call in (repo.observe_worktree, repo.remove_worktree, repo.ignored_files):
        with pytest.raises(GitError, match="is a symlink"):
            call("a/f1")
    assert os.path.isdir(elsewhere / ".git") or os.path.isfile(elsewhere / ".git")


def test_dispatch_onto_a_planted_symlink_fails_with_its_reason_and_records_nothing(
        kernel_db, capsys, live, tmp_path):
    db, tmp = kernel_db
    worktrees = str(tmp / "repo-worktrees")
    outside = tmp / "outside"
    outside.mkdir()
    os.makedirs(worktrees, exist_ok=True)
    os.symlink(outside, os.path.join(worktrees, "a"))
    before = fingerprint(db)
    code, out, err = run(capsys, "--db", db, "--credential", db + ".credential", "dispatch", "a",
                         "--pid", str(live.pid), "--token-file", str(tmp / "a.token"))
    assert code == 1 and "is a symlink" in err and err.count("\n") == 1, err
    assert os.listdir(outside) == [] and not (tmp / "a.token").exists()
    assert fingerprint(db) == before


# --- the planted bugs these tests kill ------------------------------------------------------


def test_each_secret_mutant_is_killed_by_its_own_tests_which_pass_unmutated():
    from wgk.conformance.oracle.impl_mutants import IDENTITY
    from wgk.conformance.oracle.impl_mutants_catalogue import IMPL_MUTANTS
    from wgk.conformance.reports.impl_mutants import run_mutant
    from dataclasses import replace
    mine = [m for m in IMPL_MUTANTS if any(t.startswith("tests/test_impl_secrets.py") for t in m.tests)]
    assert {m.name for m in mine} >= {"database-umask-mode", "secret-file-world-readable"}
    every_test = tuple(t for m in mine for t in m.tests)
    base = run_mutant(replace(IDENTITY, tests=every_test), "quick", [], timeout=600)
    assert base.verdict == "survived", base.to_json()
    for m in mine:
        r = run_mutant(m, "quick", [], timeout=600)
        assert r.verdict == "killed" and r.section == "tests", r.to_json()
        assert r.check.startswith("tests/test_impl_secrets.py::") or "test_impl_secrets" in r.check
