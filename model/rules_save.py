"""The rules of the SaveTransaction: one guard-then-update function per edge, from submit
to the GraphSave, and the ways off the main line (repair, revise, upgrade block).

Each rule is declared with ``@rule`` (``wgk.model.rules``).
"""
from __future__ import annotations

from .logic import all_of, any_of, ite, not_
from .predicates import binding, deps_current, receipt_of, receipts_agree
from .requests import Request
from .ruleset import CLOSE, EDGE, EXIT, guarded, rule
from .state import NO_RECEIPTS, Binding, TaskState, replace_task as replace
from .updates import advance, leave_main_line, release_owner
from .vocab import (
    Actor, AttemptState as AS, Code, Disposition, Exit, Kind as K, Phase, Reason, Receipt, Verdict,
)


@rule(K.SUBMIT, touches=EDGE | {"deadline"}, reads={"self"})
def submit(s, i, t, r):
    """The owner submits: the completion transaction reserves the attempt's terminal."""
    return guarded(
        [(all_of(t.worktree_lease, t.worktree_present), Code.STALE_CAPABILITY)],
        lambda: s.put(i, advance(t, Phase.PREPARED, deadline=r.deadline or t.deadline)),
    )


@rule(K.QUIESCE, touches=EDGE, reads={"self"})
def quiesce(s, i, t, r):
    """The writer is stopped; from now on the worktree bytes cannot change."""
    return guarded([], lambda: s.put(i, advance(t, Phase.QUIESCING)))


@rule(K.SAVE_WORK, touches=EDGE | {"saved_work", "candidate", "base", "version", "receipts"},
      reads={"self"})
def save_work(s, i, t, r):
    """WorkSave: capture the exact worktree bytes (a clean tree too) bound to K and base.

    The base is the kernel's own fact, the commit the attempt's worktree was built on
    (``built_on``: the target at dispatch, or the imported work's); a request naming another
    base is refused, so a candidate is never bound to a base it does not descend from."""
    def update():
        b = Binding(t.fence, r.candidate, t.built_on)
        return s.put(i, advance(
            t, Phase.WORK_SAVED, saved_work=t.worktree, candidate=r.candidate,
            base=t.built_on, version=t.version + 1,
            receipts=t.with_receipt(Receipt.WORK_SAVE, b),
        ))
    return guarded(
        [(t.worktree_present, Code.WORKTREE_MISSING),
         (t.worktree == r.candidate, Code.CANDIDATE_MISMATCH),
         (r.base == t.built_on, Code.BASE_MISMATCH)],
        update,
    )


def _candidate_check(t: TaskState, r: Request) -> tuple:
    return (t.candidate == r.candidate, Code.CANDIDATE_MISMATCH)


def touches_protected(s, t: TaskState):
    """The candidate touches a protected control-plane path: its content is marked (the
    graph's policy; a fact about the content, ``wgk.model.protected``) and differs from its
    base (a candidate equal to its base changes no path)."""
    return all_of(s.graph.protected(t.candidate), t.candidate != t.base)


@rule(K.SEAL_CANDIDATE, touches=EDGE | EXIT | {"receipts"}, reads={"self"})
def seal_candidate(s, i, t, r):
    """The saved work becomes the one immutable candidate; a candidate touching a protected
    path is held fail-closed in repair instead, before any validator sees it."""
    held = touches_protected(s, t)
    def update():
        sealed = advance(t, Phase.CANDIDATE_SEALED,
                         receipts=t.with_receipt(Receipt.CANDIDATE, binding(t)))
        return s.put(i, ite(held, leave_main_line(t, Exit.NEEDS_REPAIR, Reason.PROTECTED_PATH),
                            sealed))
    return guarded([_candidate_check(t, r)], update)


@rule(K.VALIDATE, touches=EDGE | EXIT | {"receipts"}, reads={"self"})
def validate(s, i, t, r):
    """The validator's verdict on the exact candidate: pass advances, fail needs repair."""
    passed = r.verdict == Verdict.PASS
    def update():
        if passed:
            return s.put(i, advance(t, Phase.VALIDATED,
                                    receipts=t.with_receipt(Receipt.VALIDATION, binding(t))))
        return s.put(i, leave_main_line(t, Exit.NEEDS_REPAIR, Reason.VALIDATION_FAILED))
    return guarded(
        [_candidate_check(t, r),
         (r.verdict in (Verdict.PASS, Verdict.FAIL), Code.ILLEGAL_PHASE_EDGE)],
        update,
    )


@rule(K.REQUEST_REVIEW, touches=EDGE | {"deadline"}, reads={"self"})
def request_review(s, i, t, r):
    """Policy requires a FLIP review: the transaction waits for the evaluator."""
    return guarded(
        [(s.graph.review_required[i], Code.ILLEGAL_PHASE_EDGE)],
        lambda: s.put(i, advance(t, Phase.AWAITING_ACCEPTANCE, deadline=r.deadline or t.deadline)),
    )


@rule(K.ACCEPT, touches=EDGE | EXIT | {"deadline", "receipts"}, reads={"self"})
def accept(s, i, t, r):
    """Acceptance of the exact candidate: a passing review, or a not-required policy receipt."""
    required = s.graph.review_required[i]
    from_awaiting = t.phase == Phase.AWAITING_ACCEPTANCE
    # a review verdict is the evaluator's; the not-required policy receipt is the daemon's
    own_verdict = r.actor == (Actor.DAEMON if r.verdict == Verdict.NOT_REQUIRED else Actor.EVALUATOR)
    if r.verdict == Verdict.FAIL:
        return guarded(
            [(own_verdict, Code.NOT_AUTHORIZED), _candidate_check(t, r),
             (from_awaiting, Code.ILLEGAL_PHASE_EDGE)],
            lambda: s.put(i, leave_main_line(t, Exit.NEEDS_REPAIR, Reason.REVIEW_FAILED)),
        )
    by_review = r.verdict == Verdict.PASS
    return guarded(
        [
            (own_verdict, Code.NOT_AUTHORIZED),
            _candidate_check(t, r),
            (r.verdict is not None, Code.ILLEGAL_PHASE_EDGE),
            (ite(required, from_awaiting, not_(from_awaiting)),
             ite(required, Code.REVIEW_REQUIRED, Code.ILLEGAL_PHASE_EDGE)),
            (any_of(by_review, not_(required)), Code.REVIEW_REQUIRED),
        ],
        lambda: s.put(i, advance(t, Phase.ACCEPTED, deadline=r.deadline or t.deadline,
                                 receipts=t.with_receipt(Receipt.REVIEW, binding(t)))),
    )


@rule(K.RECORD_DISPOSITION, touches=EDGE | {"disposition", "finish_lease", "deadline", "receipts"},
      reads={"self"})
def record_disposition(s, i, t, r):
    """The task-owned Land / Deliver / Report receipt; the finish lease is taken."""
    return guarded(
        [(r.disposition in (Disposition.LAND, Disposition.DELIVER, Disposition.REPORT),
          Code.ILLEGAL_PHASE_EDGE)],
        lambda: s.put(i, advance(
            t, Phase.DISPOSITION_RECORDED, disposition=r.disposition, finish_lease=True,
            deadline=r.deadline or t.deadline,
            receipts=t.with_receipt(Receipt.DISPOSITION, binding(t)),
        )),
    )


@rule(K.PREPARE_EFFECT, touches=EDGE, reads={"self", "deps.done", "deps.generation"})
def prepare_effect(s, i, t, r):
    """Write-ahead intent before the external effect, only while every dependency is Done on
    the generation the attempt opened on (a dependency reopened since refuses it)."""
    return guarded([(deps_current(s, i, t), Code.DEPENDENCY_REOPENED)],
                   lambda: s.put(i, advance(t, Phase.EFFECT_PREPARED)))


@rule(K.COMMIT_EFFECT, touches=EDGE | {"effect_done", "promotions", "receipts", "target"},
      reads={"self", "target"})
def commit_effect(s, i, t, r):
    """Publish once: re-observe the effect; else Land moves the target by CAS from the exact base."""
    land = t.disposition == Disposition.LAND
    happened = t.effect_done
    cas_ok = s.target == t.base
    def update():
        new_target = ite(all_of(land, not_(happened)), t.candidate, s.target)
        task = advance(
            t, Phase.EFFECT_COMMITTED, effect_done=True,
            promotions=ite(happened, t.promotions, t.promotions + 1),
            receipts=t.with_receipt(Receipt.EFFECT, binding(t)),
        )
        return s.put(i, task).put_target(new_target)
    return guarded(
        [
            _candidate_check(t, r),
            (r.base == t.base, Code.CANDIDATE_MISMATCH),
            (receipt_of(t, Receipt.REVIEW) == binding(t), Code.REVIEW_REQUIRED),
            (any_of(happened, not_(land), cas_ok), Code.CAS_MOVED),
        ],
        update,
    )


@rule(K.MARK_REPAIR, touches=EXIT | {"finish_lease"}, reads={"self", "target"})
def mark_repair(s, i, t, r):
    """The target moved before the CAS: needs repair, candidate retained, never a rebase."""
    moved = all_of(t.exit == Exit.NONE, t.phase == Phase.EFFECT_PREPARED,
                   t.disposition == Disposition.LAND, not_(t.effect_done), s.target != t.base)
    return guarded(
        [(moved, Code.ILLEGAL_PHASE_EDGE)],
        lambda: s.put(i, leave_main_line(t, Exit.NEEDS_REPAIR, Reason.TARGET_MOVED,
                                         finish_lease=False)),
    )


@rule(K.PREPARE_CLEANUP, touches=EDGE, reads={"self"})
def prepare_cleanup(s, i, t, r):
    """Plan removal of exactly this attempt's worktree."""
    return guarded([], lambda: s.put(i, advance(t, Phase.CLEANUP_PREPARED)))


@rule(K.COMMIT_CLEANUP, touches=EDGE | {"worktree_present", "worktree_lease", "receipts"},
      reads={"self"})
def commit_cleanup(s, i, t, r):
    """Remove exactly the planned worktree (re-observed if already gone) and release its lease."""
    return guarded(
        [(any_of(not_(t.worktree_present), t.worktree == t.saved_work), Code.WORKTREE_UNSAVED)],
        lambda: s.put(i, advance(
            t, Phase.CLEANUP_COMMITTED, worktree_present=False, worktree_lease=False,
            receipts=t.with_receipt(Receipt.CLEANUP, binding(t)),
        )),
    )


SAVE_GRAPH_NEEDS = (Receipt.WORK_SAVE, Receipt.CANDIDATE, Receipt.VALIDATION, Receipt.REVIEW,
                    Receipt.DISPOSITION, Receipt.EFFECT, Receipt.CLEANUP)


@rule(K.SAVE_GRAPH, touches=EDGE | CLOSE | {"receipts"}, reads={"self"})
def save_graph(s, i, t, r):
    """GraphSave: every receipt exists and agrees on K, candidate and base; the attempt succeeds."""
    return guarded(
        [(receipts_agree(t, SAVE_GRAPH_NEEDS), Code.EVIDENCE_MISSING)],
        lambda: s.put(i, release_owner(advance(
            t, Phase.GRAPH_SAVED, attempt_state=AS.SUCCEEDED,
            receipts=t.with_receipt(Receipt.GRAPH_SAVE, binding(t)),
        ))),
    )


@rule(K.REVISE, touches=EDGE | EXIT | {"retained", "saved_work", "candidate", "base", "version",
                                       "receipts", "built_on", "retained_base"}, reads={"self", "target"})
def revise(s, i, t, r):
    """A new candidate version after repair, built on the target as it is now (the kernel's
    fact: the new version's base, checked on the repository at the land) and descending from
    it (the worktree's bytes were built on it: its owner rebased); earlier reviews no longer
    count."""
    def update():
        b = Binding(t.fence, r.candidate, s.target)
        return s.put(i, replace(
            t, phase=Phase.WORK_SAVED, exit=Exit.NONE, reason=Reason.NONE,
            revision=t.revision + 1, retained=ite(t.saved_work != 0, t.saved_work, t.retained),
            retained_base=ite(t.saved_work != 0, t.base, t.retained_base),
            saved_work=t.worktree, candidate=r.candidate, base=s.target, built_on=s.target,
            version=t.version + 1,
            receipts=NO_RECEIPTS[:Receipt.WORK_SAVE] + (b,) + NO_RECEIPTS[Receipt.WORK_SAVE + 1:],
        ))
    return guarded(
        [(t.exit == Exit.NEEDS_REPAIR, Code.ILLEGAL_PHASE_EDGE),
         (t.worktree_present, Code.WORKTREE_MISSING),
         (t.worktree == r.candidate, Code.CANDIDATE_MISMATCH),
         (r.base == s.target, Code.BASE_MISMATCH),
         (any_of(t.worktree_base == r.base, r.candidate == r.base), Code.BASE_MISMATCH)],
        update,
    )


@rule(K.BLOCK_UPGRADE, touches=EXIT, reads={"self"})
def block_upgrade(s, i, t, r):
    """Version skew between daemon and binary: the transaction holds, fail-closed."""
    return guarded(
        [(all_of(t.phase != Phase.ABSENT, t.phase != Phase.GRAPH_SAVED, t.exit == Exit.NONE),
          Code.ILLEGAL_PHASE_EDGE)],
        lambda: s.put(i, leave_main_line(t, Exit.UPGRADE_BLOCKED, Reason.VERSION_SKEW)),
    )
