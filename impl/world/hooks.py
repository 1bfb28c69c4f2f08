"""Durable boundaries and the one hook every boundary passes through.

A durable boundary is each committed SQLite transaction and each external
effect (ref update, worktree creation and removal). The kernel calls its hook
just before and just after every boundary with a ``Boundary`` naming the kind,
the moment and the request key. The default hook does nothing; a harness
installs one that records boundaries, raises to crash in-process, or kills the
process (``kill -9``) at a chosen one.
"""
from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from typing import Callable

#: Boundary kinds.
COMMIT = "commit"
REF_UPDATE = "ref-update"
WORKTREE_ADD = "worktree-add"
WORKTREE_REMOVE = "worktree-remove"
BOUNDARY_KINDS = (COMMIT, REF_UPDATE, WORKTREE_ADD, WORKTREE_REMOVE)


@dataclass(frozen=True)
class Boundary:
    kind: str          # one of BOUNDARY_KINDS
    when: str          # "before" | "after"
    key: str | None    # the request key (None for graph edits, seeds and imports)
    detail: str = ""   # e.g. the ref or worktree concerned

    def describe(self) -> str:
        return f"{self.when} {self.kind} [{self.key or '-'}] {self.detail}".rstrip()


Hook = Callable[[Boundary], None]


def no_hook(boundary: Boundary) -> None:
    """The default: durable boundaries pass without a sound."""


class Crash(BaseException):
    """Raised by ``CrashAt`` to stop the kernel at a boundary, as a process death would.

    A BaseException, so that no ``except Exception`` on the way swallows it."""

    def __init__(self, boundary: Boundary):
        super().__init__(boundary.describe())
        self.boundary = boundary


@dataclass
class Recorder:
    """Remembers every boundary passed (to enumerate crash cuts)."""

    seen: list[Boundary] = field(default_factory=list)

    def __call__(self, boundary: Boundary) -> None:
        self.seen.append(boundary)


@dataclass
class CrashAt:
    """Crash at the ``index``-th boundary matching (kind, when, key): raise ``Crash`` or
    ``kill -9`` the process."""

    index: int
    kind: str | None = None
    when: str | None = None
    mode: str = "raise"          # "raise" | "kill"
    key: str | None = None
    passed: int = 0
    fired: Boundary | None = None

    def __call__(self, boundary: Boundary) -> None:
        if self.fired is not None:
            return
        if self.kind is not None and boundary.kind != self.kind:
            return
        if self.when is not None and boundary.when != self.when:
            return
        if self.key is not None and boundary.key != self.key:
            return
        if self.passed == self.index:
            self.fired = boundary
            if self.mode == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise Crash(boundary)
        self.passed += 1
