"""Name syntax shared by graph ids, task names, principals and content ids on the wire.

    name = first *63 rest
    first = "a"-"z" / "0"-"9"
    rest  = "a"-"z" / "0"-"9" / "." / "_" / "-"

Each way a string can fall outside it has a rule name, used in every refusal:
``name-length`` (between 1 and 64 characters), ``name-start`` (it begins with a digit or a
lowercase letter, never ``-``, ``.`` or ``_``: no name reads as an option of
``git`` nor a hidden or relative path), ``name-charset`` (nothing else: no
``/``, no upper case, no space, no NUL, nothing outside ASCII). A name therefore
is one path component and one ref component, and two names that differ are
different on a case-insensitive filesystem too; ``git.GitRepository`` derives
its refs and worktree paths from them (docs/vocabulary.md, "Names").

This is the implementation's own copy of the grammar (``wgk.model.names`` is the
model's); a test checks that the two agree.
"""
from __future__ import annotations

import re
import reprlib

NAME_MAX = 64
RULES = ("name-length", "name-start", "name-charset")
GRAMMAR = f"1 to {NAME_MAX} of a-z 0-9 . _ -, starting with a letter or a digit"
_FIRST = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_REST = _FIRST | frozenset("._-")
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def problem(name: object) -> tuple[str, str] | None:
    """``(rule, what is wrong)`` for a string outside the grammar, ``None`` for a name."""
    if type(name) is str and _NAME.fullmatch(name):
        return None
    if type(name) is not str:
        return "name-charset", f"a name is a string, not {type(name).__name__}"
    if not 1 <= len(name) <= NAME_MAX:
        return "name-length", f"{len(name)} characters"
    if name[0] not in _FIRST:
        return "name-start", f"starts with {_char(name[0])}"
    bad = next(c for c in name if c not in _REST)
    return "name-charset", f"{_char(bad)} at position {name.index(bad)}"


def is_name(value: object) -> bool:
    return type(value) is str and _NAME.fullmatch(value) is not None


def describe(what: str, name: object) -> str | None:
    """One line naming the rule a string breaks (``None`` when it is a name)."""
    p = problem(name)
    if p is None:
        return None
    rule, detail = p
    return f"{what} {short(name)}: rule {rule}: {detail} (a name is {GRAMMAR})"


def short(value: object, limit: int = 80) -> str:
    """``repr`` of a value cut to ``limit`` characters (nested values shown shallowly; an
    integer too long to print, by its size)."""
    try:
        text = _SHALLOW.repr(value)
    except ValueError:                      # int -> str beyond the interpreter's digit limit
        text = f"an integer of {value.bit_length()} bits" if isinstance(value, int) else "?"
    return text if len(text) <= limit else text[:limit] + "…"


def _char(c: str) -> str:
    return repr(c) if c.isprintable() and c.isascii() else f"U+{ord(c):04X}"


def _shallow() -> reprlib.Repr:
    r = reprlib.Repr()
    r.maxlevel, r.maxstring, r.maxother, r.maxlong = 3, 90, 90, 90
    r.maxdict = r.maxlist = r.maxtuple = r.maxset = r.maxfrozenset = r.maxdeque = 6
    return r


_SHALLOW = _shallow()
