"""The decision for one request: generic checks, then one guard-then-update rule per kind.

``decide(ctx)`` answers a request whose key is not in the journal (the journal
is the store's business). The order of checks is the contract of
docs/vocabulary.md: authority, the task exists, the capability tuple K, the
transaction CAS and edge, then the rule's own guards in the order written. The
first failing guard names the rejection; a rejected request changes nothing.

A rule returns an ``Outcome``: the decision, the task's new record, the facts
to record beside it (evidence, logs, effect intents, worktrees) and the
external ``effects`` to perform before the transaction commits. Rules read the
environment only through ``Observe`` (worktree bytes, the target ref, the
process table, whether an effect already happened) and never perform an
effect themselves.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .env import WorktreeView
from .records import NO_RECEIPTS, Binding, TaskPolicy, TaskRecord, evolve as replace
from .vocabulary import (
    APPLIED, EDGES, EFFECT_PHASES, EVIDENCE_ONLY, GRAPH_SAVE_NEEDS, PRE_EFFECT_PHASES, REJECTED,
    TRANSACTION_KINDS,
)

# --- what a decision produces ------------------------------------------------------


@dataclass(frozen=True)
class Effect:
    """An external effect to perform before the request's transaction commits."""

    name: str                      # create-worktree | pin | land | output | remove-worktree | adopt
    args: tuple = ()


@dataclass
class Outcome:
    decision: str
    code: str | None
    record: TaskRecord
    facts: list[tuple[str, dict]] = field(default_factory=list)
    effects: list[Effect] = field(default_factory=list)
    observed: dict[str, Any] = field(default_factory=dict)

    @property
    def changes_state(self) -> bool:
        return self.decision in (APPLIED, EVIDENCE_ONLY)


# --- observing the environment ---------------------------------------------------------


class Observe:
    """Lazy, per-request observations of the environment (each read at most once)."""

    def __init__(self, env, task: str, effect_intent: Callable[[str], Any] | None = None):
        self._env = env
        self._task = task
        self._intent = effect_intent or (lambda effect: None)
        self._cache: dict[Any, Any] = {}
        self.log: dict[str, Any] = {}

    def _once(self, key, thunk):
        if key not in self._cache:
            self._cache[key] = thunk()
        return self._cache[key]

    def target(self) -> str | None:
        value = self._once("target", self._env.repository.target)
        self.log["target"] = value
        return value

    def now(self) -> int:
        value = self._once("now", self._env.clock.now)
        self.log["now"] = value
        return value

    def birth_of(self, pid: int) -> int | None:
        value = self._once(("pid", pid), lambda: self._env.processes.birth_of(pid) if pid else None)
        self.log["birth"] = value
        return value

    def owner_alive(self, t: TaskRecord) -> bool:
        """The process at the owner's pid has the owner's birth time."""
        # guards: liveness-needs-exact-birth
        return t.owner_birth != 0 and self.birth_of(t.owner_pid) == t.owner_birth

    def worktree(self, t: TaskRecord) -> WorktreeView:
        if t.worktree_id is None:
            return WorktreeView(False, None)
        view = self._once(("wt", t.worktree_id),
                          lambda: self._env.repository.observe_worktree(t.worktree_id))
        self.log["worktree"] = {"present": view.present, "content": view.content}
        return view

    def effect_happened(self, t: TaskRecord) -> bool:
        """This transaction's effect is recorded, or re-observed after a crash."""
        if t.effect_done:
            return True
        effect = effect_name(self._task, t)
        if self._intent(effect) is None:
            return False
        value = self._once(("effect", effect),
                           lambda: self._env.repository.effect_observed(effect))
        self.log["effect-observed"] = value
        return value


def effect_name(task: str, t: TaskRecord) -> str:
    return f"{task}/{t.effect_id}"


# --- the context of one decision ---------------------------------------------------------


@dataclass
class Ctx:
    graph_id: str
    policy: TaskPolicy
    record: TaskRecord
    request: Any
    deps_done: Callable[[], bool]
    seen: Callable[[str, str], bool]
    observe: Observe

    @property
    def task(self) -> str:
        return self.policy.name


def reject(ctx: Ctx, code: str) -> Outcome:
    return Outcome(REJECTED, code, ctx.record)


def succeeded(ctx: Ctx, record: TaskRecord, *, kind: str = APPLIED, facts=(), effects=()) -> Outcome:
    return Outcome(kind, None, record, list(facts), list(effects))


def evidence_fact(kind: str, ident: str, counted: bool = False) -> tuple[str, dict]:
    return ("evidence", {"kind": kind, "id": ident, "counted": counted})


# --- shared updates -------------------------------------------------------------------


def advance(t: TaskRecord, to: str, **changes: Any) -> TaskRecord:
    """One legal edge forward; the revision counts every transaction change."""
    return replace(t, phase=to, revision=t.revision + 1, **changes)


def leave_main_line(t: TaskRecord, exit_: str, reason: str, **changes: Any) -> TaskRecord:
    return replace(t, exit=exit_, reason=reason, revision=t.revision + 1, **changes)


def release_owner(t: TaskRecord, **changes: Any) -> TaskRecord:
    """The attempt is over: leases released, the owner no longer tracked."""
    return replace(
        t, worktree_lease=False, session_lease=False, finish_lease=False, deadline=0,
        owner_pid=0, owner_birth=0, session=None, wrapper_epoch=0, child_epoch=0,
        owner_seen="unverified", **changes,
    )


def retain_work(ctx: Ctx, t: TaskRecord, effects: list[Effect]) -> tuple[str | None, str | None]:
    """(retained, its base) when an attempt closes: a dirty worktree, else the saved work.

    Dirty bytes are pinned under an immutable ref so that they are never erased."""
    view = ctx.observe.worktree(t)
    # guards: retained-work-never-erased
    if view.present and view.content != t.origin:
        effects.append(Effect("pin", (f"retained/{ctx.task}/f{t.fence}", view.content)))
        return view.content, t.base_hint
    if t.saved_work is not None:
        return t.saved_work, t.base
    return t.retained, t.retained_base


def close_attempt(ctx: Ctx, t: TaskRecord, outcome: str, effects: list[Effect]) -> TaskRecord:
    retained, retained_base = retain_work(ctx, t, effects)
    return release_owner(t, attempt_state=outcome, retained=retained, retained_base=retained_base)


def open_attempt(ctx: Ctx, t: TaskRecord, effects: list[Effect]) -> TaskRecord:
    """A new attempt: next attempt and fence, a fresh worktree, an empty transaction."""
    r = ctx.request
    target = ctx.observe.target()
    start = r.imports if r.imports else target
    base_hint = (t.retained_base or target) if r.imports else target
    # guards: first-terminal-wins, terminal-never-resurrects
    fence = t.fence + 1
    wt = f"{ctx.task}/f{fence}"
    o = r.owner
    effects.append(Effect("create-worktree", (wt, start)))
    effects.append(Effect("adopt", (o.pid, o.birth)))
    # guards: receipts-fenced, retry-is-not-continuation-without-proof
    return replace(
        t, attempt=t.attempt + 1, fence=fence, lease_epoch=t.lease_epoch + 1,
        attempt_state="running",
        owner_pid=o.pid, owner_birth=o.birth, session=o.session,
        wrapper_epoch=1, child_epoch=1, owner_seen="unverified",   # only resume raises epochs
        worktree_lease=True, session_lease=True, finish_lease=False,
        worktree_id=wt, origin=start, base_hint=base_hint, saved_work=None, imported=r.imports,
        phase="absent", exit="none", reason="none", revision=0, candidate=None, base=None,
        version=0, disposition="none", receipts=NO_RECEIPTS, deadline=0, effect_done=False,
    )


def suspect(t: TaskRecord) -> str:
    """Evidence may raise suspicion; it never proves death and never clears it."""
    return "dead" if t.owner_seen == "dead" else "suspect"


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
    # guards: dependency-needs-done
    if not ctx.deps_done():
        return "dependency-not-done"
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


def dispatch(ctx: Ctx) -> Outcome:
    t = ctx.record
    # guards: single-live-owner
    code = admission_failure(ctx, t) or ("attempt-live" if t.running else None) \
        or import_failure(ctx, t)
    if code:
        return reject(ctx, code)
    effects: list[Effect] = []
    return succeeded(ctx, open_attempt(ctx, t, effects), effects=effects)


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
    return succeeded(ctx, open_attempt(ctx, closed, effects), effects=effects, facts=facts)


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
    new = replace(t, owner_pid=o.pid, owner_birth=o.birth, wrapper_epoch=o.wrapper_epoch,
                  child_epoch=o.child_epoch, owner_seen="unverified", deadline=0)
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
    return _suspicion(ctx, "eof")


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
                facts=[evidence_fact("probe", ctx.request.evidence)])


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
    new = not ctx.seen("ack", occ)
    return succeeded(ctx, ctx.record, kind=APPLIED if new else EVIDENCE_ONLY,
                facts=[evidence_fact("ack", occ)])


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
                facts=[evidence_fact("contention", ctx.request.evidence)])


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
    new = close_attempt(ctx, t, "failed", effects) if first else t
    return succeeded(ctx, new, kind=APPLIED if first else EVIDENCE_ONLY, effects=effects,
                facts=[evidence_fact("terminal-report", ctx.request.evidence)])


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


# --- the SaveTransaction ---------------------------------------------------------------------


def submit(ctx: Ctx) -> Outcome:
    t = ctx.record
    if not (t.worktree_lease and ctx.observe.worktree(t).present):
        return reject(ctx, "stale-capability")
    return succeeded(ctx, advance(t, "prepared", deadline=ctx.request.deadline or t.deadline))


def quiesce(ctx: Ctx) -> Outcome:
    return succeeded(ctx, advance(ctx.record, "quiescing"))


def save_work(ctx: Ctx) -> Outcome:
    t, r = ctx.record, ctx.request
    view = ctx.observe.worktree(t)
    if not view.present:
        return reject(ctx, "writer-not-quiescent")
    if view.content != r.candidate:
        return reject(ctx, "candidate-mismatch")
    version = t.version + 1
    # guards: worksave-exact
    new = advance(t, "work-saved", saved_work=view.content, candidate=r.candidate, base=r.base,
                  version=version,
                  receipts=t.with_receipts(work_save=Binding(t.fence, r.candidate, r.base)))
    pin = Effect("pin", (f"worksave/{ctx.task}/f{t.fence}-v{version}", view.content))
    return succeeded(ctx, new, effects=[pin])


def _candidate_failure(ctx: Ctx) -> str | None:
    return None if ctx.record.candidate == ctx.request.candidate else "candidate-mismatch"


def seal_candidate(ctx: Ctx) -> Outcome:
    t = ctx.record
    code = _candidate_failure(ctx)
    if code:
        return reject(ctx, code)
    return succeeded(ctx, advance(t, "candidate-sealed", receipts=t.with_receipts(candidate=t.binding)))


def validate(ctx: Ctx) -> Outcome:
    t, verdict = ctx.record, ctx.request.verdict
    code = _candidate_failure(ctx) or (None if verdict in ("pass", "fail") else "illegal-phase-edge")
    if code:
        return reject(ctx, code)
    if verdict == "pass":
        return succeeded(ctx, advance(t, "validated", receipts=t.with_receipts(validation=t.binding)))
    return succeeded(ctx, leave_main_line(t, "needs-repair", "validation-failed"))


def request_review(ctx: Ctx) -> Outcome:
    t = ctx.record
    if not ctx.policy.review_required:
        return reject(ctx, "illegal-phase-edge")
    return succeeded(ctx, advance(t, "awaiting-acceptance", deadline=ctx.request.deadline or t.deadline))


def accept(ctx: Ctx) -> Outcome:
    t, r = ctx.record, ctx.request
    required = ctx.policy.review_required
    from_awaiting = t.phase == "awaiting-acceptance"
    # a review verdict is the evaluator's; the not-required policy receipt is the daemon's
    if r.actor != ("daemon" if r.verdict == "not-required" else "evaluator"):
        return reject(ctx, "not-authorized")
    if r.verdict == "fail":
        code = _candidate_failure(ctx) or (None if from_awaiting else "illegal-phase-edge")
        if code:
            return reject(ctx, code)
        return succeeded(ctx, leave_main_line(t, "needs-repair", "review-failed"))
    code = _candidate_failure(ctx)
    if code is None and r.verdict is None:
        code = "illegal-phase-edge"
    if code is None and required and not from_awaiting:
        code = "review-required"
    if code is None and not required and from_awaiting:
        code = "illegal-phase-edge"
    if code is None and required and r.verdict != "pass":
        code = "review-required"
    if code:
        return reject(ctx, code)
    return succeeded(ctx, advance(t, "accepted", deadline=r.deadline or t.deadline,
                             receipts=t.with_receipts(review=t.binding)))


def record_disposition(ctx: Ctx) -> Outcome:
    t, r = ctx.record, ctx.request
    if r.disposition not in ("land", "deliver", "report"):
        return reject(ctx, "illegal-phase-edge")
    return succeeded(ctx, advance(t, "disposition-recorded", disposition=r.disposition, finish_lease=True,
                             deadline=r.deadline or t.deadline,
                             receipts=t.with_receipts(disposition=t.binding)))


def prepare_effect(ctx: Ctx) -> Outcome:
    """Write-ahead intent: the effect's identity, candidate and base are durable first."""
    t = ctx.record
    new = advance(t, "effect-prepared")
    intent = {"id": effect_name(ctx.task, new), "fence": t.fence, "version": t.version,
              "disposition": t.disposition, "candidate": t.candidate, "base": t.base}
    return succeeded(ctx, new, facts=[("effect-prepared", intent)])


def commit_effect(ctx: Ctx) -> Outcome:
    t, r = ctx.record, ctx.request
    land = t.disposition == "land"
    if t.candidate != r.candidate or r.base != t.base:
        return reject(ctx, "candidate-mismatch")
    # guards: promotion-needs-review-of-exact-candidate
    if t.receipt("review") != t.binding:
        return reject(ctx, "review-required")
    happened = ctx.observe.effect_happened(t)
    # guards: cas-base-exact
    if not (happened or not land or ctx.observe.target() == t.base):
        return reject(ctx, "cas-moved")
    effect = effect_name(ctx.task, t)
    effects: list[Effect] = []
    # guards: promotion-at-most-once
    if not happened:
        effects.append(Effect("land", (effect, t.candidate, t.base)) if land
                       else Effect("output", (effect, t.candidate, t.disposition)))
    new = advance(t, "effect-committed", effect_done=True,
                  receipts=t.with_receipts(effect=t.binding))
    facts = [("effect-committed", {"id": effect, "re-observed": happened})]
    return succeeded(ctx, new, facts=facts, effects=effects)


def target_moved(observe: Observe, t: TaskRecord) -> bool:
    """A land's target moved before the CAS (and the effect did not happen after all)."""
    return (t.phase == "effect-prepared" and t.disposition == "land"
            and not observe.effect_happened(t) and observe.target() != t.base)


def mark_repair(ctx: Ctx) -> Outcome:
    t = ctx.record
    if t.exit != "none" or not target_moved(ctx.observe, t):
        return reject(ctx, "illegal-phase-edge")
    new = leave_main_line(t, "needs-repair", "target-moved", finish_lease=False)
    return succeeded(ctx, new, facts=[("effect-void", {"id": effect_name(ctx.task, t)})])


def prepare_cleanup(ctx: Ctx) -> Outcome:
    """Plan removal of exactly this attempt's worktree, recording the bytes it holds."""
    t = ctx.record
    view = ctx.observe.worktree(t)
    plan = {"worktree": t.worktree_id, "content": view.content if view.present else None}
    return succeeded(ctx, advance(t, "cleanup-prepared"), facts=[("cleanup-planned", plan)])


def commit_cleanup(ctx: Ctx) -> Outcome:
    t = ctx.record
    view = ctx.observe.worktree(t)
    # guards: retained-work-never-erased
    if view.present and view.content != t.saved_work:
        return reject(ctx, "writer-not-quiescent")
    new = advance(t, "cleanup-committed", worktree_lease=False,
                  receipts=t.with_receipts(cleanup=t.binding))
    facts = [("worktree-removed", {"worktree": t.worktree_id,
                                   "content": view.content if view.present else None,
                                   "re-observed": not view.present})]
    effects = [Effect("remove-worktree", (t.worktree_id,))] if view.present else []
    return succeeded(ctx, new, facts=facts, effects=effects)


def save_graph(ctx: Ctx) -> Outcome:
    t = ctx.record
    b = t.binding
    # guards: done-iff-graphsave
    if any(t.receipt(k) != b for k in GRAPH_SAVE_NEEDS):
        return reject(ctx, "evidence-missing")
    new = release_owner(advance(t, "graph-saved", attempt_state="succeeded",
                                receipts=t.with_receipts(graph_save=b)))
    return succeeded(ctx, new)


def revise(ctx: Ctx) -> Outcome:
    t, r = ctx.record, ctx.request
    # guards: no-phase-skip
    if t.exit != "needs-repair":
        return reject(ctx, "illegal-phase-edge")
    view = ctx.observe.worktree(t)
    if not view.present:
        return reject(ctx, "writer-not-quiescent")
    if view.content != r.candidate:
        return reject(ctx, "candidate-mismatch")
    kept = t.saved_work is not None
    version = t.version + 1
    new = replace(
        t, phase="work-saved", exit="none", reason="none", revision=t.revision + 1,
        retained=t.saved_work if kept else t.retained,
        retained_base=t.base if kept else t.retained_base,
        saved_work=view.content, candidate=r.candidate, base=r.base, version=version,
        receipts=NO_RECEIPTS[:0] + (Binding(t.fence, r.candidate, r.base),) + NO_RECEIPTS[1:],
    )
    pin = Effect("pin", (f"worksave/{ctx.task}/f{t.fence}-v{version}", view.content))
    return succeeded(ctx, new, effects=[pin])


def block_upgrade(ctx: Ctx) -> Outcome:
    t = ctx.record
    if not (t.phase not in ("absent", "graph-saved") and t.exit == "none"):
        return reject(ctx, "illegal-phase-edge")
    return succeeded(ctx, leave_main_line(t, "upgrade-blocked", "version-skew"))


# --- operator and migration ---------------------------------------------------------------


def reset(ctx: Ctx) -> Outcome:
    t = ctx.record
    in_flight = t.running and t.reserved and t.exit == "none"
    if ctx.request.expected_generation != t.generation:
        return reject(ctx, "cas-moved")
    if t.abandoned:
        return reject(ctx, "held")
    # guards: terminal-never-resurrects, promotion-at-most-once
    if t.attempt_state == "succeeded" or in_flight or ctx.observe.effect_happened(t):
        return reject(ctx, "terminal-already")
    if t.exit == "needs-reconciliation":
        return reject(ctx, "held")
    effects: list[Effect] = []
    retained, retained_base = retain_work(ctx, t, effects)
    closed = close_attempt(ctx, t, "superseded", []) if t.running else t
    generation = t.generation + 1
    new = replace(
        closed, generation=generation, attempt=0, phase="absent", exit="none", reason="none",
        revision=0, candidate=None, base=None, version=0, disposition="none",
        receipts=NO_RECEIPTS, effect_done=False, retained=retained, retained_base=retained_base,
    )
    return succeeded(ctx, new, effects=effects, facts=[("generation-opened", {"generation": generation})])


def abandon(ctx: Ctx) -> Outcome:
    t = ctx.record
    effect_started = t.phase in EFFECT_PHASES and t.exit == "none"
    if t.abandoned or t.attempt_state == "succeeded" or effect_started:
        return reject(ctx, "terminal-already")
    effects: list[Effect] = []
    closed = close_attempt(ctx, t, "abandoned", effects) if t.running else t
    in_tx = t.phase in PRE_EFFECT_PHASES and t.exit == "none"
    new = replace(closed, abandoned=True)
    if in_tx:
        new = replace(new, exit="aborted-preserved", reason="operator-abort",
                      revision=t.revision + 1)
    return succeeded(ctx, new, effects=effects)


def reconcile(ctx: Ctx) -> Outcome:
    t = ctx.record
    if t.exit not in ("needs-reconciliation", "upgrade-blocked"):
        return reject(ctx, "illegal-phase-edge")
    legacy = t.exit == "needs-reconciliation"
    new = replace(t, exit="none", reason="none", revision=t.revision + 1,
                  phase="absent" if legacy else t.phase,
                  legacy_done=False if legacy else t.legacy_done)
    return succeeded(ctx, new)


def reconstruct(ctx: Ctx) -> Outcome:
    t, r = ctx.record, ctx.request
    if not (t.exit == "needs-reconciliation" and t.legacy_done):
        return reject(ctx, "illegal-phase-edge")
    if t.abandoned:
        return reject(ctx, "held")
    if t.running:
        return reject(ctx, "attempt-live")
    # guards: dependency-needs-done
    if not ctx.deps_done():
        return reject(ctx, "dependency-not-done")
    if ctx.observe.target() != r.candidate:
        return reject(ctx, "evidence-missing")
    fence = t.fence + 1
    b = Binding(fence, r.candidate, r.base)
    new = replace(
        t, fence=fence, attempt=t.attempt + 1, lease_epoch=t.lease_epoch + 1,
        attempt_state="succeeded", phase="graph-saved", exit="none", reason="none",
        revision=t.revision + 1, candidate=r.candidate, base=r.base,
        receipts=tuple(b for _ in NO_RECEIPTS), reconstructed=True, effect_done=True,
        legacy_done=False, imported=None,
        worktree_lease=False, session_lease=False, finish_lease=False,
    )
    return succeeded(ctx, new)


def legacy_done(ctx: Ctx) -> Outcome:
    """A legacy Done without evidence is held for reconciliation; on a task with anything
    in flight (or Done, or abandoned) the claim is kept as evidence only."""
    t = ctx.record
    inert = t.graph_saved or t.abandoned or t.reserved or t.exit != "none"
    facts = [evidence_fact("legacy-done", ctx.request.evidence)]
    # guards: terminal-never-resurrects
    if inert:
        return succeeded(ctx, t, kind=EVIDENCE_ONLY, facts=facts)
    new = leave_main_line(t, "needs-reconciliation", "legacy-unproven", legacy_done=True)
    return succeeded(ctx, new, facts=facts)


RULES: dict[str, Callable[[Ctx], Outcome]] = {
    "assign": assign, "dispatch": dispatch, "retry": retry, "resume": resume,
    "heartbeat": heartbeat, "heartbeat-timeout": heartbeat_timeout, "observe-eof": observe_eof,
    "probe-owner": probe_owner, "compaction": compaction, "ack-continuation": ack_continuation,
    "provider-failure": provider_failure, "message": message,
    "ownership-contention": ownership_contention, "log": log,
    "fail": fail, "declare-lost": declare_lost,
    "submit": submit, "quiesce": quiesce, "save-work": save_work,
    "seal-candidate": seal_candidate, "validate": validate, "request-review": request_review,
    "accept": accept, "record-disposition": record_disposition,
    "prepare-effect": prepare_effect, "commit-effect": commit_effect,
    "mark-repair": mark_repair, "prepare-cleanup": prepare_cleanup,
    "commit-cleanup": commit_cleanup, "save-graph": save_graph, "revise": revise,
    "block-upgrade": block_upgrade,
    "reset": reset, "abandon": abandon, "reconcile": reconcile,
    "reconstruct": reconstruct, "legacy-done": legacy_done,
}


# --- generic checks and the entry point ----------------------------------------------------


def capability_failure(ctx: Ctx) -> str | None:
    """Check 4: the request carries the exact K of the current attempt."""
    t, c = ctx.record, ctx.request.cap
    if t.attempt_state == "none":
        return "unknown-attempt"
    # guards: attempt-fencing
    if (c.generation, c.attempt, c.fence, c.lease_epoch) != \
            (t.generation, t.attempt, t.fence, t.lease_epoch):
        return "stale-capability"
    return None


def transaction_failure(ctx: Ctx) -> str | None:
    """Check 5: a running attempt, the expected phase and revision (CAS), a legal edge."""
    t, r = ctx.record, ctx.request
    # guards: first-terminal-wins, terminal-never-resurrects
    if not t.running:
        return "terminal-already"
    if t.visible_phase != r.expected_phase or t.revision != r.expected_revision:
        return "cas-moved"
    edge = EDGES.get(r.kind)
    # guards: no-phase-skip, promotion-needs-review-of-exact-candidate, done-iff-graphsave
    if edge is not None and not (t.exit == "none" and t.phase in edge[0]):
        return "illegal-phase-edge"
    return None


def decide(ctx: Ctx) -> Outcome:
    """Checks 2 to 6 for a request the journal has not seen (the task exists)."""
    r = ctx.request
    if r.needs_capability:
        # guards: attempt-fencing
        if r.cap is None or r.cap.graph != ctx.graph_id or r.cap.task != r.task:
            return reject(ctx, "stale-capability")
        code = capability_failure(ctx)
        if code:
            return reject(ctx, code)
    if r.kind in TRANSACTION_KINDS:
        code = transaction_failure(ctx)
        if code:
            return reject(ctx, code)
    return RULES[r.kind](ctx)
