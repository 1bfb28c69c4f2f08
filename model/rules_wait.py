"""The rules of external waits: a running attempt parks its task on a named external event
(a correlation id, with an optional deadline), and only the matching evidence releases it.

``park`` closes the attempt (its work retained, like any closed attempt) and records what the
task waits for; ``deliver`` with the same correlation id releases the wait (a dispatch then
follows, not counted as a retry), and any other delivery is inert evidence; ``expire-wait``
ends a wait whose deadline has passed, and the task is held for the operator. Each rule is
declared with ``@rule``.
"""
from __future__ import annotations

from .logic import all_of, ite, not_
from .predicates import note_evidence, reserved, running
from .ruleset import CLOSE, guarded, rule
from .state import replace_task as replace
from .updates import close_attempt
from .vocab import AttemptState as AS, Code, DecisionKind as D, Kind as K

WAIT = frozenset({"waiting_on", "wait_deadline", "wait_expired"})


def waiting(t):
    """The task is parked on an external wait."""
    return t.waiting_on != 0


@rule(K.PARK, touches=CLOSE | WAIT, reads={"self"})
def park(s, i, t, r):
    """The attempt's own process parks the task on a named external event (an optional
    deadline); the attempt closes with its work retained."""
    return guarded(
        [
            (running(t), Code.TERMINAL_ALREADY),
            (not_(reserved(t)), Code.TERMINAL_ALREADY),
        ],
        lambda: s.put(i, replace(close_attempt(t, AS.PARKED), waiting_on=r.correlation,
                                 wait_deadline=r.deadline, wait_expired=False)),
    )


@rule(K.DELIVER, touches={"waiting_on", "wait_deadline", "evidence"}, reads={"self"})
def deliver(s, i, t, r):
    """An external event: the one naming what the task waits for releases the wait; any other
    is inert evidence."""
    matches = all_of(waiting(t), r.correlation == t.waiting_on)
    return guarded(
        [],
        lambda: s.put(i, replace(
            t, waiting_on=ite(matches, 0, t.waiting_on),
            wait_deadline=ite(matches, 0, t.wait_deadline),
            evidence=note_evidence(t, "deliver", r.evidence))),
        kind=ite(matches, D.APPLIED, D.EVIDENCE_ONLY),
    )


@rule(K.EXPIRE_WAIT, touches=WAIT, reads={"self", "now"})
def expire_wait(s, i, t, r):
    """The daemon ends a wait whose deadline has passed: the task is held for the operator."""
    return guarded(
        [
            (waiting(t), Code.NOT_WAITING),
            (all_of(t.wait_deadline != 0, s.now >= t.wait_deadline), Code.WAIT_NOT_DUE),
        ],
        lambda: s.put(i, replace(t, waiting_on=0, wait_deadline=0, wait_expired=True)),
    )
