"""Results kept per what was read: a pure function of a state, computed once per values of
the state's fields it reads.

``ByReads(fn)`` runs ``fn(s, i)`` on a stand-in of ``s`` that records which fields of which
tasks are read (the target and the clock are in every key; the graph is constant; the
journal, anything else of a task and comparing or hashing a task or state are refused:
``Untraceable``, and that call is answered by ``fn`` on the real state, unkept). The result
is kept under the values of every field any call so far has read. A pure function reads
the same fields again on a state equal to a kept one on those fields (it takes the same
branches on the same values), so it gives the same result: a kept result is exact. When a
call reads a field not in the key yet, the key widens and what was kept is dropped.
"""
from __future__ import annotations

from typing import Any, Callable

from wgk.model.state import State, TASK_FIELDS


class Untraceable(Exception):
    """The model did something with a traced or recorded value that cannot be followed."""


_FIELD_SET = frozenset(TASK_FIELDS)


class _Refuse:
    """What a kept function may not look at: anything read raises ``Untraceable``."""

    __slots__ = ()

    def __getattr__(self, name):
        raise Untraceable(f"{name!r} of another task or the journal was read")

    def __eq__(self, other):
        raise Untraceable("a state or a task was compared")

    __ne__ = __eq__

    def __hash__(self):
        raise Untraceable("a state or a task was hashed")


class _TaskReads(_Refuse):
    """Task ``j``'s state, recording which of its fields are read (anything else refused);
    a field read once is kept on the stand-in, so reading it again costs a plain lookup."""

    def __init__(self, t, j: int, seen: set):
        self._t = t
        self._j = j
        self._seen = seen

    def __getattr__(self, name):
        if name not in _FIELD_SET:
            raise Untraceable(f"{name!r} of a task was read")
        self._seen.add((self._j, name))
        v = self.__dict__[name] = getattr(self._t, name)
        return v


class StateReads(_Refuse):
    """A state whose tasks record their reads (only task ``only``'s, when given: the others
    are refused); the graph, the target and the clock are read freely."""

    __slots__ = ("graph", "tasks", "target", "now")

    def __init__(self, s: State, seen: set, only: int | None = None):
        self.graph = s.graph
        self.tasks = tuple(_TaskReads(t, j, seen) if only is None or j == only else _Refuse()
                           for j, t in enumerate(s.tasks))
        self.target = s.target
        self.now = s.now


def _getter(reads: frozenset) -> Callable[[State], tuple]:
    """``get(s)``: the values of ``reads`` (``(task index, field)``), the target and the clock."""
    parts = "".join(f"T[{j}].{f}, " for j, f in sorted(reads))
    ns: dict = {}
    exec(f"def get(s):\n    T = s.tasks\n    return ({parts}s.target, s.now)\n", ns)
    return ns["get"]


class Kept:
    """The results of one function for one task index, by the values of what it read."""

    __slots__ = ("reads", "get", "table")

    def __init__(self):
        self.reads: frozenset = frozenset()
        self.get = _getter(self.reads)
        self.table: dict = {}

    def widen(self, seen: set) -> None:
        self.reads = self.reads | seen
        self.get = _getter(self.reads)
        self.table = {}


class ByReads:
    """``fn(s, i)`` kept per task index ``i`` and the values of what it read (``local``: it
    may read task ``i`` only)."""

    def __init__(self, fn: Callable[[Any, int], Any], local: bool = False):
        self.fn = fn
        self.local = local
        self.kept: dict[int, Kept] = {}
        self.refused = 0        # calls answered on the real state, unkept

    def __call__(self, s: State, i: int) -> Any:
        k = self.kept.get(i)
        if k is None:
            k = self.kept[i] = Kept()
        key = k.get(s)
        try:
            return k.table[key]
        except KeyError:
            pass
        seen: set = set()
        try:
            out = self.fn(StateReads(s, seen, i if self.local else None), i)
        except Untraceable:
            self.refused += 1
            return self.fn(s, i)
        if not seen <= k.reads:
            k.widen(seen)
            key = k.get(s)
        k.table[key] = out
        return out
