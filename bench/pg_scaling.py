"""Parts of ``bench_pg``: writers on disjoint tasks and readiness of many tasks, on
PostgreSQL and on SQLite side by side.

Writers: each writer a process with its own connection and its own task, sending
heartbeats (one commit each) after all have met at a barrier; total throughput from
the first start to the last finish and the p99 latency of one request. Checked:
every request answered, one request event each in the ledger, the chain verifies.

Readiness: ``n`` tasks in layers (each depending on two of the layer above, as in
``bench_impl``), the first layer Done; ``Kernel.ready()`` timed (median of 15) and
checked against an anti-join that recomputes readiness from the edges.
"""
from __future__ import annotations

import multiprocessing
import os
import statistics
import tempfile
import time

from bench_impl import ANTI_JOIN, layered
from impl_workloads import MINT, OWNER, TOKEN, cap, complete
from common import Check, Figure, say

from wgk.impl import Kernel, MemoryWorld, Pragmas, TaskPolicy

def _writer(db: str, me: int, count: int, barrier, out) -> None:
    world = MemoryWorld.create(target="main-0")
    k = Kernel(db, world.environment())
    task = f"w{me}"
    k.handle({"kind": "dispatch", "actor": "daemon", "task": task, "key": f"d{me}",
              "expected-attempt": 0, "owner": OWNER, "mint": MINT})
    barrier.wait(timeout=120)
    start, latencies, answered = time.perf_counter(), [], 0
    for n in range(count):
        t0 = time.perf_counter()
        a = k.handle({"kind": "heartbeat", "actor": "worker", "task": task,
                      "key": f"hb{me}-{n}", "cap": cap(task), "evidence": f"b{me}-{n}",
                      "token": TOKEN})
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
    got = [out.get(timeout=900) for _ in ps]
    for p in ps:
        p.join()
    begin, end = min(g[1] for g in got), max(g[2] for g in got)
    lat = sorted(x for g in got for x in g[3])
    verdict = k.verify_ledger()
    events = k.conn.execute("SELECT count(*) FROM ledger WHERE seq > ? AND event = 'request'",
                            (head,)).fetchone()[0]
    k.close()
    return {"writers": procs, "requests": procs * count, "per-second": procs * count / (end - begin),
            "p99-ms": lat[int(0.99 * (len(lat) - 1))] * 1000, "load": os.getloadavg()[0],
            "answered": sum(g[4] for g in got), "ledger-ok": verdict.ok,
            "events": events, "expected-events": procs * (count + 1)}


def scaling(server_dsn: str | None, count: int, schema) -> dict[str, list[dict]]:
    """1, 2, 4 and 8 writers, SQLite then PostgreSQL at each count (side by side in time)."""
    out: dict[str, list[dict]] = {"sqlite": [], "postgresql": []}
    for procs in (1, 2, 4, 8):
        with tempfile.TemporaryDirectory(prefix="wgk-bench-pg-") as tmp:
            say(f"  {procs} writers on SQLite ...")
            out["sqlite"].append(writers(os.path.join(tmp, "k.db"), procs, count))
        if server_dsn is not None:
            with schema(server_dsn) as dsn:
                say(f"  {procs} writers on PostgreSQL ...")
                out["postgresql"].append(writers(dsn, procs, count))
    return out


def scaling_figures(server_dsn: str | None, quick: bool, schema) -> tuple[list, list]:
    figures, checks = [], []
    for backend, rows in scaling(server_dsn, 60 if quick else 300, schema).items():
        one = rows[0]["per-second"] if rows else None
        for r in rows:
            figures.append(Figure(
                f"{r['writers']} writers on disjoint tasks, {backend}", r["per-second"],
                "requests/s", f"1 writer, {backend}" if r["writers"] > 1 else None,
                one if r["writers"] > 1 else None,
                note=f"p99 {r['p99-ms']:.1f} ms; {r['requests']:,} requests; load {r['load']:.1f}"))
            checks.append(Check(f"{backend}, {r['writers']} writers: every request answered, "
                                "one ledger event each, the chain verifies",
                                r["answered"] == r["requests"] and r["ledger-ok"]
                                and r["events"] == r["expected-events"],
                                f"{r['answered']}/{r['requests']} answered, {r['events']} events"))
    return figures, checks


# --- readiness ---------------------------------------------------------------------------


def readiness(db: str, n: int) -> dict:
    world = MemoryWorld.create(target="main-0")
    k = Kernel(db, world.environment(), pragmas=Pragmas(synchronous="OFF"))  # set-up: not measured
    start = time.perf_counter()
    k.create_graph("g", layered(n))
    build = time.perf_counter() - start
    width = max(2, int(n ** 0.5))
    for i in range(width):                               # the first layer is Done
        complete(k, world, f"t{i}")
    samples, ready = [], None
    for _ in range(15):
        t0 = time.perf_counter()
        ready = k.ready()
        samples.append(time.perf_counter() - t0)
    naive = [r for (r,) in k.conn.execute(ANTI_JOIN)]
    k.close()
    return {"tasks": n, "ready": ready, "agrees": ready == naive and len(ready) == width,
            "ms": statistics.median(samples) * 1e3, "build-s": build, "load": os.getloadavg()[0]}


def readiness_figures(server_dsn: str | None, quick: bool, schema) -> tuple[list, list]:
    n = 10_000 if quick else 100_000
    say(f"  readiness of {n:,} tasks on SQLite ...")
    with tempfile.TemporaryDirectory(prefix="wgk-bench-pg-") as tmp:
        results = {"sqlite": readiness(os.path.join(tmp, "ready.db"), n)}
    if server_dsn is not None:
        say(f"  readiness of {n:,} tasks on PostgreSQL ...")
        with schema(server_dsn) as dsn:
            results["postgresql"] = readiness(dsn, n)
    figures, checks = [], []
    for backend, r in results.items():
        figures.append(Figure(f"readiness query, {n:,} tasks, {backend}", r["ms"], "ms",
                              note=f"{len(r['ready']):,} ready; graph built in "
                                   f"{r['build-s']:.0f} s; load {r['load']:.1f}"))
        checks.append(Check(f"readiness on {backend} agrees with the anti-join", r["agrees"],
                            f"{len(r['ready'])} ready"))
    if len(results) == 2:
        checks.append(Check("both backends find the same ready tasks",
                            results["sqlite"]["ready"] == results["postgresql"]["ready"], ""))
    return figures, checks
