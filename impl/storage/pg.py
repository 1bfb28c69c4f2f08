"""The kernel's store on PostgreSQL (psycopg 3, imported only when a DSN is opened).

A database is ``postgresql://...`` (the schema is the connection's
``current_schema()``: set it with libpq's ``options=-csearch_path=NAME``).
Transactions run at READ COMMITTED; every decision is protected by locks the
writing transaction takes itself: the request's task row ``FOR UPDATE`` (and
its dependencies ``FOR SHARE``) before anything is read, and the graph lock
(an advisory lock: shared by requests, exclusive for a graph edit). A deadlock
or serialization failure is run again (``retryable``) with the same key by the
kernel.

The ledger stays one gap-free, linear hash chain while writers overlap (see
``pg_sql``): an append takes the next number of a sequence and is written
unchained; a seal (before every 16th appending COMMIT of a connection) chains
what its transaction sees, taking the seal row with ``SKIP LOCKED``: no writer
waits for another's commit; a number whose transaction rolled back is recorded
as a ``skipped`` event when the chain reaches it. ``verify`` seals first,
waiting for appends in flight.

Caches: after its row locks, a request reads each locked task's last event; a
connection keeps, per task, the last event its caches reflect, and drops them
when a locked task moved. Readers outside a request compare the number of
committed ledger rows (``pg_sql.ROWS``).
"""
from __future__ import annotations

import contextlib
import os
import pickle
import urllib.parse
import uuid
from typing import Iterable, Iterator

from . import pg_sql as sql
from ..contract.errors import StoreError
from ..world.hooks import Hook, no_hook
from .ledger import Ledger
from .dsn import DSN_PREFIXES, is_dsn, redact  # noqa: F401  (re-exported)
from .pg_conn import PgConnection, driver, first_line
from .schema import MIGRATIONS, SCHEMA_VERSION
from .store import Pragmas, Store


__all__ = ["PgStore", "PgLedger", "driver", "is_dsn", "with_schema", "create_schema",
           "drop_schema", "scratch_schema", "recycling", "redact", "first_line"]


def with_schema(dsn: str, schema: str) -> str:
    """The ``postgresql://`` URL ``dsn`` with its search path set to ``schema``."""
    if not is_dsn(dsn):
        raise StoreError(f"{dsn}: not a postgresql:// URL")
    parts = urllib.parse.urlsplit(dsn)
    query = [(k, v) for k, v in urllib.parse.parse_qsl(parts.query) if k != "options"]
    query.append(("options", f"-csearch_path={schema}"))
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def create_schema(dsn: str, schema: str) -> None:
    with driver().connect(dsn, autocommit=True) as c:
        c.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')


def drop_schema(dsn: str, schema: str) -> None:
    with driver().connect(dsn, autocommit=True) as c:
        c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


# --- scratch schemas, made once and recycled within a scope ---------------------------------

#: the open ``recycling`` scopes: each the process that opened it, its spare schemas by
#: database, and the rows of every table of a freshly migrated schema by database
_SCOPES: list[dict] = []


@contextlib.contextmanager
def recycling() -> Iterator[None]:
    """Within: a scratch schema (``scratch_schema``) is not dropped when released but emptied
    back to what a fresh kernel database is after its migrations, in one transaction, and
    handed out again (making and migrating a schema costs a few hundred DDL statements);
    every spare one is dropped at the end. A forked process does not share its parent's."""
    scope = {"pid": os.getpid(), "spare": {}, "fresh": {}}
    _SCOPES.append(scope)
    try:
        yield
    finally:
        _SCOPES.remove(scope)
        for dsn, names in scope["spare"].items():
            for name in names:
                drop_schema(dsn, name)


@contextlib.contextmanager
def scratch_schema(dsn: str, prefix: str = "wgk_scratch") -> Iterator[str]:
    """A new, empty schema in the database of ``dsn``, its DSN yielded, dropped afterwards;
    within ``recycling``, one already migrated (as a fresh kernel database is), kept for reuse
    when it could be emptied."""
    scope = _SCOPES[-1] if _SCOPES and _SCOPES[-1]["pid"] == os.getpid() else None
    spare = scope["spare"].setdefault(dsn, []) if scope else []
    if spare:
        name = spare.pop()
    else:
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        create_schema(dsn, name)
        if scope:
            fresh = _fresh_rows(with_schema(dsn, name))
            scope["fresh"].setdefault(dsn, fresh)
    try:
        yield with_schema(dsn, name)
    except BaseException:
        drop_schema(dsn, name)
        raise
    if scope in _SCOPES and _emptied(with_schema(dsn, name), scope["fresh"][dsn]):
        spare.append(name)
    else:
        drop_schema(dsn, name)


def _fresh_rows(dsn: str) -> dict[str, list]:
    """Migrate the schema of ``dsn``; every table's rows then."""
    store = PgStore(dsn)
    try:
        tables = [r[0] for r in store.conn.native(sql.TABLES)]
        return {t: store.conn.native(f"SELECT * FROM {t}").fetchall() for t in tables}
    finally:
        store.close()


def _emptied(dsn: str, fresh: dict[str, list]) -> bool:
    """Put the schema of ``dsn`` back to ``fresh`` (tables made since dropped); whether done."""
    try:
        with driver().connect(dsn) as c, c.cursor() as cur:
            tables = {r[0] for r in cur.execute(sql.TABLES)}
            for table in tables - set(fresh):
                cur.execute(f"DROP TABLE {table}")
            for table, rows in fresh.items():
                cur.execute(f"DELETE FROM {table}")     # a few rows: cheaper than TRUNCATE
                if rows:
                    marks = ", ".join(["%s"] * len(rows[0]))
                    cur.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
            cur.execute(sql.RESTORE_SEQ)
        return True
    except driver().Error:
        return False


class PgStore(Store):
    """``Store`` on a PostgreSQL schema."""

    #: A scratch schema is always built by replaying the whole ledger.
    takes_images = False

    row_locks = True
    #: The caches are checked before a request's admission (that check travels with the
    #: reads sent ahead).
    checks_at_lock = False
    #: A step's write may go ahead of the record it would be conditional on (``read_ahead``).
    steps_stamped = False

    def __init__(self, dsn: str, *, hook: Hook = no_hook, pragmas: Pragmas = Pragmas(),
                 migrate_to: int = SCHEMA_VERSION, image: None = None):
        """``image``: none (``takes_images`` is false)."""
        self.path = dsn
        self.hook = hook
        self.depth = 0
        self._token = 0               # data_version: moves when the caches may be stale
        self._known: dict[str, int | None] = {}   # task -> the last event the caches reflect
        self._rows: int | None = None  # committed ledger rows when the caches were validated
        self._locked = False           # this transaction holds row locks
        self.conn = PgConnection(dsn, pragmas)
        try:
            self.migrate(migrate_to)
            #: the lock function answers the request's journal read (PostgreSQL migration 6)
            self._answers_journal = int(self.meta("pg-schema-version") or 0) >= sql.JOURNALED
        except self.conn.errors.Error as e:
            raise StoreError(f"{redact(dsn)}: not a usable kernel database ({first_line(e)})") from None

    def begin(self) -> None:
        self._locked = False
        self.conn.begin()

    def committed(self) -> None:
        """This connection's own events: its caches reflect them."""
        appends, self.conn.appends = self.conn.appends, []
        for task, seq in appends:
            if task is not None:
                self._known[task] = seq.value
        if self._rows is not None:
            self._rows += len(appends)

    def data_version(self) -> int:
        """Moves when the caches may be stale: inside a request, when a locked task moved
        (``lock_tasks``); elsewhere, when any connection committed a ledger event."""
        if self.depth and self._locked:
            return self._token
        if self.depth and self.conn.appends:    # the count would include our own appends
            self._rows, self._token = None, self._token + 1
            return self._token
        rows = self.conn.rows_ahead()           # (counted by the locks begun ahead)
        if rows is None:
            rows = self.conn.prepared(sql.ROWS).fetchone()[0]
        if rows != self._rows:
            self._rows, self._token = rows, self._token + 1
        return self._token

    def retryable(self, exc: BaseException) -> bool:
        """A deadlock or serialization failure; the same key journaled by a concurrent request
        on another task (run again, the journal answers it); an append whose number a sealer
        had just recorded as skipped."""
        state = getattr(exc, "sqlstate", None)
        if state == sql.UNIQUE_VIOLATION:
            name = getattr(getattr(exc, "diag", None), "constraint_name", None)
            return name in sql.RETRY_CONSTRAINTS
        return state in sql.RETRY_STATES

    def lock_request(self, task_id, deps, sync) -> bool:
        """The request's task row locked, then its dependencies' (shared): the decision's
        facts hold until COMMIT; the caches are checked after each lock."""
        tid = task_id() if self.row_locks else None
        if tid is None:
            return sync()
        self.lock_tasks([tid])
        stale = sync()
        dep_ids = deps()
        if dep_ids:
            self.lock_tasks(dep_ids, share=True)
            stale = sync() or stale
        return stale

    def read_ahead(self, journal: str, ahead) -> None:
        """The request's journal lookup and, for a known task, BEGIN and its locks unless the
        key is used, and the request's own write where it is known ahead (``ahead()``: key,
        task id, write, the ids of the dependencies it reads, locked shared before it): sent
        with the next round trip (the credential check's). With the locks, the lock function
        answers the journal lookup (``pg_sql.LOCK_FUNCTION_JOURNALED``): no statement of its
        own."""
        found = ahead() if self.row_locks else None
        if found is None:
            return
        key, task_id, write, deps = found
        early = task_id is not None and not self.depth
        answered = early and self._answers_journal and journal == sql.JOURNAL_READ
        if not answered:
            self.conn.prefetch(journal, (key,))
        self.conn.journal_read = journal if answered else None     # (for ``begin_early``)
        if early and not self.conn.begin_early([task_id], key, write, deps) and answered:
            self.conn.prefetch(journal, (key,))     # (not begun: the read goes on its own)

    def settle(self) -> None:
        self.conn.end_early()

    def lock_graph(self) -> None:
        """A graph edit: the graph lock, exclusively, until COMMIT (requests hold it shared)."""
        if self.conn.graph_lock != "exclusive":
            self.conn.lock_graph()

    def lock_tasks(self, ids: list[int], *, share: bool = False) -> None:
        """Row locks until COMMIT; the caches are stale when a locked task's last event is
        not the one they reflect, unless no connection committed anything since they were
        validated (a task this connection meets for the first time)."""
        if not ids:
            return
        stamps, rows = self.conn.lock_tasks(ids, share)
        self._locked = True
        if all(self._known.get(task, -1) == seq for task, seq in stamps.items()):
            return
        if self.conn.appends:                   # (our own appends would be counted)
            rows = None
        elif rows is None:
            rows = self.conn.prepared(sql.ROWS).fetchone()[0]
        if rows is None or rows != self._rows:      # (our own appends would be counted)
            self._rows, self._token = rows, self._token + 1
        self._known.update(stamps)

    def ledger(self) -> "PgLedger":
        return PgLedger(self)

    def schema_version(self) -> int:
        has_meta, tables = self.conn.native(sql.SCHEMA_EXISTS).fetchone()
        if not has_meta:
            if tables:
                raise StoreError(f"{redact(self.path)}: not a kernel database (no meta table)")
            return 0
        row = self.conn.execute("SELECT value FROM meta WHERE key = 'schema-version'").fetchone()
        if row is None:
            raise StoreError(f"{redact(self.path)}: not a kernel database (no schema version)")
        return int(row[0])

    def migrate(self, to: int = SCHEMA_VERSION) -> list[int]:
        """The shared migrations up to ``to``, then PostgreSQL's own (``pg_sql.PG_MIGRATIONS``,
        ``meta`` key ``pg-schema-version``), under an advisory lock: daemons starting at once
        migrate once."""
        with self.atomic() as unit:
            self.conn.native(sql.MIGRATION_LOCK)
            current = self.schema_version()
            if current > SCHEMA_VERSION:
                raise StoreError(f"{redact(self.path)}: schema version {current} is newer than "
                                 f"this kernel ({SCHEMA_VERSION})")
            applied = []
            for version in [v for v in sorted(MIGRATIONS) if current < v <= to]:
                for statement in sql.schema(version):
                    self.conn.native(statement)
                self.set_meta("schema-version", str(version))
                applied.append(version)
            pg_applied = max(current, to) == SCHEMA_VERSION and self._migrate_pg()
            for version in applied:             # (appends need PostgreSQL's own steps)
                self.after_migration(version)
            if not pg_applied and not applied:
                unit.abandon()
        return applied

    def _migrate_pg(self) -> bool:
        """PostgreSQL's own steps, on the latest shared schema (a store opened at an older
        one, as a test of a migration does, keeps the layout of its time)."""
        current = int(self.meta("pg-schema-version") or 0)
        if current > sql.PG_SCHEMA_VERSION:
            raise StoreError(f"{redact(self.path)}: PostgreSQL schema version {current} is newer "
                             f"than this kernel ({sql.PG_SCHEMA_VERSION})")
        for version in range(current + 1, sql.PG_SCHEMA_VERSION + 1):
            for statement in sql.pg_schema(version):
                self.conn.native(statement)
            self.set_meta("pg-schema-version", str(version))
        return current < sql.PG_SCHEMA_VERSION

    # --- scratch copies (rebuild, crash-cut snapshots) -------------------------------------

    def scratch(self):
        """A fresh schema in the same database (``scratch_schema``)."""
        return scratch_schema(self.path)

    @contextlib.contextmanager
    def attached(self, other: Store) -> Iterator[tuple[str, str]]:
        """(this schema, the other store's schema) as qualifiers for one query."""
        mine = self.conn.native("SELECT current_schema()").fetchone()[0]
        with driver().connect(other.path, autocommit=True) as c:
            theirs = c.execute("SELECT current_schema()").fetchone()[0]
        yield f'"{mine}"', f'"{theirs}"'

    def snapshot(self, path: str) -> None:
        """Every table's rows, to a file (``restore`` reads it into a fresh schema)."""
        tables = [r[0] for r in self.conn.native(sql.TABLES)]
        rows = {t: self.conn.native(f"SELECT * FROM {t}").fetchall() for t in tables}
        with open(path, "wb") as f:
            pickle.dump(rows, f)

    def restore(self, path: str) -> None:
        with open(path, "rb") as f:
            rows = pickle.load(f)
        with self.atomic():
            for table, content in rows.items():
                self.conn.native(f"DELETE FROM {table}")
                if content:
                    marks = ", ".join(["%s"] * len(content[0]))
                    with self.conn.raw.cursor() as cur:
                        cur.executemany(f"INSERT INTO {table} VALUES ({marks})", content)
            self.conn.native(sql.RESTORE_SEQ)


class PgLedger(Ledger):
    """The ledger on PostgreSQL: appends queued with the transaction's writes (their numbers
    from a sequence), the chain sealed as described in ``pg_sql``."""

    CHAINED = ("SELECT seq, prev, hash, event, task, key, body, chain FROM ledger WHERE seq >= ? "
               "AND seq <= (SELECT seq FROM ledger_seal WHERE id = 1) ORDER BY seq")

    def __init__(self, store: PgStore):
        super().__init__(store.conn)
        self.store = store

    def head(self) -> tuple[int, str]:
        """The sealed head (every event up to it is chained)."""
        seq, digest = self.store.conn.native(sql.SEALED_HEAD).fetchone()
        return seq, digest

    def append(self, event: str, body: str, *, task: str | None = None,
               key: str | None = None):
        """Queued with the transaction's other writes; the number is a ``PendingSeq``."""
        return self.store.conn.append(event, body, task, key)

    def seq_ahead(self) -> None:
        """Unknown before the append: the number is the sequence's, given when it runs."""
        return None

    def seal(self) -> int:
        """Chain every committed event (waiting for appends in flight); the sealed head."""
        return self.store.conn.native(sql.SEAL_NOW, (True,)).fetchone()[0]

    def verify(self, since: int = 1, anchors: Iterable[tuple[int, str]] = ()):
        """Seal (outside a transaction), then check the chain up to the sealed head."""
        if not self.store.depth:
            self.seal()
        return super().verify(since, anchors)
