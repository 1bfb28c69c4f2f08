"""Symbolic states for the model's own rules.

The rules, ``decide``, the projections and the invariants of ``wgk.model`` are
written with the operators of ``wgk.model.logic``. Installed as the backend of
those operators (``symbolic()``), z3 turns the very same functions into solver
terms when they run on a state whose fields are z3 constants. This module
provides that backend, the symbolic state (the model's own frozen dataclasses
holding z3 terms), symbolic counterparts of the two containers (``Evidence``
and ``Journal``) over bounded domains, the domain constraints, and the
decoding of a z3 model back into a concrete ``State``.

Bounded domains:

- evidence: a fixed universe of ``(kind, id)`` pairs per task (record kinds
  the rules use, times the evidence ids of the bounds), one Bool each;
- journal: a fixed number of idempotency keys, each with a used flag, the
  request's digest (its *shape* plus the values of its symbolic fields), and
  the stored decision.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, fields
from enum import IntEnum
from typing import Any, Callable, Iterator

import z3
from z3 import z3core

from wgk.model import logic
from wgk.model.logic import all_of, count, ite
from wgk.model.state import (
    TASK_FIELDS, Binding, Entry, Evidence, Graph, Journal, State, TaskState,
)
from wgk.model.symbolic_eq import value_eq
from wgk.model.vocab import (
    AttemptState, Code, DecisionKind, Disposition, Exit, OwnerSeen, Phase, Reason, Receipt,
)


# --- the backend ----------------------------------------------------------------

class Z3Backend:
    """The four primitive constructors ``wgk.model.logic`` needs, as z3 terms.

    Built with the z3 C API directly: the rules build tens of thousands of
    terms and z3py's argument coercion would dominate the run time."""

    def __init__(self) -> None:
        self.ctx = z3.main_ctx()
        self._ints: dict[int, z3.ArithRef] = {}
        self._true = z3.BoolVal(True, self.ctx)
        self._false = z3.BoolVal(False, self.ctx)

    def term(self, x: Any) -> z3.ExprRef:
        if isinstance(x, z3.ExprRef):
            return x
        if isinstance(x, bool):
            return self._true if x else self._false
        if isinstance(x, int):
            v = self._ints.get(x)
            if v is None:
                v = self._ints[x] = z3.IntVal(int(x), self.ctx)
            return v
        raise TypeError(f"no solver term for {x!r}")

    def ite(self, c: Any, a: Any, b: Any) -> Any:
        if isinstance(a, bool) and isinstance(b, bool):
            return a if a == b else (c if a else self.not_(c))
        a, b = self.term(a), self.term(b)
        ref = z3core.Z3_mk_ite(self.ctx.ref(), c.as_ast(), a.as_ast(), b.as_ast())
        return z3.ArithRef(ref, self.ctx) if isinstance(a, z3.ArithRef) else z3.z3._to_expr_ref(ref, self.ctx)

    def and_(self, xs: list) -> Any:
        return z3.BoolRef(z3core.Z3_mk_and(self.ctx.ref(), len(xs), _asts(xs)), self.ctx)

    def or_(self, xs: list) -> Any:
        return z3.BoolRef(z3core.Z3_mk_or(self.ctx.ref(), len(xs), _asts(xs)), self.ctx)

    def not_(self, x: Any) -> Any:
        return z3.BoolRef(z3core.Z3_mk_not(self.ctx.ref(), x.as_ast()), self.ctx)


def _asts(xs: list) -> Any:
    arr = (z3.Ast * len(xs))()
    for n, x in enumerate(xs):
        arr[n] = x.as_ast()
    return arr


def substitute(term: z3.ExprRef, pairs: list[tuple[z3.ExprRef, z3.ExprRef]]) -> z3.ExprRef:
    """``term`` with every ``(variable, value)`` replaced (pairs must agree in sort)."""
    if not pairs:
        return term
    ctx = term.ctx
    ref = z3core.Z3_substitute(ctx.ref(), term.as_ast(), len(pairs), _asts([a for a, _ in pairs]),
                               _asts([b for _, b in pairs]))
    return z3.z3._to_expr_ref(ref, ctx)


BACKEND = Z3Backend()


@contextmanager
def symbolic() -> Iterator[None]:
    """Run model code with the z3 backend installed; the previous backend is restored."""
    previous = logic._backend
    logic.use_backend(BACKEND)
    try:
        yield
    finally:
        logic.use_backend(previous)


def is_term(x: Any) -> bool:
    return isinstance(x, z3.ExprRef)


def as_bool(x: Any) -> z3.BoolRef:
    """A Python bool or a z3 Bool as a z3 Bool."""
    return z3.BoolVal(x) if isinstance(x, bool) else x


class NonZero(z3.ArithRef):
    """A symbolic int known to be non-zero (the domain asserts it).

    Like any non-zero int it is truthy in Python, so model code that branches
    on *whether* an optional request field is set (``r.imports``,
    ``r.deadline``) runs unchanged while its value stays symbolic."""

    def __bool__(self) -> bool:
        return True


def nonzero_int(name: str) -> NonZero:
    x = z3.Int(name)
    return NonZero(x.as_ast(), x.ctx)


# --- evidence ---------------------------------------------------------------------

class SymEvidence:
    """A task's evidence over a bounded universe of ``(kind, id)`` pairs: one Bool each.

    A pair outside ``bits`` is absent. ``log``, when given, collects every pair
    the rules ask about or add (used once to discover the universe)."""

    __slots__ = ("bits", "log")

    def __init__(self, bits: dict, log: set | None = None):
        self.bits = bits
        self.log = log

    def has(self, item) -> Any:
        if self.log is not None:
            self.log.add(item)
        return self.bits.get(item, False)

    def add(self, item) -> "SymEvidence":
        if self.log is not None:
            self.log.add(item)
        if self.bits.get(item, False) is True:
            return self
        bits = dict(self.bits)
        bits[item] = True
        return SymEvidence(bits, self.log)

    def count(self, pred) -> Any:
        return count([all_of(b, pred(item)) for item, b in self.bits.items()])

    def __ite__(self, c: Any, other: "SymEvidence") -> "SymEvidence":
        if other is self:
            return self
        keys = list(self.bits) + [k for k in other.bits if k not in self.bits]
        bits = {}
        for k in keys:
            a, b = self.bits.get(k, False), other.bits.get(k, False)
            bits[k] = a if a is b else ite(c, a, b)
        return SymEvidence(bits, self.log if self.log is not None else other.log)

    def __sym_eq__(self, other: "SymEvidence") -> Any:
        keys = list(self.bits) + [k for k in other.bits if k not in self.bits]
        return all_of(*[value_eq(self.bits.get(k, False), other.bits.get(k, False)) for k in keys])


# --- journal ----------------------------------------------------------------------

@dataclass(frozen=True)
class SymDigest:
    """The digest of a symbolic request: its shape id and the values of its symbolic fields."""

    shape: Any
    slots: dict          # slot index -> term


@dataclass(frozen=True)
class SymEntry:
    """One key's journal entry: used, the stored digest, the stored decision."""

    used: Any
    shape: Any
    slots: tuple
    kind: Any
    code: Any


class SymJournal:
    """Idempotency journal over a fixed set of keys (key ``k`` is the ``k``-th entry).

    Digests compare by shape and by the slots the request's shape uses, so two
    requests with the same shape and the same field values have the same digest,
    as the concrete sha256 digests do."""

    __slots__ = ("entries",)

    def __init__(self, entries: tuple):
        self.entries = entries

    def _same(self, e: SymEntry, d: SymDigest) -> Any:
        return all_of(e.used, e.shape == d.shape, *[e.slots[j] == v for j, v in d.slots.items()])

    def lookup(self, key, digest: SymDigest) -> tuple[Any, Any, Any, Any]:
        used: Any = False
        same: Any = False
        kind: Any = 0
        code: Any = 0
        for k in reversed(range(len(self.entries))):
            e = self.entries[k]
            hit = key == k
            used = ite(hit, e.used, used)
            same = ite(hit, self._same(e, digest), same)
            kind = ite(hit, e.kind, kind)
            code = ite(hit, e.code, code)
        return used, same, kind, code

    def put(self, key, digest: SymDigest, kind, code) -> "SymJournal":
        width = len(self.entries[0].slots) if self.entries else 0
        slots = tuple(digest.slots.get(j, 0) for j in range(width))
        new = SymEntry(True, digest.shape, slots, kind, code)
        return SymJournal(tuple(ite(key == k, new, e) for k, e in enumerate(self.entries)))

    def __ite__(self, c: Any, other: "SymJournal") -> "SymJournal":
        if other is self:
            return self
        return SymJournal(tuple(ite(c, a, b) for a, b in zip(self.entries, other.entries,
                                                             strict=True)))

    def __sym_eq__(self, other: "SymJournal") -> Any:
        return all_of(*[value_eq(a, b) for a, b in zip(self.entries, other.entries, strict=True)])


# --- the shape of a symbolic state ----------------------------------------------------

ENUM_FIELDS: dict[str, type[IntEnum]] = {
    "attempt_state": AttemptState, "owner_seen": OwnerSeen, "phase": Phase, "exit": Exit,
    "reason": Reason, "disposition": Disposition,
}
_DEFAULT = TaskState()
BOOL_FIELDS: tuple[str, ...] = tuple(f for f in TASK_FIELDS if isinstance(getattr(_DEFAULT, f), bool))
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


def fresh_task(space: Space, name: str) -> TaskState:
    vals: dict[str, Any] = {}
    for f in BOOL_FIELDS:
        vals[f] = z3.Bool(f"{name}.{f}")
    for f in INT_FIELDS:
        vals[f] = z3.Int(f"{name}.{f}")
    vals["receipts"] = tuple(
        Binding(z3.Int(f"{name}.rcpt.{k.label}.fence"), z3.Int(f"{name}.rcpt.{k.label}.candidate"),
                z3.Int(f"{name}.rcpt.{k.label}.base"))
        for k in Receipt)
    vals["evidence"] = SymEvidence({p: z3.Bool(f"{name}.ev.{p[0]}.{p[1]}") for p in space.universe})
    return TaskState(**vals)


def fresh_journal(space: Space, prefix: str) -> SymJournal:
    return SymJournal(tuple(
        SymEntry(z3.Bool(f"{prefix}.j.{k}.used"), z3.Int(f"{prefix}.j.{k}.shape"),
                 tuple(z3.Int(f"{prefix}.j.{k}.slot{n}") for n in range(space.width)),
                 z3.Int(f"{prefix}.j.{k}.kind"), z3.Int(f"{prefix}.j.{k}.code"))
        for k in space.keys))


def fresh_state(space: Space, prefix: str) -> State:
    """A state whose every leaf is a fresh z3 constant named ``prefix.task.field``."""
    return State(
        graph=space.graph,
        tasks=tuple(fresh_task(space, f"{prefix}.{n}") for n in space.graph.tasks),
        target=z3.Int(f"{prefix}.target"),
        now=z3.Int(f"{prefix}.now"),
        journal=fresh_journal(space, prefix),
    )


def symbolic_graph(names: tuple[str, ...], deps: tuple[tuple[int, ...], ...], graph_id: str = "g"
                   ) -> Graph:
    """A graph whose review and assignment policies are z3 Bools (every policy at once)."""
    return Graph(graph_id=graph_id, tasks=names, deps=deps,
                 review_required=tuple(z3.Bool(f"policy.{n}.review") for n in names),
                 requires_assignment=tuple(z3.Bool(f"policy.{n}.assignment") for n in names),
                 index={n: i for i, n in enumerate(names)})


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
    out += [s.target, s.now]
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
    if isinstance(x, int) or z3.is_int_value(x):
        v = x if isinstance(x, int) else x.as_long()
        if tp is int:
            return v >= 0
        if isinstance(tp, tuple):
            return 0 <= v < tp[1]
        return v in {int(m) for m in tp}
    memo = {} if memo is None else memo
    key = (tp, x.get_id())
    if key not in memo:
        memo[key] = _within(tp, x, var_types, memo)
    return memo[key]


def _within(tp: Any, x: Any, var_types: dict[str, Any], memo: dict) -> bool:
    if z3.is_const(x) and x.decl().kind() == z3.Z3_OP_UNINTERPRETED:
        return var_types.get(x.decl().name()) == tp
    if z3.is_app_of(x, z3.Z3_OP_ITE):
        return (within_type(tp, x.arg(1), var_types, memo)
                and within_type(tp, x.arg(2), var_types, memo))
    if tp is int and z3.is_app_of(x, z3.Z3_OP_ADD):
        return all(within_type(int, c, var_types, memo) for c in x.children())
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
    return Graph.build(g.tasks, deps, graph_id=g.graph_id, review_required=review,
                       requires_assignment=assign)


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
        return a.eq(b)
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
        if v != getattr(_DEFAULT, f.name):
            parts.append(f"{f.name}={_show(v)}")
    return ", ".join(parts) or "fresh"
