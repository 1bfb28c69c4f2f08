"""Projections: what readers get is derived from stored rows, never stored separately.

``status`` is the one place a task's status comes from, and
``StatusProjection`` is the one routine that writes the ``task_view`` table
(status, dependency-satisfied, pending dependencies) that readiness queries
use. No other code writes a status. The planner (for every unfinished task exactly one
way forward, or a named fail-closed hold) is a query over the stored facts: ``planner``.
"""
from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from ..storage.records import TaskRecord
from .planner import Plan
from ..contract.vocabulary import EFFECT_PHASES, PHASES, RECEIPTS as RECEIPT_NAMES


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
    gone; inside a transaction, the count of edges still to go on the main line; an open
    task ranks higher than any transaction, a dead owner higher again, a suspect one
    highest; an expired wait is a hold."""
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


# --- the observable projection of one task -------------------------------------------------------


@dataclass
class TaskFacts:
    """Facts beside the record that the observable projection reports."""

    evidence: list[list[str]]
    counters: dict[str, int]
    promotions: int
    effect_done: bool
    worktree: dict


def observable_task(view, name: str, facts: TaskFacts, p: Plan | None) -> dict:
    """One task's observable projection, with its plan (``planner.plans``)."""
    t = view.record(name)
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
        "completion-receipt": t.completion_receipt,
        "promotions": facts.promotions, "effect-done": facts.effect_done,
        "deadline": t.deadline,
        "recovery-rank": recovery_rank(t),
        "counters": facts.counters,
        "evidence": facts.evidence,
        "failure": t.failure, "retries": t.retries,
        "waiting-on": t.waiting_on, "wait-deadline": t.wait_deadline,
        "wait-expired": t.wait_expired,
        "paused": t.paused, "not-before": t.not_before,
        "route": t.route, "route-breaker": "unavailable" if t.route_unavailable else "available",
        "route-probe-at": t.probe_at,
        "reopening": t.reopening,
        "review": {"phase": t.review_phase, "manifest": t.manifest, "flip": t.flip,
                   "evaluation": t.evaluation, "publication": t.publication,
                   "publications": t.publications, "failure": t.review_failure},
        "assigned": t.assigned, "legacy-done": t.legacy_done,
        "reconstructed": t.reconstructed, "abandoned": t.abandoned,
    }

