"""The invariant registry: named predicates, each with a one-sentence docstring.

``always`` properties must hold in every reachable state (scope ``state``) or
for every decided request (scope ``step``: a predicate over the pre-state, the
request, the decision and the post-state). ``sometimes`` properties must be
reachable, so that no check passes because nothing can happen. ``assume``
properties are what the kernel relies on from its environment, not what it
guarantees (assume-guarantee): no environment step is taken that breaks one,
the proofs assume them and show, as assumption frames (never as kernel
invariants), that the model's own steps keep them, and a kernel step that
breaks one is reported under its id. Every id is the one used in
traces, proofs, the implementation's guards and the documents.

The registry and its queries are ``wgk.model.properties``; the ``always`` properties are
declared in ``wgk.model.invariants_state`` (one state) and ``wgk.model.invariants_step``
(one decided request); the ``sometimes`` properties and the liveness properties
(``assume`` fairness and ``eventually``, ``wgk.model.liveness``) here. This module is the
one callers import from.
"""
from __future__ import annotations

from . import liveness as _liveness
from .logic import all_of, not_
from .predicates import graph_saved, running
from .projections import WAYS_BY_NAME as _WAYS
from .properties import (  # noqa: F401  (re-exported: callers import them from here)
    ALL_RECEIPTS, REGISTRY, Property, always, any_task, assumptions, each_task, eventually,
    fairness, outside_assumptions, pairs, prop, sometimes, step_violations, terminal,
    violations,
)
from .vocab import AttemptState as AS, Exit, Failure, OwnerSeen, Phase, Reason

# The property modules register their properties in the order imported here (the order
# of ``REGISTRY``): the state invariants, then the step invariants.
from .invariants_state import (  # noqa: F401
    done_iff_graphsave, dependency_needs_done, legacy_never_satisfies, receipts_fenced,
    promotion_at_most_once, promotion_needs_review, worksave_exact,
    candidate_built_on_attempt_base, protected_path_holds, archive_needs_confirmed_digest,
    exactly_one_way_forward, no_dead_owner_without_action, retries_within_budget,
    no_attempt_while_waiting, compactions_counted_once, reopen_fences_dependents,
    review_publication_at_most_once, review_publication_bound, review_done_is_exact,
    receipted_never_done_without_transaction, receipted_waits_or_resumes,
)
from .invariants_step import (  # noqa: F401
    attempt_fencing, single_live_owner, first_terminal_wins, terminal_never_resurrects,
    evidence_cannot_terminalize, liveness_needs_exact_birth, cas_base_exact,
    target_history_grows, moved_target_needs_repair, no_phase_skip, retained_work_never_erased,
    retry_needs_proof, idempotent_replay, idempotency_conflict_holds, role_held,
    keys_per_principal, token_required, continuation_needs_token,
    semantic_failure_never_auto_retried, wait_left_only_by_its_evidence,
    rejection_changes_nothing, unchanged_outside_touches,
    attempt_opens_on_done_dependencies,
    review_changed_manifest_invalidates, review_stale_main_cannot_land,
    review_nonpassing_eval_cannot_publish, review_terminal_success_inert,
    review_no_event_replaces_source, review_one_source_owner,
    review_unavailable_is_not_rejection, review_explore_publishes_without_git,
    completion_receipt_kept,
)


# --- sometimes ----------------------------------------------------------------


SOMETIMES = {
    "done-reached": ("some task reaches Done through a GraphSave",
                     lambda s, i, t: all_of(graph_saved(t), not_(t.reconstructed))),
    "dependent-done-reached": ("a task with dependencies reaches Done",
                               lambda s, i, t: all_of(graph_saved(t), bool(s.graph.deps[i]))),
    "needs-repair-reached": ("a transaction leaves the main line for repair",
                             lambda s, i, t: t.exit == Exit.NEEDS_REPAIR),
    "target-moved-reached": ("a moved target sends a land to repair",
                             lambda s, i, t: t.reason == Reason.TARGET_MOVED),
    "protected-path-held": ("a candidate touching a protected path is held in repair",
                            lambda s, i, t: t.reason == Reason.PROTECTED_PATH),
    "archived-reached": ("a Done task is archived after the confirmation of its digest",
                         lambda s, i, t: t.archived != 0),
    "retry-reached": ("a second attempt runs in one generation",
                      lambda s, i, t: all_of(t.attempt >= 2, running(t))),
    "retry-budget-spent-reached": ("a task's automatic retries are used up: a named hold",
                                   lambda s, i, t: all_of(t.retries >= 1, not_(running(t)),
                                                          t.retries >= s.graph.retry_budget[i])),
    "repair-required-reached": ("a semantic failure waits for a repair",
                                lambda s, i, t: all_of(t.attempt_state == AS.FAILED,
                                                       t.failure == Failure.SEMANTIC)),
    "wait-released-reached": ("an external wait is released by the evidence it names",
                              lambda s, i, t: all_of(t.attempt_state == AS.PARKED,
                                                     t.waiting_on == 0, not_(t.wait_expired))),
    "wait-expired-reached": ("an external wait runs out at its deadline: a named hold",
                             lambda s, i, t: t.wait_expired),
    "resume-reached": ("a same-attempt continuation runs with a new process epoch",
                       lambda s, i, t: all_of(t.wrapper_epoch >= 2, running(t))),
    "lost-reached": ("an attempt with a proven-dead owner is declared lost",
                     lambda s, i, t: t.attempt_state == AS.LOST),
    "pid-reuse-detected": ("a reused pid is recognised as the owner's death",
                           lambda s, i, t: all_of(t.owner_seen == OwnerSeen.DEAD, t.proc_birth != 0,
                                                  t.proc_birth != t.owner_birth)),
    "needs-reconciliation-reached": ("a legacy Done is held for reconciliation",
                                     lambda s, i, t: t.exit == Exit.NEEDS_RECONCILIATION),
    "reconstructed-reached": ("a legacy Done is proven and reconstructed",
                              lambda s, i, t: t.reconstructed),
    "upgrade-blocked-reached": ("version skew holds a transaction",
                                lambda s, i, t: t.exit == Exit.UPGRADE_BLOCKED),
    "aborted-preserved-reached": ("an abandoned transaction keeps its work",
                                  lambda s, i, t: t.exit == Exit.ABORTED_PRESERVED),
    "reset-reached": ("a reset opens a new generation",
                      lambda s, i, t: t.generation >= 1),
    "import-reached": ("a new attempt imports retained work",
                       lambda s, i, t: t.imported != 0),
    "dependent-reruns-after-reopen": (
        "a dependent runs on the new generation of a reopened dependency that is Done again",
        lambda s, i, t: all_of(running(t), t.deps_generation >= 1)),
    "dependency-reopened-held": (
        "a running dependent's effect is held because its dependency was reopened",
        lambda s, i, t: _WAYS["dependency-reopened"].enabled(s, i)),
    "compaction-continued": ("a compaction earns a continuation that is acknowledged",
                             lambda s, i, t: t.acks >= 1),
    "receipt-resumed-reached": (
        "a completion receipted before its transaction is kept into its proven-dead owner's "
        "resumed session, no transaction open",
        lambda s, i, t: all_of(running(t), t.completion_receipt != 0, t.wrapper_epoch >= 2,
                               t.phase == Phase.ABSENT)),
}

for _id, (_doc, _pred) in SOMETIMES.items():
    REGISTRY[_id] = Property(_id, "sometimes", "state", _doc[0].upper() + _doc[1:] + ".", _pred)


# --- assume and eventually (wgk.model.liveness) -----------------------------------

LIVENESS = {
    "daemon-takes-due-actions": (
        "assume", "fairness", _liveness.due, (4,),
        "A task whose one way forward is runnable or a scheduled convergence action is not "
        "left so forever without the daemon taking that action."),
    "live-owner-eventually-ends": (
        "assume", "fairness", _liveness.owner_working, (6,),
        "A running attempt whose exact owner is alive and has not submitted eventually "
        "submits, fails or loses its owner."),
    "eventually-settles": (
        "eventually", "state", _liveness.settled, (4,),
        "Every task eventually reaches Done, an external wait or a named hold."),
    "convergence-makes-progress": (
        "eventually", "step", _liveness.convergence_step, (4, 5),
        "Convergence has no cycle without progress: due actions alone never lead back to "
        "a state they started from."),
}

for _id, (_kind, _scope, _pred, _inc, _doc) in LIVENESS.items():
    REGISTRY[_id] = Property(_id, _kind, _scope, _doc, _pred, _inc)
