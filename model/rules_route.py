"""The rules of a provider route's breaker: a provider failure on the route a task's attempts
run on opens its breaker (the route is unavailable until a probe at a given time), no attempt
opens on the task while it is open, and the daemon's health probe, once due, closes it
(acknowledged succeeded) or arms it again (failed, with the next probe time).

The route (an interned provider/model/endpoint-digest name) and its breaker are facts of the
task whose attempts run on it, as the review valve's are facts of its source task: every rule
reads the task it decides and nothing else. ``opens`` is the update ``provider-failure`` adds
(``rules_evidence``); ``probe-route`` is declared here with ``@rule``.
"""
from __future__ import annotations

from typing import Any

from .logic import all_of, ite, not_
from .ruleset import guarded, rule
from .state import TaskState, replace_task as replace
from .vocab import Code, Kind as K

#: The task's route and its breaker.
ROUTE = frozenset({"route", "route_unavailable", "probe_at"})


def opens(t: TaskState, when: Any, r) -> TaskState:
    """``t`` with the breaker of the request's route open, its first probe due at the request's
    deadline (0: at once), when ``when`` holds; ``t`` unchanged otherwise."""
    return replace(t, route=ite(when, r.route, t.route),
                   route_unavailable=ite(when, True, t.route_unavailable),
                   probe_at=ite(when, r.deadline, t.probe_at))


def probe_due(s, t: TaskState) -> Any:
    """The task's route's breaker is open and its next probe time has come."""
    return all_of(t.route_unavailable, s.now >= t.probe_at)


@rule(K.PROBE_ROUTE, touches={"route_unavailable", "probe_at"}, reads={"self", "now"})
def probe_route(s, i, t, r):
    """The daemon's health probe of the task's open route, once due, acknowledged: succeeded,
    the breaker closes; failed, it stays open with its next probe at the request's deadline
    (at the earliest the next tick: a failed probe never leaves the next one due at once)."""
    ok = r.succeeded != 0
    later = ite(r.deadline > s.now, r.deadline, s.now + 1)
    return guarded(
        [(t.route_unavailable, Code.ROUTE_AVAILABLE), (s.now >= t.probe_at, Code.PROBE_NOT_DUE)],
        lambda: s.put(i, replace(t, route_unavailable=not_(ok), probe_at=ite(ok, 0, later))),
    )
