"""Logic shared by concrete and symbolic evaluation of the rules.

The rules in ``wgk.model`` are written once. Run on a concrete state they are
ordinary Python; run on a state whose fields are solver terms (see
``wgk.conformance.z3.symbolic``) the very same functions build the z3 encoding.
To make that possible, rule code never branches with ``if``/``and``/``or``/
``not`` on *state* values: it uses ``ite``, ``all_of``, ``any_of``, ``not_``
and ``implies`` from here. Request parameters are always concrete, so code may
branch on them freely.

The model itself does not import a solver: a symbolic backend registers the
four primitive constructors with ``use_backend`` (and may offer a fifth,
``count``, for a sum of conditions it can compare without arithmetic).
"""
from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import Any, Callable, Protocol


class Backend(Protocol):
    def ite(self, c: Any, a: Any, b: Any) -> Any: ...
    def and_(self, xs: list) -> Any: ...
    def or_(self, xs: list) -> Any: ...
    def not_(self, x: Any) -> Any: ...


_backend: Backend | None = None


def use_backend(backend: Backend | None) -> None:
    """Install (or remove) the symbolic backend used for non-concrete terms."""
    global _backend
    _backend = backend


def _sym() -> Backend:
    if _backend is None:
        raise TypeError("symbolic term met with no symbolic backend installed")
    return _backend


def is_true(x: Any) -> bool:
    return x is True


def all_of(*xs: Any) -> Any:
    """Conjunction; short-circuits on concrete values."""
    rest = []
    for x in xs:
        if x is False:
            return False
        if x is True:
            continue
        rest.append(x)
    if not rest:
        return True
    return rest[0] if len(rest) == 1 else _sym().and_(rest)


def any_of(*xs: Any) -> Any:
    """Disjunction; short-circuits on concrete values."""
    rest = []
    for x in xs:
        if x is True:
            return True
        if x is False:
            continue
        rest.append(x)
    if not rest:
        return False
    return rest[0] if len(rest) == 1 else _sym().or_(rest)


def not_(x: Any) -> Any:
    if x is True:
        return False
    if x is False:
        return True
    return _sym().not_(x)


def implies(a: Any, b: Any) -> Any:
    return any_of(not_(a), b)


def iff(a: Any, b: Any) -> Any:
    return all_of(implies(a, b), implies(b, a))


def one_of(x: Any, options) -> Any:
    """``x`` equals one of the concrete ``options``."""
    if isinstance(x, int):                     # concrete (bool and IntEnum are ints too)
        return x in options
    return any_of(*[x == o for o in options])


def ite(c: Any, a: Any, b: Any) -> Any:
    """If-then-else over values, tuples, dataclasses and containers."""
    if c is True:
        return a
    if c is False:
        return b
    if a is b:
        return a
    merge = getattr(a, "__ite__", None)
    if merge is not None:
        return merge(c, b)
    if isinstance(a, tuple):
        return tuple(ite(c, x, y) for x, y in zip(a, b, strict=True))
    if is_dataclass(a):
        changes = {}
        for f in fields(a):
            x, y = getattr(a, f.name), getattr(b, f.name)
            if x is not y:
                changes[f.name] = ite(c, x, y)
        return replace(a, **changes) if changes else a
    if isinstance(a, (bool, int)) and isinstance(b, (bool, int)) and a == b and type(a) is type(b):
        return a
    return _sym().ite(c, a, b)


def count(xs) -> Any:
    """Number of true terms in ``xs`` (concrete int or solver term).

    With a symbolic term among them and a backend offering ``count(known, terms)``, the
    backend's term: the same number, ``known`` plus the true ones of ``terms``."""
    xs = list(xs)
    terms = [x for x in xs if x is not True and x is not False]
    if terms:
        native = getattr(_sym(), "count", None)
        if native is not None:
            return native(sum(x is True for x in xs), terms)
    total: Any = 0
    for x in xs:
        if x is True:
            total = total + 1
        elif x is False:
            continue
        else:
            total = total + ite(x, 1, 0)
    return total


def first_failure(checks: list[tuple[Any, Any]], ok_value: Any) -> Any:
    """The value paired with the first false condition, or ``ok_value``.

    ``checks`` is a list of ``(condition, value_if_condition_fails)``.
    """
    result = ok_value
    for cond, value in reversed(checks):
        result = ite(cond, result, value)
    return result


Lazy = Callable[[], Any]
