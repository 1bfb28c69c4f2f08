"""Predicates over one task, shared by the rules, the invariants and the projections.

Like the rules they never branch on state with ``if``/``and``/``or``/``not``, so
the same code evaluates concretely and builds the z3 encoding.
"""
from __future__ import annotations

from typing import Any

from .logic import all_of
from .state import Binding, State, TaskState
from .vocab import AttemptState as AS, Exit, Phase, Receipt


def running(t: TaskState) -> Any:
    return t.attempt_state == AS.RUNNING


def owner_alive(t: TaskState) -> Any:
    """Environment truth: the process at the owner's pid has the owner's birth time."""
    return all_of(t.owner_birth != 0, t.proc_birth == t.owner_birth)


def reserved(t: TaskState) -> Any:
    """A completion transaction holds the attempt's terminal reservation."""
    return t.phase != Phase.ABSENT


def dirty(t: TaskState) -> Any:
    """The worktree holds bytes that differ from the attempt's clean start."""
    return all_of(t.worktree_present, t.worktree != t.origin)


def binding(t: TaskState) -> Binding:
    return Binding(t.fence, t.candidate, t.base)


def receipt_of(t: TaskState, kind: Receipt) -> Binding:
    return t.receipts[kind]


def has_receipt(t: TaskState, kind: Receipt) -> Any:
    return t.receipts[kind].fence != 0


def graph_saved(t: TaskState) -> Any:
    """Dependency-satisfying Done: a GraphSave receipt exists for the current attempt and
    nothing left the main line (a legacy claim never satisfies a dependency)."""
    return all_of(t.phase == Phase.GRAPH_SAVED, t.exit == Exit.NONE,
                  receipt_of(t, Receipt.GRAPH_SAVE).fence == t.fence, t.fence != 0)


def deps_done(s: State, i: int) -> Any:
    """Dependency readiness: every dependency of task ``i`` is dependency-satisfying Done."""
    return all_of(*[graph_saved(s.tasks[d]) for d in s.graph.deps[i]])


def receipts_agree(t: TaskState, upto: tuple[Receipt, ...]) -> Any:
    """Every listed receipt exists and is bound to the current fence, candidate and base."""
    b = binding(t)
    return all_of(*[receipt_of(t, k) == b for k in upto])


def seen(t: TaskState, kind: str, ident: str) -> Any:
    """The task's evidence holds ``(kind, ident)``."""
    return t.evidence.has((kind, ident))


def note_evidence(t: TaskState, kind: str, ident: str) -> Any:
    """The task's evidence with ``(kind, ident)`` noted (deduplicated by id)."""
    return t.evidence.add((kind, ident))
