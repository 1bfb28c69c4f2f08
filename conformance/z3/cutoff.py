"""The conditions of the cutoff theorem, checked with z3 on the model's own code.

Every rule declares what it reads (``@rule(..., reads=...)``, ``wgk.model.ruleset.READS``);
the kernel's generic checks read the task itself and the request's own journal entry.
``check_locality`` verifies, for every transition template of the cutoff graph, that

- two symbolic pre-states that agree on the declared reads (and differ arbitrarily
  elsewhere: other tasks, other tasks' policy, evidence of other ids, journal entries of
  other keys, undeclared globals) give the same guard, decision and post-state of the
  task, the globals and the request's journal entry (the rule reads no more than it
  declares), and
- the step changes only its own task, only ``target`` among the globals when it declares
  so, and only its own key's journal entry (it writes no more than it declares);

and, for every state property (invariant or lemma), that it is a function of its task,
that task's policy, the two dependency summaries "all dependencies Done" and "some
dependency abandoned", and the globals ``target``/``now`` (never the journal); and for
every step property, that it reads no more than the step's own reads.

A rule that reads or writes more than it declares is named with the template that shows
it (and the refusal is what ``wgk prove --unbounded`` reports).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

import z3

from wgk.model.env import EnvKind
from wgk.model.invariants import REGISTRY, Property
from wgk.model.predicates import committed, graph_saved
from wgk.model.ruleset import READS, TOUCHES
from wgk.model.state import Graph, State
from wgk.model.vocab import DecisionKind, Kind

from wgk.conformance.z3.lemmas import LEMMAS
from wgk.conformance.z3.symbolic import (
    Space, as_bool, fresh_state, leaves, symbolic, symbolic_graph, task_leaves,
)
from wgk.conformance.z3.sym_backend import BACKEND
from wgk.conformance.z3.catalogue import POOL, Catalogue, Pool, env_templates, request_templates
from wgk.conformance.z3.transition import MODEL, Semantics, actor_sensitive, as_term, branches, \
    discover_universe

#: The cutoff graph: t2 has one dependency (t1), t3 two (t2, t4), t6 one (t5) and is
#: unrelated to t2 and t3. Every way a step on one task can affect a property of one task
#: (the same task, a dependent, an unrelated task) has a representative here.
CUTOFF_DEPS: tuple[tuple[int, ...], ...] = ((), (0,), (1, 3), (), (), (4,))
#: The task whose templates the locality check runs: two dependencies (t2, t4), and three
#: tasks (t1, t5, t6) that are not among them.
LOCALITY_TASKS = ("t3",)

#: What the kernel's generic checks (journal, authority, capability) read of every request.
KERNEL_READS = frozenset({"self", "journal"})
#: What each environment step reads (they are not rules; env.py is their one definition).
ENV_READS: dict[EnvKind, frozenset[str]] = {
    EnvKind.EDIT: frozenset({"self", "target"}), EnvKind.OWNER_DIES: frozenset({"self"}),
    EnvKind.PID_REUSE: frozenset({"self"}), EnvKind.MOVE_TARGET: frozenset({"target"}),
    EnvKind.TICK: frozenset({"now"}), EnvKind.CRASH: frozenset(), EnvKind.LOST_RESPONSE: frozenset(),
}
#: What every state property may read: its task (all evidence), its dependency summaries
#: and the globals other than the journal.
PROPERTY_READS = frozenset({"self", "self.evidence", "deps.done", "deps.abandoned",
                            "deps.generation", "target", "now"})


@dataclass
class Finding:
    """One verified (or refused) locality condition."""

    subject: str          # "rule:<fn>", "env:<kind>", "property:<id>"
    kind: str             # "reads" | "writes" | "declares"
    ok: bool
    detail: str = ""
    seconds: float = 0.0

    def to_json(self) -> dict:
        return {"subject": self.subject, "kind": self.kind, "ok": self.ok, "detail": self.detail}


class Twin:
    """Two symbolic pre-states of the cutoff graph, each step evaluated on both."""

    def __init__(self, sem: Semantics = MODEL, ids: tuple[str, ...] = ("e1", "e2"), nkeys: int = 2,
                 tasks: tuple[str, ...] = LOCALITY_TASKS, kinds: list[Kind] | None = None,
                 env: bool = True):
        names = tuple(f"t{n + 1}" for n in range(len(CUTOFF_DEPS)))
        ga = symbolic_graph(names, CUTOFF_DEPS)
        gb = Graph(graph_id=ga.graph_id, tasks=names, deps=CUTOFF_DEPS,
                   review_required=tuple(z3.Bool(f"policyB.{n}.review") for n in names),
                   requires_assignment=tuple(z3.Bool(f"policyB.{n}.assignment") for n in names),
                   retry_budget=tuple(z3.Int(f"policyB.{n}.budget") for n in names),
                   index=dict(ga.index), protected=ga.protected)
        self.sem = sem
        templates = request_templates(list(Kind) if kinds is None else kinds, list(tasks), ids,
                                      by_actor=actor_sensitive(ga, sem))
        self.cat = Catalogue(templates + (env_templates(tasks) if env else []), ga.graph_id)
        universe = discover_universe(ga, ids, sem)
        keys = tuple(f"k{n + 1}" for n in range(nkeys))
        self.space = Space(ga, universe, keys, len(POOL), len(self.cat.shapes), self.cat.decode_digest)
        self.a = fresh_state(self.space, "a")
        self.b = replace(fresh_state(self.space, "b"), graph=gb)
        self.pool = Pool("r", nkeys)
        self.ba = branches(self.cat, self.a, self.pool, sem)
        self.bb = branches(self.cat, self.b, self.pool, sem)
        self.solver = z3.SimpleSolver()
        self.solver.set("timeout", 60_000)
        self.solver.add(*self.pool.domain())

    # -- sharing the declared reads ------------------------------------------------

    def share(self, i: int | None, reads: frozenset[str], ev_id: str = "") -> list:
        """Constraints making the two pre-states agree on ``reads`` of task ``i``."""
        a, b, g = self.a, self.b, self.space.graph
        out: list = []
        if i is not None and ("self" in reads or "self.evidence" in reads):
            ta, tb = a.tasks[i], b.tasks[i]
            n_ev = len(self.space.universe)
            la, lb = task_leaves(self.space, ta), task_leaves(self.space, tb)
            out += [x == y for x, y in zip(la[:len(la) - n_ev], lb[:len(lb) - n_ev])]
            for p in self.space.universe:
                if "self.evidence" in reads or p[1] == ev_id:
                    out.append(ta.evidence.bits[p] == tb.evidence.bits[p])
            out += [g.review_required[i] == b.graph.review_required[i],
                    g.requires_assignment[i] == b.graph.requires_assignment[i],
                    g.retry_budget[i] == b.graph.retry_budget[i]]
        if i is not None and "deps.done" in reads:
            out.append(_all([graph_saved(a.tasks[d]) for d in g.deps[i]])
                       == _all([graph_saved(b.tasks[d]) for d in g.deps[i]]))
        if i is not None and "deps.generation" in reads:
            out.append(sum((a.tasks[d].generation for d in g.deps[i]), 0)
                       == sum((b.tasks[d].generation for d in g.deps[i]), 0))
        if i is not None and "dependents.committed" in reads:
            out.append(_any([committed(a.tasks[j]) for j in _dependents(g, i)])
                       == _any([committed(b.tasks[j]) for j in _dependents(g, i)]))
        if i is not None and "deps.abandoned" in reads:
            out.append(_any([a.tasks[d].abandoned for d in g.deps[i]])
                       == _any([b.tasks[d].abandoned for d in g.deps[i]]))
        for name in ("target", "now"):
            if name in reads:
                out.append(getattr(a, name) == getattr(b, name))
        if "journal" in reads and self.pool.key is not None:
            for k, (ea, eb) in enumerate(zip(a.journal.entries, b.journal.entries)):
                same = [as_term(x) == as_term(y) for x, y in zip(_entry(ea), _entry(eb))]
                out.append(z3.Implies(self.pool.key == k, z3.And(same)))
        return [as_bool(x) for x in out if x is not True]

    def refuted(self, assumptions: list, bad: Any) -> bool:
        """True when ``assumptions`` and ``bad`` are satisfiable together (unknown counts too)."""
        self.solver.push()
        try:
            self.solver.add(*assumptions, as_bool(bad))
            return self.solver.check() != z3.unsat
        finally:
            self.solver.pop()


def _dependents(g: Graph, i: int) -> list[int]:
    return [j for j, deps in enumerate(g.deps) if i in deps]


def _and(xs: list) -> Any:
    """``z3.And(xs)``, the very term, built with z3's C API (``BACKEND.and_``) without z3py's
    coercion of every operand, most of building the conditions' goals."""
    return BACKEND.and_([as_bool(x) for x in xs])


def _all(xs: list) -> Any:
    return _and(xs) if xs else z3.BoolVal(True)


def _any(xs: list) -> Any:
    return z3.Or([as_bool(x) for x in xs]) if xs else z3.BoolVal(False)


def _entry(e) -> list:
    return [e.used, e.shape, *e.slots, e.kind, e.code]


def _eq(xs: list, ys: list) -> Any:
    return _and([as_term(x) == as_term(y) for x, y in zip(xs, ys, strict=True)] or [True])


def _decision(d) -> list:
    return [] if d is None else [d.kind, d.code, d.original_kind, d.original_code]


def _own_evidence(tw: Twin, t, reads: frozenset[str], ev_id: str, own: bool) -> list:
    """The task's evidence bits of the request's own id (``own``), or of every other id."""
    every = "self.evidence" in reads
    return [t.evidence.bits[p] for p in tw.space.universe if (every or p[1] == ev_id) == own]


def _outcome(tw: Twin, post: State, i: int | None, reads: frozenset[str], writes: frozenset[str],
             ev_id: str) -> list:
    """What a step decides from its reads: its task, the globals it reads or writes and the
    request's journal entry."""
    out: list = []
    if i is not None and "self" in reads:
        n_ev = len(tw.space.universe)
        lv = task_leaves(tw.space, post.tasks[i])
        out += lv[:len(lv) - n_ev] + _own_evidence(tw, post.tasks[i], reads, ev_id, True)
    out += [getattr(post, g) for g in ("target", "now") if g in reads or g in writes]
    if tw.pool.key is not None and "journal" in reads:
        for k, e in enumerate(post.journal.entries):
            key_is = tw.pool.key == k
            out += [_when(key_is, as_term(x)) for x in _entry(e)]
    return out


def _when(c: Any, t: Any) -> Any:
    """``z3.If(c, t, False or 0)``, the very term, built with z3's C API (``BACKEND.ite``)."""
    return BACKEND.ite(c, t, False if z3.is_bool(t) else 0)


def _writes_beyond(tw: Twin, s: State, post: State, i: int | None, step_kind: Any,
                   reads: frozenset[str], ev_id: str) -> Any:
    """A term true when ``post`` differs from ``s`` outside what the step may write."""
    same = []
    if i is not None:
        same.append(_eq(_own_evidence(tw, s.tasks[i], reads, ev_id, False),
                        _own_evidence(tw, post.tasks[i], reads, ev_id, False)))
    for j, (t, t2) in enumerate(zip(s.tasks, post.tasks)):
        if j != i and t2 is not t:
            same.append(_eq(task_leaves(tw.space, t), task_leaves(tw.space, t2)))
    may = TOUCHES.get(step_kind, frozenset()) if isinstance(step_kind, Kind) else frozenset()
    if "target" not in may and step_kind != EnvKind.MOVE_TARGET:
        same.append(as_term(s.target) == as_term(post.target))
    if step_kind != EnvKind.TICK:
        same.append(as_term(s.now) == as_term(post.now))
    if tw.pool.key is not None and isinstance(step_kind, Kind):
        for k, (e, e2) in enumerate(zip(s.journal.entries, post.journal.entries)):
            same.append(z3.Or(tw.pool.key == k, _eq(_entry(e), _entry(e2))))
    return z3.Not(z3.And(same)) if same else z3.BoolVal(False)


def _global_writes(tpl) -> frozenset[str]:
    """The globals a step may change: ``target`` when declared (or moved by the world), ``now``
    for a clock tick."""
    if tpl.is_env:
        return frozenset({"target"} if tpl.kind == EnvKind.MOVE_TARGET else
                         {"now"} if tpl.kind == EnvKind.TICK else ())
    return TOUCHES.get(tpl.kind, frozenset()) & {"target"}


def _subject(tw: Twin, tpl) -> str:
    return f"env:{tpl.kind.label}" if tpl.is_env else f"rule:{tw.sem.rules[tpl.kind].__name__}"


def _reads(tpl) -> frozenset[str] | None:
    if tpl.is_env:
        return ENV_READS[tpl.kind]
    declared = READS.get(tpl.kind)
    return None if declared is None else declared | KERNEL_READS


def _step_goals(tw: Twin, ba, bb) -> tuple[Any, Any]:
    """(bad read, bad write) of one template, each with its sharing assumptions."""
    tpl = ba.template
    reads = _reads(tpl)
    i = tw.space.graph.index.get(tpl.task) if tpl.task else None
    ev = getattr(tpl, "evidence", "")
    share = tw.share(i, reads, ev)
    writes = _global_writes(tpl)
    same = _and([_eq(_decision(ba.decision), _decision(bb.decision)),
                 _eq(_outcome(tw, ba.post, i, reads, writes, ev),
                     _outcome(tw, bb.post, i, reads, writes, ev))])
    bad_read = _and([*share, z3.Or(ba.guard != bb.guard, _and([ba.guard, z3.Not(same)]))])
    bad_write = _and([ba.guard, _writes_beyond(tw, tw.a, ba.post, i, tpl.kind, reads, ev)])
    return bad_read, bad_write


def first_hit(tw: Twin, disjuncts: list[tuple[str, Any]]) -> str | None:
    """The label of a disjunct the solver can satisfy (``?`` on unknown), else None."""
    if not disjuncts:
        return None
    tw.solver.push()
    try:
        tw.solver.add(z3.Or([d for _, d in disjuncts]))
        verdict = tw.solver.check()
        if verdict == z3.unsat:
            return None
        if verdict == z3.unknown:
            return "? (the solver answered unknown)"
        m = tw.solver.model()
        return next((label for label, d in disjuncts if z3.is_true(m.eval(d, True))), "?")
    finally:
        tw.solver.pop()


def check_steps(tw: Twin, progress: Callable[[str], None] | None = None) -> list[Finding]:
    """Every rule and environment step: reads no more than declared, writes no more than
    its own task, its declared globals and its own key's journal entry."""
    groups: dict[str, list] = {}
    out: list[Finding] = []
    with symbolic(), tw.sem.active():
        for ba, bb in zip(tw.ba, tw.bb, strict=True):
            groups.setdefault(_subject(tw, ba.template), []).append((ba, bb))
        for subject, pairs in groups.items():
            tpl = pairs[0][0].template
            if _reads(tpl) is None:
                out.append(Finding(subject, "declares", False, f"{tpl.kind.label} declares no reads"))
                continue
            goals = [(ba.template.label, _step_goals(tw, ba, bb)) for ba, bb in pairs]
            reads = ", ".join(sorted(_reads(tpl)))
            hit = first_hit(tw, [(label, r) for label, (r, _) in goals])
            out.append(Finding(subject, "reads", hit is None, "" if hit is None else
                               f"{hit}: two states that agree on {{{reads}}} decide differently"))
            hit = first_hit(tw, [(label, w) for label, (_, w) in goals])
            out.append(Finding(subject, "writes", hit is None, "" if hit is None else
                               f"{hit}: changes another task, an undeclared global, evidence of "
                               "another id or another key's journal entry"))
            if progress:
                progress(f"locality: {subject}")
    return out


def state_properties() -> list[Property]:
    return list(LEMMAS.values()) + [p for p in REGISTRY.values()
                                    if p.kind == "always" and p.scope == "state"]


def check_state_properties(tw: Twin) -> list[Finding]:
    """Every state property at every task is a function of PROPERTY_READS of that task."""
    out = []
    with symbolic(), tw.sem.active():
        for p in state_properties():
            bad_at = []
            for name in LOCALITY_TASKS:
                m = tw.space.graph.index[name]
                pa, pb = p.holds_for(tw.a, m), p.holds_for(tw.b, m)
                if tw.refuted(tw.share(m, PROPERTY_READS), as_term(pa) != as_term(pb)):
                    bad_at.append(name)
            out.append(Finding(f"property:{p.id}", "reads", not bad_at,
                               f"reads more than its task, its dependency summaries and "
                               f"target/now (at {', '.join(bad_at)})" if bad_at else ""))
    return out


def check_step_properties(tw: Twin) -> list[Finding]:
    """Every step property reads no more than the step it judges reads."""
    out = []
    props = [p for p in REGISTRY.values() if p.kind == "always" and p.scope == "step"]
    g = tw.space.graph
    with symbolic(), tw.sem.active():
        judged = [(ba, bb) for ba, bb in zip(tw.ba, tw.bb, strict=True)
                  if not ba.template.is_env and ba.decision is not None
                  and _reads(ba.template) is not None]
        shares = [tw.share(g.index.get(ba.template.task), _reads(ba.template), ba.template.evidence)
                  for ba, _ in judged]
        for p in props:
            goals = []
            for (ba, bb), share in zip(judged, shares):
                ha = p.holds(tw.a, ba.step, ba.decision, ba.post)
                hb = p.holds(tw.b, bb.step, bb.decision, bb.post)
                if ha is hb or (isinstance(ha, bool) and isinstance(hb, bool) and ha == hb):
                    continue
                goals.append((ba.template.label,
                              _and([*share, ba.guard, as_term(ha) != as_term(hb)])))
            hit = first_hit(tw, goals)
            out.append(Finding(f"property:{p.id}", "reads", hit is None, "" if hit is None else
                               f"after {hit} it reads more than the step does"))
    return out


def reads_evidence_across_ids(tw: Twin, p: Property) -> bool:
    """The property's term mentions evidence of more than one id (it counts over ids)."""
    from wgk.conformance.z3.symbolic import free_constants
    with symbolic(), tw.sem.active():
        names = set().union(*[free_constants(p.holds_for(tw.a, m))
                              for m in range(len(tw.space.graph.tasks))])
    ids = {n.rsplit(".", 1)[1] for n in names if ".ev." in n}
    return len(ids) > 1


#: Read tokens of a summary of the task's dependents: such a summary may only refuse a step.
DEPENDENTS_READS = frozenset({"dependents.committed"})
#: The task whose dependents-reading templates are checked: t2 has a dependent (t3).
DEPENDENTS_TASK = "t2"


def check_dependents(sem: Semantics = MODEL) -> list[Finding]:
    """The rules that read a summary of their task's dependents, at a task that has one:
    they read and write no more than declared (``check_steps``), and the summary only
    refuses (a step is never applied while some dependent is committed), so a cutoff graph
    with fewer dependents allows more of them, never fewer."""
    kinds = [k for k, reads in READS.items() if reads & DEPENDENTS_READS]
    if not kinds:
        return []
    tw = Twin(sem, tasks=(DEPENDENTS_TASK,), kinds=kinds, env=False)
    out = check_steps(tw)
    g = tw.space.graph
    i = g.index[DEPENDENTS_TASK]
    with symbolic(), tw.sem.active():
        summary = _any([committed(tw.a.tasks[j]) for j in _dependents(g, i)])
        for k in kinds:
            goals = [(ba.template.label,
                      z3.And(ba.guard, summary, as_bool(ba.decision.kind == DecisionKind.APPLIED)))
                     for ba in tw.ba if ba.template.kind == k and ba.decision is not None]
            hit = first_hit(tw, goals)
            out.append(Finding(f"rule:{tw.sem.rules[k].__name__}", "refuses", hit is None,
                               "" if hit is None else
                               f"{hit}: applied while a dependent is committed"))
    return out
