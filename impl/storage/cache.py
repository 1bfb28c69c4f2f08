"""What a kernel has read of its tables, kept between requests while it is still true.

A ``ReadCache`` holds task ids, policies and records, the graph id and its protected
paths. They are valid while no other connection commits: ``sync`` asks the store's data
version and drops them when it moved (and, outside a transaction, when they hold more than
``CACHED_TASKS_MOST`` tasks, so a long-lived kernel's memory does not grow with the tasks it
has touched). ``invalidate`` drops them unconditionally after a failed transaction or a
replaced table. The request path, the applier of ledger events and the audit take this
object, never the kernel's private fields.
"""
from __future__ import annotations

from typing import Iterable

from ..contract import protect
from .records import TaskPolicy, TaskRecord
from .store import Store
from .tables import TaskTables

#: The tasks whose records a kernel keeps between requests, at most: past it, the caches are
#: dropped between two requests and read again as after another connection's commit.
CACHED_TASKS_MOST = 1024


class ReadCache:
    """Task ids, policies, records and graph facts read from ``store`` through ``tables``;
    ``also`` are further caches (ledger, status view, principals) dropped with these."""

    def __init__(self, store: Store, tables: TaskTables, also: Iterable[object] = ()):
        self.store = store
        self.tables = tables
        self.also: tuple[object, ...] = tuple(also)
        self.version: int | None = None
        self.forget()

    def forget(self) -> None:
        self.graph_id_: str | None = None
        self.protected: tuple[str, ...] | None = None
        self.id_map: dict[str, int] | None = None
        self.id_of: dict[str, int] = {}      # names looked up one by one (``task_id``)
        self.policies: dict[str, TaskPolicy] = {}
        self.records: dict[str, TaskRecord] = {}
        self.answers: dict[tuple, tuple] = {}
        self.answered_at: tuple | None = None
        for cache in self.also:
            cache.forget()                    # type: ignore[attr-defined]

    def invalidate(self) -> None:
        """Drop everything and read the data version again on the next ``sync``."""
        self.version = None
        self.forget()

    def sync(self) -> bool:
        """Drop the caches if another connection committed since we last looked (or, outside
        a transaction, when they hold more than ``CACHED_TASKS_MOST`` tasks)."""
        v = self.store.data_version()
        if v != self.version:
            self.version = v
            self.forget()
            return True
        return self.trim()

    def trim(self) -> bool:
        """Drop the caches, outside a transaction, when they hold more than
        ``CACHED_TASKS_MOST`` tasks (True when they were dropped)."""
        if len(self.records) > CACHED_TASKS_MOST and not self.store.depth:
            self.forget()
            self.tables.stamps.clear()       # each is read again with its record
            return True
        return False

    # --- answers computed from the whole database (the planner's rows) -------------------------

    def answers_now(self) -> dict[tuple, tuple] | None:
        """The answers kept for the database as it stands (``Store.state_mark``): emptied
        whenever the mark moved since they were kept (a row written, a rollback, another
        connection's commit, a schema change); None where no mark is known (nothing is kept)."""
        mark = self.store.state_mark()
        if mark is None:
            return None
        if mark != self.answered_at or len(self.answers) > CACHED_TASKS_MOST:
            self.answers = {}
            self.answered_at = mark
        return self.answers

    # --- graph facts ---------------------------------------------------------------------

    @property
    def graph_id(self) -> str | None:
        if self.graph_id_ is None:
            self.graph_id_ = self.store.meta("graph-id")
        return self.graph_id_

    def graph_created(self, graph_id: str) -> None:
        self.graph_id_ = graph_id

    def known_protected_paths(self) -> tuple[str, ...] | None:
        """The protected path patterns if this cache already holds them (no read)."""
        return self.protected

    def protected_paths(self) -> tuple[str, ...]:
        if self.protected is None:
            self.protected = protect.decode(self.store.meta(f"config:{protect.CONFIG_KEY}"))
        return self.protected

    # --- tasks ---------------------------------------------------------------------------

    def ids(self) -> dict[str, int]:
        if self.id_map is None:
            self.id_map = dict(self.store.conn.execute("SELECT name, id FROM tasks ORDER BY id"))
        return self.id_map

    def known_id(self, name: str) -> int | None:
        """A task's id if this cache already holds it (no read)."""
        return (self.id_map or {}).get(name) or self.id_of.get(name)

    def task_id(self, name: str) -> int | None:
        """One task's id (None: no such task), read by its name's index when the whole map
        is not loaded: a request's cost does not grow with the number of tasks."""
        if self.id_map is not None and name in self.id_map:
            return self.id_map[name]
        tid = self.id_of.get(name)
        if tid is None:
            row = self.store.conn.execute("SELECT id FROM tasks WHERE name = ?",
                                          (name,)).fetchone()
            if row is None:
                return None
            tid = self.id_of[name] = row[0]
            if self.id_map is not None:        # added by another connection since it was read
                self.id_map = None
        return tid

    def _known(self, name: str) -> int:
        tid = self.task_id(name)
        if tid is None:
            raise KeyError(name)
        return tid

    def policy(self, name: str) -> TaskPolicy:
        p = self.policies.get(name)
        if p is None:
            p = self.policies[name] = self.tables.load_policy(self._known(name), name)
        return p

    def known_policy(self, name: str) -> TaskPolicy | None:
        """A task's policy if this cache already holds it (no read)."""
        return self.policies.get(name)

    def put_policy(self, policy: TaskPolicy) -> None:
        """The policy of a task just added (no read needed)."""
        self.policies[policy.name] = policy

    def policy_changed(self, name: str) -> None:
        self.policies.pop(name, None)

    def record(self, name: str) -> TaskRecord:
        r = self.records.get(name)
        if r is None:
            r = self.records[name] = self.tables.load(self._known(name))
        return r

    def put_record(self, name: str, record: TaskRecord) -> None:
        """The record a write just stored (no read needed)."""
        self.records[name] = record


