"""Migration 17: ``effects``, ``worktrees`` and ``pins`` become tables keyed by their text key
alone (``WITHOUT ROWID`` on SQLite: one b-tree where a rowid table and its key's index were
two). A database of schema 16 holding rows in all three (whole completions, their effects
committed and their worktrees cleaned up) is migrated with the same rows, then behaves as one
that was at schema 17 from its start: the same answers, ledger and rows for the same requests,
and a rebuild from its ledger gives its tables. On SQLite and on PostgreSQL."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from impl_workloads import complete  # noqa: E402
from wgk.impl import Kernel, MemoryWorld, TaskPolicy  # noqa: E402
from wgk.impl.storage.backends import open_store  # noqa: E402
from wgk.impl.storage.schema import PROJECTED_TABLES, SCHEMA_VERSION  # noqa: E402

from pg_support import pg_dsn, pg_server  # noqa: E402,F401  (fixtures)

KEYED = ("effects", "worktrees", "pins")


def _rows(k: Kernel, table: str) -> list:
    return sorted(map(repr, k.conn.execute(f"SELECT * FROM {table}")))


def _seen(k: Kernel) -> dict:
    return {"ledger": [tuple(r) for r in k.conn.execute(
                "SELECT seq, event, task, key, body FROM ledger ORDER BY seq")],
            "tables": {t: _rows(k, t) for t in PROJECTED_TABLES}, "projection": k.project()}


def _run(path: str, old: bool) -> dict:
    """Two completions (at schema 16 when ``old``), the kernel opened again (migrated to the
    latest), a third completion; what it holds then. On PostgreSQL, whose tables of schema 16
    have the layout of 17's (no rowids there), a database of 17 is marked 16 (the request
    path runs with PostgreSQL's own migrations, applied at the latest schema only)."""
    world = MemoryWorld.create(target="main-0")
    sqlite = not path.startswith("postgresql:")
    store = open_store(path, migrate_to=16) if old and sqlite else None
    k = Kernel(path, world.environment(), store=store)
    k.create_graph("g", [TaskPolicy(n) for n in ("a", "b", "c")])
    complete(k, world, "a")
    complete(k, world, "b")
    before = {t: _rows(k, t) for t in KEYED}
    assert all(before.values()), before
    if old and not sqlite:
        k.store.conn.native("UPDATE meta SET value = '16' WHERE key = 'schema-version'")
    version = k.store.schema_version()
    k.close()
    k = Kernel(path, world.environment())
    assert k.store.schema_version() == SCHEMA_VERSION
    assert {t: _rows(k, t) for t in KEYED} == before
    complete(k, world, "c")
    seen = dict(_seen(k), version=version)
    assert k.verify_ledger().ok
    report = k.rebuild()
    assert report.ok, report.differences
    k.close()
    return seen


def _same(migrated: dict, reference: dict) -> None:
    assert migrated.pop("version") == 16 and reference.pop("version") == SCHEMA_VERSION
    for part in reference:
        assert migrated[part] == reference[part], part


def test_a_sqlite_database_of_schema_16_is_migrated_with_its_rows_and_behaves_the_same(tmp_path):
    _same(_run(str(tmp_path / "old.db"), True), _run(str(tmp_path / "new.db"), False))
    k = open_store(str(tmp_path / "old.db"))
    for table in KEYED:
        sql = k.conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()
        assert sql[0].rstrip().endswith("WITHOUT ROWID"), sql
    assert k.conn.execute("SELECT name FROM sqlite_master WHERE name LIKE 'sqlite_autoindex_%' "
                          "AND tbl_name IN ('effects', 'worktrees', 'pins')").fetchall() == []
    k.close()


def test_a_postgresql_database_of_schema_16_is_migrated_with_its_rows_and_behaves_the_same(
        tmp_path, pg_dsn):
    _same(_run(pg_dsn, True), _run(str(tmp_path / "new.db"), False))
