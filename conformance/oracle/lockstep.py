"""The oracle: one shape shared by trace replay, generated runs and crash cuts.

The model is the specification. ``Oracle.is_valid_step(step, observed)``
applies one step to the reference system and says whether what the system
under test observed (its decision and its projection) is what the model
allows; ``is_valid_history(steps)`` does it for a whole run. The comparison itself is the
module's ``is_valid_step(reference, observed)``, which replay (system against
system) and crash cuts (the recovered implementation's answer and state against
the model's) use too; ``meets_expectations`` holds a system to what a trace wrote. Verdicts are
data: ``StepVerdict`` and ``Divergence`` records, printed only at the edge.
This module also holds the comparisons everything shares: field-by-field
diffs of projections and the matching of a trace's expected facts.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable

from wgk.conformance.oracle.systems import StepError, System


@dataclass(frozen=True)
class FieldDiff:
    """One fact that differs: where (a dotted path), what was expected, what was seen."""

    path: str
    expected: Any
    actual: Any

    def to_json(self) -> dict:
        return {"path": self.path, "expected": self.expected, "actual": self.actual}

    def describe(self) -> str:
        return f"{self.path}: expected {_show(self.expected)}, got {_show(self.actual)}"


MISSING = object()


def _show(v: Any) -> str:
    if v is MISSING:
        return "(absent)"
    return json.dumps(v, sort_keys=False)


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _evidence_key(item: Any) -> str:
    return json.dumps(item)


def _match_matcher(expected: dict, actual: Any, path: str) -> list[FieldDiff]:
    if not isinstance(actual, list):
        return [FieldDiff(path, expected, actual)]
    have = {_evidence_key(x) for x in actual}
    if "$contains" in expected:
        missing = [x for x in expected["$contains"] if _evidence_key(x) not in have]
        return [FieldDiff(path, expected, actual)] if missing else []
    kinds = set(expected["$kinds"])
    picked = sorted((x for x in actual if isinstance(x, list) and x and x[0] in kinds), key=_evidence_key)
    want = sorted(expected["$exactly"], key=_evidence_key)
    return [] if picked == want else [FieldDiff(path, expected, actual)]


def match_facts(expected: Any, actual: Any, path: str = "") -> list[FieldDiff]:
    """Diffs between listed facts and a projection: objects by the keys they list
    (recursively; a listed null matches an absent key), everything else by equality."""
    if isinstance(expected, dict) and any(k in expected for k in ("$contains", "$kinds")):
        return _match_matcher(expected, actual, path)
    if isinstance(expected, dict) and isinstance(actual, dict):
        out: list[FieldDiff] = []
        for key, want in expected.items():
            if key not in actual:
                if want is not None:
                    out.append(FieldDiff(_join(path, key), want, MISSING))
                continue
            out += match_facts(want, actual[key], _join(path, key))
        return out
    if expected == actual and type(expected) is type(actual):
        return []
    return [FieldDiff(path, expected, actual)]


def diff_values(a: Any, b: Any, path: str = "") -> list[FieldDiff]:
    """Every leaf where two projections differ (``a`` is taken as the reference)."""
    if type(a) is type(b) and a == b:          # equal (as most are): no leaf differs
        return []
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[FieldDiff] = []
        for key in list(a) + [k for k in b if k not in a]:
            out += diff_values(a.get(key, MISSING), b.get(key, MISSING), _join(path, key))
        return out
    if a is MISSING or b is MISSING or a != b:
        return [FieldDiff(path, a, b)]
    return []


def decision_matches(expected: dict, actual: dict | None) -> bool:
    """Decision and code must be equal; ``original`` is checked when the expectation lists it."""
    if actual is None:
        return False
    if expected.get("decision") != actual.get("decision") or expected.get("code") != actual.get("code"):
        return False
    if "original" in expected:
        want, got = expected["original"], actual.get("original") or {}
        return want.get("decision") == got.get("decision") and want.get("code") == got.get("code")
    return True


def decision_label(d: dict | None) -> str:
    if d is None:
        return "(none)"
    label = d.get("decision", "?") + (f":{d['code']}" if d.get("code") else "")
    if d.get("original"):
        label += f" (original {decision_label(d['original'])})"
    return label


@dataclass(frozen=True)
class Divergence:
    """Where a system and the trace (or two systems) disagree.

    ``what``: ``decision`` (a decision differs from the expected one), ``facts``
    (per-step expected facts), ``final-facts``, ``invariant`` (the system reports a
    broken invariant), ``step-error`` (a step could not be taken), ``lockstep-decision``
    and ``lockstep-projection`` (two systems differ). ``step`` is the step index, or
    None for the final facts."""

    trace: str
    step: int | None
    system: str
    what: str
    request: dict | None
    expected: Any
    actual: Any
    diffs: tuple[FieldDiff, ...] = ()
    boundary: str | None = None

    def to_json(self) -> dict:
        out = {"trace": self.trace, "step": self.step, "system": self.system, "what": self.what,
               "request": self.request, "expected": self.expected, "actual": self.actual,
               "diff": [d.to_json() for d in self.diffs]}
        if self.boundary:
            out["boundary"] = self.boundary
        return out

    def describe(self) -> str:
        where = "final facts" if self.step is None else f"step {self.step}"
        if self.boundary:
            where += f" (crash {self.boundary})"
        head = f"{self.trace} {where} [{self.system}] {self.what}"
        if self.request is not None:
            head += f" on {_step_label(self.request)}"
        lines = [head]
        if self.what in ("decision", "lockstep-decision", "resend-decision"):
            lines.append(f"  expected {decision_label(self.expected)}, got {decision_label(self.actual)}")
        elif self.what in ("invariant", "step-error"):
            lines.append(f"  {self.actual}")
        elif not self.diffs and (self.expected is not None or self.actual is not None):
            lines.append(f"  expected {_show(self.expected)}, got {_show(self.actual)}")
        lines += ["  " + d.describe() for d in self.diffs]
        return "\n".join(lines)


def _step_label(step: dict) -> str:
    if "request" in step:
        r = step["request"]
        return f"{r.get('kind')} {r.get('task')} key={r.get('key')}"
    if "kind" in step and "actor" in step:
        return f"{step.get('kind')} {step.get('task')} key={step.get('key')}"
    return "env " + step.get("env", "?") + (f" {step['task']}" if step.get("task") else "")


@dataclass(frozen=True)
class Observed:
    """What a system under test answered for one step."""

    decision: dict | None       # None for an environment step
    projection: dict


@dataclass
class StepVerdict:
    valid: bool
    model_decision: dict | None
    divergences: list[Divergence] = field(default_factory=list)


def select(projection: Any, ignore: Iterable[str]) -> Any:
    """A copy of ``projection`` without the dotted paths in ``ignore``
    (a ``*`` segment matches any key, e.g. ``tasks.*.evidence``)."""
    patterns = [p.split(".") for p in ignore]
    if not patterns:
        return projection

    def walk(v: Any, at: list[str]) -> Any:
        if not isinstance(v, dict):
            return v
        out = {}
        for k, x in v.items():
            here = at + [str(k)]
            if any(len(p) == len(here) and all(a in ("*", b) for a, b in zip(p, here)) for p in patterns):
                continue
            out[k] = walk(x, here)
        return out
    return walk(projection, [])


LOCKSTEP = ("lockstep-decision", "lockstep-projection")


def is_valid_step(reference: Observed, observed: Observed, *, trace: str, step: int | None,
                  system: str, request: dict | None, decided: bool = True, ignore: Iterable[str] = (),
                  boundary: str | None = None, what: tuple[str, str] = LOCKSTEP) -> StepVerdict:
    """The one comparison of a step's outcome, shared by lockstep, replay and crash cuts: the
    observed decision must equal the reference's (when the step is ``decided``) and the observed
    projection the reference's, field by field outside ``ignore``. ``what`` names the two kinds
    of divergence (decision, projection) as the caller reports them."""
    out: list[Divergence] = []
    if decided and observed.decision != reference.decision:
        out.append(Divergence(trace, step, system, what[0], request, reference.decision,
                              observed.decision, boundary=boundary))
    diffs = diff_values(select(reference.projection, ignore), select(observed.projection, ignore))
    if diffs:
        out.append(Divergence(trace, step, system, what[1], request, None, None, tuple(diffs),
                              boundary=boundary))
    return StepVerdict(not out, reference.decision, out)


def meets_expectations(trace: str, n: int, step: dict, system: System,
                       decision: dict | None) -> list[Divergence]:
    """A system after one step of a trace against what the trace wrote down: the expected
    decision (``decision_matches``), no broken invariant, the step's expected facts."""
    out: list[Divergence] = []
    request = step.get("request", step)
    expected = step.get("expect")
    if expected is not None and not decision_matches(expected, decision):
        out.append(Divergence(trace, n, system.name, "decision", request, expected, decision))
    bad = system.check()
    if bad:
        out.append(Divergence(trace, n, system.name, "invariant", request, [], bad))
    if "expect-facts" in step:
        diffs = match_facts(step["expect-facts"], system.project())
        if diffs:
            out.append(Divergence(trace, n, system.name, "facts", request, step["expect-facts"], None,
                                  tuple(diffs)))
    return out


class Oracle:
    """The model (or any reference system), stepped alongside a system under test."""

    def __init__(self, reference: System, *, ignore: Iterable[str] = (), trace: str | None = None):
        self.reference = reference
        self.ignore = tuple(ignore)
        self.trace = trace or "run"
        self.n = -1

    def advance(self, step: dict) -> dict | None:
        """Apply ``step`` to the reference; its decision (None for an environment step)."""
        self.n += 1
        return self.reference.apply(step)

    def compare(self, step: dict, reference_decision: dict | None, observed: Observed, *,
                system: str = "impl", boundary: str | None = None) -> list[Divergence]:
        """The system under test against the reference after the same step."""
        request = step.get("request", step)
        out: list[Divergence] = []
        bad = self.reference.check()
        if bad:
            out.append(Divergence(self.trace, self.n, self.reference.name, "invariant", request, [],
                                  bad, boundary=boundary))
        verdict = is_valid_step(Observed(reference_decision, self.reference.project()), observed,
                                trace=self.trace, step=self.n, system=system, request=request,
                                decided="request" in step, ignore=self.ignore, boundary=boundary)
        return out + verdict.divergences

    def is_valid_step(self, step: dict, observed: Observed, *, system: str = "impl",
                      boundary: str | None = None) -> StepVerdict:
        """Apply ``step`` to the model and compare what the system under test observed."""
        try:
            decision = self.advance(step)
        except StepError as e:
            return StepVerdict(False, None, [Divergence(self.trace, self.n, self.reference.name,
                                                        "step-error", step, None, str(e),
                                                        boundary=boundary)])
        out = self.compare(step, decision, observed, system=system, boundary=boundary)
        return StepVerdict(not out, decision, out)

    def is_valid_history(self, steps: Iterable[tuple[dict, Observed]], *,
                         system: str = "impl") -> list[Divergence]:
        """Every divergence of a whole run (empty when the history is valid)."""
        out: list[Divergence] = []
        for step, observed in steps:
            out += self.is_valid_step(step, observed, system=system).divergences
        return out
