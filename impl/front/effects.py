"""Performing a decision's external effects, each a durable boundary through the hook.

A worktree created, a ref pinned (a WorkSave pins the saved content and, on git,
every ignored byte beside it), the target landed by compare-and-swap, an
output published, a worktree removed (and checked gone), an owner adopted:
``perform`` does them in order before the request's transaction commits and
returns the facts they establish. A failed compare-and-swap raises ``CasMoved``.
"""
from __future__ import annotations

from typing import Any, Callable

from ..world.env import Environment
from ..contract.errors import EffectError
from ..world.hooks import REF_UPDATE, WORKTREE_ADD, WORKTREE_REMOVE, Boundary, Hook
from ..storage.records import TaskRecord
from ..decisions.decision import Effect


class CasMoved(Exception):
    """The target moved between the check and the compare-and-swap."""


def boundary(hook: Hook, kind: str, key: str | None, detail: str,
             effect: Callable[[], Any]) -> Any:
    """Run one effect between its ``before`` and ``after`` boundaries."""
    hook(Boundary(kind, "before", key, detail))
    result = effect()
    hook(Boundary(kind, "after", key, detail))
    return result


def perform(env: Environment, hook: Hook, effects: list[Effect], key: str | None,
            record: TaskRecord) -> list:
    """Perform a decision's effects in order; returns the facts they establish."""
    repo = env.repository
    facts: list[tuple[str, dict]] = []
    for a in effects:
        if a.name == "adopt":
            env.processes.adopt(*a.args)
        elif a.name == "create-worktree":
            wt, start, base = a.args
            boundary(hook, WORKTREE_ADD, key, wt, lambda: repo.create_worktree(wt, start, base))
            facts.append(("worktree-added", {"worktree": wt, "fence": record.fence,
                                             "origin": start, "path": repo.worktree_path(wt)}))
        elif a.name == "pin":
            ref, content = a.args
            boundary(hook, REF_UPDATE, key, ref, lambda: repo.pin(ref, content))
            facts.append(("pinned", {"ref": ref, "content": content}))
        elif a.name == "save-work":
            ref, content, wt = a.args
            kept = boundary(hook, REF_UPDATE, key, ref, lambda: save_work(repo, ref, content, wt))
            facts.append(("pinned", {"ref": ref, "content": content}))
            if kept is not None:
                facts.append(("pinned", {"ref": ignored_ref(ref), "content": kept}))
        elif a.name == "land":
            effect, candidate, base = a.args
            if not boundary(hook, REF_UPDATE, key, effect,
                            lambda: repo.land(effect, candidate, base)):
                raise CasMoved(effect)
        elif a.name == "output":
            effect, candidate, disposition = a.args
            boundary(hook, REF_UPDATE, key, effect,
                     lambda: repo.output(effect, candidate, disposition))
        elif a.name == "remove-worktree":
            (wt,) = a.args
            boundary(hook, WORKTREE_REMOVE, key, wt, lambda: remove_exactly(env, wt))
        else:
            raise EffectError(f"unknown effect {a.name!r}")
    return facts


def ignored_ref(worksave_ref: str) -> str:
    """Where a WorkSave keeps the bytes its content id leaves out: ``ignored/<task>/<leaf>``."""
    return "ignored/" + worksave_ref.partition("/")[2]


def save_work(repo, ref: str, content: str, wt: str) -> str | None:
    """Pin the saved content, and every byte the content id leaves out (ignored files)."""
    repo.pin(ref, content)
    return repo.keep_ignored(wt, ignored_ref(ref))


def remove_exactly(env: Environment, wt: str) -> None:
    """Remove the planned worktree and check that it is gone."""
    repo = env.repository
    repo.remove_worktree(wt)
    if repo.observe_worktree(wt).present:
        raise EffectError(f"worktree {wt} is still present after its removal")
