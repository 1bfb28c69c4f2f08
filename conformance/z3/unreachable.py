"""Refusals the guard tables allow but no reachable state gives, proved with z3.

A cell ``kind/outcome/rejected:CODE`` is unreachable when no state satisfying the
invariants and lemmas that ``wgk prove`` proves inductive (they hold initially and every
transition keeps them) gets that refusal from any request of the kind the proof's
catalogue can send (every actor, every K, intruders included). One solver query per
cell, on the prover's symbolic pre-state: the assumptions, the kind's branches and
``decision == rejected ∧ code == CODE``. UNSAT is the proof; SAT leaves the cell
reachable as far as the proof knows (a witness must then be found for it).
"""
from __future__ import annotations

from typing import Iterable

import z3

from wgk.model.actions import Instance
from wgk.model.vocab import Code, DecisionKind, Kind

from wgk.conformance.z3.prove import Prover
from wgk.conformance.z3.symbolic import symbolic
from wgk.conformance.z3.transition import MODEL, as_term

#: The proof's instance: that of the quick gate's proofs.
TASKS = 2


def refusal(cell: str) -> tuple[str, Code] | None:
    """(kind label, code) of a cell ``kind/outcome/rejected:CODE``; None for another cell."""
    kind, family, value = cell.split("/", 2)
    if family != "outcome" or not value.startswith("rejected:"):
        return None
    Kind.parse(kind)
    return kind, Code.parse(value.split(":", 1)[1])


def prove_unreachable(cells: Iterable[str], tasks: int = TASKS) -> dict[str, str]:
    """The cells of ``cells`` proved unreachable, each with its proof as the reason (the
    others are left out: reachable as far as the proof knows, or not a refusal)."""
    wanted = {c: r for c in cells if (r := refusal(c)) is not None}
    if not wanted:
        return {}
    p = Prover(Instance.proof(tasks=tasks), transitions={k for k, _ in wanted.values()})
    out = {}
    for cell, (kind, code) in wanted.items():
        reason = prove_cell(p, kind, code, tasks)
        if reason is not None:
            out[cell] = reason
    return out


def prove_cell(p: Prover, kind: str, code: Code, tasks: int = TASKS) -> str | None:
    """The proof that no state of ``p``'s assumptions gets ``code`` from a ``kind`` request
    (its branches built on ``p``), as the reason of the cell; None: not proved."""
    with symbolic(), MODEL.active():
        terms = [z3.And(b.guard, as_term(b.decision.kind == DecisionKind.REJECTED),
                        as_term(b.decision.code == code))
                 for b in p.groups.get(kind, []) if b.decision is not None]
    if not terms:
        return None
    p.solver.push()
    try:
        p.solver.add(z3.Or(terms))
        verdict = p.solver.check()
    finally:
        p.solver.pop()
    if verdict != z3.unsat:
        return None
    return (f"proved unreachable (z3, {tasks} tasks): no state satisfying the "
            f"{len(p.state_props) - 1} invariants and lemmas `wgk prove` proves "
            f"inductive gets {code.label} from any {kind} request; an earlier "
            "check always refuses first")


__all__ = ["TASKS", "prove_cell", "prove_unreachable", "refusal"]
