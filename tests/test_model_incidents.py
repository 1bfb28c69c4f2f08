"""Each incident of BRIEF §2, replayed by hand through the model.

The driver checks every invariant and every transition's frame condition after
each step, so a test here fails on a wrong decision *or* a broken invariant.
"""
from __future__ import annotations

from wgk.model.env import EnvKind
from wgk.model.projections import plan, status
from wgk.model.requests import Capability
from wgk.model.vocab import (
    Action, Actor as A, AttemptState as AS, Exit, Kind as K, OwnerSeen, Phase, Reason, Status,
    Verdict, Way,
)

from conftest import BASE, WORK, chain, complete, dispatch, owner, to_phase


def st(d, task):
    return Status(status(d.task(task)))


def test_01_false_done_never_satisfies_a_dependent(two):
    dispatch(two, "a")
    to_phase(two, "a", K.SEAL_CANDIDATE)
    assert two.send(K.VALIDATE, A.VALIDATOR, "a", candidate=WORK, verdict=Verdict.FAIL).label == "applied"
    assert st(two, "a") == Status.NEEDS_REPAIR
    # a legacy/operator "Done" arrives anyway: it is kept as evidence, never blessed
    assert two.send(K.LEGACY_DONE, A.LEGACY_IMPORT, "a", evidence="legacy:a").label == "evidence-only"
    assert ("legacy-done", "legacy:a") in two.task("a").evidence
    assert st(two, "a") == Status.NEEDS_REPAIR
    # no promotion or cleanup receipt exists: GraphSave is impossible from here
    assert two.send(K.SAVE_GRAPH, A.DAEMON, "a").label == "rejected:illegal-phase-edge"
    # and the dependent is not dispatched
    assert dispatch(two, "b").label == "rejected:dependency-not-done"
    # the operator cannot write Done: there is no such request, and status has no setter
    assert not hasattr(two.task("a"), "status")


def test_02_broker_without_worktree_context_cannot_terminalize(one):
    dispatch(one, "a")
    one.env(EnvKind.EDIT, "a", content=WORK)
    t = one.task("a")
    no_lease = Capability("g", "a", t.generation, t.attempt, t.fence, lease_epoch=0)
    assert one.send(K.SUBMIT, A.BROKER, "a", cap=no_lease).label == "rejected:stale-capability"
    assert one.task("a").attempt_state == AS.RUNNING
    assert one.task("a").phase == Phase.ABSENT
    # with its exact worktree context the broker's handoff is an ordinary submit
    assert one.send(K.SUBMIT, A.BROKER, "a").label == "applied"
    assert one.task("a").worktree == WORK


def test_03_reset_then_new_session_claiming_continuation_is_refused(one):
    dispatch(one, "a")
    # continuation without proven death of the old process
    new = owner(1, epoch=2)
    assert one.send(K.RESUME, A.WRAPPER, "a", owner=new).label == "rejected:owner-not-proven-dead"
    one.env(EnvKind.OWNER_DIES, "a")
    assert one.send(K.PROBE_OWNER, A.PROCESS_OBSERVER, "a", evidence="probe:1").label == "applied"
    # a different session is a new attempt, never a continuation
    other_session = owner(2, epoch=2)
    assert one.send(K.RESUME, A.WRAPPER, "a", owner=other_session).label == \
        "rejected:continuation-unproven"
    # after a reset the old K is stale even with the right session
    old = one.request(K.RESUME, A.WRAPPER, "a", owner=new)
    assert one.send(K.RESET, A.OPERATOR, "a").label == "applied"
    assert one.apply(old).label == "rejected:stale-capability"
    assert one.task("a").generation == 1


def test_03b_proven_continuation_keeps_k(one):
    dispatch(one, "a")
    k_before = (one.task("a").fence, one.task("a").attempt, one.task("a").lease_epoch)
    one.env(EnvKind.OWNER_DIES, "a")
    one.send(K.PROBE_OWNER, A.PROCESS_OBSERVER, "a", evidence="probe:1")
    assert one.send(K.RESUME, A.WRAPPER, "a", owner=owner(1, epoch=2)).label == "applied"
    t = one.task("a")
    assert (t.fence, t.attempt, t.lease_epoch) == k_before
    assert (t.wrapper_epoch, t.child_epoch) == (2, 2)


def test_04_dead_worker_with_clean_worktree_converges(one):
    dispatch(one, "a")
    one.env(EnvKind.OWNER_DIES, "a")
    # before anyone probes, the planner still has exactly one way: the live-owner re-probe
    assert plan(one.state, 0).way == Way.LIVE_OWNER
    assert one.send(K.PROBE_OWNER, A.DAEMON, "a", evidence="probe:1").label == "applied"
    # proven dead: the same session may continue until the deadline (the wrapper's resume)
    p = plan(one.state, 0)
    assert (p.way, p.action, p.deadline) == (Way.WAIT, Action.RESUME, 1)
    one.env(EnvKind.TICK, amount=1)
    p = plan(one.state, 0)
    assert (p.way, p.action) == (Way.SCHEDULED, Action.DECLARE_LOST)
    assert one.send(K.DECLARE_LOST, A.DAEMON, "a").label == "applied"
    assert one.task("a").attempt_state == AS.LOST
    p = plan(one.state, 0)
    assert (p.way, p.action) == (Way.RUNNABLE, Action.DISPATCH)
    assert dispatch(one, "a", 2).label == "applied"


def test_05_lost_response_retried_with_same_or_fresh_key(one):
    dispatch(one, "a")
    one.env(EnvKind.EDIT, "a", content=WORK)
    submit = one.request(K.SUBMIT, A.WORKER, "a")
    assert one.apply(submit).label == "applied"      # committed; response lost
    again = one.apply(submit)                        # same key, same bytes
    assert again.label == "duplicate" and again.original_kind == 1
    assert one.task("a").revision == 1
    fresh = one.request(K.SUBMIT, A.WORKER, "a", expected_phase=Phase.ABSENT, expected_revision=0)
    assert one.apply(fresh).label == "rejected:cas-moved"   # a fresh key cannot apply twice
    assert one.task("a").revision == 1


def test_06_live_owner_with_missing_heartbeat_stays_running(one):
    dispatch(one, "a")
    assert one.send(K.PROBE_OWNER, A.PROCESS_OBSERVER, "a", evidence="pid:4001:birth").label == \
        "evidence-only"
    assert one.send(K.HEARTBEAT_TIMEOUT, A.DAEMON, "a", evidence="hb:bucket-4").label == \
        "evidence-only"
    assert one.task("a").attempt_state == AS.RUNNING
    assert one.send(K.DECLARE_LOST, A.DAEMON, "a").label == "rejected:owner-not-proven-dead"
    assert one.send(K.PROBE_OWNER, A.PROCESS_OBSERVER, "a", evidence="pid:4001:birth:2").label == \
        "evidence-only"
    assert one.task("a").owner_seen == OwnerSeen.LIVE


def test_07_duplicate_provider_event_and_failure_count_once(one):
    dispatch(one, "a")
    assert one.send(K.PROVIDER_FAILURE, A.WRAPPER, "a", evidence="run-88").label == "applied"
    assert one.send(K.PROVIDER_FAILURE, A.WRAPPER, "a", evidence="run-88").label == "evidence-only"
    assert one.task("a").provider_failures == 1
    assert one.send(K.FAIL, A.WORKER, "a", evidence="exit-1").label == "applied"
    assert one.send(K.FAIL, A.WRAPPER, "a", evidence="exit-1").label == "evidence-only"
    assert one.task("a").attempt_state == AS.FAILED


def test_08_repeated_compactions_each_counted_once(one):
    dispatch(one, "a")
    for occ in ("entry-20", "entry-41"):
        assert one.send(K.COMPACTION, A.WRAPPER, "a", evidence=occ).label == "applied"
    assert one.send(K.COMPACTION, A.WRAPPER, "a", evidence="entry-20").label == "evidence-only"
    t = one.task("a")
    assert (t.compactions, t.continuations) == (2, 2)
    assert one.send(K.ACK_CONTINUATION, A.WRAPPER, "a", evidence="entry-20").label == "applied"
    assert one.send(K.ACK_CONTINUATION, A.WRAPPER, "a", evidence="entry-99").label == \
        "rejected:unknown-occurrence"
    assert one.task("a").acks == 1


def test_09_child_exit_and_observer_eof_suspect_then_one_probe(one):
    dispatch(one, "a")
    assert one.send(K.OBSERVE_EOF, A.WRAPPER, "a", evidence="stream-55").label == "evidence-only"
    assert one.task("a").owner_seen == OwnerSeen.SUSPECT
    p = plan(one.state, 0)
    assert (p.way, p.action) == (Way.SCHEDULED, Action.PROBE_OWNER)
    one.env(EnvKind.OWNER_DIES, "a")
    assert one.send(K.PROBE_OWNER, A.PROCESS_OBSERVER, "a", evidence="child-exit:4001").label == "applied"
    assert st(one, "a") == Status.IN_PROGRESS      # never Done
    assert one.send(K.OBSERVE_EOF, A.WRAPPER, "a", evidence="stream-55").label == "evidence-only"
    assert one.task("a").owner_seen == OwnerSeen.DEAD


def test_10_stale_capability_and_its_replay(one):
    dispatch(one, "a")
    stale = Capability("g", "a", 0, 0, 0, 0)
    r = one.request(K.FAIL, A.WORKER, "a", cap=stale, evidence="stale-done")
    assert one.apply(r).label == "rejected:stale-capability"
    again = one.apply(r)
    assert again.label == "duplicate" and again.original_code == 1   # the same rejection
    assert one.task("a").attempt_state == AS.RUNNING


def test_11_pid_reuse_is_the_owner_death(one):
    dispatch(one, "a")
    one.env(EnvKind.OWNER_DIES, "a")
    one.env(EnvKind.PID_REUSE, "a", birth=123456)
    assert one.send(K.PROBE_OWNER, A.PROCESS_OBSERVER, "a", evidence="pid:4001:birth:123456").label == \
        "applied"
    assert one.task("a").owner_seen == OwnerSeen.DEAD


def test_12_target_moved_during_finish_needs_repair(one):
    dispatch(one, "a")
    to_phase(one, "a", K.PREPARE_EFFECT)
    one.env(EnvKind.MOVE_TARGET, content=55)
    assert one.send(K.COMMIT_EFFECT, A.PROMOTER, "a", candidate=WORK, base=BASE).label == \
        "rejected:cas-moved"
    assert one.state.target == 55 and one.task("a").promotions == 0
    assert one.send(K.MARK_REPAIR, A.DAEMON, "a").label == "applied"
    t = one.task("a")
    assert (t.exit, t.reason, t.candidate) == (Exit.NEEDS_REPAIR, Reason.TARGET_MOVED, WORK)
    # the old candidate on the moved target is refused: it does not descend from it
    assert one.send(K.REVISE, A.WORKER, "a", candidate=WORK, base=55).label == \
        "rejected:base-mismatch"
    one.env(EnvKind.EDIT, "a", content=9)            # bytes written on the old base: still
    assert one.send(K.REVISE, A.WORKER, "a", candidate=9, base=55).label == \
        "rejected:base-mismatch"
    # repaired by a new candidate version its owner rebased, never a rebase by the kernel
    one.env(EnvKind.EDIT, "a", content=8, onto=55)
    assert one.send(K.REVISE, A.WORKER, "a", candidate=8, base=55).label == "applied"
    assert (one.task("a").version, one.task("a").retained) == (2, WORK)


def test_13_crash_at_every_phase_and_promotion_replayed_once(one):
    dispatch(one, "a")
    one.env(EnvKind.EDIT, "a", content=WORK)
    for kind in (K.SUBMIT, K.QUIESCE, K.SAVE_WORK, K.SEAL_CANDIDATE, K.VALIDATE, K.ACCEPT,
                 K.RECORD_DISPOSITION, K.PREPARE_EFFECT, K.COMMIT_EFFECT, K.PREPARE_CLEANUP,
                 K.COMMIT_CLEANUP, K.SAVE_GRAPH):
        before = one.state
        to = {K.SAVE_WORK: dict(candidate=WORK, base=BASE), K.SEAL_CANDIDATE: dict(candidate=WORK),
              K.VALIDATE: dict(candidate=WORK, verdict=Verdict.PASS),
              K.ACCEPT: dict(candidate=WORK, verdict=Verdict.NOT_REQUIRED),
              K.RECORD_DISPOSITION: dict(disposition=1),
              K.COMMIT_EFFECT: dict(candidate=WORK, base=BASE)}.get(kind, {})
        actor = {K.SUBMIT: A.WORKER, K.VALIDATE: A.VALIDATOR, K.QUIESCE: A.WRAPPER,
                 K.SAVE_WORK: A.WRAPPER, K.RECORD_DISPOSITION: A.WRAPPER,
                 K.PREPARE_EFFECT: A.PROMOTER, K.COMMIT_EFFECT: A.PROMOTER,
                 K.PREPARE_CLEANUP: A.CLEANUP, K.COMMIT_CLEANUP: A.CLEANUP}.get(kind, A.DAEMON)
        r = one.request(kind, actor, "a", **to)
        assert one.apply(r).label == "applied"
        after = one.state
        assert after.task("a").revision == before.task("a").revision + 1
        one.env(EnvKind.CRASH)                     # durable state survives the crash
        assert one.apply(r).label == "duplicate"   # the client re-sends: nothing re-executes
        assert one.state == after
    assert one.task("a").promotions == 1
    assert st(one, "a") == Status.DONE


def test_14_message_to_done_task_does_not_resurrect(one):
    complete(one, "a")
    assert one.send(K.MESSAGE, A.WORKER, "a", evidence="late worker says running").label == "evidence-only"
    assert one.send(K.FAIL, A.WORKER, "a", evidence="late").label == "evidence-only"
    assert st(one, "a") == Status.DONE
    assert one.task("a").messages == 0


def test_15_legacy_done_after_migration_is_quarantined(two):
    assert two.send(K.LEGACY_DONE, A.LEGACY_IMPORT, "a", evidence="graph.jsonl:1").label == "applied"
    assert st(two, "a") == Status.NEEDS_RECONCILIATION
    assert dispatch(two, "b").label == "rejected:dependency-not-done"
    assert plan(two.state, 1).way == Way.WAIT
    assert two.send(K.RECONSTRUCT, A.OPERATOR, "a", candidate=99, base=BASE).label == \
        "rejected:evidence-missing"
    # with the exact candidate on the target, receipts are rebuilt (and marked so)
    assert two.send(K.RECONSTRUCT, A.OPERATOR, "a", candidate=BASE, base=BASE).label == "applied"
    assert st(two, "a") == Status.DONE and two.task("a").reconstructed
    assert dispatch(two, "b").label == "applied"


def test_15b_legacy_done_reopened_by_the_operator(two):
    two.send(K.LEGACY_DONE, A.LEGACY_IMPORT, "a", evidence="graph.jsonl:1")
    assert two.send(K.RECONCILE, A.OPERATOR, "a").label == "applied"
    assert st(two, "a") == Status.OPEN
    assert ("legacy-done", "graph.jsonl:1") in two.task("a").evidence   # never erased


def test_16_two_dispatchers_race_one_attempt(one):
    first = one.request(K.DISPATCH, A.DAEMON, "a", owner=owner(1))
    second = one.request(K.DISPATCH, A.DAEMON, "a", owner=owner(2))
    assert one.apply(first).label == "applied"
    assert one.apply(second).label == "rejected:cas-moved"
    assert one.task("a").attempt == 1 and one.task("a").owner_pid == owner(1).pid


def test_17_reset_racing_completion_first_reservation_wins(one):
    dispatch(one, "a")
    one.env(EnvKind.EDIT, "a", content=WORK)
    reset = one.request(K.RESET, A.OPERATOR, "a")
    assert one.send(K.SUBMIT, A.WORKER, "a").label == "applied"
    assert one.apply(reset).label == "rejected:terminal-already"


def test_17b_reset_first_then_completion_is_stale():
    d = chain("a")
    dispatch(d, "a")
    d.env(EnvKind.EDIT, "a", content=WORK)
    submit = d.request(K.SUBMIT, A.WORKER, "a")
    assert d.send(K.RESET, A.OPERATOR, "a").label == "applied"       # the intent: K fenced
    assert d.apply(submit).label == "rejected:stale-capability"
    assert (d.task("a").reopening, d.task("a").generation) == (True, 0)
    d.env(EnvKind.OWNER_DIES, "a")
    assert d.send(K.PROBE_OWNER, A.DAEMON, "a", evidence="exit").label == "applied"
    assert d.send(K.RESET, A.OPERATOR, "a").label == "applied"       # the exit proven: it opens
    assert d.task("a").retained == WORK          # the reset kept the work
