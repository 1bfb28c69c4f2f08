"""A crash cut's restart on the held connection, held to a restart on a new connection.

The in-process cuts on the in-memory world and SQLite hold a trace's database on one
connection (``HeldDatabase``): after a cut's crash a new kernel opens on that connection,
which ``HeldDatabase.restarted`` first makes what a restarted process would open (a
transaction left open rolled back; a connection holding a temporary table, an attached
database or a changed setting replaced). No cut of a trace leaves such state behind, so
the cuts alone would pass with any of those guards gone. Here each kind of state a killed
process cannot leave behind is planted on the held connection after a cut's crash, before
its restart, and the restarted kernel's view (its answer to the re-sent request, its
projection, the databases its connection reads and every table's rows in each) must equal
the view of a kernel restarted by a new connection on the committed file after the same cut.
"""
from __future__ import annotations

import os
import sqlite3
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable

from wgk.impl import Recorder

from wgk.conformance.oracle.crashcuts import _crash_in_process, _snapshot
from wgk.conformance.oracle.impl_system import HeldDatabase, ImplSystem
from wgk.conformance.oracle.systems import StepError
from wgk.conformance.traces.format import Trace


def _uncommitted_write(conn: sqlite3.Connection) -> None:
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("DELETE FROM main.tasks")             # the restarted kernel must not see it


def _temporary_table(conn: sqlite3.Connection) -> None:
    # named as a table of the kernel's: it hides that table from the kernel's reads
    conn.execute("CREATE TEMP TABLE tasks AS SELECT * FROM main.tasks WHERE 0")


def _attached_database(conn: sqlite3.Connection) -> None:
    conn.execute("ATTACH DATABASE ':memory:' AS kept")
    conn.execute("CREATE TABLE kept.tasks AS SELECT * FROM main.tasks")


def _changed_setting(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA query_only = ON")             # the re-sent request cannot write


#: Each kind of state a killed process cannot leave on a connection, planted on the held one.
PLANTS: dict[str, Callable[[sqlite3.Connection], None]] = {
    "an open transaction holding an uncommitted write": _uncommitted_write,
    "a temporary table": _temporary_table,
    "an attached database": _attached_database,
    "a changed connection setting": _changed_setting,
}


@dataclass
class HeldRestart:
    """One planted state, through the restarts of the chosen cuts of a trace."""

    plant: str
    cuts: list[str]                                      # the cuts' boundaries
    problems: list[str] = field(default_factory=list)    # a cut's difference, or a failure
    seconds: float = 0.0

    @property
    def verdict(self) -> str:
        return "fail" if self.problems else "pass"


def _first_commit(trace: Trace, snapdir: str):
    """The step of the first request of ``trace`` that commits, its snapshot and the hook
    calls of its first commit: the cuts just before and just after it (the re-sent request
    writes after the one, answers from the ledger after the other)."""
    recorder = Recorder()
    impl = ImplSystem(trace, hook=recorder)
    try:
        for k, step in enumerate(trace.steps):
            snap = _snapshot(impl, os.path.join(snapdir, "before.db")) if "request" in step else None
            start = len(recorder.seen)
            try:
                impl.apply(step)
            except StepError:
                pass
            seen = recorder.seen[start:]
            at = [j for j, b in enumerate(seen) if b.kind == "commit"][:2]
            if snap is not None and len(at) == 2:
                return k, snap, {j: seen[j].describe() for j in at}
    finally:
        impl.close()
    raise StepError(f"{trace.id}: no request commits")


def held_restarts(trace: Trace) -> list[HeldRestart]:
    """Each planted state (``PLANTS``) through the restarts after the cuts of ``trace``'s
    first commit (``_first_commit``)."""
    with tempfile.TemporaryDirectory(prefix="wgk-held-") as tmp:
        k, snap, cuts = _first_commit(trace, tmp)
        step = trace.steps[k]
        wanted = {j: _view(_crash_in_process(snap, os.path.join(tmp, f"cut-{j}.db"), j, step),
                           step)                  # a new connection on the committed file
                  for j in cuts}
        out = []
        for plant, make in PLANTS.items():
            t0 = time.perf_counter()
            result = HeldRestart(plant, [f"step {k} {name}" for name in cuts.values()])
            held = HeldDatabase()
            try:
                for j, name in cuts.items():
                    problem = _planted(snap, held, j, step, make, wanted[j])
                    if problem:                   # the connection is not trusted after it
                        result.problems.append(f"{plant} planted before the restart after "
                                               f"step {k} {name}: {problem}")
                        break
            finally:
                held.close()
            result.seconds = time.perf_counter() - t0
            out.append(result)
    return out


def _planted(snap, held: HeldDatabase, j: int, step: dict, plant, wanted: dict) -> str | None:
    """What differs when ``plant`` is planted on the held connection after cut ``j``'s crash
    (None: the restarted kernel's view is ``wanted``)."""
    impl = None
    try:
        impl = _crash_in_process(snap, held, j, step, plant)
        if impl is None:
            return "the cut's boundary was not reached"
        view = _view(impl, step, close=False)
    except Exception as e:             # noqa: BLE001 -- a restart that breaks is what is reported
        return f"the restarted kernel failed: {type(e).__name__}: {e}"
    finally:
        if impl is not None:
            impl.close()
    differ = [part for part in sorted(wanted.keys() | view.keys())
              if wanted.get(part) != view.get(part)]
    return ("the restarted kernel's " + ", ".join(differ) + " differ from a kernel's on a "
            "new connection to the committed file") if differ else None


def _view(impl: ImplSystem | None, step: dict, close: bool = True) -> dict:
    """A restarted kernel's answer to the re-sent request, its projection, the databases its
    connection reads and every table's rows in each."""
    if impl is None:
        raise StepError("the cut's boundary was not reached")
    try:
        try:
            answer = impl.apply(step)
        except StepError as e:
            answer = f"refused: {e}"
        conn = impl.kernel.conn
        names = [row[1] for row in conn.execute("PRAGMA database_list") if row[1] != "temp"]
        view = {"answer": answer, "projection": impl.project(), "databases": names}
        for db in names + ["temp"]:
            tables = [row[0] for row in conn.execute(
                f"SELECT name FROM \"{db}\".sqlite_master WHERE type = 'table' ORDER BY name")]
            view[f"rows of {db}"] = {t: sorted(map(repr, conn.execute(f'SELECT * FROM "{db}"."{t}"')))
                                     for t in tables}
        return view
    finally:
        if close:
            impl.close()
