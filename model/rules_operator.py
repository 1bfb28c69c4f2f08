"""The rules of the operator and of migration: reset, abandon, reconcile, and a legacy
Done quarantined or reconstructed from the target.

Each rule is a guard-then-update function declared with ``@rule`` (``wgk.model.rules``).
"""
from __future__ import annotations

from typing import Any

from .logic import all_of, any_of, ite, not_, one_of
from .predicates import (
    deps_current, deps_done, deps_generation, graph_saved, note_evidence, reserved, running,
)
from .ruleset import CLOSE, EDGE, EXIT, guarded, rule
from .state import NO_RECEIPTS, Binding, replace_task as replace
from .updates import close_attempt, leave_main_line, retain_base, retain_work
from .vocab import (
    AttemptState as AS, Code, DecisionKind as D, Disposition, Exit, Failure, Kind as K, OwnerSeen,
    Phase, Reason,
    PRE_EFFECT_PHASES,
)


def owner_held(t) -> Any:
    """The task's attempt runs and its exact owner is not proven exited: it may still be alive."""
    return all_of(running(t), t.owner_seen != OwnerSeen.DEAD)


def persist_intent(t):
    """WG's first step: the reset's intent is durable and the old attempt's K is fenced (its
    lease epoch moves), its owner and its work untouched; no generation opens yet."""
    return replace(t, reopening=True, lease_epoch=t.lease_epoch + 1)


def open_generation(t):
    """WG's last steps: the attempt (its owner proven exited, or none) is closed and its
    ownership released, its work retained, and exactly one new generation opens; the intent
    is settled and an external wait of the old generation is over."""
    closed = ite(running(t), close_attempt(t, AS.SUPERSEDED), t)
    return replace(
        closed, generation=t.generation + 1, attempt=0,
        phase=Phase.ABSENT, exit=Exit.NONE, reason=Reason.NONE, revision=0,
        candidate=0, base=0, version=0, disposition=Disposition.NONE,
        receipts=NO_RECEIPTS, effect_done=False, retries=0, failure=Failure.NONE,
        waiting_on=0, wait_deadline=0, wait_expired=False, reopening=False,
        retained=retain_work(t), retained_base=retain_base(t),
    )


@rule(K.RESET, touches=CLOSE | EDGE | EXIT | {"generation", "attempt", "candidate", "base", "version",
                                             "disposition", "receipts", "effect_done", "retries",
                                             "failure", "waiting_on", "wait_deadline",
                                             "wait_expired", "reopening", "lease_epoch"},
      reads={"self", "deps.done", "deps.generation"})
def reset(s, i, t, r):
    """A new generation in WG's reopen order: over an owner that may still be alive the reset
    only persists its intent (``persist_intent``); once the owner is proven exited (a probe)
    the reset again releases it and opens the generation (``open_generation``). A completion
    that reserved the terminal first wins the race, unless a dependency was reopened under it
    (its effect is refused: the reset fences it)."""
    in_flight = all_of(running(t), reserved(t), t.exit == Exit.NONE, deps_current(s, i, t))
    held = owner_held(t)
    return guarded(
        [
            (r.expected_generation == t.generation, Code.CAS_MOVED),
            (not_(t.abandoned), Code.HELD),
            (t.attempt_state != AS.SUCCEEDED, Code.TERMINAL_ALREADY),
            (not_(in_flight), Code.TERMINAL_ALREADY),
            (not_(t.effect_done), Code.TERMINAL_ALREADY),
            (t.exit != Exit.NEEDS_RECONCILIATION, Code.HELD),
            (not_(all_of(t.reopening, held)), Code.OWNER_NOT_PROVEN_DEAD),
        ],
        lambda: s.put(i, ite(held, persist_intent(t), open_generation(t))),
    )


@rule(K.ABANDON, touches=CLOSE | EXIT | {"abandoned"}, reads={"self"})
def abandon(s, i, t, r):
    """The operator gives the task up before any effect; retained work is preserved."""
    effect_started = all_of(one_of(t.phase, (Phase.EFFECT_PREPARED, Phase.EFFECT_COMMITTED,
                                             Phase.CLEANUP_PREPARED, Phase.CLEANUP_COMMITTED)),
                            t.exit == Exit.NONE)
    def update():
        closed = ite(running(t), close_attempt(t, AS.ABANDONED), t)
        in_tx = all_of(one_of(t.phase, PRE_EFFECT_PHASES), t.exit == Exit.NONE)
        return s.put(i, replace(
            closed, abandoned=True,
            exit=ite(in_tx, Exit.ABORTED_PRESERVED, t.exit),
            reason=ite(in_tx, Reason.OPERATOR_ABORT, t.reason),
            revision=ite(in_tx, t.revision + 1, t.revision),
        ))
    return guarded(
        [
            (not_(t.abandoned), Code.TERMINAL_ALREADY),
            (t.attempt_state != AS.SUCCEEDED, Code.TERMINAL_ALREADY),
            (not_(effect_started), Code.TERMINAL_ALREADY),
        ],
        update,
    )


@rule(K.RECONCILE, touches=EXIT | {"phase", "legacy_done"}, reads={"self"})
def reconcile(s, i, t, r):
    """The operator resolves a hold: a legacy claim reopened, or an upgrade block lifted."""
    legacy = t.exit == Exit.NEEDS_RECONCILIATION
    def update():
        return s.put(i, replace(
            t, exit=Exit.NONE, reason=Reason.NONE, revision=t.revision + 1,
            phase=ite(legacy, Phase.ABSENT, t.phase),
            legacy_done=ite(legacy, False, t.legacy_done),
        ))
    return guarded(
        [(one_of(t.exit, (Exit.NEEDS_RECONCILIATION, Exit.UPGRADE_BLOCKED)), Code.ILLEGAL_PHASE_EDGE)],
        update,
    )


@rule(K.RECONSTRUCT, touches=EDGE | EXIT | {"fence", "attempt", "lease_epoch", "attempt_state",
                                           "candidate", "base", "receipts", "reconstructed",
                                           "effect_done", "legacy_done", "worktree_lease",
                                           "session_lease", "finish_lease", "imported",
                                           "deps_generation"},
      reads={"self", "deps.done", "deps.generation", "target"})
def reconstruct(s, i, t, r):
    """A legacy Done is proven by the target holding its exact candidate: receipts are rebuilt."""
    def update():
        fence = t.fence + 1
        b = Binding(fence, r.candidate, r.base)
        return s.put(i, replace(
            t, fence=fence, attempt=t.attempt + 1, lease_epoch=t.lease_epoch + 1,
            attempt_state=AS.SUCCEEDED, phase=Phase.GRAPH_SAVED, exit=Exit.NONE,
            reason=Reason.NONE, revision=t.revision + 1, candidate=r.candidate, base=r.base,
            receipts=tuple(b for _ in NO_RECEIPTS), reconstructed=True, effect_done=True,
            legacy_done=False, imported=0, deps_generation=deps_generation(s, i),
            worktree_lease=False, session_lease=False, finish_lease=False,
        ))
    return guarded(
        [
            (all_of(t.exit == Exit.NEEDS_RECONCILIATION, t.legacy_done), Code.ILLEGAL_PHASE_EDGE),
            (not_(t.abandoned), Code.HELD),
            (not_(running(t)), Code.ATTEMPT_LIVE),
            (deps_done(s, i), Code.DEPENDENCY_NOT_DONE),
            (s.target == r.candidate, Code.EVIDENCE_MISSING),
        ],
        update,
    )


@rule(K.LEGACY_DONE, touches=EXIT | {"legacy_done", "evidence"}, reads={"self"})
def legacy_done(s, i, t, r):
    """A legacy Done without evidence is quarantined: needs reconciliation, never blessed.

    Only a task with nothing in flight is held; for a Done, abandoned, held or
    completing task the claim is recorded as evidence only."""
    inert = any_of(graph_saved(t), t.abandoned, reserved(t), t.exit != Exit.NONE)
    return guarded(
        [],
        lambda: s.put(i, replace(ite(inert, t, leave_main_line(
            t, Exit.NEEDS_RECONCILIATION, Reason.LEGACY_UNPROVEN, legacy_done=True,
        )), evidence=note_evidence(t, "legacy-done", r.evidence))),
        kind=ite(inert, D.EVIDENCE_ONLY, D.APPLIED),
    )
