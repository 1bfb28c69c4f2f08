"""The z3 backend of ``wgk.model.logic``: installed by ``symbolic()``, the model's own
operators build solver terms."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import z3
from z3 import z3core

from wgk.model import logic


# --- terms built without z3py's layers --------------------------------------------------
#
# z3py wraps every C function in a check of the context's error code (a second call) and
# every term in an object whose constructor and finaliser go through those wrappers. The
# backend builds tens of thousands of terms per proof: it calls the library's functions
# itself and checks the one thing that can fail, a constructor giving no term.

class Library:
    """z3's C functions as z3core's wrappers call them (each wrapper holds its function)."""

    def __getattr__(self, name: str) -> Any:
        f = getattr(z3core, name).__defaults__[-1].f
        setattr(self, name, f)
        return f


LIB = Library()
_CTX = z3.main_ctx()


def _made(ast: Any) -> Any:
    """``ast`` as a constructor returned it: raise z3's error when it gave no term."""
    if not ast:
        ref = _CTX.ref()
        raise z3.Z3Exception(LIB.Z3_get_error_msg(ref, LIB.Z3_get_error_code(ref)))
    return ast


class _Lean:
    """A term object made and released without z3py's checked wrappers (mixed into the
    backend's term classes; otherwise the z3py class it is)."""

    @classmethod
    def made(cls, ast: Any) -> Any:
        """The term object of ``ast`` just returned by a z3 constructor (one reference)."""
        ast = _made(ast)
        x = object.__new__(cls)
        x.ast, x.ctx = ast, _CTX
        LIB.Z3_inc_ref(_CTX.ctx, ast)
        return x

    def __del__(self) -> None:
        ast, ctx = self.ast, self.ctx.ctx
        if ast is not None and ctx is not None and LIB is not None:
            LIB.Z3_dec_ref(ctx, ast)
            self.ast = None


class BoolTerm(_Lean, z3.BoolRef):
    """A Bool term of the backend (a ``z3.BoolRef``)."""


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
        #: the terms built so far, by their operator and the Python objects of their operands
        #: (``memo``): the same operands give the same object without a call into z3
        self.memo: dict | None = None
        #: the at-most-one constraints built so far as their overlapping pairs
        #: (``pairwise_of``); None: as z3's cardinality constraint
        self.pairwise: dict | None = None

    @contextmanager
    def memo_of(self, memo: dict) -> Iterator[None]:
        """Build terms through ``memo`` for the duration (the previous memo is restored).

        The rules run on one symbolic pre-state for every template, and the properties on
        one post-state per branch, asking the same comparisons and if-then-elses many times
        over: a term asked again is the object built the first time. Keys are the ``id`` of
        the operands and each entry keeps its operands alive, so an ``id`` is never reused
        for another object while the memo stands; the terms are the ones z3 would give
        (it keeps one copy of each term), only their Python objects are shared."""
        previous = self.memo
        self.memo = memo
        try:
            yield
        finally:
            self.memo = previous

    @contextmanager
    def pairwise_of(self, memo: dict) -> Iterator[None]:
        """Build each at-most-one of a count through ``memo`` as ``at_most_one`` gives it
        (the pairs that can hold together excluded one by one) for the duration."""
        previous = self.pairwise
        self.pairwise = memo
        try:
            yield
        finally:
            self.pairwise = previous

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
        memo = self.memo
        if memo is not None:
            key = ("ite", id(c), id(a), id(b))
            hit = memo.get(key)
            if hit is not None:
                return hit[0]
        x, y = self.term(a), self.term(b)
        ref = LIB.Z3_mk_ite(_CTX.ctx, c.ast, x.ast, y.ast)
        if isinstance(x, (IntTerm, z3.IntNumRef)) or isinstance(y, IntTerm):
            out = IntTerm.made(ref)
        elif isinstance(x, z3.BoolRef):
            out = BoolTerm.made(ref)
        elif isinstance(x, z3.ArithRef):
            out = z3.ArithRef(_made(ref), self.ctx)
        else:
            out = z3.z3._to_expr_ref(_made(ref), self.ctx)
        if memo is not None:
            memo[key] = (out, c, a, b)
        return out

    def and_(self, xs: list) -> Any:
        return self._nary("and", LIB.Z3_mk_and, xs)

    def or_(self, xs: list) -> Any:
        return self._nary("or", LIB.Z3_mk_or, xs)

    def _nary(self, op: str, mk: Any, xs: list) -> Any:
        memo = self.memo
        if memo is not None:
            key = (op, *map(id, xs))
            hit = memo.get(key)
            if hit is not None:
                return hit[0]
        out = BoolTerm.made(mk(_CTX.ctx, len(xs), _asts(xs)))
        if memo is not None:
            memo[key] = (out, list(xs))
        return out

    def eq(self, a: Any, b: Any) -> Any:
        """``a == b`` as a z3 Bool (``True`` when both are the same term)."""
        memo = self.memo
        if memo is not None:
            key = ("eq", id(a), id(b))
            hit = memo.get(key)
            if hit is not None:
                return hit[0]
        x, y = self.term(a), self.term(b)
        if x.ast.value == y.ast.value:       # the same term (z3 keeps one copy of each)
            out: Any = True
        else:
            out = BoolTerm.made(LIB.Z3_mk_eq(_CTX.ctx, x.ast, y.ast))
        if memo is not None:
            memo[key] = (out, a, b)
        return out

    def not_(self, x: Any) -> Any:
        memo = self.memo
        if memo is not None:
            key = ("not", id(x))
            hit = memo.get(key)
            if hit is not None:
                return hit[0]
        out = BoolTerm.made(LIB.Z3_mk_not(_CTX.ctx, x.ast))
        if memo is not None:
            memo[key] = (out, x)
        return out

    def count(self, known: int, terms: list) -> "Count":
        """``known`` plus the number of true ``terms``: compared with a number, a cardinality
        constraint (the solver's pseudo-Boolean core) instead of a sum of if-then-elses."""
        total = z3.Sum([self.term(known)] + [self.ite(x, 1, 0) for x in terms])
        return Count(total.as_ast(), self.ctx, known, terms)


class IntTerm(_Lean, z3.ArithRef):
    """A term of sort Int whose ``==`` and ``!=`` with a Python int or another ``IntTerm`` are
    built with z3's C API: the very terms z3py builds (``Z3_mk_eq``, ``Z3_mk_distinct`` of the
    two, the int as its numeral), without z3py's coercion of the operands, which the model's
    comparisons of fields with enum members make the larger part of building the branches
    and goals. Any other operand takes z3py's way."""

    def _operand(self, other: Any) -> Any:
        if isinstance(other, IntTerm):
            return other.ast
        if isinstance(other, int) and not isinstance(other, bool):
            return BACKEND.term(int(other)).ast
        return None

    def __eq__(self, other: Any) -> Any:  # type: ignore[override]
        memo = BACKEND.memo
        if memo is not None:
            key = ("==", id(self), id(other))
            hit = memo.get(key)
            if hit is not None:
                return hit[0]
        b = self._operand(other)
        if b is None:
            out = super().__eq__(other)
        else:
            out = BoolTerm.made(LIB.Z3_mk_eq(_CTX.ctx, self.ast, b))
        if memo is not None:
            memo[key] = (out, self, other)
        return out

    def __ne__(self, other: Any) -> Any:  # type: ignore[override]
        memo = BACKEND.memo
        if memo is not None:
            key = ("!=", id(self), id(other))
            hit = memo.get(key)
            if hit is not None:
                return hit[0]
        b = self._operand(other)
        if b is None:
            out = super().__ne__(other)
        else:
            out = BoolTerm.made(LIB.Z3_mk_distinct(_CTX.ctx, 2, (z3.Ast * 2)(self.ast, b)))
        if memo is not None:
            memo[key] = (out, self, other)
        return out

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
            parts.append(z3.Not(z3.Or(self.terms)) if hi == 0 else
                         at_most_one(self.terms, BACKEND.pairwise)
                         if hi == 1 and BACKEND.pairwise is not None else
                         z3.AtMost(*self.terms, hi))
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


def overlapping(terms: list) -> list[tuple[int, int]]:
    """The pairs of ``terms`` (by position) that some assignment makes true together; every
    other pair is exclusive in every assignment (no assumption): the query asking for two
    terms true together, none of them such a pair, is unsatisfiable when it returns."""
    solver = z3.SimpleSolver()
    solver.add(z3.AtLeast(*terms, 2))
    pairs: list[tuple[int, int]] = []
    while (verdict := solver.check()) == z3.sat:
        model = solver.model()
        on = [n for n, x in enumerate(terms) if z3.is_true(model.eval(x, True))]
        new = [(a, b) for k, a in enumerate(on) for b in on[k + 1:]]
        pairs += new
        solver.add(*[z3.Not(z3.And(terms[a], terms[b])) for a, b in new])
    if verdict != z3.unsat:
        raise z3.Z3Exception(f"the overlapping pairs of {len(terms)} terms: {verdict}")
    return pairs


def at_most_one(terms: list, memo: dict) -> Any:
    """At most one of ``terms`` true, as a conjunction over the pairs that can hold together
    (``overlapping``): equivalent to ``z3.AtMost(*terms, 1)`` in every assignment, since the
    other pairs never do. When most pairs are exclusive by their own terms (the ways forward
    of a task, of which 13 of 325 pairs overlap) it is a few binary clauses in place of the
    cardinality constraint the solver would search through in every frame."""
    key = ("at-most-one",) + tuple(id(x) for x in terms)
    hit = memo.get(key)
    if hit is None:
        pairs = sorted(overlapping(terms))     # in the terms' order, whatever model came first
        out = z3.And([z3.Not(z3.And(terms[a], terms[b])) for a, b in pairs]) if pairs \
            else z3.BoolVal(True)
        hit = memo[key] = (out, list(terms))
    return hit[0]


def _asts(xs: list) -> Any:
    return (z3.Ast * len(xs))(*[x.ast for x in xs])


def substitute(term: z3.ExprRef, pairs: list[tuple[z3.ExprRef, z3.ExprRef]]) -> z3.ExprRef:
    """``term`` with every ``(variable, value)`` replaced (pairs must agree in sort)."""
    if not pairs:
        return term
    ctx = term.ctx
    ref = LIB.Z3_substitute(ctx.ref(), term.as_ast(), len(pairs), _asts([a for a, _ in pairs]),
                            _asts([b for _, b in pairs]))
    if isinstance(term, z3.BoolRef) and ctx is _CTX:    # a Bool stays a Bool: z3 not asked
        return BoolTerm.made(ref)
    return z3.z3._to_expr_ref(_made(ref), ctx)


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
