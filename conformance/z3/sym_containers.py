"""Symbolic counterparts of the model's two containers over bounded domains: evidence
(one Bool per ``(kind, id)`` of a fixed universe) and the journal (a fixed number of keys)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import z3

from wgk.model.logic import all_of, count, ite
from wgk.model.symbolic_eq import value_eq


# --- evidence ---------------------------------------------------------------------

class SymEvidence:
    """A task's evidence over a bounded universe of ``(kind, id)`` pairs: one Bool each.

    A pair outside ``bits`` is absent. ``log``, when given, collects every pair
    the rules ask about or add (used once to discover the universe)."""

    __slots__ = ("bits", "log")

    def __init__(self, bits: dict, log: set | None = None):
        self.bits = bits
        self.log = log

    def has(self, item) -> Any:
        if self.log is not None:
            self.log.add(item)
        return self.bits.get(item, False)

    def add(self, item) -> "SymEvidence":
        if self.log is not None:
            self.log.add(item)
        if self.bits.get(item, False) is True:
            return self
        bits = dict(self.bits)
        bits[item] = True
        return SymEvidence(bits, self.log)

    def count(self, pred) -> Any:
        return count([all_of(b, pred(item)) for item, b in self.bits.items()])

    def __ite__(self, c: Any, other: "SymEvidence") -> "SymEvidence":
        if other is self:
            return self
        keys = list(self.bits) + [k for k in other.bits if k not in self.bits]
        bits = {}
        for k in keys:
            a, b = self.bits.get(k, False), other.bits.get(k, False)
            bits[k] = a if a is b else ite(c, a, b)
        return SymEvidence(bits, self.log if self.log is not None else other.log)

    def __sym_eq__(self, other: "SymEvidence") -> Any:
        keys = list(self.bits) + [k for k in other.bits if k not in self.bits]
        return all_of(*[value_eq(self.bits.get(k, False), other.bits.get(k, False)) for k in keys])


# --- journal ----------------------------------------------------------------------

@dataclass(frozen=True)
class SymDigest:
    """The digest of a symbolic request: its shape id and the values of its symbolic fields."""

    shape: Any
    slots: dict          # slot index -> term


@dataclass(frozen=True)
class SymEntry:
    """One key's journal entry: used, the stored digest, the stored decision."""

    used: Any
    shape: Any
    slots: tuple
    kind: Any
    code: Any


class SymJournal:
    """Idempotency journal over a fixed set of keys (key ``k`` is the ``k``-th entry).

    Digests compare by shape and by the slots the request's shape uses, so two
    requests with the same shape and the same field values have the same digest,
    as the concrete sha256 digests do.

    A journal is immutable and its entries are terms, so ``lookup`` and ``__sym_eq__`` are
    pure: their results are kept per journal (a proof asks the pre-state's journal the same
    lookup, and compares it with the same post-state's, for several properties of one
    branch). Each memo entry keeps its arguments alive, so an ``id`` is never reused for
    another object while its entry stands."""

    __slots__ = ("entries", "_memo")

    def __init__(self, entries: tuple):
        self.entries = entries
        self._memo: dict = {}

    def _same(self, e: SymEntry, d: SymDigest) -> Any:
        return all_of(e.used, e.shape == d.shape, *[e.slots[j] == v for j, v in d.slots.items()])

    def lookup(self, key, digest: SymDigest) -> tuple[Any, Any, Any, Any]:
        memo = ("lookup", _ident(key), id(digest))
        hit = self._memo.get(memo)
        if hit is None:
            hit = self._memo[memo] = (key, digest, self._lookup(key, digest))
        return hit[2]

    def _lookup(self, key, digest: SymDigest) -> tuple[Any, Any, Any, Any]:
        used: Any = False
        same: Any = False
        kind: Any = 0
        code: Any = 0
        for k in reversed(range(len(self.entries))):
            e = self.entries[k]
            hit = key == k
            used = ite(hit, e.used, used)
            same = ite(hit, self._same(e, digest), same)
            kind = ite(hit, e.kind, kind)
            code = ite(hit, e.code, code)
        return used, same, kind, code

    def answering(self, key, digest: SymDigest, answer: tuple) -> "Answering":
        """This journal (the same entries) whose ``lookup`` of ``key`` and ``digest`` gives
        ``answer`` (used, same, kind, code), each a value or a term: this journal wherever
        the lookup's own answer is ``answer``, which the caller assumes (a case of it)."""
        return Answering(self.entries, key, digest, answer)

    def put(self, key, digest: SymDigest, kind, code) -> "SymJournal":
        width = len(self.entries[0].slots) if self.entries else 0
        slots = tuple(digest.slots.get(j, 0) for j in range(width))
        new = SymEntry(True, digest.shape, slots, kind, code)
        return SymJournal(tuple(_entry_ite(key == k, new, e) for k, e in enumerate(self.entries)))

    def __ite__(self, c: Any, other: "SymJournal") -> "SymJournal":
        if other is self:
            return self
        return SymJournal(tuple(_entry_ite(c, a, b) for a, b in zip(self.entries, other.entries,
                                                                    strict=True)))

    def __sym_eq__(self, other: "SymJournal") -> Any:
        memo = ("eq", id(other))
        hit = self._memo.get(memo)
        if hit is None:
            hit = self._memo[memo] = (other, self._eq(other))
        return hit[1]

    def _eq(self, other: "SymJournal") -> Any:
        out = []
        for a, b in zip(self.entries, other.entries, strict=True):
            if a is b:
                continue
            out += [_leaf_eq(a.used, b.used), _leaf_eq(a.shape, b.shape),
                    *[_leaf_eq(x, y) for x, y in zip(a.slots, b.slots, strict=True)],
                    _leaf_eq(a.kind, b.kind), _leaf_eq(a.code, b.code)]
        return all_of(*out)


class Answering(SymJournal):
    """A journal answering one lookup as its case assumes (``SymJournal.answering``);
    ``asked`` is set whenever that lookup is asked."""

    __slots__ = ("_key", "_digest", "_answer", "asked")

    def __init__(self, entries: tuple, key: Any, digest: SymDigest, answer: tuple):
        super().__init__(entries)
        self._key, self._digest, self._answer = _ident(key), digest, answer
        self.asked = False

    def lookup(self, key, digest: SymDigest) -> tuple[Any, Any, Any, Any]:
        if digest is self._digest and _ident(key) == self._key:
            self.asked = True
            return self._answer
        return super().lookup(key, digest)


def _entry_ite(c: Any, a: SymEntry, b: SymEntry) -> SymEntry:
    """``logic.ite(c, a, b)`` of two journal entries: the same entry, field by field in the
    same order, without the generic walk over a dataclass's fields."""
    if c is True:
        return a
    if c is False:
        return b
    if a is b:
        return a
    used = a.used if a.used is b.used else _leaf_ite(c, a.used, b.used)
    shape = a.shape if a.shape is b.shape else _leaf_ite(c, a.shape, b.shape)
    slots = a.slots if a.slots is b.slots else tuple(
        _leaf_ite(c, x, y) for x, y in zip(a.slots, b.slots, strict=True))
    kind = a.kind if a.kind is b.kind else _leaf_ite(c, a.kind, b.kind)
    code = a.code if a.code is b.code else _leaf_ite(c, a.code, b.code)
    if used is a.used and shape is a.shape and slots is a.slots and kind is a.kind \
            and code is a.code:
        return a
    return SymEntry(used, shape, slots, kind, code)


def _leaf_ite(c: Any, a: Any, b: Any) -> Any:
    """``logic.ite(c, a, b)`` of two leaves (a Python value or a z3 term; ``c`` a term)."""
    if a is b:
        return a
    if isinstance(a, z3.ExprRef) or isinstance(b, z3.ExprRef):
        from wgk.conformance.z3.sym_backend import BACKEND
        return BACKEND.ite(c, a, b)
    return ite(c, a, b)


def _ident(x: Any) -> Any:
    """A key for ``x`` in a memo: a z3 term by its id (terms are hash-consed), a Python value
    by itself."""
    return ("ast", x.get_id()) if isinstance(x, z3.AstRef) else ("value", type(x), x)


def _leaf_eq(a: Any, b: Any) -> Any:
    """``a == b`` of two leaves (a Python value or a z3 term): ``True`` when they are the same
    term, else the equation built with z3's C API (the journal's entries hold many leaves a
    step leaves as they were)."""
    if a is b:
        return True
    if not isinstance(a, z3.ExprRef) and not isinstance(b, z3.ExprRef):
        return a == b
    from wgk.conformance.z3.sym_backend import BACKEND
    return BACKEND.eq(a, b)
