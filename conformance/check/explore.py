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

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import networkx as nx

from wgk.conformance.check.interning import Interner, successor
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

    def to_json(self) -> dict:
        return {
            "instance": self.instance.describe(),
            "distinct_states": self.distinct_states,
            "transitions": self.transitions,
            "complete": self.complete,
            "violations": [v.to_json() for v in self.violations],
            "sometimes_reached": self.reached,
            "sometimes_unreached": self.unreached,
            "seconds": round(self.seconds, 3),
            "states_per_second": round(self.distinct_states / self.seconds) if self.seconds else None,
        }


class _Space(Interner):
    """The explorer's view of the interned states.

    A rule for task ``i`` reads only task ``i``, its dependencies' Done/abandoned
    flags, the target, the clock and the journal, so the successors of task
    ``i`` are computed once per *local context* and reused across every global
    state sharing it. Locality is checked, not assumed: a step that changes
    another task raises.
    """

    def __init__(self, inst: Instance, rules: Rules):
        self.local: dict = {}
        self.inside: list = []
        super().__init__(inst, rules)

    def interned(self, t) -> None:
        self.inside.append(self.inst.task_within(t))

    def contexts(self, key: tuple) -> tuple:
        """The local context of every task of ``key`` (``context`` for each ``i``)."""
        n = self.n
        flags = self.flags
        glob = key[n:]
        return tuple((i, key[i], tuple([flags[key[d]] for d in ds])) + glob
                     for i, ds in enumerate(self.graph.deps))

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
        s = self.state(key)
        out = []
        flags = self.flags[key[i]]
        for step in task_steps(self.inst, s, i):
            d, s2, r = successor(self.inst, s, step, self.rules)
            if s2 is None:
                continue
            for j in range(self.n):
                if j != i and s2.tasks[j] is not s.tasks[j]:
                    raise AssertionError(f"{label(step)} changed task {self.graph.tasks[j]}: "
                                         "rules must be local to their task")
            bad = ()
            if d is not None and (s2 is not s or self.inst.keys):
                bad = tuple(p.id for p in step_props if p.pred(s, r, d, s2) is not True)
            if s2 is s and not bad:
                continue
            lab = label(step) if d is None else f"{label(step)} -> {d.label}"
            tid, jid = self.intern(s2.tasks[i]), self.intern_journal(s2.journal)
            glob = (s2.target, s2.now, jid)
            local = glob == ctx[3:] and self.flags[tid] == flags
            loop = local and tid == ctx[1]
            out.append((lab, step if r is None else r, r, d, tid, s2.target, s2.now, jid, bad,
                        (i, tid, ctx[2]) + glob, local, loop))
        self.local[ctx] = out
        return out


def explore(inst: Instance, *, rules: Rules = RULES, max_states: int | None = None,
            keep_graph: bool = False, check_steps: bool = True,
            properties: dict[str, Property] | None = None,
            progress: Callable[[int, int], None] | None = None) -> ExploreResult:
    """Breadth-first search; the first violation of each invariant is its shortest path."""
    props = properties or REGISTRY
    state_props = [p for p in props.values() if p.kind == "always" and p.scope == "state"]
    step_props = [p for p in props.values() if p.kind == "always" and p.scope == "step"] \
        if check_steps else []
    goals = [p for p in props.values() if p.kind == "sometimes"]
    reached: set[str] = set()
    t0 = time.perf_counter()
    space = _Space(inst, rules)
    n = space.n
    key0 = space.key0
    parent: dict[tuple, tuple | None] = {key0: None}
    found: dict[str, Violation] = {}
    task_verdicts: dict[tuple, tuple] = {}
    transitions = 0
    graph = nx.DiGraph() if keep_graph else None
    if graph is not None:
        graph.add_node(0)
    node_id: dict[tuple, int] = {key0: 0}

    def path_to(key: tuple, last: tuple = ()) -> tuple[list[str], list[Any]]:
        labels, objs = [], []
        cur = key
        while parent[cur] is not None:
            prev, lab, obj = parent[cur]
            labels.append(lab)
            objs.append(obj)
            cur = prev
        labels.reverse()
        objs.reverse()
        if last:
            labels.append(last[0])
            objs.append(last[1])
        return labels, objs

    local = space.local
    inside = space.inside

    def check_task(key: tuple, i: int, ctx: tuple) -> None:
        """Check the state invariants for task ``i`` of ``key`` (once per local context)."""
        verdict = task_verdicts.get(ctx)
        if verdict is None:
            s = space.state(key)
            verdict = task_verdicts[ctx] = (
                tuple(p.id for p in state_props if p.pred(s, i, s.tasks[i]) is not True),
                tuple(p.id for p in goals if p.pred(s, i, s.tasks[i]) is True))
        bad, good = verdict
        for pid in bad:
            if pid not in found:
                labels, objs = path_to(key)
                p = props[pid]
                found[pid] = Violation(pid, p.doc, labels, objs, space.state(key))
        if good:
            reached.update(good)

    def check_state(key: tuple) -> tuple:
        """Check the state invariants of ``key``; its task contexts, for its expansion."""
        ctxs = space.contexts(key)
        for i, ctx in enumerate(ctxs):
            check_task(key, i, ctx)
        return ctxs

    # A queue entry is (state, its task contexts, whether it is within the bound).
    # A step marked local changes task i's context only: the others keep theirs,
    # and their verdicts were taken on the state it came from, so only task i is
    # checked anew.
    queue = deque([(key0, check_state(key0), all(inside[k] for k in key0[:n]))])
    complete = True
    stop = False

    def add(key: tuple, new: tuple, lab: str, obj: Any) -> bool:
        """Record a transition to a state not seen yet; False once ``max_states`` is passed."""
        parent[new] = (key, lab, obj)
        if max_states is not None and len(parent) > max_states:
            return False
        if graph is not None:
            node_id[new] = len(node_id)
            graph.add_node(node_id[new])
        if progress and len(parent) % 50000 == 0:
            progress(len(parent), len(queue))
        return True

    while queue:
        key, ctxs, expand = queue.popleft()
        if not expand:
            continue
        for i, ctx in enumerate(ctxs):
            moves = local.get(ctx)
            if moves is None:
                moves = space.successors(key, i, step_props, ctx)
            head, tail = key[:i], key[i + 1:n]
            for lab, obj, r, d, tid, target, now, jid, bad, nctx, same, loop in moves:
                if bad:
                    for pid in bad:
                        if pid not in found:
                            labels, objs = path_to(key, (lab, obj))
                            p = props[pid]
                            found[pid] = Violation(pid, p.doc, labels, objs, space.state(key))
                if stop:
                    continue    # past max_states: only the step violations are still recorded
                transitions += 1
                if loop:
                    continue
                new = head + (tid,) + tail + (target, now, jid)
                if new not in parent:
                    if not add(key, new, lab, obj):
                        stop = True
                        continue
                    if same:
                        check_task(new, i, nctx)
                        queue.append((new, ctxs[:i] + (nctx,) + ctxs[i + 1:], inside[tid]))
                    else:
                        queue.append((new, check_state(new), all(inside[k] for k in new[:n])))
                if graph is not None and new in node_id:
                    graph.add_edge(node_id[key], node_id[new], label=lab)
        if not stop:
            for target, now, lab, step in space.global_successors(key):
                transitions += 1
                new = key[:n] + (target, now, key[n + 2])
                if new == key:
                    continue
                if new not in parent:
                    if not add(key, new, lab, step):
                        stop = True
                        break
                    queue.append((new, check_state(new), expand))
                if graph is not None and new in node_id:
                    graph.add_edge(node_id[key], node_id[new], label=lab)
        if stop:
            complete = False
            queue.clear()
    seconds = time.perf_counter() - t0
    return ExploreResult(
        instance=inst, distinct_states=len(parent), transitions=transitions,
        violations=sorted(found.values(), key=lambda v: (len(v.path), v.invariant)),
        reached=sorted(reached), unreached=sorted({p.id for p in goals} - reached),
        seconds=seconds, complete=complete, graph=graph,
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
