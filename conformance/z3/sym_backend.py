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
