"""The kernel on PostgreSQL, side by side with SQLite, in one run.

    python bench/bench_pg.py [--quick] [--json]

The server is ``WGK_BENCH_POSTGRES`` (else ``WGK_TEST_POSTGRES``), a
postgresql:// DSN; each part runs in a schema of its own, dropped afterwards.
Without a server the result says so (peer-unavailable), SQLite still measured.
Every figure's note carries the 1-minute load average when it was measured:
the machine may be shared, and only the ratios within a round are comparable.

Figures:

1. durable requests/s on PostgreSQL (heartbeats, one commit each) against a raw
   commit-per-row loop through the same driver and settings (psycopg,
   synchronous_commit=on, READ COMMITTED, one BEGIN ... COMMIT per row), in
   alternating rounds of 10: the rate over all rounds and the median of the
   per-round ratios; beside it, per request, the round trips and the CPU of
   the client and (when the server runs on this host) of its backend process;
2. 1, 2, 4 and 8 writer processes on disjoint tasks (each its own task,
   heartbeats, one commit each), on PostgreSQL and on SQLite: total
   throughput and the p99 latency of one request; checked: every request
   answered, one ledger event each, the chain verifies (``pg_scaling``);
3. readiness of 100k tasks (10k with --quick) on both backends, in
   milliseconds (``pg_scaling``).
"""
from __future__ import annotations

import os
import statistics
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from impl_workloads import Heartbeats  # noqa: E402
from pg_scaling import readiness_figures, scaling_figures  # noqa: E402
from common import PEER_UNAVAILABLE, Figure, main, say, settle  # noqa: E402

from wgk.impl import Pragmas
from wgk.impl.storage import pg  # noqa: E402

NAME = "pg"


def server() -> str | None:
    dsn = os.environ.get("WGK_BENCH_POSTGRES") or os.environ.get("WGK_TEST_POSTGRES")
    if not dsn:
        return None
    try:
        pg.driver().connect(dsn, connect_timeout=5).close()
    except Exception:  # noqa: BLE001 - no server: reported as unavailable
        return None
    return dsn


def load() -> float:
    return os.getloadavg()[0]


class Schema:
    """A fresh schema (dropped on exit); ``dsn`` points into it."""

    def __init__(self, server_dsn: str):
        self.server, self.name = server_dsn, f"wgk_bench_{uuid.uuid4().hex[:10]}"

    def __enter__(self) -> str:
        pg.create_schema(self.server, self.name)
        return pg.with_schema(self.server, self.name)

    def __exit__(self, *exc) -> None:
        pg.drop_schema(self.server, self.name)


class RawPg:
    """One row per committed transaction through psycopg, with the kernel's settings."""

    def __init__(self, dsn: str):
        self.conn = pg.driver().connect(dsn, autocommit=True)
        self.conn.execute("SET synchronous_commit = on")
        self.conn.execute("CREATE TABLE IF NOT EXISTS row (key TEXT PRIMARY KEY, body TEXT)")
        self.n = 0

    def run(self, count: int) -> float:
        c = self.conn
        start = time.perf_counter()
        for _ in range(count):
            self.n += 1
            c.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
            c.execute("INSERT INTO row VALUES (%s, %s)", (f"row-{self.n}", "x" * 200))
            c.execute("COMMIT")
        return time.perf_counter() - start


def backend_cpu(conn) -> float | None:
    """CPU seconds of the server process behind ``conn`` (None: not on this host)."""
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def durable(server_dsn: str, rounds: int, batch: int) -> dict:
    """Raw loop and kernel in alternating small rounds (who goes first alternates too): the
    rates over all rounds, and the median of the per-round ratios (the machine's load moves
    within seconds; a round's two columns see the same moment)."""
    with Schema(server_dsn) as raw_dsn, Schema(server_dsn) as kernel_dsn:
        raw, hb = RawPg(raw_dsn), Heartbeats(kernel_dsn, Pragmas())
        raw.run(batch)
        hb.run(batch)                         # warm: prepared statements, caches
        conns = {"raw": raw.conn, "kernel": hb.kernel.store.conn.raw}
        times, ratios, loads = {"raw": 0.0, "kernel": 0.0}, [], []
        client, backend = {"raw": 0.0, "kernel": 0.0}, {"raw": 0.0, "kernel": 0.0}
        trips = hb.kernel.store.conn.round_trips
        for i in range(rounds):
            took = {}
            for name, column in [("raw", raw), ("kernel", hb)][::1 if i % 2 == 0 else -1]:
                b0, c0 = backend_cpu(conns[name]), time.process_time()
                took[name] = column.run(batch)
                client[name] += time.process_time() - c0
                b1 = backend_cpu(conns[name])
                backend[name] += (b1 - b0) if b0 is not None and b1 is not None else float("nan")
                times[name] += took[name]
            ratios.append(took["raw"] / took["kernel"])
            loads.append(load())
        trips = (hb.kernel.store.conn.round_trips - trips) / (rounds * batch)
        raw.conn.close()
        hb.kernel.close()
    n = rounds * batch
    per = {k: {"client-cpu-ms": client[k] / n * 1e3, "server-cpu-ms": backend[k] / n * 1e3}
           for k in times}
    return {"requests": n, "raw": n / times["raw"], "kernel": n / times["kernel"],
            "median-round-ratio": statistics.median(ratios), "load": statistics.median(loads),
            "round-trips": trips, "cpu": per}


def durable_figures(server_dsn: str, quick: bool) -> list[Figure]:
    rounds, batch = (12, 10) if quick else (60, 10)
    say(f"  durable requests on PostgreSQL: {rounds} alternating rounds of {batch} ...")
    d = durable(server_dsn, rounds, batch)
    note = f"load {d['load']:.1f}; {d['requests']:,} requests per column"
    cpu = d["cpu"]
    return [
        Figure("durable requests/s on PostgreSQL, heartbeats, one commit each", d["kernel"],
               "requests/s", "raw psycopg commit-per-row loop", d["raw"], target=0.9,
               why="the round trips are two against the raw loop's three; the difference is "
                   "CPU, client and server (below): a request writes a ledger row with two index "
                   "entries, a journal row and an evidence row, takes two row locks and two "
                   "advisory locks and checks its stamp, where the raw loop inserts one row",
               note=note + f"; median of the per-round ratios {d['median-round-ratio']:.2f}x"),
        Figure("round trips per request (the raw loop: 3)", d["round-trips"], "round trips",
               note=note),
        Figure("client CPU per request", cpu["kernel"]["client-cpu-ms"], "ms", "raw loop",
               cpu["raw"]["client-cpu-ms"], higher_is_better=False, note=note),
        Figure("server CPU per request (its backend process)", cpu["kernel"]["server-cpu-ms"],
               "ms", "raw loop", cpu["raw"]["server-cpu-ms"], higher_is_better=False,
               note=note + ("" if cpu["raw"]["server-cpu-ms"] == cpu["raw"]["server-cpu-ms"]
                            else "; NaN: the server is not on this host")),
    ]


def run(quick: bool = False):
    t0 = time.perf_counter()
    server_dsn = server()
    figures, checks = [], []
    if server_dsn is not None:
        figures += durable_figures(server_dsn, quick)
    for part in (scaling_figures, readiness_figures):
        f, c = part(server_dsn, quick, Schema)
        figures += f
        checks += c
    missing = [] if server_dsn is not None else [
        "no PostgreSQL server (set WGK_BENCH_POSTGRES or WGK_TEST_POSTGRES): SQLite only"]
    result = settle(NAME, figures, checks, [], missing, t0)
    if missing:
        result.status = PEER_UNAVAILABLE if result.status != "failed" else result.status
    return result


if __name__ == "__main__":
    sys.exit(main(NAME, run))
