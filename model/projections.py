"""Projections: everything a reader sees is computed from evidence.

``status`` is the only place a task's status comes from; no rule writes it.
``ways_forward`` lists the planner's candidate ways for a task, each with an
independent enabling condition, so "exactly one way forward" is a property to
check, not a consequence of an if/else chain.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import networkx as nx

from .logic import all_of, any_of, ite, not_, one_of
from .predicates import deps_current, deps_done, graph_saved, reserved, running
from .state import State, TaskState
from .vocab import (
    Action, AttemptState, Disposition, Exit, Failure, Kind, OwnerSeen, Phase, Reason, Status, Way,
    EDGES,
)


def status(t: TaskState) -> Any:
    """Task status as a pure function of evidence (Done only from a GraphSave)."""
    return ite(graph_saved(t), Status.DONE,
           ite(t.abandoned, Status.ABANDONED,
           ite(any_of(t.exit == Exit.NEEDS_RECONCILIATION, t.legacy_done), Status.NEEDS_RECONCILIATION,
           ite(t.exit == Exit.NEEDS_REPAIR, Status.NEEDS_REPAIR,
           ite(t.exit == Exit.UPGRADE_BLOCKED, Status.UPGRADE_BLOCKED,
           ite(t.exit == Exit.ABORTED_PRESERVED, Status.ABORTED_PRESERVED,
           ite(all_of(running(t), reserved(t)), Status.COMPLETING,
           ite(running(t), Status.IN_PROGRESS, Status.OPEN))))))))


def finished(t: TaskState) -> Any:
    return any_of(graph_saved(t), t.abandoned)


def ready_tasks(s: State) -> list[str]:
    """The tasks a daemon dispatch would open an attempt on (``admitted``), in topological
    order (networkx)."""
    order = list(nx.topological_sort(s.graph.digraph()))
    return [name for name in order if admitted(s, s.graph.index[name], s.task(name)) is True]


def recovery_rank(t: TaskState) -> Any:
    """How far into the commit protocol a recovery must resume: 0 nothing in flight,
    1 before any external effect (safe to abort), 2 an effect is prepared or committed
    and must be re-observed, never blindly redone."""
    in_flight = all_of(running(t), reserved(t))
    after_effect = one_of(t.phase, (Phase.EFFECT_PREPARED, Phase.EFFECT_COMMITTED,
                                    Phase.CLEANUP_PREPARED, Phase.CLEANUP_COMMITTED))
    return ite(in_flight, ite(after_effect, 2, 1), 0)


def next_edge(t: TaskState, review_required: bool) -> Any:
    """The kind of the next main-line edge, as an int (0 when none)."""
    out: Any = 0
    for kind, (sources, _) in reversed(list(EDGES.items())):
        if kind == Kind.REQUEST_REVIEW and not review_required:
            continue
        if kind == Kind.ACCEPT:
            sources = (Phase.AWAITING_ACCEPTANCE,) if review_required else (Phase.VALIDATED,)
        out = ite(one_of(t.phase, sources), int(kind), out)
    return out


@dataclass(frozen=True)
class WayRule:
    """One candidate way forward: its name, way, action and enabling condition."""

    name: str
    way: Way
    action: Action
    doc: str

    def enabled(self, s: State, i: int) -> Any:
        return WAY_CONDITIONS[self.name](s, i, s.tasks[i])


def _dep_abandoned(s: State, i: int) -> Any:
    return any_of(*[s.tasks[d].abandoned for d in s.graph.deps[i]])


def _held(t: TaskState) -> Any:
    return any_of(t.exit != Exit.NONE, t.legacy_done)


def _target_moved(s: State, t: TaskState) -> Any:
    return all_of(t.phase == Phase.EFFECT_PREPARED, t.disposition == Disposition.LAND,
                  not_(t.effect_done), s.target != t.base)


def _waits_on_other_actor(s: State, i: int, t: TaskState) -> Any:
    """The next edge belongs to the validator or the evaluator, not to convergence."""
    review = s.graph.review_required[i]
    return any_of(t.phase == Phase.CANDIDATE_SEALED,
                  all_of(review, t.phase == Phase.AWAITING_ACCEPTANCE))


def _failed(s: State, i: int, t: TaskState) -> Any:
    """The last attempt of this generation failed or was lost: the next dispatch is an
    automatic retry (a new generation's first dispatch is not: it has no attempt yet)."""
    return all_of(t.attempt != 0, one_of(t.attempt_state, (AttemptState.FAILED, AttemptState.LOST)))


def _needs_repair(s: State, i: int, t: TaskState) -> Any:
    return all_of(_failed(s, i, t), t.failure == Failure.SEMANTIC)


def _budget_spent(s: State, i: int, t: TaskState) -> Any:
    return all_of(_failed(s, i, t), t.failure != Failure.SEMANTIC,
                  t.retries >= s.graph.retry_budget[i])


def _retry_held(s: State, i: int, t: TaskState) -> Any:
    return any_of(_needs_repair(s, i, t), _budget_spent(s, i, t))


def _parked(t: TaskState) -> Any:
    """The task waits on an external event, or its wait ran out."""
    return any_of(t.waiting_on != 0, t.wait_expired)


def _wait_due(s: State, t: TaskState) -> Any:
    """The task's external wait has a deadline and it has passed."""
    return all_of(t.waiting_on != 0, t.wait_deadline != 0, s.now >= t.wait_deadline)


def _continuation_planned(s: State, t: TaskState) -> Any:
    """The same session may continue a proven-dead owner's attempt: its session and worktree
    leases are held, its worktree is there, and the window its death was proven with (the
    attempt's deadline) is still open."""
    return all_of(t.session_lease, t.worktree_lease, t.worktree_present, s.now < t.deadline)


def _idle(t: TaskState) -> Any:
    """No attempt runs, nothing is held, nothing waits, no reset's intent is pending:
    admission decides what is next."""
    return all_of(not_(running(t)), not_(_held(t)), not_(_parked(t)), not_(t.reopening))


def _due(s: State, t: TaskState) -> Any:
    """The task's not-before time has come (0: it has none)."""
    return s.now >= t.not_before


def _open(s: State, t: TaskState) -> Any:
    """Idle, not paused, due and its route available: what admits the task is up to its policy
    and its failures."""
    return all_of(_idle(t), not_(t.paused), _due(s, t), not_(t.route_unavailable))


def _route_closed(s: State, t: TaskState) -> Any:
    """Idle, not paused and due, but its provider route's breaker is open: nothing opens an
    attempt on it until a probe closes it."""
    return all_of(_idle(t), not_(t.paused), _due(s, t), t.route_unavailable)


def _chat_pending(t: TaskState) -> Any:
    """A chat creation request was made under the running attempt's opening key (its fence)
    and not yet reconciled: whether or not its answer arrived, the chat it created is looked
    up by that key, never created again."""
    return all_of(t.chat_request != 0, t.chat_request == t.fence, t.chat_reconciled != t.fence)


def _archive_proposed(t: TaskState) -> Any:
    """A Done, unarchived task the daemon's archive backlog proposed, by its result's digest."""
    return all_of(graph_saved(t), t.archived == 0, t.candidate != 0,
                  t.archive_proposed == t.candidate)


def _dependency_reopened(s: State, i: int, t: TaskState) -> Any:
    """The next edge is the effect's and a dependency was reopened since the attempt opened:
    the effect is refused on the old generation."""
    return all_of(running(t), reserved(t), not_(_held(t)), t.phase == Phase.DISPOSITION_RECORDED,
                  not_(deps_current(s, i, t)))


def admitted(s: State, i: int, t: TaskState) -> Any:
    """The one admission predicate: the task is unfinished and idle (no attempt runs, no hold,
    no wait), not paused and due (its not-before time has come), its provider route available
    (no breaker open), its dependencies are Done, it is assigned where that is required, and no
    failure of this generation holds it (a semantic one, or a spent retry budget). ``ready``
    lists exactly these tasks and the plan's ``dispatch`` way is exactly this; the invariant
    ``ready-iff-dispatch-admitted`` holds the dispatch rule to it."""
    return all_of(not_(finished(t)), _open(s, t), deps_done(s, i),
                  any_of(not_(s.graph.requires_assignment[i]), t.assigned),
                  not_(_retry_held(s, i, t)))


WAY_CONDITIONS = {
    "assign": lambda s, i, t: all_of(
        _open(s, t), s.graph.requires_assignment[i], not_(t.assigned)),
    "dispatch": lambda s, i, t: admitted(s, i, t),
    "repair-required": lambda s, i, t: all_of(
        _open(s, t), deps_done(s, i),
        any_of(not_(s.graph.requires_assignment[i]), t.assigned), _needs_repair(s, i, t)),
    "retry-budget-spent": lambda s, i, t: all_of(
        _open(s, t), deps_done(s, i),
        any_of(not_(s.graph.requires_assignment[i]), t.assigned), _budget_spent(s, i, t)),
    "await-dependencies": lambda s, i, t: all_of(
        _open(s, t), not_(deps_done(s, i)), not_(_dep_abandoned(s, i)),
        any_of(not_(s.graph.requires_assignment[i]), t.assigned)),
    "dependency-abandoned": lambda s, i, t: all_of(
        _open(s, t), _dep_abandoned(s, i),
        any_of(not_(s.graph.requires_assignment[i]), t.assigned)),
    "live-owner": lambda s, i, t: all_of(
        running(t), not_(reserved(t)), not_(_held(t)), t.completion_receipt == 0,
        one_of(t.owner_seen, (OwnerSeen.UNVERIFIED, OwnerSeen.LIVE)), not_(_chat_pending(t))),
    "await-handoff": lambda s, i, t: all_of(
        running(t), not_(reserved(t)), not_(_held(t)), t.completion_receipt != 0,
        one_of(t.owner_seen, (OwnerSeen.UNVERIFIED, OwnerSeen.LIVE)), not_(_chat_pending(t))),
    "reconcile-chat-request": lambda s, i, t: all_of(
        running(t), not_(reserved(t)), not_(_held(t)),
        one_of(t.owner_seen, (OwnerSeen.UNVERIFIED, OwnerSeen.LIVE)), _chat_pending(t)),
    "probe-suspect": lambda s, i, t: all_of(
        running(t), not_(reserved(t)), not_(_held(t)), t.owner_seen == OwnerSeen.SUSPECT),
    "resume-continuation": lambda s, i, t: all_of(
        running(t), not_(reserved(t)), not_(_held(t)), t.owner_seen == OwnerSeen.DEAD,
        _continuation_planned(s, t), not_(t.reopening)),
    "declare-lost": lambda s, i, t: all_of(
        running(t), not_(reserved(t)), not_(_held(t)), t.owner_seen == OwnerSeen.DEAD,
        any_of(not_(_continuation_planned(s, t)), t.reopening)),
    "drive-transaction": lambda s, i, t: all_of(
        running(t), reserved(t), not_(_held(t)), not_(_target_moved(s, t)),
        not_(_waits_on_other_actor(s, i, t)), not_(_dependency_reopened(s, i, t))),
    "await-review": lambda s, i, t: all_of(
        running(t), not_(_held(t)), _waits_on_other_actor(s, i, t)),
    "mark-repair": lambda s, i, t: all_of(running(t), not_(_held(t)), _target_moved(s, t)),
    "await-external": lambda s, i, t: all_of(
        not_(running(t)), not_(_held(t)), t.waiting_on != 0, not_(_wait_due(s, t))),
    "expire-wait": lambda s, i, t: all_of(not_(running(t)), not_(_held(t)), _wait_due(s, t)),
    "wait-expired": lambda s, i, t: all_of(
        not_(running(t)), not_(_held(t)), t.waiting_on == 0, t.wait_expired),
    "paused": lambda s, i, t: all_of(not_(finished(t)), _idle(t), t.paused),
    "not-yet-due": lambda s, i, t: all_of(not_(finished(t)), _idle(t), not_(t.paused),
                                          not_(_due(s, t))),
    "await-route-probe": lambda s, i, t: all_of(
        not_(finished(t)), _route_closed(s, t), s.now < t.probe_at),
    "probe-route": lambda s, i, t: all_of(
        not_(finished(t)), _route_closed(s, t), s.now >= t.probe_at),
    "reopen-pending": lambda s, i, t: all_of(
        not_(finished(t)), not_(running(t)), not_(_held(t)), not_(_parked(t)), t.reopening),
    "hold": lambda s, i, t: _held(t),
    "dependency-reopened": _dependency_reopened,
    "await-archive-confirmation": lambda s, i, t: all_of(
        _archive_proposed(t), t.archive_confirmed != t.candidate),
}

WAYS: tuple[WayRule, ...] = (
    WayRule("assign", Way.RUNNABLE, Action.ASSIGN, "admission needs its assignment receipt"),
    WayRule("dispatch", Way.RUNNABLE, Action.DISPATCH, "dependencies are Done: open an attempt"),
    WayRule("repair-required", Way.HOLD, Action.AWAIT_OPERATOR,
            "the attempt's work was rejected: a repair, never an automatic retry"),
    WayRule("retry-budget-spent", Way.HOLD, Action.AWAIT_OPERATOR,
            "the task's automatic retries after failures are used up: an operator retries"),
    WayRule("await-dependencies", Way.WAIT, Action.AWAIT_DEPENDENCIES, "a dependency is not Done yet"),
    WayRule("dependency-abandoned", Way.HOLD, Action.AWAIT_OPERATOR, "a dependency was abandoned"),
    WayRule("live-owner", Way.LIVE_OWNER, Action.PROBE_OWNER,
            "the exact owner is running; it is re-probed on its deadline"),
    WayRule("await-handoff", Way.LIVE_OWNER, Action.AWAIT_HANDOFF,
            "the owner receipted its completion and may be alive: its handoff (the submit that "
            "opens the transaction) is awaited, it is re-probed on its deadline; never Done "
            "without the transaction"),
    WayRule("reconcile-chat-request", Way.SCHEDULED, Action.RECONCILE_CHAT,
            "the exact owner is running and the chat creation request made under its attempt's "
            "key is not reconciled: the chat it created is looked up by that key, never created "
            "again"),
    WayRule("probe-suspect", Way.SCHEDULED, Action.PROBE_OWNER, "evidence raised suspicion: probe once"),
    WayRule("resume-continuation", Way.WAIT, Action.RESUME,
            "the exact owner is proven dead and its session may continue: the wrapper's resume "
            "until the deadline"),
    WayRule("declare-lost", Way.SCHEDULED, Action.DECLARE_LOST,
            "the exact owner is proven dead with no terminal intent, and no continuation is "
            "planned (or its deadline has passed, or a reset's intent is pending: its "
            "ownership is released, never continued)"),
    WayRule("drive-transaction", Way.SCHEDULED, Action.DRIVE_TRANSACTION,
            "convergence drives the next SaveTransaction edge"),
    WayRule("await-review", Way.WAIT, Action.AWAIT_REVIEW, "the validator or evaluator must answer"),
    WayRule("mark-repair", Way.SCHEDULED, Action.MARK_REPAIR,
            "the target moved before the CAS: needs repair"),
    WayRule("await-external", Way.WAIT, Action.AWAIT_EXTERNAL,
            "parked until the evidence its wait names arrives (or its deadline passes)"),
    WayRule("expire-wait", Way.SCHEDULED, Action.EXPIRE_WAIT,
            "the external wait's deadline has passed: end it"),
    WayRule("wait-expired", Way.HOLD, Action.AWAIT_OPERATOR,
            "the external wait ran out: an operator retries or resets"),
    WayRule("paused", Way.HOLD, Action.AWAIT_OPERATOR,
            "the operator paused the task: nothing opens an attempt until it is unpaused"),
    WayRule("not-yet-due", Way.WAIT, Action.AWAIT_NOT_BEFORE,
            "the task's not-before time has not come: nothing opens an attempt before it"),
    WayRule("await-route-probe", Way.WAIT, Action.AWAIT_ROUTE_PROBE,
            "the task's provider route is unavailable (its breaker open): nothing opens an "
            "attempt on it, the route is probed at its next probe time"),
    WayRule("probe-route", Way.RUNNABLE, Action.PROBE_ROUTE,
            "the open breaker's probe is due: the daemon's route prober probes the route "
            "(succeeded: it closes; failed: it is armed again)"),
    WayRule("reopen-pending", Way.HOLD, Action.AWAIT_OPERATOR,
            "a reset's intent is pending and the old owner is released: the operator's reset "
            "opens the one new generation"),
    WayRule("hold", Way.HOLD, Action.AWAIT_OPERATOR, "fail-closed: an operator must act"),
    WayRule("dependency-reopened", Way.HOLD, Action.AWAIT_OPERATOR,
            "a dependency was reopened under the running attempt: its effect is refused, an "
            "operator resets the task"),
    WayRule("await-archive-confirmation", Way.WAIT, Action.AWAIT_ARCHIVE_CONFIRMATION,
            "the daemon's archive backlog proposed the Done task: the operator's confirmation of "
            "the same digest comes first (then the archive names it; the daemon never archives "
            "on its own word)"),
)

#: The ways of a finished task: its Done result proposed for an archive (every other way is of
#: an unfinished task; ``archive`` is the historical ruleset's own).
ARCHIVE_WAYS = frozenset({"await-archive-confirmation", "archive"})

#: The ways whose deadline is the external wait's (the others: the attempt's, but for the ways
#: of ``ROUTE_WAYS``: the route's next probe time).
WAIT_WAYS = frozenset({"await-external", "expire-wait"})
ROUTE_WAYS = frozenset({"await-route-probe", "probe-route"})


WAYS_BY_NAME = {w.name: w for w in WAYS}


def ways_forward(s: State, i: int, conditions: dict | None = None,
                 ways: tuple[WayRule, ...] = WAYS) -> list[WayRule]:
    """Every way of ``ways`` whose condition holds (concrete states only); ``conditions``:
    another ruleset's (``planner_rulesets``), the corrected planner's by default."""
    if conditions is None:
        return [w for w in ways if w.enabled(s, i) is True]
    return [w for w in ways if conditions[w.name](s, i, s.tasks[i]) is True]


@dataclass(frozen=True)
class Plan:
    task: str
    way: Way
    action: Action
    reason: str
    deadline: int

    def to_json(self) -> dict:
        return {"task": self.task, "way": self.way.label, "action": self.action.label,
                "reason": self.reason, "deadline": self.deadline}


def hold_reason(t: TaskState) -> str:
    """``exit: reason`` for a held transaction, e.g. ``needs-repair: target-moved``."""
    if t.exit == Exit.NONE:
        return "needs-reconciliation: legacy-unproven" if t.legacy_done else "hold"
    return f"{Exit(t.exit).label}: {Reason(t.reason).label}"


def plan(s: State, i: int, conditions: dict | None = None,
         table: tuple[WayRule, ...] = WAYS) -> Plan | None:
    """The planner's verdict for task ``i`` (None for a finished task, unless the archive of
    its Done result is proposed); ``conditions`` and the ways ``table`` as in
    ``ways_forward``."""
    t = s.tasks[i]
    name = s.graph.tasks[i]
    done = finished(t) is True
    ways = ways_forward(s, i, conditions, tuple(w for w in table if w.name in ARCHIVE_WAYS)
                        if done else table)
    if done and not ways:
        return None
    if len(ways) != 1:
        why = "no way forward" if not ways else "several ways: " + ", ".join(w.name for w in ways)
        return Plan(name, Way.HOLD, Action.AWAIT_OPERATOR, why, 0)
    w = ways[0]
    reason = w.name if w.name != "hold" else hold_reason(t)
    deadline = (t.wait_deadline if w.name in WAIT_WAYS
                else t.not_before if w.name == "not-yet-due"
                else t.probe_at if w.name in ROUTE_WAYS else t.deadline)
    return Plan(name, w.way, w.action, reason, int(deadline))


def plans(s: State) -> list[Plan]:
    return [p for i in range(len(s.tasks)) if (p := plan(s, i)) is not None]
