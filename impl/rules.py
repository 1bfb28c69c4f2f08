"""The decision for one request: generic checks, then one guard-then-update rule per kind.

The rules themselves live by topic (``rules_attempt``: admission, attempts,
evidence, terminal reports; ``rules_save``: the SaveTransaction;
``rules_operator``: operator and migration; ``rules_archive``: archiving a Done task after
the confirmation of its digest; ``rules_wait``: external waits; ``rules_reopen``: reopening
a Done task), on the vocabulary of ``decision``; this module holds the table of rules and
the entry point. Every write a rule's outcome makes is conditional on the record it was
decided on (``tables.STAMP``).

``decide(ctx)`` answers a request whose key is not in the journal (the journal
is the store's business). The order of checks is the contract of
docs/vocabulary.md: authority, the task exists, the capability tuple K, the
transaction CAS and edge, then the rule's own guards in the order written. The
first failing guard names the rejection; a rejected request changes nothing.

A rule returns an ``Outcome``: the decision, the task's new record, the facts
to record beside it (evidence, logs, effect intents, worktrees) and the
external ``effects`` to perform before the transaction commits. Rules read the
environment only through ``Observe`` (worktree bytes, the target ref, the
process table, whether an effect already happened) and never perform an
effect themselves.
"""
from __future__ import annotations

import hmac

from typing import Callable

# the vocabulary a rule is written in, re-exported for whoever writes or replaces a rule
from .decision import Ctx, Effect, Observe, Outcome, close_attempt, reject, succeeded  # noqa: F401
from .rules_attempt import (
    ack_continuation, assign, compaction, declare_lost, dispatch, fail, heartbeat,
    heartbeat_timeout, log, message, observe_eof, ownership_contention, probe_owner,
    provider_failure, resume, retry,
)
from .rules_operator import abandon, legacy_done, reconcile, reconstruct, reset
from .rules_archive import archive, confirm_archive
from .rules_wait import deliver, expire_wait, park
from .rules_reopen import reopen
from .rules_save import (
    accept, block_upgrade, commit_cleanup, commit_effect, mark_repair, prepare_cleanup,
    prepare_effect, quiesce, record_disposition, request_review, revise, save_graph, save_work,
    seal_candidate, submit, validate,
)
from .vocabulary import APPLIED, EDGES, EVIDENCE_ONLY, REJECTED, TRANSACTION_KINDS  # noqa: F401


RULES: dict[str, Callable[[Ctx], Outcome]] = {
    "assign": assign, "dispatch": dispatch, "retry": retry, "resume": resume,
    "heartbeat": heartbeat, "heartbeat-timeout": heartbeat_timeout, "observe-eof": observe_eof,
    "probe-owner": probe_owner, "compaction": compaction, "ack-continuation": ack_continuation,
    "provider-failure": provider_failure, "message": message,
    "ownership-contention": ownership_contention, "log": log,
    "fail": fail, "declare-lost": declare_lost,
    "submit": submit, "quiesce": quiesce, "save-work": save_work,
    "seal-candidate": seal_candidate, "validate": validate, "request-review": request_review,
    "accept": accept, "record-disposition": record_disposition,
    "prepare-effect": prepare_effect, "commit-effect": commit_effect,
    "mark-repair": mark_repair, "prepare-cleanup": prepare_cleanup,
    "commit-cleanup": commit_cleanup, "save-graph": save_graph, "revise": revise,
    "block-upgrade": block_upgrade,
    "reset": reset, "abandon": abandon, "reconcile": reconcile,
    "reconstruct": reconstruct, "legacy-done": legacy_done,
    "confirm-archive": confirm_archive, "archive": archive,
    "park": park, "deliver": deliver, "expire-wait": expire_wait,
    "reopen": reopen,
}


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
    # guards: token-required, continuation-needs-token
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


def decide(ctx: Ctx) -> Outcome:
    """Checks 2 to 6 for a request the journal has not seen (the task exists)."""
    r = ctx.request
    if r.needs_capability:
        # guards: attempt-fencing
        if r.cap is None or r.cap.graph != ctx.graph_id or r.cap.task != r.task:
            return reject(ctx, "stale-capability")
        code = capability_failure(ctx) or token_failure(ctx)
        if code:
            return reject(ctx, code)
    if r.kind in TRANSACTION_KINDS:
        code = transaction_failure(ctx)
        if code:
            return reject(ctx, code)
    return RULES[r.kind](ctx)
