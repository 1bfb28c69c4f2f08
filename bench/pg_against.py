"""The request path on PostgreSQL of this checkout against another revision's, side by side
in one process, beside the raw psycopg loop.

    python bench/pg_against.py main                  # 30 rounds of 13 requests per column
    python bench/pg_against.py main --rounds 60 --batch 13 --json

The server is ``WGK_BENCH_POSTGRES`` (else ``WGK_TEST_POSTGRES``); each column runs in a
schema of its own, dropped afterwards. The columns (``bench_pg.RawPg``, then heartbeats and
completion transactions on this checkout's kernel and on the other revision's, imported as
``impl_against`` does) take turns in small rounds, the order rotating, so that they see the
same server and the same load. Per column: durable requests/s (wall time), the ratio to the
raw loop, the client's CPU per request, the server process's (when the server runs on this
host: ``/proc``) and, for a kernel, its round trips per request.
Writes ``bench/results/pg-against-<date>.json``.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_pg import RawPg, Schema, backend_cpu, server  # noqa: E402
from gate_against import BENCH  # noqa: E402
from impl_against import other_impl  # noqa: E402
from impl_workloads import Completions, Heartbeats  # noqa: E402

import wgk.impl  # noqa: E402
from wgk.impl import Pragmas  # noqa: E402


def alternated(columns: dict, n_rounds: int, batch: int) -> tuple[dict, dict]:
    """Each column's wall and CPU seconds over ``n_rounds`` rounds of ``batch`` requests, who
    goes first rotating by round."""
    names = list(columns)
    wall, cpu = dict.fromkeys(names, 0.0), dict.fromkeys(names, 0.0)
    for i in range(n_rounds):
        for name in names[i % len(names):] + names[:i % len(names)]:
            c0 = time.process_time()
            wall[name] += columns[name].run(batch)
            cpu[name] += time.process_time() - c0
    return wall, cpu


def measured(name: str, wall: dict, cpu: dict, n: int, conns: dict, server0: dict) -> dict:
    """Column ``name``'s rate, its ratio to the raw loop, and its client's and server's CPU
    per request (the server's when it runs on this host)."""
    f = {"per-second": n / wall[name], "ratio-to-raw": wall["raw"] / wall[name],
         "client-cpu-ms": cpu[name] / n * 1e3}
    server = backend_cpu(conns[name])
    if server is not None and server0[name] is not None:
        f["server-cpu-ms"] = (server - server0[name]) / n * 1e3
    return f


def rounds(dsn: str, impls: dict, n_rounds: int, batch: int) -> dict:
    with contextlib.ExitStack() as schemas:
        def fresh() -> str:
            return schemas.enter_context(Schema(dsn))
        columns = {"raw": RawPg(fresh())}
        for label, impl in impls.items():
            for cls, short in ((Heartbeats, "heartbeats"), (Completions, "completion")):
                columns[f"{short} {label}"] = cls(fresh(), Pragmas(), impl)
        for column in columns.values():
            column.run(batch)                      # warm: prepared statements, caches
        names = list(columns)
        trips0 = {n: c.kernel.store.conn.round_trips for n, c in columns.items() if n != "raw"}
        conns = {n: c.conn if n == "raw" else c.kernel.store.conn.raw for n, c in columns.items()}
        server0 = {n: backend_cpu(c) for n, c in conns.items()}
        wall, cpu = alternated(columns, n_rounds, batch)
        n = n_rounds * batch
        out = {}
        for name in names:
            f = measured(name, wall, cpu, n, conns, server0)
            if name != "raw":
                f["round-trips"] = (columns[name].kernel.store.conn.round_trips - trips0[name]) / n
                columns[name].kernel.close()
            out[name] = f
        columns["raw"].conn.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rev", help="the revision to measure against (e.g. main)")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--batch", type=int, default=13)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    dsn = server()
    if dsn is None:
        print("pg_against: no server (set WGK_BENCH_POSTGRES or WGK_TEST_POSTGRES)",
              file=sys.stderr)
        return 2
    sha, other = other_impl(args.rev)
    load0 = os.getloadavg()[0]
    figures = rounds(dsn, {"this": wgk.impl, args.rev: other}, args.rounds, args.batch)
    result = {"against": args.rev, "commit": sha, "rounds": args.rounds, "batch": args.batch,
              "load": [round(load0, 2), round(os.getloadavg()[0], 2)], "figures": figures}
    day = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    (BENCH / "results" / f"pg-against-{day}.json").write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"against {args.rev} ({sha[:12]}) on PostgreSQL, load {result['load'][0]} -> "
          f"{result['load'][1]}, {args.rounds} rounds of {args.batch} per column")
    for name, f in figures.items():
        trips = f"   round trips {f['round-trips']:.2f}" if "round-trips" in f else ""
        if "server-cpu-ms" in f:
            trips = f"   server CPU {f['server-cpu-ms']:.2f} ms" + trips
        print(f"  {name:20} {f['per-second']:8,.1f} /s   ratio to raw {f['ratio-to-raw']:.2f}"
              f"   client CPU {f['client-cpu-ms']:.2f} ms{trips}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
