"""Supporting lemmas: named per-task predicates that make the invariants inductive.

Each lemma is written like an invariant of the registry (``pred(s, i, t)``
with the operators of ``wgk.model.logic``), has a one-sentence docstring, and
is itself proved inductive by ``wgk prove`` together with the invariants.
"""
from __future__ import annotations

from typing import Any

from wgk.model.invariants import Property
from wgk.model.logic import all_of, any_of, iff, implies, not_, one_of
from wgk.model.rules import binding, dirty, has_receipt, receipt_of, reserved, running
from wgk.model.state import State, TaskState
from wgk.model.rules_review import evaluation_passed, flip_passed
from wgk.model.vocab import AttemptState as AS, Exit, Failure, Phase, Receipt, ReviewPhase

LEMMAS: dict[str, Property] = {}


def lemma(id: str):
    def register(fn):
        doc = (fn.__doc__ or "").strip()
        if not doc:
            raise ValueError(f"lemma {id} needs a one-sentence docstring")
        LEMMAS[id] = Property(id, "always", "state", doc, fn)
        return fn
    return register


# --- helpers ----------------------------------------------------------------------

#: The phase whose edge records each receipt.
RECORDED_AT: dict[Receipt, Phase] = {
    Receipt.WORK_SAVE: Phase.WORK_SAVED, Receipt.CANDIDATE: Phase.CANDIDATE_SEALED,
    Receipt.VALIDATION: Phase.VALIDATED, Receipt.REVIEW: Phase.ACCEPTED,
    Receipt.DISPOSITION: Phase.DISPOSITION_RECORDED, Receipt.EFFECT: Phase.EFFECT_COMMITTED,
    Receipt.CLEANUP: Phase.CLEANUP_COMMITTED, Receipt.GRAPH_SAVE: Phase.GRAPH_SAVED,
}


def recorded(evidence) -> list[tuple[tuple[str, str], Any]]:
    """``(pair, present)`` for every pair the evidence can hold (concrete or symbolic)."""
    bits = getattr(evidence, "bits", None)
    if bits is not None:
        return list(bits.items())
    return [(p, True) for p in evidence]


def implied_pairs(t: TaskState, kind: str, needs: str) -> Any:
    """Every ``(kind, id)`` recorded comes with a ``(needs, id)`` recorded."""
    ev = t.evidence
    return all_of(*[implies(present, ev.has((needs, ident)))
                    for (k, ident), present in recorded(ev) if k == kind])


# --- the transaction ----------------------------------------------------------------

@lemma("receipts-follow-phase")
def receipts_follow_phase(s: State, i: int, t: TaskState) -> Any:
    """A receipt exists exactly when the transaction has passed the edge that records it, bound to the current fence, candidate and base."""
    b = binding(t)
    return all_of(*[all_of(iff(has_receipt(t, k), t.phase >= at), implies(has_receipt(t, k),
                                                                           receipt_of(t, k) == b))
                    for k, at in RECORDED_AT.items()])


@lemma("attempt-has-fence")
def attempt_has_fence(s: State, i: int, t: TaskState) -> Any:
    """Once an attempt was opened (or a legacy Done rebuilt) the task has a non-zero fence."""
    return implies(t.attempt_state != AS.NONE, t.fence >= 1)


@lemma("reconstructed-is-success")
def reconstructed_is_success(s: State, i: int, t: TaskState) -> Any:
    """A task rebuilt from a proven legacy Done stays succeeded."""
    return implies(t.reconstructed, t.attempt_state == AS.SUCCEEDED)


@lemma("graph-saved-is-success")
def graph_saved_is_success(s: State, i: int, t: TaskState) -> Any:
    """The transaction is at graph-saved exactly when the attempt succeeded, and then it is on the main line."""
    at_end = t.phase == Phase.GRAPH_SAVED
    return all_of(iff(at_end, t.attempt_state == AS.SUCCEEDED), implies(at_end, t.exit == Exit.NONE))


@lemma("legacy-claim-is-held")
def legacy_claim_is_held(s: State, i: int, t: TaskState) -> Any:
    """An unproven legacy Done is exactly what holds a task for reconciliation, with no transaction."""
    return all_of(iff(t.legacy_done, t.exit == Exit.NEEDS_RECONCILIATION),
                  implies(t.legacy_done, t.phase == Phase.ABSENT))


@lemma("closed-attempt-has-no-transaction")
def closed_attempt_has_no_transaction(s: State, i: int, t: TaskState) -> Any:
    """Only a running, succeeded or abandoned attempt has a transaction past absent."""
    return implies(reserved(t), any_of(running(t), t.attempt_state == AS.SUCCEEDED, t.abandoned))


@lemma("abandoned-is-closed")
def abandoned_is_closed(s: State, i: int, t: TaskState) -> Any:
    """An abandoned task never runs nor succeeds, and an abandoned attempt means an abandoned task."""
    return all_of(implies(t.abandoned, all_of(not_(running(t)), t.attempt_state != AS.SUCCEEDED)),
                  implies(t.attempt_state == AS.ABANDONED, t.abandoned))


@lemma("effect-is-final")
def effect_is_final(s: State, i: int, t: TaskState) -> Any:
    """Once the effect happened the attempt only moves on to success (or is abandoned while blocked), and a promotion implies the effect."""
    moving_on = all_of(running(t), t.phase >= Phase.EFFECT_COMMITTED,
                       one_of(t.exit, (Exit.NONE, Exit.UPGRADE_BLOCKED)))
    return all_of(
        implies(t.effect_done, any_of(t.attempt_state == AS.SUCCEEDED, t.abandoned, moving_on)),
        implies(t.promotions >= 1, t.effect_done))


@lemma("cleaned-worktree-is-gone")
def cleaned_worktree_is_gone(s: State, i: int, t: TaskState) -> Any:
    """After the cleanup commit the attempt's worktree no longer exists (unless rebuilt from a legacy record)."""
    return implies(all_of(t.phase >= Phase.CLEANUP_COMMITTED, not_(t.reconstructed)),
                   not_(t.worktree_present))


@lemma("closed-attempt-retains-dirty-worktree")
def closed_attempt_retains_dirty_worktree(s: State, i: int, t: TaskState) -> Any:
    """A worktree left dirty by an attempt that no longer runs is its retained work."""
    return implies(all_of(not_(running(t)), dirty(t)), t.retained == t.worktree)


@lemma("worktree-present-mid-transaction")
def worktree_present_mid_transaction(s: State, i: int, t: TaskState) -> Any:
    """From the submit until the cleanup commits the attempt's worktree exists, and a transaction needs repair only between its WorkSave and its prepared effect."""
    return all_of(
        implies(all_of(t.phase >= Phase.PREPARED, t.phase <= Phase.CLEANUP_PREPARED),
                t.worktree_present),
        implies(t.exit == Exit.NEEDS_REPAIR,
                all_of(t.phase >= Phase.WORK_SAVED, t.phase <= Phase.EFFECT_PREPARED)))


@lemma("worktree-present-before-submit")
def worktree_present_before_submit(s: State, i: int, t: TaskState) -> Any:
    """A running attempt whose transaction has not opened has its worktree."""
    return implies(all_of(running(t), t.phase == Phase.ABSENT), t.worktree_present)


@lemma("review-accepted-means-both-passed")
def review_accepted_means_both_passed(s: State, i: int, t: TaskState) -> Any:
    """An accepted or published valve holds FLIP's and the evaluation's passes of its exact current manifest."""
    return implies(one_of(t.review_phase, (ReviewPhase.ACCEPTED, ReviewPhase.PUBLISHED)),
                   all_of(flip_passed(t), evaluation_passed(t)))


@lemma("held-exit-has-transaction")
def held_exit_has_transaction(s: State, i: int, t: TaskState) -> Any:
    """A transaction held off the main line (repair, aborted, upgrade-blocked) has a transaction past absent."""
    return implies(one_of(t.exit, (Exit.NEEDS_REPAIR, Exit.ABORTED_PRESERVED, Exit.UPGRADE_BLOCKED)),
                   reserved(t))


@lemma("new-generation-has-no-failure")
def new_generation_has_no_failure(s: State, i: int, t: TaskState) -> Any:
    """A generation with no attempt yet runs none and carries no failure: the failure of the attempt a reset closed stays with the old generation."""
    return all_of(t.attempt >= 0,
                  implies(t.attempt == 0, all_of(not_(running(t)), t.failure == Failure.NONE)))


# --- evidence -------------------------------------------------------------------------

@lemma("continuation-needs-compaction")
def continuation_needs_compaction(s: State, i: int, t: TaskState) -> Any:
    """A continuation is recorded only for a recorded compaction occurrence, and an acknowledgement only for a continuation."""
    return all_of(implied_pairs(t, "continuation", "compaction"),
                  implied_pairs(t, "ack-continuation", "continuation"))
