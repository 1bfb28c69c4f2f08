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
"""
from __future__ import annotations

import functools
import operator
from dataclasses import dataclass
from typing import Any, Callable

from . import liveness as _liveness
from .logic import all_of, any_of, count, iff, implies, not_, one_of
from .projections import WAYS, WAYS_BY_NAME, finished, status
from .predicates import (
    deps_done, graph_saved, has_receipt, owner_alive, receipt_of,
    reserved, running,
)
from .state import State, TaskState
from .vocab import (
    AttemptState as AS, Code, DecisionKind as D, Exit, Kind, OwnerSeen, Phase,
    Reason, Receipt, Status, EDGES, EVIDENCE_KINDS, TERMINAL_ATTEMPT, Way,
)


@dataclass(frozen=True)
class Property:
    """A named property. State properties are written per task: ``pred(s, i, t)``
    must hold for every task ``i``; step properties get ``(s, r, d, s2)``."""

    id: str
    kind: str          # "always" | "sometimes" | "assume" | "eventually"
    scope: str         # "state" | "step" | "fairness" (an assumption about infinite runs)
    doc: str
    pred: Callable[..., Any]
    incidents: tuple[int, ...] = ()

    def holds(self, *args) -> Any:
        """For a state property, ``holds(s)``; for a step property, ``holds(s, r, d, s2)``."""
        if self.scope in ("state", "fairness"):
            (s,) = args
            combine = any_of if self.kind == "sometimes" else all_of
            return combine(*[self.pred(s, i, t) for i, t in enumerate(s.tasks)])
        return self.pred(*args)

    def holds_for(self, s: State, i: int) -> Any:
        """A state property for one task."""
        return self.pred(s, i, s.tasks[i])


REGISTRY: dict[str, Property] = {}


def prop(id: str, kind: str = "always", scope: str = "state", incidents: tuple[int, ...] = ()):
    def register(fn):
        doc = (fn.__doc__ or "").strip()
        if not doc:
            raise ValueError(f"property {id} needs a one-sentence docstring")
        REGISTRY[id] = Property(id, kind, scope, doc, fn, incidents)
        return fn
    return register


def each_task(s: State, pred: Callable[[State, int, TaskState], Any]) -> Any:
    return all_of(*[pred(s, i, t) for i, t in enumerate(s.tasks)])


def any_task(s: State, pred: Callable[[State, int, TaskState], Any]) -> Any:
    return any_of(*[pred(s, i, t) for i, t in enumerate(s.tasks)])


_last_pairs: list = [None, None, None]


def pairs(s: State, s2: State):
    """(index, before, after) for every task the step may have changed.

    A task object that is identical before and after cannot violate any step
    property (each one is trivially true for an unchanged task), so it is skipped.
    The last answer is kept: every step property asks for the same pair in turn.
    """
    if _last_pairs[0] is s and _last_pairs[1] is s2:
        return _last_pairs[2]
    out = [(i, t, t2) for i, (t, t2) in enumerate(zip(s.tasks, s2.tasks)) if t is not t2]
    _last_pairs[:] = [s, s2, out]
    return out


def terminal(t: TaskState) -> Any:
    return one_of(t.attempt_state, TERMINAL_ATTEMPT)


ALL_RECEIPTS = tuple(Receipt)

# --- always: state ------------------------------------------------------------


@prop("done-iff-graphsave", incidents=(1, 2, 15))
def done_iff_graphsave(s: State, i: int, t: TaskState) -> Any:
    """A task is Done iff a GraphSave of its current attempt exists whose receipts all exist and agree on K, candidate and base."""
    gs = receipt_of(t, Receipt.GRAPH_SAVE)
    agree = all_of(gs.fence == t.fence, t.fence != 0, t.exit == Exit.NONE,
                   *[receipt_of(t, k) == gs for k in ALL_RECEIPTS])
    return iff(status(t) == Status.DONE, agree)


@prop("dependency-needs-done", incidents=(1, 15))
def dependency_needs_done(s: State, i: int, t: TaskState) -> Any:
    """An attempt runs or succeeds only while every dependency is dependency-satisfying Done."""
    return implies(one_of(t.attempt_state, (AS.RUNNING, AS.SUCCEEDED)), deps_done(s, i))


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
    """A task's external effect (promotion or output) happens at most once."""
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


@prop("exactly-one-way-forward", incidents=(4, 9))
def exactly_one_way_forward(s: State, i: int, t: TaskState) -> Any:
    """Every unfinished task has exactly one way forward."""
    return implies(not_(finished(t)), count([w.enabled(s, i) for w in WAYS]) == 1)


@prop("no-dead-owner-in-progress-without-action", incidents=(4, 11))
def no_dead_owner_without_action(s: State, i: int, t: TaskState) -> Any:
    """A running attempt whose owner is proven dead is never planned as a live owner, and without a completion in flight it has a scheduled action or a hold."""
    acting = any_of(*[w.enabled(s, i) for w in WAYS if w.way in (Way.SCHEDULED, Way.HOLD)])
    live = WAYS_BY_NAME["live-owner"].enabled(s, i)
    return implies(all_of(running(t), t.owner_seen == OwnerSeen.DEAD),
                   all_of(not_(live), any_of(reserved(t), acting)))


@prop("compaction-occurrences-counted-once", incidents=(7, 8))
def compactions_counted_once(s: State, i: int, t: TaskState) -> Any:
    """Compactions, continuations and acknowledgements equal their distinct recorded occurrences."""
    n = lambda kind: t.evidence.count(lambda e: e[0] == kind)
    return all_of(t.compactions == n("compaction"), t.continuations == n("continuation"),
                  t.acks == n("ack"), t.acks <= t.continuations,
                  t.provider_failures == n("provider-failure"))


# --- always: step -------------------------------------------------------------


def _changed(r, d) -> Any:
    return one_of(d.kind, (D.APPLIED, D.EVIDENCE_ONLY))


@prop("attempt-fencing", scope="step", incidents=(10,))
def attempt_fencing(s: State, r, d, s2: State) -> Any:
    """A request carrying K changes state only when K matches the current attempt exactly."""
    if not r.needs_capability or r.cap is None or r.task not in s.graph.index:
        return True
    i = s.graph.index[r.task]
    t = s.tasks[i]
    c = r.cap
    exact = all_of(t.generation == c.generation, t.attempt == c.attempt, t.fence == c.fence,
                   t.lease_epoch == c.lease_epoch, c.graph == s.graph.graph_id)
    return implies(_changed(r, d), exact)


@prop("single-live-owner", scope="step", incidents=(16, 3))
def single_live_owner(s: State, r, d, s2: State) -> Any:
    """A task's owner changes only after the previous owner is proven dead, or its attempt is closed or stuck."""
    def ok(i, t, t2):
        new_owner = all_of(running(t2), any_of(t.owner_pid != t2.owner_pid,
                                               t.owner_birth != t2.owner_birth, t.fence != t2.fence))
        stuck = any_of(t.owner_seen == OwnerSeen.DEAD,
                       one_of(t.exit, (Exit.NEEDS_REPAIR, Exit.ABORTED_PRESERVED)))
        return implies(all_of(running(t), new_owner), stuck)
    return all_of(*[ok(i, t, t2) for i, t, t2 in pairs(s, s2)])


@prop("first-terminal-wins", scope="step", incidents=(17, 7))
def first_terminal_wins(s: State, r, d, s2: State) -> Any:
    """Once an attempt is terminal its outcome never changes."""
    return all_of(*[implies(all_of(terminal(t), t.fence == t2.fence),
                            t2.attempt_state == t.attempt_state) for _, t, t2 in pairs(s, s2)])


@prop("terminal-never-resurrects", scope="step", incidents=(14,))
def terminal_never_resurrects(s: State, r, d, s2: State) -> Any:
    """A Done task stays Done, and a terminal attempt never runs again."""
    return all_of(*[all_of(implies(graph_saved(t), graph_saved(t2)),
                           implies(all_of(terminal(t), t.fence == t2.fence), not_(running(t2))))
                    for _, t, t2 in pairs(s, s2)])


@prop("evidence-cannot-terminalize-live-owner", scope="step", incidents=(6, 9))
def evidence_cannot_terminalize(s: State, r, d, s2: State) -> Any:
    """Evidence never terminalizes an attempt whose exact owner is alive."""
    if r.kind not in EVIDENCE_KINDS:
        return True
    return all_of(*[implies(all_of(running(t), owner_alive(t)), running(t2))
                    for _, t, t2 in pairs(s, s2)])


@prop("liveness-needs-exact-birth", scope="step", incidents=(11, 6))
def liveness_needs_exact_birth(s: State, r, d, s2: State) -> Any:
    """The kernel believes an owner live only when the pid's birth time matches the owner's."""
    return all_of(*[implies(all_of(t2.owner_seen == OwnerSeen.LIVE, t.owner_seen != OwnerSeen.LIVE),
                            owner_alive(t2)) for _, t, t2 in pairs(s, s2)])


@prop("cas-base-exact", scope="step", incidents=(12,))
def cas_base_exact(s: State, r, d, s2: State) -> Any:
    """The kernel moves the target only from the exact base to the exact candidate."""
    if r.kind != Kind.COMMIT_EFFECT or r.task not in s.graph.index:
        return s2.target == s.target
    t = s.task(r.task)
    return implies(s2.target != s.target, all_of(s.target == t.base, s2.target == t.candidate))


@prop("target-history-grows", scope="step", incidents=(12,))
def target_history_grows(s: State, r, d, s2: State) -> Any:
    """The target only moves forward: a land moves it from the very commit its candidate was built on, so no land drops a commit."""
    if r.kind != Kind.COMMIT_EFFECT or r.task not in s.graph.index:
        return s2.target == s.target
    t = s.task(r.task)
    return implies(s2.target != s.target, all_of(s.target == t.built_on, s2.target == t.candidate))


@prop("moved-target-needs-repair", scope="step", incidents=(12,))
def moved_target_needs_repair(s: State, r, d, s2: State) -> Any:
    """A land whose target moved before the compare-and-swap goes to needs-repair with its candidate and saved work kept and nothing promoted."""
    def ok(t, t2):
        marked = all_of(t.reason != Reason.TARGET_MOVED, t2.reason == Reason.TARGET_MOVED)
        return implies(marked, all_of(
            t2.exit == Exit.NEEDS_REPAIR, s.target != t.base, s2.target == s.target,
            t2.candidate == t.candidate, t2.saved_work == t.saved_work,
            not_(t2.effect_done), t2.promotions == t.promotions))
    return all_of(*[ok(t, t2) for _, t, t2 in pairs(s, s2)])


def _legal_move(t: TaskState, t2: TaskState) -> Any:
    if (t2.phase == t.phase) is True:           # short-circuit on concrete states only
        return True
    main = any_of(*[all_of(one_of(t.phase, srcs), t2.phase == dst) for srcs, dst in EDGES.values()])
    return any_of(
        t2.phase == t.phase,
        all_of(t.exit == Exit.NONE, main),
        all_of(t.exit == Exit.NEEDS_REPAIR, t2.phase == Phase.WORK_SAVED),
        all_of(t.exit == Exit.NEEDS_RECONCILIATION, t2.phase == Phase.ABSENT),
        all_of(t.exit == Exit.NEEDS_RECONCILIATION, t2.phase == Phase.GRAPH_SAVED,
               t2.reconstructed),
    )


@prop("no-phase-skip", scope="step", incidents=(13, 1))
def no_phase_skip(s: State, r, d, s2: State) -> Any:
    """Within one attempt the transaction moves only along its legal edges, one at a time."""
    def ok(t, t2):
        same_attempt = all_of(t.fence == t2.fence, t.generation == t2.generation)
        if same_attempt is False:                # short-circuit on concrete states only
            return True
        return implies(same_attempt, _legal_move(t, t2))
    return all_of(*[ok(t, t2) for _, t, t2 in pairs(s, s2)])


@prop("retained-work-never-erased", scope="step", incidents=(2, 4, 3, 24, 25))
def retained_work_never_erased(s: State, r, d, s2: State) -> Any:
    """Bytes in a worktree are never removed or replaced by the kernel unless saved or retained."""
    def ok(t, t2):
        dirty = all_of(t.worktree_present, t.worktree != t.origin)
        gone = any_of(not_(t2.worktree_present), t2.worktree != t.worktree, t2.fence != t.fence)
        kept = any_of(t2.retained == t.worktree, t2.saved_work == t.worktree)
        return implies(all_of(dirty, gone), kept)
    return all_of(*[ok(t, t2) for _, t, t2 in pairs(s, s2)])


@prop("retry-is-not-continuation-without-proof", scope="step", incidents=(3, 11))
def retry_needs_proof(s: State, r, d, s2: State) -> Any:
    """A new owner on the same attempt needs proven death, the same session and no terminal intent; a new attempt says what it imports."""
    def ok(t, t2):
        continued = all_of(running(t), running(t2), t.fence == t2.fence,
                           any_of(t.owner_pid != t2.owner_pid, t.owner_birth != t2.owner_birth))
        proof = all_of(t.owner_seen == OwnerSeen.DEAD, t2.session == t.session,
                       not_(reserved(t)), t2.worktree_present)
        declared = implies(t2.fence != t.fence, t2.imported == r.imports)
        return all_of(implies(continued, proof), declared)
    return all_of(*[ok(t, t2) for _, t, t2 in pairs(s, s2)])


@prop("idempotent-replay", scope="step", incidents=(5, 7, 13))
def idempotent_replay(s: State, r, d, s2: State) -> Any:
    """A used key with the same bytes returns the stored response and changes nothing."""
    if r.key is None:
        return True
    used, same, kind, code = s.journal.lookup(r.journal_key, r.digest)
    return implies(all_of(used, same), all_of(
        d.kind == D.DUPLICATE, d.original_kind == kind, d.original_code == code,
        _same_state(s, s2)))


@prop("idempotency-conflict-holds", scope="step", incidents=(5,))
def idempotency_conflict_holds(s: State, r, d, s2: State) -> Any:
    """A used key with different bytes is rejected as an idempotency conflict and changes nothing."""
    if r.key is None:
        return True
    used, same, _, _ = s.journal.lookup(r.journal_key, r.digest)
    return implies(all_of(used, not_(same)), all_of(
        d.kind == D.REJECTED, d.code == Code.IDEMPOTENCY_CONFLICT, _same_state(s, s2)))


@prop("role-held", scope="step", incidents=(18, 23))
def role_held(s: State, r, d, s2: State) -> Any:
    """A request is applied only for an authenticated principal holding the role it claims; any other changes nothing but its sender's journal."""
    from dataclasses import replace
    from .kernel import authenticated, role_held as holds
    if authenticated(s, r) and holds(s, r):
        return True
    return all_of(d.kind != D.APPLIED, d.kind != D.EVIDENCE_ONLY,
                  _same_state(s, replace(s2, journal=s.journal)))


@prop("keys-per-principal", scope="step", incidents=(18, 21, 23))
def keys_per_principal(s: State, r, d, s2: State) -> Any:
    """A key its sender has not used is decided afresh: no request is answered from, or conflicts with, another principal's journal entry."""
    if r.key is None:
        return True
    used, _, _, _ = s.journal.lookup(r.journal_key, r.digest)
    return implies(not_(used), all_of(d.kind != D.DUPLICATE, d.code != Code.IDEMPOTENCY_CONFLICT))


@prop("rejection-changes-nothing", scope="step", incidents=(10, 12, 24))
def rejection_changes_nothing(s: State, r, d, s2: State) -> Any:
    """A rejected request changes nothing but its own journal entry."""
    from dataclasses import replace
    if s2 is s or (isinstance(d.kind, int) and d.kind != D.REJECTED):
        return True
    return implies(d.kind == D.REJECTED, _same_state(s, replace(s2, journal=s.journal)))


@prop("unchanged-outside-touches", scope="step", incidents=(14,))
def unchanged_outside_touches(s: State, r, d, s2: State) -> Any:
    """A request changes only its own task, and only the fields its transition declares."""
    from .rules import TOUCHES
    from .state import TASK_FIELDS
    from .symbolic_eq import value_eq
    allowed = TOUCHES[r.kind]
    i = s.graph.index.get(r.task)
    if isinstance(s.target, int) and isinstance(s2.target, int):   # concrete: plain comparison
        untouched = _untouched(r.kind)
        for j, t, t2 in pairs(s, s2):
            if j != i or untouched(t) != untouched(t2):
                return False
        return ("target" in allowed or s.target == s2.target) and s.now == s2.now
    parts = []
    for j, t, t2 in pairs(s, s2):
        if j != i:
            parts.append(value_eq(t, t2))
            continue
        parts += [value_eq(getattr(t, f), getattr(t2, f)) for f in TASK_FIELDS
                  if f not in allowed and f != "evidence"]
        if "evidence" not in allowed:
            parts.append(value_eq(t.evidence, t2.evidence))
    if "target" not in allowed:
        parts.append(value_eq(s.target, s2.target))
    parts.append(value_eq(s.now, s2.now))
    return all_of(*parts)


@functools.lru_cache(maxsize=None)
def _untouched(kind: Kind):
    """A getter of the fields ``kind`` must leave unchanged, as one tuple."""
    from .rules import TOUCHES
    from .state import TASK_FIELDS
    return operator.attrgetter(*[f for f in TASK_FIELDS if f not in TOUCHES[kind]])


def _same_state(s: State, s2: State) -> Any:
    from .symbolic_eq import state_eq
    return state_eq(s, s2)


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
    "retry-reached": ("a second attempt runs in one generation",
                      lambda s, i, t: all_of(t.attempt >= 2, running(t))),
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
    "compaction-continued": ("a compaction earns a continuation that is acknowledged",
                             lambda s, i, t: t.acks >= 1),
}

for _id, (_doc, _pred) in SOMETIMES.items():
    REGISTRY[_id] = Property(_id, "sometimes", "state", _doc[0].upper() + _doc[1:] + ".", _pred)


def always(scope: str | None = None) -> list[Property]:
    return [p for p in REGISTRY.values() if p.kind == "always" and (scope is None or p.scope == scope)]


def sometimes() -> list[Property]:
    return [p for p in REGISTRY.values() if p.kind == "sometimes"]


def assumptions(scope: str | None = None) -> list[Property]:
    """The environment assumptions (kind ``assume``): assumed by the checkers, not guaranteed."""
    return [p for p in REGISTRY.values() if p.kind == "assume" and (scope is None or p.scope == scope)]


def outside_assumptions(s: State) -> list[str]:
    """Ids of environment assumptions that fail in concrete state ``s``."""
    return [p.id for p in assumptions("state") if p.holds(s) is not True]


def violations(s: State) -> list[str]:
    """Ids of state invariants that fail in concrete state ``s``."""
    return [p.id for p in always("state") if p.holds(s) is not True]


def step_violations(s: State, r, d, s2: State) -> list[str]:
    """Ids of step invariants that fail for one concrete decided request."""
    return [p.id for p in always("step") if p.holds(s, r, d, s2) is not True]


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


def fairness() -> list[Property]:
    """The fairness assumptions (scope ``fairness``) the eventually-properties are checked under."""
    return assumptions("fairness")


def eventually() -> list[Property]:
    return [p for p in REGISTRY.values() if p.kind == "eventually"]
