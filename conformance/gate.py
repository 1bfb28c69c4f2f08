"""The gate as data: sections of checks, each check a verdict."""
from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Callable

from wgk.model.explore import Instance, explore

BUDGETS = {
    "quick": {"explore": [Instance(tasks=1), Instance(tasks=2)]},
    "default": {"explore": [Instance(tasks=2), Instance(tasks=3)]},
    "deep": {"explore": [Instance(tasks=3),
                         Instance(tasks=1, attempts=2, groups=("core", "env", "evidence", "operator",
                                                               "legacy")),
                         Instance(tasks=2, groups=("core", "env", "operator", "legacy"),
                                  review=True)]},
}


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


SECTIONS: list[tuple[str, Callable]] = [("explore", explore_checks)]


def run_gate(budget: str = "default", progress: Callable[[str], None] | None = None) -> GateResult:
    t0 = time.perf_counter()
    checks: list[Check] = []
    for name, fn in SECTIONS:
        if progress:
            progress(f"[{name}]")
        checks += fn(budget, progress)
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
