"""What a proof reports: the bounded domains it ran on, each (property x transition)
frame's result, and a counterexample to induction decoded into a concrete pre-state and
step (``wgk.conformance.z3.prove``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from wgk.model.env import EnvStep
from wgk.model.invariants import REGISTRY
from wgk.model.kernel import Decision
from wgk.model.requests import Request
from wgk.model.state import State

from wgk.conformance.traces.export import step_json
from wgk.conformance.z3.basecase import Enabledness, InitFrame
from wgk.conformance.z3.symbolic import describe_task, field_diff


@dataclass(frozen=True)
class Bounds:
    """The bounded domains of a proof or a model check."""

    tasks: int = 3
    evidence_ids: int = 2
    keys: int = 1

    def task_names(self) -> tuple[str, ...]:
        return tuple(f"t{n + 1}" for n in range(self.tasks))

    def ids(self) -> tuple[str, ...]:
        return tuple(f"e{n + 1}" for n in range(self.evidence_ids))

    def key_names(self) -> tuple[str, ...]:
        return tuple(f"k{n + 1}" for n in range(self.keys))

    def to_json(self) -> dict:
        return {"tasks": self.tasks, "evidence_ids": self.evidence_ids, "keys": self.keys}


@dataclass
class Counterexample:
    """A concrete pre-state and step that break a property, replayed through the model."""

    property: str
    transition: str
    step_label: str
    pre: State
    step: Request | EnvStep
    decision: Decision | None
    post: State
    tasks: list[str]

    def to_json(self) -> dict:
        return {
            "property": self.property, "transition": self.transition, "template": self.step_label,
            "step": step_json(self.step), "decision": self.decision.to_json() if self.decision else None,
            "violated_for": self.tasks,
            "pre": {n: describe_task(t) for n, t in zip(self.pre.graph.tasks, self.pre.tasks)},
            "changes": field_diff(self.pre, self.post),
            "policy": {"review_required": [n for n, f in zip(self.pre.graph.tasks,
                                                               self.pre.graph.review_required) if f],
                       "requires_assignment": [n for n, f in zip(
                           self.pre.graph.tasks, self.pre.graph.requires_assignment) if f]},
        }

    def render(self) -> str:
        lines = [f"  after {self.step_label}: {self.property} fails"
                 + (f" for {', '.join(self.tasks)}" if self.tasks else "")]
        g = self.pre.graph
        for n, t in zip(g.tasks, self.pre.tasks):
            pol = [p for p, f in (("review", g.review_required[g.index[n]]),
                                  ("assignment", g.requires_assignment[g.index[n]])) if f]
            lines.append(f"    pre {n}{' [' + ','.join(pol) + ']' if pol else ''}: {describe_task(t)}")
        lines.append(f"    pre target={self.pre.target} now={self.pre.now} "
                     f"journal={len(self.pre.journal)} entries")
        lines.append("    step " + json.dumps(step_json(self.step), sort_keys=True)
                     + (f" -> {self.decision.label}" if self.decision else ""))
        for c in field_diff(self.pre, self.post):
            lines.append(f"    post {c}")
        return "\n".join(lines)


@dataclass
class ProofResult:
    """One (property x transition) frame."""

    invariant: str
    transition: str
    status: str                     # proved | counterexample | unknown
    seconds: float
    solved: bool = True             # False: no template can affect the property (frame)
    counterexample: Counterexample | None = None

    def to_json(self) -> dict:
        out: dict[str, Any] = {"invariant": self.invariant, "transition": self.transition,
                               "status": self.status, "seconds": round(self.seconds, 4)}
        if self.counterexample is not None:
            out["counterexample"] = self.counterexample.to_json()
        return out


@dataclass
class ProofReport:
    bounds: Bounds
    semantics: str
    results: list[ProofResult]
    seconds: float
    build_seconds: float
    lemmas: list[str] = field(default_factory=list)
    init: list[InitFrame] = field(default_factory=list)
    enabled: list[Enabledness] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)

    @property
    def ok(self) -> bool:
        return all(r.status == "proved" for r in self.results) and self.base_ok

    @property
    def base_ok(self) -> bool:
        """Every init frame proved and every transition enabled under the invariants."""
        return all(f.status == "proved" for f in self.init) \
            and all(e.status == "enabled" for e in self.enabled)

    def failed(self) -> list[ProofResult]:
        return [r for r in self.results if r.status != "proved"]

    def base_checks(self) -> list[tuple[str, bool, float, str]]:
        """(name, passed, seconds, hint) of every init frame and enabledness check."""
        out = [(f"{f.invariant} in the initial state", f.status == "proved", f.seconds,
                "" if f.status == "proved" else f"{f.status}: {f.detail}") for f in self.init]
        out += [(f"{e.transition} enabled under the invariants", e.status == "enabled", e.seconds,
                 "" if e.status == "enabled" else f"{e.status}: wgk prove --json")
                for e in self.enabled]
        return out

    def to_json(self) -> dict:
        return {
            "semantics": self.semantics, "bounds": self.bounds.to_json(),
            "results": [r.to_json() for r in self.results],
            "proved": self.count("proved"), "failed": self.count("counterexample"),
            "unknown": self.count("unknown"), "lemmas": self.lemmas,
            "assumptions": [p.id for p in REGISTRY.values() if p.kind == "assume"],
            "init": [f.to_json() for f in self.init],
            "enabled": [e.to_json() for e in self.enabled],
            "base_ok": self.base_ok,
            "seconds": round(self.seconds, 3), "build_seconds": round(self.build_seconds, 3),
        }
