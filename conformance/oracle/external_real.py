"""The real world over the protocol: a git repository and owner processes the harness makes.

For a kernel that declares ``"real"`` among its ``worlds``, a trace whose steps
can be staged for real (``real_world.world_for``) runs on a world the harness
creates and names:

- **git.** A fresh repository (its one commit is the trace's target) and a
  directory for the worktrees, named in ``start`` as
  ``"world": {"kind": "real", "repository": DIR, "worktrees": DIR}``; the
  kernel makes its worktrees, lands and pins there, and takes the trace's
  ``edit`` and ``move-target`` steps on it (a content name is a real commit).
- **processes.** Every owner a request names (``owner`` with ``pid`` and
  ``birth``) is a real child process of the harness (``sleep``), started before
  the request is sent; the request carries the real pid and the real birth (its
  start time in ``/proc``), and the projection's owners are named back to the
  trace's (in the strings too: the daemon's convergence keys and the evidence it
  records name the owner it probed, ``pid:<pid>:birth:<birth>``). ``owner-dies`` is the harness's own step: a real ``SIGKILL`` of
  that child, left unreaped (a zombie the kernel must not count as alive); it
  is not sent to the kernel. A kernel crash (``kill -9`` of the kernel) leaves
  the owners running, as a real one would.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import tempfile

from wgk.impl.world.git import init_repository
from wgk.impl.world.proc import ProcProcessTable

from wgk.conformance.oracle.contract import wait_zombie
from wgk.conformance.oracle.external import ExternalSystem
from wgk.conformance.oracle.systems import StepError, env_part


_PID = re.compile(r"\bpid:(\d+)\b")
_BIRTH = re.compile(r"\bbirth:(\d+)\b")


class RealOwners:
    """The trace's owners as real children of the harness, and the names back."""

    def __init__(self) -> None:
        self.table = ProcProcessTable()
        self.children: dict[tuple[int, int], subprocess.Popen] = {}
        self.births: dict[tuple[int, int], int] = {}
        self.back: dict[tuple[int, int], tuple[int, int]] = {}      # real -> trace (pid, birth)

    def real(self, pid: int, birth: int) -> tuple[int, int]:
        """The real (pid, birth) of the trace's owner, started now unless it runs already."""
        key = (pid, birth)
        p = self.children.get(key)
        if p is None or self.table.birth_of(p.pid) != self.births[key]:
            p = subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.children[key], self.births[key] = p, self.table.birth_of(p.pid)
            self.back[(p.pid, self.births[key])] = key
        return p.pid, self.births[key]

    def kill(self, pid: int, birth: int) -> bool:
        """owner-dies: SIGKILL the live child of the trace's owner (False: none alive)."""
        p = self.children.get((pid, birth))
        if p is None or self.table.birth_of(p.pid) != self.births[(pid, birth)]:
            return False
        os.kill(p.pid, signal.SIGKILL)
        wait_zombie(p.pid)
        return True

    def named(self, owner):
        """A projected owner with the trace's pid and birth (as the kernel recorded them)."""
        if not isinstance(owner, dict) or (owner.get("pid"), owner.get("birth")) not in self.back:
            return owner
        pid, birth = self.back[(owner["pid"], owner["birth"])]
        return dict(owner, pid=pid, birth=birth)

    def text(self, text: str) -> str:
        """A string with the trace's pids and births for the real ones (the daemon's
        convergence keys and the evidence it records name the owner it probed:
        ``pid:<pid>:birth:<birth>``)."""
        pids = {pid: tpid for (pid, _), (tpid, _) in self.back.items()}
        births = {birth: tbirth for (_, birth), (_, tbirth) in self.back.items()}
        text = _PID.sub(lambda m: f"pid:{pids.get(int(m[1]), m[1])}", text)
        return _BIRTH.sub(lambda m: f"birth:{births.get(int(m[1]), m[1])}", text)

    def named_all(self, value):
        """``value`` (a projection) with every owner and every string named back."""
        if isinstance(value, dict):
            if isinstance(value.get("pid"), int) and isinstance(value.get("birth"), int):
                value = self.named(value)
            return {self.text(k): self.named_all(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.named_all(v) for v in value]
        return self.text(value) if isinstance(value, str) else value

    def close(self) -> None:
        for p in self.children.values():
            if p.poll() is None:
                p.kill()
            p.wait()


class RealExternal(ExternalSystem):
    """An external kernel on a real world the harness made (see the module's docstring);
    ``join``: another instance already started on that world, whose storage, repository and
    owners this one shares (several processes on one storage; it opens them with ``recover``)."""

    def __init__(self, command, trace, *, timeout: float, join: "RealExternal | None" = None):
        self.joined = join is not None
        if join is not None:
            self._root, self.owners = join._root, join.owners
            self.repository, self.origin = join.repository, join.origin
            super().__init__(command, trace, timeout=timeout, join=join)
            return
        self._root = tempfile.mkdtemp(prefix="wgk-external-world-")
        repo, worktrees = os.path.join(self._root, "repo"), os.path.join(self._root, "worktrees")
        self.repository, self.origin = repo, init_repository(repo)
        self.owners = RealOwners()
        try:
            super().__init__(command, trace, timeout=timeout,
                             world={"kind": "real", "repository": repo, "worktrees": worktrees})
        except BaseException:
            self._cleanup()
            raise

    def real_request(self, request: dict) -> dict:
        """``request`` with its owner a real child of the harness (started now unless it runs)."""
        owner = request.get("owner") if isinstance(request, dict) else None
        if isinstance(owner, dict) and isinstance(owner.get("pid"), int) and \
                isinstance(owner.get("birth"), int):
            pid, birth = self.owners.real(owner["pid"], owner["birth"])
            request = dict(request, owner=dict(owner, pid=pid, birth=birth))
        return request

    def _apply_message(self, step: dict) -> dict:
        msg = super()._apply_message(step)
        msg["request"] = self.real_request(msg["request"])
        return msg

    def apply(self, step: dict) -> dict | None:
        if "request" not in step and env_part(step).get("env") == "owner-dies":
            self.steps += 1
            task = (self.project().get("tasks") or {}).get(step.get("task")) or {}
            owner = task.get("owner") or {}
            if not self.owners.kill(owner.get("pid"), owner.get("birth")):
                raise StepError(f"owner-dies is not possible now: the owner of task "
                                f"{step.get('task')!r} is not alive")
            return None
        return super().apply(step)

    def project(self) -> dict:
        return self.owners.named_all(super().project())

    def repository_problem(self, projection: dict, target: str) -> str | None:
        """What the real repository contradicts in ``projection`` (the model's), read by the
        harness itself: ``main`` is the commit it made while the projection's target is still
        ``target`` (the graph's), and another commit once it moved; at least one worktree of the
        repository for every task whose worktree the projection holds (the worktree of an
        attempt declared lost stays, retained, beside its successor's)."""
        main = _git(self.repository, "rev-parse", "refs/heads/main")
        moved = projection.get("target") != target
        if moved == (main == self.origin):
            return (f"the repository's main is {'still' if main == self.origin else 'not'} the "
                    f"commit the harness made, but the target is {projection.get('target')!r}")
        want = sum(bool((t.get("worktree") or {}).get("present"))
                   for t in (projection.get("tasks") or {}).values())
        listed = self.worktrees()
        if listed < want:
            return f"the repository lists {listed} worktrees, the projection holds {want}"
        return None

    def worktrees(self) -> int:
        """How many worktrees the real repository lists besides its own."""
        return _git(self.repository, "worktree", "list", "--porcelain").count("worktree ") - 1

    def _cleanup(self) -> None:
        if self.joined:
            return                              # the first instance owns the world
        self.owners.close()
        shutil.rmtree(self._root, ignore_errors=True)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._cleanup()


def _git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True,
                          text=True).stdout.strip()
