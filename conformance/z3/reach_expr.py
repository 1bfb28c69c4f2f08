"""A small, safe expression language over the observable projection, for ``wgk check --reach``.

    t2.status == "in-progress" and t1.status == "needs-repair"
    t1.promotions >= 2 or not t1.dependency_satisfied
    t1.phase in ("effect-prepared", "effect-committed") and target != t1.base

Names are the instance's tasks (``t1``, ``t2``, ...) and the globals ``target``
and ``now``; a task's fields are those of the observable projection
(docs/vocabulary.md) with ``_`` for ``-``. Enum fields compare with their
labels, flags with ``true``/``false`` (or Python's ``True``/``False``), numbers
and content ids with ints (content ids also with each other). Allowed: ``and``,
``or``, ``not``, comparisons (``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``,
``in``, ``not in`` a tuple or list of literals) and parentheses. Parsed with
Python's ``ast``; nothing is ever evaluated by Python itself.

The compiled predicate is built from the model's own projections (``status``,
``graph_saved``, ``recovery_rank``) and the logic operators, so it
runs on symbolic states (z3 terms) and on concrete states alike.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Any, Callable

from wgk.model.logic import all_of, any_of, not_, one_of
from wgk.model.projections import recovery_rank, status
from wgk.model.predicates import graph_saved
from wgk.model.state import State, TaskState
from wgk.model.vocab import (
    AttemptState, Disposition, Exit, Labelled, OwnerSeen, Phase, Reason, Status,
)


class ReachError(ValueError):
    """A --reach expression that is not in the language (the message names the column)."""


def _field(name: str) -> Callable[[State, int, TaskState], Any]:
    return lambda s, i, t: getattr(t, name)


INT, BOOL, CONTENT = "int", "bool", "content"

#: field -> (type: an enum class, "int", "bool" or "content"; getter(s, i, t))
FIELDS: dict[str, tuple[Any, Callable[[State, int, TaskState], Any]]] = {
    "status": (Status, lambda s, i, t: status(t)),
    "dependency_satisfied": (BOOL, lambda s, i, t: graph_saved(t)),
    "attempt_state": (AttemptState, _field("attempt_state")),
    "owner_seen": (OwnerSeen, _field("owner_seen")),
    "phase": (Phase, _field("phase")),
    "exit": (Exit, _field("exit")),
    "reason": (Reason, _field("reason")),
    "disposition": (Disposition, _field("disposition")),
    "recovery_rank": (INT, lambda s, i, t: recovery_rank(t)),
    **{f: (INT, _field(f)) for f in (
        "generation", "attempt", "fence", "lease_epoch", "revision", "version", "promotions",
        "deadline", "compactions", "continuations", "acks", "provider_failures", "messages",
        "logs")},
    **{f: (BOOL, _field(f)) for f in (
        "effect_done", "assigned", "legacy_done", "reconstructed", "abandoned",
        "worktree_present", "worktree_lease", "session_lease", "finish_lease")},
    **{f: (CONTENT, _field(f)) for f in (
        "candidate", "base", "worktree", "origin", "saved_work", "retained", "imported",
        "archive_confirmed", "archived")},
}
GLOBALS: dict[str, tuple[str, Callable[[State], Any]]] = {
    "target": (CONTENT, lambda s: s.target),
    "now": (INT, lambda s: s.now),
}

_COMPARE = {
    ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b, ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
}


@dataclass(frozen=True)
class Operand:
    type: Any
    get: Callable[[State], Any] | None      # None: a literal
    literal: Any = None
    text: str = ""


@dataclass(frozen=True)
class ReachExpr:
    """A compiled --reach expression: ``holds(s)`` is a bool or a solver term."""

    text: str
    pred: Callable[[State], Any]

    def holds(self, s: State) -> Any:
        return self.pred(s)


def compile_reach(text: str, tasks: tuple[str, ...]) -> ReachExpr:
    """Parse and type-check ``text`` against the instance's ``tasks``; raise ``ReachError``."""
    if not text.strip():
        raise ReachError("empty expression")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise ReachError(f"column {(e.offset or 1)}: {e.msg}") from None
    return ReachExpr(text, _Compiler(tasks).bool_expr(tree.body))


class _Compiler:
    def __init__(self, tasks: tuple[str, ...]):
        self.tasks = tasks
        self.index = {n: i for i, n in enumerate(tasks)}

    def fail(self, node: ast.AST, msg: str) -> ReachError:
        return ReachError(f"column {getattr(node, 'col_offset', 0) + 1}: {msg}")

    def bool_expr(self, node: ast.AST) -> Callable[[State], Any]:
        if isinstance(node, ast.BoolOp):
            parts = [self.bool_expr(v) for v in node.values]
            op = all_of if isinstance(node.op, ast.And) else any_of
            return lambda s: op(*[p(s) for p in parts])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self.bool_expr(node.operand)
            return lambda s: not_(inner(s))
        if isinstance(node, ast.Compare):
            return self.compare(node)
        if isinstance(node, ast.Attribute) or (isinstance(node, ast.Name)
                                                and node.id not in ("true", "false")):
            o = self.operand(node)
            if o.type != BOOL:
                raise self.fail(node, f"{o.text} is not a flag; compare it with a value")
            return lambda s: o.get(s)
        if isinstance(node, ast.Constant) and isinstance(node.value, bool) or (
                isinstance(node, ast.Name) and node.id in ("true", "false")):
            v = self.literal(node)
            return lambda s: v
        raise self.fail(node, f"not allowed here: {type(node).__name__.lower()} "
                              "(use and/or/not, comparisons, task.field and literals)")

    def compare(self, node: ast.Compare) -> Callable[[State], Any]:
        parts = []
        left = node.left
        for op, right in zip(node.ops, node.comparators):
            parts.append(self.one_compare(left, op, right))
            left = right
        return lambda s: all_of(*[p(s) for p in parts])

    def one_compare(self, left: ast.AST, op: ast.cmpop, right: ast.AST) -> Callable[[State], Any]:
        a = self.operand(left)
        if isinstance(op, (ast.In, ast.NotIn)):
            if a.get is None:
                raise self.fail(left, "the left side of 'in' must be a field")
            if not isinstance(right, (ast.Tuple, ast.List)):
                raise self.fail(right, "'in' needs a tuple or list of literals")
            values = [self.coerce(a, self.literal(x), x) for x in right.elts]
            neg = isinstance(op, ast.NotIn)
            return lambda s: (not_ if neg else (lambda x: x))(one_of(a.get(s), values))
        if type(op) not in _COMPARE:
            raise self.fail(left, f"operator {type(op).__name__} is not allowed")
        b = self.operand(right)
        cmp = _COMPARE[type(op)]
        if a.get is None and b.get is None:
            raise self.fail(left, "compare a field with something, not two literals")
        if a.get is None:
            a, b = b, a
            cmp = _flip(op)
        if b.get is None:
            v = self.coerce(a, b.literal, right)
            self.check_order(a, op, left)
            return lambda s: cmp(a.get(s), v)
        if a.type != b.type:
            raise self.fail(right, f"cannot compare {a.text} with {b.text}")
        self.check_order(a, op, left)
        return lambda s: cmp(a.get(s), b.get(s))

    def check_order(self, a: Operand, op: ast.cmpop, node: ast.AST) -> None:
        if not isinstance(op, (ast.Eq, ast.NotEq)) and a.type != INT:
            raise self.fail(node, f"{a.text} only compares with == and !=")

    def operand(self, node: ast.AST) -> Operand:
        if isinstance(node, ast.Attribute):
            if not isinstance(node.value, ast.Name):
                raise self.fail(node, "write task.field, e.g. t1.status")
            task = node.value.id
            if task not in self.index:
                raise self.fail(node, f"unknown task {task!r} (tasks: {', '.join(self.tasks)})")
            if node.attr not in FIELDS:
                raise self.fail(node, f"unknown field {node.attr!r} (fields: "
                                      f"{', '.join(sorted(FIELDS))})")
            tp, get = FIELDS[node.attr]
            i = self.index[task]
            return Operand(tp, lambda s: get(s, i, s.tasks[i]), text=f"{task}.{node.attr}")
        if isinstance(node, ast.Name):
            if node.id in GLOBALS:
                tp, get = GLOBALS[node.id]
                return Operand(tp, get, text=node.id)
            if node.id in ("true", "false"):
                return Operand("literal", None, node.id == "true")
            if node.id in self.index:
                raise self.fail(node, f"{node.id} is a task: name one of its fields, "
                                      f"e.g. {node.id}.status")
            raise self.fail(node, f"unknown name {node.id!r} (tasks: {', '.join(self.tasks)}; "
                                  "globals: target, now)")
        return Operand("literal", None, self.literal(node))

    def literal(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, bool)):
            return node.value
        if isinstance(node, ast.Name) and node.id in ("true", "false"):
            return node.id == "true"
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) \
                and isinstance(node.operand, ast.Constant) and type(node.operand.value) is int:
            return -node.operand.value
        raise self.fail(node, "expected a literal (a label string, an int, true or false)")

    def coerce(self, a: Operand, v: Any, node: ast.AST) -> Any:
        tp = a.type
        if isinstance(tp, type) and issubclass(tp, Labelled):
            if not isinstance(v, str):
                raise self.fail(node, f"{a.text} compares with a label, e.g. "
                                      f"{tp.labels()[0]!r}")
            try:
                return tp.parse(v)
            except ValueError as e:
                raise self.fail(node, str(e)) from None
        if tp == BOOL:
            if not isinstance(v, bool):
                raise self.fail(node, f"{a.text} is a flag: compare with true or false")
            return v
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.fail(node, f"{a.text} compares with an int")
        return v


def _flip(op: ast.cmpop) -> Callable[[Any, Any], Any]:
    flipped = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE}
    return _COMPARE[flipped.get(type(op), type(op))]
