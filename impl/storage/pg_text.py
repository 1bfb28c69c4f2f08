"""Statements as text for PostgreSQL, and what comes back (``pg_conn`` sends them).

``bound`` gives the parameters of a prepared statement as a Bind message's
values; ``literal`` quotes a parameter (``standard_conforming_strings`` on), for
the statements that cannot be prepared; ``inline`` and ``dollars`` turn a psycopg
statement (``%s``) into text with literals or into a prepared statement's form (``$1``). ``Queued`` is one statement of a connection's queue,
``Result`` one statement's result out of a round trip, ``PgCursor`` the part of
a sqlite3 cursor the kernel uses, ``PendingSeq`` the number of a queued ledger
append.
"""
from __future__ import annotations

import re

from ..contract.errors import StoreError

_PARAM = re.compile(r"%%|%s")


def literal(value) -> str:
    """A parameter as an SQL literal (``standard_conforming_strings`` is on: a quote is
    doubled, nothing else is special)."""
    if value is None:
        return "NULL"
    if value is True or value is False:
        return "true" if value else "false"     # (the kernel's own flags arrive as integers)
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, str):
        if "\x00" in value:
            raise StoreError("a text value holds a NUL character (PostgreSQL refuses it)")
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "'\\x" + bytes(value).hex() + "'::bytea"
    if isinstance(value, (list, tuple)) and all(type(v) is int for v in value):
        return "'{" + ",".join(map(str, value)) + "}'"
    raise StoreError(f"cannot send a {type(value).__name__} to PostgreSQL")


def bound(params) -> tuple[list, list[int] | None]:
    """Parameters as the values of a Bind message, and their formats (None: all text): text
    as PostgreSQL reads it (a number, a text, an array of numbers), bytes as they are
    (binary)."""
    values, formats = [], None
    for n, value in enumerate(params):
        kind = type(value)
        if kind is str:
            if "\x00" in value:
                raise StoreError("a text value holds a NUL character (PostgreSQL refuses it)")
            values.append(value.encode())
        elif kind is int:
            values.append(b"%d" % value)
        elif value is None:
            values.append(None)
        elif kind is bool:
            values.append(b"t" if value else b"f")
        elif isinstance(value, int):
            values.append(b"%d" % int(value))
        elif isinstance(value, str):
            values.append(bound([str(value)])[0][0])
        elif isinstance(value, (bytes, bytearray, memoryview)):
            values.append(bytes(value))
            formats = formats or [0] * len(params)
            formats[n] = 1
        elif isinstance(value, (list, tuple)) and all(type(v) is int for v in value):
            values.append(("{" + ",".join(map(str, value)) + "}").encode())
        else:
            raise StoreError(f"cannot send a {kind.__name__} to PostgreSQL")
    return values, formats


def inline(text: str, params) -> str:
    """A psycopg statement with its parameters as literals."""
    values = iter(params)
    return _PARAM.sub(lambda m: "%" if m.group() == "%%" else literal(next(values)), text)


def dollars(text: str) -> str:
    """A psycopg statement (``%s``, ``%%``) in PREPARE's form (``$1``, ``%``)."""
    n = iter(range(1, 10_000))
    return _PARAM.sub(lambda m: "%" if m.group() == "%%" else f"${next(n)}", text)


class Queued:
    """One statement of the queue; ``cur`` is its psycopg cursor once sent."""

    __slots__ = ("sql", "params", "cur")

    def __init__(self, text: str, params):
        self.sql, self.params, self.cur = text, params, None


class Result:
    """One statement's result out of a round trip."""

    __slots__ = ("rows", "rowcount", "_res")

    def __init__(self, rows: list, rowcount: int, res):
        self.rows, self.rowcount, self._res = rows, rowcount, res

    @property
    def description(self) -> list[tuple]:
        """The column names (the first item of each sqlite3 description entry)."""
        return [(self._res.fname(i).decode(),) for i in range(self._res.nfields)]

    def fetchone(self):
        return self.rows.pop(0) if self.rows else None

    def fetchall(self):
        rows, self.rows = self.rows, []
        return rows

    def __iter__(self):
        return iter(self.fetchall())


class PendingSeq:
    """The sequence number of a queued ledger append (an int once the queue is sent)."""

    __slots__ = ("conn", "q", "_value")

    def __init__(self, conn: "pg_conn.PgConnection", q: Queued):
        self.conn, self.q, self._value = conn, q, None

    @property
    def value(self) -> int:
        if self._value is None:
            self.conn.sent(self.q)
            self._value = self.q.cur.fetchone()[0]
        return self._value

    def __int__(self) -> int:
        return self.value

    __index__ = __int__

    def __str__(self) -> str:
        return str(self.value)


class PgCursor:
    """The part of a sqlite3 cursor the kernel uses (a queued statement's, once sent)."""

    __slots__ = ("conn", "q", "lastrowid")

    def __init__(self, conn: "pg_conn.PgConnection", q: Queued | None, lastrowid=None):
        self.conn, self.q, self.lastrowid = conn, q, lastrowid

    def _cur(self):
        self.conn.sent(self.q)
        return self.q.cur

    def fetchone(self):
        return self._cur().fetchone()

    def fetchall(self):
        return self._cur().fetchall()

    def __iter__(self):
        return iter(()) if self.q is None else iter(self._cur().fetchall())

    @property
    def rowcount(self) -> int:
        return self._cur().rowcount

    @property
    def description(self):
        return self._cur().description
