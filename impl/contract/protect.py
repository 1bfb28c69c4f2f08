"""Protected control-plane paths: the graph policy's glob patterns and their matcher.

A graph's policy may list protected path patterns (``Kernel.create_graph(...,
protected_paths=[...])``, ``wgk kernel init --protect PATTERN``). Sealing a candidate reads
the real diff between its base and the candidate (``Repository.changed_paths``: ``git diff
--no-renames --name-only -z``) and holds the transaction in ``needs-repair`` with reason
``protected-path`` when a changed path matches a pattern, whatever a validator would say.

The grammar (docs/vocabulary.md, "Protected paths"): segments joined by ``/``, anchored at
the repository root; a segment that is exactly ``**`` spans any number of segments (none
included); otherwise ``*`` spans characters and ``?`` a single one, neither crossing a
``/``; other characters match themselves, case and all. No empty, ``.`` or ``..`` segment, no leading or
trailing ``/``, no NUL, at most 256 characters. This is the implementation's own copy.
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Iterable

from .errors import GraphError

MAX_PATTERN = 256
#: The graph config key (``meta`` ``config:protected-paths``) holding the patterns as JSON.
CONFIG_KEY = "protected-paths"


def problem(pattern: object) -> str | None:
    """Why ``pattern`` is not a protected path pattern (``None``: it is one)."""
    if not isinstance(pattern, str) or not pattern:
        return "a pattern is a non-empty string"
    if len(pattern) > MAX_PATTERN:
        return f"a pattern has at most {MAX_PATTERN} characters"
    if "\0" in pattern:
        return "a pattern holds no NUL"
    if pattern[0] == "/" or pattern[-1] == "/":
        return "a pattern is relative to the repository root: no leading or trailing '/'"
    for seg in pattern.split("/"):
        if seg in ("", ".", ".."):
            return f"a pattern has no empty, '.' or '..' segment ({pattern!r})"
        if "**" in seg and seg != "**":
            return f"'**' is a whole segment ({seg!r})"
    return None


def checked(patterns: Iterable[object]) -> list[str]:
    """The patterns, each checked (``GraphError`` naming the first one outside the grammar)."""
    out = []
    for n, p in enumerate(patterns):
        bad = problem(p)
        if bad is not None:
            raise GraphError(f"protected path {n} ({p!r}): {bad}")
        out.append(p)
    return out


def encode(patterns: Iterable[str]) -> str:
    return json.dumps(list(patterns), separators=(",", ":"))


def decode(text: str | None) -> tuple[str, ...]:
    return tuple(json.loads(text)) if text else ()


@lru_cache(maxsize=512)
def _segment(seg: str) -> re.Pattern:
    return re.compile("".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c)
                              for c in seg), re.DOTALL)


def _match(pat: tuple[str, ...], path: tuple[str, ...]) -> bool:
    while pat:
        head = pat[0]
        if head == "**":
            rest = pat[1:]
            return any(_match(rest, path[k:]) for k in range(len(path) + 1))
        if not path or _segment(head).fullmatch(path[0]) is None:
            return False
        pat, path = pat[1:], path[1:]
    return not path


def matches(pattern: str, path: str) -> bool:
    """Whether the repository path ``path`` is matched by ``pattern``."""
    return _match(tuple(pattern.split("/")), tuple(path.split("/")))


def protected_change(patterns: Iterable[str], paths: Iterable[str]) -> tuple[str, str] | None:
    """The first changed path a pattern matches, with that pattern (``None``: none)."""
    pats = tuple(patterns)
    for path in paths:
        for p in pats:
            if matches(p, path):
                return path, p
    return None
