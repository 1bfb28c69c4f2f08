"""A ledger that notices, on SQLite and PostgreSQL: every column under the hash chain, old
ledgers still verifiable after the migration, and anchors kept outside the database against
which a removed tail, a lost write-ahead log or an edited and re-hashed chain shows."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from wgk.conformance.cli.main import main
from wgk.impl import Kernel, MemoryWorld, Pragmas, TaskPolicy
from wgk.impl.world.git import GitRepository, init_repository
from wgk.impl.storage.ledger import link, link_v2

from pg_support import pg_dsn, pg_server  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parent
OWNER = {"pid": 4001, "birth": 911, "session": "s1"}
COLUMNS = ("seq", "prev", "hash", "event", "task", "key", "body", "chain")


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    if request.param == "sqlite":
        return str(tmp_path / "k.db")
    return request.getfixturevalue("pg_dsn")


def kernel(db: str, world: MemoryWorld | None = None) -> Kernel:
    world = world or MemoryWorld.create(target="main-0")
    return Kernel(db, world.environment(), pragmas=Pragmas(synchronous="OFF"))


def filled(db: str) -> Kernel:
    """Graph g with a and b, a dispatched, evidence, a message, a rejection: 7 events."""
    k = kernel(db)
    k.create_graph("g", [TaskPolicy("a"), TaskPolicy("b", deps=("a",))])
    assert k.handle({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d-a",
                     "expected-attempt": 0, "owner": OWNER})["decision"] == "applied"
    t = k.record("a")
    cap = {"graph": "g", "task": "a", "generation": t.generation, "attempt": t.attempt,
           "fence": t.fence, "lease-epoch": t.lease_epoch}
    k.handle({"kind": "heartbeat", "actor": "worker", "task": "a", "key": "hb", "cap": cap,
              "evidence": "hb-1"})
    k.handle({"kind": "message", "actor": "operator", "task": "b", "key": "m", "evidence": "hi"})
    k.handle({"kind": "fail", "actor": "worker", "task": "a", "key": "stale",
              "cap": dict(cap, fence=9)})
    assert k.verify_ledger().ok and k.verify_ledger().events == 7
    return k


def rows(k: Kernel) -> list[tuple]:
    return [tuple(r) for r in k.conn.execute(
        "SELECT seq, prev, hash, event, task, key, body, chain FROM ledger ORDER BY seq")]


def set_head(k: Kernel) -> None:
    """PostgreSQL keeps the sealed head in its own row: a consistent tamperer moves it too."""
    if k.store.row_locks:
        seq, digest = rows(k)[-1][:3:2] if rows(k) else (0, "0" * 64)
        k.conn.native("UPDATE ledger_seal SET seq = %s, hash = %s", (seq, digest))


def rehash_from(k: Kernel, seq: int) -> None:
    """What a tamperer who knows the formula does: recompute every hash from ``seq`` on."""
    prev = next((r[2] for r in rows(k) if r[0] == seq - 1), "0" * 64)
    for s, _, _, event, task, key, body, chain in [r for r in rows(k) if r[0] >= seq]:
        digest = link(prev, event, body) if chain == 1 else link_v2(prev, s, event, task, key,
                                                                       body)
        k.conn.execute("UPDATE ledger SET prev = ?, hash = ? WHERE seq = ?", (prev, digest, s))
        prev = digest
    set_head(k)
    k._forget()


FLIPS = {
    "seq": "UPDATE ledger SET seq = 100 WHERE seq = 5",
    "prev": "UPDATE ledger SET prev = hash WHERE seq = 5",
    "hash": "UPDATE ledger SET hash = prev WHERE seq = 5",
    "event": "UPDATE ledger SET event = 'seed' WHERE seq = 5",
    "task": "UPDATE ledger SET task = 'b' WHERE seq = 5",
    "key": "UPDATE ledger SET key = 'other' WHERE seq = 5",
    "body": "UPDATE ledger SET body = replace(body, 'hb-1', 'hb-2') WHERE seq = 5",
    "chain": "UPDATE ledger SET chain = 1 WHERE seq = 5",
}


@pytest.mark.parametrize("column", COLUMNS)
def test_flipping_any_column_of_a_row_is_detected(db, column):
    k = filled(db)
    assert rows(k)[4][4:6] == ("a", "hb")                 # seq 5: the heartbeat, task and key
    k.conn.execute(FLIPS[column])
    k._forget()
    v = k.verify_ledger()
    assert not v.ok and v.broken_at in (5, 6, 100), (column, v)
    finding = k.audit().findings[0]
    assert finding.check == "ledger-chain" and "\n" not in finding.detail
    assert not k.rebuild().ok
    k.close()


def test_the_chain_hashes_every_column_of_every_new_row(db):
    k = filled(db)
    for seq, prev, digest, event, task, key, body, chain in rows(k):
        assert chain == 2 and digest == link_v2(prev, seq, event, task, key, body)
    k.close()


# --- an old ledger, migrated ---------------------------------------------------------------------


def old_database(path: Path) -> str:
    """A database written by the kernel before schema 3 (its dump, kept as text)."""
    c = sqlite3.connect(path)
    c.executescript((ROOT / "data" / "kernel-schema-2.sql").read_text())
    c.close()
    return str(path)


def test_an_old_ledger_stays_verifiable_and_its_old_columns_are_sealed(tmp_path):
    path = old_database(tmp_path / "old.db")
    before = sqlite3.connect(path).execute("SELECT seq, hash FROM ledger").fetchall()
    k = kernel(path)
    after = rows(k)
    assert [(r[0], r[2]) for r in after[:7]] == before          # old hashes untouched
    assert [r[7] for r in after] == [1] * 7 + [2]
    assert after[7][3] == "ledger-sealed" and json.loads(after[7][6])["sealed-through"] == 7
    assert k.verify_ledger().ok and k.rebuild().ok and k.audit().ok
    old_anchor = before[-1]
    assert k.verify_ledger(anchors=[old_anchor]).ok            # an anchor taken before holds
    k.handle({"kind": "message", "actor": "operator", "task": "a", "key": "new", "evidence": "x"})
    assert rows(k)[-1][7] == 2 and k.verify_ledger().ok
    for column, index, value in (("task", 4, "b"), ("key", 5, "d-b")):   # not in version 1
        k.conn.execute(f"UPDATE ledger SET {column} = ? WHERE seq = 2", (value,))
        k._forget()
        v = k.verify_ledger()
        assert not v.ok and v.broken_at == 8 and "version-1 row" in v.problem
        k.conn.execute(f"UPDATE ledger SET {column} = ? WHERE seq = 2", (after[1][index],))
        k._forget()
        assert k.verify_ledger().ok
    k.close()


def test_an_old_ledger_on_postgresql_is_sealed_by_the_migration(pg_dsn):
    """Rows written by the version-1 append (prev, event and body hashed) before schema 3."""
    from wgk.impl.storage.pg import PgStore
    s = PgStore(pg_dsn, migrate_to=2)
    prev = "0" * 64
    with s.atomic():
        for seq, (event, task, key, body) in enumerate(
                [("graph-created", None, None, '{"config":{},"graph":"g"}'),
                 ("task-added", "a", None, '{"deps":[],"disposition":"land",'
                  '"requires-assignment":false,"review-required":false,"task":"a"}')], 1):
            digest = link(prev, event, body)
            s.conn.native("INSERT INTO ledger VALUES (%s, %s, %s, %s, %s, %s, %s)",
                          (seq, prev, digest, event, task, key, body))
            prev = digest
        s.conn.native("UPDATE ledger_head SET seq = 2, hash = %s", (prev,))
    s.close()
    k = kernel(pg_dsn)
    assert [r[7] for r in rows(k)] == [1, 1, 2] and rows(k)[2][3] == "ledger-sealed"
    assert k.verify_ledger().ok
    k.conn.execute("UPDATE ledger SET task = 'b' WHERE seq = 2")
    k._forget()
    assert not k.verify_ledger().ok
    k.close()


# --- anchors kept outside the database -------------------------------------------------------------


def test_a_consistently_removed_tail_is_detected_against_an_anchor(db):
    k = filled(db)
    anchor = (k.verify_ledger().events, k.verify_ledger().head)
    k.conn.execute("DELETE FROM ledger WHERE seq > 5")
    set_head(k)
    k._forget()
    assert k.ledger.verify().ok                                # alone, the chain is whole
    v = k.verify_ledger()              # but the journal still answers for the removed requests
    assert not v.ok and v.broken_at is None
    assert v.differences and all(d.startswith("journal ") for d in v.differences)
    v = k.verify_ledger(anchors=[anchor])
    assert not v.ok and v.broken_at == 7 and "ends at seq 5" in v.problem
    assert k.audit(anchors=[anchor]).findings[0].check == "ledger-chain"
    k.close()


def test_an_edited_and_rehashed_chain_is_detected_against_an_anchor(db):
    k = filled(db)
    anchor = (k.verify_ledger().events, k.verify_ledger().head)
    k.conn.execute("UPDATE ledger SET body = replace(body, 'hb-1', 'hb-x') WHERE seq = 5")
    rehash_from(k, 5)
    assert k.verify_ledger().ok                                # alone, the chain verifies
    v = k.verify_ledger(anchors=[anchor])
    assert not v.ok and v.broken_at == 7 and "differs from its anchor" in v.problem
    assert not k.audit(anchors=[anchor]).ok
    k.close()


CHILD = """
import json, os, signal, sys
from wgk.impl import Kernel, MemoryWorld
k = Kernel(sys.argv[1], MemoryWorld.create(target="main-0").environment())
for n in range(5):
    k.handle({"kind": "message", "actor": "operator", "task": "a", "key": f"m{n}",
              "evidence": f"e{n}"}, credential=open(sys.argv[3]).read().strip())
v = k.verify_ledger()
with open(sys.argv[2], "a") as f:
    f.write(json.dumps({"format": "wgk-anchor/1", "graph": "g", "seq": v.events,
                        "hash": v.head}) + "\\n")
    f.flush()
    os.fsync(f.fileno())
os.kill(os.getpid(), signal.SIGKILL)             # no close: the last commits live in the WAL
"""


def test_a_lost_write_ahead_log_is_detected_against_the_anchor(tmp_path, capsys, monkeypatch):
    """A real process commits, anchors and is killed with its commits in the WAL; the WAL is
    then lost (truncated). The database opens consistent, only the anchor knows better."""
    init_repository(str(tmp_path / "repo"))
    db = str(tmp_path / "k.db")
    assert main(["kernel", "--db", db, "init", "--graph", "g", "--repo", str(tmp_path / "repo")]) == 0
    monkeypatch.setenv("WGK_CREDENTIAL_FILE", db + ".credential")
    assert main(["kernel", "--db", db, "task", "add", "a"]) == 0
    anchors = str(tmp_path / "k.anchors")
    assert main(["kernel", "--db", db, "anchor", anchors]) == 0
    sqlite3.connect(db).execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    p = subprocess.run([sys.executable, "-c", CHILD, db, anchors, db + ".credential"])
    assert p.returncode == -signal.SIGKILL and os.path.getsize(db + "-wal") > 0
    os.truncate(db + "-wal", 0)                                 # the WAL is lost
    monkeypatch.delenv("WGK_CREDENTIAL_FILE")
    capsys.readouterr()
    assert main(["kernel", "--db", db, "verify-ledger"]) == 0   # consistent on its own
    assert capsys.readouterr().out.startswith("ledger ok: 3 events")
    assert main(["kernel", "--db", db, "verify-ledger", "--anchor", anchors]) == 1
    out = capsys.readouterr().out
    assert "ends at seq 3 but an anchor holds seq 8" in out and out.count("\n") == 1
    assert main(["kernel", "--db", db, "audit", "--anchor", anchors]) == 1
    assert main(["kernel", "--db", db, "anchor", anchors]) == 1   # never anchors a rollback
    GitRepository(str(tmp_path / "repo")).remove_all_worktrees()


# --- corruption: one line, exit 1, never a traceback -------------------------------------------


def test_rebuild_and_audit_report_corruption_in_one_line(tmp_path, capsys, monkeypatch):
    init_repository(str(tmp_path / "repo"))
    db = str(tmp_path / "k.db")
    assert main(["kernel", "--db", db, "init", "--graph", "g", "--repo", str(tmp_path / "repo")]) == 0
    monkeypatch.setenv("WGK_CREDENTIAL_FILE", db + ".credential")
    for name in ("a", "b"):
        assert main(["kernel", "--db", db, "task", "add", name]) == 0
    c = sqlite3.connect(db)
    c.execute("UPDATE ledger SET body = '{not json' WHERE seq = 3")   # then re-hashed
    c.commit()
    c.close()
    k = kernel(db)
    rehash_from(k, 3)
    k.conn.execute("DELETE FROM task_view WHERE task = (SELECT id FROM tasks WHERE name = 'b')")
    k.conn.execute("UPDATE transactions SET phase = 'no-such-phase' WHERE task = "
                   "(SELECT id FROM tasks WHERE name = 'a')")
    k.close()
    for command, says in ((["rebuild"], "the ledger does not replay at seq 3: JSONDecodeError"),
                          (["audit"], "status-projection: b: no row in task_view"),
                          (["rebuild", "--apply"], "the ledger does not replay at seq 3")):
        capsys.readouterr()
        assert main(["kernel", "--db", db, *command]) == 1
        out, err = capsys.readouterr()
        assert says in out and "Traceback" not in out + err, (out, err)
        assert all(len(line) < 300 for line in out.splitlines())
    c = sqlite3.connect(db)
    c.execute("DROP TABLE journal")
    c.commit()
    c.close()
    capsys.readouterr()
    assert main(["kernel", "--db", db, "audit"]) == 1
    out, err = capsys.readouterr()
    assert ("journal" in out + err) and "Traceback" not in out + err
    GitRepository(str(tmp_path / "repo")).remove_all_worktrees()


def test_a_malformed_anchor_file_is_bad_input(tmp_path, capsys, monkeypatch):
    init_repository(str(tmp_path / "repo"))
    db = str(tmp_path / "k.db")
    assert main(["kernel", "--db", db, "init", "--graph", "g", "--repo", str(tmp_path / "repo")]) == 0
    monkeypatch.setenv("WGK_CREDENTIAL_FILE", db + ".credential")
    bad = tmp_path / "bad.anchors"
    for text, says in (('{"format": "wgk-anchor/1", "graph": "h", "seq": 1, "hash": "' + "0" * 64
                        + '"}\n', "bad.anchors:1: an anchor of graph 'h'"),
                       ("\n[1]\n", "bad.anchors:2: not a wgk-anchor/1 anchor"),
                       ('{"format": "wgk-anchor/1", "graph": "g", "seq": 0}', "positive 'seq'")):
        bad.write_text(text)
        capsys.readouterr()
        assert main(["kernel", "--db", db, "verify-ledger", "--anchor", str(bad)]) == 2
        err = capsys.readouterr().err
        assert says in err and err.count("\n") == 1, err
    GitRepository(str(tmp_path / "repo")).remove_all_worktrees()
