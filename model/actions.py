"""The one enumeration of the requests and environment steps of a bounded instance.

An ``Instance`` (``wgk.model.instance``, imported from here too) fixes the graph
(a chain of ``tasks``), bounds on attempts per generation, generations and
candidate versions, and which groups of requests are enabled; ``GROUP_KINDS``
is the one definition of the request groups. The explorer and the simulator
send the concrete requests ``task_steps`` lists,
the bounded model checker builds its symbolic templates from the same kinds
(``instance_kinds``), and the fuzzer draws its well-behaved requests from
``task_steps`` too.

Every request is issued by a well-behaved actor carrying the current K and the
current phase/revision, plus a few deliberately stale or mismatched ones so
that the rejection paths are exercised too. Contents, pids and birth times are
chosen deterministically from the task, generation and attempt so that the
state space stays finite. Pure: no I/O.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any, Iterator

from .env import EnvKind, EnvStep
from .instance import (  # noqa: F401  (re-exported: callers import them from here)
    GROUP_KINDS, GROUPS, INITIAL_TARGET, KEYS, PROTECTED_CONTENT, SYMBOLIC_ONLY, Instance,
    instance_kinds,
)
from .requests import Capability, Owner, Request
from .state import State
from .vocab import (
    INTRUDER, TOKEN_BEARERS, Actor, AttemptState, Contract, Failure, ReviewVerdict, Disposition, Exit, Kind as K, Phase, Reason, Verdict, EDGES, EVIDENCE_KINDS,
)

FOREIGN_COMMIT = 2

OWNER = ("pid", "birth", "session", "wrapper_epoch", "child_epoch")

#: The fields each kind carries besides its task, actor and capability (docs/vocabulary.md,
#: "Kinds"); ``imports`` and ``deadline`` are carried by the kinds listed below.
PARAMS: dict[K, tuple[str, ...]] = {
    K.ASSIGN: (),
    K.DISPATCH: ("expected_attempt",) + OWNER,
    K.RETRY: ("expected_attempt",) + OWNER,
    K.RESUME: OWNER,
    K.SAVE_WORK: ("candidate", "base"),
    K.SEAL_CANDIDATE: ("candidate",),
    K.VALIDATE: ("candidate",),
    K.ACCEPT: ("candidate",),
    K.COMMIT_EFFECT: ("candidate", "base"),
    K.REVISE: ("candidate", "base"),
    K.RESET: ("expected_generation",),
    K.RECONSTRUCT: ("candidate", "base"),
    K.CONFIRM_ARCHIVE: ("candidate",),
    K.ARCHIVE: ("candidate",),
    K.PROPOSE_ARCHIVE: ("candidate",),
    K.PARK: ("correlation",),
    K.DELIVER: ("correlation",),
    K.REOPEN: ("expected_generation",),
    K.SUBMIT_MANIFEST: ("candidate", "base", "requirements", "output", "validation", "contract",
                        "resolvable", "protected_free"),
    K.RECORD_FLIP: ("candidate", "requirements", "review"),
    K.RECORD_EVAL: ("candidate", "requirements", "review"),
    K.PUBLISH: ("candidate", "base", "succeeded", "outputs_match"),
    K.COMPLETE: ("candidate", "resolvable"),
    K.RECEIPT_COMPLETION: ("candidate",),
    K.PROVIDER_FAILURE: ("route",),
    K.PROBE_ROUTE: ("succeeded",),
}

#: Kinds whose evidence id is recorded.
WITH_EVIDENCE = EVIDENCE_KINDS | {K.ACK_CONTINUATION, K.FAIL, K.LEGACY_DONE, K.DELIVER}
WITH_DEADLINE = frozenset({K.SUBMIT, K.REQUEST_REVIEW, K.ACCEPT, K.RECORD_DISPOSITION, K.PARK,
                           K.UNPAUSE, K.PROVIDER_FAILURE, K.PROBE_ROUTE})

#: The manifests the bounded source worker submits: a Land one and an Explore one.
LAND_MANIFEST = 1
EXPLORE_MANIFEST = 3

#: The correlation id the bounded worker parks on, and another event's (interned ids).
WAIT_EVENT = 1
OTHER_EVENT = 2
WITH_IMPORTS = frozenset({K.DISPATCH, K.RETRY})
#: The provider route the bounded attempts run on (an interned route name).
ROUTE = 1
#: The clock after which the bounded daemon's probes no longer fail (each failed probe arms
#: the next one a tick later: unbounded, the clock would make the state space infinite).
ROUTE_CLOCK = 2

#: The environment steps of the group "env" (per task, then global).
ENV_TASK_KINDS = (EnvKind.EDIT, EnvKind.OWNER_DIES, EnvKind.PID_REUSE)
ENV_GLOBAL_KINDS = (EnvKind.MOVE_TARGET,)


Step = Request | EnvStep


def content(i: int, t) -> int:
    """The bytes the owner of task ``i`` writes next (deterministic, unique)."""
    return 1000 * (i + 1) + 100 * t.generation + 10 * t.attempt + t.version + 3


def token_for(i: int, generation: int, attempt: int, epoch: int = 1) -> int:
    """The capability token minted for task ``i``'s attempt (its ``epoch``-th process): known to
    that process only, so never to the intruder unless it was that process."""
    return 50000 + 1000 * i + 100 * generation + 10 * attempt + epoch


def owner_for(i: int, generation: int, attempt: int, epoch: int = 1) -> Owner:
    pid = 100 * (i + 1) + 10 * generation + attempt
    return Owner(pid=pid, birth=pid * 10 + epoch, session=pid, wrapper_epoch=epoch, child_epoch=epoch)


@dataclass(frozen=True)
class _Caller:
    """What the bounded actors of task ``i`` know in state ``s``: its name, the current
    and a stale capability, the expected phase and revision."""

    inst: Instance
    s: State
    i: int

    @property
    def name(self) -> str:
        return self.s.graph.tasks[self.i]

    @property
    def t(self):
        return self.s.tasks[self.i]

    def cap(self) -> Capability:
        t = self.t
        return Capability(self.s.graph.graph_id, self.name, t.generation, t.attempt, t.fence,
                          t.lease_epoch)

    def stale(self) -> Capability:
        t = self.t
        return Capability(self.s.graph.graph_id, self.name, t.generation, max(t.attempt - 1, 0),
                          max(t.fence - 1, 0), max(t.lease_epoch - 1, 0))

    def tx(self, kind: K, actor: Actor, **kw: Any) -> Request | None:
        """A SaveTransaction edge with the current K, phase and revision (``None`` for an
        edge whose source phase does not match, unless the instance sends rejections)."""
        t = self.t
        if not self.inst.rejections and kind in EDGES and (
                t.exit != Exit.NONE or t.phase not in EDGES[kind][0]):
            return None
        exp = Exit(t.exit) if t.exit != Exit.NONE else Phase(t.phase)
        if actor in TOKEN_BEARERS:                 # the attempt's own process holds its token
            kw.setdefault("token", t.token)
        return Request(kind, actor, self.name, cap=kw.pop("cap", self.cap()), expected_phase=exp,
                       expected_revision=t.revision, **kw)


def _admission_requests(c: _Caller) -> Iterator[Request]:
    """A new attempt (dispatch, with the retained work imported, or an operator retry)."""
    t, name = c.t, c.name
    if t.attempt >= c.inst.attempts:
        return
    nxt = owner_for(c.i, t.generation, t.attempt + 1)
    mint = token_for(c.i, t.generation, t.attempt + 1)
    yield Request(K.DISPATCH, Actor.DAEMON, name, expected_attempt=t.attempt, owner=nxt, mint=mint)
    if t.retained:
        yield Request(K.DISPATCH, Actor.DAEMON, name, expected_attempt=t.attempt, owner=nxt,
                      imports=t.retained, mint=mint)
    if "operator" in c.inst.groups:
        yield Request(K.RETRY, Actor.OPERATOR, name, expected_attempt=t.attempt, owner=nxt,
                      mint=mint)


def _late_requests(c: _Caller) -> Iterator[Request]:
    """What an attempt hears even once closed: a terminal report and a message."""
    yield Request(K.FAIL, Actor.WORKER, c.name, cap=c.cap(), evidence="fail", token=c.t.token)
    if "evidence" in c.inst.groups:
        yield Request(K.FAIL, Actor.WORKER, c.name, cap=c.cap(), evidence="rejected",
                      token=c.t.token, failure=Failure.SEMANTIC)
        yield Request(K.MESSAGE, Actor.OPERATOR, c.name, evidence="m1")


def _liveness_requests(c: _Caller) -> Iterator[Request]:
    """A running attempt's owner: resume, probe, convergence and the evidence channels."""
    t, name, cap = c.t, c.name, c.cap()
    if t.wrapper_epoch < 2:
        yield Request(K.RESUME, Actor.WRAPPER, name, cap=cap, token=t.token,
                      owner=owner_for(c.i, t.generation, t.attempt, t.wrapper_epoch + 1),
                      mint=token_for(c.i, t.generation, t.attempt, t.wrapper_epoch + 1))
    yield Request(K.PROBE_OWNER, Actor.PROCESS_OBSERVER, name, cap=cap, evidence="probe")
    yield Request(K.DECLARE_LOST, Actor.DAEMON, name, cap=cap)
    if "evidence" in c.inst.groups:
        yield Request(K.HEARTBEAT_TIMEOUT, Actor.DAEMON, name, cap=cap, evidence="hb")
        yield Request(K.COMPACTION, Actor.WRAPPER, name, cap=cap, evidence="c1", token=t.token)
        yield Request(K.ACK_CONTINUATION, Actor.WRAPPER, name, cap=cap, evidence="c1",
                      token=t.token)
        yield Request(K.FAIL, Actor.WORKER, name, cap=c.stale(), evidence="stale", token=t.token)


def _quiet_requests(c: _Caller) -> Iterator[Request]:
    """The kinds that only record evidence or count (``SYMBOLIC_ONLY``), for an instance that
    sends every kind."""
    if not (c.inst.every_kind and "evidence" in c.inst.groups):
        return
    name, cap, token = c.name, c.cap(), c.t.token
    yield Request(K.HEARTBEAT, Actor.WORKER, name, cap=cap, evidence="hb", token=token)
    yield Request(K.OBSERVE_EOF, Actor.PROCESS_OBSERVER, name, cap=cap, evidence="stream")
    yield Request(K.PROVIDER_FAILURE, Actor.DAEMON, name, cap=cap, evidence="pf")
    yield Request(K.OWNERSHIP_CONTENTION, Actor.OPERATOR, name, evidence="caller")
    yield Request(K.LOG, Actor.WORKER, name, cap=cap, token=token)


def _archive_requests(c: _Caller) -> Iterator[Request]:
    """A Done task archived: the operator's confirmation of its result's digest, the archive
    naming it (sent before the confirmation too), and one naming another digest; the daemon's
    backlog proposing it."""
    if c.t.attempt_state != AttemptState.SUCCEEDED:
        return
    t, name = c.t, c.name
    if "archive" in c.inst.groups:
        yield Request(K.CONFIRM_ARCHIVE, Actor.OPERATOR, name, candidate=t.candidate)
        yield Request(K.ARCHIVE, Actor.CLEANUP, name, candidate=t.candidate)
        yield Request(K.ARCHIVE, Actor.CLEANUP, name, candidate=FOREIGN_COMMIT)
    if "backlog" in c.inst.groups:     # the daemon's backlog proposes; it never archives alone
        yield Request(K.PROPOSE_ARCHIVE, Actor.DAEMON, name, candidate=t.candidate)


def _chat_requests(c: _Caller) -> Iterator[Request]:
    """The running attempt's chat: the daemon's creation request under the attempt's key
    (sent again too: refused), and its reconciliation."""
    if "chat" not in c.inst.groups:
        return
    yield Request(K.REQUEST_CHAT, Actor.DAEMON, c.name, cap=c.cap())
    yield Request(K.RECONCILE_CHAT, Actor.DAEMON, c.name, cap=c.cap())


def _wait_requests(c: _Caller) -> Iterator[Request]:
    """The worker parks a running attempt on an event (deadline: the next tick); a parked
    task hears its event, another event, and the daemon's expiry."""
    if "waits" not in c.inst.groups:
        return
    t, name = c.t, c.name
    if t.attempt_state == AttemptState.RUNNING:
        yield Request(K.PARK, Actor.WORKER, name, cap=c.cap(), token=t.token,
                      correlation=WAIT_EVENT, deadline=c.s.now + 1)
    if t.waiting_on != 0:
        yield Request(K.DELIVER, Actor.OPERATOR, name, correlation=WAIT_EVENT, evidence="answer")
        yield Request(K.DELIVER, Actor.DAEMON, name, correlation=OTHER_EVENT, evidence="other")
        yield Request(K.EXPIRE_WAIT, Actor.DAEMON, name)


def _pause_requests(c: _Caller) -> Iterator[Request]:
    """The operator pauses a task, unpauses it at once, or unpauses it from the next tick."""
    if "pause" not in c.inst.groups:
        return
    name = c.name
    yield Request(K.PAUSE, Actor.OPERATOR, name)
    yield Request(K.UNPAUSE, Actor.OPERATOR, name)
    yield Request(K.UNPAUSE, Actor.OPERATOR, name, deadline=c.s.now + 1)


def _route_requests(c: _Caller) -> Iterator[Request]:
    """A running attempt's provider failure on its route (its breaker's first probe at the next
    tick, or due at once) and one naming no route; the daemon's probe of an open route, succeeded or failed (armed
    again for the next tick)."""
    if "routes" not in c.inst.groups:
        return
    t, name = c.t, c.name
    if t.attempt_state == AttemptState.RUNNING:
        yield Request(K.PROVIDER_FAILURE, Actor.DAEMON, name, cap=c.cap(), evidence="outage",
                      route=ROUTE, deadline=c.s.now + 1)
        yield Request(K.PROVIDER_FAILURE, Actor.DAEMON, name, cap=c.cap(), evidence="outage-2",
                      route=ROUTE)
        yield Request(K.PROVIDER_FAILURE, Actor.DAEMON, name, cap=c.cap(), evidence="stream")
    if t.route_unavailable:
        yield Request(K.PROBE_ROUTE, Actor.DAEMON, name, succeeded=1)
        if c.s.now < ROUTE_CLOCK:          # a failed probe moves the clock: bounded
            yield Request(K.PROBE_ROUTE, Actor.DAEMON, name, deadline=c.s.now + 1)


def _review_requests(c: _Caller) -> Iterator[Request]:
    """The review valve of a running attempt: the source worker's Land manifest (integrated onto
    the current target) or its Explore manifest (which integrates no main), FLIP and the evaluation passing,
    rejecting or unavailable, the publication onto the target observed now (and one naming another manifest), the
    completion,
    a failure report and the operator's retry."""
    if "valve" not in c.inst.groups or c.t.attempt_state != AttemptState.RUNNING:
        return
    t, name, cap = c.t, c.name, c.cap()
    m = t.manifest or LAND_MANIFEST
    for mid, contract, main in ((LAND_MANIFEST, Contract.LAND, c.s.target),
                                (EXPLORE_MANIFEST, Contract.EXPLORE, 0)):
        yield Request(K.SUBMIT_MANIFEST, Actor.WORKER, name, cap=cap, token=t.token,
                      candidate=mid, base=main, requirements=1, output=mid, validation=1,
                      contract=contract, resolvable=1, protected_free=1)
    for verdict in (ReviewVerdict.PASS, ReviewVerdict.REJECT, ReviewVerdict.UNAVAILABLE):
        yield Request(K.RECORD_FLIP, Actor.VALIDATOR, name, candidate=m, requirements=1,
                      review=verdict)
    for verdict in (ReviewVerdict.PASS, ReviewVerdict.UNAVAILABLE):
        yield Request(K.RECORD_EVAL, Actor.EVALUATOR, name, candidate=m, requirements=1,
                      review=verdict)
    yield Request(K.PUBLISH, Actor.PROMOTER, name, candidate=m, base=c.s.target, succeeded=1,
                  outputs_match=1)
    yield Request(K.PUBLISH, Actor.PROMOTER, name, candidate=FOREIGN_COMMIT, base=c.s.target,
                  succeeded=1, outputs_match=1)
    yield Request(K.COMPLETE, Actor.WORKER, name, cap=cap, token=t.token, candidate=m,
                  resolvable=1)
    yield Request(K.FAIL_REVIEW, Actor.WORKER, name, cap=cap, token=t.token)
    yield Request(K.RETRY_REVIEW, Actor.OPERATOR, name)


def _reopen_requests(c: _Caller) -> Iterator[Request]:
    """A Done task reopened by the operator into its next generation (within the bound)."""
    if "reopen" not in c.inst.groups or c.t.attempt_state != AttemptState.SUCCEEDED:
        return
    if c.t.generation + 1 < c.inst.generations:
        yield Request(K.REOPEN, Actor.OPERATOR, c.name, expected_generation=c.t.generation)


def _transaction_requests(c: _Caller) -> Iterator[Request | None]:
    """Every edge of the SaveTransaction, in order (``None`` where ``tx`` leaves one out)."""
    t, tx = c.t, c.tx
    yield tx(K.SUBMIT, Actor.WORKER)
    yield tx(K.QUIESCE, Actor.WRAPPER)
    yield tx(K.SAVE_WORK, Actor.WRAPPER, candidate=t.worktree, base=t.built_on)
    yield tx(K.SEAL_CANDIDATE, Actor.DAEMON, candidate=t.candidate)
    yield tx(K.VALIDATE, Actor.VALIDATOR, candidate=t.candidate, verdict=Verdict.PASS)
    yield tx(K.VALIDATE, Actor.VALIDATOR, candidate=t.candidate, verdict=Verdict.FAIL)
    if c.s.graph.review_required[c.i]:
        yield tx(K.REQUEST_REVIEW, Actor.DAEMON)
        yield tx(K.ACCEPT, Actor.EVALUATOR, candidate=t.candidate, verdict=Verdict.PASS)
        yield tx(K.ACCEPT, Actor.EVALUATOR, candidate=t.candidate, verdict=Verdict.FAIL)
    else:
        yield tx(K.ACCEPT, Actor.DAEMON, candidate=t.candidate, verdict=Verdict.NOT_REQUIRED)
    yield tx(K.RECORD_DISPOSITION, Actor.WRAPPER, disposition=Disposition.LAND)
    yield tx(K.PREPARE_EFFECT, Actor.PROMOTER)
    yield tx(K.COMMIT_EFFECT, Actor.PROMOTER, candidate=t.candidate, base=t.base)
    yield tx(K.MARK_REPAIR, Actor.DAEMON)
    yield tx(K.PREPARE_CLEANUP, Actor.CLEANUP)
    yield tx(K.COMMIT_CLEANUP, Actor.CLEANUP)
    yield tx(K.SAVE_GRAPH, Actor.DAEMON)
    if t.version < c.inst.versions:
        yield tx(K.REVISE, Actor.WORKER, candidate=t.worktree, base=c.s.target)


def _receipt_requests(c: _Caller) -> Iterator[Request]:
    """The owner receipts its completion on its own (the worktree's bytes), before a submit."""
    if "receipt" not in c.inst.groups:
        return
    yield Request(K.RECEIPT_COMPLETION, Actor.WRAPPER, c.name, cap=c.cap(), token=c.t.token,
                  candidate=c.t.worktree)


def _operator_requests(c: _Caller) -> Iterator[Request | None]:
    """The operator's reset, abandon and reconcile, and the daemon's upgrade block."""
    if "operator" not in c.inst.groups:
        return
    t, name = c.t, c.name
    if t.generation + 1 < c.inst.generations:
        yield Request(K.RESET, Actor.OPERATOR, name, expected_generation=t.generation)
    yield Request(K.ABANDON, Actor.OPERATOR, name)
    yield Request(K.RECONCILE, Actor.OPERATOR, name)
    yield c.tx(K.BLOCK_UPGRADE, Actor.DAEMON, reason=Reason.VERSION_SKEW)


def requests_for(inst: Instance, s: State, i: int) -> Iterator[Request | None]:
    """The request instances the bounded actors may send for task ``i`` in state ``s``
    (``None`` stands for a transaction edge left out; ``task_steps`` drops them). The
    attempt's own process presents the attempt's token (``Request.needs_token``)."""
    c = _Caller(inst, s, i)
    yield from _admission_requests(c)
    yield from _wait_requests(c)
    yield from _pause_requests(c)
    yield from _route_requests(c)
    if c.t.attempt_state == 0:
        return
    yield from _attempt_requests(c)


def _attempt_requests(c: _Caller) -> Iterator[Request | None]:
    yield from _late_requests(c)
    yield from _archive_requests(c)
    yield from _reopen_requests(c)
    yield from _review_requests(c)
    if c.t.attempt_state != AttemptState.RUNNING:
        return  # a closed attempt only hears late reports and messages
    yield from _liveness_requests(c)
    yield from _chat_requests(c)
    yield from _quiet_requests(c)
    yield from _receipt_requests(c)
    yield from _transaction_requests(c)
    yield from _operator_requests(c)


def known_tokens(i: int, t) -> tuple[int, ...]:
    """The tokens the intruder may hold for task ``i``: none, the previous attempt's (it was
    the old worker) and, on a continuation, the dead first process's (it reused its pid)."""
    out = [0, token_for(i, t.generation, max(t.attempt - 1, 0))]
    if t.wrapper_epoch > 1:
        out.append(token_for(i, t.generation, t.attempt))
    return tuple(out)


def intruder_requests(inst: Instance, s: State, i: int) -> Iterator[Request]:
    """The intruder knows K, the phase, the keys and the session, and holds the worker's
    roles: it poses as the validator, the evaluator, the daemon and the operator, and as the
    attempt's own process with every token it may know (``known_tokens``)."""
    c = _Caller(inst, s, i)
    t, name = c.t, c.name
    pose = [Request(K.DISPATCH, Actor.DAEMON, name, expected_attempt=t.attempt,
                    owner=owner_for(i, t.generation, t.attempt + 1), mint=1)]
    if t.attempt_state == AttemptState.RUNNING:
        pose += [c.tx(K.VALIDATE, Actor.VALIDATOR, candidate=t.candidate, verdict=Verdict.PASS),
                 c.tx(K.ACCEPT, Actor.EVALUATOR, candidate=t.candidate, verdict=Verdict.PASS),
                 Request(K.DECLARE_LOST, Actor.DAEMON, name, cap=c.cap())]
        for tok in known_tokens(i, t):
            pose += [Request(K.FAIL, Actor.WORKER, name, cap=c.cap(), evidence="forged",
                             token=tok),
                     c.tx(K.SUBMIT, Actor.WORKER, token=tok),
                     Request(K.RESUME, Actor.WRAPPER, name, cap=c.cap(), token=tok, mint=1,
                             owner=owner_for(i, t.generation, t.attempt, 2)),
                     Request(K.PARK, Actor.WORKER, name, cap=c.cap(), token=tok,
                             correlation=WAIT_EVENT),
                     Request(K.SUBMIT_MANIFEST, Actor.WORKER, name, cap=c.cap(), token=tok,
                             candidate=FOREIGN_COMMIT, base=c.s.target, requirements=1,
                             output=FOREIGN_COMMIT, validation=1, contract=Contract.LAND,
                             resolvable=1, protected_free=1)]
    if t.waiting_on != 0:
        pose.append(Request(K.DELIVER, Actor.OPERATOR, name, correlation=t.waiting_on,
                            evidence="forged"))
    pose.append(Request(K.RESET, Actor.OPERATOR, name, expected_generation=t.generation))
    kinds = _kinds(inst)
    for r in pose:
        if r is not None and r.kind in kinds:      # only the kinds the instance's groups send
            yield replace(r, principal=INTRUDER)


@functools.lru_cache(maxsize=64)
def _kinds(inst: Instance) -> frozenset:
    return frozenset(instance_kinds(inst))


def legacy_requests(inst: Instance, s: State, i: int) -> Iterator[Request]:
    g = s.graph
    name = g.tasks[i]
    if g.requires_assignment[i]:
        yield Request(K.ASSIGN, Actor.DAEMON, name)
    yield Request(K.LEGACY_DONE, Actor.LEGACY_IMPORT, name, evidence="legacy")
    yield Request(K.RECONCILE, Actor.OPERATOR, name)
    yield Request(K.RECONSTRUCT, Actor.OPERATOR, name, candidate=s.target, base=INITIAL_TARGET)


def env_steps(inst: Instance, s: State, i: int) -> Iterator[EnvStep]:
    name = s.graph.tasks[i]
    t = s.tasks[i]
    if t.attempt_state != AttemptState.RUNNING:
        return
    # an owner repairing after the target moved rebases its work onto the target first
    rebase = t.exit == Exit.NEEDS_REPAIR and t.worktree_base != s.target
    yield EnvStep(EnvKind.EDIT, name, content=content(i, t), onto=s.target if rebase else 0)
    if inst.protected:
        yield EnvStep(EnvKind.EDIT, name, content=PROTECTED_CONTENT)
    yield EnvStep(EnvKind.OWNER_DIES, name)
    yield EnvStep(EnvKind.PID_REUSE, name, birth=9)


def task_steps(inst: Instance, s: State, i: int) -> Iterator[Step]:
    """Steps that read and change task ``i`` only (plus the target and the clock)."""
    if "legacy" in inst.groups:
        yield from legacy_requests(inst, s, i)
    yield from (r for r in requests_for(inst, s, i) if r is not None)
    if "intruder" in inst.groups:
        yield from intruder_requests(inst, s, i)
    if "env" in inst.groups:
        yield from env_steps(inst, s, i)
    t = s.tasks[i]
    if ("waits" in inst.groups and t.wait_deadline > s.now) or (
            "pause" in inst.groups and t.not_before > s.now) or (
            "routes" in inst.groups and t.route_unavailable and t.probe_at > s.now) or (
            "clock" in inst.groups and t.attempt_state == AttemptState.RUNNING
            and t.deadline > s.now):
        yield EnvStep(EnvKind.TICK)        # the clock runs only toward a deadline


def global_steps(inst: Instance, s: State) -> Iterator[EnvStep]:
    """Environment steps that change no task."""
    if "env" in inst.groups and s.target != FOREIGN_COMMIT:
        yield EnvStep(EnvKind.MOVE_TARGET, content=FOREIGN_COMMIT)



def steps(inst: Instance, s: State) -> Iterator[Step]:
    for i in range(len(s.tasks)):
        yield from task_steps(inst, s, i)
    yield from global_steps(inst, s)


def label(step: Step) -> str:
    if isinstance(step, EnvStep):
        extra = f"={step.content}" if step.kind in (EnvKind.EDIT, EnvKind.MOVE_TARGET) else ""
        return f"env:{step.kind.label}({step.task}{extra})"
    extra = ""
    if step.verdict is not None:
        extra = f",{step.verdict.label}"
    if step.imports:
        extra += ",import"
    if step.cap is not None and step.cap.fence != 0 and step.evidence == "stale":
        extra += ",stale"
    if step.principal is not None:
        extra += f",as {step.principal}"
    return f"{step.kind.label}({step.task}{extra})"
