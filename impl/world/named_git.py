"""A real git repository behind the content names a trace speaks (docs/vocabulary.md).

The kernel's environment speaks of contents by name (``main-0``, ``w1``); a real
repository by commit id. ``NamedRepository`` stands between them: every content
name is a real commit (an owner's ``edit`` writes the bytes into its real
worktree and the worktree's snapshot commit takes the content's name; an ``edit``
with ``onto`` first checks that commit out, as a worker rebases its repair;
``move-target`` is someone else's commit on the target), and the commits are
named back when the kernel observes them. The served kernel
(``wgk.impl.serve``) plays a trace on a repository the harness created this way.
"""
from __future__ import annotations

import os

from .env import EnvError, Environment, ManualClock, WorktreeView
from .git import GitRepository
from .proc import ProcProcessTable


class NamedRepository:
    """A real git repository behind a trace's content names: ``target`` names the commit
    the repository's target holds now; every content an owner writes or someone commits on
    the target is learnt under its name (picklable: the names are the world's state)."""

    def __init__(self, repo: str, worktrees: str, target: str):
        self.git = GitRepository(repo, worktrees=worktrees)
        oid = self.git.target()
        if oid is None:
            raise EnvError(f"{repo}: the repository has no target commit")
        self.oids: dict[str, str] = {target: oid}
        self.names: dict[str, str] = {oid: target}

    def _oid(self, name: str | None) -> str | None:
        if name is None:
            return None
        if name not in self.oids:
            raise EnvError(f"content {name!r} is no commit of the real repository")
        return self.oids[name]

    def _name(self, oid: str | None) -> str | None:
        return None if oid is None else self.names.get(oid, f"git:{oid[:12]}")

    def _learn(self, oid: str, name: str) -> None:
        self.names[oid] = name
        self.oids.setdefault(name, oid)

    def target(self) -> str | None:
        return self._name(self.git.target())

    def create_worktree(self, wt: str, start: str | None, base: str | None = None) -> None:
        self.git.create_worktree(wt, self._oid(start))

    def observe_worktree(self, wt: str) -> WorktreeView:
        view = self.git.observe_worktree(wt)
        return WorktreeView(view.present, self._name(view.content))

    def pin(self, ref: str, content: str) -> None:
        self.git.pin(ref, self._oid(content))

    def keep_ignored(self, wt: str, ref: str) -> str | None:
        return self._name(self.git.keep_ignored(wt, ref))

    def uncaptured(self, wt: str) -> list[str]:
        return self.git.uncaptured(wt)

    def remove_worktree(self, wt: str) -> None:
        self.git.remove_worktree(wt)

    def land(self, effect: str, candidate: str, base: str) -> bool:
        return self.git.land(effect, self._oid(candidate), self._oid(base))

    def output(self, effect: str, candidate: str, disposition: str) -> None:
        self.git.output(effect, self._oid(candidate), disposition)

    def effect_observed(self, effect: str) -> bool:
        return self.git.effect_observed(effect)

    def worktree_path(self, wt: str) -> str | None:
        return self.git.worktree_path(wt)

    def changed_paths(self, base: str, candidate: str) -> list[str]:
        return self.git.changed_paths(self._oid(base), self._oid(candidate))

    # environment steps
    def built_on(self, wt: str, candidate: str, base: str) -> bool:
        return self.git.built_on(wt, self._oid(candidate), self._oid(base))

    def write(self, wt: str, content: str, paths: tuple[str, ...] = (),
              onto: str | None = None) -> None:
        """The owner writes ``content``; with ``onto`` it first rebases its work onto that
        commit (a real checkout of it in the worktree), as a worker does before it writes
        its repair on a moved target (forced: its own earlier bytes, saved already, may be in
        the way of a file the new base holds, as when another task's land wrote the same
        path; what it writes next replaces them); otherwise its bytes stay on the commit the
        worktree was built on."""
        path = self.git.worktree_path(wt)
        if onto is not None and os.path.isdir(path):
            self.git.git("checkout", "-q", "-f", "--detach", self._oid(onto), cwd=path)
        self.git.write(wt, content, paths)
        self._learn(self.git.observe_worktree(wt).content, content)

    def move_target(self, content: str) -> None:
        self._learn(self.git.move_target(content), content)


class NamedRealWorld:
    """The real world a harness names: its git repository behind the trace's content names,
    the real processes of ``/proc`` (the harness starts and kills the owners; the kernel only
    watches them), and a logical clock (deadlines are logical time)."""

    kind = "real"

    def __init__(self, repo: str, worktrees: str, target: str, now: int = 0):
        self.repository = NamedRepository(repo, worktrees, target)
        self.processes = ProcProcessTable()
        self.clock = ManualClock(now)

    def environment(self) -> Environment:
        return Environment(self.processes, self.repository, self.clock)
