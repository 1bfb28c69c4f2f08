"""z3: the convergence rank strictly decreases on every applied due action.

``wgk.model.liveness.convergence_rank`` is a natural number per task; for every
request template whose kind can take a task's due action (``due_for``), the
solver looks for a pre-state satisfying the invariants and lemmas (the
``Prover``'s assumptions) in which the action is due, is applied, and does not
lower the rank of its task. None exists, so a run made of due actions alone is
finite: convergence has no cycle without progress, in every state, not only in
the explored instances.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import z3

from wgk.model.actions import Instance
from wgk.model.liveness import convergence_rank, due_for
from wgk.model.vocab import DecisionKind as D

from wgk.conformance.z3.prove import Prover
from wgk.conformance.z3.sym_backend import as_bool, symbolic
from wgk.conformance.z3.transition import MODEL, Semantics

RANK_ID = "convergence-rank-decreases"


@dataclass
class RankResult:
    transition: str
    status: str                # "proved" | "counterexample" | "unknown"
    seconds: float

    def to_json(self) -> dict:
        return {"property": RANK_ID, "transition": self.transition, "status": self.status,
                "seconds": round(self.seconds, 3)}


def prove_rank(inst: Instance = Instance.proof(tasks=2), sem: Semantics = MODEL,
               prover: Prover | None = None) -> list[RankResult]:
    """One result per request kind that can be a due action."""
    p = prover or Prover(inst, sem)
    names = inst.task_names()
    goals: dict[str, list] = {}
    with symbolic(), sem.active():
        for b in p.branches:
            if b.decision is None or b.step.task not in names:
                continue
            i = names.index(b.step.task)
            due = due_for(p.s, i, b.template.kind)
            if due is False:
                continue
            before = convergence_rank(p.s, i, p.s.tasks[i])
            after = convergence_rank(b.post, i, b.post.tasks[i])
            bad = z3.And(b.guard, as_bool(due), as_bool(b.decision.kind == D.APPLIED),
                         z3.Not(as_bool(after < before)), as_bool(before >= 0))
            goals.setdefault(b.transition, []).append(bad)
    out = []
    for transition, bads in goals.items():
        t0 = time.perf_counter()
        p.solver.push()
        try:
            p.solver.add(z3.Or(bads))
            verdict = p.solver.check()
        finally:
            p.solver.pop()
        status = ("proved" if verdict == z3.unsat else
                  "counterexample" if verdict == z3.sat else "unknown")
        out.append(RankResult(transition, status, time.perf_counter() - t0))
    return out
