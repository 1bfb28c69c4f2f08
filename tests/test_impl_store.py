"""The store: pragmas, the one atomic() unit, hooks at the commit boundary, migrations."""
from __future__ import annotations

import sqlite3

import pytest

from wgk.impl import Crash, CrashAt, Kernel, MemoryWorld, Pragmas, Recorder, StoreError, TaskPolicy
from wgk.impl.storage.store import MIGRATIONS, SCHEMA_VERSION, Store


def test_wal_synchronous_full_by_default_and_configurable(tmp_path):
    s = Store(str(tmp_path / "a.db"))
    assert s.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert s.conn.execute("PRAGMA synchronous").fetchone()[0] == 2          # FULL
    assert s.conn.execute("PRAGMA busy_timeout").fetchone()[0] == 10_000
    s2 = Store(str(tmp_path / "b.db"), pragmas=Pragmas(synchronous="NORMAL", busy_timeout_ms=50))
    assert s2.conn.execute("PRAGMA synchronous").fetchone()[0] == 1
    assert s2.conn.execute("PRAGMA busy_timeout").fetchone()[0] == 50
    with pytest.raises(StoreError):
        Store(str(tmp_path / "c.db"), pragmas=Pragmas(synchronous="SOMETIMES"))


def test_atomic_commits_rolls_back_on_any_exception_and_nests_as_savepoints(tmp_path):
    s = Store(str(tmp_path / "a.db"))
    with s.atomic():
        s.set_meta("x", "1")
    with pytest.raises(RuntimeError):
        with s.atomic():
            s.set_meta("x", "2")
            raise RuntimeError("boom")
    assert s.meta("x") == "1"
    with s.atomic():
        s.set_meta("y", "outer")
        with pytest.raises(KeyError):
            with s.atomic():
                s.set_meta("y", "inner")
                raise KeyError("inner fails")
        assert s.meta("y") == "outer"          # only the savepoint rolled back
        with s.atomic():
            s.set_meta("z", "inner kept")
    assert (s.meta("y"), s.meta("z")) == ("outer", "inner kept")
    assert not s.conn.in_transaction


def test_commit_boundary_passes_through_the_hook_before_and_after(tmp_path):
    rec = Recorder()
    s = Store(str(tmp_path / "a.db"), hook=rec)
    rec.seen.clear()
    with s.atomic("key-1"):
        s.set_meta("x", "1")
    assert [(b.kind, b.when, b.key) for b in rec.seen] == [("commit", "before", "key-1"),
                                                          ("commit", "after", "key-1")]


def test_crash_before_commit_loses_the_unit_crash_after_keeps_it(tmp_path):
    path = str(tmp_path / "a.db")
    Store(path).close()                       # created and migrated
    s = Store(path, hook=CrashAt(0, kind="commit", when="before"))
    with pytest.raises(Crash):
        with s.atomic("k"):
            s.set_meta("x", "lost")
    assert Store(path).meta("x") is None
    s2 = Store(path, hook=CrashAt(0, kind="commit", when="after"))
    with pytest.raises(Crash):
        with s2.atomic("k"):
            s2.set_meta("x", "kept")
    assert Store(path).meta("x") == "kept"


def test_forward_migrations_from_an_older_schema(tmp_path):
    path = str(tmp_path / "old.db")
    old = Store(path, migrate_to=1)
    assert old.schema_version() == 1
    assert not old.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'task_view_ready'").fetchone()
    old.close()
    s = Store(path)
    assert s.schema_version() == SCHEMA_VERSION == max(MIGRATIONS)
    assert s.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'task_view_ready'").fetchone()
    assert s.migrate() == []                  # nothing left to apply


def test_a_current_database_opens_without_the_write_lock(tmp_path):
    path = str(tmp_path / "a.db")
    Store(path).close()
    old = str(tmp_path / "old.db")
    Store(old, migrate_to=1).close()
    writers = [sqlite3.connect(p, isolation_level=None) for p in (path, old)]
    for w in writers:
        w.execute("BEGIN IMMEDIATE")          # another process holds the write lock
    quick = Pragmas(busy_timeout_ms=50)
    s = Store(path, pragmas=quick)            # at the current version: nothing to write
    assert s.schema_version() == SCHEMA_VERSION and s.migrate() == []
    with pytest.raises(StoreError, match="locked"):
        Store(old, pragmas=quick)             # a migration is due: it waits for the lock
    for w in writers:
        w.rollback()
    assert Store(old, pragmas=quick).schema_version() == SCHEMA_VERSION


def test_two_openers_racing_on_a_fresh_database_migrate_it_once(tmp_path):
    path = str(tmp_path / "race.db")

    class Late(Store):
        """Reads the version (0) just before another opener migrates the database."""
        reads = 0

        def schema_version(self) -> int:
            Late.reads += 1
            if Late.reads == 1:
                current = super().schema_version()
                Store(path).close()           # the other opener wins the race
                return current
            return super().schema_version()

    s = Late(path)                            # re-reads under the lock: nothing left to apply
    assert Late.reads == 2 and s.schema_version() == SCHEMA_VERSION
    assert s.conn.execute("SELECT count(*) FROM meta WHERE key = 'schema-version'"
                          ).fetchone()[0] == 1


def test_a_newer_schema_or_a_foreign_database_is_refused(tmp_path):
    path = str(tmp_path / "new.db")
    s = Store(path)
    with s.atomic():
        s.set_meta("schema-version", str(SCHEMA_VERSION + 1))
    s.close()
    with pytest.raises(StoreError, match="newer"):
        Store(path)
    foreign = str(tmp_path / "foreign.db")
    c = sqlite3.connect(foreign)
    c.execute("CREATE TABLE t (x)")
    c.commit()
    c.close()
    with pytest.raises(StoreError, match="not a kernel database"):
        Store(foreign)


def test_a_corrupt_file_is_refused_and_left_as_it_was(tmp_path):
    path = tmp_path / "corrupt.db"
    junk = b"this is not a database\n" * 200
    path.write_bytes(junk)
    with pytest.raises(StoreError, match="corrupt.db"):
        Kernel(str(path), MemoryWorld.create().environment())
    assert path.read_bytes() == junk


def test_a_request_commits_request_response_event_and_rows_together(tmp_path):
    w = MemoryWorld.create(target="main-0")
    rec = Recorder()
    k = Kernel(str(tmp_path / "k.db"), w.environment(), hook=rec)
    k.create_graph("g", [TaskPolicy("a")])
    rec.seen.clear()
    before = {t: k.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
              for t in ("journal", "ledger", "attempts", "owners", "worktrees")}
    d = k.handle({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d1",
                  "expected-attempt": 0, "owner": {"pid": 7, "birth": 70, "session": "s"}})
    assert d == {"decision": "applied"}
    after = {t: k.conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in before}
    assert {t: after[t] - before[t] for t in before} == \
        {"journal": 1, "ledger": 1, "attempts": 1, "owners": 1, "worktrees": 1}
    assert [(b.kind, b.when) for b in rec.seen] == [
        ("worktree-add", "before"), ("worktree-add", "after"),
        ("commit", "before"), ("commit", "after")]


def test_an_unknown_label_in_a_row_raises_at_the_boundary(tmp_path):
    w = MemoryWorld.create(target="main-0")
    path = str(tmp_path / "k.db")
    k = Kernel(path, w.environment())
    k.create_graph("g", [TaskPolicy("a")])
    k.conn.execute("UPDATE transactions SET phase = 'half-done'")
    k.close()
    k = Kernel(path, w.environment())
    with pytest.raises(StoreError, match="unknown phase 'half-done'"):
        k.record("a")
