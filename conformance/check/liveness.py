"""Liveness on the explored state graph: ``eventually`` properties under fairness.

The fairness assumptions are the registry's ``assume`` properties
(``wgk.model.liveness``). Each is weak fairness for one task ``j``: a run that
stays in states where the condition holds for ``j`` must discharge it, and
only ``daemon-takes-due-actions`` can be discharged by a step (the task's due
action, taken, even if it changes nothing); ``live-owner-eventually-ends`` is
discharged only by leaving the condition. An infinite run ends in a strongly
connected component (networkx), and a component admits a fair run iff every
condition is either false somewhere in it or discharged by a step inside it
(weak fairness needs no refinement of components). A state with no successor
at all is a component on which the run stutters.

- ``eventually-settles``: for each task ``i``, the states where ``i`` is not
  settled; a fair component of them is a run on which ``i`` never settles.
- ``convergence-makes-progress``: the steps that are due actions; a cycle of
  them is convergence looping without progress.

A violation is a lasso: the shortest prefix from the initial state to a state
of the component, then a cycle through it that is fair (it takes every
discharge the component needs and visits a state where each other condition
is false).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import networkx as nx

from wgk.conformance.check import interning
from wgk.conformance.check.compiled import _REQUEST
from wgk.conformance.check.interning import successor
from wgk.conformance.check.reads import ByReads
from wgk.model.actions import Instance, label, task_steps
from wgk.model.kernel import Rules
from wgk.model.invariants import eventually, fairness
from wgk.model.liveness import due_kinds, owner_working, settled, the_way
from wgk.model.vocab import INTRUDER


def _intruder(step) -> bool:
    """The intruder's copy of a due action is not the daemon taking it (fairness is the daemon's)."""
    return getattr(step, "principal", None) == INTRUDER
from wgk.model.requests import Request


@dataclass
class Lasso:
    """A liveness violation: ``prefix`` leads from the initial state into the cycle."""

    property: str
    doc: str
    task: str | None
    prefix: list[str]
    cycle: list[str]
    prefix_steps: list[Any] = field(repr=False, default_factory=list)
    cycle_steps: list[Any] = field(repr=False, default_factory=list)

    def to_json(self) -> dict:
        return {"property": self.property, "doc": self.doc, "task": self.task,
                "prefix": self.prefix, "cycle": self.cycle}


@dataclass
class LivenessResult:
    checked: list[str]
    assumed: list[str]
    violations: list[Lasso]
    components: int           # components (and stuttering states) examined

    def to_json(self) -> dict:
        return {"checked": self.checked, "assumed": self.assumed, "components": self.components,
                "violations": [v.to_json() for v in self.violations]}


def _task_facts(s, i: int, way_of=None) -> tuple:
    """Task ``i``'s facts: (settled, due kinds, owner working); the way forward found once, by
    ``way_of`` (``the_way``'s conditions compiled, ``Compiled.the_way``) when given."""
    t = s.tasks[i]
    if way_of is None:
        way_of = the_way
    w = way_of(s, i)
    once = lambda s, i: w       # noqa: E731  (the way, found above, read twice)
    return settled(s, i, t, once), due_kinds(s, i, once), owner_working(s, i, t) is True


class _Graph:
    """The explored graph with the per-task facts the fairness test reads; a task's facts
    depend on its local context only (``Interner.context``), so they are computed once per
    context."""

    def __init__(self, g: nx.DiGraph, space, inst: Instance, rules: Rules):
        self.g, self.space, self.inst, self.rules = g, space, inst, rules
        self.n = inst.tasks
        self._facts: dict[int, tuple] = {}
        self._by_ctx: dict[tuple, tuple] = {}
        self._loops: dict[int, list] = {}
        self._loops_ctx: dict[tuple, list] = {}
        #: a context's facts, kept per the values of what they read (many contexts share them);
        #: the ways' conditions by the compiled model when the search used it
        compiled = space.compiled
        way_of = None if compiled is None else compiled.the_way
        self._task_facts = ByReads(lambda s, i: _task_facts(s, i, way_of))
        #: the steps of a context by the compiled model's kept enumeration (an instance without
        #: keys whose reducer is the kernel's, as the explorer's own steps)
        self._kept_steps = compiled is not None and not inst.keys and \
            interning.decide is interning.KERNEL_DECIDE

    def state(self, node: int):
        return self.space.state(self.g.nodes[node]["key"])

    def facts(self, node: int) -> tuple:
        """Per task: (settled, due kinds, owner working)."""
        f = self._facts.get(node)
        if f is None:
            key = self.g.nodes[node]["key"]
            out, s = [], None
            for i in range(self.n):
                ctx = self.space.context(key, i)
                fi = self._by_ctx.get(ctx)
                if fi is None:
                    s = s or self.space.state(key)
                    fi = self._by_ctx[ctx] = self._task_facts(s, i)
                out.append(fi)
            f = self._facts[node] = tuple(out)
        return f

    def due_loops(self, node: int) -> list:
        """The due actions taken in ``node`` that lead back to it (no change, or a rejection):
        the explorer leaves such steps out of its graph."""
        out = self._loops.get(node)
        if out is None:
            out = self._loops[node] = []
            if not self.g.nodes[node].get("expanded"):
                return out
            key = self.g.nodes[node]["key"]
            for i, (_, kinds, _) in enumerate(self.facts(node)):
                if kinds:
                    out += [(i, r) for r in self._task_loops(key, i, kinds)]
        return out

    def _task_loops(self, key: tuple, i: int, kinds: frozenset) -> list:
        ctx = self.space.context(key, i)
        out = self._loops_ctx.get(ctx)
        if out is None:
            out = self._loops_ctx[ctx] = []
            s = self.space.state(key)
            if self._kept_steps:
                c = self.space.compiled
                for kind, step, _, entry in c.steps_of(self.inst, s, i, task_steps, label):
                    if kind is _REQUEST and step.kind in kinds and not _intruder(step):
                        s2 = c.next_state(s, step, entry)
                        if s2 is s or s2 == s:
                            out.append(step)
                return out
            for step in task_steps(self.inst, s, i):
                if isinstance(step, Request) and step.kind in kinds and not _intruder(step):
                    d, s2, r = successor(self.inst, s, step, self.rules,
                                         compiled=self.space.compiled)
                    if s2 is not None and (s2 is s or s2 == s):
                        out.append(r)
        return out

    def discharges(self, u: int, v: int, j: int) -> Any:
        """A step from ``u`` to ``v`` that takes task ``j``'s due action, or None."""
        kinds = self.facts(u)[j][1]
        if not kinds:
            return None
        return _discharge(self.g._succ[u][v]["steps"], self.space.graph.tasks[j], kinds)


def _discharge(steps: list, name: str, kinds: frozenset) -> Any:
    """The first of an edge's ``steps`` that takes task ``name``'s due action (of ``kinds``)."""
    for step in steps:
        if isinstance(step, Request) and step.task == name and step.kind in kinds \
                and not _intruder(step):
            return step
    return None


def _fairness(G: _Graph, comp: set[int]) -> tuple[bool, list, list]:
    """Whether ``comp`` admits a fair run; the discharge steps ``(u, v, step)`` and the
    witness states (a condition false there) a fair cycle must take or visit."""
    takes, visits = [], []
    for j in range(G.n):
        for a in ("due", "working"):
            col = 1 if a == "due" else 2
            off = next((u for u in comp if not G.facts(u)[j][col]), None)
            if off is not None:
                visits.append(off)
                continue
            if a == "working":
                return False, [], []
            hit = next(((u, u, r) for u in comp for i, r in G.due_loops(u) if i == j), None)
            if hit is None:
                hit = next(((u, v, st) for u in comp for v in G.g.successors(u)
                            if v in comp and (st := G.discharges(u, v, j)) is not None), None)
            if hit is None:
                return False, [], []
            takes.append(hit)
    return True, takes, visits


def _edge_step(G: _Graph, u: int, v: int) -> Any:
    return G.g.edges[u, v]["steps"][0]


def _cycle(G: _Graph, comp: set[int], start: int, takes: list, visits: list) -> list:
    """Steps of a cycle from ``start`` through every discharge and witness state, back."""
    sub = G.g.subgraph(comp)
    out, here = [], start

    def walk(to: int) -> None:
        nonlocal here
        path = nx.shortest_path(sub, here, to)
        out.extend(_edge_step(G, a, b) for a, b in zip(path, path[1:]))
        here = to
    for u, v, step in takes:
        walk(u)
        out.append(step)
        here = v
    for w in visits:
        walk(w)
    if not out or here != start:
        if here == start:       # a stuttering state: the cycle is one step that changes nothing
            return out
        walk(start)
    return out


def strongly_connected(succ: dict, nodes: list[int], total: int):
    """``networkx.strongly_connected_components(G.subgraph(nodes))`` of the graph whose successor
    dicts are ``succ`` (``total`` nodes), on the plain dicts: the same components, as sets built
    in the same order (networkx's nonrecursive Tarjan with Nuutila's changes, the subgraph
    view's order: its nodes as the set of ``nodes`` when that is under half the graph, else the
    graph's order; each node's successors in the graph's order, those in the set)."""
    inside = set(n for n in nodes if n in succ)
    order = inside if 2 * len(inside) < total else [n for n in succ if n in inside]
    adj = {v: [w for w in succ[v] if w in inside] for v in order}
    preorder: dict = {}
    lowlink: dict = {}
    scc_found: set = set()
    scc_queue: list = []
    i = 0
    neighbors = {v: iter(adj[v]) for v in order}
    for source in order:
        if source in scc_found:
            continue
        queue = [source]
        while queue:
            v = queue[-1]
            if v not in preorder:
                i += 1
                preorder[v] = i
            done = True
            for w in neighbors[v]:
                if w not in preorder:
                    queue.append(w)
                    done = False
                    break
            if done:
                low = preorder[v]
                pv = low
                for w in adj[v]:
                    if w not in scc_found:
                        pw = preorder[w]
                        if pw > pv:
                            lw = lowlink[w]
                            if lw < low:
                                low = lw
                        elif pw < low:
                            low = pw
                lowlink[v] = low
                queue.pop()
                if low == pv:
                    scc = {v}
                    while scc_queue and preorder[scc_queue[-1]] > pv:
                        scc.add(scc_queue.pop())
                    scc_found.update(scc)
                    yield scc
                else:
                    scc_queue.append(v)


def _components(G: _Graph, nodes: list[int], loops: Callable[[int], bool]) -> list[set[int]]:
    """Components of the subgraph on ``nodes`` that an infinite run can stay in (found on the
    plain adjacency, ``strongly_connected``)."""
    succ = G.g._succ
    out = []
    for comp in strongly_connected(succ, nodes, len(succ)):
        if len(comp) > 1:
            out.append(comp)
            continue
        (u,) = comp
        if u in succ[u] or loops(u) or (not succ[u] and G.g.nodes[u].get("expanded")):
            out.append(comp)
    return out


def _lasso(G: _Graph, prop, task: str | None, comp: set[int], takes, visits,
           prefix: Callable[[tuple], tuple]) -> Lasso:
    start = min(comp)                       # the first state the breadth-first search met
    labels, objs = prefix(G.g.nodes[start]["key"])
    cyc = _cycle(G, comp, start, takes, visits)
    return Lasso(prop.id, prop.doc, task, labels, [label(st) for st in cyc], objs, cyc)


def _settles(G: _Graph, prop, prefix) -> tuple[list[Lasso], int]:
    """Per task, the fair component the search met first (the shortest prefix)."""
    out, seen = [], 0
    for i in range(G.n):
        nodes = [u for u in G.g.nodes if not G.facts(u)[i][0]]
        best = None
        for comp in _components(G, nodes, lambda u: bool(G.due_loops(u))):
            seen += 1
            fair, takes, visits = _fairness(G, comp)
            if fair and (best is None or min(comp) < min(best[0])):
                best = (comp, takes, visits)
        if best is not None:
            comp, takes, visits = best
            out.append(_lasso(G, prop, G.state(min(comp)).graph.tasks[i], comp, takes,
                              visits, prefix))
    return out, seen


def _progress(G: _Graph, prop, prefix) -> tuple[list[Lasso], int]:
    """Cycles made of due actions only (including a due action that changes nothing)."""
    h = nx.DiGraph()
    names = G.space.graph.tasks
    # the edges in the graph's order, asked only of a state where some task has a due action
    # (``discharges`` is None for every other)
    for u, out in G.g._succ.items():
        if not out:
            continue
        due = [(names[j], f[1]) for j, f in enumerate(G.facts(u)) if f[1]]
        if not due:
            continue
        for v, data in out.items():
            steps = data["steps"]
            if any(_discharge(steps, name, kinds) is not None for name, kinds in due):
                h.add_edge(u, v)
    for u in G.g.nodes:
        if G.due_loops(u):
            h.add_edge(u, u)
    comps = [c for c in nx.strongly_connected_components(h)
             if len(c) > 1 or h.has_edge(next(iter(c)), next(iter(c)))]
    if not comps:
        return [], len(comps)
    comp = min(comps, key=min)
    start = min(comp)
    labels, objs = prefix(G.g.nodes[start]["key"])
    if len(comp) == 1:
        i, r = G.due_loops(start)[0]
        cyc = [r]
    else:
        path = nx.find_cycle(h.subgraph(comp), start)
        cyc = [next(st for j in range(G.n) if (st := G.discharges(a, b, j)) is not None)
               for a, b in path]
    return [Lasso(prop.id, prop.doc, None, labels, [label(st) for st in cyc], objs, cyc)], 1


def check_liveness(graph: nx.DiGraph, space, prefix: Callable[[tuple], tuple],
                   inst: Instance, rules: Rules) -> LivenessResult:
    """Check every ``eventually`` property of the registry on a complete explored graph
    (``space``: the explorer's interned states, ``prefix``: the shortest path to a key)."""
    G = _Graph(graph, space, inst, rules)
    found, seen = [], 0
    for prop in eventually():
        check = _settles if prop.scope == "state" else _progress
        lassos, n = check(G, prop, prefix)
        found += lassos
        seen += n
    return LivenessResult([p.id for p in eventually()], [p.id for p in fairness()],
                          found, seen)


def lasso_run(inst: Instance, rules: Rules, lasso: Lasso, command: str):
    """The lasso as a replayable run (``wgk.conformance.traces.export.ModelRun``): the
    prefix, then the cycle once; the description says where the cycle starts and the
    provenance is the one command that finds it again."""
    from wgk.conformance.traces.export import ModelRun
    s = inst.initial()
    states, steps, decisions = [s], [], []
    for step in lasso.prefix_steps + lasso.cycle_steps:
        d, s2, r = successor(inst, s, step, rules)
        if s2 is None:
            raise ValueError(f"the lasso's step {label(step)} is not enabled on replay")
        steps.append(r if r is not None else step)
        decisions.append(d)
        states.append(s2)
        s = s2
    k = len(lasso.prefix_steps)
    who = f" for {lasso.task}" if lasso.task else ""
    return ModelRun(
        id=f"lasso-{lasso.property}" + (f"-{lasso.task}" if lasso.task else ""),
        title=f"{lasso.property} violated{who}: a fair cycle without progress",
        description=(f"{lasso.doc} Lasso: steps 1-{k} are the prefix, steps {k + 1}-{len(steps)} "
                     f"the cycle, which repeats forever under the fairness assumptions."),
        states=states, steps=steps, decisions=decisions, provenance=command)
