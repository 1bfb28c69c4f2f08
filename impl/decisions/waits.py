"""External waits: the writes that park a task on a named event and end the wait.

A running attempt's own process parks its task on a named event (``park``: the attempt
closes as ``parked``, its work retained, and the task records what it waits for and until
when). Only a delivery naming that event releases the wait (``deliver``); any other
delivery is recorded as evidence and changes nothing. Once the wait's deadline has passed,
the daemon ends it (``expire-wait``) and the task is held until an operator retries or
resets it (docs/vocabulary.md, "External waits"). Each kind is a ``Rule``: the conditions of
its write in the contract's order ("Conditions, kind by kind"), then the write.
"""
from __future__ import annotations

from .attempts import attempt_running, no_terminal_intent
from .decision import (
    Condition as C, Ctx, Outcome, Rule, close_attempt, evidence_fact, succeeded,
)
from ..storage.records import evolve as replace
from ..contract.vocabulary import APPLIED, EVIDENCE_ONLY


def waiting(ctx: Ctx) -> bool:
    return ctx.record.waiting_on is not None


def the_wait_is_due(ctx: Ctx) -> bool:
    t = ctx.record
    # guards: wait-left-only-by-its-evidence
    return bool(t.wait_deadline) and ctx.observe.now() >= t.wait_deadline


def _parked(ctx: Ctx) -> Outcome:
    t, r, effects = ctx.record, ctx.request, []
    new = replace(close_attempt(ctx, t, "parked", effects), waiting_on=r.correlation,
                  wait_deadline=r.deadline, wait_expired=False)
    return succeeded(ctx, new, effects=effects)


def _delivered(ctx: Ctx) -> Outcome:
    """A delivery whose correlation matches ``waiting_on`` ends the wait; others are kept as evidence."""
    t, r = ctx.record, ctx.request
    fact = [evidence_fact("deliver", r.evidence)]
    # guards: wait-left-only-by-its-evidence
    if t.waiting_on is None or r.correlation != t.waiting_on:
        return succeeded(ctx, t, kind=EVIDENCE_ONLY, facts=fact)
    return succeeded(ctx, replace(t, waiting_on=None, wait_deadline=0), kind=APPLIED, facts=fact)


def _expired(ctx: Ctx) -> Outcome:
    return succeeded(ctx, replace(ctx.record, waiting_on=None, wait_deadline=0, wait_expired=True))


RULES: dict[str, Rule] = {
    "park": Rule((C(attempt_running, "terminal-already"), C(no_terminal_intent, "terminal-already")),
                 _parked),
    "deliver": Rule((), _delivered),
    "expire-wait": Rule((C(waiting, "not-waiting"), C(the_wait_is_due, "wait-not-due")), _expired),
}
