"""The registry of transitions: each rule is declared with the kind it decides and
the fields it may change, where it is defined.

``@rule(K.ASSIGN, touches={"assigned"})`` registers the decorated function as
the rule of ``K.ASSIGN`` in ``RULES`` and its fields in ``TOUCHES`` (the TLA+
``UNCHANGED`` idea, inverted: every field not listed stays); a test checks
every applied step against it. Both tables are filled by the decorations in
``wgk.model.rules`` and by nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from .state import State
from .vocab import DecisionKind as D, Kind as K


@dataclass(frozen=True)
class Guarded:
    """A rule's answer: guards, the update if they all hold, the decision kind."""

    checks: list
    update: Callable[[], State]
    kind: Any = D.APPLIED


def guarded(checks: list, update: Callable[[], State], kind: Any = D.APPLIED) -> Guarded:
    return Guarded(checks, update, kind)


#: Per kind, the rule that decides it (filled by ``@rule``).
RULES: dict[K, Callable] = {}

#: Per kind, the TaskState fields (and "target") its rule may change (filled by ``@rule``).
TOUCHES: dict[K, frozenset[str]] = {}

#: Per kind, what its rule may read (filled by ``@rule(reads=...)``): "self" (the task's
#: fields, its policy and its evidence of the request's own id), "deps.done" (whether all
#: its dependencies are dependency-satisfying Done), "deps.generation" (the sum of their
#: generations), "target", "now", "dependents.committed"
#: (whether some task depending on it has its effect prepared or later: only a refusal). A kind without an
#: entry declares nothing; ``wgk prove --unbounded`` refuses it.
READS: dict[K, frozenset[str]] = {}
READ_TOKENS = frozenset({"self", "self.evidence", "deps.done", "deps.abandoned", "target", "now",
                         "deps.generation", "dependents.committed"})

# Field sets several rules share.
CLOSE = frozenset({"attempt_state", "retained", "retained_base", "worktree_lease", "session_lease", "finish_lease",
                   "deadline", "owner_pid", "owner_birth", "session", "wrapper_epoch",
                   "child_epoch", "owner_seen", "proc_birth"})
OPEN = frozenset({"attempt", "fence", "lease_epoch", "attempt_state", "token", "failure", "owner_pid", "owner_birth",
                  "session", "wrapper_epoch", "child_epoch", "owner_seen", "proc_birth",
                  "worktree_lease", "session_lease", "finish_lease", "worktree",
                  "worktree_present", "origin", "built_on", "worktree_base", "saved_work", "imported", "phase", "exit",
                  "reason", "revision", "candidate", "base", "version", "disposition",
                  "receipts", "deadline", "effect_done", "completion_receipt"})
EDGE = frozenset({"phase", "revision"})
EXIT = frozenset({"exit", "reason", "revision"})


def rule(kind: K, *, touches: Iterable[str],
         reads: Iterable[str] | None = None) -> Callable[[Callable], Callable]:
    """Register the decorated function as the rule of ``kind``, changing only ``touches``
    and reading only ``reads`` (tokens of ``READ_TOKENS``)."""
    unknown = sorted(set(reads or ()) - READ_TOKENS)
    if unknown:
        raise ValueError(f"{kind.label} reads unknown parts: {', '.join(unknown)}")

    def register(fn: Callable) -> Callable:
        # (no subscripts of RULES here: registering is not deciding, and the complexity
        # report counts a function that subscripts a rules table as a reducer)
        other = RULES.get(kind)
        if other is not None:
            raise ValueError(f"{kind.label} has two rules: {other.__name__} and {fn.__name__}")
        RULES.update({kind: fn})
        TOUCHES.update({kind: frozenset(touches)})
        if reads is not None:
            READS.update({kind: frozenset(reads)})
        return fn
    return register


def changed_fields(before: State, after: State, i: int) -> set[str]:
    """Names of task ``i``'s fields (and "target"/"now") that differ between two states."""
    from .state import TASK_FIELDS
    t, t2 = before.tasks[i], after.tasks[i]
    out = {f for f in TASK_FIELDS if getattr(t, f) != getattr(t2, f)}
    if before.target != after.target:
        out.add("target")
    if before.now != after.now:
        out.add("now")
    return out
