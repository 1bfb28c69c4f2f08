"""Group commit replayed: a trace's requests sent in batches through ``Kernel.handle_batch``,
with crash cuts inside every batch.

Consecutive request steps of one sender are grouped into batches of up to
``size``; environment steps stay between batches. The model takes the batch's
requests one at a time; the implementation decides them with ``handle_batch``
(one commit for the requests it can decide together, an effect never performed
behind uncommitted requests). Each answer must be the model's decision for that
request, and the projection after the batch the model's.

Crash cuts inside a batch: for every durable boundary the batch crosses (each
commit, each external effect, before and after), the implementation is
restored to its state before the batch, crashed at exactly that boundary and
reopened. What it recovered must be the model's state after some prefix of the
batch, or that prefix with the external effect of the next request done but
not recorded (an effect whose intent is durable). Anything else (an effect of
a request whose predecessors were never committed) is a divergence. The members
commit together: a prefix that stops before a request performing no external
effect (``performs_effect``) is a batch split, a divergence too (a crash between
two members of one commit recovers none or all of them). Then the
sender re-sends the whole batch under the same keys: every committed request is
answered as a ``duplicate`` of its decision, every other one as the model
decides it, and the state is the model's after the batch; the ledger verifies,
rebuilds to the live projection and the audit finds nothing.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
import time
from dataclasses import dataclass, field

from wgk.impl import Crash, CrashAt, Recorder, no_hook
from wgk.impl.front.audit import Scratch

from wgk.conformance.oracle.crashcuts import _consistent, _restore, _snapshot, with_effects
from wgk.conformance.oracle.impl_system import ImplSystem, database
from wgk.conformance.oracle.lockstep import Divergence, Observed, diff_values, is_valid_step
from wgk.conformance.oracle.systems import ModelSystem, StepError, split_principal
from wgk.conformance.traces.format import Trace


@dataclass
class BatchCut:
    """One crash point inside a batch and its verdict."""

    first: int                 # the batch's first step
    size: int
    index: int                 # which hook call within the batch
    boundary: str
    divergences: list[Divergence] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def verdict(self) -> str:
        return "pass" if not self.divergences else "fail"

    @property
    def name(self) -> str:
        return f"batch at step {self.first} ({self.size} requests) {self.boundary}"


@dataclass
class BatchResult:
    trace: str
    path: str | None
    batches: int
    divergences: list[Divergence] = field(default_factory=list)
    cuts: list[BatchCut] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return "pass" if not self.divergences else "fail"


def groups(trace: Trace, size: int) -> list[list[int]]:
    """Step indices in order: batches of up to ``size`` consecutive requests of one sender,
    and each environment step alone."""
    out: list[list[int]] = []
    for n, step in enumerate(trace.steps):
        sender = step["request"].get("principal") if "request" in step else None
        last = out[-1] if out else None
        if ("request" in step and last and "request" in trace.steps[last[0]] and len(last) < size
                and trace.steps[last[0]]["request"].get("principal") == sender):
            last.append(n)
        else:
            out.append([n])
    return out


def _div(trace: Trace, n: int, what: str, request, expected, actual, diffs=(), boundary=None):
    return Divergence(trace.id, n, "impl", what, request, expected, actual, tuple(diffs),
                      boundary=boundary)


@dataclass
class _Batch:
    """One batch as the model decided it."""

    steps: list[int]
    bodies: list[dict]
    credential: str | None
    decisions: list[dict | None]
    projections: list[dict]        # before the batch, then after each request
    effected: list[dict] = field(default_factory=list)   # p -> before request p, its effect done
    before: object = None          # the model's state before the batch (``ModelSystem.snapshot``)
    resent: dict = field(default_factory=dict)   # p -> ``resent`` after p committed requests


def _model_batch(model: ModelSystem, trace: Trace, steps: list[int]) -> _Batch:
    bodies, credential = [], None
    decisions, projections, before = [], [model.project()], model.snapshot()
    effected = []
    for n in steps:
        body, credential = split_principal(trace.steps[n]["request"])
        bodies.append(body)
        prior = model.state
        decisions.append(model.apply(trace.steps[n]))
        projections.append(model.project())
        effected.append(with_effects(model, prior, model.state))
    return _Batch(steps, bodies, credential, decisions, projections, before=before,
                  effected=effected)


def batch_replay(trace: Trace, *, size: int = 3, cuts: bool = True) -> BatchResult:
    """The trace with its requests in batches of up to ``size``; crash cuts in every batch of
    two or more requests when ``cuts``. The model decides and projects; it evaluates no
    invariant (the replay section does, on the same trace's run of the model)."""
    model = ModelSystem(trace, checking=False)
    recorder = Recorder()
    impl = ImplSystem(trace, hook=recorder)
    result = BatchResult(trace.id, trace.path, 0)
    last = None                    # the ledger as replayed before the last batch cut
    with tempfile.TemporaryDirectory(prefix="wgk-batch-") as tmp, database(tmp) as db:
        try:
            for k, group in enumerate(groups(trace, size)):
                if "request" not in trace.steps[group[0]]:
                    result.divergences += _env_step(trace, group[0], model, impl)
                    continue
                result.batches += 1
                cut = cuts and len(group) > 1
                snap = _snapshot(impl, os.path.join(tmp, f"before-{k}.db"), True, last) if cut else None
                last = snap.replayed if snap is not None else last
                batch = _model_batch(model, trace, group)
                start = len(recorder.seen)
                answers = impl.kernel.handle_batch(batch.bodies, batch.credential)
                result.divergences += _compare(trace, batch, answers, impl.project())
                if snap is not None:
                    with contextlib.closing(Scratch(snap.replayed)) if snap.replayed else \
                            contextlib.nullcontext() as snap.scratch:
                        for j, b in enumerate(recorder.seen[start:]):
                            result.cuts.append(_cut(trace, batch, snap, db, j, b.describe()))
        finally:
            impl.close()
    return result


def _env_step(trace: Trace, n: int, model: ModelSystem, impl: ImplSystem) -> list[Divergence]:
    step = trace.steps[n]
    try:
        model.apply(step)
    except StepError:
        return []
    impl.apply(step)
    return is_valid_step(Observed(None, model.project()), Observed(None, impl.project()),
                         trace=trace.id, step=n, system="impl", request=None,
                         decided=False).divergences


def _compare(trace: Trace, batch: _Batch, answers: list[dict], projection: dict,
             boundary: str | None = None, wanted: tuple[list, dict] | None = None) -> list[Divergence]:
    """Each answer against the model's decision, the state after the batch against the model's
    (``wanted``: other decisions and state, those of a re-sent batch)."""
    out = []
    decisions, after = wanted or (batch.decisions, batch.projections[-1])
    for i, (n, answer) in enumerate(zip(batch.steps, answers)):
        want = decisions[i]
        if answer != want:
            out.append(_div(trace, n, "batch-decision", batch.bodies[i], want, answer,
                            boundary=boundary))
    diffs = diff_values(after, projection)
    if diffs:
        out.append(_div(trace, batch.steps[-1], "batch-projection", batch.bodies[-1], None, None,
                        diffs, boundary=boundary))
    return out


def recovered_prefix(batch: _Batch, recovered: dict) -> tuple[int, bool] | None:
    """(p, effect): the recovered state is the model's after the batch's first ``p`` requests,
    with the external effect of request ``p`` done but not recorded when ``effect``."""
    n = len(batch.bodies)
    for p in range(n + 1):
        if not diff_values(batch.projections[p], recovered):
            return p, False
    for p in range(n):
        if not diff_values(batch.effected[p], recovered):
            return p, True
    return None


def matching_prefixes(batch: _Batch, recovered: dict) -> list[int]:
    """Every ``p`` whose state (or with request ``p``'s effect done) is the one recovered
    (requests that change nothing visible make several prefixes look alike)."""
    n = len(batch.bodies)
    return [p for p in range(n + 1)
            if not diff_values(batch.projections[p], recovered)
            or (p < n and not diff_values(batch.effected[p], recovered))]


#: The kinds whose applied request may act on the world (a worktree made, saved, kept or
#: removed; a ref pinned; the target moved; an output delivered): docs/vocabulary.md.
WORLD_KINDS = frozenset({"dispatch", "retry", "resume", "save-work", "commit-effect",
                         "commit-cleanup", "declare-lost", "reset", "abandon", "revise",
                         "reopen"})


def performs_effect(batch: _Batch, p: int) -> bool:
    """Request ``p`` of the batch may perform an external effect (an applied request of a
    kind that acts on the world, or one whose effect shows in the model's world): the one
    reason a batch commits what precedes it on its own."""
    if diff_values(batch.projections[p], batch.effected[p]):
        return True
    return (batch.bodies[p].get("kind") in WORLD_KINDS
            and (batch.decisions[p] or {}).get("decision") == "applied")


def _cut(trace: Trace, batch: _Batch, snap, db: str, j: int, where: str) -> BatchCut:
    t0 = time.perf_counter()
    cut = BatchCut(batch.steps[0], len(batch.steps), j, where)
    crash = CrashAt(index=j)
    impl = _restore(snap, db, crash)
    try:
        try:
            impl.kernel.handle_batch(batch.bodies, batch.credential)
        except Crash:
            pass
        if crash.fired is None:
            cut.divergences.append(_div(trace, batch.steps[0], "boundary-not-reached",
                                        batch.bodies[0], where, "no crash", boundary=where))
            return cut
        impl.hook = no_hook
        impl.crash()
        cut.divergences += _after_crash(trace, batch, impl, where, snap)
    finally:
        impl.close()
        cut.seconds = time.perf_counter() - t0
    return cut


def resent(trace: Trace, batch: _Batch, committed: int) -> tuple[list, dict]:
    """What the model answers when the whole batch is re-sent after its first ``committed``
    requests were committed (a used key is a duplicate; a hold, never journaled, is decided
    again), and its state afterwards (the model's, computed once per batch and ``committed``)."""
    if committed in batch.resent:
        return batch.resent[committed]
    model = ModelSystem(trace, checking=False)
    model.restore(batch.before)
    for i in range(committed):
        model.apply({"request": trace.steps[batch.steps[i]]["request"]})
    answers = [model.apply({"request": trace.steps[n]["request"]}) for n in batch.steps]
    batch.resent[committed] = answers, model.project()
    return batch.resent[committed]


def _after_crash(trace: Trace, batch: _Batch, impl: ImplSystem, where: str,
                 snap) -> list[Divergence]:
    recovered = impl.project()
    found = recovered_prefix(batch, recovered)
    if found is None:
        return [_div(trace, batch.steps[0], "recovered-state", batch.bodies[0],
                     "a prefix of the batch, or a prefix with the next request's external effect",
                     "none of them", diff_values(batch.projections[0], recovered), boundary=where)]
    p, _ = found
    if not any(q in (0, len(batch.bodies)) or performs_effect(batch, q)
               for q in matching_prefixes(batch, recovered)):
        return [_div(trace, batch.steps[p], "batch-split", batch.bodies[p],
                     f"none or all of the requests up to the next external effect committed "
                     f"(a member commits alone only when it performs an effect)",
                     f"the first {p} of {len(batch.bodies)} recovered without request {p}",
                     boundary=where)]
    wanted = resent(trace, batch, p)
    answers = impl.kernel.handle_batch(batch.bodies, batch.credential)   # the sender re-sends
    out = _compare(trace, batch, answers, impl.project(), where, wanted)
    if not out:
        out += _consistent(trace, batch.steps[0], batch.bodies[0], impl.kernel, where,
                           snap.replayed, snap.scratch)
    return out
