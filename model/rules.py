"""The transitions: one small guard-then-update function per request kind.

Every rule has the signature ``rule(s, i, t, r) -> Guarded`` where ``s`` is the
state, ``i`` the task index, ``t = s.tasks[i]`` and ``r`` the request. It lists
its guards as ``(condition, code)`` pairs (the first false one names the
rejection) and gives the update as a thunk. ``decide`` (kernel.py) runs the
generic checks first (journal, authority, capability, CAS on the transaction),
so a rule only states what is particular to it.

Each rule is declared where it is defined: ``@rule(kind, touches=...)`` names the
kind it decides and the only fields it may change (the TLA+ ``UNCHANGED`` idea,
inverted), so ``RULES`` and ``TOUCHES`` (``wgk.model.ruleset``) are derived from
the decorations; a test checks every applied step against ``TOUCHES``. The
predicates over one task are ``wgk.model.predicates``'.

Rules never branch on state with ``if``/``and``/``or``/``not``: they use
``ite``/``all_of``/``any_of``/``not_`` so the same code builds the z3 encoding.
"""
from __future__ import annotations

from typing import Any

from .logic import all_of, any_of, ite, not_, one_of
from .predicates import (  # noqa: F401  (re-exported: callers import them from here)
    binding, deps_done, dirty, graph_saved, has_receipt, note_evidence, owner_alive,
    receipt_of, receipts_agree, reserved, running, seen,
)
from .requests import Request
from .ruleset import (  # noqa: F401  (re-exported: callers import them from here)
    CLOSE, EDGE, EXIT, OPEN, RULES, TOUCHES, Guarded, changed_fields, guarded, rule,
)
from .state import NO_RECEIPTS, Binding, State, TaskState, replace_task as replace
from .vocab import (
    Actor, AttemptState as AS, Code, DecisionKind as D, Disposition, Exit, Kind as K,
    OwnerSeen, Phase, Reason, Receipt, Verdict, PRE_EFFECT_PHASES,
)


# --- updates shared by several rules ------------------------------------------

def advance(t: TaskState, to: Phase, **changes: Any) -> TaskState:
    """Move the transaction one legal edge forward and bump its revision."""
    return replace(t, phase=to, revision=t.revision + 1, **changes)


def leave_main_line(t: TaskState, exit_: Exit, reason: Reason, **changes: Any) -> TaskState:
    return replace(t, exit=exit_, reason=reason, revision=t.revision + 1, **changes)


def retain_work(t: TaskState) -> Any:
    """What a closing attempt leaves retained: its dirty worktree, else its saved work."""
    return ite(dirty(t), t.worktree, ite(t.saved_work != 0, t.saved_work, t.retained))


def release_owner(t: TaskState, **changes: Any) -> TaskState:
    """The attempt is over: its leases are released and its owner is no longer tracked."""
    return replace(
        t, worktree_lease=False, session_lease=False, finish_lease=False, deadline=0,
        owner_pid=0, owner_birth=0, session=0, wrapper_epoch=0, child_epoch=0,
        owner_seen=OwnerSeen.UNVERIFIED, proc_birth=0, **changes,
    )


def retain_base(t: TaskState) -> Any:
    """The target commit the retained work descends from (``retain_work``'s base)."""
    return ite(dirty(t), t.built_on, ite(t.saved_work != 0, t.base, t.retained_base))


def close_attempt(t: TaskState, outcome: AS) -> TaskState:
    """Terminalize the current attempt; its work is retained, its owner released."""
    return release_owner(t, attempt_state=outcome, retained=retain_work(t),
                         retained_base=retain_base(t))


def open_attempt(s: State, t: TaskState, r: Request) -> TaskState:
    """A new attempt: next attempt number and fence, a fresh worktree, an empty transaction."""
    start = r.imports if r.imports else s.target
    # the attempt's base is the kernel's fact: the target now, or the imported work's base
    built_on = ite(t.retained_base != 0, t.retained_base, s.target) if r.imports else s.target
    o = r.owner
    return replace(
        t,
        attempt=t.attempt + 1, fence=t.fence + 1, lease_epoch=t.lease_epoch + 1,
        attempt_state=AS.RUNNING,
        owner_pid=o.pid, owner_birth=o.birth, session=o.session,
        wrapper_epoch=1, child_epoch=1,        # a new attempt's first process; only resume raises them
        owner_seen=OwnerSeen.UNVERIFIED, proc_birth=o.birth,
        worktree_lease=True, session_lease=True, finish_lease=False,
        worktree=start, worktree_present=True, origin=start, built_on=built_on,
        saved_work=0, imported=r.imports,
        phase=Phase.ABSENT, exit=Exit.NONE, reason=Reason.NONE, revision=0,
        candidate=0, base=0, version=0, disposition=Disposition.NONE,
        receipts=NO_RECEIPTS, deadline=0, effect_done=False,
    )


def suspect(t: TaskState) -> Any:
    """Evidence may raise suspicion; it never proves death and never clears it."""
    return ite(t.owner_seen == OwnerSeen.DEAD, OwnerSeen.DEAD, OwnerSeen.SUSPECT)


# --- admission and attempts ---------------------------------------------------

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
        (any_of(not_(s.graph.requires_assignment[i]), t.assigned), Code.ASSIGNMENT_REQUIRED),
        (deps_done(s, i), Code.DEPENDENCY_NOT_DONE),
        (r.expected_attempt == t.attempt, Code.CAS_MOVED),
    ]


def _import_checks(t, r) -> list:
    if not r.imports:
        return []
    return [(t.retained != 0, Code.NOTHING_RETAINED),
            (t.retained == r.imports, Code.CANDIDATE_MISMATCH)]


@rule(K.DISPATCH, touches=OPEN, reads={"self", "deps.done", "target"})
def dispatch(s, i, t, r):
    """Open an attempt on a task whose dependencies are all dependency-satisfying Done."""
    checks = _admission_checks(s, i, t, r) + [(not_(running(t)), Code.ATTEMPT_LIVE)]
    return guarded(checks + _import_checks(t, r), lambda: s.put(i, open_attempt(s, t, r)))


@rule(K.RETRY, touches=OPEN | CLOSE, reads={"self", "deps.done", "target"})
def retry(s, i, t, r):
    """The operator closes a stuck attempt (work retained) and opens a new one."""
    stuck = any_of(
        not_(running(t)),
        all_of(t.owner_seen == OwnerSeen.DEAD, not_(reserved(t))),
        one_of(t.exit, (Exit.NEEDS_REPAIR, Exit.ABORTED_PRESERVED)),
    )
    closed = ite(running(t), close_attempt(t, AS.ABANDONED), t)
    checks = _admission_checks(s, i, t, r) + [(stuck, Code.ATTEMPT_LIVE)]
    return guarded(checks + _import_checks(closed, r), lambda: s.put(i, open_attempt(s, closed, r)))


@rule(K.RESUME, touches={"owner_pid", "owner_birth", "proc_birth", "wrapper_epoch", "child_epoch",
                         "owner_seen", "deadline"}, reads={"self"})
def resume(s, i, t, r):
    """Same-attempt continuation: needs unchanged K, same session, proven death, no terminal intent."""
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
            owner_seen=OwnerSeen.UNVERIFIED, deadline=0,
        )),
    )


# --- evidence -----------------------------------------------------------------

@rule(K.HEARTBEAT, touches={"evidence"}, reads={"self"})
def heartbeat(s, i, t, r):
    """A heartbeat is evidence only: recorded by id, it proves nothing about the owner."""
    return guarded([], lambda: s.put(i, replace(t, evidence=note_evidence(t, "heartbeat", r.evidence))),
                   kind=D.EVIDENCE_ONLY)


@rule(K.HEARTBEAT_TIMEOUT, touches={"owner_seen", "evidence"}, reads={"self"})
def heartbeat_timeout(s, i, t, r):
    """A missing heartbeat raises suspicion of a running owner; it never terminalizes."""
    return guarded(
        [],
        lambda: s.put(i, replace(t, owner_seen=ite(running(t), suspect(t), t.owner_seen),
                                 evidence=note_evidence(t, "heartbeat-timeout", r.evidence))),
        kind=D.EVIDENCE_ONLY,
    )


@rule(K.OBSERVE_EOF, touches={"owner_seen", "evidence"}, reads={"self"})
def observe_eof(s, i, t, r):
    """Observer EOF says only that an evidence channel closed: suspicion, one probe."""
    return guarded(
        [],
        lambda: s.put(i, replace(t, owner_seen=ite(running(t), suspect(t), t.owner_seen),
                                 evidence=note_evidence(t, "eof", r.evidence))),
        kind=D.EVIDENCE_ONLY,
    )


@rule(K.PROBE_OWNER, touches={"owner_seen", "deadline", "evidence"}, reads={"self", "now"})
def probe_owner(s, i, t, r):
    """Read pid + birth time: the exact owner alive is evidence; its proven death is applied."""
    alive = owner_alive(t)
    proves_death = all_of(running(t), not_(alive), t.owner_seen != OwnerSeen.DEAD)
    seen_now = ite(alive, OwnerSeen.LIVE, OwnerSeen.DEAD)
    return guarded(
        [],
        lambda: s.put(i, replace(
            t,
            owner_seen=ite(running(t), seen_now, t.owner_seen),
            deadline=ite(proves_death, s.now + 1, t.deadline),
            evidence=note_evidence(t, "probe", r.evidence),
        )),
        kind=ite(proves_death, D.APPLIED, D.EVIDENCE_ONLY),
    )


@rule(K.COMPACTION, touches={"evidence", "compactions", "continuations"}, reads={"self"})
def compaction(s, i, t, r):
    """Each distinct compaction occurrence is counted once and earns one continuation."""
    new = not_(seen(t, "compaction", r.evidence))
    continues = all_of(new, running(t), not_(reserved(t)))
    def update():
        ev = note_evidence(t, "compaction", r.evidence)
        ev = ite(continues, ev.add(("continuation", r.evidence)), ev)
        return s.put(i, replace(
            t, evidence=ev,
            compactions=ite(new, t.compactions + 1, t.compactions),
            continuations=ite(continues, t.continuations + 1, t.continuations),
        ))
    return guarded([], update, kind=ite(new, D.APPLIED, D.EVIDENCE_ONLY))


@rule(K.ACK_CONTINUATION, touches={"acks", "evidence"}, reads={"self"})
def ack_continuation(s, i, t, r):
    """The wrapper acknowledges delivery of the continuation a compaction earned."""
    new = not_(seen(t, "ack", r.evidence))
    return guarded(
        [(seen(t, "continuation", r.evidence), Code.UNKNOWN_OCCURRENCE)],
        lambda: s.put(i, replace(t, acks=ite(new, t.acks + 1, t.acks),
                                 evidence=note_evidence(t, "ack", r.evidence))),
        kind=ite(new, D.APPLIED, D.EVIDENCE_ONLY),
    )


@rule(K.PROVIDER_FAILURE, touches={"provider_failures", "evidence"}, reads={"self"})
def provider_failure(s, i, t, r):
    """A provider failure event is counted once by its event id; it never terminalizes."""
    new = not_(seen(t, "provider-failure", r.evidence))
    return guarded(
        [],
        lambda: s.put(i, replace(
            t, provider_failures=ite(new, t.provider_failures + 1, t.provider_failures),
            evidence=note_evidence(t, "provider-failure", r.evidence),
        )),
        kind=ite(new, D.APPLIED, D.EVIDENCE_ONLY),
    )


@rule(K.MESSAGE, touches={"messages", "evidence"}, reads={"self"})
def message(s, i, t, r):
    """A message is inert evidence: held for a running attempt, never a resurrection."""
    new = not_(seen(t, "message", r.evidence))
    return guarded(
        [],
        lambda: s.put(i, replace(
            t, messages=ite(all_of(new, running(t)), t.messages + 1, t.messages),
            evidence=note_evidence(t, "message", r.evidence),
        )),
        kind=D.EVIDENCE_ONLY,
    )


@rule(K.OWNERSHIP_CONTENTION, touches={"evidence"}, reads={"self"})
def ownership_contention(s, i, t, r):
    """A foreign caller contending for ownership is recorded; it charges nothing."""
    return guarded([], lambda: s.put(i, replace(t, evidence=note_evidence(t, "contention", r.evidence))),
                   kind=D.EVIDENCE_ONLY)


@rule(K.LOG, touches={"logs"}, reads={"self"})
def log(s, i, t, r):
    """The owner appends a log line: one effect per request."""
    return guarded([(running(t), Code.TERMINAL_ALREADY)],
                   lambda: s.put(i, replace(t, logs=t.logs + 1)))


# --- terminal reports and convergence -----------------------------------------

@rule(K.FAIL, touches=CLOSE | {"evidence"}, reads={"self"})
def fail(s, i, t, r):
    """A terminal failure report: the first terminal wins, later ones are evidence only."""
    first = all_of(running(t), not_(reserved(t)))
    return guarded(
        [],
        lambda: s.put(i, replace(ite(first, close_attempt(t, AS.FAILED), t),
                                 evidence=note_evidence(t, "terminal-report", r.evidence))),
        kind=ite(first, D.APPLIED, D.EVIDENCE_ONLY),
    )


@rule(K.DECLARE_LOST, touches=CLOSE, reads={"self"})
def declare_lost(s, i, t, r):
    """Convergence closes an attempt whose exact owner is proven dead and left no terminal intent."""
    return guarded(
        [
            (running(t), Code.TERMINAL_ALREADY),
            (t.owner_seen == OwnerSeen.DEAD, Code.OWNER_NOT_PROVEN_DEAD),
            (not_(reserved(t)), Code.TERMINAL_ALREADY),
        ],
        lambda: s.put(i, close_attempt(t, AS.LOST)),
    )


# --- the SaveTransaction ------------------------------------------------------

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
        [(t.worktree_present, Code.WRITER_NOT_QUIESCENT),
         (t.worktree == r.candidate, Code.CANDIDATE_MISMATCH),
         (r.base == t.built_on, Code.BASE_MISMATCH)],
        update,
    )


def _candidate_check(t: TaskState, r: Request) -> tuple:
    return (t.candidate == r.candidate, Code.CANDIDATE_MISMATCH)


@rule(K.SEAL_CANDIDATE, touches=EDGE | {"receipts"}, reads={"self"})
def seal_candidate(s, i, t, r):
    """The saved work becomes the one immutable candidate."""
    return guarded(
        [_candidate_check(t, r)],
        lambda: s.put(i, advance(t, Phase.CANDIDATE_SEALED,
                                 receipts=t.with_receipt(Receipt.CANDIDATE, binding(t)))),
    )


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


@rule(K.PREPARE_EFFECT, touches=EDGE, reads={"self"})
def prepare_effect(s, i, t, r):
    """Write-ahead intent before the external effect."""
    return guarded([], lambda: s.put(i, advance(t, Phase.EFFECT_PREPARED)))


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
        [(any_of(not_(t.worktree_present), t.worktree == t.saved_work), Code.WRITER_NOT_QUIESCENT)],
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
    fact: the new version's base, checked on the repository at the land); earlier reviews no longer count."""
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
         (t.worktree_present, Code.WRITER_NOT_QUIESCENT),
         (t.worktree == r.candidate, Code.CANDIDATE_MISMATCH),
         (r.base == s.target, Code.BASE_MISMATCH)],
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


# --- operator and migration ---------------------------------------------------

@rule(K.RESET, touches=CLOSE | EDGE | EXIT | {"generation", "attempt", "candidate", "base", "version",
                                             "disposition", "receipts", "effect_done"},
      reads={"self"})
def reset(s, i, t, r):
    """A new generation; a completion that reserved the terminal first wins the race."""
    in_flight = all_of(running(t), reserved(t), t.exit == Exit.NONE)
    def update():
        closed = ite(running(t), close_attempt(t, AS.SUPERSEDED), t)
        return s.put(i, replace(
            closed, generation=t.generation + 1, attempt=0,
            phase=Phase.ABSENT, exit=Exit.NONE, reason=Reason.NONE, revision=0,
            candidate=0, base=0, version=0, disposition=Disposition.NONE,
            receipts=NO_RECEIPTS, effect_done=False,
            retained=retain_work(t), retained_base=retain_base(t),
        ))
    return guarded(
        [
            (r.expected_generation == t.generation, Code.CAS_MOVED),
            (not_(t.abandoned), Code.HELD),
            (t.attempt_state != AS.SUCCEEDED, Code.TERMINAL_ALREADY),
            (not_(in_flight), Code.TERMINAL_ALREADY),
            (not_(t.effect_done), Code.TERMINAL_ALREADY),
            (t.exit != Exit.NEEDS_RECONCILIATION, Code.HELD),
        ],
        update,
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
                                           "session_lease", "finish_lease", "imported"},
      reads={"self", "deps.done", "target"})
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
            legacy_done=False, imported=0,
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


