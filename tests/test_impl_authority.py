"""Closed stays closed: everything that grants authority or answers for the past is under the
hash chain, on SQLite and PostgreSQL.

Each test edits one table behind the kernel's back, through a connection of its own (as an
attacker with access to the database would), and shows that `verify-ledger` and the audit
report it in one line, and that a closed kernel whose principals were deleted or altered
refuses every request (never opens) until `rebuild --apply` makes the tables what the
ledger says again. A chain rewritten as a whole to match is caught against an anchor.
"""
from __future__ import annotations

import json
import sqlite3

import pytest

from wgk.conformance.cli.main import main
from wgk.impl import Client, Kernel, MemoryWorld, Pragmas, TaskPolicy
from wgk.impl.contract.errors import Tampered
from wgk.impl.world.git import init_repository
from wgk.impl.storage.ledger import link_v2
from wgk.impl.storage.schema import MIGRATIONS
from wgk.impl.storage.store import Store

from pg_support import pg_dsn, pg_server  # noqa: F401  (fixtures)

OWNER = {"pid": 4001, "birth": 911, "session": "s1"}
pytestmark = pytest.mark.raw_tokens          # the clients do the token bookkeeping
RESET = {"kind": "reset", "actor": "operator", "task": "a", "key": "r1", "expected-generation": 0}


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "k.db")
    return request.getfixturevalue("pg_dsn")


def kernel(db: str, world: MemoryWorld | None = None) -> Kernel:
    world = world or MemoryWorld.create(target="main-0")
    return Kernel(db, world.environment(), pragmas=Pragmas(synchronous="OFF"))


def tamper(db: str, sql: str, params=()) -> None:
    """One statement through a connection of the attacker's own."""
    if db.startswith("postgresql://"):
        import psycopg
        with psycopg.connect(db, autocommit=True) as c:
            c.execute(sql.replace("%", "%%").replace("?", "%s") if params else sql, params or None)
        return
    c = sqlite3.connect(db)
    c.execute(sql, params)
    c.commit()
    c.close()


def closed(db: str):
    """A closed kernel: a dispatched task with a WorkSave receipt, a message; its credentials."""
    world = MemoryWorld.create(target="main-0")
    k = kernel(db, world)
    k.create_graph("g", [TaskPolicy("a"), TaskPolicy("b", deps=("a",))])
    creds = {n: k.principals.add(n, roles) for n, roles in (
        ("operator-1", ["operator", "daemon"]), ("worker-1", ["worker", "wrapper"]))}
    daemon, worker = Client(k, creds["operator-1"]), Client(k, creds["worker-1"])
    assert daemon.send("dispatch", "a", "daemon", owner=OWNER)["decision"] == "applied"
    worker.hold("a", daemon.token("a"))
    world.repository.write(k.record("a").worktree_id, "c1")
    assert worker.send("submit", "a", "worker")["decision"] == "applied"
    daemon.converge()
    assert k.record("a").receipt("work-save").exists
    assert daemon.send("message", "b", "operator", evidence="hi")["decision"] == "evidence-only"
    assert k.verify_ledger().ok and k.audit().ok
    return k, world, creds


def findings(k: Kernel) -> list[str]:
    """What verify-ledger and the audit say, each (they must agree there is a problem)."""
    v = k.verify_ledger()
    a = [f for f in k.audit().findings if f.check == "authority-under-chain"]
    assert not v.ok and v.broken_at is None and v.differences
    assert [f.detail for f in a] == list(v.differences)
    return list(v.differences)


# --- principals: deleting or altering them never opens the kernel ------------------------------


def test_deleted_principals_fail_closed_and_are_repaired_from_the_ledger(db):
    k, world, creds = closed(db)
    k.close()
    tamper(db, "DELETE FROM principals")
    k = kernel(db, world)
    assert any("'operator-1'" in d and "missing" in d for d in findings(k))
    for credential in (None, creds["operator-1"], "mallory.x"):
        with pytest.raises(Tampered, match="missing from the principals table"):
            k.handle(RESET, credential)
    assert k.record("a").generation == 0                     # nothing applied
    report = k.rebuild(apply=True)
    assert report.applied and any(d.startswith("table principals") for d in report.differences)
    assert k.verify_ledger().ok and k.audit().ok
    assert k.handle(RESET, None) == {"decision": "rejected", "code": "not-authenticated"}
    message = {"kind": "message", "actor": "operator", "task": "b", "key": "m2", "evidence": "x"}
    assert k.handle(message, creds["operator-1"])["decision"] == "evidence-only"
    k.close()


@pytest.mark.parametrize("edit, said", [
    ("UPDATE principals SET roles = 'operator,worker,wrapper' WHERE name = 'worker-1'", "roles"),
    ("UPDATE principals SET secret_sha256 = 'ab' WHERE name = 'worker-1'", "secret hash"),
    ("UPDATE principals SET revoked = 1 WHERE name = 'worker-1'", "revoked"),
    ("INSERT INTO principals VALUES ('mallory', 'ab', 'operator', 0, 0)", "added by no ledger"),
])
def test_an_altered_principal_is_found_and_refuses_every_request(db, edit, said):
    k, world, creds = closed(db)
    k.close()
    tamper(db, edit)
    k = kernel(db, world)
    assert any(said in d for d in findings(k))
    with pytest.raises(Tampered, match=said):
        k.handle(RESET, creds["operator-1"])       # an untouched principal is refused too
    k.close()


def test_a_revocation_undone_is_found(db):
    k, world, creds = closed(db)
    k.principals.revoke("worker-1")
    assert k.verify_ledger().ok
    k.close()
    tamper(db, "UPDATE principals SET revoked = 0 WHERE name = 'worker-1'")
    k = kernel(db, world)
    assert any("'worker-1': revoked differ" in d for d in findings(k))
    with pytest.raises(Tampered):
        k.handle({"kind": "message", "actor": "worker", "task": "b", "key": "m2",
                  "evidence": "x"}, creds["worker-1"])
    k.close()


def test_a_principal_slipped_into_an_open_kernel_is_found(db):
    k = kernel(db)
    k.create_graph("g", [TaskPolicy("a")])
    k.close()
    tamper(db, "INSERT INTO principals VALUES ('mallory', 'ab', 'operator', 0, 0)")
    k = kernel(db)
    with pytest.raises(Tampered, match="added by no ledger event"):
        k.handle(RESET)
    k.close()


def test_a_running_kernel_checks_again_after_another_connection_commits(tmp_path):
    """SQLite: the kernel's check is kept until another connection commits (data_version)."""
    db = str(tmp_path / "k.db")
    k, _, creds = closed(db)
    tamper(db, "UPDATE principals SET roles = 'operator,daemon,worker' WHERE name = 'worker-1'")
    with pytest.raises(Tampered, match="roles"):
        k.handle(RESET, creds["operator-1"])
    k.close()


# --- the journal, token hashes and receipts -----------------------------------------------------


@pytest.mark.parametrize("edit, said", [
    ("UPDATE journal SET response = '{\"decision\":\"applied\"}' WHERE key LIKE '%message%'",
     "journal"),
    ("UPDATE journal SET digest = 'ab' WHERE key LIKE '%message%'", "journal"),
    ("DELETE FROM journal WHERE key LIKE '%message%'", "journal"),
    ("UPDATE attempts SET token_hash = 'ab'", "token hash a/1"),
    ("UPDATE receipts SET candidate = 'c2' WHERE kind = 'work-save'", "receipt a/work-save"),
    ("DELETE FROM receipts", "receipt a/work-save"),
])
def test_an_edit_of_what_answers_for_the_past_is_found_by_verify_and_audit(db, edit, said):
    k, world, _ = closed(db)
    k.close()
    tamper(db, edit)
    k = kernel(db, world)
    assert any(d.startswith(said) for d in findings(k))
    assert k.rebuild(apply=True).applied and k.verify_ledger().ok
    k.close()


def test_the_cli_refuses_a_tampered_kernel_and_runs_its_repairs(tmp_path, capsys, monkeypatch):
    init_repository(str(tmp_path / "repo"))
    db = str(tmp_path / "k.db")
    assert main(["kernel", "--db", db, "init", "--graph", "g", "--repo", str(tmp_path / "repo")]) == 0
    monkeypatch.setenv("WGK_CREDENTIAL_FILE", db + ".credential")
    assert main(["kernel", "--db", db, "task", "add", "a"]) == 0
    tamper(db, "DELETE FROM principals")
    monkeypatch.delenv("WGK_CREDENTIAL_FILE")
    capsys.readouterr()
    assert main(["kernel", "--db", db, "reset", "a"]) == 2
    err = capsys.readouterr().err
    assert "refuses every request" in err and "Traceback" not in err and err.count("\n") == 1
    assert main(["kernel", "--db", db, "verify-ledger"]) == 1
    out = capsys.readouterr().out
    assert "principal 'operator' (event 2) is missing" in out and out.count("\n") == 1
    assert main(["kernel", "--db", db, "audit", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["findings"][0]["check"] == "authority-under-chain"
    assert main(["kernel", "--db", db, "rebuild", "--apply"]) == 1
    assert main(["kernel", "--db", db, "verify-ledger"]) == 0
    capsys.readouterr()
    assert main(["kernel", "--db", db, "reset", "a"]) == 2          # closed again: no credential
    assert "not-authenticated" in capsys.readouterr().err


# --- a chain rewritten as a whole, and older databases -------------------------------------------


def test_a_principal_rewritten_with_the_whole_chain_is_caught_against_an_anchor(db):
    k, world, _ = closed(db)
    anchor = (k.verify_ledger().events, k.verify_ledger().head)
    k.close()
    rows = []
    if db.startswith("postgresql://"):
        import psycopg
        with psycopg.connect(db) as c:
            rows = c.execute("SELECT seq, prev, event, task, key, body FROM ledger "
                             "ORDER BY seq").fetchall()
    else:
        c = sqlite3.connect(db)
        rows = c.execute("SELECT seq, prev, event, task, key, body FROM ledger ORDER BY seq").fetchall()
        c.close()
    prev = "0" * 64
    for seq, _, event, task, key, body in rows:    # worker-1 becomes an operator, re-hashed
        if event == "principal-added" and key == "worker-1":
            body = body.replace('"roles":["worker","wrapper"]', '"roles":["operator","worker"]')
        digest = link_v2(prev, seq, event, task, key, body)
        tamper(db, "UPDATE ledger SET prev = ?, hash = ?, body = ? WHERE seq = ?",
               (prev, digest, body, seq))
        prev = digest
    if db.startswith("postgresql://"):
        tamper(db, "UPDATE ledger_seal SET hash = ?", (prev,))
    tamper(db, "UPDATE principals SET roles = 'operator,worker' WHERE name = 'worker-1'")
    k = kernel(db, world)
    assert k.verify_ledger().ok                        # consistent on its own
    v = k.verify_ledger(anchors=[anchor])
    assert not v.ok and "differs from its anchor" in v.problem
    k.close()


def test_principals_made_before_they_were_history_are_written_to_the_ledger(tmp_path):
    db = str(tmp_path / "k.db")
    s = Store(db, migrate_to=9)
    s.conn.execute("CREATE TABLE principals (name TEXT PRIMARY KEY, secret_sha256 TEXT NOT NULL, "
                   "roles TEXT NOT NULL, revoked INTEGER NOT NULL DEFAULT 0)")
    s.conn.execute("INSERT INTO principals VALUES ('op', 'aa', 'daemon,operator', 0), "
                   "('w', 'bb', 'worker', 1)")
    s.close()
    k = kernel(db)
    assert max(MIGRATIONS) >= 10
    events = [(e, key) for e, key in k.conn.execute(
        "SELECT event, key FROM ledger ORDER BY seq")]
    assert events == [("principal-added", "op"), ("principal-added", "w"),
                      ("principal-revoked", "w")]
    assert k.verify_ledger().ok and k.principals.closed()
    assert [(p.name, p.revoked) for p in k.principals.list()] == [("op", False), ("w", True)]
    k.close()
