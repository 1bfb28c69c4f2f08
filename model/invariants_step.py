"""The ``always`` properties of one step, each a named one-sentence predicate over the
pre-state, the request, the decision and the post-state: ``pred(s, r, d, s2)`` holds for
every decided request.
"""
from __future__ import annotations

import functools
import operator
from typing import Any

from .logic import all_of, any_of, implies, not_, one_of
from .predicates import deps_done, graph_saved, owner_alive, reserved, running
from .properties import pairs, prop, terminal
from .state import State, TaskState
from .rules_review import VALVE
from .vocab import (
    REVIEW_KINDS, Actor, AttemptState, Code, Contract, ReviewPhase, ReviewVerdict, DecisionKind as D, Exit, Failure, Kind, OwnerSeen, Phase, Reason, EDGES,
    EVIDENCE_KINDS,
)


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


@prop("terminal-never-resurrects", scope="step", incidents=(14, 32))
def terminal_never_resurrects(s: State, r, d, s2: State) -> Any:
    """A Done task stays Done until an operator reopens it into a new generation, and a terminal attempt never runs again."""
    return all_of(*[all_of(implies(graph_saved(t), any_of(graph_saved(t2),
                                                          t2.generation != t.generation)),
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


@prop("retained-work-never-erased", scope="step", incidents=(2, 4, 3, 27, 28))
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


def _revoked(s: State, r) -> bool:
    """The sender's credential was revoked: it is answered as an unknown one, its journal
    entries no longer answer it."""
    return r.principal is not None and r.principal in s.revoked


@prop("idempotent-replay", scope="step", incidents=(5, 7, 13))
def idempotent_replay(s: State, r, d, s2: State) -> Any:
    """A used key with the same bytes (from a sender not revoked) returns the stored response
    and changes nothing."""
    if r.key is None or _revoked(s, r):
        return True
    used, same, kind, code = s.journal.lookup(r.journal_key, r.digest)
    return implies(all_of(used, same), all_of(
        d.kind == D.DUPLICATE, d.original_kind == kind, d.original_code == code,
        _same_state(s, s2)))


@prop("idempotency-conflict-holds", scope="step", incidents=(5,))
def idempotency_conflict_holds(s: State, r, d, s2: State) -> Any:
    """A used key with different bytes (from a sender not revoked) is rejected as an idempotency
    conflict and changes nothing."""
    if r.key is None or _revoked(s, r):
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


@prop("token-required", scope="step", incidents=(19, 20))
def token_required(s: State, r, d, s2: State) -> Any:
    """A request of an attempt's own process (worker, wrapper, broker) naming K changes state only when it presents that attempt's capability token."""
    if not r.needs_token or r.cap is None or r.task not in s.graph.index:
        return True
    t = s.tasks[s.graph.index[r.task]]
    return implies(_changed(r, d), all_of(t.token != 0, r.token == t.token))


@prop("continuation-needs-token", scope="step", incidents=(22, 3, 11))
def continuation_needs_token(s: State, r, d, s2: State) -> Any:
    """A new owner on the same attempt is installed only by a resume presenting the continued attempt's token, and the continuation holds the token minted for it."""
    def ok(t, t2):
        continued = all_of(running(t), running(t2), t.fence == t2.fence,
                           any_of(t.owner_pid != t2.owner_pid, t.owner_birth != t2.owner_birth))
        return implies(continued, all_of(r.kind == Kind.RESUME, t.token != 0,
                                         r.token == t.token, t2.token == r.mint))
    return all_of(*[ok(t, t2) for _, t, t2 in pairs(s, s2)])


@prop("no-attempt-opens-paused-or-early", scope="step", incidents=(44,))
def no_attempt_opens_paused_or_early(s: State, r, d, s2: State) -> Any:
    """No path opens an attempt on a task the operator paused, nor before its not-before time."""
    if r.kind not in (Kind.DISPATCH, Kind.RETRY) or r.task not in s.graph.index:
        return True
    t = s.tasks[s.graph.index[r.task]]
    return implies(d.kind == D.APPLIED, all_of(not_(t.paused), s.now >= t.not_before))


@prop("no-generation-before-owner-exit", scope="step", incidents=(45, 17, 32))
def no_generation_before_owner_exit(s: State, r, d, s2: State) -> Any:
    """WG's reopen order: a task's next generation opens only once its old attempt's exact owner is proven exited or released, by one step that raises the generation by exactly one and settles the pending intent, and a reset over an owner that may be alive only persists its intent."""
    def ok(t, t2):
        opened = t2.generation != t.generation
        intended = all_of(t2.reopening, not_(t.reopening))
        return all_of(
            implies(opened, all_of(any_of(not_(running(t)), t.owner_seen == OwnerSeen.DEAD),
                                   t2.generation == t.generation + 1, not_(t2.reopening))),
            implies(intended, t2.generation == t.generation))
    return all_of(*[ok(t, t2) for _, t, t2 in pairs(s, s2)])


@prop("no-attempt-opens-on-unavailable-route", scope="step", incidents=(50,))
def no_attempt_opens_on_unavailable_route(s: State, r, d, s2: State) -> Any:
    """No path opens an attempt on a task whose provider route's breaker is open (the route unavailable)."""
    if r.kind not in (Kind.DISPATCH, Kind.RETRY) or r.task not in s.graph.index:
        return True
    t = s.tasks[s.graph.index[r.task]]
    return implies(d.kind == D.APPLIED, not_(t.route_unavailable))


@prop("route-closes-only-on-a-due-succeeded-probe", scope="step", incidents=(50,))
def route_closes_only_on_a_due_succeeded_probe(s: State, r, d, s2: State) -> Any:
    """A provider route's open breaker closes only by the daemon's probe of it, acknowledged succeeded once its probe time has come."""
    probe = all_of(r.kind == Kind.PROBE_ROUTE, d.kind == D.APPLIED, r.succeeded != 0)
    return all_of(*[implies(all_of(t.route_unavailable, not_(t2.route_unavailable)),
                            all_of(probe, s.now >= t.probe_at))
                    for _, t, t2 in pairs(s, s2)])


@prop("route-opens-only-on-its-failure", scope="step", incidents=(50,))
def route_opens_only_on_its_failure(s: State, r, d, s2: State) -> Any:
    """A provider route's breaker opens only on a provider failure reported on that route."""
    return all_of(*[implies(all_of(not_(t.route_unavailable), t2.route_unavailable),
                            all_of(r.kind == Kind.PROVIDER_FAILURE, r.route != 0,
                                   t2.route == r.route))
                    for _, t, t2 in pairs(s, s2)])


@prop("semantic-failure-never-auto-retried", scope="step", incidents=(31,))
def semantic_failure_never_auto_retried(s: State, r, d, s2: State) -> Any:
    """An attempt whose work was rejected (a semantic failure) is never followed by an automatic retry: only an operator's retry opens the next attempt."""
    if r.kind != Kind.DISPATCH or r.task not in s.graph.index:
        return True
    t = s.tasks[s.graph.index[r.task]]
    rejected = all_of(one_of(t.attempt_state, (AttemptState.FAILED, AttemptState.LOST)),
                      t.failure == Failure.SEMANTIC)
    return implies(rejected, d.kind != D.APPLIED)


@prop("wait-left-only-by-its-evidence", scope="step", incidents=(33,))
def wait_left_only_by_its_evidence(s: State, r, d, s2: State) -> Any:
    """A task's external wait ends only by a delivery naming what it waits for, by the daemon once its deadline has passed, or by the operator's new generation."""
    def ok(i, t, t2):
        mine = r.task == s.graph.tasks[i]
        released = any_of(
            all_of(r.kind == Kind.DELIVER, r.correlation == t.waiting_on),
            all_of(r.kind == Kind.EXPIRE_WAIT, t.wait_deadline != 0, s.now >= t.wait_deadline),
            r.kind == Kind.RESET)
        return implies(all_of(t.waiting_on != 0, t2.waiting_on != t.waiting_on),
                       all_of(mine, released))
    return all_of(*[ok(i, t, t2) for i, t, t2 in pairs(s, s2)])


@prop("attempt-opens-on-done-dependencies", scope="step", incidents=(1, 32))
def attempt_opens_on_done_dependencies(s: State, r, d, s2: State) -> Any:
    """A new attempt opens only while every dependency of its task is dependency-satisfying Done."""
    return all_of(*[implies(all_of(running(t2), t2.attempt != t.attempt), deps_done(s, i))
                    for i, t, t2 in pairs(s, s2)])


@prop("rejection-changes-nothing", scope="step", incidents=(10, 12, 27))
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


# --- the review valve (WG's SimpleLand theorems) --------------------------------


def _valve_task(s: State, r):
    """The task a review-valve request names (``None`` for another kind or an unknown task)."""
    if r.kind not in REVIEW_KINDS or r.task not in s.graph.index:
        return None
    return s.graph.index[r.task]


def _valve_kept(t: TaskState, t2: TaskState) -> Any:
    """Every fact of the valve is as it was."""
    return all_of(*[getattr(t2, f) == getattr(t, f) for f in _VALVE_FIELDS])


_VALVE_FIELDS = tuple(sorted(VALVE))


@prop("review-changed-manifest-invalidates", scope="step", incidents=(46,))
def review_changed_manifest_invalidates(s: State, r, d, s2: State) -> Any:
    """A manifest that replaces another leaves no FLIP, no evaluation and no publication behind (WG's theorem changed_manifest_invalidates_review)."""
    i = _valve_task(s, r)
    if i is None or r.kind != Kind.SUBMIT_MANIFEST:
        return True
    t, t2 = s.tasks[i], s2.tasks[i]
    changed = any_of(t2.manifest != t.manifest, t2.manifest_requirements != t.manifest_requirements,
                     t2.manifest_output != t.manifest_output, t2.contract != t.contract,
                     t2.manifest_main != t.manifest_main)
    return implies(changed, all_of(t2.flip == ReviewVerdict.ABSENT,
                                   t2.evaluation == ReviewVerdict.ABSENT,
                                   t2.publication == 0, t2.publications == 0))


@prop("review-stale-main-cannot-land", scope="step", incidents=(46,))
def review_stale_main_cannot_land(s: State, r, d, s2: State) -> Any:
    """A Land manifest is never published onto a main other than the one it integrated: such a publication changes nothing (WG's theorem stale_main_cannot_land)."""
    i = _valve_task(s, r)
    if i is None or r.kind != Kind.PUBLISH:
        return True
    t = s.tasks[i]
    stale = all_of(t.contract == Contract.LAND, r.base != t.manifest_main)
    return implies(stale, _valve_kept(t, s2.tasks[i]))


@prop("review-nonpassing-eval-cannot-publish", scope="step", incidents=(46,))
def review_nonpassing_eval_cannot_publish(s: State, r, d, s2: State) -> Any:
    """While the evaluation has not passed (rejected, unavailable, incomplete or absent), a publication changes nothing (WG's theorem nonpassing_eval_cannot_publish)."""
    i = _valve_task(s, r)
    if i is None or r.kind != Kind.PUBLISH:
        return True
    t = s.tasks[i]
    return implies(t.evaluation != ReviewVerdict.PASS, _valve_kept(t, s2.tasks[i]))


@prop("review-terminal-success-inert", scope="step", incidents=(46,))
def review_terminal_success_inert(s: State, r, d, s2: State) -> Any:
    """Once a valve is Done, no request changes its task's valve, its publication or its reviews (WG's theorem terminal_success_is_inert)."""
    def ok(t, t2):
        return implies(t.review_phase == ReviewPhase.DONE, _valve_kept(t, t2))
    return all_of(*[ok(t, t2) for _, t, t2 in pairs(s, s2)])


@prop("review-no-event-replaces-source", scope="step", incidents=(46,))
def review_no_event_replaces_source(s: State, r, d, s2: State) -> Any:
    """No request of the review valve opens, closes or replaces an attempt, its owner or its worktree, nor moves the target (WG's theorem no_event_replaces_source)."""
    if r.kind not in REVIEW_KINDS:
        return True
    kept = [getattr(t2, f) == getattr(t, f) for _, t, t2 in pairs(s, s2) for f in _SOURCE]
    return all_of(s2.target == s.target, *kept)


_SOURCE = ("generation", "attempt", "fence", "lease_epoch", "attempt_state", "token",
           "owner_pid", "owner_birth", "session", "wrapper_epoch", "child_epoch",
           "worktree_lease", "session_lease", "worktree", "phase", "candidate")


@prop("review-one-source-owner", scope="step", incidents=(46,))
def review_one_source_owner(s: State, r, d, s2: State) -> Any:
    """Only the running attempt's own process (its exact K and token) submits, completes or fails a valve; a reviewer never does (WG's non-negotiable invariant one source owner)."""
    i = _valve_task(s, r)
    if i is None or r.kind not in (Kind.SUBMIT_MANIFEST, Kind.COMPLETE, Kind.FAIL_REVIEW):
        return True
    t = s.tasks[i]
    decided = one_of(d.kind, (D.APPLIED, D.EVIDENCE_ONLY))    # answered now, not a replay
    if r.cap is None:
        return not_(decided)
    own = all_of(t.attempt_state != AttemptState.NONE, t.generation == r.cap.generation,
                 t.attempt == r.cap.attempt, t.fence == r.cap.fence, t.token != 0,
                 t.token == r.token, one_of(r.actor, (Actor.WORKER, Actor.WRAPPER)))
    return implies(decided, own)


@prop("review-unavailable-is-not-rejection", scope="step", incidents=(46,))
def review_unavailable_is_not_rejection(s: State, r, d, s2: State) -> Any:
    """An unavailable reviewer's verdict neither blocks nor fails the valve: it waits for the review to be asked again (WG's non-negotiable invariant: an unavailable reviewer is not a rejection)."""
    i = _valve_task(s, r)
    if i is None or r.kind not in (Kind.RECORD_FLIP, Kind.RECORD_EVAL):
        return True
    t2 = s2.tasks[i]
    return implies(all_of(d.kind == D.APPLIED, r.review == ReviewVerdict.UNAVAILABLE),
                   all_of(t2.review_phase == ReviewPhase.REVIEW_UNAVAILABLE,
                          t2.review_failure == s.tasks[i].review_failure))


@prop("review-explore-publishes-without-git", scope="step", incidents=(46,))
def review_explore_publishes_without_git(s: State, r, d, s2: State) -> Any:
    """A Report or Explore manifest is published whatever main was observed, and no publication moves git main (WG's scenario explore_publishes_without_git_main)."""
    i = _valve_task(s, r)
    if i is None or r.kind != Kind.PUBLISH:
        return True
    t = s.tasks[i]
    return all_of(s2.target == s.target,
                  implies(t.contract != Contract.LAND, d.code != Code.MAIN_MOVED))


# --- a completion receipted before its transaction (WG's runtime reducer) -------


@prop("completion-receipt-never-lost-or-replaced", scope="step", incidents=(49,))
def completion_receipt_kept(s: State, r, d, s2: State) -> Any:
    """An attempt's completion receipt, once recorded, is neither lost nor replaced by a second one: only a new attempt (a new fence) starts without it."""
    return all_of(*[implies(all_of(t.completion_receipt != 0, t2.fence == t.fence), t2.completion_receipt == t.completion_receipt)
                    for _, t, t2 in pairs(s, s2)])

