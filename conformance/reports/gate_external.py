"""The gate against an external kernel (``wgk gate --external CMD``).

The sections that check only the model (prove, mutants, explore) run unchanged; with
``--cache`` they are kept and reused under the keys the gate in process gives them
(``gate.reusable``), and never a section over the protocol: no key covers what an outside
command answers.
Those that exercise an implementation run over the protocol
(``wgk.conformance.oracle.external_runs``):

- ``replay``: every trace in lockstep with the model (crashes, lost responses), the
  budget's real-world traces on a git repository and owner processes the harness makes
  when the kernel declares the real world (``external_real``);
- ``probes``: the adversarial probes, sent to the kernel;
- ``crash-cuts``: every durable boundary of the chosen traces (and before the first),
  through the crash hook;
- ``fuzz``: generated runs in lockstep, shrunk to a trace on failure;
- ``two-kernels`` and ``races``: several instances on one storage, when the kernel
  declares ``processes`` of 2 or more (``external_several``).

What cannot cross a process boundary is a skipped section with its reason
(``IN_PROCESS``); a trace, a section or a run that needs what the kernel did not
declare is a ``skip`` check with its reason, counted, never a pass. A kernel
that breaks the protocol (does not start, answers what is not JSON, hangs, dies
outside a planned crash) is an ``error`` naming the section, the trace, the step
and its last stderr lines; the section stops there.
"""
from __future__ import annotations

import contextlib
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from wgk.conformance.oracle.external_runs import (
    ALL_KINDS, FuzzAbort, Kernel, Translating, Unusable, applicable, on_real_world, coverage, crash_cuts_external, fuzz_factory, fuzz_missing,
    replay_external,
)
from wgk.conformance.oracle.external_several import (
    race_external, race_missing, two_kernels_external,
)
from wgk.conformance.oracle.external_reopen_race import NAME as REOPEN_RACE
from wgk.conformance.oracle.external_reopen_race import missing as reopen_race_missing
from wgk.conformance.oracle.external_reopen_race import reopen_race_external
from wgk.conformance.oracle.fuzz import FuzzConfig, run_fuzz
from wgk.conformance.oracle.coverage import recording
from wgk.conformance.oracle.races import RACES
from wgk.conformance.oracle.probes import probe_trace
from wgk.conformance.oracle.external import ProtocolError
from wgk.conformance.oracle.external_hostile import bad_credential_problems, closed_trace
from wgk.conformance.oracle.systems import StepError
from wgk.conformance.reports.gate_coverage import coverage_checks
from wgk.conformance.reports.gate_budget import BUDGETS, Meter, Progress, first_lines
from wgk.conformance.reports.gate_probes import probe_traces
from wgk.conformance.reports.gate_real import race_settings
from wgk.conformance.reports.gate_traces import real_selection
from wgk.conformance.oracle.real_world import WORLDS
from wgk.conformance.reports.gate_report import Check, Section
from wgk.conformance.reports.gate_traces import fuzz_budget

#: The sections that run over the protocol.
OVER_PROTOCOL = ("replay", "probes", "crash-cuts", "fuzz", "two-kernels", "races", "coverage")

#: Sections that need wgk's own kernel inside the gate's process, and why.
IN_PROCESS = {
    "contract": "holds wgk's own environment backends (git, /proc) to their doubles, in process",
    "batches": "group commit (Kernel.handle_batch) is not part of the protocol",
    "trace-matrix": "maps the in-process crash cuts' boundaries to the design's guards",
    "impl-mutants": "plants bugs inside wgk's own kernel, in process",
    "verify-guards": "disables guards inside wgk's own kernel, in process",
    "tamper": "edits wgk's own SQLite files and credential files behind its back, in process",
}

#: Sections that run several instances on one storage (the kernel must declare ``processes``
#: of 2 or more; the races need as many as the budget's processes).
SEVERAL = ("two-kernels", "races")

#: How many traces the crash-cut section cuts through the crash hook, per budget (a cut
#: restarts the kernel and replays the trace's prefix on a fresh storage): the default and
#: deep budgets cut every boundary of every request the quick gate cuts in process; and how
#: many generated runs the fuzz section starts per shape (each starts the kernel). The traces
#: the budget's ``real-world.cuts`` selects are cut on the real world too, where the kernel
#: declares it.
CUT_TRACES = {"quick": 3, "default": "all", "deep": "all"}
#: How many traces two instances replay in turn, per budget (each starts two processes).
TWO_KERNEL_TRACES = {"quick": 8, "default": "all", "deep": "all"}
FUZZ_EXAMPLES = {"quick": 8, "default": 40, "deep": 400}
#: How many traces two instances also replay on one real world, and how many rounds each race
#: runs there (a round makes real worktrees and real owner processes), per budget.
REAL_TWO_KERNEL_TRACES = {"quick": 2, "default": "all", "deep": "all"}
REAL_RACE_ROUNDS = {"quick": 4, "default": 20, "deep": 100}
#: Whether the coverage section sends the stored witnesses to the kernel, per budget.
COVERAGE_WITNESSES = {"quick": False, "default": True, "deep": True}



def not_run(name: str, kernel: Kernel) -> str | None:
    """Why a section does not run against this kernel (None: it does)."""
    if name in IN_PROCESS:
        return f"not over the protocol: {IN_PROCESS[name]}"
    if name in SEVERAL:
        n = kernel.capabilities["processes"]
        if n < 2:
            return f"the kernel declares processes: {n} (several on one storage needed)"
    if name == "crash-cuts" and not kernel.capabilities["crash-hook"]:
        return "the kernel declares no crash hook (crash-hook: false)"
    return None


def _skip(section: str, trace, why: str) -> Check:
    return Check(section, trace.id, "skip", 0.0, why, {"path": str(trace.path)}, group=trace.id)


def _error(section: str, name: str, e: Exception) -> Check:
    return Check(section, name, "error", 0.0, f"[{section}] {e}")


def _each(section: str, traces: list, kernel: Kernel, run: Callable, progress: Progress | None,
          workers: int) -> list[Check]:
    """``run(trace) -> [Check]`` on every applicable trace (``workers`` at once); a trace that
    needs what is not declared is a skip; the first unusable answer ends the section."""
    meter = Meter(section, len(traces), progress)
    out: list[Check] = []
    todo = []
    for t in traces:
        why = applicable(t, kernel.capabilities)
        if why:
            out.append(_skip(section, t, why))
            meter.step(t.id)
        else:
            todo.append(t)
    broken: list[Check] = []

    def one(t) -> list[Check]:
        if broken:
            return []
        try:
            return run(t)
        except Unusable as e:
            broken.append(_error(section, t.id, e))
            return []
        finally:
            meter.step(t.id)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for checks in pool.map(one, todo):
            out += checks
    return out + broken[:1]


def replay_checks(budget: str, progress: Progress | None, loaded: list, kernel: Kernel,
                  workers: int) -> list[Check]:
    real = real_selection(budget, loaded, "traces") \
        if "real" in kernel.capabilities.get("worlds", ()) else set()

    def run(trace) -> list[Check]:
        t0 = time.perf_counter()
        on_real = trace.id in real and on_real_world(trace, kernel.capabilities)
        with recording() if workers <= 1 else contextlib.nullcontext(None) as sent:
            r = replay_external(trace, kernel, real=on_real)
        world = f"external, {WORLDS['real'] if on_real else WORLDS['memory']}"
        flag = " --world real" if on_real else ""
        return [Check("replay", trace.id, r.verdict, time.perf_counter() - t0,
                      first_lines(r.divergences),
                      {"steps": len(r.steps), "systems": list(r.systems), "world": world,
                       "reproduce": f"wgk replay {trace.path}{flag} --external '{kernel.command}'",
                       "trace": str(trace.path),
                       **({"cells": sorted(sent)} if sent is not None else {})})]
    return _each("replay", loaded, kernel, run, progress, workers)


def cut_traces(budget: str, loaded: list, kernel: Kernel) -> list:
    """The traces the crash-cut section cuts: all of them, or the budget's number among the
    applicable ones that crash or land, the cheapest first (a cut replays its prefix, and every
    crash in it restarts the kernel)."""
    n = CUT_TRACES[budget]
    return list(loaded) if n == "all" else cut_traces_n(loaded, kernel, n)


def cut_traces_n(loaded: list, kernel: Kernel, n: int) -> list:
    """``n`` applicable traces, those that crash or land first, the cheapest of each."""
    able = [t for t in loaded if applicable(t, kernel.capabilities) is None]
    score = {t.id: sum(s.get("env") == "crash" or s.get("request", {}).get("kind") == "commit-effect"
                       for s in t.steps) for t in able}
    def cost(t) -> int:
        return sum("request" in s for s in t.steps) * (1 + sum(s.get("env") == "crash" for s in t.steps))
    ranked = sorted(able, key=lambda t: (score[t.id] == 0, cost(t), t.id))
    return ranked[:n]


def real_cut_traces(budget: str, loaded: list, kernel: Kernel) -> list:
    """The traces the crash-cut section also cuts on the real world: the budget's
    ``real-world.cuts`` selection, where the kernel declares the real world."""
    if "real" not in kernel.capabilities.get("worlds", ()):
        return []
    real = real_selection(budget, loaded, "cuts")
    return [t for t in loaded if t.id in real and on_real_world(t, kernel.capabilities)
            and applicable(t, kernel.capabilities) is None]


def crash_cut_checks(budget: str, progress: Progress | None, loaded: list, kernel: Kernel,
                     workers: int) -> list[Check]:
    chosen = cut_traces(budget, loaded, kernel)
    real = real_cut_traces(budget, loaded, kernel)

    def run(trace, on_real: bool = False) -> list[Check]:
        r = crash_cuts_external(trace, kernel, real=on_real)
        world = f"external, {WORLDS['real']}" if on_real else "external"
        label = "crash hook, real world" if on_real else "crash hook"
        flag = " --world real" if on_real else ""
        out = []
        for cut in r.cuts:
            data = {"world": world}
            if cut.divergences:
                data.update(reproduce=f"wgk replay {trace.path} --crash-cuts{flag} --external "
                                      f"'{kernel.command}'", trace=str(trace.path))
            out.append(Check("crash-cuts", f"{trace.id} {cut.name} ({label})", cut.verdict,
                             cut.seconds, first_lines(cut.divergences), data, group=trace.id))
        return out or [Check("crash-cuts", f"{trace.id} ({label})", "skip", 0.0,
                             "its requests passed no durable boundary: nothing to cut",
                             {"world": world}, group=trace.id)]
    checks = _each("crash-cuts", chosen, kernel, run, progress, workers)
    checks += _each("crash-cuts", real, kernel, lambda t: run(t, True), progress, workers)
    unable = sum(applicable(t, kernel.capabilities) is not None for t in loaded)
    left = len(loaded) - len(chosen) - (unable if CUT_TRACES[budget] != "all" else 0)
    if unable:
        checks.append(Check("crash-cuts", f"{unable} traces not applicable", "skip", 0.0,
                            f"{unable} traces not cut: they send what the kernel does not "
                            f"declare"))
    if left and CUT_TRACES[budget] != "all":
        checks.append(Check("crash-cuts", f"{left} other traces", "skip", 0.0,
                            f"{left} traces not cut: the {budget} budget cuts "
                            f"{CUT_TRACES[budget]} over the protocol"))
    return checks


def probe_checks(budget: str, progress: Progress | None, loaded: list, kernel: Kernel,
                 workers: int) -> list[Check]:
    missing = sorted(set(ALL_KINDS) - set(kernel.capabilities["kinds"]))
    chosen = probe_traces(budget, loaded)
    if missing:
        return [_skip("probes", t, f"probes send every kind; not declared: {len(missing)} "
                                   f"of {len(ALL_KINDS)}") for t in chosen]

    def run(trace) -> list[Check]:
        try:
            r = probe_trace(trace, lambda t: kernel.system(t, where=f"trace {t.id}"))
        except ProtocolError as e:
            raise Unusable(f"trace {trace.id}: {e}") from None
        if r.mismatch:
            m = r.mismatch
            detail = (f"before step {m['before-step']}: {m['request']['kind']} as "
                      f"{m['request']['actor']}: the model {m['model']}, the kernel {m['impl']}")
        else:
            detail = r.problems[0] if r.problems else "" if r.probes else "no probe was sent"
        return [Check("probes", trace.id, "pass" if r.ok else "fail", r.seconds, detail,
                      dict(r.to_json(), world="external", path=str(trace.path)), group="probes")]
    return _each("probes", chosen, kernel, run, progress, workers) + \
        [bad_credential_check(loaded, kernel)]


def bad_credential_check(loaded: list, kernel: Kernel) -> Check:
    """Credentials of every hostile shape sent with an operator's request on a closed trace's
    graph: each answered as an unknown credential, nothing moved (``external_hostile``)."""
    name = "bad credentials (external)"
    found = closed_trace(loaded)
    if found is None:
        return Check("probes", name, "skip", 0.0, "no trace declares an operator principal",
                     group="hostile inputs")
    trace, principal = found
    why = applicable(trace, kernel.capabilities)
    if why:
        return Check("probes", name, "skip", 0.0, why, group="hostile inputs")
    t0 = time.perf_counter()
    system = kernel.system(trace, where=f"trace {trace.id}")
    try:
        problems = bad_credential_problems(system, trace, principal)
    finally:
        system.close()
    return Check("probes", name, "fail" if problems else "pass", time.perf_counter() - t0,
                 "; ".join(problems[:2]), {"trace": str(trace.path), "principal": principal,
                                           "problems": problems, "world": "external"},
                 group="hostile inputs")


def fuzz_checks(budget: str, progress: Progress | None, counterexamples: str, kernel: Kernel,
                workers: int) -> list[Check]:
    _, steps, tasks, shapes = fuzz_budget(budget)
    examples = FUZZ_EXAMPLES[budget]
    why = fuzz_missing(kernel.capabilities)
    if why:
        return [Check("fuzz", f"lockstep {shape}", "skip", 0.0, why) for shape in shapes]
    meter = Meter("fuzz", examples * len(shapes), progress)
    make = fuzz_factory(kernel)
    out = []
    for shape in shapes:
        def counted(graph):
            meter.step(f"{shape}: {examples}x{steps}, {tasks} tasks")
            return make(graph)
        t0 = time.perf_counter()
        try:
            r = run_fuzz(FuzzConfig(tasks=tasks, shape=shape, system=counted), examples=examples,
                         steps=steps, seed=0, out_dir=counterexamples)
        except FuzzAbort as e:
            make.close()
            out.append(Check("fuzz", f"lockstep {shape}", "error", time.perf_counter() - t0,
                             f"[fuzz] {e}"))
            break
        make.close()
        out.append(Check("fuzz", f"lockstep {examples}x{steps} {shape}", r.verdict,
                         time.perf_counter() - t0,
                         (r.failure or "").splitlines()[0] if r.failure else "",
                         dict(r.to_json(), shape=shape, world="external")))
    return out


def two_kernel_traces(budget: str, loaded: list, kernel: Kernel) -> list:
    """The traces two instances replay: all, or the budget's number among the applicable ones,
    those that crash or land first (the cheapest of each)."""
    n = TWO_KERNEL_TRACES[budget]
    return list(loaded) if n == "all" else cut_traces_n(loaded, kernel, n)


def real_two_kernel_traces(budget: str, loaded: list, kernel: Kernel) -> list:
    """The traces two instances also replay on one real world (where the kernel declares it):
    the budget's number among the ``real-world.traces`` selection, the most real first."""
    if "real" not in kernel.capabilities.get("worlds", ()):
        return []
    real = real_selection(budget, loaded, "traces")
    able = [t for t in loaded if t.id in real and on_real_world(t, kernel.capabilities)
            and applicable(t, kernel.capabilities) is None]
    n = REAL_TWO_KERNEL_TRACES[budget]
    return able if n == "all" else able[:n]


def two_kernel_checks(budget: str, progress: Progress | None, loaded: list, kernel: Kernel,
                      workers: int) -> list[Check]:
    chosen = two_kernel_traces(budget, loaded, kernel)

    def run(trace, real: bool = False) -> list[Check]:
        t0 = time.perf_counter()
        r = two_kernels_external(trace, kernel, real=real)
        world = "external, two instances on one storage in turn" + (
            f", {WORLDS['real']}" if real else "")
        return [Check("two-kernels", f"{trace.id} (real world)" if real else trace.id, r.verdict,
                      time.perf_counter() - t0, first_lines(r.divergences),
                      {"world": world, "trace": str(trace.path)}, group="two-kernels")]
    checks = _each("two-kernels", chosen, kernel, run, progress, workers)
    checks += _each("two-kernels", real_two_kernel_traces(budget, loaded, kernel), kernel,
                    lambda t: run(t, True), progress, workers)
    left = len(loaded) - len(chosen)
    if left:
        checks.append(Check("two-kernels", f"{left} other traces", "skip", 0.0,
                            f"{left} traces not replayed by two instances: the {budget} budget "
                            f"takes {len(chosen)} over the protocol"))
    return checks


def race_checks(budget: str, progress: Progress | None, loaded: list, kernel: Kernel,
                workers: int) -> list[Check]:
    """Each race between the budget's number of instances on one storage (as many as the
    kernel declares, when that is fewer)."""
    processes, rounds = race_settings(budget)
    processes = min(processes, kernel.capabilities["processes"])
    meter = Meter("races", len(RACES) + 1, progress)
    out = []
    for name in RACES:
        why = race_missing(name, kernel.capabilities)
        if why:
            out.append(Check("races", f"{name} (external)", "skip", 0.0, why, group="external"))
            meter.step(name)
            continue
        r = race_external(kernel, name, processes=processes, rounds=rounds)
        out.append(Check("races", f"{name} (external)", "pass" if r.ok else "fail", r.seconds,
                         "" if r.ok else r.problems[0],
                         dict(r.to_json(), world="external, real processes on one storage"),
                         group="external"))
        if "real" in kernel.capabilities.get("worlds", ()):
            try:
                r = race_external(kernel, name, processes=processes,
                                  rounds=min(rounds, REAL_RACE_ROUNDS[budget]), real=True)
            except Unusable as e:           # the memory race's verdict stays beside it
                out.append(Check("races", f"{name} (external, real world)", "error", 0.0,
                                 f"[races] real world: {e}", group="external"))
                meter.step(name)
                continue
            out.append(Check("races", f"{name} (external, real world)",
                             "pass" if r.ok else "fail", r.seconds,
                             "" if r.ok else r.problems[0],
                             dict(r.to_json(), world=f"external, real processes on one storage, "
                                                     f"{WORLDS['real']}"), group="external"))
        meter.step(name)
    return out + [_reopen_race(kernel, processes, rounds, meter)]


def _reopen_race(kernel: Kernel, processes: int, rounds: int, meter: Meter) -> Check:
    """A reopen racing its dependents' effects, judged from the answers (``external_reopen_race``)."""
    name = f"{REOPEN_RACE} (external)"
    why = reopen_race_missing(kernel.capabilities)
    if why:
        check = Check("races", name, "skip", 0.0, why, group="external")
    else:
        r = reopen_race_external(kernel, processes=processes, rounds=rounds)
        check = Check("races", name, "pass" if r.ok else "fail", r.seconds,
                      "" if r.ok else r.problems[0],
                      dict(r.to_json(), world="external, real processes on one storage"),
                      group="external")
    meter.step(REOPEN_RACE)
    return check


def coverage_external(budget: str, progress: Progress | None, loaded: list, kernel: Kernel,
                      workers: int, earlier: set | None = None) -> list[Check]:
    """The coverage section with the stored witnesses sent to the kernel over the protocol
    (the cells replay, probes and fuzz sent it are ``earlier``); skipped when the kernel does
    not declare every kind (coverage is measured per kind of the whole vocabulary)."""
    if not COVERAGE_WITNESSES[budget]:
        return [Check("coverage", "witnesses", "skip", 0.0,
                      f"the {budget} budget does not send the witnesses over the protocol (each "
                      f"fork starts the kernel: about 150 starts); the default budget does")]
    missing = sorted(set(ALL_KINDS) - set(kernel.capabilities["kinds"]))
    if missing:
        return [Check("coverage", "witnesses", "skip", 0.0,
                      f"coverage measures every kind; not declared: {len(missing)} of "
                      f"{len(ALL_KINDS)}")]

    def make(trace):
        ext = kernel.system(trace, where=f"coverage: trace {trace.id}")
        where = f"coverage: trace {trace.id}"
        return Translating(ext, lambda e: Unusable(f"{where}: {e}"))
    able = [t for t in loaded if applicable(t, kernel.capabilities) is None]
    return coverage_checks(budget, progress, able, earlier, make_impl=make)


RUNS = {"coverage": coverage_external, "two-kernels": two_kernel_checks, "races": race_checks, "replay": replay_checks, "probes": probe_checks, "crash-cuts": crash_cut_checks,
        "fuzz": fuzz_checks}


#: Rough seconds of an external section run whole (the pool starts the heaviest first).
WEIGHTS = {"coverage": 30.0, "replay": 60.0, "crash-cuts": 40.0, "fuzz": 35.0, "probes": 10.0,
           "two-kernels": 10.0, "races": 10.0}


def plan(name: str, budget: str, kw: dict, kernel: Kernel,
         workers: int) -> Section | Callable[[Progress | None], list[Check]] | None:
    """How section ``name`` runs against the kernel: None, as always (it checks only the
    model, or its budget skips it: the caller says so); a final ``Section`` (skipped with
    its reason, or an error: the kernel did not start); else the function that runs it over
    the protocol (``progress -> checks``; ``workers`` traces at once)."""
    if name not in OVER_PROTOCOL and name not in IN_PROCESS and name not in SEVERAL:
        return None
    if not BUDGETS[budget].get(name):
        return None
    if name in IN_PROCESS:
        return Section(name, [], 0.0, skipped=f"not over the protocol: {IN_PROCESS[name]}")
    try:
        kernel.probe()
    except (Unusable, StepError) as e:
        return Section(name, [_error(name, "start", e)], 0.0)
    why = not_run(name, kernel)
    if why:
        return Section(name, [], 0.0, skipped=why)
    arg = kw["counterexamples"] if name == "fuzz" else kw["loaded"]
    extra = {"earlier": kw.get("earlier")} if name == "coverage" else {}

    def run(progress: Progress | None) -> list[Check]:
        try:
            with kernel.reusing():             # inside the process that runs the section
                return RUNS[name](budget, progress, arg, kernel, workers, **extra)
        except (Unusable, StepError) as e:
            return [_error(name, "run", e)]
    return run


def run_external_section(name: str, budget: str, progress: Progress | None, kw: dict,
                         kernel: Kernel, workers: int) -> Section | None:
    """The section over the protocol, or skipped with its reason; None: a section that checks
    only the model (the caller runs it as always)."""
    how = plan(name, budget, kw, kernel, workers)
    if how is None or isinstance(how, Section):
        return how
    t0 = time.perf_counter()
    checks = how(progress)
    return Section(name, checks, time.perf_counter() - t0)


def summary(kernel: Kernel, loaded: list) -> dict:
    """What the report says about the kernel: its command, capabilities, how much applied, and
    the sections that cannot cross a process boundary (``in-process``: section -> why)."""
    caps = kernel.capabilities
    if caps is None:
        return {"command": kernel.command, "applied": "did not start", "in-process": IN_PROCESS}
    skipped = sum(applicable(t, caps) is not None for t in loaded)
    return {"command": kernel.command, "capabilities": caps,
            "applied": coverage(caps, len(ALL_KINDS), skipped, len(loaded)),
            "in-process": IN_PROCESS}
