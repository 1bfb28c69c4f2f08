"""Random simulation: seeded random walks through the model.

Each walk starts in the instance's initial state and takes up to ``steps``
steps. At every step it lists the *enabled* steps of the current state — the
request instances the bounded actors may send (``wgk.model.actions``:
``task_steps``, ``global_steps``) that the kernel does not reject, and the
environment steps whose guard holds — and picks one uniformly at random. A walk
that reaches a state with no enabled step ends early (a deadlock, counted).

Every ``always`` invariant is checked after every step: the state properties on
the state reached, the step properties on the decided request. A rule for task
``i`` reads only task ``i``, its dependencies' Done/abandoned flags and
generations, its dependents' committed flags, the target, the clock and the journal (the explorer's locality, checked here too),
so the enabled steps of a task and the verdicts of its invariants are computed
once per such *local context* and reused whenever a walk meets it again: a
verdict is a pure function of that context, so reusing it is checking it.

Unlike exploration, walks are bounded by their length only: the explorer's
state constraint (``Instance.within``) does not apply.

A run is reproducible: walk ``k`` of a run with seed ``S`` draws from its own
generator seeded with ``"S:k"``, so the same seed, instance, trace count and
length give the same walks, whatever else changes.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from wgk.conformance.check.compiled import compiled_for
from wgk.conformance.check.interning import Interner, successor
from wgk.model.actions import Instance, label, task_steps
from wgk.model.invariants import REGISTRY, Property
from wgk.model.kernel import Rules
from wgk.model.rules import RULES
from wgk.model.state import State
from wgk.model.vocab import DecisionKind


@dataclass(frozen=True)
class WalkViolation:
    """The first walk (and step) on which an invariant failed: ``steps`` replays it from
    the initial state, ``state`` is the state it fails in (for a step property, the state
    the failing step was taken from)."""

    invariant: str
    doc: str
    trace: int                  # index of the walk in the run
    path: tuple[str, ...]       # the walk's steps from the initial state, the failing one last
    steps: tuple[Any, ...] = field(default=(), repr=False, compare=False)
    state: Any = field(default=None, repr=False, compare=False)

    def to_json(self) -> dict:
        return {"invariant": self.invariant, "doc": self.doc, "trace": self.trace,
                "depth": len(self.path), "path": list(self.path)}


@dataclass(frozen=True)
class SimulationResult:
    instance: Instance
    seed: int
    traces: int
    max_steps: int
    steps: int                  # steps taken, all walks together
    deadlocks: int              # walks that ended early: no step enabled
    violations: tuple[WalkViolation, ...]
    reached: tuple[str, ...]    # sometimes-properties seen on some walk
    unreached: tuple[str, ...]
    seconds: float

    @property
    def traces_per_second(self) -> float:
        return self.traces / self.seconds if self.seconds > 0 else float("inf")

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else float("inf")

    def to_json(self) -> dict:
        return {
            "instance": self.instance.describe(),
            "seed": self.seed,
            "traces": self.traces,
            "max_steps": self.max_steps,
            "steps": self.steps,
            "deadlocks": self.deadlocks,
            "violations": [v.to_json() for v in self.violations],
            "sometimes_reached": list(self.reached),
            "sometimes_unreached": list(self.unreached),
            "seconds": round(self.seconds, 3),
            "traces_per_second": round(self.traces_per_second, 1),
            "steps_per_second": round(self.steps_per_second),
        }


# An enabled step, as cached per local context: [label, step, new task id,
# target, now, journal id, ids of the step properties it violates (None until
# the step is first taken), and what checking them needs: the states before
# and after and the decision (dropped once checked)].
_Move = list


class _Walker(Interner):
    """The simulator's view of the interned states, as in the explorer, with the
    enabled moves cached per local context."""

    def __init__(self, inst: Instance, rules: Rules, step_props: list[Property],
                 state_props: list[Property], goals: list[Property], compiled: bool = True):
        self.step_props = step_props
        self.state_props = state_props
        self.goals = goals
        self.moves: dict = {}
        self.verdicts: dict = {}
        super().__init__(inst, rules, compiled_for(inst, rules, state_props, goals, step_props)
                         if compiled else None)

    def task_moves(self, key: tuple, i: int) -> list[_Move]:
        ctx = self.context(key, i)
        out = self.moves.get(ctx)
        if out is None:
            out = self.moves[ctx] = self._enabled(self.state(key), i)
        return out

    def _enabled(self, s: State, i: int) -> list[_Move]:
        out = []
        for step in task_steps(self.inst, s, i):
            d, s2, r = successor(self.inst, s, step, self.rules, compiled=self.compiled)
            if s2 is None or (d is not None and d.kind == DecisionKind.REJECTED):
                continue
            for j in range(self.n):
                if j != i and s2.tasks[j] is not s.tasks[j]:
                    raise AssertionError(f"{label(step)} changed task {self.graph.tasks[j]}: "
                                         "rules must be local to their task")
            lab = label(step) if d is None else f"{label(step)} -> {d.label}"
            out.append([lab, step if r is None else r, self.intern(s2.tasks[i]), s2.target,
                        s2.now, self.intern_journal(s2.journal), () if d is None else None,
                        (s, d, s2)])
        return out

    def step_verdict(self, move: _Move) -> tuple[str, ...]:
        """The step properties a move violates, checked the first time it is taken."""
        bad = move[6]
        if bad is None:
            s, d, s2 = move[7]
            r = move[1]
            bad = move[6] = tuple(p.id for p in self.step_props
                                  if p.holds(s, r, d, s2) is not True) \
                if self.compiled is None else self.compiled.step_verdict(s, r, d, s2)
            move[7] = None
        return bad

    def verdict(self, key: tuple, i: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(state invariants violated, sometimes-properties holding) for task ``i``."""
        ctx = self.context(key, i)
        v = self.verdicts.get(ctx)
        if v is None:
            s = self.state(key)
            if self.compiled is not None:
                v = self.verdicts[ctx] = self.compiled.verdict(s, i)
                return v
            v = self.verdicts[ctx] = (
                tuple(p.id for p in self.state_props if p.holds_for(s, i) is not True),
                tuple(p.id for p in self.goals if p.holds_for(s, i) is True))
        return v


#: Distinct states whose enabled steps are kept between visits; past this the
#: per-state table is dropped and rebuilt from the per-context caches.
STATE_CACHE_LIMIT = 1_000_000


class _Run:
    """One simulation run's tallies: first violations, properties reached, steps taken,
    deadlocks, and the per-state table of enabled steps."""

    def __init__(self, w: _Walker, props: dict[str, Property]):
        self.w = w
        self.props = props
        self.found: dict[str, WalkViolation] = {}
        self.reached: set[str] = set()
        self.table: dict[tuple, tuple] = {}
        self.taken = 0
        self.deadlocks = 0

    def violated(self, pid: str, trace: int, path: list, objs: list, key: tuple) -> None:
        if pid not in self.found:
            self.found[pid] = WalkViolation(pid, self.props[pid].doc, trace, tuple(path),
                                            tuple(objs), self.w.state(key))

    def check_state(self, key: tuple, trace: int, path: list, objs: list) -> None:
        for i in range(self.w.n):
            bad, good = self.w.verdict(key, i)
            self.reached.update(good)
            for pid in bad:
                self.violated(pid, trace, path, objs, key)

    def enabled(self, key: tuple) -> tuple:
        """(enabled steps per task, environment steps, how many in all) of a state."""
        entry = self.table.get(key)
        if entry is None:
            if len(self.table) >= STATE_CACHE_LIMIT:
                self.table.clear()
            w = self.w
            per_task = tuple(w.task_moves(key, i) for i in range(w.n))
            env = w.global_successors(key)
            entry = self.table[key] = (per_task, env, sum(map(len, per_task)) + len(env))
        return entry

    def pick(self, key: tuple, per_task: tuple, env: list, pick: int) -> tuple:
        """The ``pick``-th enabled step of ``key``: (label, step, next state, violated ids)."""
        w, n = self.w, self.w.n
        for i, moves in enumerate(per_task):
            if pick < len(moves):
                move = moves[pick]
                lab, obj, tid, target, now, jid, bad = move[:7]
                if bad is None:
                    bad = w.step_verdict(move)
                return lab, obj, key[:i] + (tid,) + key[i + 1:n] + (target, now, jid), bad
            pick -= len(moves)
        target, now, lab, obj = env[pick]
        return lab, obj, key[:n] + (target, now, key[n + 2]), ()

    def walk(self, k: int, seed: int, steps: int) -> None:
        """Walk ``k`` of the run: up to ``steps`` steps drawn from its own generator."""
        rng = random.Random(f"{seed}:{k}")
        key = self.w.key0
        path: list[str] = []
        objs: list = []
        for _ in range(steps):
            per_task, env, total = self.enabled(key)
            if total == 0:
                self.deadlocks += 1
                break
            lab, obj, new, bad = self.pick(key, per_task, env, rng.randrange(total))
            path.append(lab)
            objs.append(obj)
            for pid in bad:
                self.violated(pid, k, path, objs, key)
            key = new
            self.taken += 1
            if key not in self.table:    # a state met before has had its invariants checked
                self.check_state(key, k, path, objs)


def simulate(inst: Instance, traces: int, steps: int, seed: int, *, rules: Rules = RULES,
             properties: dict[str, Property] | None = None,
             progress: Callable[[int, int], None] | None = None,
             compiled: bool = True) -> SimulationResult:
    """Run ``traces`` random walks of up to ``steps`` steps each, checking every invariant:
    by the compiled model (``wgk.conformance.check.compiled``), or by the interpreter when
    ``compiled`` is False; the result is the same."""
    if traces < 0 or steps < 0:
        raise ValueError("traces and steps must not be negative")
    props = properties or REGISTRY
    state_props = [p for p in props.values() if p.kind in ("always", "assume")   # see explore
                   and p.scope == "state"]
    step_props = [p for p in props.values() if p.kind == "always" and p.scope == "step"]
    goals = [p for p in props.values() if p.kind == "sometimes"]
    t0 = time.perf_counter()
    run = _Run(_Walker(inst, rules, step_props, state_props, goals, compiled), props)
    run.check_state(run.w.key0, 0, [], [])
    for k in range(traces):
        run.walk(k, seed, steps)
        if progress and (k + 1) % 1000 == 0:
            progress(k + 1, traces)
    seconds = time.perf_counter() - t0
    return SimulationResult(
        instance=inst, seed=seed, traces=traces, max_steps=steps, steps=run.taken,
        deadlocks=run.deadlocks,
        violations=tuple(sorted(run.found.values(), key=lambda v: (len(v.path), v.invariant))),
        reached=tuple(sorted(run.reached)),
        unreached=tuple(sorted({p.id for p in goals} - run.reached)),
        seconds=seconds,
    )
