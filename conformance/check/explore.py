"""Breadth-first explicit-state exploration of a bounded instance.

The instance fixes the graph (a chain of ``tasks``), bounds on attempts per
generation and on generations, and which groups of requests are enabled. Every
request is issued by a well-behaved actor carrying the current K and the
current phase/revision, plus a few deliberately stale or mismatched ones so
that the rejection paths are exercised too. Contents, pids and birth times are
chosen deterministically from the task, generation and attempt so that the
state space stays finite.

The result carries the distinct-state count, the first (hence shortest)
violation path of every invariant that fails, the ``sometimes`` properties
reached, and optionally the state graph (networkx) for Graphviz export.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import networkx as nx

from wgk.model.env import EnvKind, EnvStep, guard_and_update
from wgk.model.invariants import REGISTRY, Property
from wgk.model.kernel import Decision, Rules, decide
from wgk.model.requests import Capability, Owner, Request
from wgk.model.rules import RULES, graph_saved
from wgk.model.state import Graph, State, initial_state
from wgk.model.vocab import (
    Actor, AttemptState, Disposition, Exit, Kind, Phase, Reason, Verdict, EDGES,
)

GROUPS = ("core", "evidence", "review", "operator", "legacy", "env")
FOREIGN_COMMIT = 2
INITIAL_TARGET = 1


@dataclass(frozen=True)
class Instance:
    """A bounded instance of the model to explore."""

    tasks: int = 2
    attempts: int = 1          # attempts per generation
    generations: int = 1       # generations per task (1 = no reset)
    groups: tuple[str, ...] = ("core", "env")
    keys: bool = False         # send idempotency keys (explores the journal)
    review: bool = False       # tasks require a FLIP review
    versions: int = 1          # candidate versions per attempt (1 = no revise)
    rejections: bool = False   # also send edges whose source phase does not match

    detours: int = 1           # side-exit round trips per transaction (upgrade block)

    def within(self, s: State) -> bool:
        """State constraint (as TLC's CONSTRAINT): states beyond it are not expanded."""
        return all(self.task_within(t) for t in s.tasks)

    def task_within(self, t) -> bool:
        """Along the main line a transaction's revision equals its phase index; each
        side-exit round trip adds two, each revision of the candidate at most 12."""
        slack = 2 * self.detours + 12 * (self.versions - 1)
        return t.version <= self.versions and t.revision <= t.phase + slack

    def graph(self) -> Graph:
        names = [f"t{n + 1}" for n in range(self.tasks)]
        deps = {names[n]: [names[n - 1]] for n in range(1, self.tasks)}
        return Graph.build(names, deps, graph_id="g",
                           review_required=names if self.review else (),
                           requires_assignment=names[:1] if "legacy" in self.groups else ())

    def initial(self) -> State:
        return initial_state(self.graph(), target=INITIAL_TARGET)

    def describe(self) -> dict:
        return {"tasks": self.tasks, "attempts": self.attempts, "generations": self.generations,
                "groups": list(self.groups), "keys": self.keys, "review": self.review}


Step = Request | EnvStep


def content(i: int, t) -> int:
    """The bytes the owner of task ``i`` writes next (deterministic, unique)."""
    return 1000 * (i + 1) + 100 * t.generation + 10 * t.attempt + t.version + 3


def owner_for(i: int, generation: int, attempt: int, epoch: int = 1) -> Owner:
    pid = 100 * (i + 1) + 10 * generation + attempt
    return Owner(pid=pid, birth=pid * 10 + epoch, session=pid, wrapper_epoch=epoch, child_epoch=epoch)


def requests_for(inst: Instance, s: State, i: int) -> Iterator[Request]:
    """The request instances the bounded actors may send for task ``i`` in state ``s``."""
    g = s.graph
    name = g.tasks[i]
    t = s.tasks[i]
    groups = inst.groups
    cap = Capability(g.graph_id, name, t.generation, t.attempt, t.fence, t.lease_epoch)
    stale = Capability(g.graph_id, name, t.generation, max(t.attempt - 1, 0), max(t.fence - 1, 0),
                       max(t.lease_epoch - 1, 0))
    exp = Exit(t.exit) if t.exit != Exit.NONE else Phase(t.phase)
    rev = t.revision

    def tx(kind: Kind, actor: Actor, **kw: Any) -> Request | None:
        if not inst.rejections and kind in EDGES and (
                t.exit != Exit.NONE or t.phase not in EDGES[kind][0]):
            return None
        return Request(kind, actor, name, cap=kw.pop("cap", cap), expected_phase=exp,
                       expected_revision=rev, **kw)

    if t.attempt < inst.attempts:
        nxt = owner_for(i, t.generation, t.attempt + 1)
        yield Request(Kind.DISPATCH, Actor.DAEMON, name, expected_attempt=t.attempt, owner=nxt)
        if t.retained:
            yield Request(Kind.DISPATCH, Actor.DAEMON, name, expected_attempt=t.attempt, owner=nxt,
                          imports=t.retained)
        if "operator" in groups:
            yield Request(Kind.RETRY, Actor.OPERATOR, name, expected_attempt=t.attempt, owner=nxt)
    if t.attempt_state == 0:
        return
    yield Request(Kind.FAIL, Actor.WORKER, name, cap=cap, evidence="fail")
    if "evidence" in groups:
        yield Request(Kind.MESSAGE, Actor.OPERATOR, name, evidence="m1")
    if t.attempt_state != AttemptState.RUNNING:
        return  # a closed attempt only hears late reports and messages
    if t.wrapper_epoch < 2:
        yield Request(Kind.RESUME, Actor.WRAPPER, name, cap=cap,
                      owner=owner_for(i, t.generation, t.attempt, t.wrapper_epoch + 1))
    yield Request(Kind.PROBE_OWNER, Actor.PROCESS_OBSERVER, name, cap=cap, evidence="probe")
    yield Request(Kind.DECLARE_LOST, Actor.DAEMON, name, cap=cap)
    if "evidence" in groups:
        yield Request(Kind.HEARTBEAT_TIMEOUT, Actor.DAEMON, name, cap=cap, evidence="hb")
        yield Request(Kind.COMPACTION, Actor.WRAPPER, name, cap=cap, evidence="c1")
        yield Request(Kind.ACK_CONTINUATION, Actor.WRAPPER, name, cap=cap, evidence="c1")
        yield Request(Kind.FAIL, Actor.WORKER, name, cap=stale, evidence="stale")
    yield tx(Kind.SUBMIT, Actor.WORKER)
    yield tx(Kind.QUIESCE, Actor.WRAPPER)
    yield tx(Kind.SAVE_WORK, Actor.WRAPPER, candidate=t.worktree, base=t.origin)
    yield tx(Kind.SEAL_CANDIDATE, Actor.DAEMON, candidate=t.candidate)
    yield tx(Kind.VALIDATE, Actor.VALIDATOR, candidate=t.candidate, verdict=Verdict.PASS)
    yield tx(Kind.VALIDATE, Actor.VALIDATOR, candidate=t.candidate, verdict=Verdict.FAIL)
    if g.review_required[i]:
        yield tx(Kind.REQUEST_REVIEW, Actor.DAEMON)
        yield tx(Kind.ACCEPT, Actor.EVALUATOR, candidate=t.candidate, verdict=Verdict.PASS)
        yield tx(Kind.ACCEPT, Actor.EVALUATOR, candidate=t.candidate, verdict=Verdict.FAIL)
    else:
        yield tx(Kind.ACCEPT, Actor.DAEMON, candidate=t.candidate, verdict=Verdict.NOT_REQUIRED)
    yield tx(Kind.RECORD_DISPOSITION, Actor.WRAPPER, disposition=Disposition.LAND)
    yield tx(Kind.PREPARE_EFFECT, Actor.PROMOTER)
    yield tx(Kind.COMMIT_EFFECT, Actor.PROMOTER, candidate=t.candidate, base=t.base)
    yield tx(Kind.MARK_REPAIR, Actor.DAEMON)
    yield tx(Kind.PREPARE_CLEANUP, Actor.CLEANUP)
    yield tx(Kind.COMMIT_CLEANUP, Actor.CLEANUP)
    yield tx(Kind.SAVE_GRAPH, Actor.DAEMON)
    if t.version < inst.versions:
        yield tx(Kind.REVISE, Actor.WORKER, candidate=t.worktree, base=s.target)
    if "operator" in groups:
        if t.generation + 1 < inst.generations:
            yield Request(Kind.RESET, Actor.OPERATOR, name, expected_generation=t.generation)
        yield Request(Kind.ABANDON, Actor.OPERATOR, name)
        yield Request(Kind.RECONCILE, Actor.OPERATOR, name)
        yield tx(Kind.BLOCK_UPGRADE, Actor.DAEMON, reason=Reason.VERSION_SKEW)


def legacy_requests(inst: Instance, s: State, i: int) -> Iterator[Request]:
    g = s.graph
    name = g.tasks[i]
    if g.requires_assignment[i]:
        yield Request(Kind.ASSIGN, Actor.DAEMON, name)
    yield Request(Kind.LEGACY_DONE, Actor.LEGACY_IMPORT, name, evidence="legacy")
    yield Request(Kind.RECONCILE, Actor.OPERATOR, name)
    yield Request(Kind.RECONSTRUCT, Actor.OPERATOR, name, candidate=s.target, base=INITIAL_TARGET)


def env_steps(inst: Instance, s: State, i: int) -> Iterator[EnvStep]:
    name = s.graph.tasks[i]
    t = s.tasks[i]
    if t.attempt_state != AttemptState.RUNNING:
        return
    yield EnvStep(EnvKind.EDIT, name, content=content(i, t))
    yield EnvStep(EnvKind.OWNER_DIES, name)
    yield EnvStep(EnvKind.PID_REUSE, name, birth=9)


def task_steps(inst: Instance, s: State, i: int) -> Iterator[Step]:
    """Steps that read and change task ``i`` only (plus the target and the clock)."""
    if "legacy" in inst.groups:
        yield from legacy_requests(inst, s, i)
    yield from (r for r in requests_for(inst, s, i) if r is not None)
    if "env" in inst.groups:
        yield from env_steps(inst, s, i)


def global_steps(inst: Instance, s: State) -> Iterator[EnvStep]:
    """Environment steps that change no task."""
    if "env" in inst.groups and s.target != FOREIGN_COMMIT:
        yield EnvStep(EnvKind.MOVE_TARGET, content=FOREIGN_COMMIT)


def steps(inst: Instance, s: State) -> Iterator[Step]:
    for i in range(len(s.tasks)):
        yield from task_steps(inst, s, i)
    yield from global_steps(inst, s)


def label(step: Step) -> str:
    if isinstance(step, EnvStep):
        extra = f"={step.content}" if step.kind in (EnvKind.EDIT, EnvKind.MOVE_TARGET) else ""
        return f"env:{step.kind.label}({step.task}{extra})"
    extra = ""
    if step.verdict is not None:
        extra = f",{step.verdict.label}"
    if step.imports:
        extra += ",import"
    if step.cap is not None and step.cap.fence != 0 and step.evidence == "stale":
        extra += ",stale"
    return f"{step.kind.label}({step.task}{extra})"


def successor(inst: Instance, s: State, step: Step, rules: Rules, keyed: int = 0
              ) -> tuple[Decision | None, State | None, Request | None]:
    """Apply one step. Env steps that are not enabled give ``(None, None, None)``."""
    if isinstance(step, EnvStep):
        ok, update = guard_and_update(s, step)
        return (None, update(), None) if ok is True else (None, None, None)
    r = step
    if inst.keys:
        from dataclasses import replace
        r = replace(r, key=label(r))
    d, s2 = decide(s, r, rules)
    return d, s2, r


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


class Interner:
    """Interned task states and journals: a global state is the small tuple
    ``key = (task ids..., target, now, journal id)`` (shared by the explorer and
    the simulator)."""

    def __init__(self, inst: Instance, rules: Rules):
        s0 = inst.initial()
        self.inst = inst
        self.rules = rules
        self.global_cache: dict = {}
        self.graph = s0.graph
        self.n = len(s0.tasks)
        self.task_of: list = []
        self.tid: dict = {}
        self.flags: list = []          # per task id: (Done by GraphSave, abandoned)
        self.journal_of: list = []
        self.jid: dict = {}
        self.key0 = tuple(self.intern(t) for t in s0.tasks) + (s0.target, s0.now,
                                                                 self.intern_journal(s0.journal))

    def intern(self, t) -> int:
        n = self.tid.get(t)
        if n is None:
            n = self.tid[t] = len(self.task_of)
            self.task_of.append(t)
            self.flags.append((graph_saved(t) is True, t.abandoned is True))
            self.interned(t)
        return n

    def interned(self, t) -> None:
        """Called once for every new task state."""

    def intern_journal(self, j) -> int:
        n = self.jid.get(j)
        if n is None:
            n = self.jid[j] = len(self.journal_of)
            self.journal_of.append(j)
        return n

    def state(self, key: tuple) -> State:
        n = self.n
        return State(graph=self.graph, tasks=tuple(self.task_of[k] for k in key[:n]),
                     target=key[n], now=key[n + 1], journal=self.journal_of[key[n + 2]])

    def global_successors(self, key: tuple) -> list:
        """Environment steps that change no task depend on the target and clock only."""
        n = self.n
        ctx = (key[n], key[n + 1])
        out = self.global_cache.get(ctx)
        if out is None:
            s = self.state(key)
            out = []
            for step in global_steps(self.inst, s):
                _, s2, _ = successor(self.inst, s, step, self.rules)
                if s2 is not None:
                    out.append((s2.target, s2.now, label(step), step))
            self.global_cache[ctx] = out
        return out

    def context(self, key: tuple, i: int) -> tuple:
        """Task ``i``'s local context: its state, its dependencies' flags and the globals."""
        n = self.n
        flags = self.flags
        return (i, key[i], tuple([flags[key[d]] for d in self.graph.deps[i]]),
                key[n], key[n + 1], key[n + 2])


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
