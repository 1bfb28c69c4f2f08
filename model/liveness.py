"""Liveness: the fairness assumptions (kind ``assume``) and the ``eventually`` properties.

Safety says nothing bad happens; a task left in progress *forever* is a
liveness failure. The model states the fairness it relies on as assumptions,
registered in the invariant registry with kind ``assume``:

- ``daemon-takes-due-actions``: a task whose one way forward is runnable or a
  scheduled convergence action (or a live owner whose process is gone, which
  the re-probe on its deadline finds) does not stay so forever without the
  daemon taking that action (weak fairness: an infinite run on which the action is
  continuously due takes it infinitely often);
- ``live-owner-eventually-ends``: a running attempt whose exact owner is alive
  and has not submitted does not stay so forever (the owner submits, fails or
  dies).

(Both, and the ``eventually`` properties below, are registered by
``wgk.model.invariants`` from the predicates defined here.) The ``eventually``
properties are checked on the explored state graph under
those assumptions (``wgk.conformance.check.liveness``: fair cycles through
strongly connected components):

- ``eventually-settles`` (state): every task eventually reaches Done, an
  external wait or a named hold;
- ``convergence-makes-progress`` (step): no cycle made only of due
  convergence actions (the daemon alone never loops without progress).

Pure: no I/O.
"""
from __future__ import annotations

from typing import Any

from .logic import all_of, any_of, ite, not_, one_of
from .predicates import owner_alive, reserved, running
from .projections import WAYS, WAYS_BY_NAME, _chat_pending, finished, next_edge
from .state import State, TaskState
from .vocab import Exit, Kind as K, OwnerSeen, Phase, Way, EDGES

#: The ways whose action the daemon takes (runnable work, scheduled convergence).
DUE_WAYS = (Way.RUNNABLE, Way.SCHEDULED)
#: The ways that are a legitimate resting place: an external wait or a named hold.
SETTLED_WAYS = (Way.WAIT, Way.HOLD)

#: The ways of a running owner that may be alive (re-probed on its deadline): the live owner,
#: and the one whose completion is receipted and whose handoff is awaited.
OWNER_WAYS = ("live-owner", "await-handoff")

#: The request kinds that take each due way's action (drive-transaction: its next edge).
DUE_KINDS: dict[str, frozenset[K]] = {
    "assign": frozenset({K.ASSIGN}),
    "dispatch": frozenset({K.DISPATCH}),
    "probe-suspect": frozenset({K.PROBE_OWNER}),
    "declare-lost": frozenset({K.DECLARE_LOST}),
    "mark-repair": frozenset({K.MARK_REPAIR}),
    "expire-wait": frozenset({K.EXPIRE_WAIT}),
    "probe-route": frozenset({K.PROBE_ROUTE}),
    "reconcile-chat-request": frozenset({K.RECONCILE_CHAT}),
}


def the_way(s: State, i: int):
    """The one enabled way of task ``i`` (None when finished, or none or several are enabled)."""
    return one_way([w for w in WAYS if w.enabled(s, i) is True])


def one_way(enabled: list):
    """Of the ways enabled (in ``WAYS``' order), the way when exactly one is, else None."""
    return enabled[0] if len(enabled) == 1 else None


def due_kinds(s: State, i: int, way_of=None) -> frozenset[K]:
    """The request kinds that take task ``i``'s due action (empty when nothing is due).
    ``way_of(s, i)`` finds the way, ``the_way`` when not given (another reading of the same
    conditions, e.g. compiled, may be given)."""
    t = s.tasks[i]
    if finished(t) is True:
        return frozenset()
    w = (way_of or the_way)(s, i)
    if w is not None and w.name in OWNER_WAYS and owner_alive(t) is not True:
        return frozenset({K.PROBE_OWNER})    # the re-probe on its deadline finds the death
    if w is None or w.way not in DUE_WAYS:
        return frozenset()
    if w.name == "drive-transaction":
        edge = next_edge(t, bool(s.graph.review_required[i]))
        return frozenset({K(edge)}) if edge else frozenset()
    return DUE_KINDS.get(w.name, frozenset())


def settled(s: State, i: int, t: TaskState, way_of=None) -> bool:
    """Done or abandoned, or the one way forward is an external wait or a named hold
    (``way_of`` as for ``due_kinds``)."""
    if finished(t) is True:
        return True
    w = (way_of or the_way)(s, i)
    return w is not None and w.way in SETTLED_WAYS


def due(s: State, i: int, t: TaskState) -> bool:
    return bool(due_kinds(s, i))


def owner_working(s: State, i: int, t: TaskState) -> Any:
    """The exact owner of a running attempt is alive and has not submitted."""
    return all_of(running(t), not_(reserved(t)), t.exit == Exit.NONE, owner_alive(t))


def convergence_step(s: State, r, d, s2: State) -> bool:
    """The request takes its task's due action (a convergence or dispatch step)."""
    if getattr(r, "kind", None) is None or r.task not in s.graph.index:
        return False
    return r.kind in due_kinds(s, s.graph.index[r.task])


def due_for(s: State, i: int, kind: K) -> Any:
    """``kind`` takes task ``i``'s due action (the symbolic form of ``due_kinds``; with
    exactly one way forward, the way named here is the way)."""
    t = s.tasks[i]
    on = lambda name: all_of(not_(finished(t)), WAYS_BY_NAME[name].enabled(s, i))
    if kind == K.PROBE_OWNER:
        return any_of(on("probe-suspect"),
                      *[all_of(on(w), not_(owner_alive(t))) for w in OWNER_WAYS])
    named = {k: n for n, ks in DUE_KINDS.items() for k in ks if k != K.PROBE_OWNER}
    if kind in named:
        return on(named[kind])
    if kind in EDGES:
        edge = ite(s.graph.review_required[i], next_edge(t, True), next_edge(t, False))
        return all_of(on("drive-transaction"), edge == int(kind))
    return False


#: Ranks above every transaction rank (``1 + GRAPH_SAVED - phase`` at most ``LAST + 1``).
_LAST = int(Phase.GRAPH_SAVED) + 1


def convergence_rank(s: State, i: int, t: TaskState) -> Any:
    """A natural number that every applied due action of task ``i`` strictly decreases:
    0 once finished, held (a wait that ran out too), or worked by a live owner; a transaction
    counts the main-line edges left; an open task ranks above every transaction, a proven-dead owner above an
    open task, a suspect (or a live-owner plan whose process is gone) above that; an open task
    whose route's breaker is open ranks above an open task and below a proven-dead owner, its
    due probe above the wait for it; a running attempt's unreconciled chat creation request adds one."""
    held = any_of(t.exit != Exit.NONE, t.legacy_done, t.abandoned,
                  all_of(t.wait_expired, t.waiting_on == 0))
    gone = any_of(t.owner_seen == OwnerSeen.SUSPECT,
                  all_of(one_of(t.owner_seen, (OwnerSeen.UNVERIFIED, OwnerSeen.LIVE)),
                         not_(owner_alive(t))))
    owner_rank = ite(t.owner_seen == OwnerSeen.DEAD, _LAST + 5, ite(gone, _LAST + 6, 0)) \
        + ite(_chat_pending(t), 1, 0)
    open_rank = ite(all_of(s.graph.requires_assignment[i], not_(t.assigned)), _LAST + 2, _LAST + 1)
    # an open route's breaker: its due probe ranks above the wait for the next one, which ranks
    # above an open task (a succeeded probe closes it; a failed one arms it for a later time),
    # and both below a proven-dead owner (declaring it lost may leave the breaker open)
    open_rank = ite(t.route_unavailable, ite(s.now >= t.probe_at, _LAST + 4, _LAST + 3), open_rank)
    return ite(any_of(finished(t), held), 0,
           ite(all_of(running(t), reserved(t)), 1 + int(Phase.GRAPH_SAVED) - t.phase,
           ite(running(t), owner_rank, open_rank)))
