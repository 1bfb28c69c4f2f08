"""Every transition: its guard (a named rejection) and its update.

The driver checks the frame condition (``TOUCHES``) and every invariant after
each step, so each ``applied`` below also proves the transition touched only
the fields it declares.
"""
from __future__ import annotations

import pytest

from wgk.model.env import EnvKind
from wgk.model.requests import Capability, Request
from wgk.model.rules import TOUCHES
from wgk.model.state import Graph
from wgk.model.vocab import (
    Actor as A, AttemptState as AS, Disposition, Exit, Kind as K, OwnerSeen, Phase, Reason,
    Receipt, Verdict,
)

from conftest import BASE, WORK, chain, complete, dispatch, owner, to_phase

EXERCISED: set[K] = set()


def ok(d, kind, actor, task="a", **kw):
    dec = d.send(kind, actor, task, **kw)
    assert dec.label in ("applied", "evidence-only"), (kind.label, dec.label)
    EXERCISED.add(kind)
    return dec


def rejects(d, kind, actor, code, task="a", **kw):
    dec = d.send(kind, actor, task, **kw)
    assert dec.label == f"rejected:{code}", (kind.label, dec.label)
    return dec


# --- generic checks ------------------------------------------------------------

def test_not_authorized_unknown_task_and_missing_capability(one):
    rejects(one, K.DISPATCH, A.WORKER, "not-authorized", owner=owner())
    rejects(one, K.SAVE_GRAPH, A.READER, "not-authorized")
    rejects(one, K.DISPATCH, A.DAEMON, "unknown-task", task="zz", owner=owner())
    rejects(one, K.HEARTBEAT, A.WORKER, "unknown-attempt", evidence="h1")
    dispatch(one, "a")
    rejects(one, K.HEARTBEAT, A.WORKER, "stale-capability", cap=None, evidence="h1")
    foreign = Capability("other-graph", "a", 0, 1, 1, 1)
    rejects(one, K.HEARTBEAT, A.WORKER, "stale-capability", cap=foreign, evidence="h1")


def test_transaction_cas_and_edge_checks(one):
    dispatch(one, "a")
    rejects(one, K.SUBMIT, A.WORKER, "cas-moved", expected_revision=3)
    rejects(one, K.SUBMIT, A.WORKER, "cas-moved", expected_phase=Phase.PREPARED)
    rejects(one, K.QUIESCE, A.WRAPPER, "illegal-phase-edge")
    with pytest.raises(ValueError):
        Request(K.SUBMIT, A.WORKER, "a")        # a transaction edge must carry its CAS


def test_idempotency_conflict_same_key_different_bytes(one):
    r1 = one.request(K.DISPATCH, A.DAEMON, "a", owner=owner(1), key="k")
    r2 = one.request(K.DISPATCH, A.DAEMON, "a", owner=owner(2), key="k")
    assert one.apply(r1).label == "applied"
    assert one.apply(r2).label == "rejected:idempotency-conflict"
    assert one.task("a").owner_pid == owner(1).pid


# --- admission and attempts ----------------------------------------------------

def test_assign_then_dispatch():
    d = __import__("wgk.conformance.check.driver", fromlist=["Driver"]).Driver(
        Graph.build(["a"], graph_id="g", requires_assignment=["a"]))
    rejects(d, K.DISPATCH, A.DAEMON, "assignment-required", owner=owner())
    assert ok(d, K.ASSIGN, A.DAEMON).label == "applied"
    assert d.task("a").assigned
    assert ok(d, K.ASSIGN, A.DAEMON).label == "evidence-only"
    assert ok(d, K.DISPATCH, A.DAEMON, owner=owner()).label == "applied"


def test_dispatch_update(one):
    ok(one, K.DISPATCH, A.DAEMON, owner=owner(3))
    t = one.task("a")
    assert (t.attempt, t.fence, t.lease_epoch, t.attempt_state) == (1, 1, 1, AS.RUNNING)
    assert (t.owner_pid, t.owner_birth, t.proc_birth, t.session) == \
        (owner(3).pid, owner(3).birth, owner(3).birth, 3)
    assert t.worktree_lease and t.session_lease and not t.finish_lease
    assert (t.worktree, t.origin, t.worktree_present, t.phase) == (BASE, BASE, True, Phase.ABSENT)
    rejects(one, K.DISPATCH, A.DAEMON, "attempt-live", owner=owner(4))


def test_dispatch_import_guards(one):
    dispatch(one, "a")
    one.env(EnvKind.EDIT, "a", content=WORK)
    ok(one, K.FAIL, A.WORKER, evidence="boom")
    assert one.task("a").retained == WORK
    rejects(one, K.DISPATCH, A.DAEMON, "candidate-mismatch", owner=owner(2), imports=99)
    ok(one, K.DISPATCH, A.DAEMON, owner=owner(2), imports=WORK)
    t = one.task("a")
    assert (t.imported, t.worktree, t.origin, t.attempt) == (WORK, WORK, WORK, 2)


def test_dispatch_import_needs_retained_work(one):
    rejects(one, K.DISPATCH, A.DAEMON, "nothing-retained", owner=owner(), imports=5)


def test_retry_closes_stuck_attempt_and_opens_new(one):
    dispatch(one, "a")
    rejects(one, K.RETRY, A.OPERATOR, "attempt-live", owner=owner(2))
    one.env(EnvKind.EDIT, "a", content=WORK)
    one.env(EnvKind.OWNER_DIES, "a")
    ok(one, K.PROBE_OWNER, A.DAEMON, evidence="p")
    ok(one, K.RETRY, A.OPERATOR, owner=owner(2), imports=WORK)
    t = one.task("a")
    assert (t.attempt, t.fence, t.retained, t.imported, t.owner_pid) == (2, 2, WORK, WORK, owner(2).pid)


def test_resume_update_and_guards(one):
    dispatch(one, "a")
    rejects(one, K.RESUME, A.WRAPPER, "owner-not-proven-dead", owner=owner(1, 2))
    one.env(EnvKind.OWNER_DIES, "a")
    ok(one, K.PROBE_OWNER, A.DAEMON, evidence="p")
    rejects(one, K.RESUME, A.WRAPPER, "continuation-unproven", owner=owner(1, 1))
    ok(one, K.RESUME, A.WRAPPER, owner=owner(1, 2))
    t = one.task("a")
    assert (t.owner_birth, t.proc_birth, t.owner_seen) == (owner(1, 2).birth, owner(1, 2).birth,
                                                           OwnerSeen.UNVERIFIED)



def _receipt_plan(d, task="a"):
    from wgk.model.projections import plan
    p = plan(d.state, d.state.graph.index[task])
    return (p.way.label, p.action.label)


def test_receipt_completion_before_its_transaction(one):
    """WG's exited-worker cases: a completion receipted on its own is not a transaction; a live
    owner's handoff is awaited, a proven-dead owner's session resumed, never Done without it."""
    dispatch(one, "a")
    one.env(EnvKind.EDIT, "a", content=WORK)
    rejects(one, K.RECEIPT_COMPLETION, A.WRAPPER, "candidate-mismatch", candidate=WORK + 1)
    ok(one, K.RECEIPT_COMPLETION, A.WRAPPER, candidate=WORK)
    t = one.task("a")
    assert (t.completion_receipt, t.phase, t.attempt_state) == (WORK, Phase.ABSENT, AS.RUNNING)
    assert _receipt_plan(one) == ("live-owner", "await-handoff")
    rejects(one, K.RECEIPT_COMPLETION, A.WRAPPER, "terminal-already", candidate=WORK, key="again")
    one.env(EnvKind.OWNER_DIES, "a")
    ok(one, K.PROBE_OWNER, A.DAEMON, evidence="p")
    assert _receipt_plan(one) == ("wait", "resume")
    ok(one, K.RESUME, A.WRAPPER, owner=owner(1, 2))
    assert one.task("a").completion_receipt == WORK
    assert _receipt_plan(one) == ("live-owner", "await-handoff")
    to_phase(one, "a", K.SAVE_GRAPH)
    t = one.task("a")
    assert (t.completion_receipt, t.attempt_state, t.saved_work) == (WORK, AS.SUCCEEDED, WORK)


def test_receipt_completion_refused_once_the_transaction_is_open(one):
    dispatch(one, "a")
    one.env(EnvKind.EDIT, "a", content=WORK)
    to_phase(one, "a", K.SUBMIT)
    rejects(one, K.RECEIPT_COMPLETION, A.WRAPPER, "illegal-phase-edge", candidate=WORK)
    rejects(one, K.RECEIPT_COMPLETION, A.VALIDATOR, "not-authorized", candidate=WORK)


def test_receipt_of_a_dead_owner_past_its_window_is_declared_lost_and_cleared_by_a_new_attempt(one):
    dispatch(one, "a")
    one.env(EnvKind.EDIT, "a", content=WORK)
    ok(one, K.RECEIPT_COMPLETION, A.WRAPPER, candidate=WORK)
    one.env(EnvKind.OWNER_DIES, "a")
    ok(one, K.PROBE_OWNER, A.DAEMON, evidence="p")
    one.env(EnvKind.TICK)
    assert _receipt_plan(one) == ("scheduled", "declare-lost")
    ok(one, K.DECLARE_LOST, A.DAEMON)
    assert (one.task("a").attempt_state, one.task("a").completion_receipt) == (AS.LOST, WORK)
    ok(one, K.DISPATCH, A.DAEMON, owner=owner(2), expected_attempt=1)
    assert one.task("a").completion_receipt == 0

# --- evidence ------------------------------------------------------------------

def test_heartbeat_and_contention_are_evidence_only(one):
    dispatch(one, "a")
    assert ok(one, K.HEARTBEAT, A.WORKER, evidence="h1").label == "evidence-only"
    assert ("heartbeat", "h1") in one.task("a").evidence
    assert ok(one, K.OWNERSHIP_CONTENTION, A.WORKER, evidence="foreign").label == "evidence-only"
    assert one.task("a").attempt_state == AS.RUNNING


def test_heartbeat_timeout_and_eof_raise_suspicion_only(one):
    dispatch(one, "a")
    ok(one, K.HEARTBEAT_TIMEOUT, A.DAEMON, evidence="hb")
    assert one.task("a").owner_seen == OwnerSeen.SUSPECT
    ok(one, K.OBSERVE_EOF, A.WRAPPER, evidence="eof")
    assert one.task("a").attempt_state == AS.RUNNING


def test_probe_owner_live_dead_and_after_close(one):
    dispatch(one, "a")
    assert ok(one, K.PROBE_OWNER, A.PROCESS_OBSERVER, evidence="p1").label == "evidence-only"
    assert one.task("a").owner_seen == OwnerSeen.LIVE
    one.env(EnvKind.OWNER_DIES, "a")
    assert ok(one, K.PROBE_OWNER, A.PROCESS_OBSERVER, evidence="p2").label == "applied"
    assert (one.task("a").owner_seen, one.task("a").deadline) == (OwnerSeen.DEAD, 1)
    assert ok(one, K.PROBE_OWNER, A.PROCESS_OBSERVER, evidence="p3").label == "evidence-only"


def test_compaction_ack_provider_failure_message_log(one):
    dispatch(one, "a")
    ok(one, K.COMPACTION, A.WRAPPER, evidence="c1")
    ok(one, K.ACK_CONTINUATION, A.WRAPPER, evidence="c1")
    assert ok(one, K.ACK_CONTINUATION, A.WRAPPER, evidence="c1").label == "evidence-only"
    ok(one, K.PROVIDER_FAILURE, A.WRAPPER, evidence="f1")
    ok(one, K.MESSAGE, A.OPERATOR, evidence="m1")
    ok(one, K.LOG, A.WORKER)
    t = one.task("a")
    assert (t.compactions, t.continuations, t.acks, t.provider_failures, t.messages, t.logs) == \
        (1, 1, 1, 1, 1, 1)


def test_log_after_close_is_terminal_already(one):
    dispatch(one, "a")
    ok(one, K.FAIL, A.WORKER, evidence="x")
    rejects(one, K.LOG, A.WORKER, "terminal-already")


def test_fail_then_declare_lost_guards(one):
    dispatch(one, "a")
    rejects(one, K.DECLARE_LOST, A.DAEMON, "owner-not-proven-dead")
    ok(one, K.FAIL, A.WRAPPER, evidence="exit")
    assert one.task("a").attempt_state == AS.FAILED
    assert one.task("a").owner_pid == 0 and not one.task("a").worktree_lease
    rejects(one, K.DECLARE_LOST, A.DAEMON, "terminal-already")


def test_declare_lost_update(one):
    dispatch(one, "a")
    one.env(EnvKind.OWNER_DIES, "a")
    ok(one, K.PROBE_OWNER, A.DAEMON, evidence="p")
    ok(one, K.DECLARE_LOST, A.DAEMON)
    t = one.task("a")
    assert (t.attempt_state, t.session_lease, t.owner_seen) == (AS.LOST, False, OwnerSeen.UNVERIFIED)


def test_fail_during_completion_is_evidence_only(one):
    dispatch(one, "a")
    to_phase(one, "a", K.SUBMIT)
    assert ok(one, K.FAIL, A.WORKER, evidence="late").label == "evidence-only"
    assert one.task("a").attempt_state == AS.RUNNING


def test_declare_lost_refused_when_completion_reserved(one):
    dispatch(one, "a")
    to_phase(one, "a", K.SUBMIT)
    one.env(EnvKind.OWNER_DIES, "a")
    ok(one, K.PROBE_OWNER, A.DAEMON, evidence="p")
    rejects(one, K.DECLARE_LOST, A.DAEMON, "terminal-already")


# --- the SaveTransaction ---------------------------------------------------------

@pytest.mark.parametrize("last", [K.SUBMIT, K.QUIESCE, K.SAVE_WORK, K.SEAL_CANDIDATE, K.VALIDATE,
                                  K.ACCEPT, K.RECORD_DISPOSITION, K.PREPARE_EFFECT,
                                  K.COMMIT_EFFECT, K.PREPARE_CLEANUP, K.COMMIT_CLEANUP,
                                  K.SAVE_GRAPH])
def test_main_line_edge_update(one, last):
    dispatch(one, "a")
    to_phase(one, "a", last)
    EXERCISED.add(last)
    t = one.task("a")
    expected = {K.SUBMIT: Phase.PREPARED, K.QUIESCE: Phase.QUIESCING, K.SAVE_WORK: Phase.WORK_SAVED,
                K.SEAL_CANDIDATE: Phase.CANDIDATE_SEALED, K.VALIDATE: Phase.VALIDATED,
                K.ACCEPT: Phase.ACCEPTED, K.RECORD_DISPOSITION: Phase.DISPOSITION_RECORDED,
                K.PREPARE_EFFECT: Phase.EFFECT_PREPARED, K.COMMIT_EFFECT: Phase.EFFECT_COMMITTED,
                K.PREPARE_CLEANUP: Phase.CLEANUP_PREPARED,
                K.COMMIT_CLEANUP: Phase.CLEANUP_COMMITTED, K.SAVE_GRAPH: Phase.GRAPH_SAVED}[last]
    edges = int(expected) - (1 if expected >= Phase.ACCEPTED else 0)   # no review: one edge fewer
    assert t.phase == expected and t.revision == edges
    receipts = {K.SAVE_WORK: Receipt.WORK_SAVE, K.SEAL_CANDIDATE: Receipt.CANDIDATE,
                K.VALIDATE: Receipt.VALIDATION, K.ACCEPT: Receipt.REVIEW,
                K.RECORD_DISPOSITION: Receipt.DISPOSITION, K.COMMIT_EFFECT: Receipt.EFFECT,
                K.COMMIT_CLEANUP: Receipt.CLEANUP, K.SAVE_GRAPH: Receipt.GRAPH_SAVE}
    if last in receipts:
        b = t.receipts[receipts[last]]
        assert (b.fence, b.candidate, b.base) == (1, WORK, BASE)
    if last == K.COMMIT_EFFECT:
        assert (one.state.target, t.promotions, t.effect_done) == (WORK, 1, True)
    if last == K.COMMIT_CLEANUP:
        assert not t.worktree_present and not t.worktree_lease
    if last == K.SAVE_GRAPH:
        assert t.attempt_state == AS.SUCCEEDED and not t.session_lease and not t.finish_lease


def test_save_work_must_capture_exact_bytes(one):
    dispatch(one, "a")
    one.env(EnvKind.EDIT, "a", content=WORK)
    to_phase(one, "a", K.QUIESCE)
    rejects(one, K.SAVE_WORK, A.WRAPPER, "candidate-mismatch", candidate=8, base=BASE)


def test_clean_tree_is_saved_too(one):
    dispatch(one, "a")
    to_phase(one, "a", K.SAVE_WORK, work=BASE)
    assert one.task("a").saved_work == BASE


def test_seal_validate_accept_name_the_exact_candidate(one):
    dispatch(one, "a")
    to_phase(one, "a", K.SAVE_WORK)
    rejects(one, K.SEAL_CANDIDATE, A.DAEMON, "candidate-mismatch", candidate=8)
    ok(one, K.SEAL_CANDIDATE, A.DAEMON, candidate=WORK)
    rejects(one, K.VALIDATE, A.VALIDATOR, "candidate-mismatch", candidate=8, verdict=Verdict.PASS)
    ok(one, K.VALIDATE, A.VALIDATOR, candidate=WORK, verdict=Verdict.PASS)
    rejects(one, K.ACCEPT, A.DAEMON, "candidate-mismatch", candidate=8, verdict=Verdict.NOT_REQUIRED)
    rejects(one, K.REQUEST_REVIEW, A.DAEMON, "illegal-phase-edge")


def test_review_required_policy():
    d = chain("a", review=("a",))
    dispatch(d, "a")
    to_phase(d, "a", K.VALIDATE)
    rejects(d, K.ACCEPT, A.DAEMON, "review-required", candidate=WORK, verdict=Verdict.NOT_REQUIRED)
    ok(d, K.REQUEST_REVIEW, A.DAEMON)
    rejects(d, K.ACCEPT, A.EVALUATOR, "not-authorized", candidate=WORK, verdict=Verdict.NOT_REQUIRED)
    ok(d, K.ACCEPT, A.EVALUATOR, candidate=WORK, verdict=Verdict.FAIL)
    t = d.task("a")
    assert (t.exit, t.reason) == (Exit.NEEDS_REPAIR, Reason.REVIEW_FAILED)


def test_record_disposition_takes_finish_lease(one):
    dispatch(one, "a")
    to_phase(one, "a", K.ACCEPT)
    rejects(one, K.RECORD_DISPOSITION, A.WRAPPER, "illegal-phase-edge", disposition=Disposition.NONE)
    ok(one, K.RECORD_DISPOSITION, A.WRAPPER, disposition=Disposition.DELIVER)
    assert one.task("a").finish_lease and one.task("a").disposition == Disposition.DELIVER


def test_deliver_effect_does_not_move_target(one):
    dispatch(one, "a")
    to_phase(one, "a", K.COMMIT_EFFECT, disposition=Disposition.REPORT)
    assert one.state.target == BASE and one.task("a").promotions == 1


def test_commit_effect_guards(one):
    dispatch(one, "a")
    to_phase(one, "a", K.PREPARE_EFFECT)
    rejects(one, K.COMMIT_EFFECT, A.PROMOTER, "candidate-mismatch", candidate=8, base=BASE)
    rejects(one, K.COMMIT_EFFECT, A.PROMOTER, "candidate-mismatch", candidate=WORK, base=3)
    rejects(one, K.MARK_REPAIR, A.DAEMON, "illegal-phase-edge")


def test_commit_effect_re_observes_an_effect_that_already_happened(one):
    dispatch(one, "a")
    to_phase(one, "a", K.PREPARE_EFFECT)
    s = one.state
    i = s.graph.index["a"]
    # the promoter moved the ref, then crashed before the kernel recorded it
    from dataclasses import replace
    happened = s.put(i, replace(s.tasks[i], effect_done=True, promotions=1)).put_target(WORK)
    one.state = happened
    ok(one, K.COMMIT_EFFECT, A.PROMOTER, candidate=WORK, base=BASE)
    assert one.task("a").promotions == 1 and one.state.target == WORK


def test_commit_cleanup_update(one):
    dispatch(one, "a")
    to_phase(one, "a", K.PREPARE_CLEANUP)
    ok(one, K.COMMIT_CLEANUP, A.CLEANUP)
    assert not one.task("a").worktree_present


def test_save_graph_needs_every_receipt(one):
    dispatch(one, "a")
    to_phase(one, "a", K.COMMIT_CLEANUP)
    s = one.state
    i = s.graph.index["a"]
    from dataclasses import replace
    t = s.tasks[i]
    one.state = s.put(i, replace(t, receipts=t.with_receipt(Receipt.EFFECT, type(t.receipts[0])())))
    one.check = False                     # the forged state itself breaks invariants
    rejects(one, K.SAVE_GRAPH, A.DAEMON, "evidence-missing")


def test_revise_and_mark_repair(one):
    dispatch(one, "a")
    to_phase(one, "a", K.PREPARE_EFFECT)
    rejects(one, K.REVISE, A.WORKER, "illegal-phase-edge", candidate=WORK, base=BASE)
    one.env(EnvKind.MOVE_TARGET, content=40)
    ok(one, K.MARK_REPAIR, A.DAEMON)
    assert not one.task("a").finish_lease
    rejects(one, K.REVISE, A.WORKER, "candidate-mismatch", candidate=9, base=40)
    one.env(EnvKind.EDIT, "a", content=8)              # written on the old base: no descent
    rejects(one, K.REVISE, A.WORKER, "base-mismatch", candidate=8, base=40)
    one.env(EnvKind.EDIT, "a", content=9, onto=40)     # rebased onto the moved target
    ok(one, K.REVISE, A.WORKER, candidate=9, base=40)
    t = one.task("a")
    assert (t.phase, t.exit, t.candidate, t.base, t.version, t.retained) == \
        (Phase.WORK_SAVED, Exit.NONE, 9, 40, 2, WORK)
    assert t.receipts[Receipt.REVIEW].fence == 0


def test_block_upgrade_and_reconcile(one):
    dispatch(one, "a")
    rejects(one, K.BLOCK_UPGRADE, A.DAEMON, "illegal-phase-edge", reason=Reason.VERSION_SKEW)
    to_phase(one, "a", K.VALIDATE)
    ok(one, K.BLOCK_UPGRADE, A.DAEMON, reason=Reason.VERSION_SKEW)
    assert one.task("a").exit == Exit.UPGRADE_BLOCKED
    rejects(one, K.ACCEPT, A.DAEMON, "cas-moved", candidate=WORK, verdict=Verdict.NOT_REQUIRED,
            expected_phase=Phase.VALIDATED)
    ok(one, K.RECONCILE, A.OPERATOR)
    assert one.task("a").exit == Exit.NONE and one.task("a").phase == Phase.VALIDATED


# --- operator and migration ------------------------------------------------------

def reset_in_order(d, task="a"):
    """WG's reopen order: the reset's intent over a live owner, its exit proven, the reset."""
    ok(d, K.RESET, A.OPERATOR, task=task)
    assert d.task(task).reopening and d.task(task).generation == 0
    d.env(EnvKind.OWNER_DIES, task)
    ok(d, K.PROBE_OWNER, A.DAEMON, task=task, evidence="exit")
    ok(d, K.RESET, A.OPERATOR, task=task)


def test_reset_update_and_guards(one):
    dispatch(one, "a")
    rejects(one, K.RESET, A.OPERATOR, "cas-moved", expected_generation=5)
    one.env(EnvKind.EDIT, "a", content=WORK)
    reset_in_order(one)
    t = one.task("a")
    assert (t.generation, t.attempt, t.attempt_state, t.retained, t.reopening) == \
        (1, 0, AS.SUPERSEDED, WORK, False)


def test_reset_follows_the_reopen_order_over_a_live_owner(one):
    dispatch(one, "a")
    epoch = one.task("a").lease_epoch
    ok(one, K.RESET, A.OPERATOR)                     # the intent: nothing else opens or closes
    t = one.task("a")
    assert (t.reopening, t.generation, t.attempt_state, t.lease_epoch) == \
        (True, 0, AS.RUNNING, epoch + 1)
    rejects(one, K.RESET, A.OPERATOR, "owner-not-proven-dead")
    rejects(one, K.DISPATCH, A.DAEMON, "held", owner=owner(2), expected_attempt=1)
    one.env(EnvKind.EDIT, "a", content=WORK)         # the live owner still writes: kept
    one.env(EnvKind.OWNER_DIES, "a")
    ok(one, K.PROBE_OWNER, A.DAEMON, evidence="exit")
    assert _way(one, "a")[:2] == ("scheduled", "declare-lost")     # the release, never a resume
    ok(one, K.DECLARE_LOST, A.DAEMON)
    assert _way(one, "a") == ("hold", "await-operator", "reopen-pending")
    rejects(one, K.DISPATCH, A.DAEMON, "held", owner=owner(2), expected_attempt=1)
    ok(one, K.RESET, A.OPERATOR)
    t = one.task("a")
    assert (t.reopening, t.generation, t.attempt, t.retained) == (False, 1, 0, WORK)
    rejects(one, K.RESET, A.OPERATOR, "cas-moved", expected_generation=0)


def test_reset_refused_after_done(one):
    complete(one, "a")
    rejects(one, K.RESET, A.OPERATOR, "terminal-already")
    rejects(one, K.ABANDON, A.OPERATOR, "terminal-already")


def test_abandon_preserves_work(one):
    dispatch(one, "a")
    to_phase(one, "a", K.SAVE_WORK)
    ok(one, K.ABANDON, A.OPERATOR)
    t = one.task("a")
    assert (t.abandoned, t.exit, t.attempt_state, t.retained) == \
        (True, Exit.ABORTED_PRESERVED, AS.ABANDONED, WORK)
    rejects(one, K.ABANDON, A.OPERATOR, "terminal-already")


def test_abandon_refused_after_the_effect(one):
    dispatch(one, "a")
    to_phase(one, "a", K.PREPARE_EFFECT)
    rejects(one, K.ABANDON, A.OPERATOR, "terminal-already")


def test_reconcile_needs_a_hold(one):
    rejects(one, K.RECONCILE, A.OPERATOR, "illegal-phase-edge")


def test_reconstruct_and_legacy_done(one):
    rejects(one, K.RECONSTRUCT, A.OPERATOR, "illegal-phase-edge", candidate=BASE, base=BASE)
    ok(one, K.LEGACY_DONE, A.LEGACY_IMPORT, evidence="l1")
    t = one.task("a")
    assert (t.legacy_done, t.exit, t.reason, t.revision) == \
        (True, Exit.NEEDS_RECONCILIATION, Reason.LEGACY_UNPROVEN, 1)
    ok(one, K.RECONSTRUCT, A.OPERATOR, candidate=BASE, base=BASE)
    t = one.task("a")
    assert (t.reconstructed, t.legacy_done, t.attempt_state, t.phase) == \
        (True, False, AS.SUCCEEDED, Phase.GRAPH_SAVED)


def test_legacy_done_on_a_done_task_is_evidence_only(one):
    complete(one, "a")
    assert ok(one, K.LEGACY_DONE, A.LEGACY_IMPORT, evidence="l1").label == "evidence-only"


def test_archive_needs_the_confirmation_of_the_exact_digest(one):
    rejects(one, K.CONFIRM_ARCHIVE, A.OPERATOR, "illegal-phase-edge", candidate=BASE)
    complete(one, "a")
    result = one.task("a").candidate
    rejects(one, K.ARCHIVE, A.CLEANUP, "archive-unconfirmed", candidate=result)
    rejects(one, K.CONFIRM_ARCHIVE, A.OPERATOR, "candidate-mismatch", candidate=BASE)
    ok(one, K.CONFIRM_ARCHIVE, A.OPERATOR, candidate=result)
    rejects(one, K.ARCHIVE, A.CLEANUP, "archive-unconfirmed", candidate=BASE)
    ok(one, K.ARCHIVE, A.DAEMON, candidate=result)
    t = one.task("a")
    assert (t.archive_confirmed, t.archived) == (result, result)
    rejects(one, K.ARCHIVE, A.CLEANUP, "terminal-already", candidate=result)
    rejects(one, K.CONFIRM_ARCHIVE, A.OPERATOR, "terminal-already", candidate=result)


def test_an_external_wait_is_left_only_by_its_own_evidence(one):
    dispatch(one, "a")
    rejects(one, K.PARK, A.OPERATOR, "not-authorized", correlation=1)
    ok(one, K.PARK, A.WORKER, correlation=1, deadline=3)
    t = one.task("a")
    assert (t.attempt_state, t.waiting_on, t.wait_deadline) == (AS.PARKED, 1, 3)
    rejects(one, K.PARK, A.WORKER, "terminal-already", correlation=1)   # its attempt is over
    rejects(one, K.DISPATCH, A.DAEMON, "waiting", owner=owner(2))
    assert ok(one, K.DELIVER, A.DAEMON, correlation=2, evidence="other").label == "evidence-only"
    rejects(one, K.EXPIRE_WAIT, A.DAEMON, "wait-not-due")
    assert one.task("a").waiting_on == 1
    assert ok(one, K.DELIVER, A.OPERATOR, correlation=1, evidence="answer").label == "applied"
    t = one.task("a")
    assert (t.waiting_on, t.wait_deadline, t.wait_expired) == (0, 0, False)
    rejects(one, K.EXPIRE_WAIT, A.DAEMON, "not-waiting")
    dispatch(one, "a", 2)
    assert (one.task("a").attempt, one.task("a").retries) == (2, 0)   # not an automatic retry


def test_an_expired_wait_is_a_named_hold_until_the_operator_retries(one):
    dispatch(one, "a")
    ok(one, K.PARK, A.WORKER, correlation=1, deadline=2)
    one.env(EnvKind.TICK, amount=1)
    rejects(one, K.EXPIRE_WAIT, A.DAEMON, "wait-not-due")
    one.env(EnvKind.TICK, amount=1)
    ok(one, K.EXPIRE_WAIT, A.DAEMON)
    assert one.task("a").wait_expired and one.task("a").waiting_on == 0
    rejects(one, K.DISPATCH, A.DAEMON, "held", owner=owner(2))
    ok(one, K.RETRY, A.OPERATOR, owner=owner(2))
    assert not one.task("a").wait_expired


def test_a_paused_or_early_task_opens_no_attempt_on_any_path(one):
    rejects(one, K.PAUSE, A.DAEMON, "not-authorized")
    assert ok(one, K.PAUSE, A.OPERATOR).label == "applied"
    assert ok(one, K.PAUSE, A.OPERATOR).label == "evidence-only"       # paused again
    assert one.task("a").paused and _way(one, "a") == ("hold", "await-operator", "paused")
    rejects(one, K.DISPATCH, A.DAEMON, "paused", owner=owner(1))
    rejects(one, K.RETRY, A.OPERATOR, "paused", owner=owner(1))
    ok(one, K.UNPAUSE, A.OPERATOR, deadline=2)
    assert (one.task("a").paused, one.task("a").not_before) == (False, 2)
    assert _way(one, "a") == ("wait", "await-not-before", "not-yet-due")
    rejects(one, K.DISPATCH, A.DAEMON, "not-due", owner=owner(1))
    one.env(EnvKind.TICK, amount=1)
    rejects(one, K.RETRY, A.OPERATOR, "not-due", owner=owner(1))
    one.env(EnvKind.TICK, amount=1)
    assert _way(one, "a") == ("runnable", "dispatch", "dispatch")
    dispatch(one, "a")
    ok(one, K.PAUSE, A.OPERATOR)                                         # a running attempt runs on
    assert one.task("a").attempt_state == AS.RUNNING


def test_a_provider_route_breaker_opens_on_its_failure_and_closes_on_a_due_probe(one):
    dispatch(one, "a")
    ok(one, K.PROVIDER_FAILURE, A.DAEMON, evidence="stream")              # no route: no breaker
    assert not one.task("a").route_unavailable
    ok(one, K.PROVIDER_FAILURE, A.DAEMON, evidence="outage", route=3, deadline=2)
    t = one.task("a")
    assert (t.route, t.route_unavailable, t.probe_at, t.provider_failures) == (3, True, 2, 2)
    ok(one, K.FAIL, A.WORKER, evidence="exit")
    assert _way(one, "a") == ("wait", "await-route-probe", "await-route-probe")
    rejects(one, K.DISPATCH, A.DAEMON, "route-unavailable", owner=owner(2))
    rejects(one, K.RETRY, A.OPERATOR, "route-unavailable", owner=owner(2))
    rejects(one, K.PROBE_ROUTE, A.OPERATOR, "not-authorized", succeeded=1)
    rejects(one, K.PROBE_ROUTE, A.DAEMON, "probe-not-due", succeeded=1)
    one.env(EnvKind.TICK, amount=2)
    assert _way(one, "a") == ("runnable", "probe-route", "probe-route")
    ok(one, K.PROBE_ROUTE, A.DAEMON)                                      # failed, no later time
    assert (one.task("a").route_unavailable, one.task("a").probe_at) == (True, 3)
    rejects(one, K.DISPATCH, A.DAEMON, "route-unavailable", owner=owner(2))
    one.env(EnvKind.TICK, amount=1)
    ok(one, K.PROBE_ROUTE, A.DAEMON, succeeded=1)
    assert (one.task("a").route_unavailable, one.task("a").probe_at) == (False, 0)
    rejects(one, K.PROBE_ROUTE, A.DAEMON, "route-available", succeeded=1)
    assert _way(one, "a") == ("runnable", "dispatch", "dispatch")
    ok(one, K.DISPATCH, A.DAEMON, owner=owner(2))


# --- the review valve -------------------------------------------------------------

def _manifest(mid=11, contract=None, main=55, **kw):
    from wgk.model.vocab import Contract
    fields = dict(candidate=mid, requirements=22, output=mid + 22, validation=44, base=main,
                  contract=contract or Contract.LAND, resolvable=1, protected_free=1)
    return {**fields, **kw}


def test_the_review_valve_publishes_only_what_both_reviews_passed(one):
    from wgk.model.vocab import ReviewPhase as RP, ReviewVerdict as RV
    dispatch(one, "a")
    rejects(one, K.SUBMIT_MANIFEST, A.VALIDATOR, "not-authorized", **_manifest())
    rejects(one, K.SUBMIT_MANIFEST, A.WORKER, "manifest-invalid", **_manifest(protected_free=0))
    ok(one, K.SUBMIT_MANIFEST, A.WORKER, **_manifest())
    assert ok(one, K.SUBMIT_MANIFEST, A.WORKER, **_manifest()).label == "evidence-only"
    rejects(one, K.RECORD_EVAL, A.EVALUATOR, "review-not-passed", candidate=11, requirements=22,
            review=RV.PASS)
    rejects(one, K.RECORD_FLIP, A.VALIDATOR, "manifest-mismatch", candidate=11, requirements=23,
            review=RV.PASS)
    ok(one, K.RECORD_FLIP, A.VALIDATOR, candidate=11, requirements=22, review=RV.PASS)
    ok(one, K.RECORD_EVAL, A.EVALUATOR, candidate=11, requirements=22, review=RV.UNAVAILABLE)
    assert one.task("a").review_phase == RP.REVIEW_UNAVAILABLE             # not a rejection
    ok(one, K.RETRY_REVIEW, A.OPERATOR)
    assert (one.task("a").flip, one.task("a").attempt) == (RV.ABSENT, 1)    # the same worker
    ok(one, K.RECORD_FLIP, A.VALIDATOR, candidate=11, requirements=22, review=RV.PASS)
    ok(one, K.RECORD_EVAL, A.EVALUATOR, candidate=11, requirements=22, review=RV.PASS)
    rejects(one, K.PUBLISH, A.PROMOTER, "main-moved", candidate=11, base=56, succeeded=1,
            outputs_match=1)
    rejects(one, K.COMPLETE, A.WORKER, "illegal-phase-edge", candidate=11, resolvable=1)
    ok(one, K.PUBLISH, A.PROMOTER, candidate=11, base=55, succeeded=1, outputs_match=1)
    ok(one, K.COMPLETE, A.WORKER, candidate=11, resolvable=1)
    assert one.task("a").review_phase == RP.DONE
    for kind, actor, kw in ((K.FAIL_REVIEW, A.WORKER, {}), (K.RETRY_REVIEW, A.OPERATOR, {}),
                            (K.SUBMIT_MANIFEST, A.WORKER, _manifest(12))):
        assert ok(one, kind, actor, **kw).label == "evidence-only"          # Done is inert
    assert (one.task("a").manifest, one.task("a").publications) == (11, 1)


def test_a_changed_manifest_invalidates_both_reviews_and_explore_ignores_main(one):
    from wgk.model.vocab import Contract, ReviewVerdict as RV
    dispatch(one, "a")
    ok(one, K.SUBMIT_MANIFEST, A.WORKER, **_manifest(71, Contract.EXPLORE, main=0))
    ok(one, K.RECORD_FLIP, A.VALIDATOR, candidate=71, requirements=22, review=RV.PASS)
    ok(one, K.RECORD_EVAL, A.EVALUATOR, candidate=71, requirements=22, review=RV.PASS)
    ok(one, K.SUBMIT_MANIFEST, A.WORKER, **_manifest(72, Contract.EXPLORE, main=0))
    assert (one.task("a").flip, one.task("a").evaluation) == (RV.ABSENT, RV.ABSENT)
    ok(one, K.RECORD_FLIP, A.VALIDATOR, candidate=72, requirements=22, review=RV.PASS)
    ok(one, K.RECORD_EVAL, A.EVALUATOR, candidate=72, requirements=22, review=RV.PASS)
    ok(one, K.PUBLISH, A.PROMOTER, candidate=72, base=999, succeeded=1, outputs_match=1)
    ok(one, K.FAIL_REVIEW, A.WORKER)                          # after publication: diagnostic only
    assert one.task("a").review_phase.label == "published"
    assert one.state.target == BASE                                # explore never touches main


# --- reopening a Done task -----------------------------------------------------

def _way(d, task):
    from wgk.model.projections import plan
    p = plan(d.state, d.graph.index[task])
    return (p.way.label, p.action.label, p.reason)


def test_reopen_update_and_guards(two):
    rejects(two, K.REOPEN, A.OPERATOR, "illegal-phase-edge")          # not Done
    complete(two, "a")
    rejects(two, K.REOPEN, A.DAEMON, "not-authorized", expected_generation=0)
    rejects(two, K.REOPEN, A.OPERATOR, "cas-moved", expected_generation=5)
    fence = two.task("a").fence
    ok(two, K.REOPEN, A.OPERATOR)
    t = two.task("a")
    assert (t.generation, t.attempt, t.fence, t.attempt_state, t.phase, t.retained,
            t.promotions) == (1, 0, fence + 1, AS.NONE, Phase.ABSENT, WORK, 0)
    assert _way(two, "a") == ("runnable", "dispatch", "dispatch")
    assert _way(two, "b") == ("wait", "await-dependencies", "await-dependencies")
    rejects(two, K.DISPATCH, A.DAEMON, "dependency-not-done", task="b", owner=owner(2))
    rejects(two, K.REOPEN, A.OPERATOR, "illegal-phase-edge")          # open again


def test_reopen_holds_a_running_dependent_until_reset(two):
    complete(two, "a")
    dispatch(two, "b", 2)
    ok(two, K.REOPEN, A.OPERATOR)
    to_phase(two, "b", K.RECORD_DISPOSITION, work=WORK + 1)
    assert _way(two, "b") == ("hold", "await-operator", "dependency-reopened")
    rejects(two, K.PREPARE_EFFECT, A.PROMOTER, "dependency-reopened", task="b")
    reset_in_order(two, "b")                         # the fence: a reset wins over it
    assert two.task("b").attempt_state == AS.SUPERSEDED
    rejects(two, K.DISPATCH, A.DAEMON, "dependency-not-done", task="b", owner=owner(3))


def test_a_dependent_opened_before_the_reopen_stays_fenced_when_it_is_done_again(two):
    complete(two, "a")
    dispatch(two, "b", 2)
    ok(two, K.REOPEN, A.OPERATOR)
    complete(two, "a", 3, work=WORK + 2)
    to_phase(two, "b", K.RECORD_DISPOSITION, work=WORK + 1)
    assert _way(two, "b") == ("hold", "await-operator", "dependency-reopened")
    rejects(two, K.PREPARE_EFFECT, A.PROMOTER, "dependency-reopened", task="b")
    reset_in_order(two, "b")
    dispatch(two, "b", 4)
    to_phase(two, "b", K.SAVE_GRAPH, work=WORK + 3)


def test_reopen_refused_once_a_dependent_made_its_effect_or_is_done(two):
    complete(two, "a")
    dispatch(two, "b", 2)
    to_phase(two, "b", K.PREPARE_EFFECT, work=WORK + 1)
    rejects(two, K.REOPEN, A.OPERATOR, "terminal-already")
    d = chain("a", "b")
    complete(d, "a")
    complete(d, "b", 2, work=WORK + 1)
    rejects(d, K.REOPEN, A.OPERATOR, "terminal-already")
    ok(d, K.REOPEN, A.OPERATOR, task="b")             # the leaf first, then its dependency
    ok(d, K.REOPEN, A.OPERATOR)


def test_an_archived_task_is_not_reopened(one):
    complete(one, "a")
    result = one.task("a").candidate
    ok(one, K.CONFIRM_ARCHIVE, A.OPERATOR, candidate=result)
    ok(one, K.ARCHIVE, A.DAEMON, candidate=result)
    rejects(one, K.REOPEN, A.OPERATOR, "held")


def test_a_chat_request_is_made_once_under_its_opening_key_then_reconciled(one):
    dispatch(one, "a")
    rejects(one, K.REQUEST_CHAT, A.WORKER, "not-authorized")
    rejects(one, K.RECONCILE_CHAT, A.DAEMON, "chat-unrequested")     # nothing to reconcile
    assert _way(one, "a") == ("live-owner", "probe-owner", "live-owner")
    ok(one, K.REQUEST_CHAT, A.DAEMON)
    assert (one.task("a").chat_request, one.task("a").chat_requests) == (1, 1)
    assert _way(one, "a") == ("scheduled", "reconcile-chat", "reconcile-chat-request")
    rejects(one, K.REQUEST_CHAT, A.DAEMON, "chat-requested")         # its answer lost or not
    assert one.task("a").chat_requests == 1
    assert ok(one, K.RECONCILE_CHAT, A.DAEMON).label == "applied"
    assert _way(one, "a") == ("live-owner", "probe-owner", "live-owner")
    assert ok(one, K.RECONCILE_CHAT, A.DAEMON).label == "evidence-only"
    rejects(one, K.REQUEST_CHAT, A.DAEMON, "chat-requested")
    assert one.task("a").chat_requests == 1


def test_the_archive_backlog_proposes_and_the_plan_waits_for_the_confirmation(one):
    from wgk.model.projections import plan
    dispatch(one, "a")
    rejects(one, K.PROPOSE_ARCHIVE, A.DAEMON, "illegal-phase-edge", candidate=WORK)  # not Done
    to_phase(one, "a", K.SAVE_GRAPH)
    result = one.task("a").candidate
    assert plan(one.state, 0) is None                                # Done: nothing planned
    rejects(one, K.PROPOSE_ARCHIVE, A.DAEMON, "candidate-mismatch", candidate=BASE)
    rejects(one, K.PROPOSE_ARCHIVE, A.OPERATOR, "not-authorized", candidate=result)
    assert ok(one, K.PROPOSE_ARCHIVE, A.DAEMON, candidate=result).label == "applied"
    assert _way(one, "a") == ("wait", "await-archive-confirmation", "await-archive-confirmation")
    assert ok(one, K.PROPOSE_ARCHIVE, A.CLEANUP, candidate=result).label == "evidence-only"
    rejects(one, K.ARCHIVE, A.DAEMON, "archive-unconfirmed", candidate=result)   # its own word
    ok(one, K.CONFIRM_ARCHIVE, A.OPERATOR, candidate=result)
    assert plan(one.state, 0) is None                                # confirmed: no wait
    ok(one, K.ARCHIVE, A.CLEANUP, candidate=result)
    rejects(one, K.PROPOSE_ARCHIVE, A.DAEMON, "terminal-already", candidate=result)
    assert plan(one.state, 0) is None


def test_every_kind_is_exercised_and_declares_its_touches():
    """Runs last in this module (pytest keeps file order)."""
    from wgk.model.vocab import Kind
    missing = set(Kind) - EXERCISED
    assert not missing, sorted(k.label for k in missing)
    assert set(TOUCHES) == set(Kind)


def test_only_the_evaluator_gives_a_review_verdict():
    d = chain("a", review=("a",))
    dispatch(d, "a")
    to_phase(d, "a", K.VALIDATE)
    ok(d, K.REQUEST_REVIEW, A.DAEMON)
    rejects(d, K.ACCEPT, A.DAEMON, "not-authorized", candidate=WORK, verdict=Verdict.PASS)
    rejects(d, K.ACCEPT, A.DAEMON, "not-authorized", candidate=WORK, verdict=Verdict.FAIL)
    rejects(d, K.ACCEPT, A.EVALUATOR, "not-authorized", candidate=WORK, verdict=Verdict.NOT_REQUIRED)
    ok(d, K.ACCEPT, A.EVALUATOR, candidate=WORK, verdict=Verdict.PASS)


def test_mark_repair_leaves_the_main_line_once(one):
    dispatch(one, "a")
    to_phase(one, "a", K.PREPARE_EFFECT)
    one.env(EnvKind.MOVE_TARGET, content=40)
    ok(one, K.MARK_REPAIR, A.DAEMON)
    revision = one.task("a").revision
    rejects(one, K.MARK_REPAIR, A.DAEMON, "illegal-phase-edge")
    assert one.task("a").revision == revision


def test_rules_and_touches_are_derived_from_the_declarations():
    from wgk.model.ruleset import RULES, TOUCHES, rule
    from wgk.model.vocab import Kind
    assert set(RULES) == set(TOUCHES) == set(Kind)
    assert TOUCHES[Kind.ASSIGN] == frozenset({"assigned"})
    with pytest.raises(ValueError, match="two rules"):
        rule(Kind.ASSIGN, touches=())(lambda s, i, t, r: None)
    assert RULES[Kind.ASSIGN].__name__ == "assign"
