"""The kernel's store on PostgreSQL (psycopg 3, imported only when a DSN is opened).

A database is ``postgresql://...`` (the schema is the connection's
``current_schema()``: set it with libpq's ``options=-csearch_path=NAME``).
Transactions run at READ COMMITTED; every decision is protected by row locks
taken by the writing transaction itself: the request's task row ``FOR UPDATE``
(and its dependencies ``FOR SHARE``) before anything is read, and the
single-row ledger head ``FOR UPDATE`` when the event is appended, so the
ledger's sequence and hash chain stay gap-free and linear while decisions on
other tasks proceed in parallel. A deadlock or serialization failure is run
again (``retryable``) with the same key by the kernel.
"""
from __future__ import annotations

import contextlib
import importlib
import json
import pickle
import urllib.parse
import uuid
from typing import Any, Iterator

from . import pg_sql as sql
from .errors import StoreError
from .hooks import Hook, no_hook
from .ledger import Ledger
from .schema import SCHEMA_VERSION
from .store import Pragmas, Store

DSN_PREFIXES = ("postgresql://", "postgres://")


def is_dsn(path: Any) -> bool:
    return isinstance(path, str) and path.startswith(DSN_PREFIXES)


def driver():
    """psycopg, imported on first use (the implementation imports without it), or a one-line
    StoreError naming the extra to install."""
    try:
        psycopg = importlib.import_module("psycopg")
    except ImportError:
        raise StoreError("a postgresql:// database needs the psycopg driver "
                         "(pip install 'wgk[pg]')") from None
    return psycopg


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


class PgCursor:
    """The part of a sqlite3 cursor the kernel uses."""

    __slots__ = ("cur", "lastrowid")

    def __init__(self, cur, lastrowid=None):
        self.cur, self.lastrowid = cur, lastrowid

    def fetchone(self):
        return self.cur.fetchone()

    def fetchall(self):
        return self.cur.fetchall()

    def __iter__(self):
        return iter(self.cur.fetchall() if self.cur.description else ())

    @property
    def rowcount(self) -> int:
        return self.cur.rowcount


class PgConnection:
    """A psycopg connection that speaks the kernel's (SQLite-dialect) statements."""

    def __init__(self, dsn: str, pragmas: Pragmas):
        psycopg = driver()
        self.errors = psycopg.errors
        try:
            self.raw = psycopg.connect(dsn, autocommit=True)
        except psycopg.Error as e:
            raise StoreError(f"{redact(dsn)}: cannot connect ({first_line(e)})") from None
        sync = {"OFF": "off", "NORMAL": "on", "FULL": "on", "EXTRA": "on"}.get(
            pragmas.synchronous.upper())
        if sync is None:
            raise StoreError(f"unknown synchronous setting {pragmas.synchronous!r}")
        self.raw.execute(f"SET synchronous_commit = {sync}")
        self.raw.execute(f"SET lock_timeout = {int(pragmas.busy_timeout_ms)}")
        encoding = self.raw.execute(sql.ENCODING).fetchone()[0]
        if encoding.upper() not in ("UTF8", "UTF-8"):
            raise StoreError(f"{redact(dsn)}: the database's encoding is {encoding}, the kernel "
                             "needs UTF8 (its ledger hashes are computed on UTF-8 text)")
        self.begin_pending = False     # BEGIN is sent with the transaction's first statement
        self._statements: dict[str, sql.Statement] = {}
        self._columns: dict[str, list[str]] = {}

    def columns(self, table: str) -> list[str]:
        if table not in self._columns:
            self._columns[table] = [r[0] for r in self.raw.execute(sql.COLUMNS, (table,))]
        return self._columns[table]

    def _begin(self) -> None:
        if self.begin_pending:
            self.begin_pending = False
            self.raw.execute(sql.BEGIN)

    def execute(self, text: str, params=()) -> PgCursor:
        if self.begin_pending:
            if text in ("COMMIT", "ROLLBACK"):       # nothing was sent: nothing to end
                self.begin_pending = False
                return PgCursor(None)
            self._begin()
        st = self._statements.get(text)
        if st is None:
            st = self._statements[text] = sql.translate(text, self.columns)
        cur = self.raw.execute(st.sql, [int(p) if p is True or p is False else p for p in params])
        return PgCursor(cur, cur.fetchone()[0] if st.returns_id else None)

    def executemany(self, text: str, rows) -> None:
        for row in rows:
            self.execute(text, row)

    def native(self, text: str, params=()):
        """A statement already in PostgreSQL's dialect (pg_sql)."""
        self._begin()
        return self.raw.execute(text, params)

    def lock_tasks(self, ids: list[int], share: bool) -> int:
        """Lock task rows (opening the pending transaction in the same round trip); returns
        the ledger head read after the locks were granted."""
        cur = self.raw.execute(sql.lock_tasks(ids, share, self.begin_pending))
        self.begin_pending = False
        while cur.nextset():
            pass
        return cur.fetchone()[0]

    @property
    def in_transaction(self) -> bool:
        return self.begin_pending or self.raw.info.transaction_status != 0    # not IDLE

    def close(self) -> None:
        self.raw.close()


class PgStore(Store):
    """``Store`` on a PostgreSQL schema."""

    row_locks = True

    def __init__(self, dsn: str, *, hook: Hook = no_hook, pragmas: Pragmas = Pragmas(),
                 migrate_to: int = SCHEMA_VERSION):
        self.path = dsn
        self.hook = hook
        self.depth = 0
        self.txn = 0                  # counts top-level transactions (the ledger head's cache)
        self._seen_head = -1          # the ledger head this connection last knew of
        self._token = 0
        self._pending: int | None = None
        self._fresh_head: int | None = None
        self.conn = PgConnection(dsn, pragmas)
        try:
            self.migrate(migrate_to)
        except self.conn.errors.Error as e:
            raise StoreError(f"{redact(dsn)}: not a usable kernel database ({first_line(e)})") from None

    def begin(self) -> None:
        self.txn += 1
        self._pending = None
        self._fresh_head = None
        self.conn.begin_pending = True

    def committed(self) -> None:
        if self._pending is not None:
            self._seen_head = self._pending

    def data_version(self) -> int:
        """Changes whenever another connection has appended to the ledger."""
        seq, self._fresh_head = self._fresh_head, None
        if seq is None:
            seq = self.conn.native(sql.HEAD_READ).fetchone()[0]
        self.observed_head(seq)
        return self._token

    def observed_head(self, seq: int) -> None:
        if seq != self._seen_head:
            self._seen_head = seq
            self._token += 1

    def retryable(self, exc: BaseException) -> bool:
        """A deadlock or serialization failure; or the same key journaled by a concurrent
        request on another task (run again, the journal answers it)."""
        state = getattr(exc, "sqlstate", None)
        if state == sql.UNIQUE_VIOLATION:
            return getattr(getattr(exc, "diag", None), "constraint_name", None) == "journal_pkey"
        return state in sql.RETRY_STATES

    def lock_tasks(self, ids: list[int], *, share: bool = False) -> None:
        """Row locks until COMMIT; the next ``data_version`` uses the head read after them."""
        if ids:
            self._fresh_head = self.conn.lock_tasks(ids, share)

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
        with self.atomic() as unit:
            self.conn.native(sql.MIGRATION_LOCK)
            current = self.schema_version()
            if current >= to:
                unit.abandon()
            if current > SCHEMA_VERSION:
                raise StoreError(f"{redact(self.path)}: schema version {current} is newer than "
                                 f"this kernel ({SCHEMA_VERSION})")
            applied = []
            for version in range(current + 1, to + 1):
                for statement in sql.schema(version):
                    self.conn.native(statement)
                self.set_meta("schema-version", str(version))
                self.after_migration(version)
                applied.append(version)
        return applied

    # --- scratch copies (rebuild, crash-cut snapshots) -------------------------------------

    @contextlib.contextmanager
    def scratch(self) -> Iterator[str]:
        """A fresh, empty schema in the same database (dropped afterwards)."""
        name = f"wgk_scratch_{uuid.uuid4().hex[:12]}"
        create_schema(self.path, name)
        try:
            yield with_schema(self.path, name)
        finally:
            drop_schema(self.path, name)

    @contextlib.contextmanager
    def attached(self, other: str) -> Iterator[tuple[str, str]]:
        """(this schema, the other store's schema) as qualifiers for one query."""
        mine = self.conn.native("SELECT current_schema()").fetchone()[0]
        with driver().connect(other, autocommit=True) as c:
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


class PgLedger(Ledger):
    """The ledger whose head is one row, locked by the appending transaction."""

    def __init__(self, store: PgStore):
        super().__init__(store.conn)
        self.store = store
        self._txn = -1

    def head(self) -> tuple[int, str]:
        if self._head is None or self._txn != self.store.txn or not self.store.depth:
            seq, digest = self.store.conn.native(sql.HEAD_FOR_UPDATE).fetchone()
            if self.store.depth:
                self.store.observed_head(seq)
            self._head, self._txn = (seq, digest), self.store.txn
        return self._head

    def append(self, event: str, body: str, *, task: str | None = None,
               key: str | None = None) -> int:
        """One round trip (``pg_sql.APPEND``); the head it moved stays locked until COMMIT."""
        seq, digest = self.store.conn.native(
            sql.APPEND, {"event": event, "body": body, "task": task, "key": key,
                         "task_json": json.dumps(task), "key_json": json.dumps(key)}).fetchone()
        if self.store.depth:
            self.store.observed_head(seq - 1)   # another connection's commit: caches go stale
        self._head, self._txn = (seq, digest), self.store.txn
        self.store._pending = seq
        return seq


def redact(dsn: str) -> str:
    """A DSN without its password (for messages)."""
    parts = urllib.parse.urlsplit(dsn)
    if parts.password is None:
        return dsn
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[-1]
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}@{host}"))


def first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]

