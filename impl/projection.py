"""Projections: everything a reader sees is computed from recorded facts.

``status`` is the one place a task's status comes from, and
``StatusProjection`` is the one routine that writes the ``task_view`` table
(status, dependency-satisfied, pending dependencies) that readiness queries
use. No other code writes a status. ``plan`` is the planner: for every
unfinished task exactly one way forward, or a named fail-closed hold.
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Protocol

from . import reopen
from .records import TaskPolicy, TaskRecord
from .decision import Observe
from .rules_save import target_moved
from .vocabulary import EFFECT_PHASES, PHASES, RECEIPTS as RECEIPT_NAMES


def status(t: TaskRecord) -> str:
    """Task status as a pure function of the record (Done only from a GraphSave)."""
    # guards: done-iff-graphsave
    if t.graph_saved:
        return "done"
    if t.abandoned:
        return "abandoned"
    if t.exit == "needs-reconciliation" or t.legacy_done:
        return "needs-reconciliation"
    if t.exit != "none":
        return t.exit          # needs-repair, upgrade-blocked, aborted-preserved
    if t.running:
        return "completing" if t.reserved else "in-progress"
    return "open"


def satisfies_dependents(t: TaskRecord) -> bool:
    """Dependency-satisfying Done: a GraphSave, never a legacy claim."""
    # guards: legacy-never-satisfies
    return t.graph_saved


def finished(t: TaskRecord) -> bool:
    return t.graph_saved or t.abandoned


def recovery_rank(t: TaskRecord) -> int:
    """0 nothing in flight; 1 a completion before any external effect; 2 an effect is
    prepared or committed (re-observe, never redo)."""
    if not (t.running and t.reserved):
        return 0
    return 2 if t.phase in EFFECT_PHASES else 1


#: Ranks above every transaction rank (``1 + graph-saved - phase`` at most ``_LAST``).
_LAST = len(PHASES)


def convergence_rank(t: TaskRecord) -> int:
    """What convergence has left to do for a task, as a natural number its every applied
    action (other than a probe) lowers: 0 finished, held, or with an owner not proven
    gone; a transaction counts the main-line edges left; an open task ranks above every
    transaction, a proven-dead owner above that, a suspect one above that; a wait that ran
    out is a hold."""
    if finished(t) or t.exit != "none" or t.legacy_done or (
            t.wait_expired and t.waiting_on is None):
        return 0
    if t.running and t.reserved:
        return len(PHASES) - PHASES.index(t.phase)
    if t.running:
        return {"dead": _LAST + 3, "suspect": _LAST + 4}.get(t.owner_seen, 0)
    return _LAST + 1


# --- the one writer of status -------------------------------------------------------------


class StatusProjection:
    """Maintains ``task_view``: status, satisfied, and the count of unsatisfied dependencies."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn
        self._cache: dict[int, tuple[str, bool]] = {}

    def forget(self) -> None:
        self._cache.clear()

    def _current(self, task_id: int) -> tuple[str, bool]:
        if task_id not in self._cache:
            row = self.conn.execute("SELECT status, satisfied FROM task_view WHERE task = ?",
                                    (task_id,)).fetchone()
            self._cache[task_id] = (row[0], bool(row[1]))
        return self._cache[task_id]

    def create(self, task_id: int, record: TaskRecord, pending: int) -> None:
        view = (status(record), satisfies_dependents(record))
        self.conn.execute("INSERT INTO task_view VALUES (?, ?, ?, ?)",
                          (task_id, view[0], int(view[1]), pending))
        self._cache[task_id] = view

    def add_dependency(self, task_id: int, dep_satisfied: bool) -> None:
        if not dep_satisfied:
            self.conn.execute("UPDATE task_view SET pending = pending + 1 WHERE task = ?", (task_id,))

    def refresh(self, task_id: int, record: TaskRecord) -> None:
        """Recompute one task's view from its record; dependents learn a change of Done."""
        old_status, old_satisfied = self._current(task_id)
        new_status, new_satisfied = status(record), satisfies_dependents(record)
        if (new_status, new_satisfied) == (old_status, old_satisfied):
            return
        self.conn.execute("UPDATE task_view SET status = ?, satisfied = ? WHERE task = ?",
                          (new_status, int(new_satisfied), task_id))
        if new_satisfied != old_satisfied:
            delta = -1 if new_satisfied else 1
            self.conn.execute("UPDATE task_view SET pending = pending + ? WHERE task IN "
                              "(SELECT task FROM edges WHERE dep = ?)", (delta, task_id))
        self._cache[task_id] = (new_status, new_satisfied)

    def ready(self) -> list[str]:
        """Open tasks whose dependencies are all dependency-satisfying Done."""
        return [name for (name,) in self.conn.execute(
            "SELECT tasks.name FROM task_view JOIN tasks ON tasks.id = task_view.task "
            "WHERE task_view.status = 'open' AND task_view.pending = 0 ORDER BY tasks.id")]


# --- the planner ------------------------------------------------------------------------------


class GraphView(Protocol):
    def policy(self, name: str) -> TaskPolicy: ...
    def record(self, name: str) -> TaskRecord: ...


@dataclass(frozen=True)
class Way:
    name: str
    way: str
    action: str
    doc: str


WAYS: tuple[Way, ...] = (
    Way("assign", "runnable", "assign", "admission needs its assignment receipt"),
    Way("dispatch", "runnable", "dispatch", "dependencies are Done: open an attempt"),
    Way("repair-required", "hold", "await-operator",
        "the attempt's work was rejected: a repair, never an automatic retry"),
    Way("retry-budget-spent", "hold", "await-operator",
        "the task's automatic retries after failures are used up: an operator retries"),
    Way("await-dependencies", "wait", "await-dependencies", "a dependency is not Done yet"),
    Way("dependency-abandoned", "hold", "await-operator", "a dependency was abandoned"),
    Way("live-owner", "live-owner", "probe-owner",
        "the exact owner is running; it is re-probed on its deadline"),
    Way("probe-suspect", "scheduled", "probe-owner", "evidence raised suspicion: probe once"),
    Way("resume-continuation", "wait", "resume",
        "the exact owner is proven dead and its session may continue: the wrapper's resume "
        "until the deadline"),
    Way("declare-lost", "scheduled", "declare-lost",
        "the exact owner is proven dead with no terminal intent, and no continuation is "
        "planned (or its deadline has passed)"),
    Way("drive-transaction", "scheduled", "drive-transaction",
        "convergence drives the next SaveTransaction edge"),
    Way("await-review", "wait", "await-review", "the validator or evaluator must answer"),
    Way("mark-repair", "scheduled", "mark-repair", "the target moved before the CAS: needs repair"),
    Way("await-external", "wait", "await-external",
        "parked until the evidence its wait names arrives (or its deadline passes)"),
    Way("expire-wait", "scheduled", "expire-wait", "the external wait's deadline has passed: end it"),
    Way("wait-expired", "hold", "await-operator",
        "the external wait ran out: an operator retries or resets"),
    Way("hold", "hold", "await-operator", "fail-closed: an operator must act"),
    Way("dependency-reopened", "hold", "await-operator",
        "a dependency was reopened under the running attempt: its effect is refused, an "
        "operator resets the task"),
)

#: The ways whose deadline is the external wait's (the others': the attempt's).
WAIT_WAYS = frozenset({"await-external", "expire-wait"})


def enabled_ways(view: GraphView, name: str, observe: Observe) -> list[Way]:
    """Every way whose own condition holds; exactly one is the planner's invariant."""
    t, p = view.record(name), view.policy(name)
    deps = [view.record(d) for d in p.deps]
    deps_done = all(d.graph_saved for d in deps)
    dep_abandoned = any(d.abandoned for d in deps)
    held = t.exit != "none" or t.legacy_done
    admitted = not p.requires_assignment or t.assigned
    parked = t.waiting_on is not None or t.wait_expired
    idle = not t.running and not held and not parked
    stopped = not t.running and not held
    due = t.waiting_on is not None and bool(t.wait_deadline) and observe.now() >= t.wait_deadline
    watching = t.running and not t.reserved and not held
    # a proven-dead owner's session may continue until the deadline its death was proven with
    continues = (watching and t.owner_seen == "dead" and t.session_lease and t.worktree_lease
                 and observe.now() < t.deadline and observe.worktree(t).present)
    waits = t.phase == "candidate-sealed" or (p.review_required and t.phase == "awaiting-acceptance")
    moved = t.running and not held and target_moved(observe, t)
    failed = t.attempt_state in ("failed", "lost")      # the next dispatch is an automatic retry
    repair = failed and t.failure == "semantic"
    spent = failed and not repair and t.retries >= p.retry_budget
    reopened = reopened_under(view, name, t, deps_done)
    # guards: exactly-one-way-forward, no-dead-owner-in-progress-without-action
    conditions = {
        "assign": idle and p.requires_assignment and not t.assigned,
        "dispatch": idle and deps_done and admitted and not (repair or spent),
        "repair-required": idle and deps_done and admitted and repair,
        "retry-budget-spent": idle and deps_done and admitted and spent,
        "await-dependencies": idle and not deps_done and not dep_abandoned and admitted,
        "dependency-abandoned": idle and dep_abandoned and admitted,
        "live-owner": watching and t.owner_seen in ("unverified", "live"),
        "probe-suspect": watching and t.owner_seen == "suspect",
        "resume-continuation": watching and t.owner_seen == "dead" and continues,
        "declare-lost": watching and t.owner_seen == "dead" and not continues,
        "drive-transaction": t.running and t.reserved and not reopened and not held and not moved and not waits,
        "await-review": t.running and not held and waits,
        "mark-repair": moved,
        "await-external": stopped and t.waiting_on is not None and not due,
        "expire-wait": stopped and due,
        "wait-expired": stopped and t.waiting_on is None and t.wait_expired,
        "hold": held,
        "dependency-reopened": reopened,
    }
    return [w for w in WAYS if conditions[w.name]]


def reopened_under(view: GraphView, name: str, t: TaskRecord, deps_done: bool) -> bool:
    """The next edge is the effect's, and a dependency is not Done or opened a generation
    after the attempt opened: the effect would be made on the old generation."""
    return (t.running and t.reserved and t.exit == "none" and not t.legacy_done
            and t.phase == "disposition-recorded"
            and (not deps_done or reopen.deps_reopened(view, name)))


def hold_reason(t: TaskRecord) -> str:
    if t.exit == "none":
        return "needs-reconciliation: legacy-unproven" if t.legacy_done else "hold"
    return f"{t.exit}: {t.reason}"


@dataclass(frozen=True)
class Plan:
    task: str
    way: str
    action: str
    reason: str
    deadline: int

    def to_json(self) -> dict:
        return {"task": self.task, "way": self.way, "action": self.action,
                "reason": self.reason, "deadline": self.deadline}


def plan(view: GraphView, name: str, observe: Observe) -> Plan | None:
    """The one way forward for an unfinished task, or a named hold (None when finished)."""
    t = view.record(name)
    if finished(t):
        return None
    ways = enabled_ways(view, name, observe)
    # guards: exactly-one-way-forward
    if len(ways) != 1:
        why = "no way forward" if not ways else "several ways: " + ", ".join(w.name for w in ways)
        return Plan(name, "hold", "await-operator", why, 0)
    w = ways[0]
    reason = hold_reason(t) if w.name == "hold" else w.name
    return Plan(name, w.way, w.action, reason,
                t.wait_deadline if w.name in WAIT_WAYS else t.deadline)


# --- the observable projection of one task -------------------------------------------------------


@dataclass
class TaskFacts:
    """Facts beside the record that the observable projection reports."""

    evidence: list[list[str]]
    counters: dict[str, int]
    promotions: int
    effect_done: bool
    worktree: dict


def observable_task(view: GraphView, name: str, facts: TaskFacts, observe: Observe) -> dict:
    t = view.record(name)
    p = plan(view, name, observe)
    owner = None
    if t.running:
        owner = {"pid": t.owner_pid, "birth": t.owner_birth, "session": t.session,
                 "wrapper-epoch": t.wrapper_epoch, "child-epoch": t.child_epoch}
    return {
        "status": status(t),
        "dependency-satisfied": satisfies_dependents(t),
        "plan": p.to_json() if p is not None else None,
        "generation": t.generation, "attempt": t.attempt, "fence": t.fence,
        "lease-epoch": t.lease_epoch,
        "attempt-state": t.attempt_state,
        "owner-seen": t.owner_seen,
        "owner": owner,
        "leases": {"worktree": t.worktree_lease, "session": t.session_lease,
                   "finish": t.finish_lease},
        "phase": t.phase, "exit": t.exit, "reason": t.reason, "revision": t.revision,
        "candidate": t.candidate, "base": t.base, "version": t.version,
        "disposition": t.disposition,
        "receipts": {name_: {"fence": b.fence, "candidate": b.candidate, "base": b.base}
                     for name_, b in zip(RECEIPT_NAMES, t.receipts) if b.fence != 0},
        "worktree": facts.worktree,
        "saved-work": t.saved_work, "retained": t.retained, "imported": t.imported,
        "promotions": facts.promotions, "effect-done": facts.effect_done,
        "deadline": t.deadline,
        "recovery-rank": recovery_rank(t),
        "counters": facts.counters,
        "evidence": facts.evidence,
        "failure": t.failure, "retries": t.retries,
        "waiting-on": t.waiting_on, "wait-deadline": t.wait_deadline,
        "wait-expired": t.wait_expired,
        "assigned": t.assigned, "legacy-done": t.legacy_done,
        "reconstructed": t.reconstructed, "abandoned": t.abandoned,
    }

