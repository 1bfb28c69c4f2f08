"""Migration 16: each task's stamp moves from a table of its own (``stamps``, schema 9) to a
column of its transaction's row. A database of schema 15 whose stamps moved on is migrated
with its stamps kept, and then behaves as one that was at schema 16 from its start: the same
answers, ledger and rows for the same requests, and a write over a record read before
another connection's write refused by its statement (the stamp's condition). On SQLite and
on PostgreSQL; the schema-15 database is the kernel's own, its stamps put back in their
table and the column taken away, its layout held to a database migrated to 15."""
from __future__ import annotations

import hashlib
import sqlite3

import pytest

from wgk.impl import Kernel, MemoryWorld, TaskPolicy
from wgk.impl.storage.backends import open_store
from wgk.impl.storage.records import changed, evolve
from wgk.impl.storage.schema import (
    CONTROL_COLUMNS, FACT_COLUMNS, PROJECTED_TABLES, SCHEMA_V9, SCHEMA_VERSION,
)

from pg_support import pg_dsn, pg_server  # noqa: F401  (fixtures)

OWNER = {"pid": 4001, "birth": 911, "session": "s1"}
TOKEN = "stamp-token"
MINT = hashlib.sha256(TOKEN.encode()).hexdigest()


def _dispatch(task: str) -> dict:
    return {"kind": "dispatch", "actor": "daemon", "task": task, "key": f"d:{task}",
            "expected-attempt": 0, "owner": OWNER, "mint": MINT}


def _edge(task: str, n: int, kind: str, actor: str, phase: str) -> dict:
    cap = {"graph": "g", "task": task, "generation": 0, "attempt": 1, "fence": 1,
           "lease-epoch": 1}
    return {"kind": kind, "actor": actor, "task": task, "key": f"{kind}:{task}", "cap": cap,
            "expected-phase": phase, "expected-revision": n, "token": TOKEN}


BEFORE = [_dispatch("a"), _dispatch("b"), _edge("a", 0, "submit", "worker", "absent"),
          _edge("a", 1, "quiesce", "wrapper", "prepared")]
AFTER = [_edge("b", 0, "submit", "worker", "absent"), _dispatch("c"),
         _edge("b", 1, "quiesce", "wrapper", "prepared")]


def _kernel(path: str, world: MemoryWorld) -> Kernel:
    return Kernel(path, world.environment())


def _started(path: str, world: MemoryWorld, migrate_to: int | None = None
             ) -> tuple[Kernel, list]:
    store = None if migrate_to is None else open_store(path, migrate_to=migrate_to)
    k = Kernel(path, world.environment(), store=store)
    k.create_graph("g", [TaskPolicy(n) for n in "abc"])
    return k, [k.handle(r) for r in BEFORE]


def _stamps(k: Kernel) -> list:
    return sorted(tuple(r) for r in k.conn.execute("SELECT task, stamp FROM transactions"))


def _seen(k: Kernel) -> dict:
    """What two kernels given the same requests must agree on."""
    return {"ledger": [tuple(r) for r in k.conn.execute(
                "SELECT seq, event, task, key, body FROM ledger ORDER BY seq")],
            "tables": {t: sorted(map(repr, k.conn.execute(f"SELECT * FROM {t}")))
                       for t in PROJECTED_TABLES},
            "stamps": _stamps(k), "projection": k.project()}


def _reference(tmp_path) -> dict:
    k, answers = _started(str(tmp_path / "reference.db"), MemoryWorld.create(target="main-0"))
    answers += [k.handle(r) for r in AFTER]
    seen = dict(_seen(k), answers=answers)
    k.close()
    return seen


def _refused_over_a_stale_record(path: str, world: MemoryWorld) -> None:
    """A record read, another connection's write to it, then a write over the record read:
    refused by the stamp's condition, and the stamp moved on once."""
    first, second = _kernel(path, world), _kernel(path, world)
    read = first.record("c")
    stamp = first.tables.stamps[first.ids()["c"]]
    assert second.handle(_edge("c", 0, "submit", "worker", "absent"))["decision"] == "applied"
    stale = evolve(read, retries=1)
    with pytest.raises(sqlite3.OperationalError) as failed:
        with first.store.atomic():
            first.tables.save(first.ids()["c"], read, stale, changed(read, stale), 0)
    assert first.store.retryable(failed.value)
    first._forget()
    assert first.conn.execute("SELECT stamp FROM transactions WHERE task = ?",
                              (first.ids()["c"],)).fetchone()[0] == stamp + 1
    first.close()
    second.close()


def test_the_fact_columns_and_control_columns_are_the_tables_columns(tmp_path):
    store = open_store(str(tmp_path / "k.db"))
    for table, control in CONTROL_COLUMNS.items():
        cols = [r[1] for r in store.conn.execute(f"PRAGMA table_info({table})")]
        assert sorted(cols) == sorted(FACT_COLUMNS[table] + control)
    assert store.conn.execute("SELECT name FROM sqlite_master WHERE name = 'stamps'").fetchone() \
        is None
    store.close()


def test_a_sqlite_database_of_schema_15_keeps_its_stamps_and_behaves_the_same(tmp_path):
    reference = _reference(tmp_path)
    path = str(tmp_path / "old.db")
    world = MemoryWorld.create(target="main-0")
    k, answers = _started(path, world, migrate_to=16)
    held = _stamps(k)
    assert any(stamp > 1 for _, stamp in held)
    k.close()
    old = sqlite3.connect(path)
    old.executescript(SCHEMA_V9.split(";")[0] + ";"
                      "INSERT INTO stamps SELECT task, stamp FROM transactions;"
                      "ALTER TABLE transactions DROP COLUMN stamp;"
                      "UPDATE meta SET value = '15' WHERE key = 'schema-version';")
    layout = "SELECT name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite%' ORDER BY name"
    fifteen = open_store(str(tmp_path / "fifteen.db"), migrate_to=15)
    assert [tuple(r) for r in old.execute(layout)] == \
        [tuple(r) for r in fifteen.conn.execute(layout)]
    fifteen.close()
    old.close()
    k = _kernel(path, world)
    assert k.store.schema_version() == SCHEMA_VERSION
    assert _stamps(k) == held
    answers += [k.handle(r) for r in AFTER]
    assert answers == reference["answers"]
    seen = _seen(k)
    for part in ("ledger", "tables", "stamps", "projection"):
        assert seen[part] == reference[part], part
    assert k.verify_ledger().ok
    report = k.rebuild()
    assert report.ok, report.differences
    k.close()
    _refused_over_a_stale_record(path, world)


def test_a_postgresql_database_of_schema_15_keeps_its_stamps_and_behaves_the_same(tmp_path,
                                                                                   pg_dsn):
    reference = _reference(tmp_path)
    world = MemoryWorld.create(target="main-0")
    k, answers = _started(pg_dsn, world)
    held = _stamps(k)
    assert any(stamp > 1 for _, stamp in held)
    conn = k.store.conn
    with k.store.atomic():
        conn.native("CREATE TABLE stamps (task BIGINT PRIMARY KEY, stamp BIGINT NOT NULL)")
        conn.native("INSERT INTO stamps SELECT task, stamp FROM transactions")
        conn.native("ALTER TABLE transactions DROP COLUMN stamp")
        conn.native("UPDATE meta SET value = '15' WHERE key = 'schema-version'")
    k.close()
    k = _kernel(pg_dsn, world)
    assert k.store.schema_version() == SCHEMA_VERSION
    assert k.conn.native("SELECT to_regclass('stamps')").fetchone() == (None,)
    assert _stamps(k) == held
    answers += [k.handle(r) for r in AFTER]
    assert answers == reference["answers"]
    seen = _seen(k)
    for part in ("ledger", "stamps", "projection"):
        assert seen[part] == reference[part], part
    assert k.verify_ledger().ok
    report = k.rebuild()
    assert report.ok, report.differences
    k.close()


def _rebuilt_with_stamps_kept(path: str) -> None:
    """Stamps moved on by hand (any value holds while readers and writers agree) and a fact
    damaged: a rebuild finds the fact alone, its repair restores the fact and keeps every
    stamp."""
    k, _ = _started(path, MemoryWorld.create(target="main-0"))
    k.conn.execute("UPDATE transactions SET stamp = stamp + 7")
    moved = _stamps(k)
    facts = [tuple(r) for r in k.conn.execute(
        "SELECT task, phase, revision FROM transactions ORDER BY task")]
    k._forget()
    assert k.rebuild().ok
    k.conn.execute("UPDATE transactions SET revision = revision + 5 WHERE task = 1")
    k._forget()
    found = k.rebuild()
    assert not found.ok and all("table transactions" in d for d in found.differences), \
        found.differences
    assert k.rebuild(apply=True).applied
    assert [tuple(r) for r in k.conn.execute(
        "SELECT task, phase, revision FROM transactions ORDER BY task")] == facts
    assert _stamps(k) == moved
    assert k.rebuild().ok
    assert k.handle(AFTER[0])["decision"] == "applied"
    k.close()


def test_a_rebuild_compares_and_repairs_the_facts_of_a_row_and_keeps_its_stamp(tmp_path):
    _rebuilt_with_stamps_kept(str(tmp_path / "k.db"))


def test_a_rebuild_on_postgresql_keeps_the_stamps_too(pg_dsn):
    _rebuilt_with_stamps_kept(pg_dsn)
