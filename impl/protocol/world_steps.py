"""The test world's environment steps, applied to the implementation's environment.

The model has environment steps (an owner edits its worktree, dies, its pid is
reused; the target moves; the clock ticks). The production kernel never takes
them: they happen to it. ``apply_env(kernel, step)`` makes them happen on
whatever environment objects the kernel was given (the in-memory world, a git
repository, the /proc table), with the model's guards: only a live owner
writes, and only before quiescing or in repair; only a live owner dies; a pid
is reused by another birth only after its owner died; the target moves to
another commit; the clock moves forward. A step the world cannot take now
raises ``EnvError``.
"""
from __future__ import annotations

from ..world.env import EnvError
from ..front.kernel import Kernel
from ..storage.records import TaskRecord

#: The file every edit writes (besides the ``paths`` it names).
EDIT_FILE = "work.txt"


def apply_env(kernel: Kernel, step: dict) -> None:
    """Apply one environment step: edit, owner-dies, pid-reuse, move-target, tick."""
    kind = step.get("env")
    env = kernel.env
    known = kernel.names()                       # also drops caches another connection made stale
    try:
        if kind == "tick":
            env.clock.advance(int(step.get("amount", 1)))
        elif kind == "move-target":
            if not step.get("content") or env.repository.target() == step["content"]:
                raise EnvError("move-target is not possible now: the target is there already")
            env.repository.move_target(step["content"])
        elif kind in ("edit", "owner-dies", "pid-reuse"):
            task = step.get("task")
            if task not in known:
                raise EnvError(f"environment step {kind} names unknown task {task!r}")
            _owner_step(kernel, kind, task, step)
        else:
            raise EnvError(f"{kind!r} is not an environment step the kernel can apply")
    except AttributeError as e:
        raise EnvError(f"this environment cannot perform {kind!r} ({e})") from None


def _owner_step(kernel: Kernel, kind: str, task: str, step: dict) -> None:
    procs = kernel.env.processes
    t = kernel.record(task)
    born = procs.birth_of(t.owner_pid) or 0 if t.owner_pid else 0
    if kind == "edit":
        edit(kernel, t, task, step.get("content"), born, tuple(step.get("paths", ())),
             step.get("onto"))
    elif kind == "owner-dies":
        if born == 0 or born != t.owner_birth:
            raise EnvError(f"owner-dies is not possible now: the owner of task "
                           f"{task!r} is not alive")
        procs.kill(t.owner_pid)
    else:
        birth = int(step["birth"])
        if not (born != t.owner_birth and birth not in (0, t.owner_birth, born)
                and t.owner_birth != 0):
            raise EnvError(f"pid-reuse is not possible now for task {task!r}")
        procs.reuse(t.owner_pid, birth)


def edit(kernel: Kernel, t: TaskRecord, task: str, content: str | None, born: int,
         paths: tuple[str, ...] = (), onto: str | None = None) -> None:
    """The live owner writes ``content`` into its worktree (only where the model lets it):
    the file ``work.txt`` and every one of ``paths`` (``EDIT_FILE``), first rebasing its work
    onto ``onto`` when given (only onto the target as it is now)."""
    repo = kernel.env.repository
    view = repo.observe_worktree(t.worktree_id) if t.worktree_id else None
    writable = (t.running and view is not None and view.present and born == t.owner_birth
                and ((t.exit == "none" and t.phase in ("absent", "prepared"))
                     or t.exit == "needs-repair"))
    # the model's edit guard (worksave-exact is guarded by the kernel in rules.save_work)
    if not writable or not content or view.content == content or \
            (onto is not None and onto != repo.target()):
        raise EnvError(f"edit is not possible now for task {task!r}")
    if onto is None:
        repo.write(t.worktree_id, content, (EDIT_FILE, *paths))
    else:
        repo.write(t.worktree_id, content, (EDIT_FILE, *paths), onto=onto)
