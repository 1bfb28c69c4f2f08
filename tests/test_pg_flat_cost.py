"""Flat cost on PostgreSQL, counted by the server: the rows the mix of ``bench/flat_cost.py``
reads from the ledger, the journal and the evidence (sequential scans, the rows they read,
index fetches: ``pg_stat_user_tables``) are the same at 5,000 and at 40,000 ledger events.
A query that scans the ledger, or an index the planner no longer finds, shows as counts that
grow with the ledger; the machine's load changes none.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import flat_cost  # noqa: E402
from pg_support import pg_dsn, pg_server  # noqa: E402,F401  (fixtures)
from wgk.impl import Kernel, MemoryWorld  # noqa: E402

GROWING = ("ledger", "journal", "evidence")
COUNTERS = ("SELECT relname, seq_scan, seq_tup_read, coalesce(idx_tup_fetch, 0) "
            "FROM pg_stat_user_tables WHERE schemaname = current_schema() "
            "AND relname IN ('ledger', 'journal', 'evidence')")


def counters(dsn: str) -> dict[str, tuple]:
    """The server's counters of the growing tables, once they stop moving (a closed
    connection's counts reach them when its backend exits)."""
    import psycopg
    last = None
    with psycopg.connect(dsn, autocommit=True) as c:
        for _ in range(50):
            c.execute("SELECT pg_stat_clear_snapshot()")
            now = {r[0]: tuple(r[1:]) for r in c.execute(COUNTERS)}
            if now == last:
                return now
            last = now
            time.sleep(0.3)
    pytest.fail("the server's table counters did not settle")


def reads(dsn: str, events: int, drop: str | None = None) -> dict[str, tuple]:
    world = MemoryWorld.create(target="main-0")
    flat_cost.seed(dsn, world, flat_cost.Size(60, events), 4)
    if drop is not None:
        import psycopg
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute(drop)
    k = Kernel(dsn, world.environment())
    mix = flat_cost.Mix(k, world, 0)
    assert mix.completion(None)                       # caches and prepared statements warm
    k.close()
    before = counters(dsn)
    k = Kernel(dsn, world.environment())
    try:
        mix = flat_cost.Mix(k, world, 1)
        mix.beats = 1_000                             # heartbeat keys not used yet
        for _ in range(2):
            assert mix.completion(None)
        assert mix.beat(None, "extra")
    finally:
        k.close()
    after = counters(dsn)
    return {t: tuple(a - b for a, b in zip(after[t], before[t])) for t in GROWING}


def two_schemas(pg_server):
    from wgk.impl.storage.pg import scratch_schema
    return scratch_schema(pg_server), scratch_schema(pg_server)


def test_a_request_reads_the_same_rows_at_5000_and_at_40000_ledger_events(pg_server):
    small_schema, large_schema = two_schemas(pg_server)
    with small_schema as small_dsn, large_schema as large_dsn:
        small = reads(small_dsn, 5_000)
        large = reads(large_dsn, 40_000)
    assert small["ledger"][2] > 0, small                  # the counters saw the requests
    assert small == large, f"at 5,000 events {small}, at 40,000 {large}"


def test_the_count_sees_a_ledger_read_that_grows(pg_server):
    """Without the index of each task's last event, the ledger's counts grow with it."""
    small_schema, large_schema = two_schemas(pg_server)
    drop = "DROP INDEX ledger_by_task"
    with small_schema as small_dsn, large_schema as large_dsn:
        small = reads(small_dsn, 5_000, drop)
        large = reads(large_dsn, 40_000, drop)
    assert small["ledger"][1] + small["ledger"][2] < large["ledger"][1] + large["ledger"][2], \
        (small, large)                                 # rows read, by a scan or an index
