"""Speed of the implementation, measured side by side in one run.

    python bench/bench_impl.py            # full run (readiness up to 100k tasks)
    python bench/bench_impl.py --quick    # smaller, for a smoke run
    python bench/bench_impl.py --json

Figures:

1. durable accepted requests/s against a raw SQLite commit-per-row loop with
   the same pragmas (WAL, synchronous=FULL, busy timeout, one BEGIN IMMEDIATE
   per row), in the same directory, in interleaved rounds so that both see the
   same disk; two kernel workloads, one commit per request: heartbeats
   (evidence-only) and the whole completion transaction (13 request kinds).
   Then the heartbeats through group commit (``Kernel.handle_batch``, 16 per
   commit): not the target's comparison (the raw loop commits one row at a
   time), but what an embedder serving many workers at once gets. The same
   again with synchronous=OFF shows the CPU part alone;
2. duplicates/s, answered without a write (checked: no change counted, the
   database's data_version and the WAL's size unchanged);
3. dependency readiness for 1k/10k/100k tasks: the indexed pending-count query
   against an anti-join that recomputes readiness from the edges;
4. ledger rebuild: events/s replayed into a fresh database (every table);
5. peak memory (RSS) of the process.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time

from wgk.impl import Kernel, MemoryWorld, Pragmas, TaskPolicy

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import impl_workloads  # noqa: E402
from impl_workloads import Completions, GroupedHeartbeats, Heartbeats, Raw, RawRows, complete  # noqa: E402


def durable_rates(workdir: str, pragmas: Pragmas, rounds: int, batch: int) -> dict:
    """Rates over all rounds, and the median of the per-round ratios: the columns take turns
    in small batches (rotating who goes first) so that all of them see the same disk."""
    # synchronous=OFF measures the CPU part: in the thread's CPU time, which the other
    # processes of a loaded machine do not stretch (FULL: wall time, the disk included)
    impl_workloads.CLOCK["now"] = time.thread_time if pragmas.synchronous == "OFF" \
        else time.perf_counter
    raw = Raw(os.path.join(workdir, f"raw-{pragmas.synchronous}.db"), pragmas)
    loads = [Heartbeats(os.path.join(workdir, f"hb-{pragmas.synchronous}.db"), pragmas),
             Completions(os.path.join(workdir, f"tx-{pragmas.synchronous}.db"), pragmas),
             GroupedHeartbeats(os.path.join(workdir, f"ghb-{pragmas.synchronous}.db"), pragmas)]
    same = {loads[0].name: RawRows(os.path.join(workdir, f"rawhb-{pragmas.synchronous}.db"),
                                   pragmas, "heartbeat"),
            loads[1].name: RawRows(os.path.join(workdir, f"rawtx-{pragmas.synchronous}.db"),
                                   pragmas, "completion")}
    columns = [("raw", raw)] + [(f"raw rows of {n}", r) for n, r in same.items()] \
        + [(w.name, w) for w in loads]
    times = {name: 0.0 for name, _ in columns}
    per_round: dict[str, list[float]] = {w.name: [] for w in loads}
    for i in range(rounds):
        elapsed = {}
        order = columns[i % len(columns):] + columns[:i % len(columns)]
        for name, column in order:
            elapsed[name] = column.run(batch)
            times[name] += elapsed[name]
        for w in loads:
            per_round[w.name].append(elapsed["raw"] / elapsed[w.name])
    n = rounds * batch
    rates = {name: n / t for name, t in times.items()}
    return {"synchronous": pragmas.synchronous, "requests": n, "rates": rates,
            "ratios": {w.name: rates[w.name] / rates["raw"] for w in loads},
            "median-round-ratios": {name: statistics.median(v) for name, v in per_round.items()},
            # against a raw loop writing the same rows a request writes, one transaction each
            "same-rows-ratios": {n: rates[n] / rates[f"raw rows of {n}"] for n in same},
            "load-average": os.getloadavg(),
            "loads": loads}


def duplicates(load: Heartbeats) -> dict:
    k = load.kernel
    watcher = sqlite3.connect(k.store.path)
    version = watcher.execute("PRAGMA data_version").fetchone()[0]
    wal = k.store.path + "-wal"
    wal_size = os.path.getsize(wal) if os.path.exists(wal) else 0
    changes = k.conn.total_changes
    start = time.perf_counter()
    answers = [k.handle(r)["decision"] for r in load.sent]
    elapsed = time.perf_counter() - start
    writes = k.conn.total_changes - changes
    unchanged = (watcher.execute("PRAGMA data_version").fetchone()[0] == version
                 and (os.path.getsize(wal) if os.path.exists(wal) else 0) == wal_size)
    watcher.close()
    return {"requests": len(answers), "per-second": len(answers) / elapsed,
            "all-duplicates": set(answers) == {"duplicate"}, "writes": writes,
            "database-unchanged": unchanged}


# --- readiness -------------------------------------------------------------------------------------

#: where the time goes against the raw loop (bench/README.md, the request path on SQLite)
WHY = ("the raw loop inserts one row; a request reads and checks its key, decides, and writes "
       "the record's rows, the journal, the evidence and a hash-chained ledger event (several "
       "WAL frames), with about 50 us of Python spread over some forty calls between commits "
       "(parsing, the decision and its context, the event's body and hash)")

ANTI_JOIN = (
    "SELECT t.name FROM task_view v JOIN tasks t ON t.id = v.task WHERE v.status = 'open' "
    "AND NOT EXISTS (SELECT 1 FROM edges e JOIN task_view d ON d.task = e.dep "
    "WHERE e.task = v.task AND d.satisfied = 0) ORDER BY t.id")


def layered(n: int) -> list[TaskPolicy]:
    """n tasks in layers of width ~sqrt(n); each depends on two tasks of the layer above."""
    width = max(2, int(n ** 0.5))
    specs = []
    for i in range(n):
        deps = () if i < width else (f"t{i - width}", f"t{i - width + 1 if (i + 1) % width else i - width}")
        specs.append(TaskPolicy(f"t{i}", tuple(sorted(set(deps)))))
    return specs


def timed(fn, repeats: int) -> tuple[float, object]:
    samples, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), result


def readiness(workdir: str, n: int) -> dict:
    world = MemoryWorld.create(target="main-0")
    k = Kernel(os.path.join(workdir, f"ready-{n}.db"), world.environment(),
               pragmas=Pragmas(synchronous="OFF"))      # the set-up is not what is measured
    specs = layered(n)
    start = time.perf_counter()
    k.create_graph("g", specs)
    build = time.perf_counter() - start
    width = max(2, int(n ** 0.5))
    for i in range(width):                               # the first layer is Done
        complete(k, world, f"t{i}")
    indexed, ready = timed(k.ready, 15)
    naive, naive_ready = timed(lambda: [r for (r,) in k.conn.execute(ANTI_JOIN)], 5)
    assert ready == naive_ready and len(ready) == width, (len(ready), len(naive_ready))
    start = time.perf_counter()
    report = k.rebuild()
    rebuild = time.perf_counter() - start
    assert report.ok, report.differences
    k.close()
    return {"tasks": n, "ready": len(ready), "indexed-ms": indexed * 1e3,
            "anti-join-ms": naive * 1e3, "graph-build-s": build,
            "rebuild-events": report.events, "rebuild-events-per-s": report.events / rebuild}


# --- the run --------------------------------------------------------------------------------------


def sizes_of(quick: bool) -> tuple[int, ...]:
    return (1_000, 10_000) if quick else (1_000, 10_000, 100_000)


def phase(name: str, quick: bool, workdir: str) -> dict:
    """One part of the benchmark, meant to run in its own process (its own peak RSS)."""
    rounds, batch = (12, 25) if quick else (40, 50)
    if name in ("durable", "cpu"):
        out = durable_rates(workdir, Pragmas(synchronous="FULL" if name == "durable" else "OFF"),
                            rounds, batch)
        loads = out.pop("loads")
        if name == "durable":
            out["duplicates"] = duplicates(loads[0])
    else:
        out = readiness(workdir, int(name.split("-")[1]))
    out["peak-rss-mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def in_process(name: str, quick: bool) -> dict:
    import subprocess
    workdir = tempfile.mkdtemp(prefix="wgk-bench-")
    try:
        argv = [sys.executable, __file__, "--phase", name, "--dir", workdir] + (["--quick"] if quick else [])
        p = subprocess.run(argv, capture_output=True, text=True, check=True)
        return json.loads(p.stdout)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def run(quick: bool = False):
    """Every figure as data, each part in its own process."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from common import Check, Figure, say, settle
    t0 = time.perf_counter()
    figures, checks = [], []
    for name, title in (("durable", "synchronous=FULL"), ("cpu", "synchronous=OFF, the CPU part")):
        say(f"  durable requests, {title} ...")
        d = in_process(name, quick)
        for load, ratio in d["ratios"].items():
            one_per_commit = "group commit" not in load
            figures.append(Figure(f"accepted requests/s, {load}, {title}", d["rates"][load],
                                  "requests/s", "raw SQLite commit-per-row", d["rates"]["raw"],
                                  target=0.9 if name == "durable" and one_per_commit else None,
                                  why=WHY,
                                  note=f"{d['requests']:,} requests per column in interleaved "
                                       f"rounds; median round ratio "
                                       f"{d['median-round-ratios'][load]:.2f}"))
        figures.append(Figure(f"peak memory, {name} requests", d["peak-rss-mb"], "MB RSS",
                              higher_is_better=False))
        if name == "durable":
            dup = d["duplicates"]
            figures.append(Figure("duplicate requests/s (stored response, no write)",
                                  dup["per-second"], "requests/s",
                                  note=f"{dup['requests']:,} re-sent heartbeats"))
            checks.append(Check("every re-sent request answered as a duplicate",
                                dup["all-duplicates"]))
            checks.append(Check("duplicates write nothing (data_version and WAL size unchanged)",
                                dup["database-unchanged"] and dup["writes"] == 0,
                                f"{dup['writes']} rows written"))
    for n in sizes_of(quick):
        say(f"  readiness and rebuild on {n:,} tasks ...")
        x = in_process(f"readiness-{n}", quick)
        figures.append(Figure(f"readiness query, {n:,} tasks", x["indexed-ms"], "ms",
                              "anti-join over the edges", x["anti-join-ms"], higher_is_better=False,
                              note=f"{x['ready']} ready; median of 15 (anti-join: of 5)"))
        figures.append(Figure(f"ledger rebuild, {n:,} tasks", x["rebuild-events-per-s"],
                              "events/s", note=f"{x['rebuild-events']:,} events, every table "
                                               "compared with the live one"))
        figures.append(Figure(f"peak memory, {n:,} tasks (graph, readiness, rebuild)",
                              x["peak-rss-mb"], "MB RSS", higher_is_better=False))
    return settle("impl", figures, checks, [
        "each part runs in its own process, so each peak memory is its own"], [], t0)



def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer requests, graphs up to 10k tasks")
    p.add_argument("--json", action="store_true")
    p.add_argument("--dir", help="where the databases go (default: a temporary directory)")
    p.add_argument("--phase", help=argparse.SUPPRESS)
    p.add_argument("--requests-only", action="store_true",
                   help="only the durable and CPU request rates (no readiness, no rebuild)")
    args = p.parse_args(argv)
    if args.phase:
        json.dump(phase(args.phase, args.quick, args.dir or tempfile.mkdtemp()), sys.stdout)
        return 0
    rounds, batch = (12, 25) if args.quick else (40, 50)
    sizes = (1_000, 10_000) if args.quick else (1_000, 10_000, 100_000)
    sizes = () if args.requests_only else sizes
    workdir = tempfile.mkdtemp(prefix="wgk-bench-", dir=args.dir)
    log = (lambda m: None) if args.json else (lambda m: print(m, file=sys.stderr, flush=True))
    try:
        log(f"durable requests: {rounds} interleaved rounds of {batch} (synchronous=FULL) ...")
        full = durable_rates(workdir, Pragmas(synchronous="FULL"), rounds, batch)
        log("the same with synchronous=OFF (the CPU part) ...")
        cpu = durable_rates(workdir, Pragmas(synchronous="OFF"), rounds, batch)
        log("duplicates ...")
        dup = duplicates(full["loads"][0])
        ready = []
        for n in sizes:
            log(f"readiness and rebuild on {n:,} tasks ...")
            ready.append(readiness(workdir, n))
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        result = {"durable": {k: v for k, v in full.items() if k != "loads"},
                  "cpu": {k: v for k, v in cpu.items() if k != "loads"},
                  "duplicates": dup, "readiness": ready, "peak-rss-mb": peak_mb}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
    else:
        print_report(result)
    return 0


def print_report(r: dict) -> None:
    for section, title in (("durable", "durable accepted requests, WAL + synchronous=FULL, "
                                        "one BEGIN IMMEDIATE each (target: ratio >= 0.90)"),
                           ("cpu", "the same with synchronous=OFF: the CPU part alone")):
        d = r[section]
        print(f"{title}; {d['requests']:,} requests per column, taking turns")
        print(f"  {'raw SQLite commit-per-row loop':40} {d['rates']['raw']:9,.0f} /s")
        for name, ratio in d["ratios"].items():
            print(f"  {'kernel: ' + name:40} {d['rates'][name]:9,.0f} /s   ratio {ratio:.2f}"
                  f"   (median of rounds {d['median-round-ratios'][name]:.2f})")
        for name, ratio in d["same-rows-ratios"].items():
            print(f"  {'raw rows of ' + name:40} {d['rates']['raw rows of ' + name]:9,.0f} /s   "
                  f"kernel / same rows {ratio:.2f}")
        print("  load average (1, 5, 15 min) at the end: "
              + ", ".join(f"{x:.2f}" for x in d["load-average"]))
    dup = r["duplicates"]
    print(f"duplicates answered: {dup['per-second']:,.0f} /s over {dup['requests']:,} re-sent "
          f"requests; rows written {dup['writes']}, database unchanged: {dup['database-unchanged']}")
    if not r["readiness"]:
        return
    print("dependency readiness (median): indexed pending count vs anti-join over the edges")
    for x in r["readiness"]:
        print(f"  {x['tasks']:>8,} tasks, {x['ready']:4} ready: {x['indexed-ms']:8.2f} ms "
              f"vs {x['anti-join-ms']:8.2f} ms   (graph built in {x['graph-build-s']:.1f} s)")
    print("ledger rebuild into a fresh database (every table compared):")
    for x in r["readiness"]:
        print(f"  {x['rebuild-events']:>8,} events: {x['rebuild-events-per-s']:9,.0f} events/s")
    print(f"peak memory (RSS): {r['peak-rss-mb']:.0f} MB")


if __name__ == "__main__":
    sys.exit(main())
