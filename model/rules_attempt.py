"""The rules of admission and attempts: assignment, dispatch, retry and resume.

Each rule is a guard-then-update function declared with ``@rule`` (``wgk.model.rules``).
"""
from __future__ import annotations

from typing import Any

from .logic import all_of, any_of, implies, ite, not_, one_of
from .predicates import deps_done, deps_generation, reserved, running
from .ruleset import CLOSE, OPEN, guarded, rule
from .state import replace_task as replace
from .updates import close_attempt, open_attempt
from .vocab import AttemptState as AS, Code, DecisionKind as D, Exit, Failure, Kind as K, OwnerSeen


@rule(K.ASSIGN, touches={"assigned"}, reads={"self"})
def assign(s, i, t, r):
    """The daemon records the assignment receipt that admits the task."""
    return guarded(
        [],
        lambda: s.put(i, replace(t, assigned=True)),
        kind=ite(t.assigned, D.EVIDENCE_ONLY, D.APPLIED),
    )


def _admission_checks(s, i, t, r) -> list:
    return [
        (not_(t.abandoned), Code.HELD),
        (t.attempt_state != AS.SUCCEEDED, Code.TERMINAL_ALREADY),
        (t.exit != Exit.NEEDS_RECONCILIATION, Code.HELD),
        (t.exit != Exit.UPGRADE_BLOCKED, Code.HELD),
        (not_(t.reopening), Code.HELD),
        (any_of(not_(s.graph.requires_assignment[i]), t.assigned), Code.ASSIGNMENT_REQUIRED),
        (deps_done(s, i), Code.DEPENDENCY_NOT_DONE),
        (t.waiting_on == 0, Code.WAITING),
        (not_(t.paused), Code.PAUSED),
        (s.now >= t.not_before, Code.NOT_DUE),
        (not_(t.route_unavailable), Code.ROUTE_UNAVAILABLE),
        (r.expected_attempt == t.attempt, Code.CAS_MOVED),
    ]


def _import_checks(t, r) -> list:
    if not r.imports:
        return []
    return [(t.retained != 0, Code.NOTHING_RETAINED),
            (t.retained == r.imports, Code.CANDIDATE_MISMATCH)]


def after_failure(t) -> Any:
    """The last attempt of this generation failed or was lost: a dispatch now is an automatic
    retry. A new generation (``reset``) has no attempt yet (``attempt == 0``): the attempt
    its reset closed belongs to the old generation, and its first dispatch is no retry."""
    return all_of(t.attempt != 0, one_of(t.attempt_state, (AS.FAILED, AS.LOST)))


def _retry_checks(s, i, t) -> list:
    """An automatic retry: never after a semantic failure, and within the task's budget."""
    again = after_failure(t)
    return [(implies(again, t.failure != Failure.SEMANTIC), Code.REPAIR_REQUIRED),
            (implies(again, t.retries < s.graph.retry_budget[i]), Code.RETRY_BUDGET_SPENT)]


@rule(K.DISPATCH, touches=OPEN | {"retries", "deps_generation"},
      reads={"self", "deps.done", "deps.generation", "target", "now"})
def dispatch(s, i, t, r):
    """Open an attempt on a task whose dependencies are all dependency-satisfying Done; after a
    failed or lost attempt it is an automatic retry, counted against the task's budget."""
    checks = _admission_checks(s, i, t, r) + [(not_(running(t)), Code.ATTEMPT_LIVE),
                                              (not_(t.wait_expired), Code.HELD)]
    retries = ite(after_failure(t), t.retries + 1, t.retries)
    return guarded(checks + _retry_checks(s, i, t) + _import_checks(t, r),
                   lambda: s.put(i, replace(open_attempt(s, t, r), retries=retries,
                                            deps_generation=deps_generation(s, i))))


@rule(K.RETRY, touches=OPEN | CLOSE | {"retries", "wait_expired", "deps_generation"},
      reads={"self", "deps.done", "deps.generation", "target", "now"})
def retry(s, i, t, r):
    """The operator closes a stuck attempt (work retained) and opens a new one; the automatic
    retries start again, and a wait that ran out is over."""
    stuck = any_of(
        not_(running(t)),
        all_of(t.owner_seen == OwnerSeen.DEAD, not_(reserved(t))),
        one_of(t.exit, (Exit.NEEDS_REPAIR, Exit.ABORTED_PRESERVED)),
    )
    closed = ite(running(t), close_attempt(t, AS.ABANDONED), t)
    checks = _admission_checks(s, i, t, r) + [(stuck, Code.ATTEMPT_LIVE)]
    return guarded(checks + _import_checks(closed, r),
                   lambda: s.put(i, replace(open_attempt(s, closed, r), retries=0,
                                            wait_expired=False,
                                            deps_generation=deps_generation(s, i))))


@rule(K.RESUME, touches={"owner_pid", "owner_birth", "proc_birth", "wrapper_epoch", "child_epoch",
                         "owner_seen", "deadline", "token"}, reads={"self"})
def resume(s, i, t, r):
    """Same-attempt continuation: needs unchanged K and the attempt's token (checked with K),
    the same session, proven death and no terminal intent; the continuation gets the token
    minted for it."""
    o = r.owner
    return guarded(
        [
            (running(t), Code.TERMINAL_ALREADY),
            (t.owner_seen == OwnerSeen.DEAD, Code.OWNER_NOT_PROVEN_DEAD),
            (not_(reserved(t)), Code.TERMINAL_ALREADY),
            (all_of(o.session == t.session, t.session_lease, t.worktree_lease,
                    t.worktree_present), Code.CONTINUATION_UNPROVEN),
            (all_of(o.wrapper_epoch > t.wrapper_epoch, o.child_epoch > t.child_epoch),
             Code.CONTINUATION_UNPROVEN),
        ],
        lambda: s.put(i, replace(
            t, owner_pid=o.pid, owner_birth=o.birth, proc_birth=o.birth,
            wrapper_epoch=o.wrapper_epoch, child_epoch=o.child_epoch,
            owner_seen=OwnerSeen.UNVERIFIED, deadline=0, token=r.mint,
        )),
    )
