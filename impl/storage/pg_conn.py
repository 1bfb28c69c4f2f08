"""One psycopg connection speaking the kernel's (SQLite-dialect) statements, in few round trips.

Inside a transaction, a statement whose result nobody needs yet (``BEGIN``, an
``INSERT``/``UPDATE``/``DELETE``, a savepoint, a ledger append) is queued; the
queue goes to the server in one round trip (one pipeline of the extended protocol,
each statement with parameters bound to its prepared form) when a result is
needed: a read, a cursor's ``rowcount``, or ``COMMIT``. So a request
costs one round trip for ``BEGIN`` and its row locks and one for its writes and
``COMMIT``, whatever the number of rows it writes. Errors of queued statements
surface at that round trip and roll the whole transaction back, as they would
have one statement earlier.

A ledger append returns a ``PendingSeq``: its number is known once the queue
has been sent; a statement queued after it that records the number uses the
server's ``currval('ledger_seq')`` instead (``pg_sql.APPEND`` takes it).
"""
from __future__ import annotations

import importlib
import re

from . import pg_sql as sql
from ..contract.errors import StoreError
from .dsn import redact  # noqa: F401  (re-exported)
from .pg_text import PendingSeq, PgCursor, Queued, Result, bound, dollars, inline
from .store import Pragmas

_MARK = re.compile(r"(?<!%)%s")
_PREPARABLE = ("SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "BEGIN", "COMMIT")
_SYNC, _FAILED = 10, (7, 11)     # libpq's PIPELINE_SYNC; FATAL_ERROR, PIPELINE_ABORTED
QUEUE_MOST = 256            # statements queued at most (a bulk graph edit sends them on)
BULK = 1000                 # tasks added by one graph edit after which the tables are analyzed
SEAL_EVERY = 16             # a connection seals before every 16th of its appends' COMMIT

def driver():
    """psycopg, imported on first use (the implementation imports without it), or a one-line
    StoreError naming the extra to install."""
    try:
        psycopg = importlib.import_module("psycopg")
    except ImportError:
        raise StoreError("a postgresql:// database needs the psycopg driver "
                         "(pip install 'wgk[pg]')") from None
    return psycopg


class Early:
    """A transaction begun ahead of its request (``PgConnection.begin_early``)."""

    __slots__ = ("ids", "locks", "deps", "dep_locks", "write")

    def __init__(self, ids: list[int], locks: Queued):
        self.ids, self.locks = ids, locks
        #: the dependencies locked shared after the task rows, and that lock's statement
        self.deps: list[int] = []
        self.dep_locks: Queued | None = None
        #: a write sent after the locks, ((its text, its parameters), its queued statement)
        self.write: tuple[tuple, Queued] | None = None

    def take(self, ids: list[int], share: bool) -> Queued | None:
        """The locks of ``ids`` sent ahead in this mode (once), else None."""
        if not share and ids == self.ids and self.locks is not None:
            q, self.locks = self.locks, None
            return q
        if share and ids == self.deps and self.dep_locks is not None:
            q, self.dep_locks = self.dep_locks, None
            return q
        return None


class PgConnection:
    """A psycopg connection that speaks the kernel's statements (see the module's doc)."""

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
        self.raw.execute("SET standard_conforming_strings = on")     # what ``literal`` relies on
        self.raw.execute("SET jit = off")       # short statements: compiling costs more than it saves
        encoding = self.raw.execute(sql.ENCODING).fetchone()[0]
        if encoding.upper() not in ("UTF8", "UTF-8"):
            raise StoreError(f"{redact(dsn)}: the database's encoding is {encoding}, the kernel "
                             "needs UTF8 (its ledger hashes are computed on UTF-8 text)")
        self.raw.prepare_threshold = None       # psycopg would DEALLOCATE ALL after a ROLLBACK
        self._tx = psycopg.adapt.Transformer(self.raw)     # results' text to Python values
        self._prepared: dict[str, bytes] = {}   # statement -> its name in this session
        self.round_trips = 0                    # (counted for the benchmarks)
        self._names = 0
        self.queue: list[Queued] = []
        self.open = False              # a transaction is open (its BEGIN may still be queued)
        self.graph_lock: str | None = None     # None, "shared" or "exclusive" in this transaction
        self.appends: list[tuple[str | None, PendingSeq]] = []
        self._next_ids: dict[str, int] = {}     # ids this transaction assigns next
        self._added = 0                         # rows it added to those tables
        self._unsealed = 0                      # appends committed since this connection sealed
        self._savepoints: list[tuple[str, int]] = []
        self._last: PendingSeq | None = None
        self._ahead: tuple[tuple, Queued] | None = None     # a prefetched read
        self.early: Early | None = None         # a transaction begun ahead, not yet taken up
        self.journal_read: str | None = None    # the read its lock function answers (set ahead)
        self._written: tuple[tuple, Queued] | None = None    # its write, taken up with it
        self._taken: Early | None = None        # ... taken up: its locks for ``lock_tasks``
        self._statements: dict[str, sql.Statement] = {}
        self._marked: dict[tuple[str, tuple[int, ...]], str] = {}
        self._columns: dict[str, list[str]] = {}

    def columns(self, table: str) -> list[str]:
        if table not in self._columns:
            self._columns[table] = [r[0] for r in self.raw.execute(sql.COLUMNS, (table,))]
        return self._columns[table]

    # --- the queue ---------------------------------------------------------------------------

    def _put(self, text: str, params=None) -> Queued:
        q = Queued(text, params)
        self.queue.append(q)
        return q

    def sync(self) -> None:
        """Send the queue in one round trip (an error rolls the transaction back: raised).

        The statements go in one pipeline of the extended protocol, closed by one Sync:
        each one with parameters bound to a statement this session prepared (its Parse in
        front, the first time), its arguments as values (nothing of them for the server to
        parse as SQL); each result read back in order."""
        queue, self.queue = self.queue, []
        if not queue:
            return
        new: list[bytes] = []
        messages = [self._message(q, new) for q in queue]     # (a value refused: nothing sent)
        self.round_trips += 1
        pg = self.raw.pgconn
        pg.enter_pipeline_mode()
        try:
            for send, args in messages:
                send(pg, *args)
            pg.pipeline_sync()
            error = self._receive(pg, queue, messages)
        finally:
            _leave_pipeline(pg)
        if error is not None:
            if new:                                 # whether they ran is unknown: never reused
                gone = set(new)
                self._prepared = {k: v for k, v in self._prepared.items() if v not in gone}
            raise error

    def _message(self, q: Queued, new: list[bytes]) -> tuple:
        """How ``q`` goes into the pipeline: bound to its prepared form when it has
        parameters (its Parse in front, the first time)."""
        if q.params is None:
            return _plain, (q.sql.encode(),)
        name = self._prepared.get(q.sql)
        if name is not None:
            return _bind, (name, *bound(q.params))
        if not q.sql.lstrip().upper().startswith(_PREPARABLE):
            return _plain, (inline(q.sql, q.params).encode(),)
        values = bound(q.params)                    # (a value refused: no name given)
        name = self._prepared[q.sql] = b"wgk_%d" % self._names
        self._names += 1
        new.append(name)
        return _parse_and_bind, (name, dollars(q.sql).encode(), *values)

    def _receive(self, pg, queue: list[Queued], messages: list[tuple]):
        """Each statement's result, in order, up to the Sync's; the first error (what came
        after it was skipped)."""
        error, tx = None, self._tx
        for q, (send, _) in zip(queue, messages):
            if send is _parse_and_bind:             # (the Parse's result first)
                res = _next(pg)
                if error is None and res.status in _FAILED:
                    error = self.errors.error_from_result(res, encoding=self.raw.info.encoding)
            res = _next(pg)
            if error is not None:
                continue
            if res.status in _FAILED:
                error = self.errors.error_from_result(res, encoding=self.raw.info.encoding)
                continue
            if res.nfields:
                tx.set_pgresult(res)
                rows = tx.load_rows(0, res.ntuples, tuple)
            else:
                rows = []
            count = res.command_tuples
            q.cur = Result(rows, -1 if count is None else count, res)
        while (res := pg.get_result()) is not None and res.status != _SYNC:
            pass                                    # (up to the Sync's result)
        return error

    def sent(self, q: Queued | None) -> None:
        if q is not None and q.cur is None:
            self.sync()

    def begin(self) -> None:
        """BEGIN (queued), or take up the transaction begun ahead."""
        self._taken, self.early = self.early, None
        self._written = None if self._taken is None else self._taken.write
        self.open, self.graph_lock, self._ahead = True, None, None
        self.appends, self._savepoints, self._last = [], [], None
        self._next_ids, self._added = {}, 0
        if self._taken is None:
            self._put(sql.BEGIN, ())

    def begin_early(self, ids: list[int], key: str, write: tuple[str, tuple] | None = None,
                    deps: list[int] = ()) -> bool:
        """Queue BEGIN and, unless ``key`` is journaled already, the graph lock (shared) and
        the rows of ``ids`` locked ``FOR UPDATE``, with their stamps: the request's
        transaction takes them up (``begin``), else ``end_early`` rolls them back. ``write``
        (a statement and its parameters): the request's own write, sent after the locks;
        the first ``execute`` of the same statement with the same parameters in the
        transaction that takes them up is answered by it (else it is rolled back with them).
        ``deps``: rows locked ``FOR SHARE`` after those, before the write. When
        ``journal_read`` is set (the request's journal read, ``pg_sql.JOURNAL_READ``), the
        lock function answers it: the next ``execute`` of it with ``key`` (outside a
        transaction) takes its answer from the locks' result (once). Whether begun."""
        if self.open or self.early is not None or self._started():
            return False
        ids = sorted(int(i) for i in ids)
        self._put(sql.BEGIN, ())
        self.early = Early(ids, self._put(sql.LOCK, (ids, False, True, key)))
        if self.journal_read is not None:
            self._ahead = ((self.journal_read, (key,)), self.early.locks)
        if deps:
            self.early.deps = sorted(int(i) for i in deps)
            self.early.dep_locks = self._put(sql.LOCK, (self.early.deps, True, False, key))
        if write is not None:
            text, params = write
            self.early.write = ((text, tuple(params)),
                                self._put(*self._bind(self._statement(text).sql, params)))
        return True

    def end_early(self) -> None:
        """A transaction begun ahead and not taken up: dropped, rolled back if begun."""
        if self.early is not None:
            early, self.early = self.early, None
            self.queue.clear()
            if self._ahead is not None and (self._ahead[1].cur is None
                                            or self._ahead[1] is early.locks):
                self._ahead = None                  # (never sent, or answered by the locks)
            if self._started():
                self.raw.execute("ROLLBACK")

    @property
    def in_transaction(self) -> bool:
        return self.open or self.raw.info.transaction_status != 0     # not IDLE

    def _started(self) -> bool:
        """Whether the server has seen this transaction's BEGIN."""
        return self.raw.info.transaction_status != 0

    # --- statements --------------------------------------------------------------------------

    def prefetch(self, text: str, params=()) -> None:
        """Queue a read (outside a transaction) whose result the next ``execute`` of the same
        statement with the same parameters takes instead of asking again (once)."""
        if not self.open:
            self._ahead = ((text, tuple(params)), self._put(*self._bind(self._statement(text).sql,
                                                                         params)))

    def _statement(self, text: str) -> sql.Statement:
        st = self._statements.get(text)
        if st is None:
            st = self._statements[text] = sql.translate(text, self.columns)
        return st

    def execute(self, text: str, params=()) -> PgCursor:
        if text in ("COMMIT", "ROLLBACK"):
            self._end(text)
            return PgCursor(self, None)
        if self._ahead is not None and not self.open and self._ahead[0] == (text, tuple(params)):
            ahead, self._ahead = self._ahead[1], None
            if ahead.sql == sql.LOCK:               # the journal read, answered by the locks
                self.sent(ahead)
                return PgCursor(self, _journaled(ahead.cur))
            return PgCursor(self, ahead)
        if self._written is not None and self.open and self._written[0] == (text, tuple(params)):
            written, self._written = self._written[1], None
            return PgCursor(self, written)
        st = self._statement(text)
        rowid = None
        if st.assigns is not None:
            rowid = self._assign(st.assigns)
            params = (rowid, *params)
        if self.open and st.sql.startswith(("SAVEPOINT", "RELEASE", "ROLLBACK TO")):
            self._savepoint(st.sql)
        q = self._put(*self._bind(st.sql, params))
        if not (self.open and st.deferrable) or len(self.queue) > QUEUE_MOST:
            self.sync()
        return PgCursor(self, q, rowid)

    def _assign(self, table: str) -> int:
        """The id of a new row of ``table`` (``pg_sql.ASSIGNED_IDS``)."""
        if self.graph_lock != "exclusive":
            self.lock_graph()                 # ids are max + 1: one graph edit at a time
        if table not in self._next_ids:
            self._next_ids[table] = self.native(sql.next_id(table)).fetchone()[0]
        self._next_ids[table] += 1
        self._added += 1
        return self._next_ids[table] - 1

    def executemany(self, text: str, rows) -> None:
        for row in rows:
            self.execute(text, row)

    def native(self, text: str, params=()):
        """A statement already in PostgreSQL's dialect (pg_sql), its result now."""
        q = self._put(text, params or None)          # no parameters: a % is the operator
        self.sync()
        return q.cur

    def prepared(self, text: str):
        """A statement already in PostgreSQL's dialect, without parameters, its result now:
        prepared in this session the first time (``native`` parses it at every call)."""
        q = self._put(text, ())
        self.sync()
        return q.cur

    def append(self, event: str, body: str, task: str | None, key: str | None) -> PendingSeq:
        """Queue one ledger append (``pg_sql.APPEND``); its number once the queue is sent."""
        seq = self._last = PendingSeq(self, self._put(sql.APPEND, (event, task, key, body)))
        self.appends.append((task, seq))
        return seq

    def _bind(self, text: str, params) -> tuple[str, list]:
        """Booleans as integers; a pending sequence number as its value, or as ``currval``
        when it is the last append's (still queued)."""
        out, marks = [], []
        for i, p in enumerate(params):
            if isinstance(p, PendingSeq):
                if p is self._last and p._value is None and p.q.cur is None:
                    marks.append(i)
                    continue
                p = p.value
            out.append(int(p) if p is True or p is False else p)
        if not marks:
            return text, out
        key = (text, tuple(marks))
        if key not in self._marked:
            parts = _MARK.split(text)
            self._marked[key] = "".join(
                part + ("" if n == len(parts) - 1 else sql.CURRENT_SEQ if n in marks else "%s")
                for n, part in enumerate(parts))
        return self._marked[key], out

    def _savepoint(self, text: str) -> None:
        verb, name = text.split()[0], text.split()[-1]
        if verb == "SAVEPOINT":
            self._savepoints.append((name, len(self.appends)))
        elif self._savepoints and self._savepoints[-1][0] == name:
            if verb == "ROLLBACK":                  # its appends are undone (their numbers skipped)
                del self.appends[self._savepoints[-1][1]:]
                self._next_ids.clear()              # and the ids it assigned: read again
            else:
                self._savepoints.pop()

    def _end(self, verb: str) -> None:
        """COMMIT sends the queue with it; ROLLBACK drops it (and ends what the server began)."""
        self.open, self._written = False, None
        if verb == "COMMIT" and (self._started() or any(q.sql != sql.BEGIN for q in self.queue)):
            self._unsealed += len(self.appends)
            if self._unsealed >= SEAL_EVERY:        # chain what can be chained, this once
                self._unsealed = 0
                self._put(sql.SEAL_NOW, (False,))
            self._put("COMMIT", ())            # (prepared too: bound, not parsed, each time)
            self.sync()
            if self._added >= BULK:             # the planner's statistics, fresh at once
                self.raw.execute(sql.ANALYZE)
            return
        self.queue.clear()
        if self._started():
            self.raw.execute("ROLLBACK")

    # --- locks -------------------------------------------------------------------------------

    def lock_graph(self) -> None:
        """The graph lock, exclusively, until the end of the transaction (a graph edit)."""
        self._put(sql.GRAPH_LOCK)
        self.graph_lock = "exclusive"

    def lock_tasks(self, ids: list[int], share: bool) -> tuple[dict[str, int | None], int | None]:
        """Row locks on task rows (after the graph lock, shared, unless it is held), then
        each locked task's last event and the committed ledger rows, read after the locks
        were granted: one round trip, with whatever was queued before (none when the
        transaction begun ahead holds them)."""
        ids = sorted(int(i) for i in ids)
        ahead = None if self._taken is None else self._taken.take(ids, share)
        if ahead is None:
            self._taken = None
        else:
            self.sent(ahead)
            stamps, count = _stamps(ahead.cur.fetchall())
            if stamps:                          # (none: the key was used meanwhile)
                self.graph_lock = "shared"
                return stamps, count
        locks = self._put(sql.LOCK, (ids, share, self.graph_lock is None, None))
        self.sync()
        self.graph_lock = self.graph_lock or "shared"
        return _stamps(locks.cur.fetchall())

    def rows_ahead(self) -> int | None:
        """The committed ledger rows as the locks begun ahead counted them, those locks sent
        now with the queue (None: no such locks wait to be sent)."""
        early = self.early
        if early is None or early.locks is None or early.locks.cur is not None:
            return None
        self.sync()
        return _stamps(early.locks.cur.rows)[1]

    def close(self) -> None:
        self.raw.close()


def _stamps(rows: list[tuple]) -> tuple[dict[str, int | None], int | None]:
    """The lock function's rows: each locked task's last event, and the committed ledger
    rows (None: not counted, a schema before PostgreSQL migration 5)."""
    stamps = {r[0]: r[1] for r in rows if r[0] is not None}
    return stamps, (rows[0][2] if rows and len(rows[0]) > 2 else None)


def _journaled(locks: Result) -> Queued:
    """The request's journal read as the lock function answered it (its rows left for
    ``lock_tasks``): a used key's digest and response, else no row."""
    q = Queued(sql.JOURNAL_READ, None)
    first = locks.rows[0] if locks.rows else None
    used = [first[3:5]] if first is not None and first[3] is not None else []
    q.cur = Result(used, len(used), None)
    return q


def _plain(pg, text: bytes) -> None:
    pg.send_query_params(text, None)


def _bind(pg, name: bytes, values: list, formats: list) -> None:
    pg.send_query_prepared(name, values, formats)


def _parse_and_bind(pg, name: bytes, text: bytes, values: list, formats: list) -> None:
    pg.send_prepare(name, text)
    pg.send_query_prepared(name, values, formats)


def _next(pg):
    """The result of the pipeline's next statement (its end read too)."""
    res = pg.get_result()
    while pg.get_result() is not None:           # (one result per statement)
        pass
    return res


def _leave_pipeline(pg) -> None:
    """Out of pipeline mode, whatever of the round trip was left unread read first (an
    interrupted read; a broken connection stays broken)."""
    try:
        while pg.pipeline_status and pg.transaction_status == 1:    # ACTIVE: results pending
            res = pg.get_result()
            if res is None or res.status == _SYNC:
                break
        pg.exit_pipeline_mode()
    except Exception:
        pass


def first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
