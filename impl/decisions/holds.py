"""Holds: the operator's and the migration's writes that hold a task or lift a hold.

``abandon`` gives a task up before any effect (its retained work preserved);
``legacy-done`` records a legacy claim of Done, which holds the task for reconciliation
(never blessed); ``reconcile`` lifts a hold (the legacy claim reopened, or an upgrade block);
``reconstruct`` proves a legacy claim by the target holding its exact candidate and rebuilds
the receipts. Each is a ``Rule``: the conditions of its write in the contract's order
(docs/vocabulary.md, "Conditions, kind by kind"), then the write.
"""
from __future__ import annotations

from .attempts import dependencies_done, no_attempt_running, not_abandoned, not_succeeded
from .decision import (
    Condition as C, Ctx, Outcome, Rule, close_attempt, evidence_fact, leave_main_line, succeeded,
)
from ..storage.records import Binding, NO_RECEIPTS, evolve as replace
from ..contract.vocabulary import EFFECT_PHASES, EVIDENCE_ONLY, PRE_EFFECT_PHASES


# --- the conditions, by the contract's phrases ---------------------------------------------


def no_effect_started(ctx: Ctx) -> bool:
    t = ctx.record
    return not (t.phase in EFFECT_PHASES and t.exit == "none")


def held_for_the_operator(ctx: Ctx) -> bool:
    return ctx.record.exit in ("needs-reconciliation", "upgrade-blocked")


def a_legacy_claim_held(ctx: Ctx) -> bool:
    t = ctx.record
    return t.exit == "needs-reconciliation" and t.legacy_done


def the_target_holds_the_candidate(ctx: Ctx) -> bool:
    return ctx.observe.target() == ctx.request.candidate


# --- the writes -----------------------------------------------------------------------------


def _abandoned(ctx: Ctx) -> Outcome:
    """The attempt (if any) closed, its work retained; a transaction before its effect is
    aborted with its work preserved."""
    t, effects = ctx.record, []
    closed = close_attempt(ctx, t, "abandoned", effects) if t.running else t
    new = replace(closed, abandoned=True)
    if t.phase in PRE_EFFECT_PHASES and t.exit == "none":
        new = replace(new, exit="aborted-preserved", reason="operator-abort",
                      revision=t.revision + 1)
    return succeeded(ctx, new, effects=effects)


def _reconciled(ctx: Ctx) -> Outcome:
    """A legacy claim is reopened (back to absent); an upgrade block is lifted in place."""
    t = ctx.record
    legacy = t.exit == "needs-reconciliation"
    new = replace(t, exit="none", reason="none", revision=t.revision + 1,
                  phase="absent" if legacy else t.phase,
                  legacy_done=False if legacy else t.legacy_done)
    return succeeded(ctx, new)


def _reconstructed(ctx: Ctx) -> Outcome:
    """A proven legacy Done: a new fence whose every receipt names the candidate and base."""
    t, r = ctx.record, ctx.request
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


def _legacy_claim(ctx: Ctx) -> Outcome:
    """A legacy Done without evidence holds the task for reconciliation; on a task with
    anything in flight (or Done, or abandoned) the claim is kept as evidence only."""
    t = ctx.record
    facts = [evidence_fact("legacy-done", ctx.request.evidence)]
    # guards: terminal-never-resurrects
    if t.graph_saved or t.abandoned or t.reserved or t.exit != "none":
        return succeeded(ctx, t, kind=EVIDENCE_ONLY, facts=facts)
    new = leave_main_line(t, "needs-reconciliation", "legacy-unproven", legacy_done=True)
    return succeeded(ctx, new, facts=facts)


RULES: dict[str, Rule] = {
    "abandon": Rule((
        C(not_abandoned, "terminal-already"), C(not_succeeded, "terminal-already"),
        C(no_effect_started, "terminal-already"),
    ), _abandoned),
    "reconcile": Rule((C(held_for_the_operator, "illegal-phase-edge"),), _reconciled),
    "reconstruct": Rule((
        C(a_legacy_claim_held, "illegal-phase-edge"), C(not_abandoned, "held"),
        C(no_attempt_running, "attempt-live"), C(dependencies_done, "dependency-not-done"),
        C(the_target_holds_the_candidate, "evidence-missing"),
    ), _reconstructed),
    "legacy-done": Rule((), _legacy_claim),
}
