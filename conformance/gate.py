"""The gate as data: sections of checks, each check a verdict."""
from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from pathlib import Path
from dataclasses import dataclass, field
from typing import Callable

from wgk.model.explore import Instance, explore

BUDGETS = {
    "quick": {"explore": [Instance(tasks=1), Instance(tasks=2)],
              "fuzz": {"examples": 50, "steps": 25, "tasks": 2}},
    "default": {"explore": [Instance(tasks=2), Instance(tasks=3)],
                "fuzz": {"examples": 300, "steps": 40, "tasks": 3}},
    "deep": {"explore": [Instance(tasks=3),
                         Instance(tasks=1, attempts=2, groups=("core", "env", "evidence", "operator",
                                                               "legacy")),
                         Instance(tasks=2, groups=("core", "env", "operator", "legacy"),
                                  review=True)],
             "fuzz": {"examples": 3000, "steps": 60, "tasks": 3}},
}

#: The bundled traces (the gate's default corpus).
BUNDLED_TRACES = Path(__file__).resolve().parent.parent / "traces"


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


def replay_checks(budget: str, progress: Callable[[str], None] | None, loaded: list) -> list[Check]:
    from .replay import replay
    from .systems import ModelSystem
    out = []
    if progress:
        progress(f"  {len(loaded)} traces")
    for trace in loaded:
        t0 = time.perf_counter()
        r = replay(trace, [ModelSystem(trace)])
        detail = "" if r.passed else "; ".join(d.describe().splitlines()[0] for d in r.divergences[:3])
        out.append(Check("replay", trace.id, r.verdict, time.perf_counter() - t0, detail,
                         {"steps": len(r.steps), "systems": list(r.systems)}))
    return out


def fuzz_checks(budget: str, progress: Callable[[str], None] | None) -> list[Check]:
    from .fuzz import FuzzConfig, run_fuzz
    b = BUDGETS[budget]["fuzz"]
    if progress:
        progress(f"  {b['examples']} generated runs of {b['steps']} steps, {b['tasks']} tasks")
    t0 = time.perf_counter()
    r = run_fuzz(FuzzConfig(tasks=b["tasks"]), examples=b["examples"], steps=b["steps"], seed=0)
    return [Check("fuzz", f"model {b['examples']}x{b['steps']}", r.verdict, time.perf_counter() - t0,
                  (r.failure or "").splitlines()[0] if r.failure else "", r.to_json())]


SECTIONS: list[tuple[str, Callable]] = [("explore", explore_checks), ("replay", replay_checks),
                                        ("fuzz", fuzz_checks)]


def run_gate(budget: str = "default", progress: Callable[[str], None] | None = None, *,
             traces: list[str] | None = None) -> GateResult:
    """Every section on the given budget; ``traces`` selects trace files or folders."""
    from .traces import load_traces
    t0 = time.perf_counter()
    loaded = load_traces([str(p) for p in (traces or [BUNDLED_TRACES])])   # TraceError: bad input
    checks: list[Check] = []
    for name, fn in SECTIONS:
        if progress:
            progress(f"[{name}]")
        checks += fn(budget, progress, loaded) if name == "replay" else fn(budget, progress)
    return GateResult(budget, checks, time.perf_counter() - t0)


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
