"""The grammar of names: graph ids, task names, principal names and content ids on the wire.

    name = first *63 rest ;  first = a-z / 0-9 ;  rest = a-z / 0-9 / "." / "_" / "-"

A string outside it breaks one named rule: ``name-length`` (1 to 64
characters), ``name-start`` (a lowercase letter or a digit first) or
``name-charset`` (nothing but the characters above). A name is a wire-level
fact: a request naming its graph, task or content outside the grammar is
refused before it is decided (``rejected/bad-name``, no journal entry, nothing
changed), and a graph whose own names fall outside it is not a graph.
"""
from __future__ import annotations

import re
from typing import Any, Iterator

NAME_MAX = 64
RULES = ("name-length", "name-start", "name-charset")
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_FIRST = "abcdefghijklmnopqrstuvwxyz0123456789"

#: The fields of a wire request that hold names (a path of keys into the request).
REQUEST_NAMES = (("task",), ("cap", "graph"), ("cap", "task"), ("imports",), ("candidate",),
                 ("base",), ("correlation",))


def is_name(value: Any) -> bool:
    return type(value) is str and _NAME.fullmatch(value) is not None


def broken_rule(value: Any) -> str | None:
    """The rule a string breaks, ``None`` for a name."""
    if is_name(value):
        return None
    if type(value) is str and not 1 <= len(value) <= NAME_MAX:
        return "name-length"
    if type(value) is str and value[0] not in _FIRST:
        return "name-start"
    return "name-charset"


def request_names(wire: Any) -> Iterator[tuple[str, Any]]:
    """``(JSON pointer, value)`` of every name a wire request carries (absent ones skipped;
    an empty content id means none)."""
    if not isinstance(wire, dict):
        return
    for path in REQUEST_NAMES:
        v: Any = wire
        for part in path:
            v = v.get(part) if isinstance(v, dict) else None
        if v is None or (v == "" and path[0] in ("imports", "candidate", "base")):
            continue
        yield "/" + "/".join(path), v


def refused_name(wire: Any) -> str | None:
    """The pointer of the first name in a wire request outside the grammar, or ``None``."""
    for where, value in request_names(wire):
        if not is_name(value):
            return where
    return None
