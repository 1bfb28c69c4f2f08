"""``bench/profile_impl.py --split`` times every statement a request runs: the timed connection
replaces the kernel's connection wherever it is held (store, tables, ledger, caches), so the
statements it counts are all those SQLite runs (its trace callback sees the same), and the
CPU it reports as SQLite's is not Python's."""
from __future__ import annotations

import collections
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import profile_impl  # noqa: E402
from impl_workloads import Completions, Heartbeats  # noqa: E402
from wgk.impl import Pragmas  # noqa: E402


def traced_and_timed(load, count: int) -> tuple[collections.Counter, profile_impl.TimedConnection]:
    load.run(5)
    conn = load.kernel.conn
    timed = profile_impl.timed_connection(load.kernel, conn)
    traced: collections.Counter = collections.Counter()
    conn.set_trace_callback(lambda sql: traced.update([" ".join(sql.split())[:90]]))
    try:
        load.run(count)
    finally:
        conn.set_trace_callback(None)
    return traced, timed


def test_every_statement_of_a_request_is_timed(tmp_path):
    for cls in (Heartbeats, Completions):
        load = cls(str(tmp_path / f"{cls.__name__}.db"), Pragmas(synchronous="OFF"))
        traced, timed = traced_and_timed(load, 26)
        assert sum(timed.calls.values()) == sum(traced.values()) > 26 * 6, (
            cls.__name__, traced - timed.calls)
        assert timed.calls["COMMIT"] == traced["COMMIT"] >= 26
        assert all(ns >= 0 for ns in timed.spent.values()) and sum(timed.spent.values()) > 0
        load.kernel.close()


def test_a_holder_left_with_the_bare_connection_is_seen(tmp_path):
    """The check above fails when one holder of the connection is not swapped (the ledger's)."""
    load = Heartbeats(str(tmp_path / "h.db"), Pragmas(synchronous="OFF"))
    ledger, conn = load.kernel.ledger, load.kernel.conn
    traced, timed = traced_and_timed(load, 10)
    assert ledger.conn is timed
    ledger.conn = conn                         # the ledger's appends no longer timed
    traced.clear()
    timed.calls.clear()
    conn.set_trace_callback(lambda sql: traced.update([" ".join(sql.split())[:90]]))
    load.run(10)
    conn.set_trace_callback(None)
    assert sum(traced.values()) - sum(timed.calls.values()) == 10
    load.kernel.close()


def test_the_sampler_finds_the_function_the_cpu_goes_to(tmp_path):
    """``--sampled``: a request path slowed by a function that burns 2 ms of CPU per request
    is shown spending most of its samples there, the request's own lines the rest."""
    load = Heartbeats(str(tmp_path / "s.db"), Pragmas(synchronous="OFF"))
    handle = load.kernel.handle

    def burn() -> None:
        end = time.thread_time() + 0.002
        while time.thread_time() < end:
            pass

    def slowed(*args, **kw):
        burn()
        return handle(*args, **kw)
    load.kernel.handle = slowed
    sampler = profile_impl.sampled(load, 250, 5)
    burning = [n for n in sampler.within if n.endswith(" burn")]
    assert sampler.samples >= 20 and len(burning) == 1
    assert sampler.share(sampler.within, burning[0]) > 0.6
    assert 0 < sampler.share(sampler.within, next(
        n for n in sampler.within if n.endswith(" _handle"))) < 0.4
    load.kernel.close()
