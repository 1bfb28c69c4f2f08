"""Predicates over one task, shared by the rules, the invariants and the projections.

Like the rules they never branch on state with ``if``/``and``/``or``/``not``, so
the same code evaluates concretely and builds the z3 encoding.
"""
from __future__ import annotations

from typing import Any

from .logic import all_of, any_of, one_of
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


#: The phases from which a task's effect is prepared, committed or Done: the first durable
#: terminal, which a reopen of a dependency no longer overtakes.
COMMITTED_PHASES = (Phase.EFFECT_PREPARED, Phase.EFFECT_COMMITTED, Phase.CLEANUP_PREPARED,
                    Phase.CLEANUP_COMMITTED, Phase.GRAPH_SAVED)


def committed(t: TaskState) -> Any:
    """The task's effect is prepared or committed, or the task is Done (whatever side exit
    it took since: its effect may already exist)."""
    return any_of(one_of(t.phase, COMMITTED_PHASES), t.effect_done)


def dependents_committed(s: State, i: int) -> Any:
    """Some task depending on task ``i`` is ``committed``: a reopen of ``i`` would come too late."""
    return any_of(*[committed(s.tasks[j]) for j, deps in enumerate(s.graph.deps) if i in deps])


def deps_generation(s: State, i: int) -> Any:
    """The sum of task ``i``'s dependencies' generations (generations only grow, so the sum
    grows whenever one of them is reset or reopened)."""
    return sum((s.tasks[d].generation for d in s.graph.deps[i]), 0)


def deps_current(s: State, i: int, t: TaskState) -> Any:
    """Every dependency is Done on the generation the current attempt opened on."""
    return all_of(deps_done(s, i), t.deps_generation == deps_generation(s, i))


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
