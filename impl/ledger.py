"""The append-only, hash-linked event ledger.

Every event (graph edits, seeds, imports and every decided request, rejections
included) is one row: ``hash = sha256(prev || "\\n" || event || "\\n" || body)``
where ``prev`` is the previous row's hash (the genesis row links to 64 zeros).
The body of a request event holds the request, its response, the record fields
it changed and the facts it recorded: enough to rebuild every table.
``verify`` recomputes the chain and reports the first broken link.
"""
from __future__ import annotations

import hashlib
import sqlite3
from dataclasses import dataclass
from typing import Iterator

GENESIS = "0" * 64


def link(prev: str, event: str, body: str) -> str:
    return hashlib.sha256(f"{prev}\n{event}\n{body}".encode()).hexdigest()


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

    def to_json(self) -> dict:
        out = {"ok": self.ok, "events": self.events, "head": self.head}
        if not self.ok:
            out.update({"broken-at": self.broken_at, "problem": self.problem})
        return out


class Ledger:
    #: The rows ``verify`` walks (the PostgreSQL ledger stops at its sealed head).
    CHAINED = "SELECT seq, prev, hash, event, body FROM ledger WHERE seq >= ? ORDER BY seq"

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn
        self._head: tuple[int, str] | None = None

    def forget(self) -> None:
        """Drop the cached head (another connection may have appended)."""
        self._head = None

    def head(self) -> tuple[int, str]:
        if self._head is None:
            row = self.conn.execute("SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1").fetchone()
            self._head = (0, GENESIS) if row is None else (row[0], row[1])
        return self._head

    def next_seq(self) -> int:
        return self.head()[0] + 1

    def append(self, event: str, body: str, *, task: str | None = None,
               key: str | None = None) -> int:
        """Append one event inside the caller's transaction; returns its seq."""
        seq, prev = self.head()
        seq += 1
        digest = link(prev, event, body)
        self.conn.execute("INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?, ?)",
                          (seq, prev, digest, event, task, key, body))
        self._head = (seq, digest)
        return seq

    def events(self, since: int = 0) -> Iterator[LedgerEvent]:
        for seq, event, task, key, body in self.conn.execute(
                "SELECT seq, event, task, key, body FROM ledger WHERE seq > ? ORDER BY seq",
                (since,)):
            yield LedgerEvent(seq, event, task, key, body)

    def verify(self, since: int = 1) -> LedgerVerdict:
        """Check every hash link from event ``since`` on (``since`` > 1 trusts the stored
        hash of the event before it: a tail check after a restart)."""
        prev, expected_seq, n = GENESIS, since, 0
        if since > 1:
            row = self.conn.execute("SELECT hash FROM ledger WHERE seq = ?", (since - 1,)).fetchone()
            if row is None:
                return LedgerVerdict(False, 0, GENESIS, since - 1, f"seq {since - 1} is missing")
            prev = row[0]
        for seq, stored_prev, digest, event, body in self.conn.execute(self.CHAINED, (since,)):
            if seq != expected_seq:
                return LedgerVerdict(False, n, prev, seq, f"seq {seq} follows {expected_seq - 1}")
            if stored_prev != prev:
                return LedgerVerdict(False, n, prev, seq, f"seq {seq} links to {stored_prev[:12]}, "
                                                          f"previous hash is {prev[:12]}")
            if link(prev, event, body) != digest:
                return LedgerVerdict(False, n, prev, seq, f"seq {seq}: hash does not match its body")
            prev, expected_seq, n = digest, expected_seq + 1, n + 1
        return LedgerVerdict(True, n, prev)
