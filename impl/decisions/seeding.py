"""Seeding initial facts: the current attempt of a task a migration brings in, with explicit K."""
from __future__ import annotations

from dataclasses import dataclass

from ..contract.errors import SeedError
from ..storage.records import TaskRecord, evolve
from .decision import Effect
from ..contract.vocabulary import ATTEMPT_STATES, OWNER_SEEN


@dataclass(frozen=True)
class Initial:
    """Initial facts a migration seeds: the current attempt with its explicit K.

    A running attempt (the default) has its exact owner and a worktree holding
    ``worktree`` (started from ``origin``, by default the same content); the owner
    process is alive unless ``alive`` is false. An attempt in any other state
    keeps only its K, what was proven about its owner, and its leases."""

    generation: int
    attempt: int
    fence: int
    lease_epoch: int
    pid: int = 0
    birth: int = 0
    session: str | None = None
    worktree: str | None = None
    origin: str | None = None
    wrapper_epoch: int = 1
    child_epoch: int = 1
    state: str = "running"
    owner_seen: str = "unverified"
    alive: bool = True
    leases: dict | None = None      # {"worktree", "session", "finish"}: by default held while running
    token_hash: str | None = None   # sha256 of the attempt's capability token (None: it has none)


def check_initial(task: str, initial: Initial) -> None:
    """Refuse (``SeedError``) initial facts that name unknown labels or no fence."""
    if initial.state not in ATTEMPT_STATES or initial.owner_seen not in OWNER_SEEN:
        raise SeedError(f"task {task!r}: unknown attempt state {initial.state!r} or "
                        f"owner knowledge {initial.owner_seen!r}")
    if initial.fence < 0 or initial.attempt < 0 or initial.generation < 0 \
            or (initial.state != "none" and initial.fence < 1):
        raise SeedError(f"task {task!r}: a seeded attempt needs fence >= 1")


def seeded(task: str, t: TaskRecord, initial: Initial) -> tuple[TaskRecord, list[Effect]]:
    """The record after seeding ``initial`` into the fresh record ``t``, and the effects
    that make it true (the worktree created, the live owner adopted)."""
    if t.fence != 0 or t.attempt_state != "none":
        raise SeedError(f"task {task!r} already has an attempt")
    live = initial.state == "running"
    held = {"worktree": live, "session": live, "finish": False, **(initial.leases or {})}
    new = evolve(
        t, generation=initial.generation, attempt=initial.attempt, fence=initial.fence,
        lease_epoch=initial.lease_epoch, attempt_state=initial.state,
        token_hash=initial.token_hash,
        owner_seen=initial.owner_seen, worktree_lease=bool(held["worktree"]),
        session_lease=bool(held["session"]), finish_lease=bool(held["finish"]),
    )
    effects = []
    if live:
        wt = f"{task}/f{initial.fence}"
        origin = initial.origin if initial.origin is not None else initial.worktree
        new = evolve(new, owner_pid=initial.pid, owner_birth=initial.birth,
                     session=initial.session, wrapper_epoch=initial.wrapper_epoch,
                     child_epoch=initial.child_epoch, worktree_id=wt, origin=origin,
                     base_hint=origin)
        effects.append(Effect("create-worktree", (wt, initial.worktree, origin)))
        if initial.alive:
            effects.append(Effect("adopt", (initial.pid, initial.birth)))
    return new, effects
