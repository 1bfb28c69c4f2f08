"""What the fuzzer draws besides requests: graph shapes, and one-field changes of a request.

- **Shapes.** A chain (each task depends on the one before), a fan-in (every task
  but the last is a root, and the last depends on all of them) and a diamond (a
  root, two or more branches on it, a join on every branch). Readiness must count
  every dependency: only a fan-in or a diamond has a task with two.
- **One field.** A client re-sending a request under its key with exactly one
  field changed (one top-level field, or one field of its capability or owner):
  the request's digest covers every field, so the answer is
  ``idempotency-conflict`` whichever field it is.
"""
from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from wgk.model.vocab import Actor, Phase

SHAPES = ("chain", "fan-in", "diamond")
#: The fewest tasks each shape needs to have a task with two dependencies.
MIN_TASKS = {"chain": 1, "fan-in": 3, "diamond": 4}


def _graph(names: list[str], deps: dict[str, list[str]], review: bool) -> dict:
    return {"id": "g", "target": "main-0", "tasks": [
        {"name": n, "deps": deps.get(n, []), "review-required": review and i % 2 == 1,
         "requires-assignment": False} for i, n in enumerate(names)]}


def shaped_graph(tasks: int, shape: str = "chain", *, review: bool = False) -> dict:
    """A graph of ``shape`` with ``tasks`` tasks (at least ``MIN_TASKS[shape]``)."""
    if shape not in SHAPES:
        raise ValueError(f"unknown graph shape {shape!r} (known: {', '.join(SHAPES)})")
    n = max(tasks, MIN_TASKS[shape])
    names = [f"t{i + 1}" for i in range(n)]
    if shape == "chain":
        deps = {names[i]: [names[i - 1]] for i in range(1, n)}
    elif shape == "fan-in":
        deps = {names[-1]: names[:-1]}
    else:
        deps = {name: [names[0]] for name in names[1:-1]}
        deps[names[-1]] = names[1:-1]
    return _graph(names, deps, review)


# --- one field changed -----------------------------------------------------------------------

#: Fields whose value is a label: changed to another label of the same vocabulary.
LABELS: dict[str, list[str]] = {
    "actor": Actor.labels(),
    "expected-phase": Phase.labels(),
    "verdict": ["pass", "fail", "not-required"],
    "disposition": ["land", "deliver", "report"],
}
#: Fields never changed: the key (it is what is re-sent) and the kind (another request).
FIXED = ("key", "kind")


def changed(value: Any, name: str) -> Any:
    """Another value of the same type for field ``name``."""
    if name in LABELS:
        return next(v for v in LABELS[name] if v != value)
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, str):
        return value + "-x"
    if isinstance(value, list):
        return value + value[:1] if value else ["x"]
    return value


def one_field_changed(data, request: dict) -> dict:
    """``request`` with exactly one field drawn and changed (nested: one field of ``cap`` or
    ``owner``); the key stays."""
    fields = sorted(k for k in request if k not in FIXED)
    name = data.draw(st.sampled_from(fields), label="changed-field")
    out = dict(request)
    if isinstance(request[name], dict) and request[name]:
        inner = data.draw(st.sampled_from(sorted(request[name])), label="changed-subfield")
        out[name] = dict(request[name], **{inner: changed(request[name][inner], inner)})
    else:
        out[name] = changed(request[name], name)
    return out
