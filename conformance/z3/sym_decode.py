"""Decoding a z3 model into a concrete ``State``, and comparing and describing states."""
from __future__ import annotations

from dataclasses import fields
from enum import IntEnum
from typing import Any

import z3
from z3 import z3core

from wgk.model.state import Binding, Entry, Evidence, Graph, Journal, State, TaskState
from wgk.model.vocab import Code, DecisionKind, Receipt

from wgk.conformance.z3.sym_backend import is_term
from wgk.conformance.z3.sym_state import BOOL_FIELDS, ENUM_FIELDS, INT_FIELDS, DEFAULT_TASK


# --- decoding a z3 model ------------------------------------------------------------

def value(model: z3.ModelRef, x: Any) -> Any:
    """The concrete Python value of ``x`` (a term or a constant) under ``model``."""
    if isinstance(x, bool) or isinstance(x, int):
        return x
    v = model.eval(x, model_completion=True)
    if z3.is_true(v):
        return True
    if z3.is_false(v):
        return False
    return v.as_long()


def decode_graph(model: z3.ModelRef, g: Graph) -> Graph:
    deps = {g.tasks[i]: [g.tasks[d] for d in ds] for i, ds in enumerate(g.deps)}
    review = [n for i, n in enumerate(g.tasks) if value(model, g.review_required[i])]
    assign = [n for i, n in enumerate(g.tasks) if value(model, g.requires_assignment[i])]
    budget = {n: value(model, b) for n, b in zip(g.tasks, g.retry_budget)}
    return Graph.build(g.tasks, deps, graph_id=g.graph_id, review_required=review,
                       requires_assignment=assign, protected=decode_protected(model, g.protected),
                       retry_budget=budget)


class DecodedProtected:
    """The protected predicate as a solver's model interprets it (a concrete content id is
    protected iff the model says so)."""

    def __init__(self, model: z3.ModelRef, f: Any):
        self.model, self.f = model, f

    def __call__(self, content: Any) -> Any:
        if isinstance(content, int):
            return z3.is_true(self.model.eval(self.f(z3.IntVal(content)), model_completion=True))
        return self.f(content)


def decode_protected(model: z3.ModelRef, f: Any) -> Any:
    """The protected contents of a decoded graph (a concrete predicate stays as it is)."""
    return DecodedProtected(model, f) if isinstance(f, z3.FuncDeclRef) else f


def decode_task(model: z3.ModelRef, t: TaskState) -> TaskState:
    vals: dict[str, Any] = {}
    for f in BOOL_FIELDS:
        vals[f] = bool(value(model, getattr(t, f)))
    for f in INT_FIELDS:
        v = value(model, getattr(t, f))
        vals[f] = ENUM_FIELDS[f](v) if f in ENUM_FIELDS else v
    vals["receipts"] = tuple(Binding(value(model, b.fence), value(model, b.candidate),
                                     value(model, b.base)) for b in t.receipts)
    vals["evidence"] = Evidence(p for p, b in t.evidence.bits.items() if value(model, b))
    return TaskState(**vals)


def decode_journal(model: z3.ModelRef, space: Space, j: SymJournal) -> Journal:
    items = []
    for key, e in zip(space.keys, j.entries, strict=True):
        if not value(model, e.used):
            continue
        slots = tuple(value(model, v) for v in e.slots)
        digest = space.decode_digest(value(model, e.shape), slots)
        items.append((key, Entry(digest, DecisionKind(value(model, e.kind)),
                                 Code(value(model, e.code)))))
    return Journal(sorted(items))


def decode_state(model: z3.ModelRef, space: Space, s: State, graph: Graph | None = None) -> State:
    """The concrete ``State`` a z3 model assigns to symbolic state ``s``."""
    return State(
        graph=graph if graph is not None else decode_graph(model, s.graph),
        tasks=tuple(decode_task(model, t) for t in s.tasks),
        target=value(model, s.target),
        now=value(model, s.now),
        journal=decode_journal(model, space, s.journal),
    )


def free_constants(term: Any) -> set[str]:
    """Names of the uninterpreted constants a term depends on (walked with the C API)."""
    if not is_term(term):
        return set()
    ctx = term.ctx.ref()
    out: set[str] = set()
    seen: set[int] = set()
    todo = [term.as_ast()]
    while todo:
        a = todo.pop()
        aid = z3core.Z3_get_ast_id(ctx, a)
        if aid in seen:
            continue
        seen.add(aid)
        if z3core.Z3_get_ast_kind(ctx, a) != z3.Z3_APP_AST:
            continue
        app = z3core.Z3_to_app(ctx, a)
        n = z3core.Z3_get_app_num_args(ctx, app)
        if n:
            todo.extend(z3core.Z3_get_app_arg(ctx, app, k) for k in range(n))
            continue
        decl = z3core.Z3_get_app_decl(ctx, app)
        if z3core.Z3_get_decl_kind(ctx, decl) == z3.Z3_OP_UNINTERPRETED:
            out.add(z3core.Z3_get_symbol_string(ctx, z3core.Z3_get_decl_name(ctx, decl)))
    return out


def identical(a: Any, b: Any) -> bool:
    """The same Python object, or the same z3 term."""
    if a is b:
        return True
    if is_term(a) and is_term(b):
        # z3 keeps one copy of each term: the same term is the same address (what ``eq`` asks
        # of z3, without the call)
        return a.ast.value == b.ast.value
    return False


def field_diff(before: State, after: State) -> list[str]:
    """Readable ``task.field: old -> new`` lines for two concrete states."""
    out = []
    for name, t, t2 in zip(before.graph.tasks, before.tasks, after.tasks, strict=True):
        for f in fields(TaskState):
            a, b = getattr(t, f.name), getattr(t2, f.name)
            if a != b:
                out.append(f"{name}.{f.name}: {_show(a)} -> {_show(b)}")
    if before.target != after.target:
        out.append(f"target: {before.target} -> {after.target}")
    if before.now != after.now:
        out.append(f"now: {before.now} -> {after.now}")
    if before.journal != after.journal:
        out.append(f"journal: {len(before.journal)} -> {len(after.journal)} entries")
    return out


def _show(v: Any) -> str:
    if isinstance(v, IntEnum):
        return v.name.lower().replace("_", "-")
    if isinstance(v, Evidence):
        return "{" + ", ".join(f"{k}:{i}" for k, i in sorted(v)) + "}"
    if isinstance(v, tuple) and v and isinstance(v[0], Binding):
        return "[" + ", ".join(f"{Receipt(k).label}@{b.fence}" for k, b in enumerate(v)
                               if b.fence != 0) + "]"
    return repr(v)


def describe_task(t: TaskState) -> str:
    """A one-line summary of a concrete task (what differs from a fresh task)."""
    parts = []
    for f in fields(TaskState):
        v = getattr(t, f.name)
        if v != getattr(DEFAULT_TASK, f.name):
            parts.append(f"{f.name}={_show(v)}")
    return ", ".join(parts) or "fresh"
