"""What a bounded search looks for: a bad (or wanted) state, or a bad step
(``wgk.conformance.z3.bmc``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from wgk.model.invariants import REGISTRY, Property
from wgk.model.logic import not_
from wgk.model.state import State


@dataclass(frozen=True)
class Goal:
    """What to look for: a bad (or wanted) state, or a bad step."""

    id: str
    description: str
    kind: str                       # "invariant" | "sometimes" | "reach"
    scope: str = "state"            # "state" | "step"
    state: Callable[[State], Any] | None = None
    step: Callable[..., Any] | None = None

    @property
    def found_status(self) -> str:
        return "violated" if self.kind == "invariant" else "reached"

    @property
    def absent_status(self) -> str:
        return "holds" if self.kind == "invariant" else "unreachable"


def invariant_goal(p: Property) -> Goal:
    """An ``always`` property's violation, or a ``sometimes`` property's witness."""
    if p.kind == "sometimes":
        return Goal(p.id, p.doc, "sometimes", "state", state=lambda s: p.holds(s))
    if p.scope == "state":
        return Goal(p.id, p.doc, "invariant", "state", state=lambda s: not_(p.holds(s)))
    return Goal(p.id, p.doc, "invariant", "step",
                step=lambda s, r, d, s2: not_(p.holds(s, r, d, s2)))


def goal_for(id: str) -> Goal:
    if id not in REGISTRY:
        raise KeyError(id)
    return invariant_goal(REGISTRY[id])
