"""Where a heartbeat's server CPU goes on PostgreSQL, statement by statement: the statements
one heartbeat of this checkout's kernel sends (its texts and bound values, recorded from its
connection) replayed through the same connection, whole and with each statement left out,
in alternating blocks; the server process's CPU (``/proc``) per transaction of each variant,
the difference to the whole being that statement's share. Then the seal's CPU per chained
ledger row (16 appends committed, then one seal, as a connection seals every 16th commit),
with the ledger's pages filled as they are and filled to half (room on the page for a
chained row's new version: a heap-only update), side by side.

    python bench/pg_statements.py                    # 200 transactions x 6 blocks per variant
    python bench/pg_statements.py --count 300 --blocks 8 --json

The server is ``WGK_BENCH_POSTGRES`` (else ``WGK_TEST_POSTGRES``), on this host (its process's
CPU is read from ``/proc``); each part runs in a schema of its own, dropped afterwards. A
replayed heartbeat takes a key and an evidence id of its own (the recorded ones with a new
number); every 16th carries the seal before its COMMIT, as the kernel's do. Leaving a
statement out changes what follows only where it must: without the ledger append the journal
row takes the session's last number. The figures are differences of sums over thousands of
transactions on a shared machine: read them with the spread between blocks (printed).
Writes ``bench/results/pg-statements-<date>.json``.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_pg import Schema, backend_cpu, server  # noqa: E402
from gate_against import BENCH  # noqa: E402
from impl_workloads import Heartbeats  # noqa: E402

import wgk.impl  # noqa: E402
from wgk.impl import Kernel, MemoryWorld, Pragmas, TaskPolicy  # noqa: E402
from wgk.impl.storage import pg_sql  # noqa: E402

NAMES = {pg_sql.BEGIN: "BEGIN", pg_sql.LOCK: "the lock function", "COMMIT": "COMMIT",
         pg_sql.APPEND: "the ledger append"}


def label(text: str) -> str:
    return NAMES.get(text) or " ".join(text.split()[:3])


def recorded(w: Heartbeats) -> tuple[list, int]:
    """One heartbeat's round trips as sent (texts and values; None ends a round trip), and
    the number its key and evidence id carry."""
    conn, log = w.kernel.store.conn, []
    plain = conn.sync

    def sync() -> None:
        log.append([(q.sql, None if q.params is None else list(q.params)) for q in conn.queue])
        plain()
    conn.sync = sync
    n = w.n + 1
    w.run(1)
    conn.sync = plain
    return [s for trip in log for s in trip + [None]], n


def replayer(w: Heartbeats, n0: int):
    conn, count = w.kernel.store.conn, [n0 + 100_000]

    def value(p, n: int):
        if isinstance(p, str):
            return p.replace(f"hb{n0}", f"hb{n}").replace(f"beat-{n0}", f"beat-{n}")
        return p

    def one(statements: list, seal: bool) -> None:
        count[0] += 1
        for s in statements:
            if s is None:
                conn.sync()
                continue
            text, params = s
            if seal and text == "COMMIT":
                conn._put(pg_sql.SEAL_NOW, (False,))
            conn._put(text, None if params is None else [value(p, count[0]) for p in params])
    return one


def statements(dsn: str, count: int, blocks: int) -> dict:
    """Each variant's server CPU per transaction (us): the mean, and each block's."""
    with Schema(dsn) as d:
        w = Heartbeats(d, Pragmas(), wgk.impl)
        w.run(26)                                  # warm: prepared statements, caches
        whole, n0 = recorded(w)
        one = replayer(w, n0)
        variants = {"whole heartbeat": whole}
        for s in whole:
            if s is not None and s[0] not in (pg_sql.BEGIN, "COMMIT"):
                variants[f"without {label(s[0])}"] = [x for x in whole if x is not s]
        variants["BEGIN and COMMIT alone"] = [x for x in whole if x is None or x[0] in (
            pg_sql.BEGIN, "COMMIT")]
        raw = w.kernel.store.conn.raw
        for v in variants.values():
            for k in range(16):
                one(v, k == 15)
        per: dict[str, list[float]] = {v: [] for v in variants}
        names = list(variants)
        for b in range(blocks):
            for name in names[b % len(names):] + names[:b % len(names)]:
                c0 = backend_cpu(raw)
                for k in range(count):
                    one(variants[name], k % 16 == 15)
                per[name].append((backend_cpu(raw) - c0) / count * 1e6)
        w.kernel.close()
    return {v: {"mean": statistics.fmean(us), "blocks": us} for v, us in per.items()}


BODY = ('{"request":{"kind":"heartbeat","task":"t1","key":"hb1"},"response":'
        '{"decision":"evidence-only","pad":"' + "x" * 300 + '"}}')


def seal(dsn: str, seals: int) -> dict:
    """The seal's server CPU per chained row, over ``seals`` seals of 16 rows each, with the
    ledger as it is and with its pages filled to half (``fillfactor = 50``: room for the
    chained rows' new versions on their page, a heap-only update), in alternating blocks;
    and the share of the seal's row updates that were heap-only."""
    append = pg_sql.APPEND.replace("%", "%%").replace("%%s", "%s")     # (psycopg's own marks)
    out = {}
    with contextlib.ExitStack() as stack:
        ledgers = {}
        for fill in (100, 50):
            k = Kernel(stack.enter_context(Schema(dsn)),
                       MemoryWorld.create(target="main-0").environment())
            k.create_graph("g", [TaskPolicy("t1")])
            k.store.conn.raw.execute(f"ALTER TABLE ledger SET (fillfactor = {fill})")
            ledgers[fill] = [k, 0.0, 0]
        for n in range(seals + 10):
            for fill in (ledgers if n % 2 else reversed(ledgers)):
                k, c = ledgers[fill][0], ledgers[fill][0].store.conn.raw
                c.execute("BEGIN")
                for i in range(16):
                    c.execute(append, ("heartbeat", "t1", f"hb{n}-{i}", BODY))
                c.execute("COMMIT")
                c0 = backend_cpu(c)
                c.execute(pg_sql.SEAL_NOW, (False,))
                if n >= 10:                        # (the first ten: warm)
                    ledgers[fill][1] += backend_cpu(c) - c0
                    ledgers[fill][2] += 16
        for fill, (k, cpu, rows) in ledgers.items():
            c = k.store.conn.raw
            c.execute("SELECT pg_stat_force_next_flush()")
            c.execute("SELECT pg_stat_clear_snapshot()")
            upd, hot = c.execute("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables "
                                 "WHERE relid = 'ledger'::regclass").fetchone()
            pages = c.execute("SELECT pg_relation_size('ledger') / 8192").fetchone()[0]
            assert k.verify_ledger().ok
            k.close()
            out[f"fillfactor {fill}"] = {"per-row-us": cpu / rows * 1e6, "rows": rows,
                                         "heap-only": hot / max(upd, 1), "pages": pages}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--count", type=int, default=200, help="transactions per block")
    ap.add_argument("--blocks", type=int, default=6, help="blocks per variant")
    ap.add_argument("--seals", type=int, default=400)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    dsn = server()
    if dsn is None:
        print("pg_statements: no server (set WGK_BENCH_POSTGRES or WGK_TEST_POSTGRES)",
              file=sys.stderr)
        return 2
    load0 = os.getloadavg()[0]
    figures = statements(dsn, args.count, args.blocks)
    sealed = seal(dsn, args.seals)
    result = {"count": args.count, "blocks": args.blocks, "statements": figures, "seal": sealed,
              "load": [round(load0, 2), round(os.getloadavg()[0], 2)]}
    day = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    (BENCH / "results" / f"pg-statements-{day}.json").write_text(json.dumps(result, indent=2)
                                                                 + "\n")
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    whole = figures["whole heartbeat"]["mean"]
    print(f"server CPU per transaction, us ({args.count} x {args.blocks} per variant, load "
          f"{result['load'][0]} -> {result['load'][1]}); share = whole - variant")
    for name, f in figures.items():
        share = "" if name == "whole heartbeat" else f"   share {whole - f['mean']:+7.1f}"
        spread = f"{min(f['blocks']):.0f}-{max(f['blocks']):.0f}"
        print(f"  {name:42} {f['mean']:7.1f}  (blocks {spread}){share}")
    for name, f in sealed.items():
        print(f"the seal, ledger at {name}: {f['per-row-us']:.1f} us per chained row "
              f"({f['rows']} rows), {f['heap-only']:.0%} of its updates heap-only, "
              f"{f['pages']} pages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
