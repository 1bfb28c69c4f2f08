"""The updates several rules share: moving the transaction, opening and closing an attempt.

Each is a pure function from a task to a task (``replace`` with the fields it sets), written
with ``ite`` so the same code builds the z3 encoding (``wgk.model.rules``).
"""
from __future__ import annotations

from typing import Any

from .logic import ite
from .predicates import dirty
from .requests import Request
from .state import NO_RECEIPTS, State, TaskState, replace_task as replace
from .vocab import AttemptState as AS, Disposition, Exit, Failure, OwnerSeen, Phase, Reason


def advance(t: TaskState, to: Phase, **changes: Any) -> TaskState:
    """Move the transaction one legal edge forward and bump its revision."""
    return replace(t, phase=to, revision=t.revision + 1, **changes)


def leave_main_line(t: TaskState, exit_: Exit, reason: Reason, **changes: Any) -> TaskState:
    return replace(t, exit=exit_, reason=reason, revision=t.revision + 1, **changes)


def retain_work(t: TaskState) -> Any:
    """What a closing attempt leaves retained: its dirty worktree, else its saved work."""
    return ite(dirty(t), t.worktree, ite(t.saved_work != 0, t.saved_work, t.retained))


def release_owner(t: TaskState, **changes: Any) -> TaskState:
    """The attempt is over: its leases are released and its owner is no longer tracked."""
    return replace(
        t, worktree_lease=False, session_lease=False, finish_lease=False, deadline=0,
        owner_pid=0, owner_birth=0, session=0, wrapper_epoch=0, child_epoch=0,
        owner_seen=OwnerSeen.UNVERIFIED, proc_birth=0, **changes,
    )


def retain_base(t: TaskState) -> Any:
    """The target commit the retained work descends from (``retain_work``'s base)."""
    return ite(dirty(t), t.built_on, ite(t.saved_work != 0, t.base, t.retained_base))


def close_attempt(t: TaskState, outcome: AS) -> TaskState:
    """Terminalize the current attempt; its work is retained, its owner released."""
    return release_owner(t, attempt_state=outcome, retained=retain_work(t),
                         retained_base=retain_base(t))


def open_attempt(s: State, t: TaskState, r: Request) -> TaskState:
    """A new attempt: next attempt number and fence, a fresh worktree, an empty transaction."""
    start = r.imports if r.imports else s.target
    # the attempt's base is the kernel's fact: the target now, or the imported work's base
    built_on = ite(t.retained_base != 0, t.retained_base, s.target) if r.imports else s.target
    o = r.owner
    return replace(
        t,
        attempt=t.attempt + 1, fence=t.fence + 1, lease_epoch=t.lease_epoch + 1,
        attempt_state=AS.RUNNING, token=r.mint, failure=Failure.NONE,
        owner_pid=o.pid, owner_birth=o.birth, session=o.session,
        wrapper_epoch=1, child_epoch=1,        # a new attempt's first process; only resume raises them
        owner_seen=OwnerSeen.UNVERIFIED, proc_birth=o.birth,
        worktree_lease=True, session_lease=True, finish_lease=False,
        worktree=start, worktree_present=True, origin=start, built_on=built_on,
        worktree_base=built_on,
        saved_work=0, imported=r.imports,
        phase=Phase.ABSENT, exit=Exit.NONE, reason=Reason.NONE, revision=0,
        candidate=0, base=0, version=0, disposition=Disposition.NONE,
        receipts=NO_RECEIPTS, deadline=0, effect_done=False, completion_receipt=0,
    )


def suspect(t: TaskState) -> Any:
    """Evidence may raise suspicion; it never proves death and never clears it."""
    return ite(t.owner_seen == OwnerSeen.DEAD, OwnerSeen.DEAD, OwnerSeen.SUSPECT)
