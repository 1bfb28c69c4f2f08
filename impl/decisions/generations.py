"""Generations: the writes that open a task's next generation, written from the contract.

A generation row holds what a task's attempts since its last reset or reopen share: its
attempts, its retry budget, its transaction and receipts, its wait. ``reset`` opens the
next one on a task that is not Done (a stuck or superseded attempt closed, its work
retained), ``reopen`` on a Done one (its result kept as retained work;
docs/vocabulary.md, "Reopening a Done task"). Each is a ``Rule``: the conditions of its
write in the contract's order ("Conditions, kind by kind"), then the write.
"""
from __future__ import annotations

from .decision import (
    Condition as C, Ctx, Effect, Outcome, Rule, close_attempt, retain_work, succeeded,
)
from ..storage.records import NO_RECEIPTS, evolve as replace


# --- the conditions, by the contract's phrases ---------------------------------------------


def the_expected_generation(ctx: Ctx) -> bool:
    return ctx.request.expected_generation == ctx.record.generation


def not_abandoned(ctx: Ctx) -> bool:
    return not ctx.record.abandoned


def no_completion_won(ctx: Ctx) -> bool:
    """Not Done, no effect made, and no completion holding the terminal reservation that
    can still win (one whose dependency was reopened under it cannot: the reset fences it)."""
    t = ctx.record
    completing = (t.running and t.reserved and t.exit == "none" and ctx.deps_done()
                  and not ctx.deps_reopened())
    # guards: terminal-never-resurrects, promotion-at-most-once
    return not (t.attempt_state == "succeeded" or completing or ctx.observe.effect_happened(t))


def no_legacy_claim_held(ctx: Ctx) -> bool:
    return ctx.record.exit != "needs-reconciliation"


def owner_may_live(t) -> bool:
    """Its owner could still be alive: the attempt is running and no probe has seen that pid die."""
    return t.running and t.owner_seen != "dead"


def no_intent_over_an_unproven_owner(ctx: Ctx) -> bool:
    """A reset's intent is pending: the generation opens only once the owner is proven exited."""
    # guards: no-generation-before-owner-exit
    return not (ctx.record.reopening and owner_may_live(ctx.record))


def done(ctx: Ctx) -> bool:
    return ctx.record.graph_saved


def not_archived(ctx: Ctx) -> bool:
    t = ctx.record
    return t.candidate is None or not ctx.seen("archive", t.candidate)


def no_dependent_committed(ctx: Ctx) -> bool:
    """No dependent's effect is prepared, committed or Done: else it came first."""
    # guards: reopen-fences-dependents
    return not ctx.dependents_committed()


# --- the writes -----------------------------------------------------------------------------

#: What a new generation starts from: no attempt, an empty transaction, its own retry budget.
FRESH = {"attempt": 0, "phase": "absent", "exit": "none", "reason": "none", "revision": 0,
         "candidate": None, "base": None, "version": 0, "disposition": "none",
         "receipts": NO_RECEIPTS, "effect_done": False, "retries": 0, "failure": "none"}


def _opened(ctx: Ctx, new, effects: list[Effect], cause: str) -> Outcome:
    return succeeded(ctx, new, effects=effects,
                     facts=[("generation-opened", {"generation": new.generation, "cause": cause})])


def _intent(ctx: Ctx) -> Outcome:
    """WG's first step under an owner that may be alive: the intent is durable and the old
    attempt's K fenced (its lease epoch moves); its owner, leases and work stay."""
    t = ctx.record
    return succeeded(ctx, replace(t, reopening=True, lease_epoch=t.lease_epoch + 1))


def _reset(ctx: Ctx) -> Outcome:
    """Reset, in WG's reopen order. While the owner could be alive, record the intent and no
    more (``_intent``). Otherwise supersede the attempt if there is one, release what it
    owned, keep its work, drop any wait, settle the intent and open one generation."""
    # guards: no-generation-before-owner-exit
    if owner_may_live(ctx.record):
        return _intent(ctx)
    t, effects = ctx.record, []
    retained, retained_base = retain_work(ctx, t, effects)
    closed = close_attempt(ctx, t, "superseded", []) if t.running else t
    new = replace(closed, generation=t.generation + 1, **FRESH, retained=retained,
                  retained_base=retained_base, waiting_on=None, wait_deadline=0,
                  wait_expired=False, reopening=False)
    return _opened(ctx, new, effects, "reset")


def _reopened(ctx: Ctx) -> Outcome:
    """The next generation of a Done task: a new fence, its result retained."""
    t, effects = ctx.record, []
    retained, retained_base = retain_work(ctx, t, effects)
    new = replace(t, generation=t.generation + 1, fence=t.fence + 1, attempt_state="none",
                  **FRESH, reconstructed=False, imported=None, retained=retained,
                  retained_base=retained_base, reopening=False)
    return _opened(ctx, new, effects, "reopen")


RULES: dict[str, Rule] = {
    "reset": Rule((
        C(the_expected_generation, "cas-moved"), C(not_abandoned, "held"),
        C(no_completion_won, "terminal-already"), C(no_legacy_claim_held, "held"),
        C(no_intent_over_an_unproven_owner, "owner-not-proven-dead"),
    ), _reset),
    "reopen": Rule((
        C(the_expected_generation, "cas-moved"), C(done, "illegal-phase-edge"),
        C(not_archived, "held"), C(no_dependent_committed, "terminal-already"),
    ), _reopened),
}
