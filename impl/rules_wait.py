"""The rules of external waits (docs/vocabulary.md, "External waits").

A running attempt's own process parks its task on a named event (``park``: the attempt
closes as ``parked``, its work retained, and the task records what it waits for and until
when). Only a delivery naming that event releases the wait (``deliver``); any other delivery
is recorded as evidence and changes nothing. Once the wait's deadline has passed, the daemon
ends it (``expire-wait``) and the task is held until an operator retries or resets it.
"""
from __future__ import annotations

from .decision import Ctx, Effect, Outcome, close_attempt, evidence_fact, reject, succeeded
from .records import evolve as replace
from .vocabulary import APPLIED, EVIDENCE_ONLY


def park(ctx: Ctx) -> Outcome:
    t, r = ctx.record, ctx.request
    # guards: first-terminal-wins
    if not t.running or t.reserved:
        return reject(ctx, "terminal-already")
    effects: list[Effect] = []
    new = replace(close_attempt(ctx, t, "parked", effects), waiting_on=r.correlation,
                  wait_deadline=r.deadline, wait_expired=False)
    return succeeded(ctx, new, effects=effects)


def deliver(ctx: Ctx) -> Outcome:
    t, r = ctx.record, ctx.request
    fact = [evidence_fact("deliver", r.evidence)]
    # guards: wait-left-only-by-its-evidence
    if t.waiting_on is None or r.correlation != t.waiting_on:
        return succeeded(ctx, t, kind=EVIDENCE_ONLY, facts=fact)
    return succeeded(ctx, replace(t, waiting_on=None, wait_deadline=0), kind=APPLIED, facts=fact)


def expire_wait(ctx: Ctx) -> Outcome:
    t = ctx.record
    if t.waiting_on is None:
        return reject(ctx, "not-waiting")
    # guards: wait-left-only-by-its-evidence
    if not t.wait_deadline or ctx.observe.now() < t.wait_deadline:
        return reject(ctx, "wait-not-due")
    return succeeded(ctx, replace(t, waiting_on=None, wait_deadline=0, wait_expired=True))
