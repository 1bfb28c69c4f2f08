"""Replay, crash cuts, probes and fuzzing against an external kernel (``--external CMD``).

Every run starts ``CMD`` as a subprocess speaking ``wgk-conformance/2``
(``external.ExternalSystem``) and compares it with the model, exactly as the
in-process runs compare wgk's own kernel:

- ``applicable``: whether a trace needs only what the kernel declared (its
  request kinds and environment steps); otherwise the trace is skipped, with
  the reason, and counted;
- ``replay_external``: the trace in lockstep with the model, crashes
  (``crash`` steps: a real ``kill -9``, restart and ``recover``) and lost
  responses included;
- ``crash_cuts_external``: one cut per durable boundary each request passes
  (as the kernel counts them, ``boundaries``), and one before the first
  (``crash-after`` 0: the recovered state must be the prefix's): a fresh storage, the prefix,
  the step with ``crash-after``, restart, ``recover``, the recovered state
  compared with the model's, the request re-sent, the rest of the trace run
  and its final projection compared;
- ``Unusable``: the process broke the protocol; its message names the trace,
  the step and the last lines of stderr.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Iterator

from wgk.model.vocab import Kind

from wgk.conformance.oracle.crashcuts import Cut, _resend_answer, with_effects
from wgk.conformance.oracle.external import DEFAULT_TIMEOUT, ExternalSystem, ProtocolError, Spares
from wgk.conformance.oracle.lockstep import Divergence, Observed, diff_values, is_valid_step
from wgk.conformance.oracle.replay import TraceResult, replay
from wgk.conformance.oracle.systems import ModelSystem, StepError

#: The environment steps a kernel takes when it does not list them (``crash`` and
#: ``lost-response`` are the harness's own).
ALL_ENV = ("edit", "owner-dies", "pid-reuse", "move-target", "tick", "converge")
HARNESS_ENV = ("crash", "lost-response")
#: Every request kind of the model (what "implements 14 of 43 kinds" counts against).
ALL_KINDS = sorted(k.label for k in Kind)


class Unusable(RuntimeError):
    """The external kernel could not be run to a verdict (protocol broken, hung, died)."""


@dataclass
class Kernel:
    """How to start the external kernel, and what it declared at its first ``start``;
    ``spares``: inside ``reusing()``, its processes reset for the next system."""

    command: str
    timeout: float = DEFAULT_TIMEOUT
    capabilities: dict | None = None
    spares: Spares | None = field(default=None, repr=False, compare=False)

    @contextlib.contextmanager
    def reusing(self) -> Iterator[None]:
        """While inside, a system on the in-memory world that closes hands its process, reset,
        to the next system instead of stopping it, when the kernel declares ``reset``: one
        start of the command per crash cut instead of two (the crash's restart is always a
        new process). The idle processes are stopped on the way out. Not to be held across a
        ``fork``: the processes are this process's children."""
        if self.spares is not None:
            yield
            return
        self.spares = Spares()
        try:
            yield
        finally:
            spares, self.spares = self.spares, None
            spares.close()

    def system(self, source, initial: dict | None = None, where: str = "",
               real: bool = False) -> ExternalSystem:
        """A started system on a fresh storage (``StepError``: the kernel refused the setup;
        ``real``: on a real world the harness makes, ``external_real``)."""
        try:
            if real:
                from wgk.conformance.oracle.external_real import RealExternal
                ext = RealExternal(self.command, source, timeout=self.timeout)
            else:
                ext = ExternalSystem(self.command, source, initial, timeout=self.timeout,
                                     spares=self.spares)
        except ProtocolError as e:
            raise Unusable(f"{where}: start: {e}" if where else f"start: {e}") from None
        if self.capabilities is None:
            self.capabilities = ext.capabilities
        return ext

    def probe(self) -> dict:
        """The capabilities, asking a kernel started on a one-task graph when not yet known."""
        if self.capabilities is None:
            self.system({"id": "g", "target": "main-0", "tasks": [{"name": "a", "deps": []}]},
                        where="capabilities").close()
        return self.capabilities


def needs(trace) -> tuple[set[str], set[str]]:
    """The request kinds and environment steps a trace sends."""
    kinds = {s["request"].get("kind") for s in trace.steps if "request" in s}
    env = {s.get("env") for s in trace.steps if "env" in s} - set(HARNESS_ENV)
    return kinds, env


def applicable(trace, caps: dict) -> str | None:
    """None when the kernel declared everything the trace needs, else why it is skipped."""
    kinds, env = needs(trace)
    missing = sorted(kinds - set(caps["kinds"]))
    if missing:
        return f"sends kinds not declared: {', '.join(missing)}"
    missing = sorted(env - set(caps.get("env", ALL_ENV)))
    if missing:
        return f"takes environment steps not declared: {', '.join(missing)}"
    if trace.initial and caps.get("seeds", True) is False:
        return "seeds attempts (initial); the kernel declares seeds: false"
    return None


def coverage(caps: dict, total_kinds: int, skipped: int, of: int) -> str:
    """How much applied: "implements 14 of 43 kinds: 31 of 83 traces skipped"."""
    return (f"implements {len(set(caps['kinds']))} of {total_kinds} kinds: "
            f"{skipped} of {of} traces skipped")


def _where(trace, ext: ExternalSystem | None) -> str:
    return f"trace {trace.id}" + (f" step {ext.steps}" if ext is not None else "")


def on_real_world(trace, caps: dict) -> bool:
    """Whether the trace can run on the real world the harness makes for this kernel (it
    declares ``"real"``, and the trace's steps can be staged for real)."""
    from wgk.conformance.oracle.real_world import world_for
    return "real" in caps.get("worlds", ()) and world_for(trace)[0] == "real"


def replay_external(trace, kernel: Kernel, real: bool = False) -> TraceResult:
    """The trace through the model and the external kernel in lockstep (``real``: on a real
    world the harness makes, where the kernel declares it and the trace allows)."""
    model = ModelSystem(trace)
    try:
        ext = kernel.system(trace, where=f"trace {trace.id}", real=real)
    except StepError as e:
        model.close()
        return TraceResult(trace.id, trace.path, ("model", "external"), (), (Divergence(
            trace.id, None, "external", "step-error", None, "set up the trace", str(e)),))
    try:
        return replay(trace, [model, ext])
    except ProtocolError as e:
        raise Unusable(f"trace {trace.id}: {e}") from None
    finally:
        ext.close()
        model.close()


@dataclass
class ExternalCuts:
    trace: str
    cuts: list[Cut] = field(default_factory=list)
    real: bool = False

    @property
    def passed(self) -> bool:
        return all(c.verdict == "pass" for c in self.cuts)


def _model_run(trace) -> tuple[list[dict | None], list[dict], list[dict]]:
    """The model's decision at every step, its projection before the first and after each,
    and before each step with that step's external effect made durable (``with_effects``)."""
    model = ModelSystem(trace)
    decisions, projections, effected = [], [model.project()], []
    for step in trace.steps:
        prior = model.state
        try:
            decisions.append(model.apply(step))
        except StepError:
            decisions.append(None)
        projections.append(model.project())
        effected.append(with_effects(model, prior, model.state))
    model.close()
    return decisions, projections, effected


def boundaries_of(trace, kernel: Kernel, real: bool = False) -> list[int | None]:
    """How many durable boundaries the kernel passes at each step (None: not a request;
    ``real``: on a real world the harness makes)."""
    ext = kernel.system(trace, where=f"trace {trace.id}", real=real)
    out: list[int | None] = []
    try:
        for step in trace.steps:
            try:
                ext.apply(step)
            except StepError:               # refused as a step: nothing written
                ext.boundaries = 0
            if "request" in step and not isinstance(ext.boundaries, int):
                raise Unusable(f"trace {trace.id}: step {len(out)}: the kernel declares a crash "
                               f"hook, but its answer to apply has no 'boundaries' count")
            out.append(ext.boundaries if "request" in step else None)
            ext.boundaries = None
    except ProtocolError as e:
        raise Unusable(f"trace {trace.id}: {e}") from None
    finally:
        ext.close()
    return out


def crash_cuts_external(trace, kernel: Kernel, progress=None, real: bool = False) -> ExternalCuts:
    """Every crash cut of ``trace`` through the crash hook (see the module's docstring);
    ``real``: each cut on a real world the harness makes (a fresh repository and real owner
    processes; the kernel's crash leaves both as they are, and after the restart the
    repository itself must agree with the model: ``RealExternal.repository_problem``)."""
    decisions, projections, effected = _model_run(trace)
    counts = boundaries_of(trace, kernel, real)
    result = ExternalCuts(trace.id, real=real)
    for k, step in enumerate(trace.steps):
        n = counts[k]
        if n is None:
            continue
        for j in range(0, n + 1):
            t0 = time.perf_counter()
            cut = Cut(k, j, f"after boundary {j} of {n}" if j else
                      f"before boundary 1 of {n} (crash-after 0)")
            cut.divergences = _one_cut(trace, kernel, k, j, decisions, projections, effected,
                                       cut.boundary, real)
            cut.seconds = time.perf_counter() - t0
            result.cuts.append(cut)
            if progress:
                progress(f" cut {len(result.cuts)}: {cut.name} {cut.verdict}")
    return result


def _take(ext: ExternalSystem, step: dict) -> None:
    try:
        ext.apply(step)
    except StepError:
        pass


def _one_cut(trace, kernel: Kernel, k: int, j: int, decisions: list, projections: list,
             effected: list, where: str, real: bool = False) -> list[Divergence]:
    step = trace.steps[k]
    request = step["request"]
    ext = kernel.system(trace, where=f"trace {trace.id}", real=real)
    try:
        for s in trace.steps[:k]:
            _take(ext, s)
        if ext.apply_crashing(step, j) is not None:
            return [Divergence(trace.id, k, "external", "boundary-not-reached", request, where,
                               f"no crash: the request passed {ext.boundaries} boundaries",
                               boundary=where)]
        prefix, landed = projections[k], projections[k + 1]
        recovered = ext.project()
        at_prefix = not diff_values(prefix, recovered)
        at_landed = not diff_values(landed, recovered)
        if j == 0 and not at_prefix:                  # nothing durable before the first boundary
            return [Divergence(trace.id, k, "external", "recovered-state", request, "prefix",
                               "a crash before the first durable boundary left a change",
                               tuple(diff_values(prefix, recovered)), boundary=where)]
        if not (at_prefix or at_landed or not diff_values(effected[k], recovered)):
            return [Divergence(trace.id, k, "external", "recovered-state", request,
                               "prefix, prefix + 1, or prefix with the step's external effect",
                               "none of them", tuple(diff_values(prefix, recovered)),
                               boundary=where)]
        want = _resend_answer(decisions[k], landed=at_landed and not at_prefix)
        try:
            answer = ext.apply(step)                      # the client re-sends, same key
        except StepError as e:
            answer = {"error": str(e)}
        out = is_valid_step(Observed(want, landed), Observed(answer, ext.project()),
                            trace=trace.id, step=k, system="external", request=request,
                            boundary=where, what=("resend-decision", "after-resend")).divergences
        if out or (real and (out := _repository(trace, ext, k, request, landed, where))):
            return out
        for s in trace.steps[k + 1:]:
            _take(ext, s)
        out = is_valid_step(Observed(None, projections[-1]), Observed(None, ext.project()),
                            trace=trace.id, step=None, system="external", request=None,
                            decided=False, boundary=where,
                            what=("final-decision", "final-projection")).divergences
        return out or (_repository(trace, ext, None, None, projections[-1], where) if real else [])
    except ProtocolError as e:
        raise Unusable(f"trace {trace.id} crash cut at step {k} {where}: {e}") from None
    finally:
        ext.close()


def _repository(trace, ext: ExternalSystem, k: int | None, request, projection: dict,
                where: str) -> list[Divergence]:
    """The real repository read by the harness against the model's ``projection``."""
    problem = ext.repository_problem(projection, trace.graph.get("target", "main-0"))
    return [Divergence(trace.id, k, "external", "repository", request, "the model's projection",
                       problem, boundary=where)] if problem else []


class FuzzAbort(BaseException):
    """The external kernel broke the protocol during a generated run: the run stops at once
    (a BaseException, so that the generator does not shrink a broken process)."""


class Translating:
    """An external system whose protocol errors are raised as ``translate(error)``."""

    def __init__(self, inner, translate):
        self.inner, self.translate = inner, translate

    def __getattr__(self, attr):
        fn = getattr(self.inner, attr)
        if not callable(fn):
            return fn

        def call(*a, **kw):
            try:
                return fn(*a, **kw)
            except ProtocolError as e:
                raise self.translate(e) from None
        return call


class _Guarded(Translating):
    """An external system whose protocol errors end a generated run (``FuzzAbort``)."""

    def __init__(self, kernel: Kernel, graph: dict):
        try:
            inner = kernel.system(graph, where="fuzz")
        except Unusable as e:
            raise FuzzAbort(str(e)) from None
        super().__init__(inner, lambda e: FuzzAbort(f"fuzz: {e}"))
        self.name = inner.name


def fuzz_missing(caps: dict) -> str | None:
    """Why generated runs cannot run on this kernel (they send every kind and environment
    step), or None."""
    from wgk.model.vocab import Kind
    kinds = {k.label for k in Kind}
    missing = sorted(kinds - set(caps["kinds"]))
    if missing:
        return f"generated runs send every kind; not declared: {len(missing)} of {len(kinds)}"
    env = sorted(set(ALL_ENV) - {"converge"} - set(caps.get("env", ALL_ENV)))
    if env:
        return f"generated runs take environment steps not declared: {', '.join(env)}"
    return None


class FuzzFactory:
    """For ``wgk fuzz --external``: graph spec -> a started external kernel whose protocol
    errors end the run (``FuzzAbort``). Generated runs never close their system, so each
    new one stops the one before it, and ``close`` the last."""

    def __init__(self, kernel: Kernel):
        self.kernel = kernel
        self.last: _Guarded | None = None

    def __call__(self, graph: dict) -> _Guarded:
        self.close()
        self.last = _Guarded(self.kernel, graph)
        return self.last

    def close(self) -> None:
        if self.last is not None:
            self.last.inner.close()
            self.last = None


def fuzz_factory(kernel: Kernel) -> FuzzFactory:
    return FuzzFactory(kernel)
