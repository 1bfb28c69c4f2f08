"""What the kernel knows about one task, in the shape of the rows that store it.

``TaskRecord`` is one value per table a task has rows in: ``tasks`` (its counters,
flags, retained work and wait), the current attempt's ``attempts`` and ``owners`` rows,
its three ``leases`` rows, its ``transactions`` row and its ``receipts``. Facts of the
environment (worktree bytes, the target ref, the process table, whether an effect
happened) are read when a request needs them (``rules.Observe``), never kept here.

A request's changes are named by ``COLUMNS`` (a change name -> its row and column); the
ledger records them under those names and ``tables.TaskTables`` writes them to their rows.
"""
from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Any, NamedTuple

from ..contract.vocabulary import RECEIPTS


class Binding(NamedTuple):
    """A receipt row's binding: the fence of its attempt, its candidate, its base."""

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


class TaskRow(NamedTuple):
    """The kernel-owned columns of a ``tasks`` row (the policy columns are ``TaskPolicy``)."""

    # counters of the task's generations and attempts
    generation: int = 0
    attempt: int = 0
    fence: int = 0
    lease_epoch: int = 0
    retries: int = 0
    deadline: int = 0
    # operator and migration flags
    assigned: bool = False
    abandoned: bool = False
    paused: bool = False
    not_before: int = 0
    #: a reset's intent, pending while the old attempt's owner is not proven exited
    reopening: bool = False
    #: the content the current attempt's owner receipted as its completion before any
    #: transaction opened (None: none); kept until the next attempt opens
    completion_receipt: str | None = None
    #: which provider route this task's attempts use, and whether its breaker is open (after a
    #: provider failure on it, until a due probe at ``probe_at`` succeeds)
    route: str | None = None
    route_unavailable: bool = False
    probe_at: int = 0
    legacy_done: bool = False
    reconstructed: bool = False
    failure: str = "none"
    # work kept from a closed attempt
    retained: str | None = None
    retained_base: str | None = None
    # the external wait (``waiting_on`` is its correlation name)
    waiting_on: str | None = None
    wait_deadline: int = 0
    wait_expired: bool = False


class AttemptRow(NamedTuple):
    """The current attempt's ``attempts`` row (task and fence are its key)."""

    state: str = "none"
    worktree: str | None = None
    origin: str | None = None
    base_hint: str | None = None
    saved_work: str | None = None
    imported: str | None = None
    token_hash: str | None = None


class OwnerRow(NamedTuple):
    """The current attempt's ``owners`` row: the process and how far it is proven."""

    pid: int = 0
    birth: int = 0
    session: str | None = None
    wrapper_epoch: int = 0
    child_epoch: int = 0
    seen: str = "unverified"


class ValveRow(NamedTuple):
    """Where the review valve stands and, when it failed, the code it failed with."""

    phase: str = "working"
    failure: str = "none"


class ManifestRow(NamedTuple):
    """The completion manifest the source worker submitted last: its id and digests."""

    id: str | None = None
    requirements: str | None = None
    contract: str = "none"
    output: str | None = None
    validation: str | None = None
    main: str | None = None


class VerdictRow(NamedTuple):
    """One reviewer's verdict (FLIP's or the evaluation's) and the manifest it was given on."""

    verdict: str = "absent"
    manifest: str | None = None
    requirements: str | None = None


class PublicationRow(NamedTuple):
    """What the promoter published: the manifest, its output, and how many times."""

    manifest: str | None = None
    output: str | None = None
    count: int = 0


#: The valve's parts, all stored on the ``tasks`` row: each change name -> its part and field
#: (the tasks row's column is the change name).
VALVE_COLUMNS: dict[str, tuple[str, str]] = {
    "review_phase": ("valve", "phase"), "review_failure": ("valve", "failure"),
    "manifest": ("submitted", "id"), "manifest_requirements": ("submitted", "requirements"),
    "contract": ("submitted", "contract"), "manifest_output": ("submitted", "output"),
    "manifest_validation": ("submitted", "validation"), "manifest_main": ("submitted", "main"),
    "flip": ("flip_review", "verdict"), "flip_manifest": ("flip_review", "manifest"),
    "flip_requirements": ("flip_review", "requirements"),
    "evaluation": ("evaluation_review", "verdict"), "evaluation_manifest": ("evaluation_review", "manifest"),
    "evaluation_requirements": ("evaluation_review", "requirements"),
    "publication": ("published", "manifest"), "publication_output": ("published", "output"),
    "publications": ("published", "count"),
}


class LeaseRow(NamedTuple):
    """The three ``leases`` rows of a task, by kind: whether each is held."""

    worktree: bool = False
    session: bool = False
    finish: bool = False


class TransactionRow(NamedTuple):
    """The task's ``transactions`` row (its ``fence`` column is the tasks row's)."""

    phase: str = "absent"
    exit: str = "none"
    reason: str = "none"
    revision: int = 0
    candidate: str | None = None
    base: str | None = None
    version: int = 0
    disposition: str = "none"
    effect_done: bool = False


#: Each name a request's changes use (the ledger's ``changes`` keys) -> the row and column
#: that store it. ``receipts`` is its own part: one binding per receipt kind.
COLUMNS: dict[str, tuple[str, str | None]] = {
    **{c: ("tasks", c) for c in TaskRow._fields},
    **{("attempt_state" if c == "state" else "worktree_id" if c == "worktree" else c):
       ("attempts", c) for c in AttemptRow._fields},
    **{("owner_" + c if c in ("pid", "birth", "seen") else c): ("owners", c)
       for c in OwnerRow._fields},
    **{c + "_lease": ("leases", c) for c in LeaseRow._fields},
    **{c: ("transactions", c) for c in TransactionRow._fields},
    "receipts": ("receipts", None),
    **VALVE_COLUMNS,
}
#: (row, column) -> the change name.
CHANGE_NAME = {where: name for name, where in COLUMNS.items()}
#: The record's parts; the valve's (the last five) are stored on the ``tasks`` row.
PARTS = ("tasks", "attempts", "owners", "leases", "transactions", "receipts",
         "valve", "submitted", "flip_review", "evaluation_review", "published")


class TaskRecord(NamedTuple):
    """One task as its tables hold it: one value per row (the receipts as a tuple).

    Each change name of ``COLUMNS`` also reads as an attribute (``record.fence`` is
    ``record.tasks.fence``). Immutable, and made by one tuple construction (a record is
    made once per write: no frozen ``__init__`` setting its parts one by one)."""

    tasks: TaskRow = TaskRow()
    attempts: AttemptRow = AttemptRow()
    owners: OwnerRow = OwnerRow()
    leases: LeaseRow = LeaseRow()
    transactions: TransactionRow = TransactionRow()
    receipts: tuple[Binding, ...] = NO_RECEIPTS
    valve: ValveRow = ValveRow()
    submitted: ManifestRow = ManifestRow()
    flip_review: VerdictRow = VerdictRow()
    evaluation_review: VerdictRow = VerdictRow()
    published: PublicationRow = PublicationRow()

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
        return Binding(self.tasks.fence, self.transactions.candidate, self.transactions.base)

    @property
    def running(self) -> bool:
        return self.attempts.state == "running"

    @property
    def reserved(self) -> bool:
        """The transactions row is past ``absent``: the attempt's terminal report is taken."""
        return self.transactions.phase != "absent"

    @property
    def graph_saved(self) -> bool:
        """The row says graph-saved on the main line and the graph-save receipt has this fence."""
        # guards: done-iff-graphsave, legacy-never-satisfies
        return (self.transactions.phase == "graph-saved" and self.transactions.exit == "none"
                and self.tasks.fence != 0 and self.receipts[-1].fence == self.tasks.fence)

    @property
    def visible_phase(self) -> str:
        """The phase a client names as expected: the exit when one is set, else the phase."""
        tx = self.transactions
        return tx.phase if tx.exit == "none" else tx.exit

    @property
    def effect_id(self) -> str:
        """The identity of this transaction's external effect (one per candidate version)."""
        return f"g{self.tasks.generation}-f{self.tasks.fence}-v{self.transactions.version}"


for _name, (_part, _column) in COLUMNS.items():
    if _column is not None:
        setattr(TaskRecord, _name, property(attrgetter(f"{_part}.{_column}")))
del _name, _part, _column

#: Every change name, in the order of the rows.
RECORD_FIELDS: tuple[str, ...] = tuple(COLUMNS)
EMPTY = TaskRecord()
#: Each change name -> its part's place in ``PARTS`` and its column's place in that part's row
#: (None: the part is the value, as the receipts are).
_PLACES: dict[str, tuple[int, int | None]] = {
    name: (PARTS.index(part), None if column is None
           else getattr(EMPTY, part)._fields.index(column))
    for name, (part, column) in COLUMNS.items()}
#: Each part's row type, by its place (the receipts' tuple for theirs).
_ROW_TYPES = tuple(type(getattr(EMPTY, part)) for part in PARTS)
assert TaskRecord._fields == PARTS


def evolve(t: TaskRecord, **changes: Any) -> TaskRecord:
    """The record with each named change written into its row."""
    parts = list(t)
    rows: dict[int, list] = {}
    for name, value in changes.items():
        place = _PLACES.get(name)
        if place is None:
            raise TypeError(f"TaskRecord has no field {name!r}")
        i, j = place
        if j is None:
            parts[i] = value
            continue
        row = rows.get(i)
        if row is None:
            row = rows[i] = list(parts[i])
        row[j] = value
    for i, row in rows.items():
        parts[i] = tuple.__new__(_ROW_TYPES[i], row)
    return tuple.__new__(TaskRecord, parts)


def changed(before: TaskRecord, after: TaskRecord) -> dict[str, Any]:
    """The change names whose columns differ, with their new values."""
    if before is after:
        return {}
    out: dict[str, Any] = {}
    for part, a, b in zip(PARTS, before, after):
        if a == b:
            continue
        if part == "receipts":
            out["receipts"] = b
            continue
        for column, x, y in zip(b._fields, a, b):
            if x != y:
                out[CHANGE_NAME[part, column]] = y
    return out


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
