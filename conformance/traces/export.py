"""Counterexamples and witnesses as files: ``wgk-trace/1`` traces and ITF JSON.

Written with the project's own trace module (schema validation, canonical
form) and ITF encoding, from the states the checked semantics produced (a
mutant's counterexample keeps the mutant's states).

Content ids (worktree bytes, candidates, bases, target commits) and sessions
are small ints in the model; on the wire they are strings, interned with
``wgk.model.observe.Names`` (content ``n`` is named ``c<n>``, session ``n``
is ``s<n>``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from wgk.model.env import EnvKind, EnvStep
from wgk.model.kernel import Decision
from wgk.model.observe import Names, observe
from wgk.model.requests import Request
from wgk.model.state import Graph, State

from wgk.conformance.traces.itf import FORMAT_DESCRIPTION, VARS, dumps as itf_dumps, encode_state
from wgk.conformance.traces.format import Trace, write_trace


def names_for(*states: State, steps: list = ()) -> Names:
    """A ``Names`` that calls content ``n`` ``c<n>``, session ``n`` ``s<n>`` and capability
    token ``n`` ``tok<n>``."""
    names = Names()
    ints: set[int] = set()
    sessions: set[int] = set()
    tokens: set[int] = set()
    for s in states:
        ints.add(s.target)
        for t in s.tasks:
            ints.update({t.worktree, t.origin, t.saved_work, t.retained, t.imported, t.candidate,
                         t.base, t.built_on, t.retained_base})
            ints.update(v for b in t.receipts for v in (b.candidate, b.base))
            sessions.add(t.session)
            tokens.add(t.token)
    for step in steps:
        if isinstance(step, Request):
            ints.update({step.candidate, step.base, step.imports})
            tokens.update({step.token, step.mint})
            if step.owner is not None:
                sessions.add(step.owner.session)
        elif isinstance(step, EnvStep):
            ints.add(step.content)
    for n in sorted(ints - {0}):
        names.content[f"c{n}"] = n
    for n in sorted(sessions - {0}):
        names.sessions[f"s{n}"] = n
    for n in sorted(tokens - {0}):
        names.tokens[f"tok{n}"] = n
    return names


#: How a run's edit of a content its graph marks as touching a protected path is written:
#: it writes this path, which the graph's one pattern protects.
PROTECTED_PATTERN = ".ci/**"
PROTECTED_PATH = ".ci/protected"


def step_json(step: Request | EnvStep, names: Names | None = None) -> dict:
    """The wire form of a request or environment step, content ids as strings."""
    names = names or names_for(steps=[step])
    if isinstance(step, EnvStep):
        out = step.to_json()
        if "content" in out:
            out["content"] = names.cname(step.content)
        if "onto" in out:
            out["onto"] = names.cname(step.onto)
        return out
    out = step.to_json()
    for key, v in (("candidate", step.candidate), ("base", step.base), ("imports", step.imports)):
        if key in out:
            out[key] = names.cname(v)
    if step.owner is not None:
        out["owner"]["session"] = names.sname(step.owner.session)
    for key, v in (("token", step.token), ("mint", step.mint)):
        if key in out:
            out[key] = names.tname(v)
    return out


@dataclass
class ModelRun:
    """A concrete run of the model to be written as a trace: the starting state, the steps with
    their decisions, the states (a counterexample or a witness)."""

    id: str
    title: str
    description: str
    states: list[State]
    steps: list[Request | EnvStep]
    decisions: list[Decision | None]
    provenance: str = ""
    final: dict = field(default_factory=dict)      # expected final facts (projection keys)

    @property
    def labels(self) -> list[str]:
        out = []
        for step, d in zip(self.steps, self.decisions):
            out.append(step_label(step) + (f" -> {d.label}" if d is not None else ""))
        return out

    def names(self) -> Names:
        return names_for(*self.states, steps=self.steps)

    def wire_steps(self, names: Names) -> list[dict]:
        """Steps on the wire. A request decided without a key (a keyless bounded
        instance) gets a key of its own, used once: the same decision, journaled."""
        out = []
        protected = self.states[0].graph.protected
        for n, (step, d) in enumerate(zip(self.steps, self.decisions), 1):
            if isinstance(step, EnvStep):
                out.append(step_json(step, names))
                if step.kind == EnvKind.EDIT and protected(step.content) is True:
                    out[-1]["paths"] = [PROTECTED_PATH]    # the marked content, as a path
                continue
            request = step_json(step, names)
            if step.key is None:
                request["key"] = f"{step.kind.label}:{step.task}:{n}"
            out.append({"request": request, "expect": d.to_json()})
        return out

    def to_wgk(self) -> Trace:
        """The ``wgk-trace/1`` document (a ``wgk.conformance.traces.format.Trace``)."""
        names = self.names()
        g = self.states[0].graph
        steps = self.wire_steps(names)
        graph = graph_json(g, names.cname(self.states[0].target))
        if any("paths" in s for s in steps):
            graph["protected-paths"] = [PROTECTED_PATTERN]
        return Trace(
            id=self.id, title=self.title,
            source={"kind": "counterexample", "provenance": self.provenance or "z3"},
            description=self.description, graph=graph, steps=steps, expect=self.final)

    def write(self, path: str | Path) -> Path:
        """Validate against the trace schema and write in the canonical form."""
        return write_trace(self.to_wgk(), path)

    def to_itf(self) -> dict:
        """The run's states as ITF (the encoding of ``wgk.conformance.traces.itf``)."""
        names = self.names()
        steps = [None] + self.wire_steps(names)
        decisions = [None] + [d.to_json() if d is not None else None for d in self.decisions]
        return {
            "#meta": {"format": "ITF", "format-description": FORMAT_DESCRIPTION,
                      "source": self.id, "description": self.title},
            "vars": list(VARS),
            "states": [encode_state(n, observe(s, names), steps[n], decisions[n])
                       for n, s in enumerate(self.states)],
        }

    def write_itf(self, path: str | Path) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(itf_dumps(self.to_itf()), encoding="utf-8")
        return p


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
