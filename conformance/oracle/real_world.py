"""The real world a trace can run on: a fresh git repository and real child processes.

The implementation's environment contracts (``wgk.impl.world.env``) have real
backends: ``GitRepository`` and ``ProcProcessTable``. ``RealWorld`` puts them
behind a trace's names so that the same trace runs on them:

- **git.** A fresh repository per trace (its one commit is the trace's initial
  target); every content name a trace uses is a real commit: the owner's
  ``edit`` writes the bytes into its real worktree (the content id is the
  worktree's snapshot commit; an ``edit`` with ``onto`` first checks the target
  out in the worktree, as a real worker rebases its repair), ``move-target`` is
  someone else's commit on the target, a land is a real ``update-ref`` compare-and-swap, a pin and an output
  real refs, a cleanup a real ``git worktree remove``. ``NamedGit`` maps the
  commits back to the trace's names, so the projection compared with the model
  speaks the trace's language.
- **processes.** Every owner a dispatcher names is a real child process
  (``sleep``) started when the kernel adopts it; ``owner-dies`` is a real
  ``SIGKILL``, and the dead owner is left unreaped: a zombie, which the
  kernel's ``/proc`` table must not count as alive. Births are mapped back to
  the trace's births.
- **not real.** The clock (deadlines are logical time) and pid reuse (no test
  can make the kernel hand a pid to another process on demand) stay in memory:
  a trace with ``pid-reuse`` or with seeded attempts (owners no real process
  has) runs on the in-memory world, and says so.
"""
from __future__ import annotations

import copy
import hashlib
import os
import shutil
import signal
import stat
import subprocess
from dataclasses import dataclass, field

from wgk.impl import ManualClock
from wgk.impl.world.env import Environment
from wgk.impl.world.git import init_repository
from wgk.impl.world.named_git import NamedRepository
from wgk.impl.world.proc import ProcProcessTable

from wgk.conformance.oracle.contract import wait_zombie

#: What each world is, as every result names it.
WORLDS = {"real": "real git, real processes, logical clock", "memory": "in-memory world"}


def world_for(trace) -> tuple[str, str]:
    """("real" | "memory", why) for a trace: real wherever its steps can be staged for real."""
    if any(s.get("env") == "pid-reuse" for s in trace.steps):
        return "memory", "pid reuse cannot be staged for real"
    if getattr(trace, "initial", None):
        return "memory", "its seeded attempts name owners no real process has"
    return "real", WORLDS["real"]


class NamedGit(NamedRepository):
    """A fresh real git repository under ``root`` (its one commit is ``target``)."""

    def __init__(self, root: str, target: str):
        path = os.path.join(root, "repo")
        init_repository(path)
        super().__init__(path, os.path.join(root, "worktrees"), target)


@dataclass
class _Owner:
    pid: int                     # the real process (0: an owner restored as dead)
    real_birth: int | None
    birth: int                   # the birth the trace names


@dataclass
class RealProcesses:
    """Owners as real child processes, named by the trace's pids and births."""

    table: ProcProcessTable = field(default_factory=ProcProcessTable)
    owners: dict[int, _Owner] = field(default_factory=dict)
    spawned: list = field(default_factory=list)      # our children (not kept when pickled)

    def __getstate__(self) -> dict:
        return {"table": self.table, "owners": self.owners, "spawned": []}

    def _start(self, pid: int, birth: int) -> None:
        p = subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        self.spawned.append(p)
        self.owners[pid] = _Owner(p.pid, self.table.birth_of(p.pid), birth)

    def adopt(self, pid: int, birth: int) -> None:
        """The dispatcher started the owner: a real child now holds the trace's ``pid`` (an
        owner adopted again, as a re-sent dispatch does after a crash, is the same process)."""
        known = self.owners.get(pid)
        if known is not None and known.birth == birth and self.birth_of(pid) is not None:
            return
        self._start(pid, birth)

    def birth_of(self, pid: int) -> int | None:
        owner = self.owners.get(pid)
        if owner is None or owner.pid == 0:
            return None
        real = self.table.birth_of(owner.pid)          # /proc says: a zombie is no owner
        if real is None:
            return None
        return owner.birth if real == owner.real_birth else real

    def kill(self, pid: int) -> None:
        """owner-dies: a real SIGKILL; the dead owner stays a zombie until the world closes."""
        owner = self.owners.get(pid)
        if owner is None:
            return
        os.kill(owner.pid, signal.SIGKILL)
        if any(p.pid == owner.pid for p in self.spawned):
            wait_zombie(owner.pid)

    def state(self) -> dict[int, tuple[bool, int]]:
        """Which trace owners are alive, and their births (to restore the world later)."""
        return {pid: (self.birth_of(pid) is not None, o.birth) for pid, o in self.owners.items()}

    def restore(self, state: dict[int, tuple[bool, int]]) -> None:
        """The owners as they were: the live ones real processes again, the dead ones dead."""
        self.close()
        self.owners, self.spawned = {}, []
        for pid, (alive, birth) in state.items():
            if alive:
                self._start(pid, birth)
            else:
                self.owners[pid] = _Owner(0, None, birth)

    def close(self) -> None:
        ours = {p.pid for p in self.spawned}
        for owner in self.owners.values():           # children of a killed kernel process too
            if owner.pid and owner.pid not in ours:
                try:
                    os.kill(owner.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for p in self.spawned:
            if p.poll() is None:
                p.kill()
            p.wait()


class RealWorld:
    """A fresh repository and real processes under ``root``, and a logical clock."""

    kind = "real"

    def __init__(self, root: str, target: str = "main-0", now: int = 0):
        self.root = root
        self.repository = NamedGit(root, target)
        self.processes = RealProcesses()
        self.clock = ManualClock(now)

    def environment(self) -> Environment:
        return Environment(self.processes, self.repository, self.clock)

    def snapshot(self, path: str) -> "RealSnapshot":
        """The world as it is: a copy of the repository and worktrees, the owners, the clock."""
        shutil.copytree(self.root, path, symlinks=True)
        return RealSnapshot(self, path, dict(self.repository.oids), dict(self.repository.names),
                            self.processes.state(), self.clock.value)

    def mark(self) -> bytes:
        """sha256 of everything of this world a kernel can read: every entry under its root
        (the repository and the worktrees: each path, its kind and mode, a link's target, a
        file's bytes), the names of the commits, the owners as ``/proc`` shows them, and the
        clock. Equal marks: the same world, read the same (``crashcuts``: a check need not
        read it again)."""
        h = hashlib.sha256()
        for top, dirs, files in os.walk(self.root):
            dirs.sort()
            for name in sorted(dirs) + sorted(files):
                path = os.path.join(top, name)
                st = os.lstat(path)
                h.update(f"{os.path.relpath(path, self.root)}\0{st.st_mode}\0".encode())
                if stat.S_ISLNK(st.st_mode):
                    h.update(os.fsencode(os.readlink(path)))
                elif stat.S_ISREG(st.st_mode):
                    with open(path, "rb") as f:
                        data = f.read()
                    h.update(len(data).to_bytes(8, "big") + data)
                h.update(b"\0")
        repo = self.repository
        h.update(repr((sorted(repo.oids.items()), sorted(repo.names.items()),
                       sorted(self.processes.state().items()), self.clock.value)).encode())
        return h.digest()

    def close(self) -> None:
        self.processes.close()


@dataclass
class RealSnapshot:
    world: RealWorld
    path: str
    oids: dict
    names: dict
    owners: dict
    now: int

    def restore(self) -> RealWorld:
        """The world put back as it was, in place (the same paths)."""
        w = self.world
        shutil.rmtree(w.root)
        shutil.copytree(self.path, w.root, symlinks=True)
        w.repository.oids, w.repository.names = dict(self.oids), dict(self.names)
        w.processes.restore(self.owners)
        w.clock.value = self.now
        return w


def snapshot_world(world, path: str):
    """A restorable copy of a world: the real one copied on disk, the in-memory one in memory."""
    return world.snapshot(path) if isinstance(world, RealWorld) else copy.deepcopy(world)


def restore_world(saved):
    return saved.restore() if isinstance(saved, RealSnapshot) else copy.deepcopy(saved)


def real_world(world: str, trace, root: str):
    """The world a system runs a trace on: a ``RealWorld`` under ``root`` for "real" (kept
    there for crash cuts to restore), else "memory"."""
    if world != "real":
        return "memory"
    return RealWorld(os.path.join(root, "world"), trace.graph.get("target", "main-0"))
