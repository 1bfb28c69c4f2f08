"""The gate as data: sections of checks, each check a verdict.

A budget maps each section to a value that says how much of it runs (a number of
tasks, a list of instances or modes, a flag); a false value (``0``, ``False``, an
empty list) or a missing entry means the section is not run, and it is reported
as ``skipped``. A section that checks nothing (an empty trace set) or raises is
reported as an ``error`` naming it; the other sections still run. Nothing
checked is never a pass.

Progress goes through an injected callback that receives ``Tick`` values; the
gate itself never prints.
"""
from __future__ import annotations

import importlib.resources
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from wgk.model.invariants import REGISTRY

from wgk.conformance.check.explore import Instance, explore
from wgk.conformance.oracle.crashcuts import crash_cuts
from wgk.conformance.oracle.fuzz import FuzzConfig, run_fuzz
from wgk.conformance.oracle import impl_system
from wgk.conformance.oracle.impl_system import factory
from wgk.conformance.oracle.races import RACES, race
from wgk.conformance.oracle.replay import replay
from wgk.conformance.oracle.select import systems_for
from wgk.conformance.oracle.systems import StepError
from wgk.conformance.reports import guard_verify, impl_mutants, trace_support, tracematrix
from wgk.conformance.reports.gate_report import Check, GateResult, Section, write_junit
from wgk.conformance.traces.format import load_traces
from wgk.conformance.z3 import mutants as mutants_mod
from wgk.conformance.oracle.mutant_traces import trace_verdicts
from wgk.conformance.oracle.impl_mutants_catalogue import IMPL_MUTANTS
from wgk.conformance.z3.prove import Bounds, prove
from wgk.conformance.z3.unbounded import model_report
from wgk.conformance.z3.witnesses import witness_reports

__all__ = ["BUDGETS", "SECTIONS", "Check", "GateResult", "Section", "Tick", "bundled_traces",
           "run_gate", "run_section", "write_junit"]

BUDGETS = {
    "quick": {"prove": 2, "mutants": True, "replay": True, "trace-matrix": False,
              "explore": [Instance(tasks=1), Instance(tasks=2)],
              "crash-cuts": ["in-process"],
              "fuzz": {"examples": 30, "steps": 25, "tasks": 2}},
    "default": {"prove": 3, "unbounded": True, "mutants": True, "replay": True, "trace-matrix": True,
                "explore": [Instance(tasks=3)],
                "crash-cuts": ["in-process"],
                "fuzz": {"examples": 150, "steps": 40, "tasks": 3}},
    "deep": {"prove": 4, "unbounded": True, "mutants": True, "replay": True, "trace-matrix": True,
             "explore": [Instance(tasks=3),
                         Instance(tasks=1, attempts=2, groups=("core", "env", "evidence", "operator",
                                                               "legacy")),
                         Instance(tasks=2, groups=("core", "env", "operator", "legacy"),
                                  review=True)],
             "crash-cuts": ["in-process", "kill"],
             "fuzz": {"examples": 2000, "steps": 60, "tasks": 3},
             # every planted bug of wgk.impl, each through the sections of this budget
             "impl-mutants": "default",
             # every '# guards:' marker disabled in turn, through the quick budget's sections
             "verify-guards": "quick"},
}

CRASH_MODES = ("in-process", "kill")
COUNTEREXAMPLES = "traces/counterexamples"


def bundled_traces() -> Path:
    """The trace corpus shipped with wgk: the package data ``wgk.traces`` (in an editable
    install, the checkout's ``traces/``)."""
    try:
        return Path(str(importlib.resources.files("wgk.traces")))
    except ModuleNotFoundError:     # an editable install made before wgk.traces was packaged
        return Path(__file__).resolve().parents[2] / "traces"


#: The bundled traces (the gate's default corpus).
BUNDLED_TRACES = bundled_traces()


# --- progress -------------------------------------------------------------------


@dataclass(frozen=True)
class Tick:
    """Where a section is: ``done`` of ``total`` (None: not known in advance) after
    ``seconds``; ``final`` once the section is over (``label`` is then its verdict)."""

    section: str
    done: int
    total: int | None
    seconds: float
    label: str = ""
    final: bool = False

    @property
    def rate(self) -> float:
        return self.done / self.seconds if self.seconds > 0 else 0.0


Progress = Callable[[Tick], None]


class Meter:
    """Counts a section's work and reports it to an optional ``Progress`` callback."""

    def __init__(self, section: str, total: int | None, progress: Progress | None):
        self.section, self.total, self.progress = section, total, progress
        self.done, self.t0 = 0, time.perf_counter()
        self.note("")

    def step(self, label: str = "") -> None:
        self.done += 1
        self.note(label)

    def note(self, label: str) -> None:
        if self.progress:
            done = self.done if self.total is None else min(self.done, self.total)
            self.progress(Tick(self.section, done, self.total, time.perf_counter() - self.t0, label))


# --- reading a budget by value ---------------------------------------------------


def _count(budget: str, section: str, value, key: str | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        what = f"{section}.{key}" if key else section
        raise ValueError(f"budget {budget}: {what} must be a positive number, not {value!r}")
    return value


def _flag(budget: str, section: str, value) -> None:
    if value is not True:
        raise ValueError(f"budget {budget}: {section} must be true or false, not {value!r}")


def _modes(budget: str, value) -> list[str]:
    if not isinstance(value, (list, tuple)) or not set(value) <= set(CRASH_MODES):
        raise ValueError(f"budget {budget}: crash-cuts must list modes of {', '.join(CRASH_MODES)}, "
                         f"not {value!r}")
    return list(value)


def _instances(budget: str, value) -> list[Instance]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(i, Instance) for i in value):
        raise ValueError(f"budget {budget}: explore must list instances, not {value!r}")
    return list(value)


def _prove_tasks(budget: str) -> int:
    """The tasks of the proofs: the budget's ``prove`` value, 3 when proofs are not run."""
    value = BUDGETS[budget].get("prove")
    return _count(budget, "prove", value) if value else 3


# --- sections ------------------------------------------------------------------


def instance_name(inst: Instance) -> str:
    d = inst.describe()
    name = f"tasks={d['tasks']} attempts={d['attempts']} groups={'+'.join(d['groups'])}"
    return name + (" review" if d["review"] else "")


def explore_checks(budget: str, progress: Progress | None) -> list[Check]:
    instances = _instances(budget, BUDGETS[budget]["explore"])
    meter = Meter("explore", len(instances), progress)
    out = []
    for inst in instances:
        name = instance_name(inst)
        r = explore(inst, progress=lambda states, queue: meter.note(f"{name}: {states} states"))
        detail = (f"{r.distinct_states} states" if not r.violations else
                  "; ".join(f"{v.invariant} after {len(v.path)} steps" for v in r.violations))
        out.append(Check("explore", name, "pass" if not r.violations else "fail", r.seconds,
                         detail, {"distinct_states": r.distinct_states}))
        meter.step(name)
    return out


def _first_lines(divergences, n: int = 3) -> str:
    return "; ".join(d.describe().splitlines()[0] for d in divergences[:n])


def replay_checks(budget: str, progress: Progress | None, loaded: list) -> list[Check]:
    """Every trace through the model and the implementation in lockstep."""
    _flag(budget, "replay", BUDGETS[budget]["replay"])
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
                         _first_lines(r.divergences), {"steps": len(r.steps), "systems": list(r.systems),
                                                       "reproduce": f"wgk replay {trace.path} --system both",
                                                       "trace": str(trace.path)}))
        meter.step(trace.id)
    return out


def crash_cut_checks(budget: str, progress: Progress | None, loaded: list) -> list[Check]:
    """Every durable boundary of every trace: one check per crash cut."""
    modes = _modes(budget, BUDGETS[budget]["crash-cuts"])
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
                                 cut.seconds, _first_lines(cut.divergences),
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
    examples, steps, tasks = (_count(budget, "fuzz", b.get(k), k) for k in ("examples", "steps", "tasks"))
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


def prove_checks(budget: str, progress: Progress | None) -> list[Check]:
    """Every (invariant x transition) proof frame, and a witness for every sometimes property."""
    tasks = _count(budget, "prove", BUDGETS[budget]["prove"])
    goals = [p.id for p in REGISTRY.values() if p.kind == "sometimes"]
    meter = Meter("prove", None, progress)
    report = prove(Bounds(tasks=tasks), progress=lambda m: meter.step(f"{tasks} tasks: {m}"))
    out = [Check("prove", f"{r.invariant} after {r.transition}",
                 "pass" if r.status == "proved" else "fail", r.seconds,
                 "" if r.status == "proved" else f"{r.status}: wgk prove --invariant {r.invariant}",
                 {"solved": r.solved}, group=r.invariant) for r in report.results]
    out += [Check("prove", name, "pass" if ok else "fail", secs, hint, group="base case")
            for name, ok, secs, hint in report.base_checks()]
    for goal in goals:
        [w] = witness_reports([goal])
        ok = w["status"] == "reached"
        out.append(Check("prove", f"witness {w['goal']}", "pass" if ok else "fail", w.get("seconds", 0.0),
                         "" if ok else f"{w['status']}: wgk prove --invariant {w['goal']}",
                         group="witnesses"))
        meter.step(f"witness {goal}")
    if BUDGETS[budget].get("unbounded"):
        out += unbounded_checks(budget, progress)
    return out


def unbounded_checks(budget: str, progress: Progress | None) -> list[Check]:
    """For every graph (part of the prove section where the budget says ``unbounded``): the
    cutoff theorem's conditions hold and each always property is proved at the cutoff graph."""
    _flag(budget, "unbounded", BUDGETS[budget]["unbounded"])
    meter = Meter("prove", None, progress)
    rep = model_report(progress=lambda m: meter.note(f"unbounded: {m}"))
    bad = rep.refused()
    out = [Check("prove", "cutoff conditions", "fail" if bad else "pass", 0.0,
                 f"{bad[0].subject}: {bad[0].detail}: wgk prove --unbounded" if bad else
                 f"{len(rep.conditions)} locality conditions hold")]
    out += [Check("prove", f"{c.property} for every graph",
                  "pass" if c.graphs == "every graph" else "fail", 0.0,
                  "" if c.graphs == "every graph" else f"{c.reasons[0]}: wgk prove --unbounded",
                  c.to_json(), group="unbounded") for c in rep.claims]
    return out


def mutant_checks(budget: str, progress: Progress | None) -> list[Check]:
    """Every known-bad variant of the model must be killed: the proof of the property it names
    fails, and exploration or one of its incident traces detects it."""
    _flag(budget, "mutants", BUDGETS[budget]["mutants"])
    catalogue = mutants_mod.MUTANTS
    meter = Meter("mutants", len(catalogue), progress)
    out = []
    for m in catalogue.values():
        k = mutants_mod.kill(m, traces=trace_verdicts)
        out.append(Check("mutants", m.name, "pass" if k.killed else "fail", k.seconds,
                         k.summary() if k.killed else
                         f"{k.summary()}: wgk mutants --name {m.name}",
                         {"by": k.by, "means": k.means(), "incidents": list(m.incidents)}))
        meter.step(m.name)
    return out


def trace_matrix_checks(budget: str, progress: Progress | None,
                        passed_cuts: dict[str, int] | None = None) -> list[Check]:
    """Every invariant traced: model rule, z3 proof, traces, crash cuts, runtime guard
    (``passed_cuts``: the crash-cuts section's passed cuts per trace, not run again)."""
    _flag(budget, "trace-matrix", BUDGETS[budget]["trace-matrix"])
    tasks = _prove_tasks(budget)
    meter = Meter("trace-matrix", None, progress)
    t0 = time.perf_counter()
    m = tracematrix.build(tasks=tasks, progress=lambda msg: meter.note(msg.strip()),
                          passed_cuts=passed_cuts)
    each = (time.perf_counter() - t0) / max(1, len(m.rows))
    out = [Check("trace-matrix", r.invariant, "fail" if r.missing() else "pass", each,
                 f"no {', '.join(r.missing())}: wgk trace-matrix" if r.missing() else "")
           for r in m.rows]
    if m.findings:
        out.append(Check("trace-matrix", "guard markers", "fail", 0.0,
                         f"{m.findings[0]} ({len(m.findings)} problems): wgk trace-matrix"))
    block = tracematrix.document_block()
    if block is not None and tasks == 3:        # the document's table is generated at 3 tasks
        current = block == tracematrix.markdown(m)
        out.append(Check("trace-matrix", "design document current", "pass" if current else "fail",
                         0.0, "" if current else
                         f"{tracematrix.DOCUMENT.name} differs: wgk trace-matrix --write-docs"))
    return out


def mutant_sections(budget: str) -> list[str]:
    """The sections an implementation mutant runs through on ``budget`` (those that run the
    implementation and that the budget runs), cheapest first."""
    return impl_mutants.impl_sections(n for n, _ in SECTIONS if BUDGETS[budget].get(n))


def impl_mutant_checks(budget: str, progress: Progress | None) -> list[Check]:
    """Every planted bug of the implementation is killed by the gate's own sections."""
    meter = Meter("impl-mutants", len(IMPL_MUTANTS) + 1, progress)
    return impl_mutants.section_checks(budget, BUDGETS[budget]["impl-mutants"], mutant_sections,
                                       meter.step)


def verify_guard_checks(budget: str, progress: Progress | None) -> list[Check]:
    """Every guard marker guards something: disabled, a section's check fails."""
    meter = Meter("verify-guards", None, progress)
    return guard_verify.section_checks(budget, BUDGETS[budget]["verify-guards"], mutant_sections,
                                       meter.step)


#: Sections that take the loaded traces.
TRACE_SECTIONS = ("replay", "crash-cuts")

SECTIONS: list[tuple[str, Callable]] = [("prove", prove_checks), ("mutants", mutant_checks),
                                        ("explore", explore_checks), ("replay", replay_checks),
                                        ("crash-cuts", crash_cut_checks), ("fuzz", fuzz_checks),
                                        ("trace-matrix", trace_matrix_checks),
                                        ("impl-mutants", impl_mutant_checks),
                                        ("verify-guards", verify_guard_checks)]


def run_section(name: str, budget: str, progress: Progress | None = None, *,
                loaded: list | None = None, sources: list[str] | None = None,
                counterexamples: str = COUNTEREXAMPLES,
                passed_cuts: dict[str, int] | None = None) -> Section:
    """One section on the budget's value for it: skipped when that value is false or missing,
    an error naming the section when it checks nothing or raises."""
    value = BUDGETS[budget].get(name)
    if not value:
        why = "not listed" if name not in BUDGETS[budget] else f"{name}: {value!r}"
        return Section(name, [], 0.0, skipped=f"not run in the {budget} budget ({why})")
    t0 = time.perf_counter()
    fn = dict(SECTIONS)[name]
    try:
        if name in TRACE_SECTIONS:
            if not loaded:
                raise _Nothing(f"no traces to {name.replace('-', ' ')} in {', '.join(sources or ['?'])}")
            checks = fn(budget, progress, loaded)
        elif name == "fuzz":
            checks = fn(budget, progress, counterexamples)
        elif name == "trace-matrix":
            checks = fn(budget, progress, passed_cuts)
        else:
            checks = fn(budget, progress)
        if not checks:
            raise _Nothing("the section checked nothing")
    except _Nothing as e:
        checks = [Check(name, name, "error", time.perf_counter() - t0, str(e))]
    except Exception as e:             # noqa: BLE001 -- reported as the section's error verdict
        checks = [Check(name, name, "error", time.perf_counter() - t0,
                        f"raised {type(e).__name__}: {e}".splitlines()[0],
                        {"traceback": traceback.format_exc()})]
    section = Section(name, checks, time.perf_counter() - t0)
    if progress:
        progress(Tick(name, len(checks), len(checks), section.seconds, section.verdict, final=True))
    return section


class _Nothing(Exception):
    """A section with nothing to check."""


def run_gate(budget: str = "default", progress: Progress | None = None, *,
             traces: list[str] | None = None,
             counterexamples: str = COUNTEREXAMPLES,
             backend: str | None = None) -> GateResult:
    """Every section on the given budget; ``traces`` selects trace files or folders;
    a generated failure is written, minimised, under ``counterexamples``; ``backend``
    (a PostgreSQL DSN) runs the implementation's sections on PostgreSQL, the races too."""
    if budget not in BUDGETS:
        raise ValueError(f"unknown budget {budget!r} (known: {', '.join(BUDGETS)})")
    t0 = time.perf_counter()
    sources = [str(p) for p in (traces or [bundled_traces()])]
    loaded = load_traces(sources)          # TraceError: bad input
    impl_system.use_backend(backend)
    try:
        sections = [race_section(budget, progress, backend)] if backend is not None else []
        for name, _ in SECTIONS:
            cut = next((s for s in sections if s.name == "crash-cuts"), None)
            sections.append(run_section(name, budget, progress, loaded=loaded, sources=sources,
                                        counterexamples=counterexamples,
                                        passed_cuts=trace_support.passed_cuts(cut.checks)
                                        if cut is not None and not cut.skipped else None))
    finally:
        impl_system.use_backend(None)
    return GateResult(budget, sections, time.perf_counter() - t0)


def race_section(budget: str, progress: Progress | None, dsn: str) -> Section:
    """The race incidents as real multi-process races on PostgreSQL: one winner a round."""
    rounds = {"quick": 100, "default": 100, "deep": 300}[budget]
    t0 = time.perf_counter()
    checks = []
    try:
        for name in RACES:
            r = race(dsn, name, processes=8, rounds=rounds)
            checks.append(Check("races", name, "pass" if r.ok else "fail", r.seconds,
                                "" if r.ok else r.problems[0], r.to_json()))
        if not checks:
            raise _Nothing("no race to run")
    except Exception as e:             # noqa: BLE001 -- reported as the section's error verdict
        checks = [Check("races", "races", "error", time.perf_counter() - t0,
                        f"raised {type(e).__name__}: {e}".splitlines()[0],
                        {"traceback": traceback.format_exc()})]
    section = Section("races", checks, time.perf_counter() - t0)
    if progress:
        progress(Tick("races", len(checks), len(checks), section.seconds, section.verdict, final=True))
    return section
