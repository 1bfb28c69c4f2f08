"""The gate as data: sections of checks, each check a verdict."""
from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from pathlib import Path
from dataclasses import dataclass, field
from typing import Callable

from wgk.conformance.check.explore import Instance, explore

BUDGETS = {
    "quick": {"prove": 2, "mutants": True, "replay": True,
              "explore": [Instance(tasks=1), Instance(tasks=2)],
              "crash-cuts": ["in-process"],
              "fuzz": {"examples": 30, "steps": 25, "tasks": 2}},
    "default": {"prove": 3, "mutants": True, "replay": True, "trace-matrix": True,
                "explore": [Instance(tasks=3)],
                "crash-cuts": ["in-process"],
                "fuzz": {"examples": 150, "steps": 40, "tasks": 3}},
    "deep": {"prove": 4, "mutants": True, "replay": True, "trace-matrix": True,
             "explore": [Instance(tasks=3),
                         Instance(tasks=1, attempts=2, groups=("core", "env", "evidence", "operator",
                                                               "legacy")),
                         Instance(tasks=2, groups=("core", "env", "operator", "legacy"),
                                  review=True)],
             "crash-cuts": ["in-process", "kill"],
             "fuzz": {"examples": 2000, "steps": 60, "tasks": 3}},
}

#: The bundled traces (the gate's default corpus).
BUNDLED_TRACES = Path(__file__).resolve().parents[2] / "traces"


@dataclass
class Check:
    section: str
    name: str
    verdict: str            # "pass" | "fail" | "error"
    seconds: float
    detail: str = ""
    data: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"name": self.name, "verdict": self.verdict, "seconds": round(self.seconds, 3),
                "detail": self.detail, **({"data": self.data} if self.data else {})}


@dataclass
class GateResult:
    budget: str
    checks: list[Check]
    seconds: float

    @property
    def verdict(self) -> str:
        return "pass" if all(c.verdict == "pass" for c in self.checks) else "fail"

    def sections(self) -> dict:
        out: dict = {}
        for c in self.checks:
            sec = out.setdefault(c.section, {"verdict": "pass", "checks": []})
            sec["checks"].append(c.to_json())
            if c.verdict != "pass":
                sec["verdict"] = "fail"
        return out

    def to_json(self) -> dict:
        return {"verdict": self.verdict, "budget": self.budget, "sections": self.sections(),
                "seconds": round(self.seconds, 3)}

    def summary(self) -> str:
        lines = []
        for name, sec in self.sections().items():
            n = len(sec["checks"])
            bad = [c for c in sec["checks"] if c["verdict"] != "pass"]
            lines.append(f"{name:12} {'PASS' if not bad else 'FAIL'}  {n - len(bad)}/{n}")
            for c in bad:
                lines.append(f"  FAIL {c['name']}: {c['detail']}")
        lines.append(f"gate {self.verdict.upper()} ({self.budget} budget, {self.seconds:.1f}s)")
        return "\n".join(lines)


def explore_checks(budget: str, progress: Callable[[str], None] | None) -> list[Check]:
    out = []
    for inst in BUDGETS[budget]["explore"]:
        name = "explore " + ",".join(f"{k}={v}" for k, v in inst.describe().items()
                                     if k in ("tasks", "attempts", "groups", "review"))
        if progress:
            progress(f"  {name} ...")
        r = explore(inst)
        detail = (f"{r.distinct_states} states" if not r.violations else
                  "; ".join(f"{v.invariant} after {len(v.path)} steps" for v in r.violations))
        out.append(Check("explore", name, "pass" if not r.violations else "fail", r.seconds,
                         detail, {"distinct_states": r.distinct_states}))
    return out


def _first_lines(divergences, n: int = 3) -> str:
    return "; ".join(d.describe().splitlines()[0] for d in divergences[:n])


def replay_checks(budget: str, progress: Callable[[str], None] | None, loaded: list) -> list[Check]:
    """Every trace through the model and the implementation in lockstep."""
    from wgk.conformance.cli.cmd_replay import systems_for
    from wgk.conformance.oracle.replay import replay
    from wgk.conformance.oracle.systems import StepError
    out = []
    if progress:
        progress(f"  {len(loaded)} traces through the model and the implementation")
    for trace in loaded:
        t0 = time.perf_counter()
        try:
            systems = systems_for(trace, "both")
        except StepError as e:
            out.append(Check("replay", trace.id, "fail", 0.0, f"cannot set up: {e}"))
            continue
        try:
            r = replay(trace, systems)
        finally:
            for s in systems:
                s.close()
        out.append(Check("replay", trace.id, r.verdict, time.perf_counter() - t0,
                         _first_lines(r.divergences), {"steps": len(r.steps), "systems": list(r.systems),
                                                       "reproduce": f"wgk replay {trace.path} --system both"}))
    return out


def crash_cut_checks(budget: str, progress: Callable[[str], None] | None, loaded: list) -> list[Check]:
    """Every durable boundary of every trace: one check per crash cut."""
    from wgk.conformance.oracle.crashcuts import crash_cuts
    from wgk.conformance.oracle.systems import StepError
    modes = BUDGETS[budget]["crash-cuts"]
    out = []
    for mode in modes:
        if progress:
            progress(f"  {mode} crash cuts of {len(loaded)} traces")
        for trace in loaded:
            try:
                result = crash_cuts(trace, mode=mode)
            except StepError as e:
                out.append(Check("crash-cuts", f"{trace.id} ({mode})", "fail", 0.0, f"cannot set up: {e}"))
                continue
            flag = " --kill" if mode == "kill" else ""
            for cut in result.cuts:
                out.append(Check("crash-cuts", f"{trace.id} {cut.name} ({mode})", cut.verdict,
                                 cut.seconds, _first_lines(cut.divergences),
                                 {"reproduce": f"wgk replay {trace.path} --system impl --crash-cuts{flag}"}
                                 if cut.divergences else {}))
    return out


def fuzz_checks(budget: str, progress: Callable[[str], None] | None,
                out_dir: str = "traces/counterexamples") -> list[Check]:
    """Generated request sequences through the model and the implementation in lockstep."""
    from wgk.conformance.oracle.fuzz import FuzzConfig, run_fuzz
    from wgk.conformance.oracle.impl_system import factory
    b = BUDGETS[budget]["fuzz"]
    if progress:
        progress(f"  {b['examples']} generated runs of {b['steps']} steps, {b['tasks']} tasks, in lockstep")
    t0 = time.perf_counter()
    r = run_fuzz(FuzzConfig(tasks=b["tasks"], system=factory()), examples=b["examples"],
                 steps=b["steps"], seed=0, out_dir=out_dir)
    return [Check("fuzz", f"lockstep {b['examples']}x{b['steps']}", r.verdict,
                  time.perf_counter() - t0,
                  (r.failure or "").splitlines()[0] if r.failure else "", r.to_json())]


def prove_checks(budget: str, progress: Callable[[str], None] | None) -> list[Check]:
    """Every (invariant x transition) proof frame, and a witness for every sometimes property."""
    from wgk.conformance.cli.cmd_prove import witness_reports
    from wgk.conformance.z3.prove import Bounds, prove
    from wgk.model.invariants import REGISTRY
    tasks = BUDGETS[budget]["prove"]
    if progress:
        progress(f"  inductive proofs at {tasks} tasks, and sometimes witnesses")
    report = prove(Bounds(tasks=tasks))
    out = [Check("prove", f"{r.invariant} x {r.transition}",
                 "pass" if r.status == "proved" else "fail", r.seconds,
                 "" if r.status == "proved" else f"{r.status}: wgk prove --invariant {r.invariant}",
                 {"solved": r.solved}) for r in report.results]
    goals = [p.id for p in REGISTRY.values() if p.kind == "sometimes"]
    for w in witness_reports(goals):
        ok = w["status"] == "reached"
        out.append(Check("prove", f"witness {w['goal']}", "pass" if ok else "fail", w.get("seconds", 0.0),
                         "" if ok else f"{w['status']}: wgk prove --invariant {w['goal']}"))
    return out


def mutant_checks(budget: str, progress: Callable[[str], None] | None) -> list[Check]:
    """Every known-bad variant of the model must be killed by a proof and by BMC."""
    from wgk.conformance.z3.mutants import MUTANTS, kill
    out = []
    if progress:
        progress(f"  {len(MUTANTS)} mutants")
    for m in MUTANTS.values():
        k = kill(m)
        out.append(Check("mutants", m.name, "pass" if k.killed else "fail", k.seconds,
                         "killed by " + ", ".join(k.by) if k.killed else
                         f"survived (by: {', '.join(k.by) or 'nothing'}): wgk check --mutant {m.name}",
                         {"by": k.by, "incidents": list(m.incidents)}))
    return out


def trace_matrix_checks(budget: str, progress: Callable[[str], None] | None) -> list[Check]:
    """Every invariant traced: model rule, z3 proof, traces, crash cuts, runtime guard."""
    from wgk.conformance.reports.tracematrix import DOCUMENT, build, document_block, markdown
    tasks = BUDGETS[budget]["prove"]
    if progress:
        progress(f"  the traceability matrix (proofs at {tasks} tasks)")
    t0 = time.perf_counter()
    m = build(tasks=tasks)
    each = (time.perf_counter() - t0) / max(1, len(m.rows))
    out = [Check("trace-matrix", r.invariant, "fail" if r.missing() else "pass", each,
                 f"no {', '.join(r.missing())}: wgk trace-matrix" if r.missing() else "")
           for r in m.rows]
    if m.findings:
        out.append(Check("trace-matrix", "guard markers", "fail", 0.0,
                         f"{m.findings[0]} ({len(m.findings)} problems): wgk trace-matrix"))
    block = document_block()
    if block is not None and tasks == 3:        # the document's table is generated at 3 tasks
        current = block == markdown(m)
        out.append(Check("trace-matrix", "design document current", "pass" if current else "fail",
                         0.0, "" if current else
                         f"{DOCUMENT.name} differs: wgk trace-matrix --write-docs"))
    return out


#: Sections that take the loaded traces.
TRACE_SECTIONS = ("replay", "crash-cuts")

SECTIONS: list[tuple[str, Callable]] = [("prove", prove_checks), ("mutants", mutant_checks),
                                        ("explore", explore_checks), ("replay", replay_checks),
                                        ("crash-cuts", crash_cut_checks), ("fuzz", fuzz_checks),
                                        ("trace-matrix", trace_matrix_checks)]


def run_gate(budget: str = "default", progress: Callable[[str], None] | None = None, *,
             traces: list[str] | None = None,
             counterexamples: str = "traces/counterexamples",
             backend: str | None = None) -> GateResult:
    """Every section on the given budget; ``traces`` selects trace files or folders;
    a generated failure is written, minimised, under ``counterexamples``; ``backend``
    (a PostgreSQL DSN) runs the implementation's sections on PostgreSQL, the races too."""
    from wgk.conformance.oracle import impl_system
    from wgk.conformance.traces.format import load_traces
    t0 = time.perf_counter()
    loaded = load_traces([str(p) for p in (traces or [BUNDLED_TRACES])])   # TraceError: bad input
    impl_system.use_backend(backend)
    try:
        checks = _sections(budget, progress, loaded, counterexamples, backend)
    finally:
        impl_system.use_backend(None)
    return GateResult(budget, checks, time.perf_counter() - t0)


def _sections(budget: str, progress, loaded: list, counterexamples: str,
              backend: str | None) -> list[Check]:
    checks: list[Check] = []
    if backend is not None:
        checks += race_checks(budget, progress, backend)
    for name, fn in SECTIONS:
        if name not in BUDGETS[budget]:
            continue                          # a budget names the sections it runs
        if progress:
            progress(f"[{name}]")
        if name in TRACE_SECTIONS:
            checks += fn(budget, progress, loaded)
        elif name == "fuzz":
            checks += fn(budget, progress, counterexamples)
        else:
            checks += fn(budget, progress)
    return checks


def race_checks(budget: str, progress: Callable[[str], None] | None, dsn: str) -> list[Check]:
    """The race incidents as real multi-process races on PostgreSQL: one winner a round."""
    from wgk.conformance.oracle.races import RACES, race
    rounds = {"quick": 100, "default": 100, "deep": 300}[budget]
    out = []
    if progress:
        progress(f"[races] {len(RACES)} races, 8 processes, {rounds} rounds each, on PostgreSQL")
    for name in RACES:
        r = race(dsn, name, processes=8, rounds=rounds)
        out.append(Check("races", name, "pass" if r.ok else "fail", r.seconds,
                         "" if r.ok else r.problems[0], r.to_json()))
    return out


def write_junit(result: GateResult, path: str) -> None:
    suites = ET.Element("testsuites", name="wgk gate", time=f"{result.seconds:.3f}")
    for name, sec in result.sections().items():
        checks = sec["checks"]
        suite = ET.SubElement(suites, "testsuite", name=name, tests=str(len(checks)),
                              failures=str(sum(c["verdict"] == "fail" for c in checks)),
                              errors=str(sum(c["verdict"] == "error" for c in checks)))
        for c in checks:
            case = ET.SubElement(suite, "testcase", classname=f"wgk.{name}", name=c["name"],
                                 time=str(c["seconds"]))
            if c["verdict"] == "fail":
                ET.SubElement(case, "failure", message=c["detail"])
            elif c["verdict"] == "error":
                ET.SubElement(case, "error", message=c["detail"])
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)
