"""The operator's and the migration's rules: reset, abandon, reconcile, reconstruct, legacy Done."""
from __future__ import annotations

from .decision import (
    Ctx, Effect, Outcome, close_attempt, evidence_fact, leave_main_line, reject, retain_work,
    succeeded,
)
from .records import Binding, NO_RECEIPTS, evolve as replace
from .vocabulary import EFFECT_PHASES, EVIDENCE_ONLY, PRE_EFFECT_PHASES


# --- operator and migration ---------------------------------------------------------------


def reset(ctx: Ctx) -> Outcome:
    t = ctx.record
    # a completion whose dependency was reopened under it can no longer win: the reset fences it
    in_flight = t.running and t.reserved and t.exit == "none" and ctx.deps_done() \
        and not ctx.deps_reopened()
    if ctx.request.expected_generation != t.generation:
        return reject(ctx, "cas-moved")
    if t.abandoned:
        return reject(ctx, "held")
    # guards: terminal-never-resurrects, promotion-at-most-once
    if t.attempt_state == "succeeded" or in_flight or ctx.observe.effect_happened(t):
        return reject(ctx, "terminal-already")
    if t.exit == "needs-reconciliation":
        return reject(ctx, "held")
    effects: list[Effect] = []
    retained, retained_base = retain_work(ctx, t, effects)
    closed = close_attempt(ctx, t, "superseded", []) if t.running else t
    generation = t.generation + 1
    new = replace(
        closed, generation=generation, attempt=0, phase="absent", exit="none", reason="none",
        revision=0, candidate=None, base=None, version=0, disposition="none",
        receipts=NO_RECEIPTS, effect_done=False, retained=retained, retained_base=retained_base,
        retries=0, failure="none",                 # a new generation: its own retry budget
        waiting_on=None, wait_deadline=0, wait_expired=False,   # and no wait of the old one
    )
    return succeeded(ctx, new, effects=effects, facts=[("generation-opened", {"generation": generation, "cause": "reset"})])


def abandon(ctx: Ctx) -> Outcome:
    t = ctx.record
    effect_started = t.phase in EFFECT_PHASES and t.exit == "none"
    if t.abandoned or t.attempt_state == "succeeded" or effect_started:
        return reject(ctx, "terminal-already")
    effects: list[Effect] = []
    closed = close_attempt(ctx, t, "abandoned", effects) if t.running else t
    in_tx = t.phase in PRE_EFFECT_PHASES and t.exit == "none"
    new = replace(closed, abandoned=True)
    if in_tx:
        new = replace(new, exit="aborted-preserved", reason="operator-abort",
                      revision=t.revision + 1)
    return succeeded(ctx, new, effects=effects)


def reconcile(ctx: Ctx) -> Outcome:
    t = ctx.record
    if t.exit not in ("needs-reconciliation", "upgrade-blocked"):
        return reject(ctx, "illegal-phase-edge")
    legacy = t.exit == "needs-reconciliation"
    new = replace(t, exit="none", reason="none", revision=t.revision + 1,
                  phase="absent" if legacy else t.phase,
                  legacy_done=False if legacy else t.legacy_done)
    return succeeded(ctx, new)


def reconstruct(ctx: Ctx) -> Outcome:
    t, r = ctx.record, ctx.request
    if not (t.exit == "needs-reconciliation" and t.legacy_done):
        return reject(ctx, "illegal-phase-edge")
    if t.abandoned:
        return reject(ctx, "held")
    if t.running:
        return reject(ctx, "attempt-live")
    # guards: dependency-needs-done
    if not ctx.deps_done():
        return reject(ctx, "dependency-not-done")
    if ctx.observe.target() != r.candidate:
        return reject(ctx, "evidence-missing")
    fence = t.fence + 1
    b = Binding(fence, r.candidate, r.base)
    new = replace(
        t, fence=fence, attempt=t.attempt + 1, lease_epoch=t.lease_epoch + 1,
        attempt_state="succeeded", phase="graph-saved", exit="none", reason="none",
        revision=t.revision + 1, candidate=r.candidate, base=r.base,
        receipts=tuple(b for _ in NO_RECEIPTS), reconstructed=True, effect_done=True,
        legacy_done=False, imported=None,
        worktree_lease=False, session_lease=False, finish_lease=False,
    )
    return succeeded(ctx, new)


def legacy_done(ctx: Ctx) -> Outcome:
    """A legacy Done without evidence is held for reconciliation; on a task with anything
    in flight (or Done, or abandoned) the claim is kept as evidence only."""
    t = ctx.record
    inert = t.graph_saved or t.abandoned or t.reserved or t.exit != "none"
    facts = [evidence_fact("legacy-done", ctx.request.evidence)]
    # guards: terminal-never-resurrects
    if inert:
        return succeeded(ctx, t, kind=EVIDENCE_ONLY, facts=facts)
    new = leave_main_line(t, "needs-reconciliation", "legacy-unproven", legacy_done=True)
    return succeeded(ctx, new, facts=facts)
