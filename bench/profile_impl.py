"""Where one durable request's time goes: cProfile of the bench's two workloads on a
temporary kernel (synchronous=OFF by default: the CPU part), and the SQL statements each
request runs (``sqlite3`` trace callback).

    python bench/profile_impl.py                  # 2,000 heartbeats, 2,000 completion requests
    python bench/profile_impl.py --count 5000 --top 40 --sync FULL
"""
from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from impl_workloads import Completions, Heartbeats  # noqa: E402

from wgk.impl import Pragmas  # noqa: E402


LITERAL = re.compile(r"'(?:[^']|'')*'|\b\d+\b")


def statements(load, count: int) -> tuple[float, collections.Counter]:
    """SQL statements per request over ``count`` requests (graph edits, which the bench
    does not time, left out), and which ones, their literals shown as ``?``."""
    seen: collections.Counter = collections.Counter()
    k, counting = load.kernel, [True]

    def trace(sql: str) -> None:
        if counting[0]:
            seen.update([LITERAL.sub("?", " ".join(sql.split()))[:100]])

    def add_tasks(tasks, add=k.add_tasks):
        counting[0] = False
        try:
            add(tasks)
        finally:
            counting[0] = True

    k.add_tasks = add_tasks
    k.conn.set_trace_callback(trace)
    try:
        load.run(count)
    finally:
        k.conn.set_trace_callback(None)
        del k.add_tasks
    return sum(seen.values()) / count, seen


def profile(load, count: int, top: int, sort: str) -> None:
    load.run(50)                                   # caches warm, as in the bench's rounds
    prof = cProfile.Profile()
    start = time.perf_counter()
    prof.enable()
    load.run(count)
    prof.disable()
    wall = time.perf_counter() - start
    print(f"\n=== {load.name}: {count:,} requests, {wall / count * 1e6:.0f} us each under "
          f"the profiler ===")
    pstats.Stats(prof).sort_stats(sort).print_stats(top)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--count", type=int, default=2000)
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--sort", default="tottime")
    p.add_argument("--sync", default="OFF")
    p.add_argument("--statements", action="store_true", help="only count the SQL statements")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="wgk-profile-") as tmp:
        pragmas = Pragmas(synchronous=args.sync)
        for cls in (Heartbeats, Completions):
            load = cls(os.path.join(tmp, f"{cls.__name__}.db"), pragmas)
            per, seen = statements(load, 260)
            print(f"\n=== {load.name}: {per:.1f} SQL statements per request ===")
            for sql, n in seen.most_common():
                print(f"  {n / 260:6.2f}  {sql}")
            if not args.statements:
                profile(load, args.count, args.top, args.sort)
            load.kernel.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
