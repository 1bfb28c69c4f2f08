"""What a mutant of the model is and how one is built: a rule of the model wrapped to drop
a guard or change its update, or a function of the model patched, installed only inside
``Semantics.active()`` and always restored (the catalogue is ``wgk.conformance.z3.mutants``).
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

from wgk.model.actions import Instance
from wgk.model.rules import RULES, guarded
from wgk.model.vocab import Code, Kind as K

from wgk.conformance.z3.transition import Semantics


# --- building blocks ------------------------------------------------------------------

def without_checks(kind: K, *codes: Code) -> Callable:
    """The model's rule for ``kind`` with the guards naming ``codes`` removed."""
    base = RULES[kind]

    def rule(s, i, t, r):
        g = base(s, i, t, r)
        return guarded([c for c in g.checks if not (isinstance(c[1], Code) and c[1] in codes)],
                       g.update, g.kind)
    rule.__name__ = f"{kind.name.lower()}_without_{'_'.join(c.name.lower() for c in codes)}"
    return rule


def with_update(kind: K, change: Callable) -> Callable:
    """The model's rule for ``kind`` whose post-state passes through ``change(s, i, t, r, s2)``."""
    base = RULES[kind]

    def rule(s, i, t, r):
        g = base(s, i, t, r)
        return guarded(g.checks, lambda: change(s, i, t, r, g.update()), g.kind)
    return rule


def with_check(kind: K, code: Code, cond: Callable) -> Callable:
    """The model's rule for ``kind`` with the guard naming ``code`` replaced by ``cond(s, i, t, r)``."""
    base = RULES[kind]

    def rule(s, i, t, r):
        g = base(s, i, t, r)
        return guarded([(cond(s, i, t, r), c) if c == code else (x, c) for x, c in g.checks],
                       g.update, g.kind)
    return rule


def task_update(change: Callable) -> Callable:
    """``change(t_before, t_after, s, r) -> t`` applied to the rule's own task."""
    def apply(s, i, t, r, s2):
        return s2.put(i, change(t, s2.tasks[i], s, r))
    return apply


@contextmanager
def patched(patches: tuple) -> Iterator[None]:
    """Install ``(object, name, value)`` patches (attributes, or keys of a dict); always restore."""
    saved = []
    try:
        for obj, name, new in patches:
            if isinstance(obj, dict):
                saved.append((obj, name, obj[name]))
                obj[name] = new
            else:
                saved.append((obj, name, getattr(obj, name)))
                setattr(obj, name, new)
        yield
    finally:
        for obj, name, old in reversed(saved):
            if isinstance(obj, dict):
                obj[name] = old
            else:
                setattr(obj, name, old)


@dataclass(frozen=True)
class Mutant:
    """A known-bad variant of the model and the check expected to catch it."""

    name: str
    incidents: tuple[int, ...]
    doc: str
    kills: str                          # the invariant BMC must find violated
    instance: Instance
    depth: int
    rules: dict = field(default_factory=dict)
    decide: Callable | None = None
    patches: tuple = ()
    # the property whose inductive proof must fail, when it is not ``kills``: a lemma the
    # mutant breaks first, under which the named invariant stays inductive (declared here,
    # reported as a lemma kill)
    proof_by: str | None = None

    @property
    def proof_target(self) -> str:
        return self.proof_by or self.kills

    def semantics(self) -> Semantics:
        table = dict(RULES)
        table.update(self.rules)
        ctx = (lambda: patched(self.patches)) if self.patches else None
        return Semantics(self.name, table, self.decide, ctx)

    @property
    def changed_kinds(self) -> tuple[K, ...]:
        return tuple(self.rules)
