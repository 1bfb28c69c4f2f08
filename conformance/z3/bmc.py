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
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import z3

from wgk.model.actions import ENV_GLOBAL_KINDS, ENV_TASK_KINDS, Instance, instance_kinds
from wgk.model.invariants import REGISTRY, Property, assumptions
from wgk.model.logic import not_
from wgk.model.state import State
from wgk.model.vocab import DecisionKind as D, Disposition, Kind as K, Verdict

from wgk.conformance.traces.export import ModelRun, step_label
from wgk.conformance.z3.prove import Bounds, SymbolicMismatch, compare_step, decode_decision
from wgk.conformance.z3.symbolic import (
    BACKEND, Space, as_bool, decode_state, equals, fresh_state, identical,
    leaves, symbolic, value,
)
from wgk.conformance.z3.templates import (
    POOL, Catalogue, Pool, env_templates, intruder_templates, request_templates,
)
from wgk.conformance.z3.transition import MODEL, Branch, Semantics, actor_sensitive, branches, discover_universe

BMC_VERDICTS = {K.VALIDATE: (Verdict.PASS, Verdict.FAIL),
                K.ACCEPT: (Verdict.PASS, Verdict.FAIL, Verdict.NOT_REQUIRED)}
BMC_DISPOSITIONS = {K.RECORD_DISPOSITION: (Disposition.LAND, Disposition.DELIVER,
                                           Disposition.REPORT)}


def instance_templates(inst: Instance, ids: tuple[str, ...], sem: Semantics = MODEL) -> list:
    """The templates of the instance's request groups (and environment steps)."""
    graph = inst.graph()
    names = graph.tasks
    out: list = request_templates(instance_kinds(inst), names, ids, rejections=inst.keys,
                                  deadlines=False, verdicts=BMC_VERDICTS,
                                  dispositions=BMC_DISPOSITIONS,
                                  by_actor=actor_sensitive(graph, sem))
    if "intruder" in inst.groups:
        out += intruder_templates(instance_kinds(inst), names, ids)
    if "env" in inst.groups:
        out += env_templates(names, ENV_TASK_KINDS + ENV_GLOBAL_KINDS)
    return out


def instance_bound(inst: Instance) -> Callable[[Any, Any, State], Any]:
    """The instance's bounds on attempts, generations and candidate versions, as guards."""
    def bound(tpl, step, s: State) -> Any:
        if tpl.is_env or tpl.task not in s.graph.index:
            return True
        t = s.task(tpl.task)
        if tpl.kind in (K.DISPATCH, K.RETRY):
            return t.attempt < inst.attempts
        if tpl.kind == K.RESET:
            return t.generation + 1 < inst.generations
        if tpl.kind == K.REVISE:
            return t.version < inst.versions
        return True
    return bound


# --- goals --------------------------------------------------------------------------

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
        return out


# --- the unrolling ----------------------------------------------------------------------

@dataclass
class Unrolled:
    """One unrolled step: its selector, request pool and branches."""

    sel: Any
    pool: Pool
    branches: list[Branch]


class Unrolling:
    """The instance's transition relation unrolled step by step in one solver."""

    def __init__(self, inst: Instance, sem: Semantics = MODEL, evidence_ids: int | None = None,
                 keys: int = 2, frames: str = "assume", assume: tuple[str, ...] | None = None):
        self.inst = inst
        # the environment assumptions no environment step of a path breaks (default: all);
        # a kernel step that breaks one is not excluded: asked for, it is found
        self.assume = [p for p in assumptions("state") if assume is None or p.id in assume]
        self.sem = sem
        if evidence_ids is None:
            evidence_ids = 2 if "evidence" in inst.groups else 1
        self.bounds = Bounds(tasks=inst.tasks, evidence_ids=evidence_ids,
                             keys=keys if inst.keys else 0)
        self.initial = inst.initial()
        graph = self.initial.graph
        self.cat = Catalogue(instance_templates(inst, self.bounds.ids(), sem), graph.graph_id)
        universe = discover_universe(graph, self.bounds.ids(), sem)
        self.space = Space(graph, universe, self.bounds.key_names(), len(POOL),
                           len(self.cat.shapes), self.cat.decode_digest)
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

    def extend(self) -> None:
        """Add one step: ``s_{k+1}`` is the branch the selector picks applied to ``s_k``."""
        k = self.depth
        s = self.states[-1]
        pool = Pool(f"r{k}", len(self.space.keys))
        bs = branches(self.cat, s, pool, self.sem, bound=self.bound)
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
                step = self.cat.concrete_step(b.index, model, u.pool, self.space.keys)
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

    def done(g: Goal, status: str, length: int | None, trace: ModelRun | None) -> None:
        results[g.id] = CheckResult(g, inst, depth, status, length, trace,
                                    time.perf_counter() - t0, per_depth[g.id], sem.name)

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
                    done(g, g.found_status, k, u.trace(hit, k, g))
        if len(results) == len(goals):
            break
    for g in goals:
        if g.id not in results:
            done(g, g.absent_status, None, None)
    return [results[g.id] for g in goals]


def goal_for(id: str) -> Goal:
    if id not in REGISTRY:
        raise KeyError(id)
    return invariant_goal(REGISTRY[id])


# --- witnesses of the sometimes properties ------------------------------------------------

_OPS = ("core", "operator")
_RUN = Instance(tasks=1, attempts=2, groups=("core", "env"))
#: Where each ``sometimes`` property is looked for: a small instance whose request groups
#: make it reachable, and a depth that leaves room above its shortest witness. Properties
#: sharing an instance share one unrolling.
WITNESSES: dict[str, tuple[Instance, int]] = {
    "done-reached": (_RUN, 13),
    "dependent-done-reached": (Instance(tasks=2, groups=("core", "legacy")), 6),
    "needs-repair-reached": (_RUN, 8),
    "target-moved-reached": (_RUN, 12),
    "retry-reached": (_RUN, 5),
    "resume-reached": (_RUN, 6),
    "lost-reached": (_RUN, 6),
    "pid-reuse-detected": (_RUN, 6),
    "needs-reconciliation-reached": (Instance(tasks=1, groups=("core", "legacy")), 4),
    "reconstructed-reached": (Instance(tasks=1, groups=("core", "legacy")), 4),
    "upgrade-blocked-reached": (Instance(tasks=1, generations=2, groups=_OPS), 5),
    "aborted-preserved-reached": (Instance(tasks=1, generations=2, groups=_OPS), 5),
    "reset-reached": (Instance(tasks=1, generations=2, groups=_OPS), 4),
    "import-reached": (_RUN, 6),
    "compaction-continued": (Instance(tasks=1, groups=("core", "evidence")), 5),
}
DEFAULT_WITNESS = (Instance(tasks=2, attempts=2, generations=2, versions=2,
                            groups=("core", "evidence", "operator", "legacy", "env")), 8)


def witness(prop_id: str, sem: Semantics = MODEL,
            progress: Callable[[str], None] | None = None) -> CheckResult:
    """A shortest trace reaching ``sometimes`` property ``prop_id`` (or ``unreachable``)."""
    p = REGISTRY[prop_id]
    if p.kind != "sometimes":
        raise ValueError(f"{prop_id} is not a sometimes property")
    inst, depth = WITNESSES.get(prop_id, DEFAULT_WITNESS)
    return check(invariant_goal(p), inst, depth, sem, progress)


def witnesses(sem: Semantics = MODEL, progress: Callable[[str], None] | None = None
              ) -> list[CheckResult]:
    """A shortest witness of every sometimes property (goals sharing an instance share
    one unrolling)."""
    by_instance: dict[Instance, list[Property]] = {}
    depths: dict[Instance, int] = {}
    for p in REGISTRY.values():
        if p.kind == "sometimes":
            inst, depth = WITNESSES.get(p.id, DEFAULT_WITNESS)
            by_instance.setdefault(inst, []).append(p)
            depths[inst] = max(depths.get(inst, 0), depth)
    found: dict[str, CheckResult] = {}
    for inst, props in by_instance.items():
        for r in check_many([invariant_goal(p) for p in props], inst, depths[inst], sem):
            found[r.goal.id] = r
            if progress:
                progress(f"{r.goal.id}: {r.status}"
                         + (f" at depth {r.found_at}" if r.found_at is not None else ""))
    return [found[p.id] for p in REGISTRY.values() if p.kind == "sometimes"]
