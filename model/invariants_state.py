"""The ``always`` properties of one state, each a named one-sentence predicate over one
task: ``pred(s, i, t)`` holds for every task ``i`` of every reachable state.
"""
from __future__ import annotations

from typing import Any

from .logic import all_of, any_of, count, iff, implies, not_, one_of
from .predicates import committed, deps_current, deps_done, graph_saved, has_receipt, receipt_of, reserved, running
from . import projections
from .projections import WAYS, WAYS_BY_NAME, finished, status
from .kernel import decide_authenticated
from .rules_review import evaluation_passed, flip_passed, published_exactly
from .requests import Owner, Request
from .properties import ALL_RECEIPTS, prop
from .state import State, TaskState
from .vocab import Actor, AttemptState as AS, DecisionKind, Exit, Kind, OwnerSeen, Phase, Receipt, ReviewPhase, Status, Way


# --- always: state ------------------------------------------------------------


@prop("done-iff-graphsave", incidents=(1, 2, 15))
def done_iff_graphsave(s: State, i: int, t: TaskState) -> Any:
    """A task is Done iff a GraphSave of its current attempt exists whose receipts all exist and agree on K, candidate and base."""
    gs = receipt_of(t, Receipt.GRAPH_SAVE)
    agree = all_of(gs.fence == t.fence, t.fence != 0, t.exit == Exit.NONE,
                   *[receipt_of(t, k) == gs for k in ALL_RECEIPTS])
    return iff(status(t) == Status.DONE, agree)


@prop("dependency-needs-done", incidents=(1, 15, 32))
def dependency_needs_done(s: State, i: int, t: TaskState) -> Any:
    """An attempt succeeds only while every dependency is dependency-satisfying Done (it opens only while they are: attempt-opens-on-done-dependencies)."""
    return implies(t.attempt_state == AS.SUCCEEDED, deps_done(s, i))


@prop("legacy-never-satisfies", incidents=(15,))
def legacy_never_satisfies(s: State, i: int, t: TaskState) -> Any:
    """An unproven legacy Done never satisfies a dependency."""
    return implies(t.legacy_done, not_(graph_saved(t)))


@prop("receipts-fenced", incidents=(10,))
def receipts_fenced(s: State, i: int, t: TaskState) -> Any:
    """Every receipt of the current transaction is bound to the current attempt's fence."""
    return all_of(*[one_of(receipt_of(t, k).fence, (0, t.fence)) for k in ALL_RECEIPTS])


@prop("promotion-at-most-once", incidents=(5, 13))
def promotion_at_most_once(s: State, i: int, t: TaskState) -> Any:
    """A task's external effect (promotion or output) happens at most once per generation."""
    return t.promotions <= 1


@prop("promotion-needs-review-of-exact-candidate", incidents=(1, 12))
def promotion_needs_review(s: State, i: int, t: TaskState) -> Any:
    """An effect exists only for a candidate whose validation and review receipts name it exactly."""
    b = receipt_of(t, Receipt.EFFECT)
    return implies(has_receipt(t, Receipt.EFFECT), all_of(
        receipt_of(t, Receipt.REVIEW) == b, receipt_of(t, Receipt.VALIDATION) == b))


# An assumption, not a kernel invariant: the kernel does not stop the writer at quiesce
# (the implementation's quiesce only records the phase); the model's environment lets
# the owner edit only before quiesce or in repair (env.writable), and so does the test
# world. See docs/design-atomic-graph-work-save.md, "Environment assumptions".
@prop("worksave-exact", kind="assume", incidents=(2,))
def worksave_exact(s: State, i: int, t: TaskState) -> Any:
    """After WorkSave and until repair, the worktree holds exactly the saved bytes."""
    return implies(
        all_of(running(t), t.worktree_present, t.phase != Phase.ABSENT,
               t.phase != Phase.PREPARED, t.phase != Phase.QUIESCING, t.exit != Exit.NEEDS_REPAIR),
        t.worktree == t.saved_work)


@prop("candidate-built-on-attempt-base", incidents=(12,))
def candidate_built_on_attempt_base(s: State, i: int, t: TaskState) -> Any:
    """From its WorkSave on, a candidate is bound to the commit its attempt's work is built on (the kernel's fact), never a base the driver names."""
    ws = receipt_of(t, Receipt.WORK_SAVE)
    saved = not_(one_of(t.phase, (Phase.ABSENT, Phase.PREPARED, Phase.QUIESCING)))
    return implies(all_of(saved, not_(t.reconstructed)),
                   all_of(t.base == t.built_on, one_of(ws.base, (0, t.built_on))))


@prop("protected-path-holds", incidents=(29,))
def protected_path_holds(s: State, i: int, t: TaskState) -> Any:
    """A candidate touching a protected path is never sealed: it never reaches validated, an effect or Done, whatever a validator says."""
    return implies(all_of(s.graph.protected(t.candidate), t.candidate != t.base,
                          not_(t.reconstructed)),
                   one_of(t.phase, (Phase.ABSENT, Phase.PREPARED, Phase.QUIESCING,
                                    Phase.WORK_SAVED)))


@prop("one-chat-request-per-opening-key", incidents=(51,))
def one_chat_request_per_opening_key(s: State, i: int, t: TaskState) -> Any:
    """A chat creation request is made at most once under one attempt-opening key: an unanswered one is reconciled, never made again."""
    return t.chat_requests <= 1


@prop("archive-needs-confirmed-digest", incidents=(30,))
def archive_needs_confirmed_digest(s: State, i: int, t: TaskState) -> Any:
    """A task is archived only as a Done task, by the exact digest of its result that an operator's confirmation receipt names."""
    return implies(t.archived != 0, all_of(graph_saved(t), t.archived == t.archive_confirmed,
                                           t.archived == t.candidate))


@prop("exactly-one-way-forward", incidents=(4, 9))
def exactly_one_way_forward(s: State, i: int, t: TaskState) -> Any:
    """Every unfinished task has exactly one way forward."""
    return implies(not_(finished(t)), count([w.enabled(s, i) for w in WAYS]) == 1)


@prop("no-dead-owner-in-progress-without-action", incidents=(4, 11))
def no_dead_owner_without_action(s: State, i: int, t: TaskState) -> Any:
    """A running attempt whose owner is proven dead is never planned as a live owner, and without a completion in flight it has a scheduled action, a hold, or a continuation planned until its deadline."""
    acting = any_of(*[w.enabled(s, i) for w in WAYS
                      if w.way in (Way.SCHEDULED, Way.HOLD) or w.name == "resume-continuation"])
    live = WAYS_BY_NAME["live-owner"].enabled(s, i)
    return implies(all_of(running(t), t.owner_seen == OwnerSeen.DEAD),
                   all_of(not_(live), any_of(reserved(t), acting)))


@prop("retries-within-budget", incidents=(31, 4))
def retries_within_budget(s: State, i: int, t: TaskState) -> Any:
    """A task's automatic retries after failed or lost attempts never exceed its retry budget."""
    return implies(t.retries != 0, t.retries <= s.graph.retry_budget[i])


@prop("retries-per-generation", incidents=(41, 31))
def retries_per_generation(s: State, i: int, t: TaskState) -> Any:
    """A task's automatic retries are counted in its current generation: fewer than the generation's attempts (a new generation's first dispatch retries nothing)."""
    return implies(t.retries != 0, t.retries < t.attempt)


@prop("ready-iff-dispatch-admitted", incidents=(43, 31, 33))
def ready_iff_dispatch_admitted(s: State, i: int, t: TaskState) -> Any:
    """A task is listed ready (and planned for dispatch) iff a daemon dispatch with the current expected attempt would be applied."""
    r = Request(Kind.DISPATCH, Actor.DAEMON, s.graph.tasks[i], expected_attempt=t.attempt,
                owner=Owner(pid=1, birth=1, session=1), mint=1)
    d, _ = decide_authenticated(s, r)                     # the one reducer, as the daemon asks
    return iff(projections.admitted(s, i, t), d.kind == DecisionKind.APPLIED)   # ``ready_tasks``


@prop("no-attempt-while-waiting", incidents=(33,))
def no_attempt_while_waiting(s: State, i: int, t: TaskState) -> Any:
    """A task parked on an external wait, or held because its wait ran out, has no running attempt."""
    return implies(any_of(t.waiting_on != 0, t.wait_expired), not_(running(t)))


@prop("reopen-fences-dependents", incidents=(32,))
def reopen_fences_dependents(s: State, i: int, t: TaskState) -> Any:
    """No task has its effect prepared or committed, or is Done, unless every dependency is Done on the generation its attempt opened on (a reopen never overtakes a dependent's effect, and an attempt opened before a reopen never makes one)."""
    return implies(committed(t), deps_current(s, i, t))


@prop("compaction-occurrences-counted-once", incidents=(7, 8))
def compactions_counted_once(s: State, i: int, t: TaskState) -> Any:
    """Compactions, continuations and acknowledgements equal their distinct recorded occurrences."""
    n = lambda kind: t.evidence.count(lambda e: e[0] == kind)
    return all_of(t.compactions == n("compaction"), t.continuations == n("continuation"),
                  t.acks == n("ack-continuation"), t.acks <= t.continuations,
                  t.provider_failures == n("provider-failure"))


# --- the review valve (WG's SimpleLand theorems) --------------------------------


@prop("review-publication-at-most-once", incidents=(46,))
def review_publication_at_most_once(s: State, i: int, t: TaskState) -> Any:
    """A task's reviewed outputs are published at most once per manifest (WG's theorems reduce_preserves_invariant and reachable_protocol_invariant: publicationCount <= 1)."""
    return all_of(t.publications >= 0, t.publications <= 1)


@prop("review-publication-bound-to-exact-reviews", incidents=(46,))
def review_publication_bound(s: State, i: int, t: TaskState) -> Any:
    """A publication exists only for the current manifest and its output digest, after FLIP and the evaluation both passed that exact manifest (WG's PublicationInvariant, kept by reduce_preserves_invariant)."""
    return implies(any_of(t.publication != 0, t.publications != 0),
                   all_of(published_exactly(t), flip_passed(t), evaluation_passed(t)))


@prop("review-done-is-exact-universal-review", incidents=(46,))
def review_done_is_exact(s: State, i: int, t: TaskState) -> Any:
    """A valve is Done only when FLIP and the evaluation both passed the exact manifest whose outputs were published once (WG's theorem done_implies_exact_universal_review)."""
    return implies(t.review_phase == ReviewPhase.DONE,
                   all_of(flip_passed(t), evaluation_passed(t), published_exactly(t)))


# --- a completion receipted before its transaction (WG's runtime reducer) -------


@prop("receipted-completion-never-done-without-transaction", incidents=(49,))
def receipted_never_done_without_transaction(s: State, i: int, t: TaskState) -> Any:
    """A receipted completion without a transaction is never Done: an attempt whose owner receipted its completion and whose transaction is absent has not succeeded (WG's receipt_no_transaction rank)."""
    return implies(all_of(t.completion_receipt != 0, t.phase == Phase.ABSENT),
                   all_of(t.attempt_state != AS.SUCCEEDED, status(t) != Status.DONE))


@prop("receipted-completion-waits-or-resumes", incidents=(49,))
def receipted_waits_or_resumes(s: State, i: int, t: TaskState) -> Any:
    """A receipted completion without a transaction is planned as WG's reducer ranks it: its handoff is awaited while its owner may be alive (once the attempt's chat request is reconciled), its same session resumed while its proven-dead owner's window is open, and it is never driven as a transaction nor dispatched again."""
    on = lambda name: WAYS_BY_NAME[name].enabled(s, i)
    pending = all_of(running(t), not_(reserved(t)), t.exit == Exit.NONE, not_(t.legacy_done),
                     t.completion_receipt != 0)
    may_live = one_of(t.owner_seen, (OwnerSeen.UNVERIFIED, OwnerSeen.LIVE))
    window = all_of(t.owner_seen == OwnerSeen.DEAD, not_(t.reopening),
                    projections._continuation_planned(s, t))
    handoff = any_of(on("await-handoff"), on("reconcile-chat-request"))
    return implies(pending, all_of(implies(may_live, handoff),
                                   implies(window, on("resume-continuation")),
                                   not_(on("drive-transaction")), not_(on("dispatch"))))
