"""Flat cost: one request's time and memory against the number of tasks and the ledger's length.

A kernel database is seeded in bulk at each size (direct SQL inserts, the hash chain computed
as ``impl/storage/ledger.py`` computes it, every projected table as the kernel would have written it:
the seeded database verifies and rebuilds identically), then a fixed mix of requests is sent
to it and timed one by one:

- *tasks*: 100, 1,000 and 10,000 tasks (chains of ten ``s<i>``), ledger at 10,000 events
  (or the task events alone when they are more);
- *ledger*: 100 tasks, 10,000, 100,000 and 1,000,000 ledger events (filler heartbeats on
  the mix's running attempts: their journal entries and evidence rows grow with it).

The same measured tasks at every size: 8 running attempts ``h0..h7`` (heartbeats) and fresh
tasks ``c<i>`` (one whole completion transaction each, 13 requests, ``report`` disposition).
The mix: each completion step followed by one heartbeat. Every size of a backend is seeded
first, then measured side by side: round by round, each size in turn (the order rotating),
so that a change in the machine's load falls on every size alike. Figures per size:

- *warm*: the median time of one request of the mix on one open kernel (its caches warm);
- *cold*: the median time of one heartbeat on a kernel opened for it (as each ``wgk``
  command opens the database: the caches are empty, as after another process's commit);
- *memory*: the peak of ``tracemalloc`` above its start over a part of the mix (warm) and
  over one cold open-and-request.

The ratio largest / smallest of each figure along each axis is the flat-cost figure
(target: at most 1.2). On PostgreSQL (``WGK_TEST_POSTGRES`` or ``--backend DSN``) the
ledger axis stops at 100,000 events.

    python bench/flat_cost.py [--quick] [--json] [--backend DSN] [--no-save] [--sync FULL]
    python bench/flat_cost.py --profile [--quick]     # cProfile at the largest sizes instead
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import hashlib
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import BenchResult, Check, Figure, guarded, report, say, settle  # noqa: E402
from impl_workloads import MINT, OWNER, TOKEN, cap  # noqa: E402
from impl_workloads import completion_script as workload_script  # noqa: E402

from wgk.impl.protocol.world_steps import _owner_step  # noqa: E402
from wgk.impl import Kernel, MemoryWorld, Pragmas, TaskPolicy  # noqa: E402
from wgk.impl.contract.canonical import canonical_json  # noqa: E402
from wgk.impl.storage.ledger import CHAIN, link_v2  # noqa: E402
from wgk.impl.contract.wire import parse  # noqa: E402

HEARTBEAT_TASKS = 8
TARGET = 1.2                      # largest / smallest, at most
#: The measured kernels' synchronous setting (``--sync``): OFF by default, so that what is
#: measured is the kernel's own work, not the disk's flush time (which no size changes).
SYNC = ["OFF"]
CHAIN_LENGTH = 10                 # filler tasks depend on the one before, in chains of ten


@dataclass(frozen=True)
class Size:
    tasks: int
    events: int

    @property
    def label(self) -> str:
        return f"{self.tasks:,} tasks, {self.events:,} events"


@dataclass
class Plan:
    """What one run measures."""

    task_sizes: tuple[int, ...]
    event_sizes: tuple[int, ...]
    completions: int              # tasks completed in the warm mix (13 requests each)
    cold: int                     # cold requests
    memory_completions: int       # completions of the mix under tracemalloc

    def sizes(self, backend: str) -> list[tuple[str, Size]]:
        small_events = self.event_sizes[0]
        events = self.event_sizes if backend == "sqlite" else tuple(
            e for e in self.event_sizes if e <= 100_000)
        out = [("tasks", Size(t, small_events)) for t in self.task_sizes]
        out += [("ledger", Size(self.task_sizes[0], e)) for e in events[1:]]
        return out


FULL = Plan((100, 1_000, 10_000), (10_000, 100_000, 1_000_000), completions=24, cold=60,
            memory_completions=4)
QUICK = Plan((40, 400), (1_000, 4_000), completions=3, cold=12, memory_completions=1)


# --- seeding in bulk ---------------------------------------------------------------------------


class Seeder:
    """Rows of a kernel database written directly on a connection of their own, each ledger row
    chained as the kernel chains it (``ledger.link_v2``) and every table as ``apply_event``
    would write it. On PostgreSQL the chain is sealed first and the seal and the ledger's
    sequence are moved to the last row written (``pg_sql``: what a seal does)."""

    def __init__(self, db: str):
        self.pg = db.startswith(("postgresql://", "postgres://"))
        if self.pg:
            import psycopg
            self.conn = psycopg.connect(db)
            self.mark = "%s"
            self.conn.execute("SELECT wgk_seal(true)")
            self.seq, self.prev = self.conn.execute(
                "SELECT seq, hash FROM ledger_seal WHERE id = 1").fetchone()
        else:
            import sqlite3
            self.conn = sqlite3.connect(db, isolation_level=None)
            self.mark = "?"
            self.conn.execute("BEGIN IMMEDIATE")
            row = self.conn.execute("SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1"
                                    ).fetchone()
            self.seq, self.prev = row

    def insert(self, table: str, rows: list[tuple], columns: str = "") -> None:
        if not rows:
            return
        marks = ", ".join([self.mark] * len(rows[0]))
        sql = f"INSERT INTO {table} {columns} VALUES ({marks})"
        if self.pg:
            with self.conn.cursor() as cur:
                cur.executemany(sql, rows)
        else:
            self.conn.executemany(sql, rows)

    def close(self) -> None:
        if self.pg:
            self.conn.execute("UPDATE ledger_seal SET seq = %s, hash = %s WHERE id = 1",
                              (self.seq, self.prev))
            self.conn.execute("SELECT setval('ledger_seq', %s)", (self.seq,))
            self.conn.commit()
            self.conn.autocommit = True
            self.conn.execute(f"ANALYZE {', '.join(ANALYZED)}")   # this schema's tables only
        else:
            self.conn.execute("COMMIT")
        self.conn.close()

    def _chain(self, event: str, task: str | None, key: str | None, body: str) -> tuple:
        self.seq += 1
        digest = link_v2(self.prev, self.seq, event, task, key, body)
        row = (self.seq, self.prev, digest, event, task, key, body, CHAIN)
        self.prev = digest
        return row

    def tasks(self, count: int, first_id: int) -> None:
        """``count`` filler tasks ``s0..``, chains of ``CHAIN_LENGTH`` (each open, waiting on
        the one before it unless it heads a chain)."""
        ledger, tasks, txs, leases, gens, edges, views = ([] for _ in range(7))
        for i in range(count):
            name, tid = f"s{i}", first_id + i
            deps = [f"s{i - 1}"] if i % CHAIN_LENGTH else []
            body = canonical_json({"deps": deps, "disposition": "land",
                                   "requires-assignment": False, "retry-budget": 2,
                                   "review-required": False, "task": name})
            row = self._chain("task-added", name, None, body)
            ledger.append(row)
            tasks.append((tid, name, 0, 0, "land", 2))
            txs.append((tid,))
            leases += [(tid, kind, 0) for kind in ("worktree", "session", "finish")]
            gens.append((tid, 0, row[0]))
            if deps:
                edges.append((tid, tid - 1))
            views.append((tid, "open", 0, len(deps)))
        self.insert("ledger", ledger, LEDGER_COLUMNS)
        self.insert("tasks", tasks, "(id, name, review_required, requires_assignment, "
                    "disposition_policy, retry_budget)")
        self.insert("transactions", txs, "(task)")
        self.insert("leases", leases, "(task, kind, held)")
        self.insert("generations", gens, "(task, generation, opened_seq)")
        self.insert("edges", edges, "(task, dep)")
        self.insert("task_view", views, "(task, status, satisfied, pending)")

    def heartbeats(self, count: int, on: list[tuple[str, int]], batch: int = 50_000) -> None:
        """``count`` evidence-only heartbeats spread over the running attempts ``on`` (name,
        id): a ledger event, a journal entry and an evidence row each."""
        templates = {name: heartbeat_template(name) for name, _ in on}
        done = 0
        while done < count:
            ledger, journal, evidence = [], [], []
            for j in range(done, min(count, done + batch)):
                name, tid = on[j % len(on)]
                canonical, tail = templates[name]
                ident = key = f"fill-{j}"
                text = canonical.replace(EVIDENCE_MARK, ident)
                digest = sha256(text)
                body = ('{"request":' + text + ',"changes":{},"digest":"' + digest
                        + '","facts":[["evidence",{"counted":false,"id":"' + ident
                        + '","kind":"heartbeat"}]],' + tail)
                row = self._chain("request", name, key, body)
                ledger.append(row)
                journal.append((key, digest, RESPONSE, row[0]))
                evidence.append((tid, "heartbeat", ident, 0, row[0]))
            self.insert("ledger", ledger, LEDGER_COLUMNS)
            self.insert("journal", journal, "(key, digest, response, seq)")
            self.insert("evidence", evidence, "(task, kind, ident, counted, seq)")
            done += len(ledger)


LEDGER_COLUMNS = "(seq, prev, hash, event, task, key, body, chain)"
#: The tables seeded in bulk, analyzed after (as the kernel does after a bulk graph edit).
ANALYZED = ("ledger", "tasks", "transactions", "leases", "generations", "edges",
            "task_view", "journal", "evidence")
EVIDENCE_MARK = "EVIDENCE-MARK"
RESPONSE = '{"decision":"evidence-only"}'


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def heartbeat(task: str, key: str, evidence: str) -> dict:
    return {"kind": "heartbeat", "actor": "worker", "task": task, "key": key, "cap": cap(task),
            "evidence": evidence, "token": TOKEN}


def heartbeat_template(task: str) -> tuple[str, str]:
    """The canonical text of a heartbeat on ``task`` with ``EVIDENCE_MARK`` for its evidence
    id (checked against ``wire.parse``), and the end of its ledger body."""
    canonical = parse(heartbeat(task, "k", EVIDENCE_MARK)).canonical
    probe = parse(heartbeat(task, "k", "fill-7"))
    assert canonical.replace(EVIDENCE_MARK, "fill-7") == probe.canonical, "template drifted"
    return canonical, '"response":' + RESPONSE + "}"


def completion_script(world: MemoryWorld, task: str) -> list:
    """The 13 requests of one completion (and the worktree edit before the first edge); its
    disposition a report, so the target never moves under the other tasks."""
    return workload_script(world.repository.target(), task, disposition="report")


def measured_tasks(completions: int) -> list[TaskPolicy]:
    return ([TaskPolicy(f"h{i}") for i in range(HEARTBEAT_TASKS)]
            + [TaskPolicy(f"c{i}") for i in range(completions)])


def seed(db: str, world: MemoryWorld, size: Size, completions: int) -> dict:
    """A kernel database at ``size``: the graph, the filler tasks, the measured tasks (added and
    dispatched through the kernel), then filler heartbeats up to ``size.events`` events."""
    t0 = time.perf_counter()
    k = Kernel(db, world.environment(), pragmas=Pragmas(synchronous="OFF"))
    try:
        k.create_graph("g", [])
    finally:
        k.close()
    measured = measured_tasks(completions)
    fillers = max(0, size.tasks - len(measured))
    seeder = Seeder(db)
    seeder.tasks(fillers, first_id=1)
    seeder.close()
    k = Kernel(db, world.environment(), pragmas=Pragmas(synchronous="OFF"))
    try:
        k.add_tasks(measured)
        for i in range(HEARTBEAT_TASKS):
            a = k.handle({"kind": "dispatch", "actor": "daemon", "task": f"h{i}", "key": f"d{i}",
                          "expected-attempt": 0, "owner": OWNER, "mint": MINT})
            assert a["decision"] == "applied", a
        on = [(f"h{i}", k.task_id(f"h{i}")) for i in range(HEARTBEAT_TASKS)]
    finally:
        k.close()
    seeder = Seeder(db)
    seeder.heartbeats(max(0, size.events - seeder.seq), on)
    seeder.close()
    k = Kernel(db, world.environment(), pragmas=Pragmas(synchronous="OFF"))
    try:
        events = k.ledger_head()
    finally:
        k.close()
    return {"seconds": time.perf_counter() - t0, "events": events,
            "tasks": fillers + len(measured)}


# --- measuring ---------------------------------------------------------------------------------


@dataclass
class Measured:
    size: Size
    axis: str
    events: int = 0
    tasks: int = 0
    seed_seconds: float = 0.0
    warm: list[float] = field(default_factory=list)         # seconds per request of the mix
    warm_heartbeat: list[float] = field(default_factory=list)
    warm_completion: list[float] = field(default_factory=list)
    cold: list[float] = field(default_factory=list)
    warm_peak: int = 0           # bytes above the start, over part of the mix
    cold_peak: int = 0           # bytes above the start, one cold open and request
    answered: bool = True
    verified: bool | None = None
    load: float = 0.0

    def figures(self) -> dict[str, float]:
        return {"warm request (mix)": statistics.median(self.warm) * 1e6,
                "warm heartbeat": statistics.median(self.warm_heartbeat) * 1e6,
                "warm completion step": statistics.median(self.warm_completion) * 1e6,
                "cold heartbeat (kernel opened for it)": statistics.median(self.cold) * 1e6,
                "peak memory, warm mix": self.warm_peak / 1024,
                "peak memory, cold request": self.cold_peak / 1024}


def unit(name: str) -> str:
    return "KiB" if name.startswith("peak") else "us"


class Mix:
    """The fixed mix on one kernel: each completion step, then one heartbeat."""

    def __init__(self, k: Kernel, world: MemoryWorld, first: int):
        self.k, self.world, self.next_task, self.beats = k, world, first, 0

    def beat(self, times: list[float] | None, prefix: str = "mix") -> bool:
        self.beats += 1
        task = f"h{self.beats % HEARTBEAT_TASKS}"
        r = heartbeat(task, f"{prefix}-{self.beats}", f"{prefix}-{self.beats}")
        t0 = time.perf_counter()
        a = self.k.handle(r)
        if times is not None:
            times.append(time.perf_counter() - t0)
        return a.get("decision") == "evidence-only"

    def completion(self, m: Measured | None) -> bool:
        task = f"c{self.next_task}"
        self.next_task += 1
        ok = True
        for step in completion_script(self.world, task):
            if isinstance(step, tuple):
                # the worktree edit of ``world_steps.apply_env``, without its check of the task's
                # name against every task's (the harness's, not a request's)
                _owner_step(self.k, "edit", step[1], {"content": step[2]})
                continue
            t0 = time.perf_counter()
            a = self.k.handle(step)
            spent = time.perf_counter() - t0
            ok &= a.get("decision") == "applied"
            if m is not None:
                m.warm.append(spent)
                m.warm_completion.append(spent)
            ok &= self.beat(None if m is None else m.warm_heartbeat)
            if m is not None:
                m.warm.append(m.warm_heartbeat[-1])
        return ok


class Subject:
    """One size's seeded database, its world and its warm kernel."""

    def __init__(self, db: str, world: MemoryWorld, m: Measured):
        self.db, self.world, self.m = db, world, m
        self.kernel = Kernel(db, world.environment(), pragmas=Pragmas(synchronous=SYNC[0]))
        self.mix = Mix(self.kernel, world, 0)
        m.answered &= self.mix.completion(None)              # warm-up: caches, statements

    def cold(self, n: int) -> float:
        """One heartbeat on a kernel opened for it; its time, open and close included."""
        t0 = time.perf_counter()
        k = Kernel(self.db, self.world.environment(), pragmas=Pragmas(synchronous=SYNC[0]))
        try:
            a = k.handle(heartbeat(f"h{n % HEARTBEAT_TASKS}", f"cold-{n}", f"cold-{n}"))
        finally:
            k.close()
        self.m.answered &= a.get("decision") == "evidence-only"
        return time.perf_counter() - t0

    def memory(self, plan: Plan) -> None:
        m = self.m
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        for _ in range(plan.memory_completions):
            m.answered &= self.mix.completion(None)
        m.warm_peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()
        self.kernel.close()
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        self.cold(-1)
        m.cold_peak = tracemalloc.get_traced_memory()[1] - base
        tracemalloc.stop()


def measure(subjects: list[Subject], plan: Plan) -> None:
    """Every size in turn, round by round (the order rotating), so that a change in the
    machine's load falls on every size alike; then each one's memory."""
    for r in range(plan.completions):
        turn = subjects[r % len(subjects):] + subjects[:r % len(subjects)]
        for s in turn:
            s.m.answered &= s.mix.completion(s.m)
    for s in subjects:
        s.cold(plan.cold)                                # the page cache warm
    for n in range(plan.cold):
        turn = subjects[n % len(subjects):] + subjects[:n % len(subjects)]
        for s in turn:
            s.m.cold.append(s.cold(n))
    for s in subjects:
        s.memory(plan)
        s.m.load = os.getloadavg()[0]


def verify(db: str, world: MemoryWorld) -> bool:
    k = Kernel(db, world.environment())
    try:
        return k.verify_ledger().ok
    finally:
        k.close()


# --- backends ----------------------------------------------------------------------------------


@contextlib.contextmanager
def sqlite_db(tmp: str, name: str):
    path = os.path.join(tmp, f"{name}.db")
    try:
        yield path
    finally:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path + suffix)


def backends(server_dsn: str | None):
    out = [("sqlite", None)]
    if server_dsn:
        out.append(("postgresql", server_dsn))
    return out


@contextlib.contextmanager
def pg_db(server_dsn: str):
    from wgk.impl.storage.pg import scratch_schema
    with scratch_schema(server_dsn) as dsn:
        yield dsn


def run_backend(backend: str, server_dsn: str | None, tmp: str, plan: Plan,
                check_chain: bool) -> list[Measured]:
    """Seed every size of ``plan`` (each checked), then measure them side by side."""
    with contextlib.ExitStack() as stack:
        subjects = []
        for n, (axis, size) in enumerate(plan.sizes(backend)):
            m = Measured(size, axis)
            world = MemoryWorld.create(target="main-0")
            db = stack.enter_context(sqlite_db(tmp, f"{n}") if backend == "sqlite"
                                     else pg_db(server_dsn))
            say(f"  {backend}: seeding {size.label} ...")
            seeded = seed(db, world, size, 1 + plan.completions + plan.memory_completions)
            m.seed_seconds, m.events, m.tasks = (seeded["seconds"], seeded["events"],
                                                 seeded["tasks"])
            if check_chain:
                m.verified = verify(db, world)
            say(f"  {backend}: {size.label} seeded in {m.seed_seconds:.1f} s")
            subjects.append(Subject(db, world, m))
        say(f"  {backend}: measuring every size in turn ...")
        try:
            measure(subjects, plan)
        finally:
            for s in subjects:
                s.kernel.close()
        return [s.m for s in subjects]


def run(quick: bool = False, server_dsn: str | None = None, check_chain: bool = True
        ) -> BenchResult:
    t0 = time.perf_counter()
    plan = QUICK if quick else FULL
    server_dsn = server_dsn if server_dsn is not None else os.environ.get("WGK_TEST_POSTGRES")
    figures, checks, notes = [], [], []
    results: dict[str, list[Measured]] = {}
    with tempfile.TemporaryDirectory(prefix="wgk-flat-") as tmp:
        for backend, dsn in backends(server_dsn):
            results[backend] = run_backend(backend, dsn, tmp, plan, check_chain)
    for backend, rows in results.items():
        for m in rows:
            for name, value in m.figures().items():
                figures.append(Figure(f"{backend}, {m.size.label}: {name}", value, unit(name),
                                      higher_is_better=False,
                                      note=f"{m.tasks:,} tasks, {m.events:,} events; "
                                           f"load {m.load:.1f}"))
            checks.append(Check(f"{backend}, {m.size.label}: every request answered as expected",
                                m.answered))
            if m.verified is not None:
                checks.append(Check(f"{backend}, {m.size.label}: the seeded ledger verifies",
                                    m.verified))
        for axis in ("tasks", "ledger"):
            along = [m for m in rows if m.axis == axis or m is rows[0]]
            if len(along) < 2:
                continue
            small, large = along[0], along[-1]
            for name, value in large.figures().items():
                base = small.figures()[name]
                figures.append(Figure(
                    f"{backend}, {axis} axis: {name}, {large.size.label} / {small.size.label}",
                    value, unit(name), peer=small.size.label, peer_value=base,
                    higher_is_better=False, target=1 / TARGET,
                    note=f"largest / smallest = {value / base:.2f} (target <= {TARGET})"))
    result = settle("flat-cost", figures, checks, notes, [], t0)
    result.notes.append("ratio column: smallest / largest (>= 0.83 means largest / smallest "
                        f"<= 1.2); requests with synchronous={SYNC[0]}")
    return result


def profile(plan: Plan, top: int = 25) -> None:
    """cProfile of the warm mix and of cold heartbeats at the largest size of each axis
    (SQLite), and the SQL statements of one cold heartbeat: where a cost that grows shows."""
    import cProfile
    import pstats
    sizes = [Size(plan.task_sizes[-1], plan.event_sizes[0]),
             Size(plan.task_sizes[0], plan.event_sizes[-1])]
    with tempfile.TemporaryDirectory(prefix="wgk-flat-") as tmp:
        for size in sizes:
            world = MemoryWorld.create(target="main-0")
            with sqlite_db(tmp, "profile") as db:
                say(f"  seeding {size.label} ...")
                seed(db, world, size, 2 + plan.completions)
                k = Kernel(db, world.environment(), pragmas=Pragmas(synchronous=SYNC[0]))
                statements: list[str] = []
                prof = cProfile.Profile()
                try:
                    mix = Mix(k, world, 0)
                    mix.completion(None)
                    prof.enable()
                    for _ in range(plan.completions):
                        mix.completion(None)
                    prof.disable()
                finally:
                    k.close()
                print(f"\n=== {size.label}: warm mix ({plan.completions} completions) ===")
                pstats.Stats(prof).sort_stats("tottime").print_stats(top)
                prof = cProfile.Profile()
                for n in range(plan.cold):
                    prof.enable()
                    k = Kernel(db, world.environment(), pragmas=Pragmas(synchronous=SYNC[0]))
                    if n == 0:
                        k.conn.set_trace_callback(statements.append)
                    k.handle(heartbeat(f"h{n % HEARTBEAT_TASKS}", f"p-{n}", f"p-{n}"))
                    k.close()
                    prof.disable()
                print(f"\n=== {size.label}: {plan.cold} cold heartbeats ===")
                pstats.Stats(prof).sort_stats("cumtime").print_stats(top)
                print(f"=== {size.label}: the statements of one cold heartbeat ===")
                for sql in statements:
                    print("  " + " ".join(sql.split())[:150])


def flat_table(result: BenchResult) -> str:
    """The sizes as rows and the figures as columns, then the ratios."""
    rows: dict[str, dict[str, float]] = {}
    ratios = []
    for f in result.figures:
        if f.peer is None:
            where, _, name = f.name.rpartition(": ")
            rows.setdefault(where, {})[name] = f.value
        else:
            ratios.append((f.name, f.value / f.peer_value if f.peer_value else float("nan")))
    names = list(next(iter(rows.values())).keys()) if rows else []
    head = ["size"] + [f"{n} ({unit(n)})" for n in names]
    body = [[where] + [f"{v[n]:,.0f}" for n in names] for where, v in rows.items()]
    widths = [max(len(r[c]) for r in [head] + body) for c in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [head] + body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("")
    lines += [f"{name}: largest / smallest = {r:.2f}"
              + ("" if r <= TARGET else f"  (above {TARGET})") for name, r in ratios]
    for c in result.checks:
        lines.append(f"check {'passed' if c.passed else 'FAILED'}: {c.name}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="flat_cost.py", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    p.add_argument("--json", action="store_true", help="print every figure as JSON")
    p.add_argument("--no-save", action="store_true", help="do not write bench/results/")
    p.add_argument("--backend", metavar="DSN", default=None,
                   help="also PostgreSQL at this postgresql:// URL (default: $WGK_TEST_POSTGRES)")
    p.add_argument("--sqlite-only", action="store_true", help="never PostgreSQL")
    p.add_argument("--no-verify", action="store_true", help="skip verifying each seeded ledger")
    p.add_argument("--sync", default="OFF", choices=("OFF", "NORMAL", "FULL"),
                   help="the measured kernels' synchronous setting (default OFF: no flush time)")
    p.add_argument("--profile", action="store_true",
                   help="instead: cProfile at the largest size of each axis (SQLite)")
    args = p.parse_args(argv)
    SYNC[0] = args.sync
    if args.profile:
        profile(QUICK if args.quick else FULL)
        return 0
    dsn = "" if args.sqlite_only else args.backend
    result = guarded("flat-cost", lambda quick: run(quick, dsn, not args.no_verify), args.quick)
    if not args.json and result.figures:
        print(flat_table(result))
    return report("flat-cost", [result], args.quick, args.json, save=not args.no_save)


if __name__ == "__main__":
    sys.exit(main())
