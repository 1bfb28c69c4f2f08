"""One path through the model: where it starts, its steps, the state after each.

A ``Session`` starts from a trace (its graph and seeded initial facts) or from
the initial state of a bounded instance, applies wire steps (a request step
decided by the model, or a mutant of it, and an environment step) and keeps
the state after every one. State ``k`` is the state after ``k`` steps; step
``n`` (numbered from 0, as ``wgk replay`` does) leads from state ``n`` to
state ``n + 1``. Steps are always applied in their wire form, the form an
exported trace carries, so the page shows what ``wgk replay`` will see.
"""
from __future__ import annotations

import copy
import shlex
from dataclasses import dataclass, replace
from typing import Any

from wgk.model.env import EnvError, EnvStep, apply_env, guard_and_update
from wgk.model.invariants import REGISTRY, step_violations, violations
from wgk.model.observe import observe
from wgk.model.requests import Request
from wgk.model.state import State

from wgk.conformance.oracle.systems import StepError, env_part, initial_model_state
from wgk.conformance.oracle.wire import WireError, env_from_wire, request_from_wire
from wgk.conformance.traces.export import graph_json, step_json
from wgk.conformance.traces.format import Trace
from wgk.conformance.view.enumerate import INITIAL_TARGET, Instance, label
from wgk.conformance.view.names import ViewNames


class SessionError(ValueError):
    """A step or a start the model cannot take; one line."""


@dataclass
class Entry:
    """One applied step: its wire form, the model's step, decision and the state after it."""

    wire: dict
    step: Request | EnvStep
    decision: dict | None
    state: State
    step_broken: list[str]
    broken: list[str] | None = None     # every invariant broken by it or in the state after it


def semantics_of(mutant: str | None):
    from wgk.conformance.z3.mutants import MUTANTS
    from wgk.conformance.z3.transition import MODEL
    if mutant is None:
        return MODEL
    if mutant not in MUTANTS:
        raise SessionError(f"unknown mutant {mutant!r} (known: {', '.join(MUTANTS)})")
    return MUTANTS[mutant].semantics()


def mutant_of(trace: Trace) -> str | None:
    """The mutant a counterexample of ``wgk check --mutant`` was found on, from its provenance."""
    try:
        words = shlex.split(trace.source.get("provenance", ""))
    except ValueError:
        return None
    if "--mutant" in words[:-1]:
        return words[words.index("--mutant") + 1]
    return None


def step_label(step: Request | EnvStep, names: ViewNames) -> str:
    """The enumeration's label, content ids by name."""
    if isinstance(step, EnvStep):
        value = f"={names.cname(step.content)}" if step.content else ""
        value += f",birth={step.birth}" if step.birth else ""
        return f"env:{step.kind.label}({step.task or ''}{value})"
    return label(step)


class Session:
    """A path: the start, the applied steps, the semantics that decides them."""

    def __init__(self, *, id: str, title: str, description: str, source: dict, graph: dict,
                 initial: dict, inst: Instance, mutant: str | None = None,
                 names: ViewNames | None = None, steps: list = ()):
        self.id, self.title, self.description, self.source = id, title, description, source
        self.graph, self.initial, self.inst, self.mutant = graph, initial, inst, mutant
        self.semantics = semantics_of(mutant)
        self.names = names or ViewNames()
        try:
            # a trace's edits mark the contents that touch its protected paths
            self.start = initial_model_state(graph, initial, self.names, steps)
        except (StepError, WireError, KeyError, TypeError, ValueError) as e:
            raise SessionError(f"the start: {e}") from None
        self.entries: list[Entry] = []
        self._start_broken: list[str] | None = None
        self.loaded: list[dict] = []
        self.loaded_expect: dict = {}
        self.loaded_mutant: str | None = None

    # --- starting ---------------------------------------------------------------------------

    @classmethod
    def from_trace(cls, trace: Trace, inst: Instance, mutant: str | None = None) -> "Session":
        s = cls(id=trace.id, title=trace.title, description=trace.description,
                source=dict(trace.source), graph=trace.graph, initial=trace.initial, inst=inst,
                mutant=mutant, steps=trace.steps)
        for n, wire in enumerate(trace.steps):
            s.push(wire, where=f"{trace.path or trace.id}: /steps/{n}")
        s.loaded = [copy.deepcopy(e.wire) for e in s.entries]
        s.loaded_expect = dict(trace.expect)
        s.loaded_mutant = mutant
        return s

    @classmethod
    def from_instance(cls, inst: Instance, mutant: str | None = None) -> "Session":
        names = ViewNames(content={"main-0": INITIAL_TARGET})
        g = inst.graph()
        opts = " ".join(f"--{k} {v}" for k, v in (("tasks", inst.tasks), ("attempts", inst.attempts),
                                                    ("generations", inst.generations),
                                                    ("versions", inst.versions)))
        return cls(id=f"explored-{inst.tasks}-tasks", title=f"A path explored by hand ({inst.tasks} "
                   f"task{'s' if inst.tasks > 1 else ''})",
                   description="A path through a bounded instance, explored step by step in wgk view.",
                   source={"kind": "recorded-run", "provenance": f"wgk view {opts} --groups "
                           + ",".join(inst.groups)},
                   graph=graph_json(g, "main-0"), initial={}, inst=inst, mutant=mutant, names=names)

    # --- applying ---------------------------------------------------------------------------

    def states(self) -> list[State]:
        return [self.start] + [e.state for e in self.entries]

    def state(self, k: int) -> State:
        if not 0 <= k <= len(self.entries):
            raise SessionError(f"state {k}: the path has states 0 to {len(self.entries)}")
        return self.start if k == 0 else self.entries[k - 1].state

    def apply(self, s: State, wire: dict, where: str = "step") -> Entry:
        """Decide one wire step in state ``s`` (nothing is kept)."""
        if not isinstance(wire, dict):
            raise SessionError(f"{where}: a step is a JSON object")
        try:
            if "request" in wire:
                r = request_from_wire(wire["request"], self.names, "/request")
                with self.semantics.active():
                    d, s2 = self.semantics.run(s, r)
                return Entry(wire, r, d.to_json(), s2, step_violations(s, r, d, s2))
            e = env_from_wire(env_part(wire), self.names)
            return Entry(wire, e, None, apply_env(s, e), [])
        except (WireError, EnvError, StepError) as e:
            raise SessionError(f"{where}: {e}") from None

    def push(self, wire: dict, where: str = "step") -> Entry:
        entry = self.apply(self.state(len(self.entries)), wire, where)
        self.entries.append(entry)
        return entry

    def extend(self, at: int, wire: dict) -> Entry:
        """Keep the first ``at`` steps and take ``wire`` next (what follows is dropped)."""
        s = self.state(at)
        entry = self.apply(s, wire, f"step {at}")
        del self.entries[at:]
        self.entries.append(entry)
        return entry

    def wire_of(self, step: Request | EnvStep, n: int) -> dict:
        """The wire form of an enumerated step taken as step ``n`` (a request gets a key)."""
        out = step_json(step, self.names)
        if isinstance(step, EnvStep):
            return out
        if step.key is None:
            out["key"] = label(step) if self.inst.keys else f"{step.kind.label}:{step.task}:{n + 1}"
        return {"request": out}

    def enabled(self, k: int) -> list[tuple[Request | EnvStep, Entry]]:
        """Every step the enumeration offers in state ``k`` that can be taken, decided."""
        return self.successors(self.state(k), k)

    def successors(self, s: State, n: int) -> list[tuple[Request | EnvStep, Entry]]:
        """The enumeration's steps in ``s`` taken as step ``n`` (environment steps only if enabled)."""
        from wgk.conformance.view.enumerate import steps
        out = []
        for step in steps(self.inst, s):
            if isinstance(step, EnvStep) and guard_and_update(s, step)[0] is not True:
                continue
            out.append((step, self.apply(s, self.wire_of(step, n), f"state {n}")))
        return out

    # --- reading ----------------------------------------------------------------------------

    def observed(self, k: int) -> dict:
        return observe(self.state(k), self.names)

    def broken(self, k: int) -> list[str]:
        """Invariants that fail in state ``k`` or for the step into it (kept once computed)."""
        if k == 0:
            if self._start_broken is None:
                self._start_broken = violations(self.start)
            return self._start_broken
        entry = self.entries[k - 1]
        if entry.broken is None:
            state = violations(entry.state)
            entry.broken = state + [i for i in entry.step_broken if i not in state]
        return entry.broken

    def first_break(self) -> dict | None:
        for k in range(len(self.entries) + 1):
            broken = self.broken(k)
            if broken:
                return {"state": k, "step": k - 1 if k else None, "id": broken[0],
                        "doc": REGISTRY[broken[0]].doc}
        return None

    def label_of(self, entry: Entry) -> str:
        return step_label(entry.step, self.names)

    # --- writing ----------------------------------------------------------------------------

    def pristine(self) -> bool:
        """The loaded trace's own steps, decided by the semantics it was loaded with."""
        return (bool(self.loaded) and [e.wire for e in self.entries] == self.loaded
                and self.mutant == self.loaded_mutant)

    def export(self) -> Trace:
        """The path as a ``wgk-trace/1`` document; each request expects the decision shown."""
        steps = []
        for e in self.entries:
            w = copy.deepcopy(e.wire)
            if "request" in w:
                w["expect"] = e.decision
            steps.append(w)
        changed = not self.pristine()
        expect = final_facts(self.observed(len(self.entries))) if changed else self.loaded_expect
        description = self.description
        if self.loaded and [e.wire for e in self.entries] != self.loaded:
            description += " Then explored by hand in wgk view."
        elif changed and self.loaded:
            description += f" Decided again by the {self.mutant or 'model'} in wgk view."
        if self.mutant:
            description += f" Decisions by the mutant {self.mutant}, not the model."
        title = self.title if not changed or not self.loaded else f"{self.title} (explored)"
        ident = self.id if not changed or not self.loaded else f"{self.id}-explored"
        return Trace(id=ident, title=title, source=self.source, description=description,
                     graph=self.graph, steps=steps, initial=self.initial, expect=expect)

    def with_semantics(self, mutant: str | None) -> "Session":
        """The same steps decided again by another semantics (the model when ``None``)."""
        trace = replace(self.export(), steps=[copy.deepcopy(e.wire) for e in self.entries], expect={})
        other = Session.from_trace(trace, self.inst, mutant)
        other.loaded, other.loaded_expect = self.loaded, self.loaded_expect
        other.loaded_mutant = self.loaded_mutant
        return other


def final_facts(obs: dict) -> dict:
    """The facts an exported path expects at its end (as ``wgk check --out`` writes them)."""
    return {"target": obs["target"],
            "tasks": {n: {"status": t["status"], "attempt-state": t["attempt-state"],
                          "phase": t["phase"], "exit": t["exit"]} for n, t in obs["tasks"].items()}}


def describe(value: Any) -> str:
    from wgk.conformance.oracle.wire import decision_label
    return decision_label(value) if isinstance(value, dict) else "-"
