"""The gate's result as data, and its renderings: JSON, a human summary, JUnit XML.

Verdicts: a check ``pass``es, ``fail``s, is an ``error`` (it could not be
checked) or a ``skip`` (what it needs was not declared by the kernel under test,
``--external``: counted, never a pass); a section is ``skipped`` when its budget
does not run it, or when every one of its checks is a skip. The gate is
an ``error`` when any section is (or when nothing at all was checked), else
``fail`` when any check failed, else ``pass``.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

VERDICTS = ("pass", "fail", "error", "skip")


@dataclass
class Check:
    section: str
    name: str
    verdict: str            # "pass" | "fail" | "error" | "skip"
    seconds: float
    detail: str = ""
    data: dict = field(default_factory=dict)
    group: str = ""         # what the check belongs to (a trace, an invariant): JUnit's class

    def to_json(self) -> dict:
        return {"name": self.name, "verdict": self.verdict, "seconds": round(self.seconds, 3),
                "detail": self.detail, **({"data": self.data} if self.data else {})}


@dataclass
class Section:
    name: str
    checks: list[Check]
    seconds: float
    skipped: str = ""       # why the section did not run ("" when it ran)

    @property
    def verdict(self) -> str:
        if self.skipped:
            return "skipped"
        if self.checks and all(c.verdict == "skip" for c in self.checks):
            return "skipped"
        verdicts = {c.verdict for c in self.checks}
        return "error" if "error" in verdicts or not self.checks else \
            "fail" if "fail" in verdicts else "pass"

    def count(self, verdict: str) -> int:
        return sum(c.verdict == verdict for c in self.checks)

    @property
    def by_equivalence(self) -> int:
        """The checks decided (in part) by an equivalent check's run (crash cuts: ``Tails``)."""
        return sum(bool(isinstance(c.data, dict) and c.data.get("by-equivalence"))
                   for c in self.checks)

    def to_json(self) -> dict:
        out = {"verdict": self.verdict, "seconds": round(self.seconds, 3),
               **{v: self.count(v) for v in VERDICTS}, "checks": [c.to_json() for c in self.checks]}
        if self.by_equivalence:
            out["by-equivalence"] = self.by_equivalence
        if self.skipped:
            out["skipped"] = self.skipped
        return out


@dataclass
class GateResult:
    budget: str
    sections_run: list[Section]
    seconds: float
    scratch: str | None = None     # where the temporary databases and worlds were kept
    external: dict | None = None   # --external: the command, its capabilities, how much applied
    cache: dict | None = None      # --cache: the folder, the checks reused of all, its warnings

    @property
    def checks(self) -> list[Check]:
        """The checks that ran (a skip is not one)."""
        return [c for s in self.sections_run for c in s.checks if c.verdict != "skip"]

    @property
    def verdict(self) -> str:
        verdicts = {s.verdict for s in self.sections_run}
        if "error" in verdicts or not self.checks:
            return "error"
        return "fail" if "fail" in verdicts else "pass"

    def skips(self) -> int:
        return sum(s.count("skip") for s in self.sections_run)

    def section(self, name: str) -> Section:
        return next(s for s in self.sections_run if s.name == name)

    def sections(self) -> dict:
        return {s.name: s.to_json() for s in self.sections_run}

    def to_json(self) -> dict:
        out = {"verdict": self.verdict, "budget": self.budget, "sections": self.sections(),
               "seconds": round(self.seconds, 3), "scratch": self.scratch}
        if not self.checks:
            out["error"] = "no section checked anything"
        if self.external is not None:
            out["external"] = dict(self.external, skipped=self.skips())
        if self.cache is not None:
            out["cache"] = self.cache
        return out

    def summary(self) -> str:
        lines = []
        if self.external is not None:
            lines.append(f"external: {self.external['command']}: {self.external['applied']}")
            if self.external.get("in-process"):
                lines.append("  not over the protocol (wgk's own kernel in process only): "
                             + ", ".join(sorted(self.external["in-process"])))
        for s in self.sections_run:
            if s.skipped:
                lines.append(f"{s.name:12} SKIP   {s.skipped}")
                continue
            ran = len(s.checks) - s.count("error") - s.count("skip")
            skips = f" ({s.count('skip')} skipped)" if s.count("skip") else ""
            lines.append(f"{s.name:12} {s.verdict.upper():6} {s.count('pass'):>5}/{ran:<5} "
                         f"{s.seconds:7.1f}s{skips}")
            worlds = world_counts(s)
            if worlds:
                lines.append("  on " + "; ".join(f"{w}: {n}" for w, n in worlds.items()))
            if s.by_equivalence:
                lines.append(f"  {s.by_equivalence} of them decided by an equivalent check's run")
            for c in s.checks:
                if c.verdict not in ("pass", "skip"):
                    lines.append(f"  {c.verdict.upper()} {c.name}: {c.detail}")
            lines += [f"  SKIP {n} x {why}" for why, n in skip_reasons(s).items()]
        if not self.checks:
            lines.append("  ERROR no section checked anything")
        if self.cache is not None:
            lines.append(reused_line(self.cache))
        lines.append(f"gate {self.verdict.upper()} ({self.budget} budget, {self.seconds:.1f}s)")
        return "\n".join(lines)


def reused_line(cache: dict) -> str:
    """``412 of 530 checks reused from the cache (DIR)``."""
    return f"{cache['reused']} of {cache['checks']} checks reused from the cache ({cache['dir']})"


def skip_reasons(s: Section) -> dict[str, int]:
    """How many of a section's checks were skipped for each reason; a reason listing what is
    missing ("sends kinds not declared: a, b") is counted by its head, with the items missed
    most often."""
    count: dict[str, int] = {}
    items: dict[str, dict[str, int]] = {}
    for c in s.checks:
        if c.verdict != "skip":
            continue
        head, _, rest = c.detail.partition(": ")
        listed = [x for x in rest.split(", ") if x and " " not in x] if rest else []
        key = head if listed else c.detail
        count[key] = count.get(key, 0) + 1
        for x in listed:
            items.setdefault(key, {})[x] = items.setdefault(key, {}).get(x, 0) + 1
    out = {}
    for key, n in count.items():
        top = sorted(items.get(key, {}).items(), key=lambda kv: (-kv[1], kv[0]))
        more = f" (most often: {', '.join(f'{x} {k}' for x, k in top[:5])}" + \
            (", ...)" if len(top) > 5 else ")") if top else ""
        out[key + more] = n
    return out


def world_counts(s: Section) -> dict[str, int]:
    """How many of a section's checks ran on each world (as its checks name it)."""
    out: dict[str, int] = {}
    for c in s.checks:
        w = (c.data or {}).get("world")
        if w:
            out[w] = out.get(w, 0) + 1
    return out


def case_name(c: Check) -> str:
    """The check's name without its group's prefix (the group is the JUnit class)."""
    if c.group and c.name.startswith(c.group + " "):
        return c.name[len(c.group) + 1:]
    return c.name


def write_junit(result: GateResult, path: str) -> None:
    """One testsuite per section (its wall time), one testcase per check (its time); a
    section its budget does not run is one skipped testcase."""
    suites = ET.Element("testsuites", name="wgk gate", time=f"{result.seconds:.3f}",
                        tests=str(sum(max(1, len(s.checks)) for s in result.sections_run)),
                        failures=str(sum(s.count("fail") for s in result.sections_run)),
                        errors=str(sum(s.count("error") for s in result.sections_run)),
                        skipped=str(sum(bool(s.skipped) + s.count("skip")
                                        for s in result.sections_run)))
    for s in result.sections_run:
        suite = ET.SubElement(suites, "testsuite", name=s.name, tests=str(max(1, len(s.checks))),
                              failures=str(s.count("fail")), errors=str(s.count("error")),
                              skipped=str(int(bool(s.skipped)) + s.count("skip")),
                              time=f"{s.seconds:.3f}")
        if s.skipped:
            case = ET.SubElement(suite, "testcase", classname=f"wgk.{s.name}", name=s.name, time="0")
            ET.SubElement(case, "skipped", message=s.skipped)
            continue
        for c in s.checks:
            classname = f"wgk.{s.name}" + (f".{c.group}" if c.group else "")
            case = ET.SubElement(suite, "testcase", classname=classname, name=case_name(c),
                                 time=f"{c.seconds:.3f}")
            if (c.data or {}).get("world"):
                props = ET.SubElement(case, "properties")
                ET.SubElement(props, "property", name="world", value=c.data["world"])
            if c.verdict == "fail":
                ET.SubElement(case, "failure", message=c.detail)
            elif c.verdict == "error":
                ET.SubElement(case, "error", message=c.detail)
            elif c.verdict == "skip":
                ET.SubElement(case, "skipped", message=c.detail)
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)
