"""The gate's sections on traces and generated runs: lockstep replay, crash cuts, fuzzing."""
from __future__ import annotations

import time

from wgk.conformance.oracle.crashcuts import crash_cuts
from wgk.conformance.oracle.fuzz import FuzzConfig, run_fuzz
from wgk.conformance.oracle.impl_system import factory
from wgk.conformance.oracle.replay import replay
from wgk.conformance.oracle.select import systems_for
from wgk.conformance.oracle.systems import StepError
from wgk.conformance.reports.gate_budget import (
    BUDGETS, COUNTEREXAMPLES, Meter, Progress, count_of, first_lines, flag_of, modes_of,
)
from wgk.conformance.reports.gate_report import Check


def replay_checks(budget: str, progress: Progress | None, loaded: list) -> list[Check]:
    """Every trace through the model and the implementation in lockstep."""
    flag_of(budget, "replay", BUDGETS[budget]["replay"])
    meter = Meter("replay", len(loaded), progress)
    out = []
    for trace in loaded:
        t0 = time.perf_counter()
        try:
            systems = systems_for(trace, "both")
        except StepError as e:
            out.append(Check("replay", trace.id, "fail", 0.0, f"cannot set up: {e}"))
            meter.step(trace.id)
            continue
        try:
            r = replay(trace, systems)
        finally:
            for s in systems:
                s.close()
        out.append(Check("replay", trace.id, r.verdict, time.perf_counter() - t0,
                         first_lines(r.divergences), {"steps": len(r.steps), "systems": list(r.systems),
                                                       "reproduce": f"wgk replay {trace.path} --system both",
                                                       "trace": str(trace.path)}))
        meter.step(trace.id)
    return out


def crash_cut_checks(budget: str, progress: Progress | None, loaded: list) -> list[Check]:
    """Every durable boundary of every trace: one check per crash cut."""
    modes = modes_of(budget, BUDGETS[budget]["crash-cuts"])
    meter = Meter("crash-cuts", len(loaded) * len(modes), progress)
    out = []
    for mode in modes:
        for trace in loaded:
            try:
                result = crash_cuts(trace, mode=mode,
                                    progress=lambda m: meter.note(f"{trace.id}{m.rstrip()}"))
            except StepError as e:
                out.append(Check("crash-cuts", f"{trace.id} ({mode})", "fail", 0.0,
                                 f"cannot set up: {e}", group=trace.id))
                meter.step(trace.id)
                continue
            flag = " --kill" if mode == "kill" else ""
            for cut in result.cuts:
                out.append(Check("crash-cuts", f"{trace.id} {cut.name} ({mode})", cut.verdict,
                                 cut.seconds, first_lines(cut.divergences),
                                 {"reproduce": f"wgk replay {trace.path} --system impl --crash-cuts{flag}",
                                  "trace": str(trace.path)}
                                 if cut.divergences else {}, group=trace.id))
            meter.step(f"{trace.id} ({len(result.cuts)} cuts, {mode})")
    return out


def fuzz_checks(budget: str, progress: Progress | None,
                out_dir: str = COUNTEREXAMPLES) -> list[Check]:
    """Generated request sequences through the model and the implementation in lockstep."""
    b = BUDGETS[budget]["fuzz"]
    if not isinstance(b, dict):
        raise ValueError(f"budget {budget}: fuzz must map examples, steps and tasks, not {b!r}")
    examples, steps, tasks = (count_of(budget, "fuzz", b.get(k), k) for k in ("examples", "steps", "tasks"))
    meter = Meter("fuzz", examples, progress)
    make = factory()

    def counted(graph):                   # one system per generated run
        meter.step(f"{examples}x{steps}, {tasks} tasks")
        return make(graph)
    t0 = time.perf_counter()
    r = run_fuzz(FuzzConfig(tasks=tasks, system=counted), examples=examples,
                 steps=steps, seed=0, out_dir=out_dir)
    return [Check("fuzz", f"lockstep {examples}x{steps}", r.verdict,
                  time.perf_counter() - t0,
                  (r.failure or "").splitlines()[0] if r.failure else "", r.to_json())]

