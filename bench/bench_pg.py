"""The kernel on PostgreSQL, side by side with SQLite, in one run.

    python bench/bench_pg.py [--quick] [--json]

The server is ``WGK_BENCH_POSTGRES`` (else ``WGK_TEST_POSTGRES``), a
postgresql:// DSN; each part runs in a schema of its own, dropped afterwards.
Without a server the result says so (peer-unavailable), SQLite still measured.

Figures:

1. durable requests/s on PostgreSQL (heartbeats, one commit each) against a raw
   commit-per-row loop through the same driver and settings (psycopg,
   synchronous_commit=on, READ COMMITTED, one BEGIN ... COMMIT per row), in
   interleaved rounds;
2. 1, 2, 4 and 8 writer processes on disjoint tasks (each its own tasks,
   heartbeats, one commit each), on PostgreSQL and on SQLite: total
   throughput and the p99 latency of one request; checked: every request
   answered, the ledger verifies with one event per request.
"""
from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from impl_workloads import Heartbeats, cap  # noqa: E402
from common import PEER_UNAVAILABLE, Check, Figure, main, say, settle  # noqa: E402

from wgk.impl import Kernel, MemoryWorld, Pragmas, TaskPolicy, pg  # noqa: E402

NAME = "pg"
OWNER = {"pid": 4001, "birth": 911, "session": "s1"}


def server() -> str | None:
    dsn = os.environ.get("WGK_BENCH_POSTGRES") or os.environ.get("WGK_TEST_POSTGRES")
    if not dsn:
        return None
    try:
        pg.driver().connect(dsn, connect_timeout=5).close()
    except Exception:  # noqa: BLE001 - no server: reported as unavailable
        return None
    return dsn


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


def durable(server_dsn: str, rounds: int, batch: int) -> dict:
    with Schema(server_dsn) as raw_dsn, Schema(server_dsn) as kernel_dsn:
        raw, load = RawPg(raw_dsn), Heartbeats(kernel_dsn, Pragmas())
        times = {"raw": 0.0, "kernel": 0.0}
        for i in range(rounds):
            order = [("raw", raw), ("kernel", load)][::1 if i % 2 == 0 else -1]
            for name, column in order:
                times[name] += column.run(batch)
        raw.conn.close()
        load.kernel.close()
    n = rounds * batch
    return {"requests": n, "raw": n / times["raw"], "kernel": n / times["kernel"]}


# --- writers on disjoint tasks -----------------------------------------------------------


def _writer(db: str, me: int, count: int, barrier, out) -> None:
    world = MemoryWorld.create(target="main-0")
    k = Kernel(db, world.environment())
    task = f"w{me}"
    k.handle({"kind": "dispatch", "actor": "daemon", "task": task, "key": f"d{me}",
              "expected-attempt": 0, "owner": OWNER})
    barrier.wait(timeout=120)
    start, latencies, answered = time.perf_counter(), [], 0
    for n in range(count):
        t0 = time.perf_counter()
        a = k.handle({"kind": "heartbeat", "actor": "worker", "task": task,
                      "key": f"hb{me}-{n}", "cap": cap(task), "evidence": f"b{me}-{n}"})
        latencies.append(time.perf_counter() - t0)
        answered += a.get("decision") == "evidence-only"
    out.put((me, start, time.perf_counter(), latencies, answered))
    k.close()


def writers(db: str, procs: int, count: int) -> dict:
    world = MemoryWorld.create(target="main-0")
    k = Kernel(db, world.environment())
    k.create_graph("g", [TaskPolicy(f"w{i}") for i in range(procs)])
    head = k.ledger_head()
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(procs), ctx.Queue()
    ps = [ctx.Process(target=_writer, args=(db, i, count, barrier, out)) for i in range(procs)]
    for p in ps:
        p.start()
    got = [out.get(timeout=600) for _ in ps]
    for p in ps:
        p.join()
    begin, end = min(g[1] for g in got), max(g[2] for g in got)
    lat = sorted(x for g in got for x in g[3])
    verdict = k.verify_ledger()
    events = k.ledger_head() - head
    k.close()
    return {"writers": procs, "requests": procs * count, "per-second": procs * count / (end - begin),
            "p99-ms": lat[int(0.99 * (len(lat) - 1))] * 1000,
            "answered": sum(g[4] for g in got), "ledger-ok": verdict.ok,
            "events": events, "expected-events": procs * (count + 1)}


def scaling(server_dsn: str | None, count: int) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {"sqlite": [], "postgresql": []}
    for procs in (1, 2, 4, 8):
        with tempfile.TemporaryDirectory(prefix="wgk-bench-pg-") as tmp:
            say(f"  {procs} writers on SQLite ...")
            out["sqlite"].append(writers(os.path.join(tmp, "k.db"), procs, count))
        if server_dsn is not None:
            with Schema(server_dsn) as dsn:
                say(f"  {procs} writers on PostgreSQL ...")
                out["postgresql"].append(writers(dsn, procs, count))
    return out


def run(quick: bool = False):
    t0 = time.perf_counter()
    server_dsn = server()
    figures, checks, notes = [], [], []
    if server_dsn is not None:
        rounds, batch = (6, 25) if quick else (20, 50)
        say(f"  durable requests on PostgreSQL: {rounds} interleaved rounds of {batch} ...")
        d = durable(server_dsn, rounds, batch)
        figures.append(Figure("durable requests/s on PostgreSQL, heartbeats, one commit each",
                              d["kernel"], "requests/s", "raw psycopg commit-per-row loop",
                              d["raw"], target=0.9,
                              note=f"{d['requests']:,} requests per column, interleaved rounds"))
    for backend, rows in scaling(server_dsn, 60 if quick else 300).items():
        for r in rows:
            figures.append(Figure(f"{r['writers']} writers on disjoint tasks, {backend}",
                                  r["per-second"], "requests/s",
                                  note=f"p99 {r['p99-ms']:.1f} ms; {r['requests']:,} requests"))
            checks.append(Check(f"{backend}, {r['writers']} writers: every request answered, "
                                "one ledger event each, the chain verifies",
                                r["answered"] == r["requests"] and r["ledger-ok"]
                                and r["events"] == r["expected-events"],
                                f"{r['answered']}/{r['requests']} answered, {r['events']} events"))
    missing = [] if server_dsn is not None else [
        "no PostgreSQL server (set WGK_BENCH_POSTGRES or WGK_TEST_POSTGRES): SQLite only"]
    result = settle(NAME, figures, checks, notes, missing, t0)
    if missing:
        result.status = PEER_UNAVAILABLE if result.status != "failed" else result.status
    return result


if __name__ == "__main__":
    sys.exit(main(NAME, run))
