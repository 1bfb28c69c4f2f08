"""The shape of a symbolic state: fresh states, their leaves, and domain constraints."""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Callable

import z3
from z3 import z3core

from wgk.model.state import TASK_FIELDS, Binding, Graph, State, TaskState
from wgk.model.vocab import (
    AttemptState, Code, Contract, DecisionKind, Disposition, Exit, OwnerSeen, Phase, Reason,
    Receipt, ReviewPhase, ReviewVerdict,
)

from wgk.conformance.z3.sym_backend import LIB, as_bool, int_var, is_term
from wgk.conformance.z3.sym_containers import SymEntry, SymEvidence, SymJournal


# --- the shape of a symbolic state ----------------------------------------------------

ENUM_FIELDS: dict[str, type[IntEnum]] = {
    "attempt_state": AttemptState, "owner_seen": OwnerSeen, "phase": Phase, "exit": Exit,
    "reason": Reason, "disposition": Disposition, "review_phase": ReviewPhase,
    "flip": ReviewVerdict, "evaluation": ReviewVerdict, "contract": Contract,
}
DEFAULT_TASK = TaskState()
BOOL_FIELDS: tuple[str, ...] = tuple(f for f in TASK_FIELDS if isinstance(getattr(DEFAULT_TASK, f), bool))
INT_FIELDS: tuple[str, ...] = tuple(
    f for f in TASK_FIELDS
    if f not in BOOL_FIELDS and f not in ("receipts", "evidence"))


@dataclass(frozen=True)
class Space:
    """Everything fixed about the symbolic states of one check.

    ``graph`` may hold z3 Bools as policy flags (proofs cover every policy);
    ``universe`` is the evidence pairs per task; ``keys`` the journal's keys;
    ``width`` the digest slots; ``decode_digest(shape, slots) -> str`` turns a
    stored digest back into the concrete sha256 digest."""

    graph: Graph
    universe: tuple
    keys: tuple[str, ...]
    width: int
    shapes: int
    decode_digest: Callable[[int, tuple], str]

    @property
    def ntasks(self) -> int:
        return len(self.graph.tasks)

    @property
    def task_width(self) -> int:
        """The number of leaves of one task (``task_leaves``)."""
        return len(BOOL_FIELDS) + len(INT_FIELDS) + 3 * len(Receipt) + len(self.universe)


def fresh_task(space: Space, name: str) -> TaskState:
    vals: dict[str, Any] = {}
    for f in BOOL_FIELDS:
        vals[f] = z3.Bool(f"{name}.{f}")
    for f in INT_FIELDS:
        vals[f] = int_var(f"{name}.{f}")
    vals["receipts"] = tuple(
        Binding(int_var(f"{name}.rcpt.{k.label}.fence"), int_var(f"{name}.rcpt.{k.label}.candidate"),
                int_var(f"{name}.rcpt.{k.label}.base"))
        for k in Receipt)
    vals["evidence"] = SymEvidence({p: z3.Bool(f"{name}.ev.{p[0]}.{p[1]}") for p in space.universe})
    return TaskState(**vals)


def fresh_journal(space: Space, prefix: str) -> SymJournal:
    return SymJournal(tuple(
        SymEntry(z3.Bool(f"{prefix}.j.{k}.used"), int_var(f"{prefix}.j.{k}.shape"),
                 tuple(int_var(f"{prefix}.j.{k}.slot{n}") for n in range(space.width)),
                 int_var(f"{prefix}.j.{k}.kind"), int_var(f"{prefix}.j.{k}.code"))
        for k in space.keys))


def fresh_state(space: Space, prefix: str) -> State:
    """A state whose every leaf is a fresh z3 constant named ``prefix.task.field``."""
    return State(
        graph=space.graph,
        tasks=tuple(fresh_task(space, f"{prefix}.{n}") for n in space.graph.tasks),
        target=int_var(f"{prefix}.target"),
        now=int_var(f"{prefix}.now"),
        journal=fresh_journal(space, prefix),
    )


def symbolic_graph(names: tuple[str, ...], deps: tuple[tuple[int, ...], ...], graph_id: str = "g"
                   ) -> Graph:
    """A graph whose review and assignment policies are z3 Bools, whose retry budgets are z3
    Ints and whose protected contents are an uninterpreted z3 predicate on content ids (every
    policy at once)."""
    return Graph(graph_id=graph_id, tasks=names, deps=deps,
                 review_required=tuple(z3.Bool(f"policy.{n}.review") for n in names),
                 requires_assignment=tuple(z3.Bool(f"policy.{n}.assignment") for n in names),
                 retry_budget=tuple(int_var(f"policy.{n}.budget") for n in names),
                 index={n: i for i, n in enumerate(names)},
                 protected=z3.Function("policy.protected", z3.IntSort(), z3.BoolSort()))


# --- leaves: a state as a flat list of terms ------------------------------------------

def task_leaves(space: Space, t: TaskState) -> list:
    out: list = [getattr(t, f) for f in BOOL_FIELDS] + [getattr(t, f) for f in INT_FIELDS]
    for b in t.receipts:
        out += [b.fence, b.candidate, b.base]
    ev = t.evidence
    extra = [p for p in ev.bits if p not in space.universe]
    if extra:
        raise DomainError(f"evidence {extra[0]} is outside the bounded universe")
    out += [ev.bits.get(p, False) for p in space.universe]
    return out


def leaves(space: Space, s: State) -> list:
    """Every leaf of ``s`` in a fixed order (the same for every state of ``space``)."""
    out: list = []
    for t in s.tasks:
        out += task_leaves(space, t)
    return out + tail_leaves(s)


def tail_leaves(s: State) -> list:
    """The leaves of ``s`` after its tasks': the target, the clock and the journal."""
    out: list = [s.target, s.now]
    for e in s.journal.entries:
        out += [e.used, e.shape, *e.slots, e.kind, e.code]
    return out


class DomainError(ValueError):
    """A symbolic state left its bounded domain (an evidence pair or key outside it)."""


# --- domain constraints ---------------------------------------------------------------

def _in_enum(x: Any, enum: type[IntEnum]) -> Any:
    values = sorted(int(m) for m in enum)
    if values == list(range(values[0], values[-1] + 1)):
        return z3.And(x >= values[0], x <= values[-1])
    return z3.Or([x == v for v in values])


def leaf_types(space: Space) -> list:
    """The type of every leaf, in ``leaves`` order: ``bool``, ``int`` (natural), an enum, or
    ``("shape", n)`` for a digest shape below ``n``."""
    task = [bool] * len(BOOL_FIELDS) + [ENUM_FIELDS.get(f, int) for f in INT_FIELDS]
    task += [int] * (3 * len(Receipt)) + [bool] * len(space.universe)
    out = task * space.ntasks + [int, int]
    for _ in space.keys:
        out += [bool, ("shape", space.shapes)] + [int] * space.width + [DecisionKind, Code]
    return out


def leaf_domain(tp: Any, x: Any) -> Any:
    """The domain constraint of one leaf (``True`` when there is none)."""
    if tp is bool or not is_term(x):
        return True
    if tp is int:
        return x >= 0
    if isinstance(tp, tuple):
        return z3.And(x >= 0, x < tp[1])
    return _in_enum(x, tp)


def within_type(tp: Any, x: Any, var_types: dict[str, Any], memo: dict | None = None) -> bool:
    """Syntactically in its type: a value in range, a variable of that type, an if-then-else
    of such, or (for naturals) a sum of naturals. ``False`` means "ask the solver"."""
    if tp is bool:
        return True
    if isinstance(x, bool):
        return False
    if isinstance(x, int):
        return _value_within(tp, x)
    memo = {} if memo is None else memo
    ctx = x.ctx.ref()
    return _within_ast(tp, x.as_ast(), ctx, var_types, memo)


def _value_within(tp: Any, v: int) -> bool:
    if tp is int:
        return v >= 0
    if isinstance(tp, tuple):
        return 0 <= v < tp[1]
    return v in {int(m) for m in tp}


def _within_ast(tp: Any, a: Any, ctx: Any, var_types: dict[str, Any], memo: dict) -> bool:
    """``within_type`` of one AST, walked with z3's C API (memoised by the AST's address: the
    post-states of one prover share most of their subterms, and the prover keeps them alive,
    so an address is not given to another term while the memo stands)."""
    key = (tp, a.value)      # the term's address: z3 keeps one copy of each term
    hit = memo.get(key)
    if hit is not None:
        return hit
    memo[key] = out = _within(tp, a, ctx, var_types, memo)
    return out


def _within(tp: Any, a: Any, ctx: Any, var_types: dict[str, Any], memo: dict) -> bool:
    kind = LIB.Z3_get_ast_kind(ctx, a)
    if kind == z3.Z3_NUMERAL_AST:
        return _value_within(tp, int(z3core.Z3_get_numeral_string(ctx, a)))
    if kind != z3.Z3_APP_AST:
        return False
    app = LIB.Z3_to_app(ctx, a)
    decl = LIB.Z3_get_app_decl(ctx, app)
    op = LIB.Z3_get_decl_kind(ctx, decl)
    n = LIB.Z3_get_app_num_args(ctx, app)
    if op == z3.Z3_OP_UNINTERPRETED and n == 0:
        name = z3core.Z3_get_symbol_string(ctx, LIB.Z3_get_decl_name(ctx, decl))
        return var_types.get(name) == tp
    if op == z3.Z3_OP_ITE:
        return (_within_ast(tp, LIB.Z3_get_app_arg(ctx, app, 1), ctx, var_types, memo)
                and _within_ast(tp, LIB.Z3_get_app_arg(ctx, app, 2), ctx, var_types, memo))
    if tp is int and op == z3.Z3_OP_ADD:
        return all(_within_ast(int, LIB.Z3_get_app_arg(ctx, app, k), ctx, var_types, memo)
                   for k in range(n))
    return False


def domain(space: Space, s: State) -> list:
    """Type constraints of a state: enum fields in range, ids and counters natural."""
    out = [leaf_domain(tp, x) for tp, x in zip(leaf_types(space), leaves(space, s))]
    return [c for c in out if c is not True]


def equals(space: Space, s: State, concrete: State) -> list:
    """Constraints making symbolic ``s`` equal to concrete state ``concrete``."""
    out = []
    for t, c in zip(s.tasks, concrete.tasks, strict=True):
        for f in BOOL_FIELDS + INT_FIELDS:
            out.append(getattr(t, f) == getattr(c, f))
        for b, cb in zip(t.receipts, c.receipts, strict=True):
            out += [b.fence == cb.fence, b.candidate == cb.candidate, b.base == cb.base]
        unknown = [p for p in c.evidence if p not in space.universe]
        if unknown:
            raise DomainError(f"evidence {unknown[0]} is outside the bounded universe")
        out += [t.evidence.bits[p] == (p in c.evidence) for p in space.universe]
    out += [s.target == concrete.target, s.now == concrete.now]
    if len(concrete.journal):
        raise DomainError("a starting state with a non-empty journal is not supported")
    out += [z3.Not(e.used) for e in s.journal.entries]
    return [as_bool(x) for x in out]
