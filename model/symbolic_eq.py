"""Structural equality of two states that works on concrete and symbolic fields."""
from __future__ import annotations

from dataclasses import fields, is_dataclass
from typing import Any

from .logic import all_of


def value_eq(a: Any, b: Any) -> Any:
    if a is b:
        return True
    eq = getattr(a, "__sym_eq__", None)
    if eq is not None:
        return eq(b)
    if isinstance(a, tuple) and not hasattr(a, "lookup") and type(a) is tuple:
        return all_of(*[value_eq(x, y) for x, y in zip(a, b, strict=True)])
    if is_dataclass(a):
        return all_of(*[value_eq(getattr(a, f.name), getattr(b, f.name)) for f in fields(a)
                        if f.compare])
    return a == b


def state_eq(s, s2) -> Any:
    """Every compared field of ``s`` equals the one of ``s2``."""
    return value_eq(s, s2)
