"""Ask z3 from the page: a shortest trace to a reach expression or an invariant's violation."""
from __future__ import annotations

import shlex

from wgk.model.invariants import REGISTRY

from wgk.conformance.view.api import ApiError
from wgk.conformance.view.session import Session

MAX_DEPTH = 30


def ask(session: Session, body: dict) -> Session:
    """The trace z3 finds for ``{"reach": EXPR}`` or ``{"invariant": ID}`` within ``depth`` steps,
    as a new session (same instance options, same semantics); nothing found is an ``ApiError``."""
    from wgk.conformance.z3.bmc import Goal, check, invariant_goal
    from wgk.conformance.z3.prove import SymbolicMismatch, VacuousProof
    from wgk.conformance.z3.reach_expr import ReachError, compile_reach
    try:
        depth = int(body.get("depth", 10))
    except (TypeError, ValueError):
        raise ApiError("depth: expected an integer") from None
    if not 0 <= depth <= MAX_DEPTH:
        raise ApiError(f"depth: between 0 and {MAX_DEPTH}")
    inst = session.inst
    if body.get("invariant"):
        ident = str(body["invariant"]).strip()
        if ident not in REGISTRY:
            raise ApiError(f"unknown invariant {ident!r}")
        goal = invariant_goal(REGISTRY[ident])
    elif body.get("reach"):
        text = str(body["reach"])
        try:
            expr = compile_reach(text, inst.graph().tasks)
        except ReachError as e:
            raise ApiError(f"reach: {e}") from None
        goal = Goal("reach", text, "reach", "state", state=expr.holds)
    else:
        raise ApiError("ask for a reach expression or an invariant")
    try:
        result = check(goal, inst, depth, session.semantics)
    except (SymbolicMismatch, VacuousProof) as e:
        raise ApiError(f"z3: {e}") from None
    if result.trace is None:
        raise ApiError(f"{goal.id}: nothing found within depth {depth} ({result.status})")
    trace = result.trace
    trace.id = "reach" if goal.kind == "reach" else goal.id
    trace.title = f"{goal.id}: {goal.description}" if goal.kind != "reach" else f"reach: {text}"
    trace.description = f"A shortest trace found by z3 from wgk view at depth {result.found_at}."
    words = ["wgk", "check"] + (["--reach", text] if goal.kind == "reach" else ["--invariant", goal.id])
    words += ["--depth", str(result.found_at), "--tasks", str(inst.tasks), "--groups", ",".join(inst.groups)]
    words += ["--mutant", session.mutant] if session.mutant else []
    trace.provenance = shlex.join(words)
    return Session.from_trace(trace.to_wgk(), inst, session.mutant)
