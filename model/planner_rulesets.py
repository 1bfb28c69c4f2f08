"""Named planner rulesets: the corrected planner, and the historical one it replaced.

``corrected`` is the planner of ``projections`` (``plan``): exactly one way
forward per unfinished task. ``historical`` is the peer's old daemon planner
(WG's ``historical`` ruleset, ``formal/fixtures/daemon/v1``), kept as a named
variant so that its recorded violations can be reproduced, never used to decide
anything. It is the corrected way table with the old daemon's conditions put
back, one per incident it is named after:

- ``abandoned_dependency_satisfied_readiness``: a dependency whose last attempt
  ended without success (failed, lost or abandoned) counted as satisfied, so
  the dependent was dispatched instead of waiting for the dependency's success;
- ``control_plane_candidate_replacement``: a candidate held fail-closed for a
  protected control-plane path was driven on toward promotion;
- ``dead_pi_owner_retaining_leases``: an owner proven dead whose continuation
  window had closed was still taken for the live owner (its leases kept);
- ``exited_wrapper_rejected_stale``: an exited wrapper whose same-session
  continuation was proven was rejected as stale (its attempt declared lost)
  instead of being resumed;
- ``park_resume_overlap``: a task parked on an external wait was dispatched
  again before its correlated message arrived;
- ``reopen_before_owner_release``: a reopen's pending intent whose old owner
  was proven exited but not yet released was dispatched at once (a new attempt
  beside the old owner's ownership) instead of releasing that owner first;
- ``target_moved_during_finish``: an effect whose target moved under it was
  driven on (promoted) instead of being replanned as a repair;
- ``obsolete_daemon_chat_creation_lost_response``: a chat creation request
  made under the attempt's opening key whose answer was lost was taken for one
  never made, and made again (the historical table's own way ``request-chat``)
  instead of being reconciled;
- ``surprise_archival_backlog``: a Done task its archive backlog proposed was
  archived on the daemon's own word (the historical table's own way
  ``archive``) instead of waiting for the operator's confirmation of its digest.

``plan_under(ruleset, s, i)`` is ``projections.plan`` under the named ruleset
(its conditions and its ways: ``RULESET_WAYS``).
"""
from __future__ import annotations

from typing import Any, Callable

from .logic import all_of, any_of, not_, one_of
from .predicates import graph_saved, reserved as _reserved, running
from .projections import (
    WAY_CONDITIONS, WAYS, Plan, WayRule, _archive_proposed, _chat_pending, _continuation_planned,
    plan,
)
from .state import State, TaskState
from .vocab import Action, AttemptState, Exit, OwnerSeen, Reason, Way

CORRECTED = "corrected"
HISTORICAL = "historical"

_DEAD, _LIVE, _UNVERIFIED = OwnerSeen.DEAD, OwnerSeen.LIVE, OwnerSeen.UNVERIFIED


def _dep_ended(s: State, d: int) -> Any:
    """The dependency was abandoned, or its last attempt ended without success."""
    t = s.tasks[d]
    return any_of(t.abandoned,
                  one_of(t.attempt_state, (AttemptState.FAILED, AttemptState.LOST, AttemptState.ABANDONED)))


def _deps_settled(s: State, i: int) -> Any:
    """Every dependency is Done, or (the old daemon's mistake) its last attempt ended."""
    return all_of(*[any_of(graph_saved(s.tasks[d]), _dep_ended(s, d)) for d in s.graph.deps[i]])


def _protected_hold(t: TaskState) -> Any:
    return all_of(t.exit == Exit.NEEDS_REPAIR, t.reason == Reason.PROTECTED_PATH)


def _historical_conditions() -> dict[str, Callable]:
    c = dict(WAY_CONDITIONS)
    held = lambda t: any_of(t.exit != Exit.NONE, t.legacy_done)
    old_held = lambda t: all_of(held(t), not_(_protected_hold(t)))
    dead = lambda t: t.owner_seen == _DEAD
    unreserved = lambda s, i, t: all_of(running(t), not_(_reserved(t)), not_(held(t)))
    # a reopen's intent over an owner proven exited: a new attempt before the release
    spawn_early = lambda s, i, t: all_of(unreserved(s, i, t), dead(t), t.reopening)
    # readiness: an ended dependency is as good as a Done one; a parked task is dispatched
    c["dispatch"] = lambda s, i, t: any_of(all_of(
        not_(running(t)), not_(held(t)), not_(t.reopening), _deps_settled(s, i),
        any_of(not_(s.graph.requires_assignment[i]), t.assigned),
        not_(WAY_CONDITIONS["repair-required"](s, i, t)), not_(WAY_CONDITIONS["retry-budget-spent"](s, i, t)),
        not_(t.wait_expired), not_(t.route_unavailable)),
        spawn_early(s, i, t))
    c["await-dependencies"] = lambda s, i, t: all_of(
        WAY_CONDITIONS["await-dependencies"](s, i, t), not_(_deps_settled(s, i)))
    c["dependency-abandoned"] = lambda s, i, t: all_of(
        WAY_CONDITIONS["dependency-abandoned"](s, i, t), not_(_deps_settled(s, i)))
    c["await-external"] = lambda s, i, t: False
    # a protected-path hold is not a hold: the transaction is driven on
    c["hold"] = lambda s, i, t: old_held(t)
    c["drive-transaction"] = lambda s, i, t: all_of(
        running(t), _reserved(t), not_(old_held(t)), not_(WAY_CONDITIONS["await-review"](s, i, t)),
        not_(WAY_CONDITIONS["dependency-reopened"](s, i, t)))
    c["mark-repair"] = lambda s, i, t: False
    # a dead owner: kept as the live owner once its window closed, rejected while it was open
    c["live-owner"] = lambda s, i, t: all_of(
        unreserved(s, i, t), any_of(all_of(one_of(t.owner_seen, (_UNVERIFIED, _LIVE)),
                                           not_(_chat_pending(t))),
                                    all_of(dead(t), not_(_continuation_planned(s, t)),
                                           not_(t.reopening))))
    # an unreconciled chat creation request: taken for one never made, made again
    c["reconcile-chat-request"] = lambda s, i, t: False
    c["request-chat"] = lambda s, i, t: all_of(
        unreserved(s, i, t), one_of(t.owner_seen, (_UNVERIFIED, _LIVE)), _chat_pending(t))
    # the archive backlog: archived on the daemon's own word
    c["await-archive-confirmation"] = lambda s, i, t: False
    c["archive"] = lambda s, i, t: _archive_proposed(t)
    c["declare-lost"] = lambda s, i, t: all_of(unreserved(s, i, t), dead(t), _continuation_planned(s, t),
                                               not_(t.reopening))
    c["resume-continuation"] = lambda s, i, t: False
    # a receipted completion is one more live owner to the old daemon (the historical
    # live-owner above does not read the receipt)
    c["await-handoff"] = lambda s, i, t: False
    return c


HISTORICAL_CONDITIONS = _historical_conditions()
RULESETS: dict[str, dict[str, Callable]] = {CORRECTED: WAY_CONDITIONS, HISTORICAL: HISTORICAL_CONDITIONS}
#: The historical daemon's own ways: a chat creation request made again under the same key,
#: and an archive of a proposed Done task on the daemon's own word.
HISTORICAL_WAYS = WAYS + (WayRule("request-chat", Way.RUNNABLE, Action.REQUEST_CHAT,
                                  "an unanswered chat creation request is made again"),
                          WayRule("archive", Way.SCHEDULED, Action.ARCHIVE,
                                  "the archive backlog is archived on the daemon's own word"))
RULESET_WAYS: dict[str, tuple[WayRule, ...]] = {CORRECTED: WAYS, HISTORICAL: HISTORICAL_WAYS}


def plan_under(ruleset: str, s: State, i: int) -> Plan | None:
    """The plan of task ``i`` under the named ruleset (``corrected`` is ``projections.plan``)."""
    if ruleset not in RULESETS:
        raise KeyError(f"unknown planner ruleset {ruleset!r} (known: {', '.join(RULESETS)})")
    return plan(s, i, RULESETS[ruleset], RULESET_WAYS[ruleset])
