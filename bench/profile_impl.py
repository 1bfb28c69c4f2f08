"""Where one durable request's time goes: cProfile of the bench's two workloads on a
temporary kernel (synchronous=OFF by default: the CPU part), and the SQL statements each
request runs (``sqlite3`` trace callback).

    python bench/profile_impl.py                  # 2,000 heartbeats, 2,000 completion requests
    python bench/profile_impl.py --count 5000 --top 40 --sync FULL
    python bench/profile_impl.py --split          # CPU per request: in SQLite, in Python
    python bench/profile_impl.py --pages          # pages written per request, by table
    python bench/profile_impl.py --sampled --count 20000   # shares by function and line, sampled

``--pages`` counts the pages each request writes (the WAL's frames of ``--count`` committed
requests, checkpoints held off, each frame's page mapped to its table or index by ``dbstat``),
beside the raw one-row loop and the raw loop writing the same rows.

``--sampled`` runs each workload without the profiler and samples the running line on a
``SIGPROF`` timer of the process's CPU (asked for every 0.1 ms; the system's timer tick is as
often as it comes, so take many requests): each function's share of a request with what it
calls, and each line's own share (no per-call cost distorts it, where cProfile's does).

``--split`` runs each workload without the profiler (whose cost per Python call hides the
split) on a connection whose every ``execute`` is timed in the thread's CPU time: what a
request spends inside SQLite by statement (COMMIT included) and what it spends in Python,
beside the raw loop writing the same rows, timed the same way.
"""
from __future__ import annotations

import argparse
import collections
import cProfile
import os
import pstats
import re
import signal
import sqlite3
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import impl_workloads  # noqa: E402
from impl_workloads import Completions, Heartbeats, Raw, RawRows  # noqa: E402

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


class Sampler:
    """Where the process's CPU goes, by sampling: every ``interval`` seconds of its CPU time a
    ``SIGPROF`` handler notes the running line (its own share) and every function on the
    stack (its share with what it calls, counted once per sample)."""

    def __init__(self, interval: float = 0.0001):
        self.interval = interval
        self.samples = 0
        self.within: collections.Counter = collections.Counter()
        self.own: collections.Counter = collections.Counter()

    def _sample(self, signum, frame) -> None:
        self.samples += 1
        code = frame.f_code
        self.own[f"{os.path.basename(code.co_filename)}:{frame.f_lineno} {code.co_name}"] += 1
        seen = set()
        while frame is not None:
            code = frame.f_code
            name = f"{os.path.basename(code.co_filename)}:{code.co_firstlineno} {code.co_name}"
            if name not in seen:
                seen.add(name)
                self.within[name] += 1
            frame = frame.f_back

    def __enter__(self) -> "Sampler":
        self._before = signal.signal(signal.SIGPROF, self._sample)
        signal.setitimer(signal.ITIMER_PROF, self.interval, self.interval)
        return self

    def __exit__(self, *exc) -> None:
        signal.setitimer(signal.ITIMER_PROF, 0, 0)
        signal.signal(signal.SIGPROF, self._before)

    def share(self, counter: collections.Counter, name: str) -> float:
        return counter[name] / self.samples if self.samples else 0.0


def sampled(load, count: int, top: int) -> Sampler:
    """Sample ``count`` requests of ``load`` (caches warm); print the shares."""
    load.run(50)
    clock, impl_workloads.CLOCK["now"] = impl_workloads.CLOCK["now"], time.thread_time
    try:
        with Sampler() as sampler:
            spent = load.run(count)
    finally:
        impl_workloads.CLOCK["now"] = clock
    print(f"\n=== {load.name}: {spent / count * 1e6:.1f} us of CPU per request "
          f"(with the sampler), {sampler.samples:,} samples ===")
    print("  with what it calls:")
    for name, n in sampler.within.most_common(top):
        print(f"  {100 * n / sampler.samples:5.1f} %  {name}")
    print("  its own (by line):")
    for name, n in sampler.own.most_common(top):
        print(f"  {100 * n / sampler.samples:5.1f} %  {name}")
    return sampler


class TimedConnection:
    """A connection whose ``execute`` and ``executemany`` are timed (the thread's CPU time),
    by statement with its literals as ``?``; everything else is the connection's."""

    def __init__(self, conn):
        self._conn = conn
        self.spent: collections.Counter = collections.Counter()
        self.calls: collections.Counter = collections.Counter()
        self._names: dict[str, str] = {}

    def _name(self, sql: str) -> str:
        name = self._names.get(sql)
        if name is None:
            name = self._names[sql] = LITERAL.sub("?", " ".join(sql.split()))[:90]
        return name

    def _timed(self, method, sql, *args, runs: int = 1):
        start = time.thread_time_ns()
        try:
            return method(sql, *args)
        finally:
            name = self._name(sql)
            self.spent[name] += time.thread_time_ns() - start
            self.calls[name] += runs

    def execute(self, sql, *args):
        return self._timed(self._conn.execute, sql, *args)

    def executemany(self, sql, rows):
        rows = list(rows)                         # (each row runs the statement once)
        return self._timed(self._conn.executemany, sql, rows, runs=len(rows))

    def __getattr__(self, name):
        return getattr(self._conn, name)


def timed_connection(root, conn) -> TimedConnection:
    """Put one ``TimedConnection`` wherever ``conn`` is held, from ``root`` down (attributes
    of the objects it holds, two levels deep: the kernel's store, tables, ledger, caches)."""
    timed, seen = TimedConnection(conn), set()

    def swap(obj, depth: int) -> None:
        if id(obj) in seen or depth > 3:
            return
        seen.add(id(obj))
        names = list(getattr(obj, "__dict__", {})) + [
            n for c in type(obj).__mro__ for n in getattr(c, "__slots__", ())]
        for name in names:
            try:
                value = getattr(obj, name)
            except AttributeError:
                continue
            if value is conn:
                setattr(obj, name, timed)
            elif type(value).__module__.startswith(("wgk", "impl")) and not callable(value):
                swap(value, depth + 1)
            elif isinstance(value, (list, tuple)):
                for item in value:
                    if type(item).__module__.startswith(("wgk", "impl")):
                        swap(item, depth + 1)
    swap(root, 0)
    return timed


def split(tmp: str, pragmas, count: int) -> None:
    """CPU per request in SQLite (by statement) and in Python, without the profiler."""
    impl_workloads.CLOCK["now"] = time.thread_time
    for cls, shape in ((Heartbeats, "heartbeat"), (Completions, "completion")):
        load = cls(os.path.join(tmp, f"split-{cls.__name__}.db"), pragmas)
        load.run(100)                              # caches warm
        timed = timed_connection(load.kernel, load.kernel.conn)
        raw = RawRows(os.path.join(tmp, f"split-raw-{shape}.db"), pragmas, shape)
        raw.conn = TimedConnection(raw.conn)
        raw.run(100)
        raw.conn.spent.clear()
        raw.conn.calls.clear()
        total = load.run(count) * 1e6 / count
        raw_total = raw.run(count) * 1e6 / count
        sql = sum(timed.spent.values()) / 1e3 / count
        raw_sql = sum(raw.conn.spent.values()) / 1e3 / count
        print(f"\n=== {load.name}: {total:.1f} us of CPU per request: {sql:.1f} in SQLite "
              f"({sum(timed.calls.values()) / count:.1f} statements), {total - sql:.1f} in Python "
              f"===\n    the raw loop writing the same rows: {raw_total:.1f} us: {raw_sql:.1f} in "
              f"SQLite, {raw_total - raw_sql:.1f} in Python")
        for name, ns in timed.spent.most_common(14):
            print(f"  {ns / 1e3 / count:6.1f} us  {timed.calls[name] / count:5.2f}x  {name}")
        print("  the raw loop's:")
        for name, ns in raw.conn.spent.most_common():
            print(f"  {ns / 1e3 / count:6.1f} us  {raw.conn.calls[name] / count:5.2f}x  {name}")
        load.kernel.close()


def wal_pages(path: str) -> tuple[list[int], int]:
    """The page number of each frame in the WAL of ``path``, and how many frames end a
    commit."""
    with open(path + "-wal", "rb") as f:
        data = f.read()
    size = struct.unpack(">I", data[8:12])[0]
    pages, commits = [], 0
    for at in range(32, len(data) - 23, 24 + size):
        page, end = struct.unpack(">II", data[at:at + 8])
        pages.append(page)
        commits += end != 0
    return pages, commits


def pages(tmp: str, pragmas, count: int) -> None:
    """Pages written per committed request, by table or index: the WAL's frames of ``count``
    requests (after 200 that fill the tables), with checkpoints held off."""
    loads = [("heartbeats", lambda p: Heartbeats(p, pragmas)),
             ("completion", lambda p: Completions(p, pragmas)),
             ("raw one-row loop", lambda p: Raw(p, pragmas)),
             ("raw loop, a heartbeat's rows", lambda p: RawRows(p, pragmas, "heartbeat")),
             ("raw loop, a completion step's rows", lambda p: RawRows(p, pragmas, "completion"))]
    for name, make in loads:
        path = os.path.join(tmp, f"pages-{len(os.listdir(tmp))}.db")
        load = make(path)
        conn = load.kernel.conn if hasattr(load, "kernel") else load.conn
        load.run(200)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        load.run(count)
        frames, commits = wal_pages(path)
        with sqlite3.connect(path) as look:
            tables = dict(look.execute("SELECT pageno, name FROM dbstat"))
        by = collections.Counter(tables.get(p, "(a page added since)") for p in frames)
        print(f"\n=== {name}: {len(frames) / count:.2f} pages per request "
              f"({count:,} requests, {commits:,} commits) ===")
        for table, n in by.most_common():
            print(f"  {n / count:5.2f}  {table}")
        (load.kernel if hasattr(load, "kernel") else load.conn).close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--count", type=int, default=2000)
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--sort", default="tottime")
    p.add_argument("--sync", default="OFF")
    p.add_argument("--statements", action="store_true", help="only count the SQL statements")
    p.add_argument("--split", action="store_true",
                   help="CPU per request in SQLite (by statement) and in Python, no profiler")
    p.add_argument("--pages", action="store_true",
                   help="pages written per request, by table or index (the WAL's frames)")
    p.add_argument("--sampled", action="store_true",
                   help="the running line sampled on a timer of the CPU (SIGPROF), no profiler")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="wgk-profile-") as tmp:
        pragmas = Pragmas(synchronous=args.sync)
        if args.split:
            split(tmp, pragmas, args.count)
            return 0
        if args.pages:
            pages(tmp, pragmas, args.count)
            return 0
        if args.sampled:
            for cls in (Heartbeats, Completions):
                load = cls(os.path.join(tmp, f"sampled-{cls.__name__}.db"), pragmas)
                sampled(load, args.count, args.top)
                load.kernel.close()
            return 0
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
