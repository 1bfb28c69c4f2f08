"""What the kernel knows about one task, as frozen records.

``TaskRecord`` holds every kernel-owned fact of a task: its generation and the
current attempt's capability tuple, the exact owner and what has been proven
about it, the leases, the current SaveTransaction with its receipts, and the
task's admission and migration facts. Environment facts (the bytes in a
worktree, the target ref, the process table, whether an external effect
happened) are not stored here: they are observed (``rules.Observe``).

The store maps a record onto its normalised tables and back
(``tables.TaskTables``); the ledger records the fields each request changed.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any, NamedTuple

from .vocabulary import RECEIPTS


class Binding(NamedTuple):
    """What a receipt is bound to: the attempt (by fence), candidate and base."""

    fence: int = 0
    candidate: str | None = None
    base: str | None = None

    @property
    def exists(self) -> bool:
        return self.fence != 0


NO_BINDING = Binding()
NO_RECEIPTS: tuple[Binding, ...] = tuple(NO_BINDING for _ in RECEIPTS)
RECEIPT_INDEX = {name: i for i, name in enumerate(RECEIPTS)}


@dataclass(frozen=True, slots=True)
class TaskPolicy:
    """The static part of a task: its name, dependencies and policy."""

    name: str
    deps: tuple[str, ...] = ()
    review_required: bool = False
    requires_assignment: bool = False
    disposition: str = "land"        # what convergence records as the task-owned receipt
    retry_budget: int = 2            # automatic retries after failed or lost attempts


@dataclass(frozen=True, slots=True)
class TaskRecord:
    """Every kernel-owned fact of one task."""

    # generation and the current attempt's capability tuple K
    generation: int = 0
    attempt: int = 0
    fence: int = 0
    lease_epoch: int = 0
    attempt_state: str = "none"
    token_hash: str | None = None    # sha256 of the attempt's capability token (never the token)
    # the exact owner and what the kernel has proven about it
    owner_pid: int = 0
    owner_birth: int = 0
    session: str | None = None
    wrapper_epoch: int = 0
    child_epoch: int = 0
    owner_seen: str = "unverified"
    # leases held by the current attempt
    worktree_lease: bool = False
    session_lease: bool = False
    finish_lease: bool = False
    # the attempt's worktree (by id) and the work it started from / saved / imported
    worktree_id: str | None = None
    origin: str | None = None
    base_hint: str | None = None     # the target commit the attempt's work descends from
    saved_work: str | None = None
    retained: str | None = None
    retained_base: str | None = None
    imported: str | None = None
    # the SaveTransaction of the current attempt
    phase: str = "absent"
    exit: str = "none"
    reason: str = "none"
    revision: int = 0
    candidate: str | None = None
    base: str | None = None
    version: int = 0
    disposition: str = "none"
    receipts: tuple[Binding, ...] = NO_RECEIPTS
    effect_done: bool = False
    deadline: int = 0
    # why the last attempt failed, and the automatic retries used in this generation
    failure: str = "none"
    retries: int = 0
    # an external wait: the event the parked task waits for, its deadline (0: none), and
    # whether a wait ran out (a named hold until the operator acts)
    waiting_on: str | None = None
    wait_deadline: int = 0
    wait_expired: bool = False
    paused: bool = False              # the operator's pause: no attempt opens while it holds
    not_before: int = 0               # no attempt opens before this time (0: none)
    # the review valve: the current manifest, FLIP's and the evaluation's verdicts on the
    # manifest and requirements each names, the publication, a failed valve's code
    manifest: str | None = None
    manifest_requirements: str | None = None
    contract: str = "none"
    manifest_output: str | None = None
    manifest_validation: str | None = None
    manifest_main: str | None = None
    review_phase: str = "working"
    flip: str = "absent"
    flip_manifest: str | None = None
    flip_requirements: str | None = None
    evaluation: str = "absent"
    evaluation_manifest: str | None = None
    evaluation_requirements: str | None = None
    publication: str | None = None
    publication_output: str | None = None
    publications: int = 0
    review_failure: str = "none"
    # admission, migration and operator facts
    assigned: bool = False
    legacy_done: bool = False
    reconstructed: bool = False
    abandoned: bool = False

    def receipt(self, name: str) -> Binding:
        return self.receipts[RECEIPT_INDEX[name]]

    def with_receipts(self, **bindings: Binding) -> tuple[Binding, ...]:
        rs = list(self.receipts)
        for name, b in bindings.items():
            rs[RECEIPT_INDEX[name.replace("_", "-")]] = b
        return tuple(rs)

    @property
    def binding(self) -> Binding:
        # guards: receipts-fenced
        return Binding(self.fence, self.candidate, self.base)

    @property
    def running(self) -> bool:
        return self.attempt_state == "running"

    @property
    def reserved(self) -> bool:
        """A completion transaction holds the attempt's terminal reservation."""
        return self.phase != "absent"

    @property
    def graph_saved(self) -> bool:
        """A GraphSave of the current attempt exists and nothing left the main line."""
        # guards: done-iff-graphsave, legacy-never-satisfies
        return (self.phase == "graph-saved" and self.exit == "none" and self.fence != 0
                and self.receipts[-1].fence == self.fence)

    @property
    def visible_phase(self) -> str:
        """What a client's expected phase is compared with: the side exit, else the phase."""
        return self.phase if self.exit == "none" else self.exit

    @property
    def effect_id(self) -> str:
        """The identity of this transaction's external effect (one per candidate version)."""
        return f"g{self.generation}-f{self.fence}-v{self.version}"


RECORD_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(TaskRecord))
EMPTY = TaskRecord()
_values = attrgetter(*RECORD_FIELDS)
_new = object.__new__


def evolve(t: TaskRecord, **changes: Any) -> TaskRecord:
    """``dataclasses.replace`` for a TaskRecord, without its per-call introspection."""
    values = list(_values(t))
    for name, value in changes.items():
        index = _INDEX.get(name)
        if index is None:
            raise TypeError(f"TaskRecord has no field {name!r}")
        values[index] = value
    new = _new(TaskRecord)
    for put, value in zip(_SETTERS, values):
        put(new, value)
    return new


_INDEX = {name: i for i, name in enumerate(RECORD_FIELDS)}
#: Each field's slot, set directly (a frozen dataclass refuses ``setattr``).
_SETTERS = tuple(TaskRecord.__dict__[name].__set__ for name in RECORD_FIELDS)


def changed(before: TaskRecord, after: TaskRecord) -> dict[str, Any]:
    """The fields that differ, with their new values."""
    if before is after:
        return {}
    return {f: b for f, a, b in zip(RECORD_FIELDS, _values(before), _values(after)) if a != b}


def apply_changes(record: TaskRecord, changes: dict[str, Any]) -> TaskRecord:
    """A record with ``changes`` applied (receipts given as lists are restored to Bindings)."""
    if "receipts" in changes:
        changes = dict(changes, receipts=tuple(Binding(*b) for b in changes["receipts"]))
    return evolve(record, **changes)


def record_to_json(changes: dict[str, Any]) -> dict[str, Any]:
    """Changes in a JSON-safe form (Bindings as lists)."""
    if "receipts" not in changes:
        return changes
    return dict(changes, receipts=[list(b) for b in changes["receipts"]])
