"""A bounded instance's transition relation unrolled step by step in one solver.

State ``s_{k+1}`` is a fresh copy of the state's leaves, each constrained to the value
chosen by the step's selector among the branches (every template of the instance evaluated
on ``s_k`` by the model's own ``decide`` or environment step). A found path is decoded into
concrete requests and environment steps and replayed through the executable model
(``wgk.conformance.z3.bmc`` searches it by increasing depth).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import z3

from wgk.model.env import EnvKind
from wgk.model.actions import ENV_GLOBAL_KINDS, ENV_TASK_KINDS, Instance, instance_kinds
from wgk.model.invariants import assumptions
from wgk.model.state import State
from wgk.model.vocab import INTRUDER, DecisionKind as D, Disposition, Kind as K, Verdict

from wgk.conformance.traces.export import ModelRun, step_label
from wgk.conformance.z3.crosscheck import SymbolicMismatch, compare_step, decode_decision
from wgk.conformance.z3.goals import Goal
from wgk.conformance.z3.symbolic import (
    BACKEND, Space, as_bool, decode_state, equals, fresh_state, identical,
    leaves, symbolic, value,
)
from wgk.conformance.z3.catalogue import (
    POOL, Catalogue, Pool, env_templates, intruder_templates, request_templates,
)
from wgk.conformance.z3.templates import journal_keys
from wgk.conformance.z3.transition import MODEL, Branch, Semantics, actor_sensitive, branches, discover_universe

BMC_VERDICTS = {K.VALIDATE: (Verdict.PASS, Verdict.FAIL),
                K.ACCEPT: (Verdict.PASS, Verdict.FAIL, Verdict.NOT_REQUIRED)}
BMC_DISPOSITIONS = {K.RECORD_DISPOSITION: (Disposition.LAND, Disposition.DELIVER,
                                           Disposition.REPORT)}


def instance_templates(inst: Instance, ids: tuple[str, ...], sem: Semantics = MODEL) -> list:
    """The templates of the instance's request groups (and environment steps)."""
    graph = inst.graph()
    names = graph.tasks
    out: list = request_templates(instance_kinds(inst), names, ids, rejections=inst.keys > 0,
                                  deadlines=False, verdicts=BMC_VERDICTS,
                                  dispositions=BMC_DISPOSITIONS,
                                  by_actor=actor_sensitive(graph, sem))
    if "intruder" in inst.groups:
        out += intruder_templates(instance_kinds(inst), names, ids,
                                  graph.principals.get(INTRUDER, ()),
                                  actor_sensitive(graph, sem))
    if "env" in inst.groups:
        out += env_templates(names, ENV_TASK_KINDS + ENV_GLOBAL_KINDS)
    if any(g in inst.groups for g in ("waits", "clock", "pause", "routes")):   # the clock runs toward deadlines
        out += env_templates(names, (EnvKind.TICK,))
    return out


def instance_bound(inst: Instance) -> Callable[[Any, Any, State], Any]:
    """The instance's bounds on attempts, generations and candidate versions, as guards."""
    def bound(tpl, step, s: State) -> Any:
        if tpl.is_env or tpl.task not in s.graph.index:
            return True
        t = s.task(tpl.task)
        if tpl.kind in (K.DISPATCH, K.RETRY):
            return t.attempt < inst.attempts
        if tpl.kind in (K.RESET, K.REOPEN):
            return t.generation + 1 < inst.generations
        if tpl.kind == K.REVISE:
            return t.version < inst.versions
        return True
    return bound


@dataclass
class Unrolled:
    """One unrolled step: its selector, request pool and branches."""

    sel: Any
    pool: Pool
    branches: list[Branch]


class Unrolling:
    """The instance's transition relation unrolled step by step in one solver."""

    def __init__(self, inst: Instance, sem: Semantics = MODEL, frames: str = "assume",
                 assume: tuple[str, ...] | None = None):
        self.inst = inst
        # the environment assumptions no environment step of a path breaks (default: all);
        # a kernel step that breaks one is not excluded: asked for, it is found
        self.assume = [p for p in assumptions("state") if assume is None or p.id in assume]
        self.sem = sem
        self.initial = inst.initial()
        graph = self.initial.graph
        self.cat = Catalogue(instance_templates(inst, inst.ids(), sem), graph.graph_id)
        universe = discover_universe(graph, inst.ids(), sem)
        self.space = Space(graph, universe, journal_keys(inst.key_names(), self.cat.templates),
                           len(POOL), len(self.cat.shapes), self.cat.decode_digest)
        self.keys = inst.key_names()          # the keys a request draws (its sender's namespace)
        self.bound = instance_bound(inst)
        self.solver = z3.SimpleSolver()
        s0 = fresh_state(self.space, "s0")
        self.solver.add(*equals(self.space, s0, self.initial))
        if self.solver.check() != z3.sat:     # every search would be empty, and say nothing
            raise SymbolicMismatch("the initial state of the instance has no symbolic model")
        self.states: list[State] = [s0]
        self.steps: list[Unrolled] = []
        self.moving: set[int] = set()
        self.queries = 0
        self.frames = frames

    @property
    def depth(self) -> int:
        return len(self.steps)

    def extend(self, indices: list[int] | None = None) -> None:
        """Add one step: ``s_{k+1}`` is the branch the selector picks applied to ``s_k``
        (``indices``: among those templates only; every template by default)."""
        k = self.depth
        s = self.states[-1]
        pool = Pool(f"r{k}", len(self.keys))
        bs = branches(self.cat, s, pool, self.sem, indices=indices, bound=self.bound)
        sel = z3.Int(f"sel{k}")
        nxt = fresh_state(self.space, f"s{k + 1}")
        cs: list = [sel >= 0, sel < len(bs), *pool.domain()]
        cs += [z3.Implies(sel == n, b.guard) for n, b in enumerate(bs)]
        pre = leaves(self.space, s)
        posts = [leaves(self.space, b.post) for b in bs]
        with symbolic():
            for pos, (x, y) in enumerate(zip(pre, leaves(self.space, nxt))):
                chain: Any = x
                for n in reversed(range(len(bs))):
                    v = posts[n][pos]
                    if not identical(v, x):
                        chain = BACKEND.ite(sel == n, v, chain)
                cs.append(y == BACKEND.term(chain))
        with symbolic(), self.sem.active():      # the environment never breaks an assumption
            cs += [z3.Implies(sel == n, as_bool(p.holds(b.post))) for n, b in enumerate(bs)
                   if b.decision is None for p in self.assume]
        self.solver.add(*[as_bool(c) for c in cs if c is not True])
        self.states.append(nxt)
        self.steps.append(Unrolled(sel, pool, bs))

    def forbid_rejection(self, k: int) -> None:
        """Step ``k`` is not a rejected request. Without idempotency keys a rejection
        changes nothing (the kernel returns the state it was given), so a trace with a
        rejected step before its last has a shorter equivalent, found at a lower depth."""
        if k in self.moving or self.space.keys or self.sem.decide is not None:
            return
        self.moving.add(k)
        u = self.steps[k]
        for n, b in enumerate(u.branches):
            if b.decision is None or b.decision.kind is not D.REJECTED and not hasattr(
                    b.decision.kind, "sort"):
                continue
            if b.decision.kind is D.REJECTED:
                self.solver.add(u.sel != n)
            else:
                self.solver.add(z3.Implies(u.sel == n, b.decision.kind != int(D.REJECTED)))

    def state_goal(self, goal: Goal, k: int) -> Any:
        with symbolic(), self.sem.active():
            return as_bool(goal.state(self.states[k]))

    def step_goal(self, goal: Goal, k: int) -> Any:
        step = self.steps[k]
        out = []
        with symbolic(), self.sem.active():
            for n, b in enumerate(step.branches):
                if b.decision is None:
                    continue
                bad = goal.step(self.states[k], b.step, b.decision, b.post)
                if bad is not False:
                    out.append(z3.And(step.sel == n, as_bool(bad)))
        return z3.Or(out) if out else z3.BoolVal(False)

    def solve(self, term: Any) -> z3.ModelRef | None | str:
        """A model of the unrolling plus ``term`` (preferring small, readable field values),
        ``None`` when there is none, ``"unknown"`` when the solver gives up.

        By default ``term`` is guarded by a fresh literal passed as an assumption, so
        what the solver learns about the unrolling is kept from one depth to the next;
        ``frames="push"`` asks in a push/pop frame instead (bench/bench_z3.py compares)."""
        self.queries += 1
        if self.frames == "push":
            self.solver.push()
            try:
                self.solver.add(term)
                return self._answer([])
            finally:
                self.solver.pop()
        guard = z3.Bool(f"query{self.queries}")
        self.solver.add(z3.Implies(guard, term))
        return self._answer([guard])

    def _answer(self, assumptions: list) -> z3.ModelRef | None | str:
        r = self.solver.check(*assumptions)
        if r != z3.sat:
            return None if r == z3.unsat else "unknown"
        model = self.solver.model()
        if self.solver.check(*assumptions, *self.readable()) == z3.sat:
            model = self.solver.model()
        return model

    def readable(self) -> list:
        """Preferences for readable traces: ids, pids, births and epochs between 1 and 99."""
        out = []
        for u in self.steps:
            p = u.pool.vars
            for name in ("pid", "birth", "session", "wrapper_epoch", "child_epoch", "candidate",
                         "base", "imports", "deadline"):
                out += [p[name] >= 1, p[name] <= 99]
            for name in ("generation", "attempt", "fence", "lease_epoch", "expected_revision",
                         "expected_attempt", "expected_generation"):
                out.append(p[name] <= 99)
        return out

    # -- decoding -------------------------------------------------------------------

    def path(self, model: z3.ModelRef, length: int) -> list[str]:
        """The labels of the templates the first ``length`` steps of ``model`` take."""
        return [self.steps[k].branches[value(model, self.steps[k].sel)].template.label
                for k in range(length)]

    def trace(self, model: z3.ModelRef, length: int, goal: Goal) -> ModelRun:
        """Decode the first ``length`` steps and replay them through the executable model."""
        graph = self.initial.graph
        states = [self.initial]
        steps, decisions = [], []
        s = self.initial
        with self.sem.active():
            for k in range(length):
                u = self.steps[k]
                n = value(model, u.sel)
                b = u.branches[n]
                step = self.cat.concrete_step(b.index, model, u.pool, self.keys)
                where = f"{goal.id}: step {k + 1} {step_label(step)}"
                d, s2 = self.sem.run(s, step)
                if s2 is None:
                    raise SymbolicMismatch(f"{where}: the environment step is not enabled concretely")
                compare_step(where, decode_decision(model, b.decision),
                             decode_state(model, self.space, self.states[k + 1], graph), d, s2)
                steps.append(step)
                decisions.append(d)
                states.append(s2)
                s = s2
            self._confirm(goal, states, steps, decisions)
        return ModelRun(id=f"bmc-{goal.id}", title=goal.description, description="",
                     states=states, steps=steps, decisions=decisions)

    def _confirm(self, goal: Goal, states: list[State], steps: list, decisions: list) -> None:
        """The goal must hold concretely at the end of the replayed trace."""
        if goal.scope == "state":
            hit = goal.state(states[-1])
        else:
            hit = goal.step(states[-2], steps[-1], decisions[-1], states[-1])
        if hit is not True:
            raise SymbolicMismatch(f"{goal.id}: the executable model does not confirm the "
                                   f"trace's last {'state' if goal.scope == 'state' else 'step'}")
