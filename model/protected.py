"""Protected control-plane paths: the glob grammar of a graph's policy, its matcher, and the
fact the model decides on, ``Protected`` (which content ids touch a protected path).

The model never reads a diff: whether a candidate touches a protected path is a fact about
its content that the environment states (a trace's ``edit`` names the paths it writes, and
``touches`` matches them against the graph's patterns; a bounded instance marks a content
id). The implementation reads the real diff between base and candidate and has its own
copy of the grammar (``wgk.impl.protect``). Pure: no I/O.

Grammar (documented in docs/vocabulary.md, "Protected paths"): a pattern is segments joined
by ``/``, anchored at the repository root; ``**`` as a whole segment matches zero or more
segments; in any other segment ``*`` matches a run of characters and ``?`` one character,
never a ``/``; every other character is itself. No empty, ``.`` or ``..`` segment, no
leading or trailing ``/``, no NUL, at most 256 characters.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Iterable

from .logic import ite

MAX_PATTERN = 256


def pattern_problem(pattern: Any) -> str | None:
    """Why ``pattern`` is outside the grammar (``None``: it is a pattern)."""
    if not isinstance(pattern, str) or not pattern:
        return "a pattern is a non-empty string"
    if len(pattern) > MAX_PATTERN:
        return f"a pattern has at most {MAX_PATTERN} characters"
    if "\0" in pattern:
        return "a pattern holds no NUL"
    if pattern.startswith("/") or pattern.endswith("/"):
        return "a pattern is relative to the repository root: no leading or trailing '/'"
    for seg in pattern.split("/"):
        if seg in ("", ".", ".."):
            return f"a pattern has no empty, '.' or '..' segment ({pattern!r})"
        if "**" in seg and seg != "**":
            return f"'**' is a whole segment ({seg!r})"
    return None


@lru_cache(maxsize=256)
def _segment(seg: str) -> re.Pattern:
    out = []
    for ch in seg:
        out.append("[^/]*" if ch == "*" else "[^/]" if ch == "?" else re.escape(ch))
    return re.compile("".join(out), re.DOTALL)


def _match(pat: tuple[str, ...], path: tuple[str, ...]) -> bool:
    if not pat:
        return not path
    head, rest = pat[0], pat[1:]
    if head == "**":
        return any(_match(rest, path[k:]) for k in range(len(path) + 1))
    return bool(path) and _segment(head).fullmatch(path[0]) is not None and _match(rest, path[1:])


def matches(pattern: str, path: str) -> bool:
    """Whether the repository path ``path`` (``a/b/c``) is matched by ``pattern``."""
    return _match(tuple(pattern.split("/")), tuple(path.split("/")))


def touches(patterns: Iterable[str], paths: Iterable[str]) -> str | None:
    """The first of ``paths`` a pattern matches (``None``: none is protected)."""
    pats = list(patterns)
    for path in paths:
        if any(matches(p, path) for p in pats):
            return path
    return None


@dataclass(frozen=True)
class Protected:
    """Which content ids touch a protected path: a table of marked ids and the answer for
    every other id (a solver's interpretation decodes to one; a bounded instance marks
    one id; a trace marks the content of each edit whose paths a pattern matches)."""

    marked: frozenset = field(default_factory=frozenset)
    otherwise: bool = False
    unmarked: frozenset = field(default_factory=frozenset)

    def __call__(self, content: Any) -> Any:
        if isinstance(content, int):
            return (content in self.marked
                    or (self.otherwise and content not in self.unmarked))
        out: Any = self.otherwise
        for c in sorted(self.unmarked):
            out = ite(content == c, False, out)
        for c in sorted(self.marked):
            out = ite(content == c, True, out)
        return out


NOTHING_PROTECTED = Protected()
