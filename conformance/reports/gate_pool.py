"""Running the gate's work on every core: parts of sections in forked worker processes.

A section is split into parts (a whole section, or some of its traces or mutants);
the parts run in a few forked workers, the heaviest first, and their checks come
back in the sections' own order, so the report is the one a run in turn would
give. Progress stays the same too: the ticks of the part first in that order are
passed on as they come; those of the parts behind it are held and passed on when
their turn comes, each counted from where the parts before it in its section left
off. Forking (not spawning) keeps whatever the caller set up: the budgets, the
backend, the scratch directory, and patches a test planted.

The scratch directory: the gate's databases, worlds and snapshots live in
temporary directories; on a machine with a RAM file system (``/dev/shm``) they go
there. A crash cut, in-process or by ``kill -9``, loses what the process held, never
what it had written to the operating system, so no verdict depends on ``fsync``
reaching a disk; the disk's flushes only made every commit slower.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import pickle
import queue
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable, Iterator

from wgk.conformance.reports.gate_budget import Nothing, Progress, Tick
from wgk.conformance.reports.gate_report import Check

#: Where the gate's temporary files go when this exists and is writable.
RAM_DIR = "/dev/shm"


def scratch_dir() -> str | None:
    """``WGK_GATE_SCRATCH`` when set, else the RAM file system when there is one, else None
    (the system's temporary directory)."""
    chosen = os.environ.get("WGK_GATE_SCRATCH")
    if chosen:
        return chosen
    if os.path.isdir(RAM_DIR) and os.access(RAM_DIR, os.W_OK | os.X_OK):
        return RAM_DIR
    return None


@contextlib.contextmanager
def scratch() -> Iterator[str]:
    """Temporary files go to the scratch directory (``scratch_dir``) while the gate runs."""
    chosen, before = scratch_dir(), tempfile.tempdir
    if chosen is not None:
        tempfile.tempdir = chosen
    try:
        yield tempfile.gettempdir()
    finally:
        tempfile.tempdir = before


@dataclass
class Part:
    """Some of one section's work: ``run(progress)`` returns its checks (or raises).
    ``offset`` and ``total`` turn its own progress into the section's (``total`` None:
    the part is the whole section, its ticks pass unchanged); ``weight``: its expected cost;
    ``spec``: which of the section's work it is (``only``, ``mode``: the gate's cache keys
    it by that); ``group``: the parts of one group are handed to one worker together and run
    there in their order (what one computes, the others may find made: a trace's run of the
    model, ``model_runs``), the group weighing their weights' sum."""

    section: str
    run: Callable[[Progress], list[Check]]
    offset: int = 0
    total: int | None = None
    weight: float = 1.0
    spec: dict = field(default_factory=dict)
    group: str | None = None


@dataclass
class Done:
    """A part's outcome: its checks, or the error it raised (a one-check list)."""

    checks: list[Check]
    seconds: float
    raised: bool = False


def guarded(section: str, run: Callable[[], list[Check]]) -> Done:
    """Run ``run``; an exception becomes the section's error check, naming it. The models
    compiled for graphs before (``compiled.for_graph``) are kept: a part whose checks the
    gate's cache keeps drops them itself (``gate.fresh``)."""
    t0 = time.perf_counter()
    try:
        return Done(run(), time.perf_counter() - t0)
    except Nothing as e:
        return Done([Check(section, section, "error", time.perf_counter() - t0, str(e))],
                    time.perf_counter() - t0, raised=True)
    except Exception as e:             # noqa: BLE001 -- reported as the section's error verdict
        return Done([Check(section, section, "error", time.perf_counter() - t0,
                           f"raised {type(e).__name__}: {e}".splitlines()[0],
                           {"traceback": traceback.format_exc()})],
                    time.perf_counter() - t0, raised=True)


def handouts(parts: list[Part]) -> list[tuple[int, ...]]:
    """What the workers are handed, the heaviest first: each part alone, or a group's parts
    together in their order (weighing their weights' sum); the first part's number breaks a tie."""
    items: dict = {}
    for n, part in enumerate(parts):
        items.setdefault(n if part.group is None else ("group", part.group), []).append(n)
    return sorted((tuple(ns) for ns in items.values()),
                  key=lambda ns: (-sum(parts[n].weight for n in ns), ns[0]))


def _worker(parts: list[Part], tasks, out, ticks: bool = True) -> None:
    """Runs the parts whose numbers come from ``tasks`` (a group's together, in turn), sending
    back on ``out`` each one's start, its ticks (``ticks``: only when someone reads them) and
    its outcome."""
    for n in (n for item in iter(tasks.get, None) for n in item):
        out.put(("start", n, os.getpid()))
        part = parts[n]
        tick = (lambda t, n=n: out.put(("tick", n, t))) if ticks else _unread
        done = guarded(part.section, lambda: part.run(tick))
        try:
            pickle.dumps(done)
        except Exception as e:         # noqa: BLE001 -- a result that cannot travel is an error
            done = Done([Check(part.section, part.section, "error", done.seconds,
                               f"its checks cannot be sent back: {e}".splitlines()[0])],
                        done.seconds, raised=True)
        out.put(("done", n, done))


def _unread(tick: Tick) -> None:
    """A part's progress when the gate has no progress callback: its ticks go nowhere."""


class _Order:
    """Passes on the parts' ticks in the parts' order, holding those of later parts."""

    def __init__(self, parts: list[Part], progress: Progress | None,
                 on_done: Callable[[int, Done], None]):
        self.parts, self.progress, self.on_done = parts, progress, on_done
        self.front, self.held, self.done = 0, {}, {}
        self.first = set()

    def tick(self, n: int, t: Tick) -> None:
        if n == self.front:
            self._emit(n, t)
        else:
            self.held.setdefault(n, []).append(t)

    def finish(self, n: int, done: Done) -> None:
        self.done[n] = done
        while self.front in self.done:
            n = self.front
            self.on_done(n, self.done.pop(n))
            self.front += 1
            for t in self.held.pop(self.front, []):
                self._emit(self.front, t)

    def _emit(self, n: int, t: Tick) -> None:
        part = self.parts[n]
        if part.total is not None:
            if n not in self.first:                    # its meter's opening tick
                self.first.add(n)
                if part.offset > 0 and t.done == 0 and not t.label:
                    return
            t = Tick(t.section, t.done + part.offset, part.total, t.seconds, t.label)
        if self.progress:
            self.progress(t)


def run_parts_here(parts: list[Part], progress: Progress | None,
                   on_done: Callable[[int, Done], None]) -> None:
    """Every part in turn in this process, as ``run_parts`` reports them."""
    order = _Order(parts, progress, on_done)
    for n, part in enumerate(parts):
        order.finish(n, guarded(part.section, lambda: part.run(lambda t: order.tick(n, t))))


def run_parts(parts: list[Part], workers: int, progress: Progress | None,
              on_done: Callable[[int, Done], None]) -> None:
    """Every part on ``workers`` forked processes; ``on_done(n, done)`` for each part in
    order, its ticks passed to ``progress`` before (without ``progress`` the workers send
    none: each would cross the queue to be dropped)."""
    ctx = multiprocessing.get_context("fork")
    tasks, out = ctx.Queue(), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(parts, tasks, out, progress is not None),
                         daemon=False)
             for _ in range(min(workers, len(parts)))]
    for p in procs:                   # forked before this process starts a queue's thread
        p.start()
    items = handouts(parts)
    for item in items:
        tasks.put(item)
    for _ in procs:
        tasks.put(None)
    item_of = {n: item for item in items for n in item}
    # a worker's part started and the rest of its group: lost with it if it dies
    order, running = _Order(parts, progress, on_done), {}
    try:
        while order.front < len(parts):
            try:
                msg = out.get(timeout=1.0)
            except queue.Empty:
                _lost(procs, running, order)
                continue
            kind, n, value = msg
            if kind == "start":
                running[value] = [m for m in item_of[n] if m >= n]
            elif kind == "tick":
                order.tick(n, value)
            else:
                running = {pid: rest for pid, ms in running.items()
                           if (rest := [m for m in ms if m != n])}
                order.finish(n, value)
    finally:
        for p in procs:
            if p.is_alive():
                p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join()


def _lost(procs, running: dict[int, list[int]], order: _Order) -> None:
    """A worker that died mid-part: that part is an error, and so is each part of its group
    still to run there (the others go on)."""
    lost = [n for p in procs if not p.is_alive() and p.exitcode != 0 and p.pid in running
            for n in running.pop(p.pid)]
    if not any(p.is_alive() for p in procs):           # nobody left to run the rest
        lost += [n for n in range(order.front, len(order.parts)) if n not in order.done]
    for n in sorted(set(lost)):
        section = order.parts[n].section
        order.finish(n, Done([Check(section, section, "error", 0.0,
                                    "its worker process died before it finished")],
                             0.0, raised=True))
