"""The mutant catalogue: named, known-bad variants of the model, one or more per incident.

A mutant is an alternative rule table (``decide`` takes ``rules=``), an
alternative reducer, or an alternative for one function the rules or the
planner use, installed only inside ``Semantics.active()`` and always
restored. A mutant rule wraps the model's own rule and changes one thing: it
drops a guard, or changes the update. Each mutant states the invariant that
catches it, the bounded instance and the depth within which bounded model
checking must find a counterexample; ``kill`` runs the inductive proof of that
invariant on the mutant, which must fail (a failure through a lemma or another
invariant is reported apart), explores the instance with the mutant's rules,
and replays the incident traces through an injected callback (the oracle
wing's ``mutant_traces.trace_verdicts``). A surviving mutant means the checks
have lost their teeth.
"""
from __future__ import annotations

from dataclasses import fields as dc_fields, replace as dc_replace
from typing import Callable

from wgk.model import (
    kernel, projections, rules as R, rules_attempt, rules_evidence, rules_operator, rules_review,
    rules_route, rules_save,
)
from wgk.model.actions import KEYS, Instance
from wgk.model.kernel import Decision
from wgk.model.requests import Request
from wgk.model.logic import all_of, any_of, ite, not_, one_of
from wgk.model.rules import RULES, guarded, running
from wgk.model.state import NO_RECEIPT, replace_task
from wgk.model.vocab import (
    AttemptState as AS, Code, DecisionKind as D, Exit, Kind as K, OwnerSeen, Phase, Receipt,
    ReviewPhase as RP, ReviewVerdict as RV,
)

from wgk.conformance.z3 import model_base
from wgk.conformance.z3.kills import (  # noqa: F401  (re-exported: callers import them from here)
    EXPLORE_STATES, explore_mutant, first_kill, kill, refute, refute_other,
)
from wgk.conformance.z3.mutation import (  # noqa: F401  (re-exported)
    Mutant, patched, task_update, with_check, with_update, without_checks,
)


def _close_lost(t, t2, s, r):
    return ite(running(t), R.close_attempt(t2, AS.LOST), t2)


def _delivering_anything(s, i, t, r):
    """Delivery that releases whatever the event names."""
    return guarded([], lambda: s.put(i, replace_task(
        t, waiting_on=0, wait_deadline=0,
        evidence=R.note_evidence(t, "deliver", r.evidence))))


def _deps_or_legacy(s, i, t, r):
    return all_of(*[any_of(R.graph_saved(s.tasks[d]), s.tasks[d].legacy_done)
                    for d in s.graph.deps[i]])


def _decide_reexecuting(s, r, rules=RULES):
    """A reducer that forgets what it answered: a repeated key is decided (and executed) again."""
    if r.key is None:
        return kernel.decide_fresh(s, r, rules)
    used, same, _, _ = s.journal.lookup(r.key, r.digest)
    d, s2 = kernel.decide_fresh(s, r, rules)
    fresh = dc_replace(s2, journal=s2.journal.put(r.key, r.digest, d.kind, d.code))
    conflict = all_of(used, not_(same))
    return (Decision(ite(conflict, D.REJECTED, d.kind),
                     ite(conflict, Code.IDEMPOTENCY_CONFLICT, d.code)),
            ite(conflict, s, fresh))


def _trusting_labels(s, r):
    """The sender's principal is ignored: the actor label alone decides the role."""
    if r.principal is None:
        return r
    trusted = _TrustedLabel(**{f.name: getattr(r, f.name) for f in dc_fields(Request)
                               if f.name != "principal"})
    object.__setattr__(trusted, "_sent", r.digest)   # its bytes as sent, principal and all
    return trusted


class _TrustedLabel(Request):
    """A request whose sender is forgotten (its key back in the role labels' namespace);
    the journal still stores the digest of the bytes that were sent."""

    @property
    def digest(self):  # type: ignore[override]
        return self._sent


def _decide_trusting_labels(s, r, rules=RULES):
    """A reducer that trusts the actor label as written (BRIEF §8)."""
    return kernel.decide(s, _trusting_labels(s, r), rules)


_DECLARE_LOST = projections.WAY_CONDITIONS["declare-lost"]


def _declare_lost_only_if_dirty(s, i, t):
    return all_of(_DECLARE_LOST(s, i, t), R.dirty(t))


def _pid_only_alive(t):
    return t.proc_birth != 0


def _generation_only(t, r):
    return t.generation == r.cap.generation


def _any_token(t, r):
    """The token check is dropped: K alone admits a request."""
    return True


_TOKEN_PRESENTED = kernel.token_presented


def _continuation_by_session(t, r):
    """A continuation is proven by its session string: resume presents no token."""
    return any_of(r.kind == K.RESUME, _TOKEN_PRESENTED(t, r))


def _failed_in_any_generation(t):
    """A failed or lost attempt makes the next dispatch a retry, whatever its generation."""
    return any_of(t.attempt_state == AS.FAILED, t.attempt_state == AS.LOST)


def _ready_when_open(s, i, t):
    """Ready as a status: an open task whose dependencies are Done, whatever dispatch says."""
    return all_of(projections.status(t) == projections.Status.OPEN, R.deps_done(s, i))


def _global_key(r):
    """Keys are global: a request answers to the entry of its key whoever sent it."""
    return r.key


CORE = ("core",)
INTRUDED = ("core", "intruder")
ENV = ("core", "env")
WAITS = ("core", "waits")


def _driver_chosen_base(s, i, t, r):
    """save-work binding the candidate to whatever base the request names."""
    g = without_checks(K.SAVE_WORK, Code.BASE_MISMATCH)(s, i, t, r)

    def update():
        s2 = g.update()
        t2 = s2.tasks[i]
        b = t2.receipt(Receipt.WORK_SAVE)
        return s2.put(i, replace_task(t2, base=r.base, receipts=t2.with_receipt(
            Receipt.WORK_SAVE, dc_replace(b, base=r.base))))
    return guarded(g.checks, update, g.kind)


def _effect_after_redone_dependency(s, i, t, r):
    """prepare-effect guarded by ``deps_done`` alone, not by the generation it opened on."""
    g = RULES[K.PREPARE_EFFECT](s, i, t, r)
    return guarded([(R.deps_done(s, i), Code.DEPENDENCY_REOPENED)], g.update, g.kind)


# --- a provider route's breaker ----------------------------------------------------------

ROUTES_INSTANCE = Instance(tasks=1, groups=("core", "routes"))


def _probe_closing_anyway(s, i, t, r):
    """A probe whose acknowledgment closes the breaker whatever the probe found."""
    g = RULES[K.PROBE_ROUTE](s, i, t, r)
    return guarded(g.checks, lambda: s.put(i, replace_task(t, route_unavailable=False, probe_at=0)),
                   g.kind)


def _opening_on_any_route(t, when, r):
    """The breaker opens on every new provider failure, whether it names a route or not."""
    return rules_route.opens(t, any_of(when, r.route == 0), r)


# --- the review valve's mutants ---------------------------------------------------------

VALVE_INSTANCE = Instance(tasks=1, groups=("core", "valve"))
VALVE_ENV_INSTANCE = Instance(tasks=1, groups=("core", "env", "valve"))


def _fail_review_after_done(s, i, t, r):
    """A failure report that forgets Done is terminal: it fails a completed valve."""
    return guarded([], lambda: s.put(i, replace_task(t, review_phase=RP.FAILED,
                                                     review_failure=r.failure)))


def _unavailable_blocks(verdict):
    """An unavailable reviewer taken for a rejection: the valve is blocked."""
    return ite(verdict == RV.PASS, RP.WORKING, RP.REVIEW_BLOCKED)


def _main_read_for_every_contract(t, observed):
    """Every contract compared with git main, an Explore one too."""
    return observed == t.manifest_main


def _token_not_asked(t, r):
    """The attempt's token is taken as presented, whoever sends the request."""
    return True


def _keep_reviews(t, t2, s, r):
    """A new manifest that keeps the old manifest's reviews and publication."""
    return replace_task(t2, flip=t.flip, flip_manifest=t.flip_manifest,
                        flip_requirements=t.flip_requirements, evaluation=t.evaluation,
                        evaluation_manifest=t.evaluation_manifest,
                        evaluation_requirements=t.evaluation_requirements)


def _count_again(t, t2, s, r):
    """A publication counted on top of the previous ones."""
    return replace_task(t2, publications=t.publications + 1)


def _replace_worker(t, t2, s, r):
    """The operator's retry of a valve closes the source worker's attempt (a replacement
    would follow)."""
    return R.close_attempt(t2, AS.LOST)


def _publish_named(s, i, t, r):
    """The publication records the manifest the promoter names, not the task's own."""
    g = without_checks(K.PUBLISH, Code.MANIFEST_MISMATCH)(s, i, t, r)
    return guarded(g.checks, lambda: s.put(i, replace_task(
        g.update().tasks[i], publication=ite(t.review_phase == RP.DONE, t.publication,
                                             r.candidate))), g.kind)


#: A proven legacy Done reopened under its dependent (two generations of each task).
REOPEN_INSTANCE = Instance(tasks=2, generations=2, groups=("core", "legacy", "reopen"))

def _receipt_closes_as_done(t, t2, s, r):
    """The receipted completion is taken for the completion itself: the attempt succeeds."""
    return R.close_attempt(t2, AS.SUCCEEDED)


def _live_owner_ignoring_receipt(s, i, t):
    """The planner's live-owner way without its receipt test: a receipted completion is one
    more live owner, probed and never awaited."""
    return all_of(running(t), not_(R.reserved(t)), t.exit == Exit.NONE, not_(t.legacy_done),
                  one_of(t.owner_seen, (OwnerSeen.UNVERIFIED, OwnerSeen.LIVE)))


RECEIPT_INSTANCE = Instance(tasks=1, groups=("core", "receipt", "env"))


MUTANTS: dict[str, Mutant] = {m.name: m for m in (
    Mutant(
        "done-without-promotion-receipt", (1,),
        "GraphSave without the promotion receipt: the effect is committed without recording "
        "its receipt and save-graph does not check the receipts.",
        "done-iff-graphsave", Instance(tasks=1, groups=CORE), 13,
        rules={
            K.COMMIT_EFFECT: with_update(K.COMMIT_EFFECT, task_update(
                lambda t, t2, s, r: replace_task(t2, receipts=t2.with_receipt(Receipt.EFFECT,
                                                                             NO_RECEIPT)))),
            K.SAVE_GRAPH: without_checks(K.SAVE_GRAPH, Code.EVIDENCE_MISSING),
        }, proof_by="receipts-follow-phase"),
    Mutant(
        "broker-drops-worktree-context", (2,),
        "A brokered submit (DoneHandoff) loses the worktree context: the attempt is recorded "
        "succeeded and its worktree dropped, nothing saved or retained.",
        "retained-work-never-erased", Instance(tasks=1, groups=ENV), 3,
        rules={K.SUBMIT: with_update(K.SUBMIT, task_update(
            lambda t, t2, s, r: R.release_owner(t, attempt_state=AS.SUCCEEDED,
                                                worktree_present=False)))}),
    Mutant(
        "reset-claims-continuation", (3,),
        "A relaunch in a new session claims same-attempt continuation: resume is accepted "
        "without proven owner death or the same session.",
        "retry-is-not-continuation-without-proof", Instance(tasks=1, groups=CORE), 2,
        rules={K.RESUME: without_checks(K.RESUME, Code.OWNER_NOT_PROVEN_DEAD,
                                        Code.CONTINUATION_UNPROVEN)}),
    Mutant(
        "dead-owner-stays-in-progress", (4,),
        "The planner converges a proven-dead owner only when its worktree is dirty: once its "
        "continuation's deadline has passed, a dead worker with a clean worktree stays in "
        "progress with no way forward.",
        "no-dead-owner-in-progress-without-action",
        Instance(tasks=1, groups=("core", "env", "clock")), 4,
        patches=((projections.WAY_CONDITIONS, "declare-lost", _declare_lost_only_if_dirty),)),
    Mutant(
        "replay-reexecutes-effect", (5, 13),
        "A retried request with the same key and bytes is executed again instead of answered "
        "from the journal.",
        "idempotent-replay", Instance(tasks=1, groups=CORE, keys=KEYS), 2,
        decide=_decide_reexecuting),
    Mutant(
        "heartbeat-timeout-terminalizes-live-owner", (6,),
        "A missing heartbeat closes the attempt as lost, though its exact owner is alive.",
        "evidence-cannot-terminalize-live-owner",
        Instance(tasks=1, groups=("core", "evidence")), 2,
        rules={K.HEARTBEAT_TIMEOUT: with_update(K.HEARTBEAT_TIMEOUT, task_update(_close_lost))}),
    Mutant(
        "duplicate-failure-double-counted", (7,),
        "A duplicate provider failure event is counted again.",
        "compaction-occurrences-counted-once", Instance(tasks=1, groups=("core", "evidence")), 3,
        rules={K.PROVIDER_FAILURE: with_update(K.PROVIDER_FAILURE, task_update(
            lambda t, t2, s, r: replace_task(t2, provider_failures=t.provider_failures + 1)))}),
    Mutant(
        "duplicate-compaction-double-counted", (8,),
        "A duplicate compaction occurrence is counted again.",
        "compaction-occurrences-counted-once", Instance(tasks=1, groups=("core", "evidence")), 3,
        rules={K.COMPACTION: with_update(K.COMPACTION, task_update(
            lambda t, t2, s, r: replace_task(t2, compactions=t.compactions + 1)))}),
    Mutant(
        "eof-terminalizes", (9,),
        "Observer EOF without a terminal intent closes the attempt as failed.",
        "evidence-cannot-terminalize-live-owner", Instance(tasks=1, groups=("core", "evidence")),
        2,
        rules={K.OBSERVE_EOF: with_update(K.OBSERVE_EOF, task_update(
            lambda t, t2, s, r: ite(running(t), R.close_attempt(t2, AS.FAILED), t2)))}),
    Mutant(
        "stale-capability-accepted", (10,),
        "The capability check compares the generation only: a caller from an old attempt "
        "or fence writes.",
        "attempt-fencing", Instance(tasks=1, groups=CORE), 2,
        patches=((kernel, "capability_matches", _generation_only),)),
    Mutant(
        "pid-only-liveness", (11,),
        "Liveness from the pid alone: a reused pid with another birth time counts as the "
        "live owner.",
        "liveness-needs-exact-birth", Instance(tasks=1, groups=ENV), 4,
        patches=((rules_evidence, "owner_alive", _pid_only_alive),)),   # probe-owner's module
    Mutant(
        "cas-ignores-moved-target", (12,),
        "Promotion without the compare-and-swap: a land moves the target from whatever it "
        "points at.",
        "cas-base-exact", Instance(tasks=1, groups=ENV), 11,
        rules={K.COMMIT_EFFECT: without_checks(K.COMMIT_EFFECT, Code.CAS_MOVED)}),
    Mutant(
        "phase-skip", (13,),
        "Quiesce jumps straight to work-saved: a SaveTransaction row is skipped.",
        "no-phase-skip", Instance(tasks=1, groups=CORE), 3,
        rules={K.QUIESCE: with_update(K.QUIESCE, task_update(
            lambda t, t2, s, r: replace_task(t2, phase=Phase.WORK_SAVED)))}),
    Mutant(
        "message-resurrects-done", (14,),
        "A message to a finished attempt reopens it.",
        "terminal-never-resurrects", Instance(tasks=1, groups=("core", "evidence")), 3,
        rules={K.MESSAGE: with_update(K.MESSAGE, task_update(
            lambda t, t2, s, r: replace_task(t2, attempt_state=AS.RUNNING)))}),
    Mutant(
        "legacy-done-satisfies-dependency", (15, 1),
        "A legacy Done without evidence satisfies a dependency: a dependent is dispatched.",
        "attempt-opens-on-done-dependencies", Instance(tasks=2, groups=("core", "legacy")), 2,
        rules={k: with_check(k, Code.DEPENDENCY_NOT_DONE, _deps_or_legacy)
               for k in (K.DISPATCH, K.RETRY, K.RECONSTRUCT)}),
    Mutant(
        "double-dispatch", (16,),
        "Two dispatchers race: dispatch ignores the expected attempt and the live attempt.",
        "single-live-owner", Instance(tasks=1, attempts=2, groups=CORE), 2,
        rules={K.DISPATCH: without_checks(K.DISPATCH, Code.CAS_MOVED, Code.ATTEMPT_LIVE)}),
    Mutant(
        "second-terminal-overwrites-first", (17,),
        "A later terminal report overwrites the first durable terminal outcome.",
        "first-terminal-wins", Instance(tasks=1, groups=("core", "operator")), 3,
        rules={K.FAIL: with_update(K.FAIL, task_update(
            lambda t, t2, s, r: ite(all_of(not_(running(t)), not_(R.reserved(t))),
                                    R.close_attempt(t2, AS.FAILED), t2)))}),
    Mutant(
        "promotion-without-review", (1, 12),
        "Acceptance records no review receipt and the promotion does not ask for one.",
        "promotion-needs-review-of-exact-candidate", Instance(tasks=1, groups=CORE), 10,
        rules={
            K.ACCEPT: with_update(K.ACCEPT, task_update(
                lambda t, t2, s, r: replace_task(t2, receipts=t2.with_receipt(Receipt.REVIEW,
                                                                             NO_RECEIPT)))),
            K.COMMIT_EFFECT: without_checks(K.COMMIT_EFFECT, Code.REVIEW_REQUIRED),
        }, proof_by="receipts-follow-phase"),
    Mutant(
        "trusts-actor-label", (18, 23),
        "The actor label is trusted as written: the intruder, posing as the daemon, the "
        "validator or the operator, is applied.",
        "role-held", Instance(tasks=1, groups=INTRUDED), 1,
        decide=_decide_trusting_labels),
    Mutant(
        "drops-token-check", (19, 20),
        "K alone admits a request of the attempt's own process: an old worker or a foreign "
        "agent that read K is applied without the attempt's token.",
        "token-required", Instance(tasks=1, groups=INTRUDED), 2,
        patches=((kernel, "token_presented", _any_token),)),
    Mutant(
        "continuation-by-session", (22,),
        "A continuation is proven by the session string alone: a process that reused the "
        "dead owner's pid resumes the attempt without its token.",
        "continuation-needs-token", Instance(tasks=1, groups=("core", "env", "intruder")), 4,
        patches=((kernel, "token_presented", _continuation_by_session),)),
    Mutant(
        "global-keys", (21, 23),
        "Idempotency keys are global, not in their sender's namespace: the intruder squats "
        "the key the daemon's convergence will use, and the daemon's request is answered "
        "from the intruder's entry.",
        "keys-per-principal", Instance(tasks=1, groups=INTRUDED, keys=1), 2,
        patches=((kernel, "journal_key_of", _global_key),)),
    Mutant(
        "dispatch-ignores-retry-budget", (31,),
        "Dispatch after a failed or lost attempt ignores the task's retry budget: a failing "
        "task is retried automatically without limit.",
        "retries-within-budget", Instance(tasks=1, attempts=4, groups=CORE), 7,
        rules={K.DISPATCH: without_checks(K.DISPATCH, Code.RETRY_BUDGET_SPENT)}),
    Mutant(
        "retries-across-generations", (41,),
        "A dispatch counts the failure of the attempt a reset closed: the new generation's "
        "first dispatch is an automatic retry of the old one's, counted against its budget.",
        "retries-per-generation", Instance(tasks=1, attempts=2, generations=2,
                                           groups=("core", "operator")), 4,
        patches=((rules_attempt, "after_failure", _failed_in_any_generation),)),
    Mutant(
        "ready-by-status", (43,),
        "ready (and the plan's dispatch) lists every open task whose dependencies are Done: "
        "a task parked on a wait, unassigned, or held by a spent retry budget or a semantic "
        "failure is listed, and every dispatch path refuses it.",
        "ready-iff-dispatch-admitted", Instance(tasks=1, groups=("core", "waits")), 2,
        patches=((projections, "admitted", _ready_when_open),)),
    Mutant(
        "dispatch-ignores-pause", (44,),
        "Dispatch does not look at the operator's pause: a paused task is dispatched as if "
        "nothing held it.",
        "no-attempt-opens-paused-or-early", Instance(tasks=1, groups=("core", "pause")), 2,
        rules={K.DISPATCH: without_checks(K.DISPATCH, Code.PAUSED)}),
    Mutant(
        "retry-before-not-before", (44,),
        "The operator's retry does not look at the not-before time: an attempt opens before "
        "the task is due.",
        "no-attempt-opens-paused-or-early", Instance(tasks=1, groups=("core", "operator", "pause")), 2,
        rules={K.RETRY: without_checks(K.RETRY, Code.NOT_DUE)}),
    Mutant(
        "reset-before-owner-exit", (45,),
        "A reset opens the next generation at once, over an owner that may still be alive: "
        "no intent is persisted, the owner's exit is never proven before its ownership is "
        "released (the order WG's agent-949 incident broke).",
        "no-generation-before-owner-exit", Instance(tasks=1, generations=2, groups=("core", "operator")), 2,
        patches=((rules_operator, "owner_held", lambda t: False),)),
    Mutant(
        "dispatch-onto-unavailable-route", (50,),
        "Dispatch does not look at the task's provider route: an attempt opens on a route whose "
        "breaker is open.",
        "no-attempt-opens-on-unavailable-route",
        Instance(tasks=1, attempts=2, groups=("core", "routes")), 4,
        rules={K.DISPATCH: without_checks(K.DISPATCH, Code.ROUTE_UNAVAILABLE)}),
    Mutant(
        "route-probed-before-due", (50,),
        "The route's probe does not wait for its probe time: an open breaker is closed before "
        "the probe is due.",
        "route-closes-only-on-a-due-succeeded-probe", ROUTES_INSTANCE, 3,
        rules={K.PROBE_ROUTE: without_checks(K.PROBE_ROUTE, Code.PROBE_NOT_DUE)}),
    Mutant(
        "failed-probe-closes-route", (50,),
        "A probe's acknowledgment closes the breaker whatever it found: a failed probe makes "
        "the route available again.",
        "route-closes-only-on-a-due-succeeded-probe", ROUTES_INSTANCE, 3,
        rules={K.PROBE_ROUTE: _probe_closing_anyway}),
    Mutant(
        "breaker-opens-without-route", (50,),
        "A provider failure that names no route opens a breaker anyway: the task's route is "
        "held unavailable for a failure that was not on it.",
        "route-opens-only-on-its-failure", ROUTES_INSTANCE, 2,
        patches=((rules_evidence, "opens", _opening_on_any_route),)),
    Mutant(
        "semantic-failure-auto-retried", (31,),
        "Dispatch after a semantic failure: work the validator rejected is retried "
        "automatically instead of waiting for a repair.",
        "semantic-failure-never-auto-retried", Instance(tasks=1, attempts=2,
                                                        groups=("core", "evidence")), 3,
        rules={K.DISPATCH: without_checks(K.DISPATCH, Code.REPAIR_REQUIRED)}),
    Mutant(
        "driver-chosen-base", (12,),
        "save-work takes the base from the request: a candidate built on the old target is "
        "bound to the moved one, and the land's compare-and-swap drops the commit between.",
        "candidate-built-on-attempt-base", Instance(tasks=1, groups=CORE), 4,
        rules={K.SAVE_WORK: _driver_chosen_base}),
    Mutant(
        "validator-pass-through-protected", (29,),
        "Sealing ignores the protected paths: a candidate touching one is sealed and the "
        "validator's pass moves it to validated, on to an effect and Done.",
        "protected-path-holds", Instance(tasks=1, groups=ENV, protected=True), 6,
        patches=((rules_save, "touches_protected", lambda s, t: False),)),
    Mutant(
        "archive-without-confirmation", (30,),
        "The archive does not look for the operator's confirmation: a Done task is archived "
        "by a digest no confirmation receipt names, or with none at all.",
        "archive-needs-confirmed-digest", Instance(tasks=1, groups=("core", "archive")), 14,
        rules={K.ARCHIVE: without_checks(K.ARCHIVE, Code.ARCHIVE_UNCONFIRMED)}),
    Mutant(
        "dispatch-ignores-wait", (33,),
        "Dispatch does not look at an external wait: a task parked on human input is "
        "dispatched again before the answer arrives.",
        "no-attempt-while-waiting", Instance(tasks=1, attempts=2, groups=WAITS), 3,
        rules={K.DISPATCH: without_checks(K.DISPATCH, Code.WAITING)}),
    Mutant(
        "delivery-ignores-correlation", (33,),
        "Any delivery releases a wait: an unrelated event (another correlation id) ends the "
        "wait on human input.",
        "wait-left-only-by-its-evidence", Instance(tasks=1, groups=WAITS), 3,
        rules={K.DELIVER: _delivering_anything}),
    Mutant(
        "reopen-overtakes-dependent", (32,),
        "A reopen ignores its dependents: a Done dependency is reopened under a dependent "
        "that is already Done, which then rests on a dependency that is not.",
        "reopen-fences-dependents", REOPEN_INSTANCE, 5,
        rules={K.REOPEN: without_checks(K.REOPEN, Code.TERMINAL_ALREADY)}),
    Mutant(
        "effect-on-reopened-dependency", (32,),
        "prepare-effect does not look at the dependencies: a dependent running when its "
        "dependency was reopened makes its effect on the old generation.",
        "reopen-fences-dependents", REOPEN_INSTANCE, 12,
        rules={K.PREPARE_EFFECT: without_checks(K.PREPARE_EFFECT, Code.DEPENDENCY_REOPENED)}),
    Mutant(
        "effect-after-redone-dependency", (32,),
        "prepare-effect checks only that the dependencies are Done: a dependent whose attempt "
        "opened before its dependency was reopened makes its effect once that is Done again.",
        "reopen-fences-dependents", REOPEN_INSTANCE, 14,
        rules={K.PREPARE_EFFECT: _effect_after_redone_dependency}),
    Mutant(
        "publication-counted-twice", (46,),
        "A publication is accepted again after the first and counted on top of it: the "
        "reviewed outputs are published twice.",
        "review-publication-at-most-once", VALVE_INSTANCE, 7,
        rules={K.PUBLISH: with_update(K.PUBLISH, task_update(_count_again))}),
    Mutant(
        "publication-of-named-manifest", (46,),
        "The publication records whatever manifest the promoter names, without checking it is "
        "the task's reviewed one.",
        "review-publication-bound-to-exact-reviews", VALVE_INSTANCE, 5,
        rules={K.PUBLISH: _publish_named}),
    Mutant(
        "complete-before-publication", (46,),
        "Completion does not wait for the publication: a valve whose reviews passed is Done "
        "with nothing published.",
        "review-done-is-exact-universal-review", VALVE_INSTANCE, 5,
        rules={K.COMPLETE: without_checks(K.COMPLETE, Code.ILLEGAL_PHASE_EDGE,
                                          Code.PUBLICATION_UNVERIFIED)}),
    Mutant(
        "new-manifest-keeps-reviews", (46,),
        "A new manifest keeps the reviews of the one it replaces: the reviewers passed "
        "outputs that are not the ones submitted.",
        "review-changed-manifest-invalidates", VALVE_INSTANCE, 5,
        rules={K.SUBMIT_MANIFEST: with_update(K.SUBMIT_MANIFEST, task_update(_keep_reviews))}),
    Mutant(
        "land-on-moved-main", (46,),
        "The publication of a Land manifest does not compare the main it observed with the "
        "one the manifest integrated: a stale main lands.",
        "review-stale-main-cannot-land", VALVE_ENV_INSTANCE, 6,
        rules={K.PUBLISH: without_checks(K.PUBLISH, Code.MAIN_MOVED)}),
    Mutant(
        "publish-before-evaluation", (46,),
        "A publication needs only FLIP's pass: an evaluation that rejected, was unavailable or "
        "never ran does not stop it.",
        "review-nonpassing-eval-cannot-publish", VALVE_INSTANCE, 4,
        rules={K.PUBLISH: without_checks(K.PUBLISH, Code.ILLEGAL_PHASE_EDGE,
                                         Code.REVIEW_NOT_PASSED)}),
    Mutant(
        "failure-after-done", (46,),
        "A failure report after completion fails the valve: terminal success is revoked.",
        "review-terminal-success-inert", VALVE_INSTANCE, 7,
        rules={K.FAIL_REVIEW: _fail_review_after_done}),
    Mutant(
        "retry-review-replaces-worker", (46,),
        "The operator's retry of a blocked valve closes the source worker's attempt instead of "
        "returning the review to it.",
        "review-no-event-replaces-source", VALVE_INSTANCE, 3,
        rules={K.RETRY_REVIEW: with_update(K.RETRY_REVIEW, task_update(_replace_worker))}),
    Mutant(
        "manifest-without-token", (46,),
        "The kernel does not ask for the attempt's token: anyone holding the worker's role and "
        "the public K submits a manifest for the source worker.",
        "review-one-source-owner", Instance(tasks=1, groups=("core", "valve", "intruder")), 2,
        patches=((kernel, "token_presented", _token_not_asked),)),
    Mutant(
        "unavailable-reviewer-blocks", (46,),
        "An unavailable reviewer is taken for a rejection: the valve is blocked as if the work "
        "had been rejected.",
        "review-unavailable-is-not-rejection", VALVE_INSTANCE, 3,
        patches=((rules_review, "review_phase_of", _unavailable_blocks),)),
    Mutant(
        "chat-request-made-again", (51,),
        "The chat creation request does not look for one made under the attempt's key: a "
        "request whose answer was lost is made again instead of being reconciled (the old "
        "daemon's second chat).",
        "one-chat-request-per-opening-key", Instance(tasks=1, groups=("core", "chat")), 3,
        rules={K.REQUEST_CHAT: without_checks(K.REQUEST_CHAT, Code.CHAT_REQUESTED)}),
    Mutant(
        "explore-reads-main", (46,),
        "Every contract's publication compares the observed main with the integrated one: an "
        "Explore or Report manifest is refused because git main moved.",
        "review-explore-publishes-without-git", VALVE_INSTANCE, 5,
        patches=((rules_review, "target_matches", _main_read_for_every_contract),)),
    Mutant(
        "receipt-taken-as-done", (49,),
        "The owner's completion receipt closes the attempt as succeeded: a receipted completion "
        "without a transaction is Done (the exited-worker incident's false completion).",
        "receipted-completion-never-done-without-transaction", RECEIPT_INSTANCE, 3,
        rules={K.RECEIPT_COMPLETION: with_update(K.RECEIPT_COMPLETION,
                                                 task_update(_receipt_closes_as_done))}),
    Mutant(
        "second-receipt-replaces", (49,),
        "A second completion receipt of the same attempt is taken: after an edit it replaces "
        "the first, whose bytes are lost.",
        "completion-receipt-never-lost-or-replaced", RECEIPT_INSTANCE, 4,
        rules={K.RECEIPT_COMPLETION: without_checks(K.RECEIPT_COMPLETION, Code.TERMINAL_ALREADY)}),
    Mutant(
        "receipt-planned-as-live-owner", (49,),
        "The planner does not read the completion receipt: a receipted completion whose owner "
        "may be alive is one more live owner, re-probed, and its handoff is never awaited.",
        "receipted-completion-waits-or-resumes", RECEIPT_INSTANCE, 3,
        patches=((projections.WAY_CONDITIONS, "live-owner", _live_owner_ignoring_receipt),
                 (projections.WAY_CONDITIONS, "await-handoff", lambda s, i, t: False))),
)}


def _dispatch_reading_a_non_dependency() -> Callable:
    """Dispatch that also waits for the next task by index, which is not a dependency."""
    base = RULES[K.DISPATCH]

    def dispatch_reading_a_non_dependency(s, i, t, r):
        g = base(s, i, t, r)
        other = s.tasks[(i + 1) % len(s.tasks)]
        return guarded(g.checks + [(not_(other.abandoned), Code.HELD)], g.update, g.kind)
    return dispatch_reading_a_non_dependency


#: Mutants that break the locality the cutoff theorem needs (they may break no invariant):
#: ``wgk prove --unbounded`` must refuse its claim for them, naming the rule.
LOCALITY_MUTANTS: dict[str, Mutant] = {m.name: m for m in (
    Mutant(
        "dispatch-reads-non-dependency", (),
        "Dispatch also waits until the next task by index is not abandoned: it reads a task "
        "that is not one of its dependencies.",
        "", Instance(tasks=2, groups=CORE), 0,
        rules={K.DISPATCH: _dispatch_reading_a_non_dependency()}),
)}

# the model's base for the mutants' proofs watches every function the catalogue patches
model_base.watch(MUTANTS.values())
