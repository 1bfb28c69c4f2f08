"""The z3 backend of ``wgk.model.logic``: installed by ``symbolic()``, the model's own
operators build solver terms."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import z3
from z3 import z3core

from wgk.model import logic


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
        if isinstance(a, (IntTerm, z3.IntNumRef)) or isinstance(b, IntTerm):
            return IntTerm(ref, self.ctx)
        return z3.ArithRef(ref, self.ctx) if isinstance(a, z3.ArithRef) else z3.z3._to_expr_ref(ref, self.ctx)

    def and_(self, xs: list) -> Any:
        return z3.BoolRef(z3core.Z3_mk_and(self.ctx.ref(), len(xs), _asts(xs)), self.ctx)

    def or_(self, xs: list) -> Any:
        return z3.BoolRef(z3core.Z3_mk_or(self.ctx.ref(), len(xs), _asts(xs)), self.ctx)

    def eq(self, a: Any, b: Any) -> Any:
        """``a == b`` as a z3 Bool (``True`` when both are the same term)."""
        a, b = self.term(a), self.term(b)
        ctx = self.ctx.ref()
        if z3core.Z3_get_ast_id(ctx, a.as_ast()) == z3core.Z3_get_ast_id(ctx, b.as_ast()):
            return True
        return z3.BoolRef(z3core.Z3_mk_eq(ctx, a.as_ast(), b.as_ast()), self.ctx)

    def not_(self, x: Any) -> Any:
        return z3.BoolRef(z3core.Z3_mk_not(self.ctx.ref(), x.as_ast()), self.ctx)

    def count(self, known: int, terms: list) -> "Count":
        """``known`` plus the number of true ``terms``: compared with a number, a cardinality
        constraint (the solver's pseudo-Boolean core) instead of a sum of if-then-elses."""
        total = z3.Sum([self.term(known)] + [self.ite(x, 1, 0) for x in terms])
        return Count(total.as_ast(), self.ctx, known, terms)


class IntTerm(z3.ArithRef):
    """A term of sort Int whose ``==`` and ``!=`` with a Python int or another ``IntTerm`` are
    built with z3's C API: the very terms z3py builds (``Z3_mk_eq``, ``Z3_mk_distinct`` of the
    two, the int as its numeral), without z3py's coercion of the operands, which the model's
    comparisons of fields with enum members make the larger part of building the branches
    and goals. Any other operand takes z3py's way."""

    def _operand(self, other: Any) -> Any:
        if isinstance(other, IntTerm):
            return other.as_ast()
        if isinstance(other, int) and not isinstance(other, bool):
            return BACKEND.term(int(other)).as_ast()
        return None

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        b = self._operand(other)
        if b is None:
            return super().__eq__(other)
        return z3.BoolRef(z3core.Z3_mk_eq(self.ctx.ref(), self.as_ast(), b), self.ctx)

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        b = self._operand(other)
        if b is None:
            return super().__ne__(other)
        arr = (z3.Ast * 2)()
        arr[0], arr[1] = self.as_ast(), b
        return z3.BoolRef(z3core.Z3_mk_distinct(self.ctx.ref(), 2, arr), self.ctx)

    __hash__ = z3.ArithRef.__hash__


def int_var(name: str) -> IntTerm:
    """A fresh Int constant (``z3.Int(name)``) as an ``IntTerm``."""
    x = z3.Int(name)
    return IntTerm(x.as_ast(), x.ctx)


class Count(z3.ArithRef):
    """A count of Boolean terms (``logic.count``): arithmetic like the sum it is, and compared
    with a Python int, the equivalent cardinality constraint."""

    def __init__(self, ast: Any, ctx: Any, known: int, terms: list):
        super().__init__(ast, ctx)
        self.known, self.terms = known, list(terms)

    def _card(self, op: str, k: int) -> Any:
        k -= self.known
        n = len(self.terms)
        lo, hi = {"==": (k, k), "<=": (0, k), ">=": (k, n)}[op]
        if lo > hi or hi < 0 or lo > n:
            return z3.BoolVal(False, self.ctx)
        parts = []
        if lo > 0:
            parts.append(z3.Or(self.terms) if lo == 1 else z3.AtLeast(*self.terms, lo))
        if hi < n:
            parts.append(z3.Not(z3.Or(self.terms)) if hi == 0 else z3.AtMost(*self.terms, hi))
        return z3.And(parts) if parts else z3.BoolVal(True, self.ctx)

    @staticmethod
    def _number(other: Any) -> bool:
        return isinstance(other, int) and not isinstance(other, bool)

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        return self._card("==", other) if self._number(other) else super().__eq__(other)

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        return z3.Not(self._card("==", other)) if self._number(other) else super().__ne__(other)

    def __le__(self, other: Any) -> Any:
        return self._card("<=", other) if self._number(other) else super().__le__(other)

    def __lt__(self, other: Any) -> Any:
        return self._card("<=", other - 1) if self._number(other) else super().__lt__(other)

    def __ge__(self, other: Any) -> Any:
        return self._card(">=", other) if self._number(other) else super().__ge__(other)

    def __gt__(self, other: Any) -> Any:
        return self._card(">=", other + 1) if self._number(other) else super().__gt__(other)

    __hash__ = z3.ArithRef.__hash__


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


class NonZero(IntTerm):
    """A symbolic int known to be non-zero (the domain asserts it).

    Like any non-zero int it is truthy in Python, so model code that branches
    on *whether* an optional request field is set (``r.imports``,
    ``r.deadline``) runs unchanged while its value stays symbolic."""

    def __bool__(self) -> bool:
        return True


def nonzero_int(name: str) -> NonZero:
    x = z3.Int(name)
    return NonZero(x.as_ast(), x.ctx)
