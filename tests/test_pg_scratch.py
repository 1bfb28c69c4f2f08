"""Scratch schemas on PostgreSQL, recycled within a scope: a schema handed out again is as a
fresh kernel database after its migrations, and none is left behind."""
from __future__ import annotations

import pytest

from wgk.impl.storage import pg
from wgk.impl.storage.pg_conn import driver

from pg_support import pg_server  # noqa: F401  (fixture)
from test_pg_kernel import run_script


def schemas(dsn: str) -> set[str]:
    with driver().connect(dsn) as c:
        return {r[0] for r in c.execute("SELECT nspname FROM pg_namespace")}


def content(dsn: str) -> dict:
    """Every table's rows, and what the ledger's sequence gives next (not taken)."""
    with driver().connect(dsn) as c:
        tables = sorted(r[0] for r in c.execute(pg.sql.TABLES))
        rows = {t: sorted(map(repr, c.execute(f"SELECT * FROM {t}").fetchall())) for t in tables}
        last, called = c.execute("SELECT last_value, is_called FROM ledger_seq").fetchone()
    return {"rows": rows, "next": last + 1 if called else last}


def schema_of(dsn: str) -> str:
    with driver().connect(dsn) as c:
        return c.execute("SELECT current_schema()").fetchone()[0]


def test_a_recycled_schema_is_a_fresh_kernel_database_again(pg_server):
    with pg.recycling():
        with pg.scratch_schema(pg_server) as first:
            name = schema_of(first)
            fresh = content(first)
            assert fresh["rows"]["meta"] and fresh["next"] == 1
            _, projected, k = run_script(first)          # events, tasks, the principals' table
            k.principals.add("alice", ["operator"])
            k.close()
            used = content(first)
            assert used != fresh and used["next"] > 1 and "principals" in used["rows"]
        with pg.scratch_schema(pg_server) as again:
            assert schema_of(again) == name              # the same schema, handed out again
            assert content(again) == fresh
            # and it works as a new one: the same script gives the same projection
            _, projected_again, k = run_script(again)
            assert projected_again == projected
            assert not k.principals.closed() and k.verify_ledger().ok
            k.close()
    assert name not in schemas(pg_server)                # dropped at the end of the scope


def test_outside_a_scope_a_scratch_schema_is_dropped_at_once(pg_server):
    with pg.scratch_schema(pg_server) as db:
        name = schema_of(db)
        with driver().connect(db) as c:           # new and empty: the caller migrates it
            assert list(c.execute(pg.sql.TABLES)) == []
    assert name not in schemas(pg_server)


def test_a_schema_released_after_its_scope_closed_is_dropped(pg_server):
    scope = pg.recycling()
    scope.__enter__()
    held = pg.scratch_schema(pg_server)
    name = schema_of(held.__enter__())
    scope.__exit__(None, None, None)
    assert name in schemas(pg_server)                    # still in use
    held.__exit__(None, None, None)
    assert name not in schemas(pg_server)


def test_a_failure_inside_drops_the_schema_rather_than_keep_it(pg_server):
    with pg.recycling():
        with pytest.raises(RuntimeError):
            with pg.scratch_schema(pg_server) as db:
                name = schema_of(db)
                raise RuntimeError("failed half-way")    # what it left is not to be trusted
        assert name not in schemas(pg_server)
        with pg.scratch_schema(pg_server) as db:
            assert schema_of(db) != name
