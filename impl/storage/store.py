"""The durable store: SQLite in WAL mode, one ``atomic()`` unit, schema migrations
(the schema itself in ``schema``; task records on their tables in ``tables``).

Every accepted request is one ``BEGIN IMMEDIATE`` ... ``COMMIT`` (request
record, stored response, ledger event and projection rows together); nested
``atomic()`` blocks are savepoints; any exception rolls back. The commit is a
durable boundary and passes through the hook (``hooks``) just before and just
after.
"""
from __future__ import annotations

import contextlib
import os
import sqlite3
from dataclasses import dataclass
from typing import Any, Callable

from ..contract.errors import StoreError
from ..world.hooks import COMMIT, Boundary, Hook, no_hook
from .ledger import SEALED, Ledger
from ..contract.canonical import canonical_json
from .authority import principal_body
from .schema import (  # noqa: F401  (re-exported)
    LEDGER_SEAL_VERSION, MIGRATIONS, PRINCIPALS_CHAINED_VERSION, PROJECTED_TABLES, SCHEMA_VERSION,
)


#: Why a write of a record failed its condition (``tables.STAMP``; PostgreSQL: ``pg_sql``).
CONFLICT = "wgk: a row changed under the decision"


#: Compiled statements a connection keeps (sqlite3's default, 128, is fewer than the kernel's
#: distinct statements: the planner's query, the largest, was compiled again on most calls).
STATEMENTS_KEPT = 1024


@dataclass(frozen=True)
class Pragmas:
    synchronous: str = "FULL"
    busy_timeout_ms: int = 10_000


#: The two counters of ``Store.state_mark``, each its own pragma statement: not the table-valued
#: ``pragma_data_version()``, whose virtual table SQLite 3.40 leaves dangling in a connection
#: whose database is replaced by ``deserialize`` (the next statement using it crashes the process).
_MARK = ("PRAGMA data_version", "PRAGMA schema_version")

#: The empty database of each store class at the current schema (``Store.empty``).
_EMPTY: dict[type, bytes] = {}

#: A scratch database (``Store.scratch``) of a database smaller than this is kept in memory.
MEMORY_SCRATCH_BYTES = 64 << 20



class Store:
    """One connection to one kernel database (SQLite; ``pg.PgStore`` on PostgreSQL)."""

    #: SQLite's BEGIN IMMEDIATE already serialises writers: no row locks are needed.
    row_locks = False
    #: A scratch database can start from an image of another (``audit.Replayed``).
    takes_images = True
    #: Transactions and savepoints rolled back on this connection (``state_mark``).
    rollbacks = 0
    #: Whether ``close`` closes the connection (not one given to the store: ``conn``).
    owned = True
    #: A request is admitted on the caches as they are and they are checked once, under its
    #: writer lock (``Kernel._handle``): a statement outside a transaction takes a read
    #: transaction of its own, the costliest of a request's small statements.
    checks_at_lock = True
    #: A step's write moves its task's stamp on (``tables.TaskTables.step_if_current``): the
    #: record it is conditional on is read before it.
    steps_stamped = True

    def __init__(self, path: str, *, hook: Hook = no_hook, pragmas: Pragmas = Pragmas(),
                 migrate_to: int = SCHEMA_VERSION, image: bytes | None = None,
                 conn: sqlite3.Connection | None = None):
        """``image``: the database starts as these bytes (a scratch database, ``scratch``:
        written to ``path``, or held in memory for ":memory:"). ``conn``: an open connection
        (``held``, to ":memory:", whose database its caller holds) used instead of connecting:
        set up as a new one is (its settings and schema check), not in a transaction, and left
        open by ``close`` (``owned`` False)."""
        self.path = path
        self.hook = hook
        self.depth = 0
        self.owned = conn is None
        if conn is not None and conn.in_transaction:
            raise StoreError(f"{path}: the connection given is in a transaction")
        if path != ":memory:" and not path.startswith("file:"):
            create_private(path)
        if image is not None and path != ":memory:":
            with open(path, "wb") as f:
                f.write(image)
        try:
            self.conn = conn if conn is not None else connect(path, pragmas)
            self.conflicts = 0
            if isinstance(self.conn, Held):       # its function, defined once, now this store's
                self.conn.store = self
            else:
                self.conn.create_function("wgk_expect", 1, self._expect)
            if image is not None and path == ":memory:":
                self.conn.deserialize(image)
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

    def begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def committed(self) -> None:
        """Called after each top-level commit."""

    def data_version(self) -> int:
        return self.conn.execute("PRAGMA data_version").fetchone()[0]

    def state_mark(self) -> tuple | None:
        """What moves whenever what this connection reads may have changed: a commit of another
        connection (``data_version``), a schema change (``schema_version``), a row this
        connection changed (``total_changes``, which counts a change even when it is rolled
        back) and a rollback of this connection (``rollbacks``: the rows read inside the
        transaction are gone). Equal marks: the same database state, so an answer computed
        from it still holds. None where it is not known (not SQLite: nothing is kept)."""
        conn = self.conn
        if not isinstance(conn, sqlite3.Connection):
            return None
        (data,), = conn.execute(_MARK[0]).fetchall()
        (schema,), = conn.execute(_MARK[1]).fetchall()
        return data, schema, conn.total_changes, self.rollbacks

    def _expect(self, held) -> int:
        """The condition of a record's writes (``tables.STAMP``): a row that no longer
        holds what the decision read fails the statement (run again: ``retryable``)."""
        if not held:
            self.conflicts += 1
            raise sqlite3.OperationalError(CONFLICT)
        return 1

    def retryable(self, exc: BaseException) -> bool:
        """Whether a failed transaction is run again: on SQLite (one writer at a time) only a
        write whose row changed under its decision (``_expect``: the decision was made on
        facts the database no longer holds)."""
        if self.conflicts and isinstance(exc, sqlite3.OperationalError):
            self.conflicts = 0
            return True
        return False

    def lock_tasks(self, ids: list[int], *, share: bool = False) -> None:
        """Row locks on task rows (PostgreSQL); the whole database is locked on SQLite."""

    def lock_request(self, task_id: Callable[[], int | None], deps: Callable[[], list[int]],
                     sync: Callable[[], bool]) -> bool:
        """Lock the rows a request's decision reads (its task ``task_id()``, the dependencies
        ``deps()``) and drop stale caches (``sync``, True when it did). SQLite's one writer
        (BEGIN IMMEDIATE) already covers every row: only the caches are checked."""
        return sync()

    def read_ahead(self, journal: str, ahead: Callable[[], tuple | None]) -> None:
        """Send a request's first reads (and locks) ahead (PostgreSQL: they travel with the
        credential check's round trip; ``ahead()``: its key, known task id and the write that
        decides it where known ahead, None for a key no store can hold); SQLite has no round
        trip to save."""

    def settle(self) -> None:
        """End whatever ``read_ahead`` began that the request did not take up."""

    def lock_graph(self) -> None:
        """A graph edit excludes every request (PostgreSQL); SQLite has one writer anyway."""

    def ledger(self) -> Ledger:
        return Ledger(self.conn, self.state_mark)

    # --- scratch copies (rebuild, crash-cut snapshots) -------------------------------------

    @contextlib.contextmanager
    def scratch(self):
        """Where a fresh database of the same backend opens, from an image (``empty``, or an
        earlier replay's): in memory (":memory:") while this database is smaller than
        ``MEMORY_SCRATCH_BYTES``, else a file in a temporary directory removed afterwards.
        A scratch database is a rebuild's work, never durable state."""
        if self.size() < MEMORY_SCRATCH_BYTES:
            yield ":memory:"
            return
        import tempfile                          # lazy: only a large database's rebuild
        with tempfile.TemporaryDirectory(prefix="wgk-rebuild-") as tmp:
            yield os.path.join(tmp, "rebuilt.db")

    def size(self) -> int:
        """The bytes of this database's files (the main file and its write-ahead log)."""
        return sum(os.path.getsize(p) for p in (self.path, self.path + "-wal") if os.path.exists(p))

    @classmethod
    def empty(cls) -> bytes:
        """The bytes of an empty database at the current schema, made by ``migrate`` in
        memory the first time they are asked for."""
        image = _EMPTY.get(cls)
        if image is None:
            store = cls(":memory:", pragmas=Pragmas(synchronous="OFF"))
            try:
                image = _EMPTY[cls] = store.conn.serialize()
            finally:
                store.close()
        return image

    @contextlib.contextmanager
    def attached(self, other: "Store"):
        """(this database, the other store's) as qualifiers usable in one query on this
        connection (a database in memory is attached as a copy of its bytes)."""
        self.conn.execute("ATTACH DATABASE ? AS rebuilt", (other.path,))
        try:
            if other.path == ":memory:":
                self.conn.deserialize(other.conn.serialize(), name="rebuilt")
            yield "main", "rebuilt"
        finally:
            self.conn.execute("DETACH DATABASE rebuilt")

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
        """Apply the forward migrations up to ``to``; refuse a database that is newer.

        The version is read first, outside any transaction: a database already at ``to``
        is opened without taking the write lock. A migration that is due is taken under
        the write lock (``BEGIN IMMEDIATE``) and reads the version again there, so two
        openers racing on one database migrate it once."""
        if to <= self.schema_version() <= SCHEMA_VERSION:
            return []
        with self.atomic() as unit:
            current = self.schema_version()
            if current >= to:
                unit.abandon()
            if current > SCHEMA_VERSION:
                raise StoreError(f"{self.path}: schema version {current} is newer than "
                                 f"this kernel ({SCHEMA_VERSION})")
            applied = []
            for version in [v for v in sorted(MIGRATIONS) if current < v <= to]:
                for statement in MIGRATIONS[version].split(";"):
                    if statement.strip():
                        self.conn.execute(statement)
                self.conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema-version', ?)",
                                  (str(version),))
                self.after_migration(version)
                applied.append(version)
        return applied

    def after_migration(self, version: int) -> None:
        """What a migration step does beyond its SQL: schema 3 seals the version-1 rows of
        the ledger with one ``ledger-sealed`` event (nothing for an empty ledger); schema 10
        writes the principals made before it to the ledger (``chain_principals``)."""
        if version == LEDGER_SEAL_VERSION:
            body = self.ledger().seal_body()
            if body is not None:
                self.ledger().append(SEALED, body)
        if version == PRINCIPALS_CHAINED_VERSION:
            self.chain_principals()

    def chain_principals(self) -> None:
        """Each principal of a table made before principals were history: its events
        (added, and revoked if it is), its row pointing at the last one."""
        ledger = self.ledger()
        rows = self.conn.execute("SELECT name, secret_sha256, roles, revoked FROM principals "
                                 "WHERE seq = 0 ORDER BY name").fetchall()
        for name, sha, roles, revoked in rows:
            held = [r for r in roles.split(",") if r]
            seq = ledger.append("principal-added", dumps(principal_body(name, sha, held, False)),
                                key=name)
            if revoked:
                seq = ledger.append("principal-revoked",
                                    dumps(principal_body(name, sha, held, True)), key=name)
            self.conn.execute("UPDATE principals SET seq = ? WHERE name = ?", (seq, name))

    def meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def set_meta(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def dump(self, table: str) -> list[tuple]:
        """Every row of a table, in a canonical order (for rebuild comparisons)."""
        return sorted(self.conn.execute(f"SELECT * FROM {table}").fetchall(), key=repr)

    def close(self) -> None:
        if self.owned:
            self.conn.close()


def connect(path: str, pragmas: Pragmas = Pragmas(), **factory) -> sqlite3.Connection:
    """A new connection as a store opens it (``factory``: of another class, ``held``'s)."""
    return sqlite3.connect(path, isolation_level=None, check_same_thread=False,
                           timeout=pragmas.busy_timeout_ms / 1000, cached_statements=STATEMENTS_KEPT,
                           **factory)


class Held(sqlite3.Connection):
    """A connection its caller holds for several stores in turn (``Store``'s ``conn``, made by
    ``held``): its one function is defined once and calls the store opened on it last (SQLite
    expires every statement a connection compiled when a function is defined again)."""

    store: "Store | None" = None
    #: The image its database holds, as ``serialize`` gave it, while nothing wrote to it since
    #: (``audit.replayed``: the next replay starts from that image; None: not known).
    image: "bytes | None" = None


def held(path: str = ":memory:", pragmas: Pragmas = Pragmas()) -> Held:
    """A connection as a store opens it, to be held for several stores in turn (``Held``)."""
    conn = connect(path, pragmas, factory=Held)
    conn.create_function("wgk_expect", 1, lambda ok: conn.store._expect(ok))
    return conn


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
            store.begin()
        store.depth += 1
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        store, conn = self.store, self.store.conn
        store.depth -= 1
        if self.savepoint is not None:
            if exc_type is not None or self.abandoned:
                store.rollbacks += 1
                conn.execute(f"ROLLBACK TO {self.savepoint}")
            conn.execute(f"RELEASE {self.savepoint}")
            return False
        if exc_type is None and not self.abandoned:
            hook = store.hook             # (the default hook is not called: it does nothing)
            try:
                if hook is not no_hook:
                    hook(Boundary(COMMIT, "before", self.key))
                conn.execute("COMMIT")
            except BaseException:
                store.rollbacks += 1
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            store.committed()
            if hook is not no_hook:
                hook(Boundary(COMMIT, "after", self.key))
            return False
        store.rollbacks += 1
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        return False


def create_private(path: str) -> None:
    """A database file that does not exist yet is created readable and writable by its
    owner only (0600, whatever the umask) before SQLite opens it; SQLite gives its
    write-ahead log and shared-memory files the same mode. An existing file is left as is."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return
    except OSError as e:
        raise StoreError(f"{path}: cannot create the database: {e.strerror}") from None
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def dumps(value: Any) -> str:
    """``json.dumps(value, sort_keys=True, separators=(",", ":"))``."""
    return canonical_json(value)
