"""The gate's ``probes`` section: the implementation's own authority and edge tables
compared with the model's in behaviour (``wgk.conformance.oracle.probes``).

At every state of each chosen trace, every enumerated request is sent as its own actor
once per phase and as every other actor once per kind; each probe the model rejects
must be rejected by the implementation with the same code."""
from __future__ import annotations

from wgk.conformance.oracle.coverage import recording
from wgk.conformance.oracle.impl_system import ImplSystem
from wgk.conformance.oracle.probes import probe_trace
from wgk.conformance.reports.gate_budget import BUDGETS, Meter, Progress, count_of
from wgk.conformance.reports.gate_real import database_world
from wgk.conformance.reports.gate_report import Check


def probe_traces(budget: str, loaded: list) -> list:
    """Every trace, or the budget's number of those that send the most kinds of request
    (the fewest steps first among equals)."""
    b = BUDGETS[budget]["probes"]
    if not isinstance(b, dict):
        raise ValueError(f"budget {budget}: probes must map traces, not {b!r}")
    if b.get("traces") == "all":
        return list(loaded)
    n = count_of(budget, "probes", b.get("traces"), "traces")
    return sorted(loaded, key=lambda t: (-len(_kinds(t)), len(t.steps), t.id))[:n]


def _kinds(trace) -> set[str]:
    return {s["request"].get("kind") for s in trace.steps if "request" in s}


def probe_checks(budget: str, progress: Progress | None, loaded: list) -> list[Check]:
    """One check per chosen trace: every probe answered alike, and at least one sent."""
    chosen = probe_traces(budget, loaded)
    meter = Meter("probes", len(chosen), progress)
    world = f"{database_world()}, in-memory world"
    out = []
    for trace in chosen:
        with recording() as sent:
            r = probe_trace(trace, lambda t: ImplSystem(t))
        if r.mismatch:
            m = r.mismatch
            detail = (f"before step {m['before-step']}: {m['request']['kind']} as "
                      f"{m['request']['actor']}: the model {m['model']}, the implementation "
                      f"{m['impl']}")
        elif r.problems:
            detail = r.problems[0]
        else:
            detail = "" if r.probes else "no probe was sent: nothing was checked"
        out.append(Check("probes", trace.id, "pass" if r.ok else "fail", r.seconds, detail,
                         dict(r.to_json(), world=world, path=str(trace.path), cells=sorted(sent)),
                         group="probes"))
        meter.step(trace.id)
    return out


__all__ = ["probe_checks", "probe_traces"]
