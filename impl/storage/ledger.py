"""The append-only, hash-linked event ledger, every column under the chain.

Every event (graph edits, seeds, imports and every decided request, rejections
included) is one row ``(seq, prev, hash, event, task, key, body, chain)``. The
body of a request event holds the request, its response, the record fields it
changed and the facts it recorded: enough to rebuild every table.

Chain version 2 (every row written since schema 3) hashes every column::

    hash = sha256(prev "\\n" "2" "\\n" seq "\\n" event "\\n" json(task) "\\n" json(key) "\\n" body)

(``json(None)`` is ``null``, so an absent task differs from an empty one; the
version is hashed too). Version 1, the rows of a ledger made before schema 3,
hashed ``prev "\\n" event "\\n" body`` only; those rows keep their hashes (anchors
taken of them stay valid) and the migration appends one version-2
``ledger-sealed`` event whose body holds the sha256 of every column of every
version-1 row, so their ``seq``, ``task`` and ``key`` are under the chain from
then on. Versions never decrease along the chain.

``verify`` recomputes the chain and reports the first broken link; given
*anchors* (``(seq, hash)`` pairs kept outside the database, see ``wgk kernel
anchor``) it also reports a ledger that ends before an anchor (a removed tail, a
lost WAL) or holds another hash at an anchored seq (an edited and re-hashed chain).
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii
from typing import Callable, Iterable, Iterator

GENESIS = "0" * 64
CHAIN = 2                      # the version new rows are hashed with
SEALED = "ledger-sealed"       # the event that puts version-1 rows' columns under the chain


def link(prev: str, event: str, body: str) -> str:
    """Version 1: prev, event and body only (rows written before schema 3)."""
    return hashlib.sha256(f"{prev}\n{event}\n{body}".encode()).hexdigest()


def link_v2(prev: str, seq: int, event: str, task: str | None, key: str | None, body: str) -> str:
    """Version 2: every column (``pg_sql.APPEND`` computes the same text in SQL)."""
    text = f"{prev}\n2\n{seq}\n{event}\n{_json(task)}\n{_json(key)}\n{body}"
    return hashlib.sha256(text.encode()).hexdigest()


def _json(value) -> str:
    """``json.dumps(value)`` (a string without building an encoder)."""
    return encode_basestring_ascii(value) if type(value) is str else json.dumps(value)


def row_hash(chain: int, prev: str, seq: int, event: str, task, key, body: str) -> str | None:
    if chain == 1:
        return link(prev, event, body)
    if chain == 2:
        return link_v2(prev, seq, event, task, key, body)
    return None


def columns_digest(rows: Iterable[tuple]) -> str:
    """sha256 of every column of ``rows`` ((seq, prev, hash, event, task, key) each)."""
    h = hashlib.sha256()
    for row in rows:
        h.update(json.dumps(list(row)).encode() + b"\n")
    return h.hexdigest()


@dataclass(frozen=True)
class LedgerEvent:
    seq: int
    event: str
    task: str | None
    key: str | None
    body: str


@dataclass(frozen=True)
class LedgerVerdict:
    """The result of walking the chain: ``ok`` or the first broken link."""

    ok: bool
    events: int
    head: str
    broken_at: int | None = None
    problem: str = ""
    anchors: int = 0           # anchors checked (and held)
    #: the chain holds, but a table it wrote differs from it (``authority``): one line each
    differences: tuple[str, ...] = ()

    def to_json(self) -> dict:
        out = {"ok": self.ok, "events": self.events, "head": self.head}
        if self.anchors:
            out["anchors"] = self.anchors
        if not self.ok:
            out.update({"broken-at": self.broken_at, "problem": self.problem})
        if self.differences:
            out["differences"] = list(self.differences)
        return out

    def lines(self) -> list[str]:
        """The verdict for a terminal: one line, or one per table difference."""
        held = f", {self.anchors} anchors held" if self.anchors else ""
        if self.ok:
            return [f"ledger ok: {self.events} events, head {self.head[:16]}{held}"]
        if self.differences:
            return [f"ledger ok ({self.events} events{held}) but a table differs from it: {d}"
                    for d in self.differences]
        return [f"ledger broken at seq {self.broken_at}: {self.problem}"]


class Ledger:
    #: The rows ``verify`` walks (the PostgreSQL ledger stops at its sealed head).
    CHAINED = ("SELECT seq, prev, hash, event, task, key, body, chain FROM ledger WHERE seq >= ? "
               "ORDER BY seq")

    def __init__(self, conn: sqlite3.Connection, mark: Callable[[], tuple | None] | None = None):
        """``mark``: the store's ``state_mark`` (it also moves on a rollback of this
        connection); without it, what ``_unchanged_since`` reads of the connection."""
        self.conn = conn
        self.mark = mark
        self._head: tuple[int, str] | None = None
        self._verified: tuple | None = None     # (what it was asked, the database then, verdict)
        self._checked: tuple | None = None      # (the check, the database then, its lines)

    def forget(self) -> None:
        """Drop the cached head (another connection may have appended)."""
        self._head = None
        self._verified = None             # and the verdict
        self._checked = None              # and the tables checked against it

    def _unchanged_since(self) -> tuple | None:
        """What moves whenever the ledger may have changed on SQLite: a commit of another
        connection (``data_version``), a row this connection wrote (``total_changes``), a
        schema change (``schema_version``); None where it is not known."""
        if not isinstance(self.conn, sqlite3.Connection):
            return None
        if self.mark is not None:
            return self.mark()
        (data,), (schema,) = (self.conn.execute("PRAGMA data_version").fetchone(),
                              self.conn.execute("PRAGMA schema_version").fetchone())
        return data, schema, self.conn.total_changes

    def head(self) -> tuple[int, str]:
        if self._head is None:
            row = self.conn.execute("SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1").fetchone()
            self._head = (0, GENESIS) if row is None else (row[0], row[1])
        return self._head

    def next_seq(self) -> int:
        return self.head()[0] + 1

    def seq_ahead(self) -> int | None:
        """The number the next append takes, known before it (inside the writer's
        transaction, the head cannot move): a write may carry it before its event exists."""
        return self.next_seq()

    def append(self, event: str, body: str, *, task: str | None = None,
               key: str | None = None) -> int:
        """Append one event inside the caller's transaction; returns its seq."""
        seq, prev = self.head()
        seq += 1
        digest = link_v2(prev, seq, event, task, key, body)
        self.conn.execute("INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                          (seq, prev, digest, event, task, key, body, CHAIN))
        self._head = (seq, digest)
        return seq

    def events(self, since: int = 0) -> Iterator[LedgerEvent]:
        for seq, event, task, key, body in self.conn.execute(
                "SELECT seq, event, task, key, body FROM ledger WHERE seq > ? ORDER BY seq",
                (since,)):
            yield LedgerEvent(seq, event, task, key, body)

    def seal_body(self) -> str | None:
        """The body of the ``ledger-sealed`` event for the version-1 rows (None: there are none)."""
        rows = self.conn.execute("SELECT seq, prev, hash, event, task, key FROM ledger "
                                 "WHERE chain = 1 ORDER BY seq").fetchall()
        if not rows:
            return None
        return json.dumps({"sealed-through": rows[-1][0], "chain": 1,
                           "columns": columns_digest(rows)}, sort_keys=True, separators=(",", ":"))

    def verify(self, since: int = 1, anchors: Iterable[tuple[int, str]] = ()) -> LedgerVerdict:
        """Check every hash link from event ``since`` on (``since`` > 1 trusts the stored
        hash of the event before it: a tail check after a restart), then the ``anchors``.
        Asked again with nothing changed in the database since, the verdict is the one just
        found (a rebuild and an audit right after a verification walk the chain once)."""
        anchors = tuple(tuple(a) for a in anchors)
        asked, now = (since, anchors), self._unchanged_since()
        if now is not None and self._verified is not None and self._verified[:2] == (asked, now):
            return self._verified[2]
        verdict = self._verify(since, anchors)
        self._verified = None if now is None else (asked, now, verdict)
        return verdict

    def checked(self, check: Callable[[sqlite3.Connection], list[str]]) -> list[str]:
        """``check(conn)``: the tables checked against the events that wrote them
        (``authority.differences``), found once for a database state (``verify-ledger`` and
        the audit right after it read the same rows): asked again with nothing changed in
        the database since, the lines just found."""
        now = self._unchanged_since()
        if now is not None and self._checked is not None and self._checked[:2] == (check, now):
            return list(self._checked[2])
        lines = check(self.conn)
        self._checked = None if now is None else (check, now, tuple(lines))
        return lines

    def _verify(self, since: int, anchors: tuple) -> LedgerVerdict:
        want = dict(anchors)
        prev, expected_seq, n, chain = GENESIS, since, 0, 1
        if since > 1:
            row = self.conn.execute("SELECT hash, chain FROM ledger WHERE seq = ?",
                                    (since - 1,)).fetchone()
            if row is None:
                return LedgerVerdict(False, 0, GENESIS, since - 1, f"seq {since - 1} is missing")
            prev, chain = row
        for row in self.conn.execute(self.CHAINED, (since,)):
            problem = self._broken(row, expected_seq, prev, chain)
            if problem is None and row[0] in want and want[row[0]] != row[2]:
                problem = (f"seq {row[0]}: hash {row[2][:12]} differs from its anchor "
                           f"{want[row[0]][:12]} (the chain was rewritten)")
            if problem is not None:
                return LedgerVerdict(False, n, prev, row[0], problem)
            prev, expected_seq, n, chain = row[2], expected_seq + 1, n + 1, row[7]
        beyond = sorted(s for s in want if s >= expected_seq)
        if beyond:
            return LedgerVerdict(False, n, prev, beyond[0], (
                f"the ledger ends at seq {expected_seq - 1} but an anchor holds seq {beyond[0]} "
                "(a removed tail or a lost write-ahead log)"))
        return LedgerVerdict(True, n, prev, anchors=len(want))

    def _broken(self, row: tuple, expected_seq: int, prev: str, chain: int) -> str | None:
        """What is wrong with one row given the one before it (None: it links)."""
        seq, stored_prev, digest, event, task, key, body, version = row
        if seq != expected_seq:
            return f"seq {seq} follows {expected_seq - 1}"
        if stored_prev != prev:
            return f"seq {seq} links to {str(stored_prev)[:12]}, previous hash is {prev[:12]}"
        if version not in (1, 2) or version < chain:
            return f"seq {seq}: chain version {version} after version {chain}"
        if row_hash(version, prev, seq, event, task, key, body) != digest:
            return f"seq {seq}: hash does not match its columns"
        if event == SEALED and self._seal_problem(body) is not None:
            return f"seq {seq}: {self._seal_problem(body)}"
        return None

    def _seal_problem(self, body: str) -> str | None:
        try:
            sealed = json.loads(body)["sealed-through"]
            rows = self.conn.execute("SELECT seq, prev, hash, event, task, key FROM ledger "
                                     "WHERE seq <= ? ORDER BY seq", (int(sealed),)).fetchall()
        except (ValueError, KeyError, TypeError):
            return "the seal of the version-1 rows is unreadable"
        if json.loads(body).get("columns") != columns_digest(rows):
            return f"a column of a version-1 row through seq {sealed} differs from its seal"
        return None
