"""The oracle: one shape shared by trace replay, generated runs and crash cuts.

The model is the specification. ``Oracle.is_valid_step(step, observed)``
applies one step to the model and says whether what the system under test
observed (its decision and its projection) is what the model allows;
``is_valid_history(steps)`` does it for a whole run. Verdicts are data:
``StepVerdict`` and ``Divergence`` objects, printed only at the edge.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

from wgk.model.invariants import step_violations, violations

from .systems import ModelSystem, StepError
from .wire import decision_label


@dataclass(frozen=True)
class Observed:
    """What a system under test answered for one step."""

    decision: dict | None       # None for an environment step
    projection: dict


@dataclass(frozen=True)
class FieldDiff:
    path: str
    expected: Any
    observed: Any

    def to_json(self) -> dict:
        return {"path": self.path, "model": self.expected, "observed": self.observed}


@dataclass(frozen=True)
class Divergence:
    """Where the system under test and the model disagree."""

    step: int
    what: str                    # "decision" | "projection" | "invariant" | "error" | "expectation"
    request: dict | None
    expected: Any
    observed: Any
    diffs: tuple[FieldDiff, ...] = ()
    boundary: str | None = None
    trace: str | None = None

    def to_json(self) -> dict:
        out = {"trace": self.trace, "step": self.step, "what": self.what, "request": self.request,
               "model": self.expected, "observed": self.observed,
               "diff": [d.to_json() for d in self.diffs]}
        if self.boundary:
            out["boundary"] = self.boundary
        return out

    def describe(self) -> str:
        where = f"{self.trace or 'run'} step {self.step}"
        if self.boundary:
            where += f" at {self.boundary}"
        head = f"{where}: {self.what} differs"
        if self.request:
            head += f" on {self.request.get('kind')} {self.request.get('task')} key={self.request.get('key')}"
        lines = [head]
        if self.what in ("decision", "expectation", "error", "invariant"):
            lines.append(f"  model: {self.expected}")
            lines.append(f"  observed: {self.observed}")
        for d in self.diffs[:20]:
            lines.append(f"  {d.path}: model={d.expected!r} observed={d.observed!r}")
        if len(self.diffs) > 20:
            lines.append(f"  ... {len(self.diffs) - 20} more fields")
        return "\n".join(lines)


@dataclass
class StepVerdict:
    valid: bool
    model_decision: dict | None
    divergences: list[Divergence] = field(default_factory=list)


def diff(expected: Any, observed: Any, path: str = "") -> list[FieldDiff]:
    """Field-by-field differences between two JSON values (paths as JSON pointers)."""
    if isinstance(expected, dict) and isinstance(observed, dict):
        out: list[FieldDiff] = []
        for k in sorted(set(expected) | set(observed), key=str):
            p = f"{path}/{k}"
            if k not in observed:
                out.append(FieldDiff(p, expected[k], "<missing>"))
            elif k not in expected:
                out.append(FieldDiff(p, "<missing>", observed[k]))
            else:
                out += diff(expected[k], observed[k], p)
        return out
    if isinstance(expected, list) and isinstance(observed, list) and len(expected) == len(observed):
        out = []
        for n, (a, b) in enumerate(zip(expected, observed)):
            out += diff(a, b, f"{path}/{n}")
        return out
    return [] if expected == observed else [FieldDiff(path or "/", expected, observed)]


def select(projection: dict, ignore: Iterable[str]) -> dict:
    """A copy of ``projection`` without the JSON-pointer paths in ``ignore``
    (a ``*`` segment matches any key, e.g. ``/tasks/*/evidence``)."""
    ignore = [p.strip("/").split("/") for p in ignore]

    def walk(v: Any, at: list[str]) -> Any:
        if not isinstance(v, dict):
            return v
        out = {}
        for k, x in v.items():
            here = at + [str(k)]
            if any(len(p) == len(here) and all(a in ("*", b) for a, b in zip(p, here)) for p in ignore):
                continue
            out[k] = walk(x, here)
        return out
    return walk(projection, [])


class Oracle:
    """The model, stepped alongside a system under test."""

    def __init__(self, model: ModelSystem, *, ignore: Iterable[str] = (), trace: str | None = None,
                 check_model: bool = True):
        self.model = model
        self.ignore = tuple(ignore)
        self.trace = trace
        self.check_model = check_model
        self.n = 0

    def is_valid_step(self, step: dict, observed: Observed, *, boundary: str | None = None) -> StepVerdict:
        """Apply ``step`` to the model and compare what the system observed."""
        self.n += 1
        request = step.get("request")
        out: list[Divergence] = []
        try:
            model_decision = self.model.apply(request) if request is not None else None
            if request is None:
                self.model.env(step)
        except StepError as e:
            return StepVerdict(False, None, [Divergence(self.n, "error", request, str(e), None,
                                                        boundary=boundary, trace=self.trace)])
        if self.check_model and self.model.last is not None:
            bad = violations(self.model.state) + step_violations(*self.model.last)
            if bad:
                out.append(Divergence(self.n, "invariant", request, "all invariants hold",
                                      ", ".join(bad), boundary=boundary, trace=self.trace))
        if request is not None and (observed.decision is None or
                                    decision_label(model_decision) != decision_label(observed.decision)):
            out.append(Divergence(self.n, "decision", request, model_decision, observed.decision,
                                  boundary=boundary, trace=self.trace))
        diffs = diff(select(self.model.project(), self.ignore), select(observed.projection, self.ignore))
        if diffs:
            out.append(Divergence(self.n, "projection", request, None, None, tuple(diffs),
                                  boundary=boundary, trace=self.trace))
        return StepVerdict(not out, model_decision, out)

    def is_valid_history(self, steps: Iterable[tuple[dict, Observed]]) -> list[Divergence]:
        """Every divergence of a whole run (empty when the history is valid)."""
        out: list[Divergence] = []
        for step, observed in steps:
            out += self.is_valid_step(step, observed).divergences
        return out
