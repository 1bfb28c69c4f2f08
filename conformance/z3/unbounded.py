"""Proofs for every graph: a cutoff theorem whose conditions are checked on the model's code.

**Theorem.** Suppose

1. every transition (rule or environment step) reads only its own task (its fields, its
   policy and its evidence of the request's own id), the summaries "all dependencies are
   dependency-satisfying Done" (``deps.done``) and "the sum of the dependencies'
   generations" (``deps.generation``), the globals it declares and its own key's
   journal entry; and writes only its own task (evidence of its own id), the globals it
   declares and its own key's journal entry (``cutoff.check_steps``); a rule may also read
   the summary "some dependent is committed" (``dependents.committed``, the reopen) only to
   refuse: never applied while it holds (``cutoff.check_dependents``, at t2, which has a
   dependent);
2. every state property (invariant or lemma) at a task ``m`` is a function of ``m``'s
   fields and policy, the summaries ``deps.done``, ``deps.generation`` and "some
   dependency is abandoned" (``deps.abandoned``) of ``m``, and ``target``/``now`` — never
   the journal (``cutoff.check_state_properties``); every step property reads no more than
   the step it judges (``cutoff.check_step_properties``);
3. three padding tasks, each at any generation, satisfy every state property whatever the
   globals and the dependency summaries: an open task (not Done, not abandoned), a Done
   task and an abandoned task; and no task satisfying the properties is both Done and
   abandoned (``check_padding``);

then every frame "property P at task m after a step on task i" of any graph, with any
number of idempotency keys, is an instance of a frame of the cutoff graph
``cutoff.CUTOFF_DEPS`` (t1 -> t2 -> t3 <- t4, t5 -> t6): the step only sees ``(i, its
summaries, globals, own entry)`` and P only sees ``(m, its summaries, globals)``; the
cases m = i (t2), m a dependent of i (t3, whose other dependency t4 carries the other
dependencies' summaries) and m unrelated to i (t6 against t2) have their representatives,
and the remaining tasks are filled with the padding tasks of 3, whose summaries take every
value a set of dependencies can have ((not Done, not abandoned), (Done, not abandoned),
(not Done, abandoned); (Done, abandoned) never occurs), with any sum of generations. A step
reading its dependents' summary sees in the cutoff graph only t3 (or none): in a larger
graph the other dependents can only add a refusal, so every step taken there is taken in
the cutoff graph too. So a counterexample to induction
in any graph maps to one in the cutoff graph, and the cutoff proof
(``prove.Prover(Instance.proof(tasks=6), deps=CUTOFF_DEPS)``) covers every graph.

Evidence ids: every step reads and writes only its own id (condition 1). A property that
counts recorded evidence across ids cannot be projected onto a bounded pool of ids, so the
evidence-id dimension is generalised only when no state property reads evidence of more
than one id; otherwise the report keeps the bound and names the properties that count.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import z3

from wgk.model.actions import Instance
from wgk.model.state import TaskState

from wgk.conformance.z3.cutoff import (
    CUTOFF_DEPS, Finding, Twin, check_dependents, check_state_properties, check_step_properties,
    check_steps,
    reads_evidence_across_ids, state_properties,
)
from wgk.conformance.z3.prove import DOMAIN, ProofReport, prove
from wgk.conformance.z3.symbolic import BOOL_FIELDS, INT_FIELDS, as_bool, symbolic
from wgk.conformance.z3.transition import MODEL, Semantics
from wgk.model.predicates import graph_saved

CUTOFF_INSTANCE = Instance.proof(tasks=len(CUTOFF_DEPS), evidence_ids=2, keys=1)


def _done_task() -> TaskState:
    """A Done task as the model's own ``reconstruct`` rule makes one (a proven legacy Done)."""
    from wgk.model.requests import Request
    from wgk.model.ruleset import RULES
    from wgk.model.state import Graph, initial_state
    from wgk.model.vocab import Actor, Exit, Kind
    held = TaskState(exit=Exit.NEEDS_RECONCILIATION, legacy_done=True)
    s = initial_state(Graph.build(["t"]), target=2, tasks={"t": held})
    r = Request(Kind.RECONSTRUCT, Actor.OPERATOR, "t", candidate=2, base=1)
    return RULES[Kind.RECONSTRUCT](s, 0, held, r).update().tasks[0]


#: The padding tasks and where they are placed (t1 is a root, t3 has two dependencies).
PADDING = {"open": (TaskState(), ("t1", "t3")), "done": (_done_task(), ("t1",)),
           "abandoned": (TaskState(abandoned=True), ("t1",))}


def _pin(t: TaskState, c: TaskState) -> list:
    """``t`` is the padding task ``c`` at any generation (its dependents' summary of
    generations takes every value)."""
    out = [getattr(t, f) == getattr(c, f) for f in BOOL_FIELDS + INT_FIELDS if f != "generation"]
    out.append(t.generation >= 0)
    for b, cb in zip(t.receipts, c.receipts, strict=True):
        out += [b.fence == cb.fence, b.candidate == cb.candidate, b.base == cb.base]
    out += [z3.Not(bit) for bit in t.evidence.bits.values()]
    return [as_bool(x) for x in out]


def check_padding(tw: Twin) -> list[Finding]:
    """Condition 3: the padding tasks satisfy every state property for all globals and
    summaries, and no task is both Done and abandoned."""
    out = []
    g = tw.space.graph
    props = state_properties()
    with symbolic(), tw.sem.active():
        for name, (c, places) in PADDING.items():
            bad = []
            for place in places:
                m = g.index[place]
                holds = z3.And([as_bool(p.holds_for(tw.a, m)) for p in props])
                # summaries of dependencies that are never both Done and abandoned (checked below)
                deps = [tw.a.tasks[d] for d in g.deps[m]]
                possible = z3.Not(z3.And(*[as_bool(graph_saved(d)) for d in deps],
                                         z3.Or([as_bool(d.abandoned) for d in deps])))
                if tw.refuted(_pin(tw.a.tasks[m], c) + [possible], z3.Not(holds)):
                    bad.append(place)
            out.append(Finding(f"padding:{name}", "holds", not bad,
                               f"breaks a state property at {', '.join(bad)}" if bad else ""))
        m = g.index["t3"]
        t = tw.a.tasks[m]
        both = z3.And(*[as_bool(p.holds_for(tw.a, m)) for p in props],
                      as_bool(graph_saved(t)), as_bool(t.abandoned))
        ok = not tw.refuted([], both)
        out.append(Finding("padding:done-and-abandoned", "excluded", ok,
                           "" if ok else "a task may be both Done and abandoned"))
    return out


@dataclass
class Claim:
    """What is proved of one always property."""

    property: str
    graphs: str                    # "every graph" | "not generalised"
    kind: str                      # "cutoff" | "bounded"
    evidence_ids: str              # "any number" | "up to N"
    keys: str                      # "any number" | "up to N"
    reasons: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"property": self.property, "graphs": self.graphs, "proof": self.kind,
                "evidence_ids": self.evidence_ids, "keys": self.keys, "reasons": self.reasons}


@dataclass
class UnboundedReport:
    claims: list[Claim]
    conditions: list[Finding]
    proof: ProofReport | None
    seconds: float

    @property
    def ok(self) -> bool:
        return all(c.graphs == "every graph" for c in self.claims)

    def refused(self) -> list[Finding]:
        return [f for f in self.conditions if not f.ok]

    def to_json(self) -> dict:
        return {
            "theorem": "cutoff", "cutoff_graph": [list(d) for d in CUTOFF_DEPS],
            "bounds": CUTOFF_INSTANCE.bounds_json(), "ok": self.ok,
            "claims": [c.to_json() for c in self.claims],
            "conditions": [f.to_json() for f in self.conditions],
            "refused": [f.to_json() for f in self.refused()],
            "frames": None if self.proof is None else {
                "proved": self.proof.count("proved"), "total": len(self.proof.results)},
            "seconds": round(self.seconds, 3),
        }


def conditions(sem: Semantics = MODEL, progress: Callable[[str], None] | None = None
               ) -> tuple[Twin, list[Finding]]:
    """Conditions 1-3 of the theorem, each a z3 check (``Finding.ok`` False names what fails)."""
    tw = Twin(sem)
    found = check_steps(tw, progress)
    found += check_dependents(sem)
    found += check_state_properties(tw) + check_step_properties(tw) + check_padding(tw)
    return tw, found


def prove_unbounded(sem: Semantics = MODEL, only: list[str] | None = None,
                    progress: Callable[[str], None] | None = None, jobs: int = 1
                    ) -> UnboundedReport:
    """The proof at the cutoff graph (its transitions shared among ``jobs`` processes), then
    the cutoff theorem's conditions, per property."""
    t0 = time.perf_counter()
    report = prove(CUTOFF_INSTANCE, sem, only, None, True, progress, jobs=jobs, deps=CUTOFF_DEPS)
    tw, found = conditions(sem, progress)
    if progress:
        progress(f"conditions: {sum(f.ok for f in found)} of {len(found)} hold")
    counting = [p.id for p in state_properties() if reads_evidence_across_ids(tw, p)]
    refused = [f"{f.subject} {f.kind}: {f.detail}" for f in found if not f.ok]
    claims = []
    per: dict[str, list] = {}
    for r in report.results:
        per.setdefault(r.invariant, []).append(r)
    for pid, rs in per.items():
        if pid == DOMAIN.id:
            continue
        reasons = list(refused)
        reasons += [f"frame {pid} after {r.transition}: {r.status} at the cutoff graph"
                    for r in rs if r.status != "proved"]
        ids = "any number" if not counting else f"up to {len(CUTOFF_INSTANCE.ids())}"
        if counting:
            reasons.append("evidence ids not generalised: " + ", ".join(counting)
                           + " count recorded evidence across ids (assumed in every frame)")
        graphs_ok = not refused and all(r.status == "proved" for r in rs)
        claims.append(Claim(pid, "every graph" if graphs_ok else "not generalised",
                            "cutoff" if graphs_ok else "bounded", ids, "any number"
                            if not refused else f"up to {CUTOFF_INSTANCE.keys}", reasons))
    return UnboundedReport(claims, found, report, time.perf_counter() - t0)


_CACHE: dict[str, UnboundedReport] = {}


def model_report(progress: Callable[[str], None] | None = None) -> UnboundedReport:
    """``prove_unbounded()`` of the model itself, computed once per process (the gate's
    section and the trace matrix's proof column share it)."""
    if "model" not in _CACHE:
        _CACHE["model"] = prove_unbounded(progress=progress)
    return _CACHE["model"]
