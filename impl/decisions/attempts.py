"""Attempts: the writes that open, continue and close a task's attempt, written from the contract.

An attempt is a row of its own (its state, worktree, origin, token) with an owner row (pid,
birth, session, epochs, what is known of it) and the leases. ``dispatch`` and ``retry``
open one (``decision.open_attempt``), ``resume`` gives the same attempt a new owner,
``fail`` and ``declare-lost`` close it (``decision.close_attempt``: its work retained),
``assign`` records the receipt that admits the task and ``log`` appends the owner's line.
Each kind is a ``Rule``: the conditions of its write, in the order docs/vocabulary.md
("Conditions, kind by kind") lists them with the code each refuses with, then the write.
"""
from __future__ import annotations

from .decision import (
    Condition as C, Ctx, Effect, Outcome, Rule, close_attempt, evidence_fact, open_attempt,
    retain_work, succeeded,
)
from ..storage.records import evolve as replace
from ..contract.vocabulary import APPLIED, EVIDENCE_ONLY


# --- the conditions, by the contract's phrases ---------------------------------------------


def not_abandoned(ctx: Ctx) -> bool:
    return not ctx.record.abandoned


def not_succeeded(ctx: Ctx) -> bool:
    # guards: terminal-never-resurrects
    return ctx.record.attempt_state != "succeeded"


def not_held_for_the_operator(ctx: Ctx) -> bool:
    # (a reset's pending intent holds admission too: no attempt before the new generation)
    # guards: legacy-never-satisfies, no-generation-before-owner-exit
    return (ctx.record.exit not in ("needs-reconciliation", "upgrade-blocked")
            and not ctx.record.reopening)


def assigned_where_required(ctx: Ctx) -> bool:
    return ctx.record.assigned or not ctx.policy.requires_assignment


def dependencies_done(ctx: Ctx) -> bool:
    # guards: dependency-needs-done, attempt-opens-on-done-dependencies
    return ctx.deps_done()


def not_waiting(ctx: Ctx) -> bool:
    # guards: no-attempt-while-waiting
    return ctx.record.waiting_on is None


def not_paused(ctx: Ctx) -> bool:
    # guards: no-attempt-opens-paused-or-early
    return not ctx.record.paused


def due(ctx: Ctx) -> bool:
    # guards: no-attempt-opens-paused-or-early
    return ctx.observe.now() >= ctx.record.not_before


def route_available(ctx: Ctx) -> bool:
    # guards: no-attempt-opens-on-unavailable-route
    return not ctx.record.route_unavailable


def the_expected_attempt(ctx: Ctx) -> bool:
    return ctx.request.expected_attempt == ctx.record.attempt


def no_attempt_running(ctx: Ctx) -> bool:
    # guards: single-live-owner
    return not ctx.record.running


def no_wait_ran_out(ctx: Ctx) -> bool:
    return not ctx.record.wait_expired


def _after_failure(ctx: Ctx) -> bool:
    """The generation's previous attempt ended failed or lost, so this dispatch counts
    against the retry budget. A new generation has no attempt yet; the one its reset closed is not counted."""
    # guards: retries-per-generation
    return ctx.record.attempt != 0 and ctx.record.attempt_state in ("failed", "lost")


def no_semantic_failure(ctx: Ctx) -> bool:
    """A dispatch after a semantic failure is not retried automatically: a repair first."""
    # guards: semantic-failure-never-auto-retried
    return not _after_failure(ctx) or ctx.record.failure != "semantic"


def within_the_retry_budget(ctx: Ctx) -> bool:
    # guards: retries-within-budget
    return not _after_failure(ctx) or ctx.record.retries < ctx.policy.retry_budget


def _retained_after_closing(ctx: Ctx) -> str | None:
    """The retained work the task would import: a running attempt's is what closing it keeps."""
    t = ctx.record
    return retain_work(ctx, t, [])[0] if t.running else t.retained


def work_retained(ctx: Ctx) -> bool:
    return not ctx.request.imports or _retained_after_closing(ctx) is not None


def imports_the_retained_work(ctx: Ctx) -> bool:
    return not ctx.request.imports or _retained_after_closing(ctx) == ctx.request.imports


def the_attempt_is_stuck(ctx: Ctx) -> bool:
    """No attempt runs, its exact owner is proven dead before any terminal intent, or its
    transaction needs a repair or was aborted."""
    t = ctx.record
    # guards: single-live-owner
    return (not t.running or (t.owner_seen == "dead" and not t.reserved)
            or t.exit in ("needs-repair", "aborted-preserved"))


def attempt_running(ctx: Ctx) -> bool:
    # guards: first-terminal-wins, terminal-never-resurrects
    return ctx.record.running


def owner_proven_dead(ctx: Ctx) -> bool:
    # guards: single-live-owner, retry-is-not-continuation-without-proof
    return ctx.record.owner_seen == "dead"


def no_terminal_intent(ctx: Ctx) -> bool:
    # guards: first-terminal-wins
    return not ctx.record.reserved


def same_session_leases_and_worktree(ctx: Ctx) -> bool:
    t = ctx.record
    # guards: retry-is-not-continuation-without-proof
    return (ctx.request.owner.session == t.session and t.session_lease and t.worktree_lease
            and ctx.observe.worktree(t).present)


def higher_epochs(ctx: Ctx) -> bool:
    o, t = ctx.request.owner, ctx.record
    return o.wrapper_epoch > t.wrapper_epoch and o.child_epoch > t.child_epoch


# --- the writes -----------------------------------------------------------------------------


def _assigned(ctx: Ctx) -> Outcome:
    t = ctx.record
    return succeeded(ctx, replace(t, assigned=True), kind=EVIDENCE_ONLY if t.assigned else APPLIED)


def _dispatched(ctx: Ctx) -> Outcome:
    """A new attempt; after a failed or lost one it is an automatic retry, counted."""
    t, effects = ctx.record, []
    retries = t.retries + 1 if _after_failure(ctx) else t.retries
    return succeeded(ctx, replace(open_attempt(ctx, t, effects), retries=retries), effects=effects)


def _retried(ctx: Ctx) -> Outcome:
    """The operator's retry closes the stuck attempt (its work retained) and opens the next:
    the retry counter goes back to zero and an expired wait no longer holds the task."""
    t, effects = ctx.record, []
    closed = close_attempt(ctx, t, "abandoned", effects) if t.running else t
    facts = [("attempt-closed", {"fence": t.fence, "state": "abandoned"})] if t.running else []
    return succeeded(ctx, replace(open_attempt(ctx, closed, effects), retries=0,
                                  wait_expired=False), effects=effects, facts=facts)


def _resumed(ctx: Ctx) -> Outcome:
    """The same attempt continues under its new owner, with the token minted for it."""
    t, o = ctx.record, ctx.request.owner
    new = replace(t, owner_pid=o.pid, owner_birth=o.birth, wrapper_epoch=o.wrapper_epoch,
                  child_epoch=o.child_epoch, owner_seen="unverified", deadline=0,
                  token_hash=ctx.request.mint)
    return succeeded(ctx, new, effects=[Effect("adopt", (o.pid, o.birth))])


def _logged(ctx: Ctx) -> Outcome:
    return succeeded(ctx, ctx.record, facts=[("log", {})])


def _failed(ctx: Ctx) -> Outcome:
    """The first terminal report closes the attempt as failed; a later one is evidence."""
    t, effects = ctx.record, []
    # guards: first-terminal-wins
    first = t.running and not t.reserved
    new = replace(close_attempt(ctx, t, "failed", effects), failure=ctx.request.failure) \
        if first else t
    return succeeded(ctx, new, kind=APPLIED if first else EVIDENCE_ONLY, effects=effects,
                     facts=[evidence_fact("fail", ctx.request.evidence)])


def _lost(ctx: Ctx) -> Outcome:
    effects: list[Effect] = []
    return succeeded(ctx, close_attempt(ctx, ctx.record, "lost", effects), effects=effects)


# --- the kinds ------------------------------------------------------------------------------

#: The admission of a new attempt, in order (``dispatch`` and ``retry``).
ADMISSION = (
    C(not_abandoned, "held"), C(not_succeeded, "terminal-already"),
    C(not_held_for_the_operator, "held"), C(assigned_where_required, "assignment-required"),
    C(dependencies_done, "dependency-not-done"), C(not_waiting, "waiting"),
    C(not_paused, "paused"), C(due, "not-due"), C(route_available, "route-unavailable"),
    C(the_expected_attempt, "cas-moved"),
)
IMPORTS = (C(work_retained, "nothing-retained"), C(imports_the_retained_work, "candidate-mismatch"))

RULES: dict[str, Rule] = {
    "assign": Rule((), _assigned),
    "dispatch": Rule(ADMISSION + (
        C(no_attempt_running, "attempt-live"), C(no_wait_ran_out, "held"),
        C(no_semantic_failure, "repair-required"),
        C(within_the_retry_budget, "retry-budget-spent"),
    ) + IMPORTS, _dispatched),
    "retry": Rule(ADMISSION + (C(the_attempt_is_stuck, "attempt-live"),) + IMPORTS, _retried),
    "resume": Rule((
        C(attempt_running, "terminal-already"), C(owner_proven_dead, "owner-not-proven-dead"),
        C(no_terminal_intent, "terminal-already"),
        C(same_session_leases_and_worktree, "continuation-unproven"),
        C(higher_epochs, "continuation-unproven"),
    ), _resumed),
    "log": Rule((C(attempt_running, "terminal-already"),), _logged),
    "fail": Rule((), _failed),
    "declare-lost": Rule((
        C(attempt_running, "terminal-already"), C(owner_proven_dead, "owner-not-proven-dead"),
        C(no_terminal_intent, "terminal-already"),
    ), _lost),
}
