"""Flat cost, counted as work rather than time: one request runs the same SQL statements and the
same number of SQLite virtual-machine steps (every row a statement visits is at least one step)
on a graph of 100 tasks and of 2,000, and on a ledger of 1,000 events and of 50,000, on a kernel
with warm caches and on one opened for the request (as each ``wgk`` command opens one). A full
scan of the tasks or of the ledger, a load of every task or every principal event, shows as
steps that grow with the size. A loaded machine changes no count.

The databases are seeded in bulk by ``bench/flat_cost.py`` (the benchmark of the same figures
in time and memory); a seeded database verifies and rebuilds to the same tables, so the counts
are those of a database the kernel could have written itself.
"""
from __future__ import annotations

import collections
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import flat_cost  # noqa: E402
from wgk.impl import Kernel, MemoryWorld, Pragmas, TaskPolicy  # noqa: E402

LITERAL = re.compile(r"'(?:[^']|'')*'|\b\d+\b")
COMPLETIONS = 3            # fresh tasks the seeded graph holds for completions


def seeded(tmp_path, tasks: int, events: int):
    db = str(tmp_path / f"k-{tasks}-{events}.db")
    world = MemoryWorld.create(target="main-0")
    flat_cost.seed(db, world, flat_cost.Size(tasks, events), COMPLETIONS)
    return db, world


class Counted:
    """The statements (literals as ``?``) and virtual-machine steps of what runs inside."""

    def __init__(self, kernel: Kernel):
        self.conn = kernel.conn
        self.statements: collections.Counter = collections.Counter()
        self.steps = 0

    def _step(self) -> int:
        self.steps += 1
        return 0

    def __enter__(self) -> "Counted":
        self.conn.set_progress_handler(self._step, 1)
        self.conn.set_trace_callback(
            lambda sql: self.statements.update([LITERAL.sub("?", " ".join(sql.split()))]))
        return self

    def __exit__(self, *exc) -> None:
        self.conn.set_progress_handler(None, 0)
        self.conn.set_trace_callback(None)


def work(db: str, world: MemoryWorld) -> dict[str, Counted]:
    """The counts of a warm completion (13 requests, each followed by a heartbeat) and of a
    heartbeat on a kernel opened for it."""
    out = {}
    k = Kernel(db, world.environment(), pragmas=Pragmas(synchronous="OFF"))
    try:
        mix = flat_cost.Mix(k, world, 0)
        assert mix.completion(None)                     # caches and statements warm
        with Counted(k) as out["warm completion and heartbeats"]:
            assert mix.completion(None)
    finally:
        k.close()
    k = Kernel(db, world.environment(), pragmas=Pragmas(synchronous="OFF"))
    try:
        with Counted(k) as out["cold heartbeat"]:
            assert k.handle(flat_cost.heartbeat("h1", "cold", "cold"))["decision"] == "evidence-only"
    finally:
        k.close()
    return out


def assert_same_work(small: dict[str, Counted], large: dict[str, Counted], what: str) -> None:
    for name in small:
        a, b = small[name], large[name]
        grew = {s: (a.statements[s], b.statements[s])
                for s in set(a.statements) | set(b.statements) if a.statements[s] != b.statements[s]}
        assert not grew, f"{name}: statements differ with {what}: {grew}"
        assert a.steps == b.steps, (f"{name}: {a.steps} steps on the smaller database, "
                                    f"{b.steps} with {what}")
        assert a.steps > 0 and sum(a.statements.values()) > 0      # something was counted


def test_a_request_does_the_same_work_at_100_and_at_2000_tasks(tmp_path):
    small = work(*seeded(tmp_path, 100, 1_000))
    large = work(*seeded(tmp_path, 2_000, 1_000))
    assert_same_work(small, large, "2,000 tasks")


def test_a_request_does_the_same_work_at_1000_and_at_50000_ledger_events(tmp_path):
    small = work(*seeded(tmp_path, 100, 1_000))
    large = work(*seeded(tmp_path, 100, 50_000))
    assert_same_work(small, large, "50,000 ledger events")


def test_a_closed_kernel_authenticates_with_the_same_work_at_any_ledger_length(tmp_path):
    """The principal check before each authentication reads the principal events alone."""
    counts = []
    for events in (1_000, 30_000):
        db, world = seeded(tmp_path, 100, events)
        k = Kernel(db, world.environment(), pragmas=Pragmas(synchronous="OFF"))
        credential = k.principals.add("w", ["worker"])
        k.close()
        k = Kernel(db, world.environment(), pragmas=Pragmas(synchronous="OFF"))
        try:
            with Counted(k) as c:
                a = k.handle(flat_cost.heartbeat("h2", f"auth-{events}", "auth"), credential)
            assert a["decision"] == "evidence-only", a
        finally:
            k.close()
        counts.append(c.steps)
    assert counts[0] == counts[1], f"{counts[0]} steps at 1,000 events, {counts[1]} at 30,000"


def test_a_seeded_database_verifies_and_rebuilds_to_the_same_tables(tmp_path):
    db, world = seeded(tmp_path, 60, 600)
    k = Kernel(db, world.environment())
    try:
        assert k.verify_ledger().ok
        report = k.rebuild()
        assert report.ok, report.differences
        assert k.ledger_head() == 600
        assert len(k.ids()) == 60
        assert k.ready()[:2] == ["s0", "s10"]             # chains of ten, heads ready
        # a seeded ledger row edited is found: the chain is the kernel's own
        k.conn.execute("UPDATE ledger SET body = replace(body, 'fill-7', 'fill-8') "
                       "WHERE key = 'fill-7'")
        k.ledger.forget()
        assert not k.verify_ledger().ok
    finally:
        k.close()


def test_the_task_id_lookup_sees_a_task_another_connection_added(tmp_path):
    """Ids read one by one stay right when another connection adds tasks."""
    db, world = seeded(tmp_path, 20, 100)
    a = Kernel(db, world.environment())
    b = Kernel(db, world.environment())
    try:
        assert a.task_id("s1") == 2 and a.task_id("late") is None
        assert len(a.ids()) == 20
        b.add_tasks([TaskPolicy("late")])
        assert a.task_id("late") == 21
        assert "late" in a.ids()
        r = a.handle({"kind": "dispatch", "actor": "daemon", "task": "late", "key": "d-late",
                      "expected-attempt": 0, "owner": flat_cost.OWNER, "mint": flat_cost.MINT})
        assert r["decision"] == "applied", r
        assert a.handle(flat_cost.heartbeat("nope", "k-nope", "e"))["code"] == "unknown-task"
    finally:
        a.close()
        b.close()


def test_the_benchmark_runs_quick_and_prints_its_table(tmp_path):
    p = subprocess.run([sys.executable, str(BENCH / "flat_cost.py"), "--quick", "--sqlite-only",
                        "--no-save"], capture_output=True, text=True, timeout=600,
                       cwd=BENCH.parent, env=dict(os.environ))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    out = p.stdout
    assert "warm request (mix) (us)" in out and "cold heartbeat" in out
    for size in ("sqlite, 40 tasks, 1,000 events", "sqlite, 400 tasks, 1,000 events",
                 "sqlite, 40 tasks, 4,000 events"):
        assert size in out, out
    assert re.search(r"tasks axis: warm request \(mix\).*largest / smallest = \d+\.\d\d", out)
    assert re.search(r"ledger axis: peak memory, cold request.*largest / smallest = \d", out)
    assert "check FAILED" not in out and "check passed: sqlite, 40 tasks, 4,000 events: the " \
        "seeded ledger verifies" in out


def test_a_long_lived_kernel_keeps_a_bounded_number_of_task_records(tmp_path, monkeypatch):
    """Records, policies and ids cached between requests are dropped past the bound (and read
    again, as after another connection's commit): a daemon's memory does not grow with the
    tasks it has touched, and its decisions stay those of the stored facts."""
    import wgk.impl.storage.cache as cache_module
    monkeypatch.setattr(cache_module, "CACHED_TASKS_MOST", 4)
    db, world = seeded(tmp_path, 40, 200)
    k = Kernel(db, world.environment(), pragmas=Pragmas(synchronous="OFF"))
    try:
        mix = flat_cost.Mix(k, world, 0)
        most = 0
        for _ in range(COMPLETIONS):
            assert mix.completion(None)
            most = max(most, len(k.cache.records), len(k.cache.policies), len(k.tables.stamps))
        for i in range(12):                               # every heartbeat task, in turn
            assert mix.beat(None, "bound")
            most = max(most, len(k.cache.records), len(k.cache.policies), len(k.tables.stamps))
        assert most <= 4 + 2, f"{most} tasks cached with a bound of 4"
        assert k.status("c2") == "done" and k.status("h3") == "in-progress"
        assert k.verify_ledger().ok and k.rebuild().ok
    finally:
        k.close()


def test_the_command_line_checks_a_task_name_with_the_same_work_at_any_graph_size(tmp_path):
    """``wgk kernel`` commands naming a task check it exists (``require_task``) by one lookup."""
    from wgk.impl.cli.kernel_open import require_task
    steps = []
    for tasks in (100, 2_000):
        db, world = seeded(tmp_path, tasks, 1_000)
        k = Kernel(db, world.environment())
        try:
            with Counted(k) as c:
                require_task(k, "h3")
            assert k.knows("s5") and not k.knows("nope")
        finally:
            k.close()
        steps.append(c.steps)
    assert steps[0] == steps[1] > 0, steps
