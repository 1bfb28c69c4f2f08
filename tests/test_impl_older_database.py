"""A database written by an older kernel is read by this one: the forward migration renames
the evidence recorded under former names (``eof``, ``probe``, ``ack``, ``contention``,
``terminal-report``) to the kinds of the requests that reported it, the ledger keeps its
events as written (its hash chain still verifies), and a rebuild from that ledger gives
the migrated tables. The old database is real: tests/data/kernel-schema-v2.sql, dumped
from a kernel of schema version 2; on PostgreSQL its rows are loaded into a schema of that
version."""
from __future__ import annotations

import pathlib
import re
import sqlite3

from wgk.impl import Kernel, MemoryWorld
from wgk.impl.storage.schema import SCHEMA_VERSION
from wgk.impl.contract.vocabulary import FORMER_EVIDENCE_LABELS

from pg_support import pg_dsn, pg_server  # noqa: F401  (fixtures)

DUMP = pathlib.Path(__file__).parent / "data" / "kernel-schema-v2.sql"
RENAMED = {("eof", "observer-eof:stream-1"): "observe-eof",
           ("probe", "pid:4001:birth:911"): "probe-owner",
           ("ack", "occ-1"): "ack-continuation",
           ("contention", "caller-7"): "ownership-contention",
           ("terminal-report", "worker-exit-1"): "fail"}


def _rows(conn, sql: str) -> list:
    return [tuple(r) for r in conn.execute(sql).fetchall()]


def _check_migrated(k: Kernel, ledger_before: list) -> None:
    evidence = set(_rows(k.conn, "SELECT kind, ident FROM evidence"))
    assert {(new, ident) for (_, ident), new in RENAMED.items()} <= evidence
    assert not {kind for kind, _ in evidence} & set(FORMER_EVIDENCE_LABELS)
    assert k.store.schema_version() == SCHEMA_VERSION
    # the ledger is not rewritten: the same rows, the former names inside, the chain intact,
    # followed by the one event that seals the old rows' columns under the new chain
    after = _rows(k.conn, "SELECT seq, prev, hash, body FROM ledger ORDER BY seq")
    assert after[:len(ledger_before)] == ledger_before
    sealed = _rows(k.conn, f"SELECT event FROM ledger WHERE seq > {ledger_before[-1][0]}")
    assert sealed == [("ledger-sealed",)], sealed
    assert any('"terminal-report"' in body for *_, body in ledger_before)
    assert k.verify_ledger().ok
    report = k.rebuild()
    assert report.ok, report.differences
    assert k.audit().ok, k.audit().findings
    # an attempt opened before capability tokens existed has none: nothing its process says
    # is applied (it is re-dispatched), and the acknowledged occurrence stays counted once
    t = k.record("t1")
    assert t.token_hash is None
    cap = {"graph": "g", "task": "t1", "generation": t.generation, "attempt": t.attempt,
           "fence": t.fence, "lease-epoch": t.lease_epoch}
    again = k.handle({"kind": "ack-continuation", "actor": "wrapper", "task": "t1",
                      "key": "a1-again", "cap": cap, "evidence": "occ-1", "token": "guess"})
    assert again == {"decision": "rejected", "code": "token-mismatch"}
    assert k.project()["tasks"]["t1"]["counters"]["acks"] == 1


def test_an_older_sqlite_database_is_migrated_and_its_ledger_still_verifies(tmp_path):
    path = str(tmp_path / "old.db")
    old = sqlite3.connect(path)
    old.executescript(DUMP.read_text())
    assert old.execute("SELECT value FROM meta WHERE key = 'schema-version'").fetchone() == ("2",)
    ledger = _rows(old, "SELECT seq, prev, hash, body FROM ledger ORDER BY seq")
    old.close()
    k = Kernel(path, MemoryWorld.create(target="main-0").environment())
    _check_migrated(k, ledger)
    k.close()


def test_an_older_postgresql_database_is_migrated_and_its_ledger_still_verifies(pg_dsn):
    from wgk.impl.storage.backends import open_store
    store = open_store(pg_dsn, migrate_to=2)
    inserts = [s for s in DUMP.read_text().splitlines() if s.startswith("INSERT INTO")]
    with store.atomic():
        for table in _rows(store.conn, "SELECT tablename FROM pg_tables WHERE schemaname = "
                           "current_schema() AND tablename NOT IN ('ledger_head')"):
            store.conn.native(f"DELETE FROM {table[0]}")
        for statement in inserts:
            store.conn.native(re.sub(r'^INSERT INTO "(\w+)"', r"INSERT INTO \1", statement))
        seq, head = store.conn.native("SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1"
                                      ).fetchone()
        store.conn.native("UPDATE ledger_head SET seq = %s, hash = %s", (seq, head))
    assert store.schema_version() == 2
    ledger = _rows(store.conn, "SELECT seq, prev, hash, body FROM ledger ORDER BY seq")
    store.close()
    k = Kernel(pg_dsn, MemoryWorld.create(target="main-0").environment())
    _check_migrated(k, ledger)
    k.close()
