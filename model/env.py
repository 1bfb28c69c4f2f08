"""Environment steps: what happens in the world the kernel observes.

They are not requests and get no decision; a trace or the explorer applies
them between requests. Each is guard-then-update like a rule; a step whose
guard fails is not possible in that state (``EnvError`` for traces, simply not
enabled for the explorer).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from .logic import all_of, any_of, ite, one_of
from .predicates import running
from .state import State
from .vocab import Exit, Labelled, Phase


class EnvKind(Labelled):
    EDIT = 1            # the owner writes bytes into its worktree
    OWNER_DIES = 2      # the owner process exits or is killed
    PID_REUSE = 3       # another process now has the owner's pid (new birth time)
    MOVE_TARGET = 4     # someone else moves the target ref
    TICK = 5            # the clock advances
    CRASH = 6           # the kernel process crashes and restarts (durable state kept)
    LOST_RESPONSE = 7   # the response to the previous request never reached the client


class EnvError(ValueError):
    """An environment step that is not possible in the current state."""


@dataclass(frozen=True, slots=True)
class EnvStep:
    kind: EnvKind
    task: str = ""
    content: int = 0     # edit: new worktree content; move-target: new target commit
    birth: int = 0       # pid-reuse: birth time of the new process
    amount: int = 1      # tick
    onto: int = 0        # edit: the owner first rebased its work onto this commit (the target)

    def to_json(self) -> dict:
        out: dict[str, Any] = {"env": self.kind.label}
        if self.task:
            out["task"] = self.task
        if self.kind in (EnvKind.EDIT, EnvKind.MOVE_TARGET):
            out["content"] = self.content
        if self.kind == EnvKind.EDIT and self.onto:
            out["onto"] = self.onto
        if self.kind == EnvKind.PID_REUSE:
            out["birth"] = self.birth
        if self.kind == EnvKind.TICK:
            out["amount"] = self.amount
        return out


def writable(t) -> Any:
    """The owner may still write: running, alive, worktree present, writer not quiesced."""
    return all_of(running(t), t.worktree_present, t.proc_birth == t.owner_birth,
                  any_of(all_of(t.exit == Exit.NONE, one_of(t.phase, (Phase.ABSENT, Phase.PREPARED))),
                         t.exit == Exit.NEEDS_REPAIR))


def guard_and_update(s: State, e: EnvStep) -> tuple[Any, Callable[[], State]]:
    """(enabled, update) for one environment step."""
    if e.kind in (EnvKind.CRASH, EnvKind.LOST_RESPONSE):
        return True, lambda: s
    if e.kind == EnvKind.TICK:
        return e.amount > 0, lambda: replace(s, now=s.now + e.amount)
    if e.kind == EnvKind.MOVE_TARGET:
        return s.target != e.content, lambda: replace(s, target=e.content)
    i = s.graph.index.get(e.task)
    if i is None:
        return False, lambda: s
    t = s.tasks[i]
    if e.kind == EnvKind.EDIT:
        # a rebase is onto the target as it is now; the bytes are then built on it
        return all_of(writable(t), t.worktree != e.content, e.content != 0,
                      any_of(e.onto == 0, e.onto == s.target)), \
            lambda: s.put(i, replace(t, worktree=e.content,
                                     worktree_base=ite(e.onto != 0, e.onto, t.worktree_base)))
    if e.kind == EnvKind.OWNER_DIES:
        return all_of(t.proc_birth != 0, t.proc_birth == t.owner_birth), \
            lambda: s.put(i, replace(t, proc_birth=0))
    if e.kind == EnvKind.PID_REUSE:
        return all_of(t.proc_birth != t.owner_birth, e.birth != t.owner_birth, e.birth != 0,
                      t.proc_birth != e.birth, t.owner_birth != 0), \
            lambda: s.put(i, replace(t, proc_birth=e.birth))
    raise EnvError(f"unknown environment step {e.kind!r}")


def apply_env(s: State, e: EnvStep) -> State:
    """Apply one environment step to a concrete state, or raise ``EnvError``."""
    if e.task and e.task not in s.graph.index:
        raise EnvError(f"environment step {e.kind.label} names unknown task {e.task!r}")
    ok, update = guard_and_update(s, e)
    if ok is not True:
        raise EnvError(f"environment step {e.kind.label} is not possible now"
                       + (f" for task {e.task!r}" if e.task else ""))
    return update()
