"""The gate's ``probes`` section: the implementation's own authority and edge tables
compared with the model's in behaviour (``wgk.conformance.oracle.probes``).

At every state of each chosen trace, every enumerated request is sent as its own actor
once per phase and as every other actor once per kind; each probe the model rejects
must be rejected by the implementation with the same code."""
from __future__ import annotations

import dataclasses

from wgk.conformance.oracle.coverage import recording
from wgk.conformance.oracle.impl_system import ImplSystem
from wgk.conformance.oracle.probes import ProbeResult, closed_copy, probe_trace
from wgk.conformance.reports.gate_cache_memo import kept_run, memoized
from wgk.conformance.reports.gate_budget import BUDGETS, Meter, Progress, count_of
from wgk.conformance.reports.gate_real import database_world
from wgk.conformance.reports.gate_report import Check


def probe_traces(budget: str, loaded: list) -> list:
    """Every trace, or the budget's number of them chosen greedily: each next one sends the
    most (kind, actor) pairs the earlier ones do not (the fewest steps first among equals)."""
    b = BUDGETS[budget]["probes"]
    if not isinstance(b, dict):
        raise ValueError(f"budget {budget}: probes must map traces, not {b!r}")
    if b.get("traces") == "all":
        return list(loaded)
    n = count_of(budget, "probes", b.get("traces"), "traces")
    chosen, covered = [], set()
    rest = sorted(loaded, key=lambda t: (len(t.steps), t.id))
    while rest and len(chosen) < n:
        best = max(rest, key=lambda t: len(_sent(t) - covered))
        chosen.append(best)
        covered |= _sent(best)
        rest.remove(best)
    return chosen


def _sent(trace) -> set[tuple[str, str]]:
    return {(s["request"].get("kind"), s["request"].get("actor"))
            for s in trace.steps if "request" in s}


def b_thorough(budget: str) -> bool:
    """Whether the budget sends every variant at every state (else each once)."""
    return bool(BUDGETS[budget]["probes"].get("thorough"))


def probe_checks(budget: str, progress: Progress | None, loaded: list) -> list[Check]:
    """One check per chosen trace: every probe answered alike, and at least one sent."""
    chosen = probe_traces(budget, loaded)
    meter = Meter("probes", len(chosen), progress)
    world = f"{database_world()}, in-memory world"
    out = []
    thorough = b_thorough(budget)
    seen: set | None = None if thorough else set()      # quick: each probe once in all traces
    make = memoized(lambda t: ImplSystem(t))    # answered call by call from the gate's cache
    for trace in chosen:
        with recording() as sent:
            r = _probed(closed_copy(trace), make, thorough, seen)
        if r.mismatch:
            m = r.mismatch
            detail = (f"before step {m['before-step']}: {m['request']['kind']} as "
                      f"{m['request']['actor']}"
                      + (f" ({m['variant']})" if m.get("variant") else "")
                      + f": the model {m['model']}, the implementation {m['impl']}"
                      + (f", and it changed {', '.join(m['changed'])}" if m.get("changed") else ""))
        elif r.problems:
            detail = r.problems[0]
        else:
            detail = "" if r.probes else "no probe was sent: nothing was checked"
        out.append(Check("probes", trace.id, "pass" if r.ok else "fail", r.seconds, detail,
                         dict(r.to_json(), world=world, path=str(trace.path), cells=sorted(sent)),
                         group="probes"))
        meter.step(trace.id)
    return out


def _probed(trace, make, thorough: bool, seen: set | None) -> ProbeResult:
    """``probe_trace``, kept by the gate's cache while the model's side is unchanged and the
    implementation answers each call as before (``gate_cache_memo.kept_run``)."""
    def run(making) -> dict:
        before = set(seen) if seen is not None else None
        r = probe_trace(trace, making, thorough=thorough, seen=seen)
        return {"result": dataclasses.asdict(r),
                "added": None if seen is None else seen - before}
    inputs = [trace.to_json(), thorough,
              None if seen is None else sorted(map(repr, seen))]
    out = kept_run("probes", inputs, trace, make, run)
    if seen is not None:
        seen.update(out["added"])
    return ProbeResult(**out["result"])


__all__ = ["probe_checks", "probe_traces"]
