"""Breadth-first explicit-state exploration of a bounded instance.

The instance (``wgk.model.actions.Instance``) fixes the graph, the bounds and
the request groups; ``wgk.model.actions`` enumerates the requests and
environment steps of every state, the interned states are
``wgk.conformance.check.interning``'s.

The result carries the distinct-state count, the first (hence shortest)
violation path of every invariant that fails, the ``sometimes`` properties
reached, and optionally the state graph (networkx) for Graphviz export.
"""
from __future__ import annotations

import gc
import time
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable

import networkx as nx

from wgk.conformance.check.compiled import compiled_for
from wgk.conformance.check.interning import Interner, successor
from wgk.conformance.check.liveness import check_liveness
from wgk.conformance.check.workers import Pool, task_moves, task_verdict
from wgk.model.actions import (  # noqa: F401  (the enumeration, re-exported for callers)
    FOREIGN_COMMIT, GROUPS, INITIAL_TARGET, Instance, Step, content, env_steps, global_steps,
    label, legacy_requests, owner_for, requests_for, steps, task_steps,
)
from wgk.model.invariants import REGISTRY, Property
from wgk.model.kernel import Rules
from wgk.model.rules import RULES


@dataclass
class Violation:
    invariant: str
    doc: str
    path: list[str]
    steps: list[Any] = field(repr=False, default_factory=list)
    state: Any = field(repr=False, default=None)

    def to_json(self) -> dict:
        return {"invariant": self.invariant, "doc": self.doc, "depth": len(self.path),
                "path": self.path}


@dataclass
class ExploreResult:
    instance: Instance
    distinct_states: int
    transitions: int
    violations: list[Violation]
    reached: list[str]
    unreached: list[str]
    seconds: float
    complete: bool
    graph: nx.DiGraph | None = None
    liveness: Any = None       # a wgk.conformance.check.liveness.LivenessResult, when asked
    workers: int = 1
    #: states found but not yet expanded when an incomplete search stopped
    queued: int = 0

    def to_json(self) -> dict:
        out = {
            "instance": self.instance.describe(),
            "distinct_states": self.distinct_states,
            "transitions": self.transitions,
            "complete": self.complete,
            **({} if self.complete else {"queued": self.queued}),
            "violations": [v.to_json() for v in self.violations],
            "sometimes_reached": self.reached,
            "sometimes_unreached": self.unreached,
            "seconds": round(self.seconds, 3),
            "workers": self.workers,
            "states_per_second": round(self.distinct_states / self.seconds) if self.seconds else None,
        }
        if self.liveness is not None:
            out["liveness"] = self.liveness.to_json()
        return out


class _Space(Interner):
    """The explorer's view of the interned states.

    A rule for task ``i`` reads only task ``i``, its dependencies' Done/abandoned
    flags and generations, its dependents' committed flags (the reopen), the target, the
    clock and the journal, so the successors of task
    ``i`` are computed once per *local context* and reused across every global
    state sharing it. Locality is checked, not assumed: a step that changes
    another task raises.
    """

    def __init__(self, inst: Instance, rules: Rules, compiled=None):
        self.local: dict = {}
        self.inside: list = []
        super().__init__(inst, rules, compiled)
        #: whether a local context's steps and verdict are kept for the states that share it:
        #: with one task a context is its state's key written out, met once and expanded once,
        #: so keeping them (the steps were two thirds of the full model's memory) saves nothing
        self.keep = self.n > 1

    def interned(self, t) -> None:
        self.inside.append(self.inst.task_within(t))

    def contexts(self, key: tuple) -> tuple:
        """The local context of every task of ``key`` (``context`` for each ``i``)."""
        glob = key[self.n:]
        return tuple((i, key[i], self.neighbours(key, i)) + glob for i in range(self.n))

    def successors(self, key: tuple, i: int, step_props: list, ctx: tuple | None = None) -> list:
        """The steps of task ``i`` from ``key``, each as ``(label, step, request, decision,
        new task id, target, now, journal id, violated step props, new context of task i,
        local, loop)``; ``local`` says the step changes nothing another task's context
        reads (target, clock, journal and task i's Done/abandoned flags stay), so every
        other task keeps its context; ``loop`` says it leads back to the same state."""
        if ctx is None:
            ctx = self.context(key, i)
        out = self.local.get(ctx)
        if out is not None:
            return out
        return self.settle(ctx, task_moves(self.inst, self.rules, step_props, self.state(key), i,
                                           self.compiled))

    def settle(self, ctx: tuple, moves: list, keep: bool | None = None) -> list:
        """Intern the steps ``task_moves`` found for the context ``ctx``; keep them (by
        default when contexts are shared: ``keep``)."""
        flags = self.flags[ctx[1]]
        out = []
        for lab, obj, r, d, task, target, now, journal, bad in moves:
            tid, jid = self.intern(task), self.intern_journal(journal)
            glob = (target, now, jid)
            local = glob == ctx[3:] and self.flags[tid] == flags
            loop = local and tid == ctx[1]
            out.append((lab, obj, r, d, tid, target, now, jid, bad, (ctx[0], tid, ctx[2]) + glob,
                        local, loop))
        if self.keep if keep is None else keep:
            self.local[ctx] = out
        return out


#: the verdict of a local context that breaks no invariant and reaches no goal
NOTHING = ((), ())


def _split(props: dict[str, Property], check_steps: bool = True) -> tuple[list, list, list]:
    """(state invariants, step invariants, sometimes-properties) of a registry."""
    # an environment assumption is checked like an invariant here: the model's environment
    # keeps it by construction, so only a kernel step can break it, and that is reported
    state_props = [p for p in props.values() if p.kind in ("always", "assume")
                   and p.scope == "state"]
    step_props = [p for p in props.values() if p.kind == "always" and p.scope == "step"] \
        if check_steps else []
    goals = [p for p in props.values() if p.kind == "sometimes"]
    return state_props, step_props, goals


class _Search:
    """The breadth-first search's bookkeeping: parents (for shortest paths), the first
    violation of each invariant, the verdicts per local context, the optional graph."""

    def __init__(self, inst: Instance, rules: Rules, props: dict[str, Property],
                 check_steps: bool, max_states: int | None, keep_graph: bool,
                 progress: Callable[[int, int], None] | None, deadline: float | None = None,
                 compiled: bool = True, until_violated: bool = False):
        self.props = props
        #: stop (incomplete) once a violation is found: the first of each invariant is kept,
        #: so that one's path is the one a whole search finds
        self.until_violated = until_violated
        self.deadline = deadline       # perf_counter() at which to stop, incomplete
        self.queued = 0
        self.state_props, self.step_props, self.goals = _split(props, check_steps)
        self.space = _Space(inst, rules, compiled_for(inst, rules, self.state_props,
                                                      self.goals, self.step_props)
                            if compiled else None)
        self.max_states = max_states
        self.progress = progress
        self.parent: dict[tuple, tuple | None] = {self.space.key0: None}
        self.found: dict[str, Violation] = {}
        self.reached: set[str] = set()
        self.task_verdicts: dict[tuple, tuple] = {}
        self.transitions = 0
        #: the kept graph while searching: per expanded state's id, the states it leads to in
        #: the order met, each with its first label and every step (``built`` makes the
        #: networkx graph of it at the end)
        self.graph: dict | None = {} if keep_graph else None
        self.node_id: dict[tuple, int] = {self.space.key0: 0}
        self.queue: deque = deque()
        #: with workers: the checks of the level being expanded, taken at its end
        self.deferred: list | None = None

    def path_to(self, key: tuple, last: tuple = ()) -> tuple[list[str], list[Any]]:
        labels, objs = [], []
        cur = key
        while self.parent[cur] is not None:
            prev, lab, obj = self.parent[cur]
            labels.append(lab)
            objs.append(obj)
            cur = prev
        labels.reverse()
        objs.reverse()
        if last:
            labels.append(last[0])
            objs.append(last[1])
        return labels, objs

    def violated(self, pid: str, key: tuple, last: tuple = ()) -> None:
        """Record the first violation of ``pid``, found in ``key`` (or on the step ``last``)."""
        if pid not in self.found:
            labels, objs = self.path_to(key, last)
            p = self.props[pid]
            self.found[pid] = Violation(pid, p.doc, labels, objs, self.space.state(key))

    def check_task(self, key: tuple, i: int, ctx: tuple) -> None:
        """Check the state invariants for task ``i`` of ``key`` (once per local context);
        with workers, at the end of the level (``settle_checks``), in the same order."""
        verdict = self.task_verdicts.get(ctx)
        if self.deferred is not None:
            if verdict != NOTHING:      # a verdict of nothing changes nothing, now or later
                self.deferred.append((key, i, ctx))
            return
        if verdict is None:
            verdict = task_verdict(self.state_props, self.goals, self.space.state(key), i,
                                   self.space.compiled)
            if self.space.keep:
                self.task_verdicts[ctx] = verdict
        self.apply_verdict(key, verdict)

    def apply_verdict(self, key: tuple, verdict: tuple) -> None:
        bad, good = verdict
        for pid in bad:
            self.violated(pid, key)
        if good:
            self.reached.update(good)

    def check_state(self, key: tuple) -> tuple:
        """Check the state invariants of ``key``; its task contexts, for its expansion."""
        ctxs = self.space.contexts(key)
        for i, ctx in enumerate(ctxs):
            self.check_task(key, i, ctx)
        return ctxs

    def add(self, key: tuple, new: tuple, lab: str, obj: Any) -> bool:
        """Record a transition to a state not seen yet; False once ``max_states`` is passed."""
        self.parent[new] = (key, lab, obj)
        if self.max_states is not None and len(self.parent) > self.max_states:
            return False
        if self.graph is not None:
            self.node_id[new] = len(self.node_id)
        if self.progress and len(self.parent) % 50000 == 0:
            self.progress(len(self.parent), len(self.queue))
        return True

    def edge(self, key: tuple, new: tuple, lab: str, obj: Any = None) -> None:
        """An edge of the kept graph; every step between the same two states is kept in
        ``steps`` (the liveness check reads which actions a cycle takes)."""
        if self.graph is not None:
            v = self.node_id.get(new)
            if v is None:
                return
            out = self.graph[self.node_id[key]]
            data = out.get(v)
            if data is None:
                out[v] = {"label": lab, "steps": [obj]}
            else:
                data["steps"].append(obj)

    def built(self) -> nx.DiGraph | None:
        """The kept graph as networkx's: the states in the order met (``key``, ``expanded``),
        the edges in the order taken."""
        if self.graph is None:
            return None
        expanded = self.graph
        nodes = {n: {"key": k, "expanded": True} if n in expanded else {"key": k}
                 for k, n in self.node_id.items()}
        succ = {n: expanded.get(n, {}) if n in expanded else {} for n in nodes}
        pred: dict = {n: {} for n in nodes}
        for u, out in expanded.items():
            for v, data in out.items():
                pred[v][u] = data
        # networkx's own adjacency, filled at once (``add_edges_from`` per edge costs as much as
        # the search's bookkeeping); the same graph as adding each node and edge in this order
        g = nx.DiGraph()
        g._node = nodes
        g._adj = succ
        g._pred = pred
        return g

    # A queue entry is (state, its task contexts, whether it is within the bound).
    # A step marked local changes task i's context only: the others keep theirs,
    # and their verdicts were taken on the state it came from, so only task i is
    # checked anew.

    def expand_task(self, key: tuple, ctxs: tuple, i: int, stop: bool) -> bool:
        """Follow the steps of task ``i`` from ``key``; True once ``max_states`` is passed."""
        space, parent, queue, n = self.space, self.parent, self.queue, self.space.n
        ctx = ctxs[i]
        moves = space.local.get(ctx) if space.keep else space.local.pop(ctx, None)
        if moves is None:
            moves = space.successors(key, i, self.step_props, ctx)
        head, tail = key[:i], key[i + 1:n]
        inside = space.inside
        for lab, obj, r, d, tid, target, now, jid, bad, nctx, same, loop in moves:
            for pid in bad:
                self.violated(pid, key, (lab, obj))
            if stop:
                continue    # past max_states: only the step violations are still recorded
            self.transitions += 1
            if loop:
                continue
            new = head + (tid,) + tail + (target, now, jid)
            if new not in parent:
                if not self.add(key, new, lab, obj):
                    stop = True
                    continue
                if same:
                    self.check_task(new, i, nctx)
                    queue.append((new, ctxs[:i] + (nctx,) + ctxs[i + 1:], inside[tid]))
                else:
                    queue.append((new, self.check_state(new), all(inside[k] for k in new[:n])))
            self.edge(key, new, lab, obj)
        return stop

    def expand_globals(self, key: tuple, expand: bool) -> bool:
        """Follow the environment steps that change no task; True once ``max_states`` is passed."""
        n = self.space.n
        for target, now, lab, step in self.space.global_successors(key):
            self.transitions += 1
            new = key[:n] + (target, now, key[n + 2])
            if new == key:
                continue
            if new not in self.parent:
                if not self.add(key, new, lab, step):
                    return True
                self.queue.append((new, self.check_state(new), expand))
            self.edge(key, new, lab, step)
        return False

    def run(self) -> bool:
        """Search until the queue is empty or ``max_states`` is passed; whether it completed."""
        key0, inside, n = self.space.key0, self.space.inside, self.space.n
        self.queue.append((key0, self.check_state(key0), all(inside[k] for k in key0[:n])))
        queue = self.queue
        popped = 0
        while queue:
            popped += 1
            if self.out_of_time(popped) or self.expand(*queue.popleft()) or self.violated_now():
                self.queued = len(queue)
                queue.clear()
                return False
        return True

    def violated_now(self) -> bool:
        """Whether the search stops here, a violation found (``until_violated``)."""
        return self.until_violated and bool(self.found)

    def out_of_time(self, popped: int) -> bool:
        """The deadline has passed (read every 256 states)."""
        return self.deadline is not None and popped % 256 == 0 and \
            time.perf_counter() > self.deadline

    def expand(self, key: tuple, ctxs: tuple, expand: bool) -> bool:
        """Follow every step of one queued state; True once ``max_states`` is passed."""
        if not expand:
            return False
        if self.graph is not None:
            self.graph[self.node_id[key]] = {}
        stop = False
        for i in range(len(ctxs)):
            stop = self.expand_task(key, ctxs, i, stop)
        return stop or self.expand_globals(key, expand)

    def run_levels(self, pool: Pool) -> bool:
        """``run`` one breadth-first level at a time, the model's work of each level (the
        steps of every local context not met yet, the verdicts of every new one) shared out
        to ``pool``'s workers; the same states, transitions, order and first violations."""
        key0, inside, n = self.space.key0, self.space.inside, self.space.n
        self.deferred = []
        self.queue.append((key0, self.check_state(key0), all(inside[k] for k in key0[:n])))
        self.settle_checks(pool)
        while self.queue:
            level = list(self.queue)
            self.queue.clear()
            self.prefetch_moves(level, pool)
            stop = False
            for popped, entry in enumerate(level, 1):
                if self.out_of_time(popped) or self.expand(*entry):
                    stop = True
                    self.queued = len(level) - popped + 1 + len(self.queue)
                    break
            self.settle_checks(pool)
            if not self.space.keep:
                self.space.local.clear()    # the level's contexts, met once (a stop leaves some)
            if stop or self.violated_now():
                self.queued = self.queued if stop else len(self.queue)
                self.queue.clear()
                return False
        return True

    def prefetch_moves(self, level: list, pool: Pool) -> None:
        """The steps of every local context of ``level``'s states not met yet, by the workers."""
        space, need = self.space, {}
        for key, ctxs, expand in level:
            if expand:
                for i, ctx in enumerate(ctxs):
                    if ctx not in space.local and ctx not in need:
                        need[ctx] = (key, i)
        if need:
            jobs = [("moves", key, i) for key, i in need.values()]
            for ctx, moves in zip(need, pool.map(jobs)):
                space.settle(ctx, moves, keep=True)     # (until its state is expanded)
            pool.told()     # the ids of the task states the workers made, theirs to keep

    def settle_checks(self, pool: Pool) -> None:
        """Take the level's deferred checks in the order they were asked for."""
        asked, self.deferred = self.deferred, []
        kept = self.task_verdicts if self.space.keep else {}
        need: dict = {}
        for key, i, ctx in asked:
            if ctx not in kept and ctx not in need:
                need[ctx] = (key, i)
        if need:
            jobs = [("verdict", key, i) for key, i in need.values()]
            kept.update(zip(need, pool.map(jobs)))
        for key, i, ctx in asked:
            self.apply_verdict(key, kept[ctx])


#: the collector's thresholds while searching: every state, interned task state and verdict the
#: search makes is kept to its end, so the young generation's collections (every 700
#: allocations by default) find nothing to free and traverse the survivors again and again;
#: at 2 tasks with every property they were a quarter to a third of the CPU
SEARCH_GC_THRESHOLD = (200_000, 50, 100)


@contextmanager
def rare_collections():
    """The cyclic collector runs rarely (``SEARCH_GC_THRESHOLD``) inside; the thresholds as
    they were are restored on the way out. What the search keeps is acyclic (tuples, dicts of
    ints and task states), so nothing is held longer than the search holds it anyway."""
    before = gc.get_threshold()
    gc.set_threshold(*SEARCH_GC_THRESHOLD)
    try:
        yield
    finally:
        gc.set_threshold(*before)


def explore(inst: Instance, *, rules: Rules = RULES, max_states: int | None = None,
            keep_graph: bool = False, check_steps: bool = True,
            properties: dict[str, Property] | None = None,
            progress: Callable[[int, int], None] | None = None,
            liveness: bool = False, workers: int = 1,
            max_seconds: float | None = None, compiled: bool = True,
            until_violated: bool = False) -> ExploreResult:
    """Breadth-first search; the first violation of each invariant is its shortest path.
    With ``liveness``, a complete search's graph is checked for the ``eventually``
    properties under the fairness assumptions (``wgk.conformance.check.liveness``).
    With ``workers`` above 1 the model's work is shared among that many processes
    (``wgk.conformance.check.workers``); the result is the same. With ``max_seconds`` the
    search stops once that time has passed, incomplete, saying how many of the states it
    found wait unexpanded (``queued``). The rules and properties are evaluated by the compiled
    model (``wgk.conformance.check.compiled``) unless ``compiled`` is False (the interpreter);
    the result is the same. With ``until_violated`` the search stops, incomplete, once it has
    found a violation: each violation it reports is the one a whole search reports (a first
    violation is kept and breadth-first search meets the shortest first). The cyclic collector
    runs rarely while it searches (``rare_collections``)."""
    with rare_collections():
        return _explore(inst, rules, max_states, keep_graph, check_steps, properties, progress,
                        liveness, workers, max_seconds, compiled, until_violated)


def _explore(inst, rules, max_states, keep_graph, check_steps, properties, progress, liveness,
             workers, max_seconds, compiled, until_violated) -> ExploreResult:
    t0 = time.perf_counter()
    search = _Search(inst, rules, properties or REGISTRY, check_steps, max_states,
                     keep_graph or liveness, progress,
                     None if max_seconds is None else t0 + max_seconds, compiled, until_violated)
    with search.space.building():
        if workers == 1:
            complete = search.run()
        else:
            pool = Pool(workers, inst, rules, search.step_props, search.state_props,
                        search.goals, search.space, search.space.compiled)
            try:
                complete = search.run_levels(pool)
            finally:
                pool.close()
    graph = search.built()
    live = None
    if liveness and complete:
        live = check_liveness(graph, search.space, search.path_to, inst, rules)
    seconds = time.perf_counter() - t0
    return ExploreResult(
        instance=inst, distinct_states=len(search.parent), transitions=search.transitions,
        violations=sorted(search.found.values(), key=lambda v: (len(v.path), v.invariant)),
        reached=sorted(search.reached),
        unreached=sorted({p.id for p in search.goals} - search.reached),
        seconds=seconds, complete=complete, graph=graph if keep_graph else None,
        liveness=live, workers=workers, queued=0 if complete else search.queued,
    )


def to_dot(graph: nx.DiGraph, name: str = "wgk") -> str:
    """Graphviz DOT text of an explored state graph."""
    lines = [f"digraph {name} {{", "  node [shape=circle, fontsize=9];"]
    for n in graph.nodes:
        lines.append(f"  s{n};")
    for u, v, data in graph.edges(data=True):
        lab = str(data.get("label", "")).replace('"', "'")
        lines.append(f'  s{u} -> s{v} [label="{lab}", fontsize=8];')
    lines.append("}")
    return "\n".join(lines) + "\n"
