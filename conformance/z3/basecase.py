"""The two checks that keep an inductive proof from proving nothing.

- **Init frames** (the base case): for every state property (the type domain,
  each lemma, each invariant) one solver frame checks

      Policy ∧ s0 = Initial ∧ ¬P(s0)

  on the initial state of the proof's chain (every task open, no evidence,
  an empty journal, every review and assignment policy at once). UNSAT
  proves the frame; SAT names the property and the task it fails for.
- **Enabledness**: for every transition kind, the assumptions of the
  inductive step (domain, invariants, lemmas) must admit a pre-state in which
  the transition changes something (a request applied or recorded as
  evidence, an environment step whose guard holds). A transition never
  enabled under the invariants would prove every one of its frames
  vacuously, so the proof fails naming it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import z3

from wgk.model.actions import INITIAL_TARGET
from wgk.model.logic import one_of
from wgk.model.state import Graph, State, initial_state
from wgk.model.vocab import DecisionKind as D

from wgk.conformance.z3.symbolic import (
    BACKEND, as_bool, decode_graph, decode_state, describe_task, equals, fresh_state, leaf_domain,
    leaf_types, leaves, symbolic,
)


def initial_of(graph: Graph) -> State:
    """The concrete initial state of the proof's chain (policies come from the symbolic graph)."""
    concrete = Graph.build(list(graph.tasks),
                           {graph.tasks[i]: [graph.tasks[d] for d in ds]
                            for i, ds in enumerate(graph.deps) if ds}, graph_id=graph.graph_id)
    return initial_state(concrete, target=INITIAL_TARGET)


@dataclass
class InitFrame:
    """One property checked on the initial state."""

    invariant: str
    status: str                  # proved | counterexample | unknown
    seconds: float
    tasks: tuple[str, ...] = ()
    detail: str = ""

    def to_json(self) -> dict:
        out: dict[str, Any] = {"invariant": self.invariant, "frame": "init", "status": self.status,
                               "seconds": round(self.seconds, 4)}
        if self.status != "proved":
            out["violated_for"] = list(self.tasks)
            out["detail"] = self.detail
        return out


@dataclass
class Enabledness:
    """One transition kind: is it enabled somewhere under the assumptions of the proof?"""

    transition: str
    status: str                  # enabled | never-enabled | unknown
    seconds: float
    branches: int = 0            # branches of the kind that change the state
    witness: str = ""            # the template of a branch found enabled

    def to_json(self) -> dict:
        return {"transition": self.transition, "status": self.status, "branches": self.branches,
                "witness": self.witness, "seconds": round(self.seconds, 4)}


def init_frames(prover, initial: State | None = None, only: list[str] | None = None
                ) -> list[InitFrame]:
    """The base case: every state property of ``prover`` holds in the initial state."""
    space = prover.space
    s0 = fresh_state(space, "init")
    start = initial_of(space.graph) if initial is None else initial
    solver = z3.SimpleSolver()
    solver.set("timeout", 60_000)
    solver.add(*equals(space, s0, start))
    out = []
    for p in prover.state_props:
        if only is not None and p.id not in only:
            continue
        t0 = time.perf_counter()
        with symbolic(), prover.sem.active():
            if p.id == "domain":
                terms = [(z3.And(_state_domain(space, s0) or [z3.BoolVal(True)]), None)]
            else:
                terms = [(as_bool(p.holds_for(s0, i)), i) for i in range(len(s0.tasks))]
        solver.push()
        solver.add(z3.Or([z3.Not(x) for x, _ in terms]))
        verdict = solver.check()
        model = solver.model() if verdict == z3.sat else None
        solver.pop()
        seconds = time.perf_counter() - t0
        if verdict == z3.unsat:
            out.append(InitFrame(p.id, "proved", seconds))
        elif verdict == z3.unknown:
            out.append(InitFrame(p.id, "unknown", seconds, detail="the solver gave up"))
        else:
            out.append(_init_counterexample(p.id, model, terms, space, s0, seconds))
    return out


def _state_domain(space, s0: State) -> list:
    """The type constraints of the tasks, the target and the clock (an unused journal
    entry's stored fields are unconstrained: nothing reads them until the key is used)."""
    journal = len(space.keys) * (4 + space.width)
    pairs = list(zip(leaf_types(space), leaves(space, s0)))
    kept = pairs[:len(pairs) - journal]
    return [c for c in (leaf_domain(tp, x) for tp, x in kept) if c is not True]


def _init_counterexample(pid: str, model, terms, space, s0, seconds: float) -> InitFrame:
    names = space.graph.tasks
    bad = [i for x, i in terms if i is not None and z3.is_false(model.eval(x, True))]
    pre = decode_state(model, space, s0, decode_graph(model, space.graph))
    where = [names[i] for i in bad]
    detail = "; ".join(f"{names[i]}: {describe_task(pre.tasks[i])}" for i in bad) \
        or "a field of the initial state is outside its type"
    return InitFrame(pid, "counterexample", seconds, tuple(where), detail)


def _changes(b) -> Any:
    """The condition under which branch ``b`` changes the state (``z3.And``'s term, built
    without z3py's coercion of each operand)."""
    if b.decision is None:
        return b.guard
    return BACKEND.and_([b.guard, as_bool(one_of(b.decision.kind, (D.APPLIED, D.EVIDENCE_ONLY)))])


def enabledness(prover, transitions: list[str] | None = None) -> list[Enabledness]:
    """For each transition kind built (or each of ``transitions``): satisfiable with the
    assumptions of the inductive step."""
    out = []
    for transition in prover.groups if transitions is None else transitions:
        group = prover.groups[transition]
        t0 = time.perf_counter()
        with symbolic(), prover.sem.active():
            conds = [(b, _changes(b)) for b in group]
        false = BACKEND.term(False).ast.value          # z3 keeps one copy of ``false``
        live = [(b, c) for b, c in conds if c.ast.value != false]
        if not live:
            out.append(Enabledness(transition, "never-enabled", time.perf_counter() - t0))
            continue
        templates = len({b.index for b, _ in live})    # a template may be a branch per case
        prover.solver.push()
        prover.solver.add(BACKEND.or_([c for _, c in live]))
        verdict = prover.solver.check()
        model = prover.solver.model() if verdict == z3.sat else None
        prover.solver.pop()
        seconds = time.perf_counter() - t0
        if verdict == z3.sat:
            hit = next((b.label for b, c in live if z3.is_true(model.eval(c, True))), "")
            out.append(Enabledness(transition, "enabled", seconds, templates, hit))
        else:
            out.append(Enabledness(transition, "never-enabled" if verdict == z3.unsat
                                   else "unknown", seconds, templates))
    return out
