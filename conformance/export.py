"""Counterexamples and witnesses as files: ``wgk-trace/1`` traces and ITF JSON.

Content ids (worktree bytes, candidates, bases, target commits) and sessions
are small ints in the model; on the wire they are strings, interned with
``wgk.model.observe.Names`` (content ``n`` is named ``c<n>``, session ``n``
is ``s<n>``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from wgk.model.env import EnvKind, EnvStep
from wgk.model.kernel import Decision
from wgk.model.observe import Names, observe
from wgk.model.requests import Request
from wgk.model.state import Graph, State

TRACE_FORMAT = "wgk-trace/1"


def names_for(*states: State, steps: list = ()) -> Names:
    """A ``Names`` that calls content ``n`` ``c<n>`` and session ``n`` ``s<n>``."""
    names = Names()
    ints: set[int] = set()
    sessions: set[int] = set()
    for s in states:
        ints.add(s.target)
        for t in s.tasks:
            ints.update({t.worktree, t.origin, t.saved_work, t.retained, t.imported, t.candidate,
                         t.base})
            ints.update(v for b in t.receipts for v in (b.candidate, b.base))
            sessions.add(t.session)
    for step in steps:
        if isinstance(step, Request):
            ints.update({step.candidate, step.base, step.imports})
            if step.owner is not None:
                sessions.add(step.owner.session)
        elif isinstance(step, EnvStep):
            ints.add(step.content)
    for n in sorted(ints - {0}):
        names.content[f"c{n}"] = n
    for n in sorted(sessions - {0}):
        names.sessions[f"s{n}"] = n
    return names


def step_json(step: Request | EnvStep, names: Names | None = None) -> dict:
    """The wire form of a request or environment step, content ids as strings."""
    names = names or names_for(steps=[step])
    if isinstance(step, EnvStep):
        out = step.to_json()
        if "content" in out:
            out["content"] = names.cname(step.content)
        return out
    out = step.to_json()
    for key, v in (("candidate", step.candidate), ("base", step.base), ("imports", step.imports)):
        if key in out:
            out[key] = names.cname(v)
    if step.owner is not None:
        out["owner"]["session"] = names.sname(step.owner.session)
    return out


@dataclass
class Trace:
    """A concrete run: the starting state, the steps with their decisions, the states."""

    id: str
    title: str
    description: str
    states: list[State]
    steps: list[Request | EnvStep]
    decisions: list[Decision | None]
    source: dict = field(default_factory=dict)
    final: dict = field(default_factory=dict)      # expected final facts (projection keys)

    @property
    def labels(self) -> list[str]:
        out = []
        for step, d in zip(self.steps, self.decisions):
            out.append(step_label(step) + (f" -> {d.label}" if d is not None else ""))
        return out

    def names(self) -> Names:
        return names_for(*self.states, steps=self.steps)

    def to_wgk(self) -> dict:
        """The ``wgk-trace/1`` document."""
        names = self.names()
        g = self.states[0].graph
        steps = []
        for step, d in zip(self.steps, self.decisions):
            if isinstance(step, EnvStep):
                steps.append(step_json(step, names))
            else:
                steps.append({"request": step_json(step, names), "expect": d.to_json()})
        return {
            "format": TRACE_FORMAT,
            "id": self.id,
            "title": self.title,
            "source": self.source,
            "description": self.description,
            "graph": graph_json(g, names.cname(self.states[0].target)),
            "steps": steps,
            "expect": self.final,
        }

    def to_itf(self) -> dict:
        """The run as ITF (Informal Trace Format) JSON."""
        names = self.names()
        states = []
        actions = ["init"] + [step_label(s) for s in self.steps]
        for n, s in enumerate(self.states):
            obs = observe(s, names)
            entry: dict[str, Any] = {"#meta": {"index": n}}
            entry["target"] = obs["target"] if obs["target"] is not None else ""
            entry["now"] = itf_value(obs["now"])
            entry["tasks"] = {"#map": [[name, itf_value(t)] for name, t in obs["tasks"].items()]}
            entry["journal"] = {"#map": [[k, itf_value(v)] for k, v in obs["journal"].items()]}
            entry["mbt::actionTaken"] = actions[n]
            states.append(entry)
        return {
            "#meta": {"format": "ITF", "format-description": "https://apalache-mc.org/docs/adr/015adr-trace.html",
                      "source": self.id, "description": self.title},
            "vars": ["target", "now", "tasks", "journal", "mbt::actionTaken"],
            "states": states,
        }


def itf_value(v: Any) -> Any:
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return {"#bigint": str(int(v))}
    if v is None:
        return {"tag": "None", "value": {}}
    if isinstance(v, str):
        return v
    if isinstance(v, dict):
        return {str(k): itf_value(x) for k, x in v.items()}
    if isinstance(v, tuple):
        return {"#tup": [itf_value(x) for x in v]}
    if isinstance(v, list):
        return [itf_value(x) for x in v]
    raise TypeError(f"no ITF encoding for {type(v).__name__}")


def graph_json(g: Graph, target: str | None) -> dict:
    return {"id": g.graph_id, "target": target,
            "tasks": [{"name": n, "deps": [g.tasks[d] for d in g.deps[i]],
                       "review-required": bool(g.review_required[i]),
                       "requires-assignment": bool(g.requires_assignment[i])}
                      for i, n in enumerate(g.tasks)]}


def step_label(step: Request | EnvStep) -> str:
    if isinstance(step, EnvStep):
        extra = f"={step.content}" if step.kind in (EnvKind.EDIT, EnvKind.MOVE_TARGET) else ""
        extra += f",birth={step.birth}" if step.kind == EnvKind.PID_REUSE else ""
        return f"env:{step.kind.label}({step.task}{extra})"
    parts = [step.task]
    if step.verdict is not None:
        parts.append(step.verdict.label)
    if step.disposition is not None:
        parts.append(step.disposition.label)
    if step.evidence:
        parts.append(f"ev={step.evidence}")
    return f"{step.kind.label}({','.join(parts)})"
