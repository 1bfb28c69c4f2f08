"""The property registry: what a named property is, how one is registered, and the
queries over the registry (``wgk.model.invariants`` declares the properties).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from .logic import all_of, any_of, one_of
from .state import State, TaskState
from .vocab import Receipt, TERMINAL_ATTEMPT


@dataclass(frozen=True)
class Property:
    """A named property. State properties are written per task: ``pred(s, i, t)``
    must hold for every task ``i``; step properties get ``(s, r, d, s2)``."""

    id: str
    kind: str          # "always" | "sometimes" | "assume" | "eventually"
    scope: str         # "state" | "step" | "fairness" (an assumption about infinite runs)
    doc: str
    pred: Callable[..., Any]
    incidents: tuple[int, ...] = ()

    def holds(self, *args) -> Any:
        """For a state property, ``holds(s)``; for a step property, ``holds(s, r, d, s2)``."""
        if self.scope in ("state", "fairness"):
            (s,) = args
            combine = any_of if self.kind == "sometimes" else all_of
            return combine(*[self.pred(s, i, t) for i, t in enumerate(s.tasks)])
        return self.pred(*args)

    def holds_for(self, s: State, i: int) -> Any:
        """A state property for one task."""
        return self.pred(s, i, s.tasks[i])


REGISTRY: dict[str, Property] = {}


def prop(id: str, kind: str = "always", scope: str = "state", incidents: tuple[int, ...] = ()):
    def register(fn):
        doc = (fn.__doc__ or "").strip()
        if not doc:
            raise ValueError(f"property {id} needs a one-sentence docstring")
        REGISTRY[id] = Property(id, kind, scope, doc, fn, incidents)
        return fn
    return register


def each_task(s: State, pred: Callable[[State, int, TaskState], Any]) -> Any:
    return all_of(*[pred(s, i, t) for i, t in enumerate(s.tasks)])


def any_task(s: State, pred: Callable[[State, int, TaskState], Any]) -> Any:
    return any_of(*[pred(s, i, t) for i, t in enumerate(s.tasks)])


_last_pairs: list = [None, None, None]


def pairs(s: State, s2: State):
    """(index, before, after) for every task the step may have changed.

    A task object that is identical before and after cannot violate any step
    property (each one is trivially true for an unchanged task), so it is skipped.
    The last answer is kept: every step property asks for the same pair in turn.
    """
    if _last_pairs[0] is s and _last_pairs[1] is s2:
        return _last_pairs[2]
    out = [(i, t, t2) for i, (t, t2) in enumerate(zip(s.tasks, s2.tasks)) if t is not t2]
    _last_pairs[:] = [s, s2, out]
    return out


def terminal(t: TaskState) -> Any:
    return one_of(t.attempt_state, TERMINAL_ATTEMPT)


ALL_RECEIPTS = tuple(Receipt)


# --- queries over the registry --------------------------------------------------


def always(scope: str | None = None) -> list[Property]:
    return [p for p in REGISTRY.values() if p.kind == "always" and (scope is None or p.scope == scope)]


def sometimes() -> list[Property]:
    return [p for p in REGISTRY.values() if p.kind == "sometimes"]


def assumptions(scope: str | None = None) -> list[Property]:
    """The environment assumptions (kind ``assume``): assumed by the checkers, not guaranteed."""
    return [p for p in REGISTRY.values() if p.kind == "assume" and (scope is None or p.scope == scope)]


def outside_assumptions(s: State) -> list[str]:
    """Ids of environment assumptions that fail in concrete state ``s``."""
    return [p.id for p in assumptions("state") if p.holds(s) is not True]


def violations(s: State) -> list[str]:
    """Ids of state invariants that fail in concrete state ``s``."""
    return [p.id for p in always("state") if p.holds(s) is not True]


def step_violations(s: State, r, d, s2: State) -> list[str]:
    """Ids of step invariants that fail for one concrete decided request."""
    return [p.id for p in always("step") if p.holds(s, r, d, s2) is not True]


def fairness() -> list[Property]:
    """The fairness assumptions (scope ``fairness``) the eventually-properties are checked under."""
    return assumptions("fairness")


def eventually() -> list[Property]:
    return [p for p in REGISTRY.values() if p.kind == "eventually"]
