"""The environment the kernel observes and acts on, and its in-memory doubles.

The kernel is opened with an ``Environment``: a process table, a repository
(worktrees, content, the target ref and external effects) and a clock. The
real ones are ``proc.ProcProcessTable``, ``git.GitRepository`` and
``WallClock``; the doubles here (``MemoryProcesses``, ``MemoryRepository``,
``ManualClock``, bundled as ``MemoryWorld``) keep the same contracts in memory,
so that tests and the conformance harness can play every environment step of
the model deterministically: edit, owner-dies, pid-reuse, move-target, tick.

Content ids are strings: commit oids for git, plain names for the doubles.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

from ..contract.errors import EnvError


class ProcessTable(Protocol):
    def birth_of(self, pid: int) -> int | None:
        """Birth (start) time of the process now holding ``pid``; None when there is none."""

    def adopt(self, pid: int, birth: int) -> None:
        """The kernel starts watching the owner ``(pid, birth)`` a dispatcher named."""


@dataclass(frozen=True)
class WorktreeView:
    present: bool
    content: str | None


class Repository(Protocol):
    def target(self) -> str | None:
        """The commit the target ref points at now."""

    def create_worktree(self, wt: str, start: str | None, base: str | None = None) -> None:
        """Create the attempt's worktree ``wt`` holding exactly ``start``, built on ``base``
        (the attempt's base: ``start`` itself, or the base of the work it imports)."""

    def observe_worktree(self, wt: str) -> WorktreeView:
        """Whether ``wt`` exists, and the content id of its exact bytes."""

    def pin(self, ref: str, content: str) -> None:
        """Keep ``content`` forever under the immutable name ``ref`` (created once)."""

    def keep_ignored(self, wt: str, ref: str) -> str | None:
        """Pin every byte of ``wt`` that its content id leaves out (ignored files) under
        ``ref``; the pinned content id, or None when there is nothing such."""

    def uncaptured(self, wt: str) -> list[str]:
        """What removing ``wt`` would lose that no ref keeps (ignored files no WorkSave
        captured, a worktree inside it); [] when nothing."""

    def remove_worktree(self, wt: str) -> None:
        """Remove exactly the worktree ``wt`` (nothing else); no-op when it is gone; refused
        (``EnvError``) when it holds bytes nothing keeps."""

    def land(self, effect: str, candidate: str, base: str) -> bool:
        """Move the target from exactly ``base`` to ``candidate`` (CAS); False if it moved."""

    def output(self, effect: str, candidate: str, disposition: str) -> None:
        """Publish ``candidate`` as the deliver/report output of ``effect`` (once)."""

    def effect_observed(self, effect: str) -> bool:
        """Whether the external effect ``effect`` has happened (re-observation)."""

    def worktree_path(self, wt: str) -> str | None:
        """Where the worktree lives on disk (None for a repository without a disk)."""

    def changed_paths(self, base: str, candidate: str) -> list[str]:
        """The repository paths ``candidate`` changes against ``base`` (added, modified,
        deleted; a rename is both of its paths)."""

    def built_on(self, wt: str, candidate: str, base: str) -> bool:
        """Whether the content ``candidate``, held by the worktree ``wt``, descends from the
        commit ``base``; landing a candidate on a base outside its history would lose commits. A repository with history reads it from the history; one
        without reads it from what the worktree was built on."""


class Clock(Protocol):
    def now(self) -> int:
        """The current logical time (deadlines are data compared with it)."""


@dataclass
class Environment:
    processes: ProcessTable
    repository: Repository
    clock: Clock


# --- clocks ---------------------------------------------------------------------


@dataclass
class ManualClock:
    """A logical clock that moves only when told to (the model's ``tick``)."""

    value: int = 0

    def now(self) -> int:
        return self.value

    def advance(self, amount: int = 1) -> None:
        if amount <= 0:
            raise EnvError(f"a tick advances the clock by a positive amount, not {amount}")
        self.value += amount


class WallClock:
    """Whole seconds since the epoch: survives restarts, shared by processes."""

    def now(self) -> int:
        return int(time.time())


# --- the in-memory process table ------------------------------------------------------


@dataclass
class MemoryProcesses:
    """pid -> birth of the process now holding it."""

    table: dict[int, int] = field(default_factory=dict)

    def birth_of(self, pid: int) -> int | None:
        return self.table.get(pid)

    def adopt(self, pid: int, birth: int) -> None:
        # The dispatcher started the owner before naming it: it exists now.
        self.table[pid] = birth

    def kill(self, pid: int) -> None:
        self.table.pop(pid, None)

    def reuse(self, pid: int, birth: int) -> None:
        """Another process now holds ``pid`` with another birth time."""
        self.table[pid] = birth


# --- the in-memory repository ----------------------------------------------------------


@dataclass
class MemoryRepository:
    """Worktrees hold one content id each; the target is a content id; effects are logged."""

    initial_target: str | None = None
    worktrees: dict[str, str | None] = field(default_factory=dict)
    #: content id -> the paths the edit that wrote it changed (the double's diff)
    paths: dict[str, tuple[str, ...]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)
    effects: dict[str, tuple[str, str]] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    #: what each worktree's bytes are built on: the attempt's base, or what its owner rebased
    #: its work onto (a content id here has no history of its own)
    bases: dict[str, str | None] = field(default_factory=dict)
    _target: str | None = None

    def __post_init__(self) -> None:
        self._target = self.initial_target

    def target(self) -> str | None:
        return self._target

    def create_worktree(self, wt: str, start: str | None, base: str | None = None) -> None:
        self.worktrees[wt] = start
        self.bases[wt] = base if base is not None else start

    def observe_worktree(self, wt: str) -> WorktreeView:
        if wt in self.worktrees:
            return WorktreeView(True, self.worktrees[wt])
        return WorktreeView(False, None)

    def pin(self, ref: str, content: str) -> None:
        old = self.refs.get(ref)
        # guards: retained-work-never-erased
        if old is not None and old != content:
            raise EnvError(f"immutable ref {ref} already holds {old}, not {content}")
        self.refs[ref] = content

    def keep_ignored(self, wt: str, ref: str) -> str | None:
        return None           # a content id here names every byte of the worktree

    def uncaptured(self, wt: str) -> list[str]:
        return []

    def remove_worktree(self, wt: str) -> None:
        if self.worktrees.pop(wt, _GONE) is not _GONE:
            self.removed.append(wt)

    def land(self, effect: str, candidate: str, base: str) -> bool:
        # guards: cas-base-exact
        if self._target != base:
            return False
        self._target = candidate
        self.effects[effect] = ("land", candidate)
        return True

    def output(self, effect: str, candidate: str, disposition: str) -> None:
        self.effects.setdefault(effect, (disposition, candidate))

    def effect_observed(self, effect: str) -> bool:
        return effect in self.effects

    def worktree_path(self, wt: str) -> str | None:
        return None

    def changed_paths(self, base: str, candidate: str) -> list[str]:
        """A content id names every byte: what it changes is what the edit that wrote it
        changed (nothing against itself)."""
        return [] if base == candidate else list(self.paths.get(candidate, ()))

    def built_on(self, wt: str, candidate: str, base: str) -> bool:
        """The worktree's bytes are built on its base (the attempt's, or what its owner rebased
        its work onto); a commit is built on itself."""
        return candidate == base or self.bases.get(wt) == base

    # environment steps
    def write(self, wt: str, content: str, paths: tuple[str, ...] = (),
              onto: str | None = None) -> None:
        """The owner writes bytes: the worktree now holds ``content`` (changing ``paths``),
        built on ``onto`` when it first rebased its work onto that commit."""
        if wt not in self.worktrees:
            raise EnvError(f"worktree {wt} does not exist")
        if onto is not None:
            self.bases[wt] = onto
        self.worktrees[wt] = content
        if paths:
            self.paths[content] = tuple(paths)

    def move_target(self, content: str) -> None:
        """Someone else moves the target ref."""
        self._target = content


_GONE = object()


@dataclass
class MemoryWorld:
    """The three in-memory doubles together (they survive a kernel restart)."""

    processes: MemoryProcesses = field(default_factory=MemoryProcesses)
    repository: MemoryRepository = field(default_factory=MemoryRepository)
    clock: ManualClock = field(default_factory=ManualClock)

    @staticmethod
    def create(target: str | None = None, now: int = 0) -> "MemoryWorld":
        return MemoryWorld(MemoryProcesses(), MemoryRepository(initial_target=target),
                           ManualClock(now))

    def environment(self) -> Environment:
        return Environment(self.processes, self.repository, self.clock)
