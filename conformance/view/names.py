"""Content ids and sessions by name.

The model interns content (worktree bytes, candidates, bases, target commits)
and sessions as small ints; the page shows names. ``ViewNames`` is a
``wgk.model.observe.Names`` that gives every name read from a trace an int far
above those the enumeration of a bounded instance writes (the initial target
1, the foreign commit 2, the bytes ``1000*(task+1) + 100*generation +
10*attempt + version + 3``), so exploring from a loaded trace never confuses
the two, and names the enumeration's ints readably the first time they are
shown: ``main-0``, ``main-1``, ``t1-a1-v0`` (task 1, attempt 1, before the
first candidate version), ``s111``.
"""
from __future__ import annotations

from dataclasses import dataclass

from wgk.model.observe import Names

FIRST = 100_001


@dataclass
class ViewNames(Names):
    """Two-way names that never reuse an int and name every int it is shown."""

    def cid(self, name: str | None) -> int:
        if name is None or name == "":
            return 0
        if name not in self.content:
            self.content[name] = max([FIRST - 1, *self.content.values()]) + 1
        return self.content[name]

    def sid(self, name: str | int | None) -> int:
        if name is None or name == "":
            return 0
        key = str(name)
        if key not in self.sessions:
            self.sessions[key] = max([FIRST - 1, *self.sessions.values()]) + 1
        return self.sessions[key]

    def cname(self, n: int) -> str | None:
        if n == 0:
            return None
        for k, v in self.content.items():
            if v == n:
                return k
        return _register(self.content, readable_content(n), n)

    def sname(self, n: int) -> str | None:
        if n == 0:
            return None
        for k, v in self.sessions.items():
            if v == n:
                return k
        return _register(self.sessions, f"s{n}", n)


def _register(table: dict[str, int], name: str, n: int) -> str:
    unique, k = name, 1
    while unique in table:
        k += 1
        unique = f"{name}~{k}"
    table[unique] = n
    return unique


def readable_content(n: int) -> str:
    """The name of a content int the enumeration of a bounded instance wrote."""
    if n in (1, 2):
        return f"main-{n - 1}"
    task, rest = divmod(n, 1000)
    generation, rest = divmod(rest, 100)
    attempt, version = divmod(rest, 10)
    if 1 <= task <= 9 and version >= 3:
        gen = f"-g{generation}" if generation else ""
        return f"t{task}{gen}-a{attempt}-v{version - 3}"
    return f"c{n}"
