"""Running implementation mutants against the gate's own sections.

For each mutant (``wgk.conformance.oracle.impl_mutants_catalogue``) a fresh copy of
``wgk.impl`` is patched in a temporary folder and one child process
(``python -m wgk.conformance.reports.impl_mutant_child``) imports that copy as
``wgk.impl`` and runs the gate's sections on it, those that run the
implementation (every section but the model's own: proofs, model mutants,
exploration, the trace matrix, and this one), cheapest first, on a named gate
budget. The first section that does not pass kills the mutant: the section and
the check that killed it are reported. A mutant every section passes survived.

The unmutated copy (``IDENTITY``) is run first as the baseline: if the sections
do not pass on it, no kill means anything and the run is an error.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from wgk.conformance.oracle.impl_mutants import (
    CATEGORIES, CATEGORY_TITLES, IDENTITY, ImplMutant, Patch, child_env, materialize,
)
from wgk.conformance.reports.gate_report import Check

#: Sections that check only the model (or are this one): a mutant of the implementation
#: cannot change their verdict, so they are not run for it.
MODEL_SECTIONS = frozenset({"prove", "mutants", "explore", "trace-matrix", "impl-mutants",
                            "verify-guards"})
#: Sections run first when present (cheapest, and they kill most mutants), and last (the
#: crash cuts: by far the slowest, a few minutes on the quick budget).
FIRST = ("replay", "contract", "races", "fuzz")
LAST = ("crash-cuts",)
#: Budgets a mutant may be run on (the deep budget's sections are too slow per mutant).
MUTANT_BUDGETS = ("quick", "default")
#: The kill rate the catalogue is held to.
TARGET_RATE = 0.9
CHILD = "wgk.conformance.reports.impl_mutant_child"
#: The project's source tree (where a mutant's named tests live).
PROJECT = Path(__file__).resolve().parents[2]


@dataclass
class MutantRun:
    """One mutant's verdict: ``killed`` (with the section and check), ``survived``, or
    ``error`` (the machinery could not run it: that is no kill)."""

    mutant: ImplMutant
    verdict: str
    seconds: float
    section: str = ""
    check: str = ""
    detail: str = ""
    sections: list[dict] = field(default_factory=list)
    external: bool = False          # the sections ran against the kernel over the protocol
    #: the check tried first (``first_pass``): {"section", "check", "trace", "killed"}, or {}
    first: dict = field(default_factory=dict)

    @property
    def killed(self) -> bool:
        return self.verdict == "killed"

    @property
    def through_protocol(self) -> bool:
        """Killed by a section that runs the kernel over the protocol (not by a named test or
        a section that runs wgk's own kernel inside the gate's process)."""
        from wgk.conformance.reports.gate_external import OVER_PROTOCOL
        return self.external and self.killed and self.section in OVER_PROTOCOL

    @property
    def reason_stale(self) -> bool:
        """Killed though the catalogue says it survives (a PostgreSQL mutant's reason speaks
        of a run without a backend, so its kill with one is expected)."""
        return self.killed and bool(self.mutant.survives) and \
            "--backend DSN" not in self.mutant.survives

    def to_json(self) -> dict:
        m = self.mutant
        out = {"name": m.name, "category": m.category, "breaks": m.breaks, "doc": m.doc,
               "verdict": self.verdict, "seconds": round(self.seconds, 2),
               "sections": self.sections}
        if self.killed:
            out.update({"section": self.section, "check": self.check, "detail": self.detail})
        elif self.verdict == "survived":
            out["reason"] = m.explained(self.external) or \
                "none written: the catalogue does not expect it to survive"
        else:
            out["error"] = self.detail
        if self.reason_stale:
            out["note"] = "the catalogue says it survives: update its reason"
        if self.external and self.killed:
            out["through"] = "protocol" if self.through_protocol else "inside the process"
        if self.mutant.killed_in_process:
            out["killed-in-process"] = {"section": self.mutant.killed_in_process[0],
                                        "check": self.mutant.killed_in_process[1]}
        if self.first:
            out["first-pass"] = self.first
        return out


@dataclass
class CatalogueRun:
    budget: str
    baseline: MutantRun | None
    runs: list[MutantRun]
    seconds: float
    external: bool = False          # through the conformance protocol (``--external``)

    @property
    def killed(self) -> int:
        return sum(r.killed for r in self.runs)

    @property
    def rate(self) -> float:
        return self.killed / len(self.runs) if self.runs else 0.0

    @property
    def baseline_ok(self) -> bool:
        return self.baseline is None or self.baseline.verdict == "survived"

    def by_category(self) -> dict[str, dict]:
        """Per category (in the catalogue's order, those with a mutant run): its title, how
        many of its mutants were killed, the rate, and which check killed each."""
        out: dict[str, dict] = {}
        for c in CATEGORIES:
            runs = [r for r in self.runs if r.mutant.category == c]
            if not runs:
                continue
            killed = sum(r.killed for r in runs)
            out[c] = {"title": CATEGORY_TITLES[c], "killed": killed, "total": len(runs),
                      "rate": round(killed / len(runs), 3),
                      "mutants": {r.mutant.name: (f"{r.section}: {r.check}" if r.killed
                                                  else r.verdict) for r in runs}}
        return out

    def surprises(self) -> list[MutantRun]:
        """The runs that were not killed and that the catalogue does not explain."""
        return [r for r in self.runs if not r.killed and not r.mutant.explained(self.external)]

    def both_ways(self) -> dict:
        """Through the protocol: the mutants killed over it, those killed only inside the
        gate's process (a named test, an in-process section), and the survivors listed as
        needing access inside the process."""
        over: dict[str, int] = {}
        for r in self.runs:
            if r.through_protocol:
                over[r.section] = over.get(r.section, 0) + 1
        return {"through-protocol": sorted(r.mutant.name for r in self.runs if r.through_protocol),
                "by-section": dict(sorted(over.items(), key=lambda kv: (-kv[1], kv[0]))),
                "first-pass": sum(bool(r.first.get("killed")) for r in self.runs
                                  if r.through_protocol),
                "survived": sorted(r.mutant.name for r in self.runs if r.verdict == "survived"),
                "inside-the-process": sorted(r.mutant.name for r in self.runs
                                             if r.killed and not r.through_protocol),
                "listed-in-process": {r.mutant.name: r.mutant.in_process for r in self.runs
                                      if not r.killed and r.mutant.in_process}}

    def to_json(self) -> dict:
        out = {"budget": self.budget, "killed": self.killed, "total": len(self.runs),
               "rate": round(self.rate, 3), "target": TARGET_RATE,
               "seconds": round(self.seconds, 1),
               "baseline": self.baseline.to_json() if self.baseline else None,
               "categories": self.by_category(),
               "mutants": [r.to_json() for r in self.runs]}
        if self.external:
            out["external"] = self.both_ways()
        return out


def impl_sections(names: Iterable[str]) -> list[str]:
    """The sections of the gate that run the implementation, cheapest first."""
    rest = [n for n in names if n not in MODEL_SECTIONS]
    middle = [n for n in rest if n not in FIRST and n not in LAST]
    return [n for n in FIRST if n in rest] + middle + [n for n in LAST if n in rest]


def first_pass(m: ImplMutant, sections: list[str], external: dict | None) -> dict | None:
    """Through the protocol, the check that killed ``m`` in process, tried before the rest of
    the gate: its section (on the one trace the check names, when it names one), if that
    section is among ``sections`` and runs over the protocol; None otherwise (in process the
    sections run in their usual order)."""
    if external is None or not m.killed_in_process:
        return None
    from wgk.conformance.reports.gate_external import OVER_PROTOCOL
    section, check = m.killed_in_process
    if section not in sections or section not in OVER_PROTOCOL:
        return None
    return {"section": section, "check": check}


def run_patches(name: str, patches: tuple[Patch, ...], *, budget: str, sections: list[str],
                traces: list[str] | None = None, tests: list[str] | None = None,
                stop_at_first: bool = True, timeout: float = 1800.0,
                cwd: str | None = None, tests_first: bool = False,
                external: dict | None = None, backend: str | None = None,
                first: dict | None = None) -> dict:
    """Plant ``patches`` in a copy of wgk.impl and run ``sections`` (and pytest ``tests``)
    on it in a child process, after the ``first`` check when given (``first_pass``); the
    child's report (see ``impl_mutant_child``)."""
    with tempfile.TemporaryDirectory(prefix="wgk-mutant-") as tmp:
        copy = materialize(patches, Path(tmp) / "copy", name)
        out = Path(tmp) / "result.json"
        spec = {"name": name, "copy": str(copy), "budget": budget, "sections": sections,
                "traces": [str(Path(t).resolve()) for t in traces] if traces else None, "tests": tests or [], "stop_at_first": stop_at_first, "tests_first": tests_first,
                "counterexamples": str(Path(tmp) / "counterexamples"), "external": external,
                "backend": backend, "first": first}
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", CHILD, json.dumps(spec), str(out)],
                                env=child_env(copy), cwd=cwd or tmp, start_new_session=True,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)          # the child and what it started
            proc.communicate()
            return {"verdict": "killed", "section": "timeout", "check": "timeout",
                    "detail": f"the sections did not finish within {timeout:.0f}s",
                    "seconds": time.perf_counter() - t0, "sections": []}
        if not out.exists():
            last = (err or b"").decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
            return {"verdict": "error", "detail": f"the child exited {proc.returncode}: {last[0]}",
                    "seconds": time.perf_counter() - t0, "sections": []}
        return json.loads(out.read_text())


def run_mutant(m: ImplMutant, budget: str, sections: list[str], *,
               traces: list[str] | None = None, timeout: float = 1800.0,
               external: dict | None = None, backend: str | None = None) -> MutantRun:
    """One mutant through its own tests, if it names any (from the project's source tree),
    then the given sections, in a child process (``external``: the command and timeout of a
    served kernel, started by the child on the mutated copy; ``backend``: a PostgreSQL DSN
    the sections run on, as ``wgk gate --backend DSN`` does)."""
    t0 = time.perf_counter()
    tests = [str(PROJECT / t) for t in m.tests]
    missing = [t for t in tests if not Path(t.partition("::")[0]).is_file()]
    if missing:
        return MutantRun(m, "error", 0.0, detail=f"its tests are not here: {missing[0]} (run "
                         "from the project's source tree)")
    r = run_patches(m.name, m.patches, budget=budget, sections=sections, traces=traces,
                    timeout=timeout, tests=tests, tests_first=bool(tests),
                    cwd=str(PROJECT) if tests else None, external=external, backend=backend,
                    first=first_pass(m, sections, external))
    return MutantRun(m, r["verdict"], time.perf_counter() - t0, r.get("section", ""),
                     r.get("check", ""), r.get("detail", ""), r.get("sections", []),
                     external=external is not None, first=r.get("first", {}))


Progress = Callable[[int, int, MutantRun], None]


def run_catalogue(mutants: list[ImplMutant], budget: str, sections: list[str], *,
                  traces: list[str] | None = None, baseline: bool = True,
                  progress: Progress | None = None, timeout: float = 1800.0,
                  external: dict | None = None, backend: str | None = None) -> CatalogueRun:
    """Every mutant (after the baseline) through the implementation's gate sections."""
    if budget not in MUTANT_BUDGETS:
        raise ValueError(f"mutants run on the {' or '.join(MUTANT_BUDGETS)} budget, not {budget!r}")
    t0 = time.perf_counter()
    base = None
    total = len(mutants) + (1 if baseline else 0)
    if baseline:
        base = run_mutant(IDENTITY, budget, sections, traces=traces, timeout=timeout,
                          external=external, backend=backend)
        if progress:
            progress(1, total, base)
    runs: list[MutantRun] = []
    for m in mutants:
        if base is not None and base.verdict != "survived":
            break                                       # nothing a kill says can be trusted
        runs.append(run_mutant(m, budget, sections, traces=traces, timeout=timeout,
                               external=external, backend=backend))
        if progress:
            progress(len(runs) + (1 if baseline else 0), total, runs[-1])
    return CatalogueRun(budget, base, runs, time.perf_counter() - t0, external=external is not None)


def mutant_budget(budget: str, value) -> str:
    """The gate budget named by a budget's ``impl-mutants`` value (read by value)."""
    if value not in MUTANT_BUDGETS:
        raise ValueError(f"budget {budget}: impl-mutants must name a budget of "
                         f"{', '.join(MUTANT_BUDGETS)}, not {value!r}")
    return value


def section_checks(budget: str, value, sections_for: Callable[[str], list[str]],
                   step: Callable[[str], None]) -> list[Check]:
    """The gate's impl-mutants section: the whole catalogue on the budget ``value`` names."""
    from wgk.conformance.oracle.impl_mutants_catalogue import IMPL_MUTANTS
    on = mutant_budget(budget, value)
    return catalogue_checks(run_catalogue(list(IMPL_MUTANTS), on, sections_for(on),
                                          progress=lambda n, total, r: step(
                                              f"{r.mutant.name}: {r.verdict}")))


def catalogue_checks(result: CatalogueRun) -> list[Check]:
    """The run as gate checks: the baseline, one per killed mutant (pass), one per survivor
    the catalogue does not explain (fail), and the kill rate against its target. A
    survivor the catalogue explains is listed in the kill rate's data, not passed."""
    b = result.baseline
    out = []
    if b is not None:
        ok = b.verdict == "survived"
        out.append(Check("impl-mutants", "baseline: the unmutated copy passes", "pass" if ok else
                         "error", b.seconds, "" if ok else f"{b.section} {b.check}: {b.detail}"
                         if b.section else b.detail, {"sections": b.sections}))
        if not ok:
            return out
    for r in result.runs:
        m = r.mutant
        if r.killed:
            out.append(Check("impl-mutants", m.name, "pass", r.seconds,
                             f"killed by {r.section}: {r.check}", r.to_json(), group=m.category))
        elif r.verdict == "error":
            out.append(Check("impl-mutants", m.name, "error", r.seconds, r.detail, r.to_json(),
                             group=m.category))
        elif not m.explained(result.external):
            out.append(Check("impl-mutants", m.name, "fail", r.seconds,
                             f"survived, and the catalogue expects it killed: wgk mutants --impl "
                             f"--only {m.name}", r.to_json(), group=m.category))
    known = [r.mutant.name for r in result.runs
             if r.verdict == "survived" and r.mutant.explained(result.external)]
    for c, row in result.by_category().items():
        out.append(Check("impl-mutants", f"category {row['title']}", "pass", 0.0,
                         f"{row['killed']} of {row['total']} killed", row, group=c))
    ok = result.rate >= TARGET_RATE
    out.append(Check("impl-mutants", "kill rate", "pass" if ok else "fail", result.seconds,
                     f"{result.killed} of {len(result.runs)} killed ({result.rate:.0%}, target "
                     f"{TARGET_RATE:.0%})" + (f"; survivors: {', '.join(known)}" if known else ""),
                     {"survivors": {n: MUTANT_REASONS.get(n, "") for n in known}}))
    return out


def _reasons() -> dict[str, str]:
    from wgk.conformance.oracle.impl_mutants_catalogue import IMPL_MUTANTS
    return {m.name: m.survives for m in IMPL_MUTANTS}


MUTANT_REASONS = _reasons()

__all__ = ["CatalogueRun", "MODEL_SECTIONS", "MUTANT_BUDGETS", "MutantRun", "TARGET_RATE",
           "catalogue_checks", "first_pass", "impl_sections", "section_checks", "mutant_budget", "run_catalogue", "run_mutant", "run_patches"]
