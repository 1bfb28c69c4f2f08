"""The decision for one request: the checks every request passes, then its kind's rule.

Each kind's rule is written from the contract (docs/vocabulary.md, "Conditions, kind by
kind" and "The transaction's steps") in the shape of what it writes: the conditions of its
write, in the contract's order, each with the code that refuses it, then the write. The
rules live by what they write: ``attempts`` (the attempt and its owner: assign, dispatch,
retry, resume, log, fail, declare-lost), ``evidence`` (the evidence rows of a report and
what they know of the owner), ``transaction`` (the SaveTransaction as one table of steps),
``holds`` (abandon, legacy-done, reconcile, reconstruct), ``archive``, ``waits`` and
``generations`` (reset, reopen), ``pauses`` (pause, unpause), ``review`` (the review valve),
``receipt`` (a completion receipted before its transaction), ``routes`` (a provider route's breaker and its probe), ``chat`` (the attempt's chat: its one creation request, its reconciliation). This module holds the table ``RULES`` and the entry point.
Every write a rule's outcome makes is conditional on the record it was decided on
(``tables.STAMP``).

``decide(ctx)`` answers a request with a fresh key (the store looks up the journal
first). The order of checks is the contract's: authority, the task exists, the
capability tuple K, the transaction CAS and edge, then the rule's own conditions in order.
The first that does not hold names the rejection; a rejected request changes nothing.

A rule's write returns an ``Outcome``: the decision, the task's new record, the facts to
record beside it (evidence, logs, effect intents, worktrees) and the external ``effects``
to perform before the transaction commits. Rules read the environment only through
``Observe`` (worktree bytes, the target ref, the process table, whether an effect already
happened) and never perform an effect themselves.
"""
from __future__ import annotations

import hmac

# the vocabulary a rule is written in, re-exported for whoever writes or replaces a rule
from .decision import (  # noqa: F401
    Condition, Ctx, Effect, Observe, Outcome, Rule, close_attempt, reject, succeeded,
)
from . import (
    archive, attempts, chat, evidence, generations, holds, pauses, receipt, review, routes, transaction, waits,
)
from ..contract.vocabulary import APPLIED, EDGES, EVIDENCE_ONLY, KINDS, REJECTED, TRANSACTION_KINDS  # noqa: F401

#: kind -> its rule: the conditions of its write in the contract's order, then the write.
RULES: dict[str, Rule] = {
    **attempts.RULES, **evidence.RULES, **transaction.RULES, **holds.RULES, **archive.RULES,
    **waits.RULES, **generations.RULES, **pauses.RULES, **review.RULES, **receipt.RULES, **routes.RULES, **chat.RULES,
}
assert sorted(RULES) == sorted(KINDS), sorted(set(RULES) ^ set(KINDS))


# --- generic checks and the entry point ----------------------------------------------------


def capability_failure(ctx: Ctx) -> str | None:
    """Check 4: the request carries the exact K of the current attempt."""
    t, c = ctx.record, ctx.request.cap
    if t.attempt_state == "none":
        return "unknown-attempt"
    # guards: attempt-fencing
    if (c.generation, c.attempt, c.fence, c.lease_epoch) != \
            (t.generation, t.attempt, t.fence, t.lease_epoch):
        return "stale-capability"
    return None


def token_failure(ctx: Ctx) -> str | None:
    """Check 4 for the attempt's own process and every continuation: the request presents
    the token whose hash the attempt keeps (compared in constant time). K is public; the
    token is not."""
    r, kept = ctx.request, ctx.record.token_hash
    if not r.needs_token:
        return None
    # guards: token-required, continuation-needs-token, review-one-source-owner
    if kept is None or r.token_hash is None or not hmac.compare_digest(kept, r.token_hash):
        return "token-mismatch"
    return None


def transaction_failure(ctx: Ctx) -> str | None:
    """Check 5: a running attempt, the expected phase and revision (CAS), a legal edge."""
    t, r = ctx.record, ctx.request
    # guards: first-terminal-wins, terminal-never-resurrects
    if not t.running:
        return "terminal-already"
    if t.visible_phase != r.expected_phase or t.revision != r.expected_revision:
        return "cas-moved"
    edge = EDGES.get(r.kind)
    # guards: no-phase-skip, promotion-needs-review-of-exact-candidate, done-iff-graphsave
    if edge is not None and not (t.exit == "none" and t.phase in edge[0]):
        return "illegal-phase-edge"
    return None


def k_failure(graph_id: str, ctx) -> str | None:
    """Check 4 whole: the capability names this graph and task, is the current attempt's K,
    and the token is that attempt's. ``ctx``: anything with the stored ``record`` and the
    ``request`` (a ``Ctx``, or the facts read after a write whose conditions did not hold)."""
    r = ctx.request
    # guards: attempt-fencing
    if r.cap is None or r.cap.graph != graph_id or r.cap.task != r.task:
        return "stale-capability"
    return capability_failure(ctx) or token_failure(ctx)


def decide(ctx: Ctx) -> Outcome:
    """Checks 2 to 6 for a request the journal has not seen (the task exists)."""
    r = ctx.request
    if r.needs_capability:
        code = k_failure(ctx.graph_id, ctx)
        if code:
            return reject(ctx, code)
    if r.kind in TRANSACTION_KINDS:
        code = transaction_failure(ctx)
        if code:
            return reject(ctx, code)
    rule = RULES[r.kind]
    for condition in rule.when:
        if not condition.holds(ctx):
            return reject(ctx, condition.code)
    return rule.then(ctx)
