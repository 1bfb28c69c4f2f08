"""The rules of admission, attempts, evidence and terminal reports."""
from __future__ import annotations

from .decision import (
    Ctx, Effect, Outcome, close_attempt, evidence_fact, open_attempt, reject, succeeded, suspect,
)
from .records import TaskRecord, evolve as replace
from .vocabulary import APPLIED, EVIDENCE_ONLY


# --- admission and attempts -----------------------------------------------------------------


def assign(ctx: Ctx) -> Outcome:
    t = ctx.record
    return succeeded(ctx, replace(t, assigned=True), kind=EVIDENCE_ONLY if t.assigned else APPLIED)


def admission_failure(ctx: Ctx, t: TaskRecord) -> str | None:
    if t.abandoned:
        return "held"
    # guards: terminal-never-resurrects
    if t.attempt_state == "succeeded":
        return "terminal-already"
    # guards: legacy-never-satisfies
    if t.exit in ("needs-reconciliation", "upgrade-blocked"):
        return "held"
    if ctx.policy.requires_assignment and not t.assigned:
        return "assignment-required"
    # guards: dependency-needs-done, attempt-opens-on-done-dependencies
    if not ctx.deps_done():
        return "dependency-not-done"
    # guards: no-attempt-while-waiting
    if t.waiting_on is not None:
        return "waiting"
    if ctx.request.expected_attempt != t.attempt:
        return "cas-moved"
    return None


def import_failure(ctx: Ctx, t: TaskRecord) -> str | None:
    imports = ctx.request.imports
    if not imports:
        return None
    if t.retained is None:
        return "nothing-retained"
    if t.retained != imports:
        return "candidate-mismatch"
    return None


def retry_failure(ctx: Ctx, t: TaskRecord) -> str | None:
    """A dispatch after a failed or lost attempt is an automatic retry: never after a semantic
    failure (the work was rejected: a repair first), and only within the task's budget."""
    if t.attempt_state not in ("failed", "lost"):
        return None
    # guards: semantic-failure-never-auto-retried
    if t.failure == "semantic":
        return "repair-required"
    # guards: retries-within-budget
    if t.retries >= ctx.policy.retry_budget:
        return "retry-budget-spent"
    return None


def dispatch(ctx: Ctx) -> Outcome:
    t = ctx.record
    # guards: single-live-owner
    code = admission_failure(ctx, t) or ("attempt-live" if t.running else None) \
        or ("held" if t.wait_expired else None) or retry_failure(ctx, t) \
        or import_failure(ctx, t)
    if code:
        return reject(ctx, code)
    effects: list[Effect] = []
    retries = t.retries + 1 if t.attempt_state in ("failed", "lost") else t.retries
    return succeeded(ctx, replace(open_attempt(ctx, t, effects), retries=retries),
                     effects=effects)


def retry(ctx: Ctx) -> Outcome:
    t = ctx.record
    # guards: single-live-owner
    stuck = (not t.running or (t.owner_seen == "dead" and not t.reserved)
             or t.exit in ("needs-repair", "aborted-preserved"))
    code = admission_failure(ctx, t) or (None if stuck else "attempt-live")
    if code:
        return reject(ctx, code)
    effects: list[Effect] = []
    closed = close_attempt(ctx, t, "abandoned", effects) if t.running else t
    code = import_failure(ctx, closed)
    if code:
        return reject(ctx, code)
    facts = [("attempt-closed", {"fence": t.fence, "state": "abandoned"})] if t.running else []
    # an operator's retry: the automatic retries start again, a wait that ran out is over
    return succeeded(ctx, replace(open_attempt(ctx, closed, effects), retries=0,
                                  wait_expired=False), effects=effects, facts=facts)


def resume(ctx: Ctx) -> Outcome:
    t, o = ctx.record, ctx.request.owner
    # guards: first-terminal-wins, terminal-never-resurrects
    if not t.running:
        return reject(ctx, "terminal-already")
    # guards: single-live-owner, retry-is-not-continuation-without-proof
    if t.owner_seen != "dead":
        return reject(ctx, "owner-not-proven-dead")
    if t.reserved:
        return reject(ctx, "terminal-already")
    # guards: retry-is-not-continuation-without-proof
    if not (o.session == t.session and t.session_lease and t.worktree_lease
            and ctx.observe.worktree(t).present):
        return reject(ctx, "continuation-unproven")
    if not (o.wrapper_epoch > t.wrapper_epoch and o.child_epoch > t.child_epoch):
        return reject(ctx, "continuation-unproven")
    # the presented token was checked with K (``rules.token_failure``); the continuation
    # gets the token its opener minted
    new = replace(t, owner_pid=o.pid, owner_birth=o.birth, wrapper_epoch=o.wrapper_epoch,
                  child_epoch=o.child_epoch, owner_seen="unverified", deadline=0,
                  token_hash=ctx.request.mint)
    return succeeded(ctx, new, effects=[Effect("adopt", (o.pid, o.birth))])


# --- evidence -------------------------------------------------------------------------------


def heartbeat(ctx: Ctx) -> Outcome:
    return succeeded(ctx, ctx.record, kind=EVIDENCE_ONLY,
                facts=[evidence_fact("heartbeat", ctx.request.evidence)])


def _suspicion(ctx: Ctx, label: str) -> Outcome:
    t = ctx.record
    # guards: evidence-cannot-terminalize-live-owner
    new = replace(t, owner_seen=suspect(t)) if t.running else t
    return succeeded(ctx, new, kind=EVIDENCE_ONLY, facts=[evidence_fact(label, ctx.request.evidence)])


def heartbeat_timeout(ctx: Ctx) -> Outcome:
    return _suspicion(ctx, "heartbeat-timeout")


def observe_eof(ctx: Ctx) -> Outcome:
    return _suspicion(ctx, "observe-eof")


def probe_owner(ctx: Ctx) -> Outcome:
    t = ctx.record
    alive = ctx.observe.owner_alive(t)
    proves_death = t.running and not alive and t.owner_seen != "dead"
    new = t
    if t.running:
        # guards: liveness-needs-exact-birth, evidence-cannot-terminalize-live-owner
        new = replace(new, owner_seen="live" if alive else "dead")
    if proves_death:
        new = replace(new, deadline=ctx.observe.now() + 1)
    return succeeded(ctx, new, kind=APPLIED if proves_death else EVIDENCE_ONLY,
                facts=[evidence_fact("probe-owner", ctx.request.evidence)])


def compaction(ctx: Ctx) -> Outcome:
    t, occ = ctx.record, ctx.request.evidence
    new = not ctx.seen("compaction", occ)
    facts = [evidence_fact("compaction", occ)]
    if new and t.running and not t.reserved:
        facts.append(evidence_fact("continuation", occ))
    return succeeded(ctx, t, kind=APPLIED if new else EVIDENCE_ONLY, facts=facts)


def ack_continuation(ctx: Ctx) -> Outcome:
    occ = ctx.request.evidence
    # guards: compaction-occurrences-counted-once
    if not ctx.seen("continuation", occ):
        return reject(ctx, "unknown-occurrence")
    new = not ctx.seen("ack-continuation", occ)
    return succeeded(ctx, ctx.record, kind=APPLIED if new else EVIDENCE_ONLY,
                facts=[evidence_fact("ack-continuation", occ)])


def provider_failure(ctx: Ctx) -> Outcome:
    new = not ctx.seen("provider-failure", ctx.request.evidence)
    return succeeded(ctx, ctx.record, kind=APPLIED if new else EVIDENCE_ONLY,
                facts=[evidence_fact("provider-failure", ctx.request.evidence)])


def message(ctx: Ctx) -> Outcome:
    held = ctx.record.running and not ctx.seen("message", ctx.request.evidence)
    return succeeded(ctx, ctx.record, kind=EVIDENCE_ONLY,
                facts=[evidence_fact("message", ctx.request.evidence, counted=held)])


def ownership_contention(ctx: Ctx) -> Outcome:
    return succeeded(ctx, ctx.record, kind=EVIDENCE_ONLY,
                facts=[evidence_fact("ownership-contention", ctx.request.evidence)])


def log(ctx: Ctx) -> Outcome:
    if not ctx.record.running:
        return reject(ctx, "terminal-already")
    return succeeded(ctx, ctx.record, facts=[("log", {})])


# --- terminal reports and convergence ------------------------------------------------------


def fail(ctx: Ctx) -> Outcome:
    t = ctx.record
    # guards: first-terminal-wins
    first = t.running and not t.reserved
    effects: list[Effect] = []
    new = replace(close_attempt(ctx, t, "failed", effects), failure=ctx.request.failure) \
        if first else t
    return succeeded(ctx, new, kind=APPLIED if first else EVIDENCE_ONLY, effects=effects,
                facts=[evidence_fact("fail", ctx.request.evidence)])


def declare_lost(ctx: Ctx) -> Outcome:
    t = ctx.record
    if not t.running:
        return reject(ctx, "terminal-already")
    if t.owner_seen != "dead":
        return reject(ctx, "owner-not-proven-dead")
    if t.reserved:
        return reject(ctx, "terminal-already")
    effects: list[Effect] = []
    return succeeded(ctx, close_attempt(ctx, t, "lost", effects), effects=effects)
