"""Bounded model checking from a bounded instance's initial state.

One solver, extended one step at a time: state ``s_{k+1}`` is a fresh copy of
the state's leaves, each constrained to the value chosen by the step's
selector among the branches (every template evaluated on ``s_k`` by the
model's own ``decide`` or environment step). At every depth the goal is
asked under its own assumption literal (or in a push/pop frame), so the
first satisfiable depth gives a shortest trace. Searching by increasing depth
makes two prunings sound: a rejected request changes nothing without keys, so
no step before the last is a rejection; and a depth found empty is kept as a
fact. The trace is decoded into concrete requests and environment
steps and replayed through the executable model from the instance's initial
state; every decision, every state and the goal must agree
(``SymbolicMismatch`` otherwise).

Which requests exist follows the instance (``wgk.model.actions``):
its request groups, review policy, keys, and its bounds on attempts per
generation, generations and candidate versions. Unlike the explorer, every
compared request field is free: stale and current callers alike.

The unrolling is ``wgk.conformance.z3.unrolling``, what is looked for
``wgk.conformance.z3.goals``; the witnesses of the ``sometimes`` properties are
searched by ``wgk.conformance.z3.witnesses``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

import z3

from wgk.model.actions import Instance
from wgk.model.invariants import assumptions

from wgk.conformance.traces.export import ModelRun
from wgk.conformance.z3.goals import Goal, goal_for, invariant_goal  # noqa: F401  (re-exported)
from wgk.conformance.z3.transition import MODEL, Semantics
from wgk.conformance.z3.unrolling import Unrolling, instance_templates  # noqa: F401  (re-exported)


# --- results --------------------------------------------------------------------------

@dataclass
class CheckResult:
    goal: Goal
    instance: Instance
    depth: int
    status: str                      # violated | reached | holds | unreachable | unknown
    found_at: int | None
    trace: ModelRun | None
    seconds: float
    per_depth: list[float] = field(default_factory=list)
    semantics: str = "model"
    path: list[str] | None = None    # the templates the trace takes, one label per step

    @property
    def found(self) -> bool:
        return self.found_at is not None

    def to_json(self) -> dict:
        out = {"goal": self.goal.id, "kind": self.goal.kind, "description": self.goal.description,
               "semantics": self.semantics, "instance": self.instance.describe(),
               "depth": self.depth, "status": self.status, "found_at": self.found_at,
               "seconds": round(self.seconds, 3),
               "seconds_per_depth": [round(x, 4) for x in self.per_depth]}
        if self.trace is not None:
            out["trace"] = self.trace.labels
        if self.path is not None:
            out["path"] = self.path
        return out


def check(goal: Goal, inst: Instance, depth: int, sem: Semantics = MODEL,
          progress: Callable[[str], None] | None = None,
          unrolling: Unrolling | None = None) -> CheckResult:
    """Search for ``goal`` at depths 0..``depth``; the first hit is a shortest trace."""
    return check_many([goal], inst, depth, sem, progress, unrolling)[0]


def check_many(goals: list[Goal], inst: Instance, depth: int, sem: Semantics = MODEL,
               progress: Callable[[str], None] | None = None,
               unrolling: Unrolling | None = None) -> list[CheckResult]:
    """Search for several goals on one unrolling, all at depth 0, then all at depth 1, ...

    Lockstep keeps every goal's search by increasing depth, which is what makes
    pruning rejected steps sound: at depth ``k`` step goals are asked while step
    ``k-1`` may still be a rejection, state goals after it no longer may."""
    t0 = time.perf_counter()
    ids = {g.id for g in goals}
    u = unrolling or Unrolling(inst, sem, assume=tuple(p.id for p in assumptions("state")
                                                        if p.id not in ids))
    per_depth: dict[str, list[float]] = {g.id: [] for g in goals}
    results: dict[str, CheckResult] = {}

    def done(g: Goal, status: str, length: int | None, trace: ModelRun | None,
             path: list[str] | None = None) -> None:
        results[g.id] = CheckResult(g, inst, depth, status, length, trace,
                                    time.perf_counter() - t0, per_depth[g.id], sem.name, path)

    for k in range(depth + 1):
        while u.depth < k:
            u.extend()
        for j in range(k - 1):
            u.forbid_rejection(j)
        for scope in ("step", "state"):
            if scope == "state" and k >= 1:
                u.forbid_rejection(k - 1)
            for g in goals:
                if g.id in results or g.scope != scope or (scope == "step" and k == 0):
                    continue
                t1 = time.perf_counter()
                if scope == "state":
                    bad = u.state_goal(g, k)
                    hit = u.solve(bad)
                    if hit is None:       # no k-step path reaches it: keep that as a fact
                        u.solver.add(z3.Not(bad))
                else:
                    hit = u.solve(u.step_goal(g, k - 1))
                per_depth[g.id].append(time.perf_counter() - t1)
                if progress:
                    progress(f"{g.id} depth {k}: "
                             f"{'found' if isinstance(hit, z3.ModelRef) else hit or 'none'} "
                             f"({per_depth[g.id][-1]:.2f}s)")
                if hit == "unknown":
                    done(g, "unknown", None, None)
                elif hit is not None:
                    done(g, g.found_status, k, u.trace(hit, k, g), u.path(hit, k))
        if len(results) == len(goals):
            break
    for g in goals:
        if g.id not in results:
            done(g, g.absent_status, None, None)
    return [results[g.id] for g in goals]


def follow(goal: Goal, inst: Instance, path: list[str], sem: Semantics = MODEL
           ) -> CheckResult | None:
    """``goal`` along a recorded path: step ``k`` may take only the template labelled
    ``path[k]`` (its request fields stay free for the solver), and the goal is asked after
    the last step. The trace found is decoded and replayed through the executable model
    like any other; None when the path names a template the instance does not have or no
    longer reaches the goal (it is then searched for)."""
    t0 = time.perf_counter()
    u = Unrolling(inst, sem, assume=tuple(p.id for p in assumptions("state") if p.id != goal.id))
    index = {t.label: n for n, t in enumerate(u.cat.templates)}
    k = len(path)
    if any(label not in index for label in path) or (goal.scope == "step" and k == 0):
        return None
    for label in path:
        u.extend([index[label]])
    hit = u.solve(u.state_goal(goal, k) if goal.scope == "state" else u.step_goal(goal, k - 1))
    if not isinstance(hit, z3.ModelRef):
        return None
    return CheckResult(goal, inst, k, goal.found_status, k, u.trace(hit, k, goal),
                       time.perf_counter() - t0, [], sem.name, u.path(hit, k))
