"""The SaveTransaction's guards on the worktree itself: a worktree removed or rewritten
behind the kernel's back is refused under the code that says which (the driver checks
every invariant after each step)."""
from __future__ import annotations

from wgk.model.env import EnvKind
from wgk.model.vocab import Actor as A, Kind as K

from conftest import BASE, WORK, chain, dispatch, to_phase


def rejects(d, kind, actor, code, task="a", **kw):
    dec = d.send(kind, actor, task, **kw)
    assert dec.label == f"rejected:{code}", (kind.label, dec.label)


def ok(d, kind, actor, task="a", **kw):
    dec = d.send(kind, actor, task, **kw)
    assert dec.label in ("applied", "evidence-only"), (kind.label, dec.label)


def _behind_its_back(d, **change) -> None:
    """The world changes the task's worktree without a request (no environment step does)."""
    from dataclasses import replace
    i = d.state.graph.index["a"]
    d.state = d.state.put(i, replace(d.task("a"), **change))


def test_a_missing_or_changed_worktree_is_refused_under_its_own_code():
    d = chain("a")
    dispatch(d, "a")
    to_phase(d, "a", K.QUIESCE)
    _behind_its_back(d, worktree_present=False)
    rejects(d, K.SAVE_WORK, A.WRAPPER, "worktree-missing", candidate=WORK, base=BASE)
    d = chain("a")
    dispatch(d, "a")
    to_phase(d, "a", K.PREPARE_EFFECT)
    d.env(EnvKind.MOVE_TARGET, content=40)
    ok(d, K.MARK_REPAIR, A.DAEMON)
    _behind_its_back(d, worktree_present=False)
    rejects(d, K.REVISE, A.WORKER, "worktree-missing", candidate=WORK, base=40)
    d = chain("a")
    dispatch(d, "a")
    to_phase(d, "a", K.PREPARE_CLEANUP)
    _behind_its_back(d, worktree=WORK + 1)
    rejects(d, K.COMMIT_CLEANUP, A.CLEANUP, "worktree-unsaved")
