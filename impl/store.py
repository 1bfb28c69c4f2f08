"""The durable store: SQLite in WAL mode, one ``atomic()`` unit, schema migrations,
and the mapping of task records onto their normalised tables.

Every accepted request is one ``BEGIN IMMEDIATE`` ... ``COMMIT`` (request
record, stored response, ledger event and projection rows together); nested
``atomic()`` blocks are savepoints; any exception rolls back. The commit is a
durable boundary and passes through the hook (``hooks``) just before and just
after.
"""
from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from .errors import StoreError
from .hooks import COMMIT, Boundary, Hook, no_hook
from .records import EMPTY, NO_BINDING, RECORD_FIELDS, Binding, TaskPolicy, TaskRecord
from .vocabulary import (
    ATTEMPT_STATES, DISPOSITIONS, EXITS, OWNER_SEEN, PHASES, REASONS, RECEIPTS,
)


# --- schema and forward migrations ------------------------------------------------------

SCHEMA_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE tasks (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    review_required INTEGER NOT NULL DEFAULT 0,
    requires_assignment INTEGER NOT NULL DEFAULT 0,
    disposition_policy TEXT NOT NULL DEFAULT 'land',
    generation INTEGER NOT NULL DEFAULT 0,
    attempt INTEGER NOT NULL DEFAULT 0,
    fence INTEGER NOT NULL DEFAULT 0,
    lease_epoch INTEGER NOT NULL DEFAULT 0,
    retained TEXT,
    retained_base TEXT,
    deadline INTEGER NOT NULL DEFAULT 0,
    assigned INTEGER NOT NULL DEFAULT 0,
    legacy_done INTEGER NOT NULL DEFAULT 0,
    reconstructed INTEGER NOT NULL DEFAULT 0,
    abandoned INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE edges (
    task INTEGER NOT NULL, dep INTEGER NOT NULL, PRIMARY KEY (task, dep)
) WITHOUT ROWID;
CREATE TABLE generations (
    task INTEGER NOT NULL, generation INTEGER NOT NULL, opened_seq INTEGER NOT NULL,
    PRIMARY KEY (task, generation)
) WITHOUT ROWID;
CREATE TABLE attempts (
    task INTEGER NOT NULL, fence INTEGER NOT NULL,
    generation INTEGER NOT NULL, attempt INTEGER NOT NULL, lease_epoch INTEGER NOT NULL,
    state TEXT NOT NULL, worktree TEXT, origin TEXT, base_hint TEXT, saved_work TEXT,
    imported TEXT, opened_seq INTEGER NOT NULL,
    PRIMARY KEY (task, fence)
) WITHOUT ROWID;
CREATE TABLE owners (
    task INTEGER NOT NULL, fence INTEGER NOT NULL,
    pid INTEGER NOT NULL, birth INTEGER NOT NULL, session TEXT,
    wrapper_epoch INTEGER NOT NULL, child_epoch INTEGER NOT NULL, seen TEXT NOT NULL,
    PRIMARY KEY (task, fence)
) WITHOUT ROWID;
CREATE TABLE leases (
    task INTEGER NOT NULL, kind TEXT NOT NULL, held INTEGER NOT NULL,
    PRIMARY KEY (task, kind)
) WITHOUT ROWID;
CREATE TABLE transactions (
    task INTEGER PRIMARY KEY,
    fence INTEGER NOT NULL DEFAULT 0,
    phase TEXT NOT NULL DEFAULT 'absent',
    exit TEXT NOT NULL DEFAULT 'none',
    reason TEXT NOT NULL DEFAULT 'none',
    revision INTEGER NOT NULL DEFAULT 0,
    candidate TEXT, base TEXT,
    version INTEGER NOT NULL DEFAULT 0,
    disposition TEXT NOT NULL DEFAULT 'none',
    effect_done INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE receipts (
    task INTEGER NOT NULL, kind TEXT NOT NULL,
    fence INTEGER NOT NULL, candidate TEXT, base TEXT,
    PRIMARY KEY (task, kind)
) WITHOUT ROWID;
CREATE TABLE evidence (
    task INTEGER NOT NULL, kind TEXT NOT NULL, ident TEXT NOT NULL,
    counted INTEGER NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (task, kind, ident)
) WITHOUT ROWID;
CREATE TABLE logs (seq INTEGER PRIMARY KEY, task INTEGER NOT NULL);
CREATE TABLE effects (
    id TEXT PRIMARY KEY, task INTEGER NOT NULL, fence INTEGER NOT NULL,
    version INTEGER NOT NULL, disposition TEXT NOT NULL, candidate TEXT, base TEXT,
    state TEXT NOT NULL, re_observed INTEGER NOT NULL DEFAULT 0,
    prepared_seq INTEGER NOT NULL, settled_seq INTEGER
);
CREATE TABLE worktrees (
    id TEXT PRIMARY KEY, task INTEGER NOT NULL, fence INTEGER NOT NULL,
    origin TEXT, path TEXT, planned_removal INTEGER NOT NULL DEFAULT 0,
    removed INTEGER NOT NULL DEFAULT 0, last_content TEXT
);
CREATE TABLE pins (ref TEXT PRIMARY KEY, task INTEGER NOT NULL, content TEXT NOT NULL,
                   seq INTEGER NOT NULL);
CREATE TABLE journal (
    key TEXT PRIMARY KEY, digest TEXT NOT NULL, response TEXT NOT NULL, seq INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE ledger (
    seq INTEGER PRIMARY KEY, prev TEXT NOT NULL, hash TEXT NOT NULL, event TEXT NOT NULL,
    task TEXT, key TEXT, body TEXT NOT NULL
);
CREATE TABLE task_view (
    task INTEGER PRIMARY KEY, status TEXT NOT NULL, satisfied INTEGER NOT NULL,
    pending INTEGER NOT NULL
);
CREATE TABLE legacy_records (
    id INTEGER PRIMARY KEY, task TEXT NOT NULL, source TEXT NOT NULL, line INTEGER NOT NULL,
    original BLOB NOT NULL, legacy_status TEXT NOT NULL, seq INTEGER NOT NULL
);
"""

SCHEMA_V2 = """
CREATE INDEX edges_by_dep ON edges (dep, task);
CREATE INDEX task_view_ready ON task_view (status, pending);
"""

#: version -> the SQL that takes a database from version - 1 to version.
MIGRATIONS: dict[int, str] = {1: SCHEMA_V1, 2: SCHEMA_V2}
SCHEMA_VERSION = max(MIGRATIONS)

#: Tables whose rows the ledger must reproduce exactly (``rebuild``).
PROJECTED_TABLES = ("tasks", "edges", "generations", "attempts", "owners", "leases",
                    "transactions", "receipts", "evidence", "logs", "effects", "worktrees",
                    "pins", "journal", "task_view", "legacy_records")


@dataclass(frozen=True)
class Pragmas:
    synchronous: str = "FULL"
    busy_timeout_ms: int = 10_000


class Store:
    """One connection to one kernel database."""

    def __init__(self, path: str, *, hook: Hook = no_hook, pragmas: Pragmas = Pragmas(),
                 migrate_to: int = SCHEMA_VERSION):
        self.path = path
        self.hook = hook
        self.depth = 0
        try:
            self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False,
                                        timeout=pragmas.busy_timeout_ms / 1000)
            self.conn.execute(f"PRAGMA busy_timeout = {int(pragmas.busy_timeout_ms)}")
            mode = self.conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal" and path != ":memory:":
                raise StoreError(f"{path}: cannot use WAL journal mode (got {mode})")
            sync = pragmas.synchronous.upper()
            if sync not in ("OFF", "NORMAL", "FULL", "EXTRA"):
                raise StoreError(f"unknown synchronous setting {pragmas.synchronous!r}")
            self.conn.execute(f"PRAGMA synchronous = {sync}")
            self.migrate(migrate_to)
        except sqlite3.DatabaseError as e:
            raise StoreError(f"{path}: not a usable kernel database ({e})") from None

    # --- transactions -----------------------------------------------------------------

    def atomic(self, key: str | None = None) -> "Atomic":
        """BEGIN IMMEDIATE ... COMMIT (a savepoint when nested); rollback on any exception.

        ``with store.atomic(key) as unit:`` — the commit is a durable boundary and passes
        through the hook just before and just after; ``unit.abandon()`` ends the block
        with a rollback instead (nothing was written)."""
        return Atomic(self, key)

    def data_version(self) -> int:
        return self.conn.execute("PRAGMA data_version").fetchone()[0]

    # --- schema ---------------------------------------------------------------------------

    def schema_version(self) -> int:
        has_meta = self.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
        if not has_meta:
            others = self.conn.execute(
                "SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
            if others:
                raise StoreError(f"{self.path}: not a kernel database (no meta table)")
            return 0
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'schema-version'").fetchone()
        if row is None:
            raise StoreError(f"{self.path}: not a kernel database (no schema version)")
        return int(row[0])

    def migrate(self, to: int = SCHEMA_VERSION) -> list[int]:
        """Apply the forward migrations up to ``to``; refuse a database that is newer."""
        with self.atomic() as unit:
            current = self.schema_version()
            if current >= to:
                unit.abandon()
            if current > SCHEMA_VERSION:
                raise StoreError(f"{self.path}: schema version {current} is newer than "
                                 f"this kernel ({SCHEMA_VERSION})")
            applied = []
            for version in range(current + 1, to + 1):
                for statement in MIGRATIONS[version].split(";"):
                    if statement.strip():
                        self.conn.execute(statement)
                self.conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema-version', ?)",
                                  (str(version),))
                applied.append(version)
        return applied

    def meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def dump(self, table: str) -> list[tuple]:
        """Every row of a table, in a canonical order (for rebuild comparisons)."""
        return sorted(self.conn.execute(f"SELECT * FROM {table}").fetchall(), key=repr)

    def close(self) -> None:
        self.conn.close()


class Atomic:
    """One atomic unit of work on a store (see ``Store.atomic``)."""

    __slots__ = ("store", "key", "savepoint", "abandoned")

    def __init__(self, store: Store, key: str | None):
        self.store = store
        self.key = key
        self.savepoint: str | None = None
        self.abandoned = False

    def abandon(self) -> None:
        """Roll back at the end of the block without committing (nothing was written)."""
        self.abandoned = True

    def __enter__(self) -> "Atomic":
        store = self.store
        if store.depth:
            self.savepoint = f"sp{store.depth}"
            store.conn.execute(f"SAVEPOINT {self.savepoint}")
        else:
            store.conn.execute("BEGIN IMMEDIATE")
        store.depth += 1
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        store, conn = self.store, self.store.conn
        store.depth -= 1
        if self.savepoint is not None:
            if exc_type is not None or self.abandoned:
                conn.execute(f"ROLLBACK TO {self.savepoint}")
            conn.execute(f"RELEASE {self.savepoint}")
            return False
        if exc_type is None and not self.abandoned:
            try:
                store.hook(Boundary(COMMIT, "before", self.key))
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            store.hook(Boundary(COMMIT, "after", self.key))
            return False
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        return False


# --- task records on their tables -------------------------------------------------------------

TASK_COLUMNS = ("generation", "attempt", "fence", "lease_epoch", "retained", "retained_base",
                "deadline", "assigned", "legacy_done", "reconstructed", "abandoned")
ATTEMPT_COLUMNS = {"attempt_state": "state", "worktree_id": "worktree", "origin": "origin",
                   "base_hint": "base_hint", "saved_work": "saved_work", "imported": "imported"}
OWNER_COLUMNS = {"owner_pid": "pid", "owner_birth": "birth", "session": "session",
                 "wrapper_epoch": "wrapper_epoch", "child_epoch": "child_epoch",
                 "owner_seen": "seen"}
LEASE_KINDS = {"worktree_lease": "worktree", "session_lease": "session", "finish_lease": "finish"}
TX_COLUMNS = ("phase", "exit", "reason", "revision", "candidate", "base", "version",
              "disposition", "effect_done")
_LABELS = {"attempt_state": frozenset(ATTEMPT_STATES), "owner_seen": frozenset(OWNER_SEEN),
           "phase": frozenset(PHASES), "exit": frozenset(EXITS), "reason": frozenset(REASONS),
           "disposition": frozenset(DISPOSITIONS)}
_BOOLS = {"assigned", "legacy_done", "reconstructed", "abandoned", "effect_done",
          "worktree_lease", "session_lease", "finish_lease"}

_mapped = set(TASK_COLUMNS) | set(ATTEMPT_COLUMNS) | set(OWNER_COLUMNS) | set(LEASE_KINDS) \
    | set(TX_COLUMNS) | {"receipts"}
assert _mapped == set(RECORD_FIELDS), sorted(set(RECORD_FIELDS) ^ _mapped)


def _db(field: str, value: Any) -> Any:
    return int(value) if field in _BOOLS else value


class TaskTables:
    """Reads a ``TaskRecord`` from its tables and writes the fields a request changed."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn
        sel = ", ".join(TASK_COLUMNS)
        self._sel_task = f"SELECT {sel} FROM tasks WHERE id = ?"
        self._sel_attempt = ("SELECT " + ", ".join(ATTEMPT_COLUMNS.values())
                             + " FROM attempts WHERE task = ? AND fence = ?")
        self._sel_owner = ("SELECT " + ", ".join(OWNER_COLUMNS.values())
                           + " FROM owners WHERE task = ? AND fence = ?")
        self._sel_tx = "SELECT " + ", ".join(TX_COLUMNS) + " FROM transactions WHERE task = ?"

    def create(self, task_id: int) -> None:
        """The rows every task has from its creation on."""
        self.conn.execute("INSERT INTO transactions (task) VALUES (?)", (task_id,))
        self.conn.executemany("INSERT INTO leases VALUES (?, ?, 0)",
                              [(task_id, k) for k in LEASE_KINDS.values()])

    def load(self, task_id: int) -> TaskRecord:
        c = self.conn
        values: dict[str, Any] = dict(zip(TASK_COLUMNS, c.execute(self._sel_task, (task_id,)).fetchone()))
        fence = values["fence"]
        if fence:
            row = c.execute(self._sel_attempt, (task_id, fence)).fetchone()
            values.update(zip(ATTEMPT_COLUMNS, row))
            row = c.execute(self._sel_owner, (task_id, fence)).fetchone()
            values.update(zip(OWNER_COLUMNS, row))
        for kind, held in c.execute("SELECT kind, held FROM leases WHERE task = ?", (task_id,)):
            values[f"{kind}_lease"] = held
        values.update(zip(TX_COLUMNS, c.execute(self._sel_tx, (task_id,)).fetchone()))
        receipts = list(EMPTY.receipts)
        index = {name: i for i, name in enumerate(RECEIPTS)}
        for kind, f, cand, base in c.execute(
                "SELECT kind, fence, candidate, base FROM receipts WHERE task = ?", (task_id,)):
            receipts[index[kind]] = Binding(f, cand, base)
        values["receipts"] = tuple(receipts)
        for name in _BOOLS:
            values[name] = bool(values[name])
        for name, allowed in _LABELS.items():
            if name in values and values[name] not in allowed:
                raise StoreError(f"task {task_id}: unknown {name.replace('_', '-')} "
                                 f"{values[name]!r} in the database")
        return TaskRecord(**values)

    def save(self, task_id: int, old: TaskRecord, new: TaskRecord, changes: dict[str, Any],
             seq: int) -> None:
        """Write exactly the changed fields (``changes`` = records.changed(old, new))."""
        if not changes:
            return
        c = self.conn
        cols = [f for f in TASK_COLUMNS if f in changes]
        if cols:
            c.execute(f"UPDATE tasks SET {', '.join(f'{f} = ?' for f in cols)} WHERE id = ?",
                      [_db(f, changes[f]) for f in cols] + [task_id])
        if new.fence and new.fence != old.fence:
            c.execute("INSERT OR REPLACE INTO attempts VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                      (task_id, new.fence, new.generation, new.attempt, new.lease_epoch,
                       new.attempt_state, new.worktree_id, new.origin, new.base_hint,
                       new.saved_work, new.imported, seq))
            c.execute("INSERT OR REPLACE INTO owners VALUES (?,?,?,?,?,?,?,?)",
                      (task_id, new.fence, new.owner_pid, new.owner_birth, new.session,
                       new.wrapper_epoch, new.child_epoch, new.owner_seen))
        elif new.fence:
            self._update(c, "attempts", ATTEMPT_COLUMNS, changes, task_id, new.fence)
            self._update(c, "owners", OWNER_COLUMNS, changes, task_id, new.fence)
        for field, kind in LEASE_KINDS.items():
            if field in changes:
                c.execute("UPDATE leases SET held = ? WHERE task = ? AND kind = ?",
                          (int(changes[field]), task_id, kind))
        cols = [f for f in TX_COLUMNS if f in changes]
        if cols or "fence" in changes:
            cols = cols + ["fence"] if "fence" in changes else cols
            c.execute(f"UPDATE transactions SET {', '.join(f'{f} = ?' for f in cols)} WHERE task = ?",
                      [_db(f, getattr(new, f)) for f in cols] + [task_id])
        if "receipts" in changes:
            for name, before, after in zip(RECEIPTS, old.receipts, new.receipts):
                if before == after:
                    continue
                if after == NO_BINDING:
                    c.execute("DELETE FROM receipts WHERE task = ? AND kind = ?", (task_id, name))
                else:
                    c.execute("INSERT OR REPLACE INTO receipts VALUES (?, ?, ?, ?, ?)",
                              (task_id, name, *after))

    @staticmethod
    def _update(c, table: str, mapping: dict[str, str], changes: dict, task_id: int,
                fence: int) -> None:
        cols = [f for f in mapping if f in changes]
        if cols:
            c.execute(f"UPDATE {table} SET {', '.join(f'{mapping[f]} = ?' for f in cols)} "
                      "WHERE task = ? AND fence = ?",
                      [changes[f] for f in cols] + [task_id, fence])


# --- facts recorded beside a record ----------------------------------------------------------


class FactTables:
    """Writes the facts a decision records (evidence, logs, effects, worktrees, pins)."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn

    def write(self, task_id: int, facts: list[tuple[str, dict]], seq: int) -> None:
        for name, f in facts:
            getattr(self, "_" + name.replace("-", "_"))(task_id, f, seq)

    def _evidence(self, task_id: int, f: dict, seq: int) -> None:
        # guards: compaction-occurrences-counted-once
        self.conn.execute("INSERT OR IGNORE INTO evidence VALUES (?, ?, ?, ?, ?)",
                          (task_id, f["kind"], f["id"], int(f["counted"]), seq))

    def _log(self, task_id: int, f: dict, seq: int) -> None:
        self.conn.execute("INSERT INTO logs VALUES (?, ?)", (seq, task_id))

    def _effect_prepared(self, task_id: int, f: dict, seq: int) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO effects (id, task, fence, version, disposition, candidate, "
            "base, state, prepared_seq) VALUES (?, ?, ?, ?, ?, ?, ?, 'prepared', ?)",
            (f["id"], task_id, f["fence"], f["version"], f["disposition"], f["candidate"],
             f["base"], seq))

    def _effect_committed(self, task_id: int, f: dict, seq: int) -> None:
        self.conn.execute("UPDATE effects SET state = 'committed', re_observed = ?, "
                          "settled_seq = ? WHERE id = ?", (int(f["re-observed"]), seq, f["id"]))

    def _effect_void(self, task_id: int, f: dict, seq: int) -> None:
        self.conn.execute("UPDATE effects SET state = 'void', settled_seq = ? WHERE id = ?",
                          (seq, f["id"]))

    def _worktree_added(self, task_id: int, f: dict, seq: int) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO worktrees (id, task, fence, origin, path, last_content) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (f["worktree"], task_id, f["fence"], f["origin"], f["path"], f["origin"]))

    def _cleanup_planned(self, task_id: int, f: dict, seq: int) -> None:
        self.conn.execute("UPDATE worktrees SET planned_removal = 1, "
                          "last_content = coalesce(?, last_content) WHERE id = ?",
                          (f["content"], f["worktree"]))

    def _worktree_removed(self, task_id: int, f: dict, seq: int) -> None:
        self.conn.execute("UPDATE worktrees SET removed = 1, "
                          "last_content = coalesce(?, last_content) WHERE id = ?",
                          (f["content"], f["worktree"]))

    def _attempt_closed(self, task_id: int, f: dict, seq: int) -> None:
        """An attempt closed in the same request that opened its successor (retry)."""
        self.conn.execute("UPDATE attempts SET state = ? WHERE task = ? AND fence = ?",
                          (f["state"], task_id, f["fence"]))
        self.conn.execute("UPDATE owners SET pid = 0, birth = 0, session = NULL, wrapper_epoch = 0, "
                          "child_epoch = 0, seen = 'unverified' WHERE task = ? AND fence = ?",
                          (task_id, f["fence"]))

    def _generation_opened(self, task_id: int, f: dict, seq: int) -> None:
        self.conn.execute("INSERT INTO generations VALUES (?, ?, ?)",
                          (task_id, f["generation"], seq))

    def _pinned(self, task_id: int, f: dict, seq: int) -> None:
        self.conn.execute("INSERT OR IGNORE INTO pins VALUES (?, ?, ?, ?)",
                          (f["ref"], task_id, f["content"], seq))

    def _legacy_record(self, task_id: int, f: dict, seq: int) -> None:
        self.conn.execute(
            "INSERT INTO legacy_records (task, source, line, original, legacy_status, seq) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (f["task"], f["source"], f["line"], f["original"].encode("utf-8", "surrogateescape"),
             f["status"], seq))


def policy_from_row(row) -> TaskPolicy:
    name, review, assign, disposition = row
    return TaskPolicy(name, (), bool(review), bool(assign), disposition)


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
