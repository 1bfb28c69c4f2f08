"""Probes: the vocabulary's tables compared in behaviour, not as copies.

The implementation keeps its own authority table (which actor may send which kind)
and its own edge table (which phase each transaction kind leaves from), written from
``docs/vocabulary.md``; nothing compares them with the model's tables. Instead, at
every state a trace passes through, each request the model's enumeration offers for
each task (``wgk.model.actions.task_steps``, every kind, transaction edges from any
phase) is sent as its own actor and as every other actor, to the model and to the
implementation side by side. A probe the model rejects is sent to the implementation,
which must reject it with the same code; a rejection changes nothing, so the run then
goes on along the trace. A probe the model would apply is left out (it would leave
the trace), so a table that grants too much — an actor the model refuses, an edge
from a phase the model does not leave — answers ``applied`` or another code, and is
caught at the first state where the two differ.

Results are data (``ProbeResult``); nothing here prints.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from wgk.model.actions import task_steps
from wgk.model.instance import Instance
from wgk.model.requests import Request
from wgk.model.vocab import Actor

from wgk.conformance.oracle.fuzz import FuzzConfig, fuzz_instance
from wgk.conformance.oracle.systems import ModelSystem, StepError, System
from wgk.conformance.oracle.wire import request_to_wire
from wgk.conformance.traces.format import Trace

def probe_instance(trace: Trace) -> Instance:
    """The fuzzer's instance for the trace's graph: every kind, edges from any phase, bounds
    no run reaches (``fuzz.fuzz_instance``)."""
    review = any(t.get("review-required") for t in trace.graph.get("tasks", []))
    return fuzz_instance(FuzzConfig(tasks=len(trace.graph.get("tasks", [])), review=review))


@dataclass
class ProbeResult:
    trace: str
    probes: int = 0                  # probes sent to both (the model rejected each)
    skipped: int = 0                 # probes the model would apply (left out)
    mismatch: dict[str, Any] | None = None   # the first probe the two answered differently
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.mismatch is None and not self.problems and self.probes > 0

    def to_json(self) -> dict:
        return {"trace": self.trace, "probes": self.probes, "skipped": self.skipped,
                "mismatch": self.mismatch, "problems": self.problems,
                "seconds": round(self.seconds, 3)}


def _probes(model: ModelSystem, inst: Instance, seen: set) -> list[dict]:
    """The enumerated requests of every task not yet probed in this situation: each as its
    own actor once per phase of its task (the edge table), and as every other actor once
    per kind (authority is checked before anything else, so one state shows it)."""
    out = []
    for i, name in enumerate(model.graph.tasks):
        t = model.state.tasks[i]
        situation = (name, t.phase, t.exit, t.attempt_state)
        for r in task_steps(inst, model.state, i):
            if not isinstance(r, Request):
                continue
            for actor in Actor:
                key = (r.kind, actor) if actor != r.actor else (r.kind, situation)
                if key in seen:
                    continue
                seen.add(key)
                posed = replace(r, actor=actor, principal=_sender(model.graph, actor))
                out.append(request_to_wire(posed, model.names))
    return out


def _sender(graph, actor: Actor) -> str | None:
    """Who sends a probe as ``actor`` in a closed graph: a declared principal holding that
    role (its authority is what is probed), else any declared one (its role is refused)."""
    if not graph.closed:
        return None
    holders = sorted(p for p, roles in graph.principals.items() if actor in roles)
    return (holders or sorted(graph.principals) or [None])[0]


def _model_answer(model: ModelSystem, request: dict) -> dict | None:
    snap = model.snapshot()
    try:
        return model.apply({"request": request})
    except StepError:
        return None
    finally:
        model.restore(snap)


def probe_trace(trace: Trace, make_impl: Callable[[Trace], System]) -> ProbeResult:
    """Probe every state of ``trace`` (see the module's docstring)."""
    t0 = time.perf_counter()
    result = ProbeResult(trace.id)
    model, impl = ModelSystem(trace), make_impl(trace)
    inst, seen = probe_instance(trace), set()
    try:
        for n, step in enumerate(trace.steps):
            if "request" in step and not _probe_state(model, impl, inst, n, seen, result):
                break
            model.apply(step)
            impl.apply(step)
    except StepError as e:
        result.problems.append(f"step {n}: {e}")
    finally:
        impl.close()
    result.seconds = time.perf_counter() - t0
    return result


def _probe_state(model: ModelSystem, impl: System, inst: Instance, n: int, seen: set,
                 result: ProbeResult) -> bool:
    """Send this state's probes; False at the first mismatch."""
    for k, request in enumerate(_probes(model, inst, seen)):
        request["key"] = f"probe-{n}-{k}"
        expected = _model_answer(model, request)
        if expected is None or expected.get("decision") != "rejected":
            result.skipped += 1
            continue
        try:
            got = impl.apply({"request": request})
        except StepError as e:
            got = {"error": str(e).splitlines()[0]}
        result.probes += 1
        if got != expected:
            result.mismatch = {"before-step": n, "request": request, "model": expected,
                               "impl": got}
            return False
    return True


__all__ = ["ProbeResult", "probe_instance", "probe_trace"]
