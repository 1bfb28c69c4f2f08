"""A PostgreSQL connection's queue goes in one pipeline of the extended protocol: values
bound as they are (no literal for the server to parse), each statement's result in order,
an error rolling the transaction back with everything after it skipped."""
from __future__ import annotations

import pytest

from wgk.impl.contract.errors import StoreError
from wgk.impl.storage import pg
from wgk.impl.storage.pg_text import bound

from pg_support import pg_dsn, pg_server  # noqa: F401  (fixtures)


@pytest.fixture
def store(pg_dsn):
    """A PostgreSQL store on a scratch schema of its own, closed after the test."""
    opened = pg.PgStore(pg_dsn)
    yield opened
    opened.close()


AWKWARD = "it's \\ a 'quote', $1, %s, ?, é, \U0001f600, E'\\n'"


def test_bound_values_are_text_but_bytes_binary():
    values, formats = bound([None, 7, -3, AWKWARD, b"\x00\xff", [3, 1, 2], True])
    assert values == [None, b"7", b"-3", AWKWARD.encode(), b"\x00\xff", b"{3,1,2}", b"t"]
    assert formats == [0, 0, 0, 0, 1, 0, 0]
    assert bound(["a", 1, None])[1] is None                 # (all text)
    with pytest.raises(StoreError, match="NUL"):
        bound(["a\x00b"])
    with pytest.raises(StoreError, match="cannot send a float"):
        bound([1.5])


def test_values_come_back_as_they_were_sent(store):
    c = store.conn
    c.execute("CREATE TABLE t (k TEXT PRIMARY KEY, n INTEGER, b BYTEA, z TEXT)")
    trips = c.round_trips
    c.begin()
    for n, (k, b) in enumerate([(AWKWARD, b"\x00\x01\xff"), ("plain", b"")]):
        c.execute("INSERT INTO t VALUES (?, ?, ?, ?)", (k, n, b, None))
    rows = c.execute("SELECT k, n, b, z FROM t ORDER BY n").fetchall()
    assert c.round_trips - trips == 1                   # the writes went with the read
    c.execute("COMMIT")
    assert [(k, n, bytes(b), z) for k, n, b, z in rows] == \
        [(AWKWARD, 0, b"\x00\x01\xff", None), ("plain", 1, b"", None)]
    got = c.execute("SELECT count(*) FROM t WHERE k = ? AND n = ?", (AWKWARD, 0)).fetchone()
    assert got == (1,)


def test_an_error_in_the_queue_rolls_back_and_skips_the_rest(store):
    errors = store.conn.errors
    c = store.conn
    c.execute("CREATE TABLE t (k TEXT PRIMARY KEY, n INTEGER)")
    c.execute("INSERT INTO t VALUES (?, ?)", ("a", 1))
    c.begin()
    c.execute("INSERT INTO t VALUES (?, ?)", ("b", 2))          # queued
    c.execute("INSERT INTO t VALUES (?, ?)", ("a", 3))          # queued: a duplicate
    late = c.execute("UPDATE t SET n = ? WHERE k = ?", (9, "a"))   # queued after it
    with pytest.raises(errors.UniqueViolation) as e:
        c.execute("SELECT n FROM t WHERE k = ?", ("b",)).fetchone()
    assert e.value.sqlstate == "23505" and e.value.diag.constraint_name == "t_pkey"
    assert store.retryable(e.value) is False
    assert late.q.cur is None                                   # skipped: no result
    c.execute("ROLLBACK")
    assert not c.in_transaction
    assert c.execute("SELECT k, n FROM t ORDER BY k").fetchall() == [("a", 1)]
    # a statement first prepared in the failed round trip (skipped) is prepared again
    c.begin()
    c.execute("INSERT INTO t VALUES (?, ?)", ("c", 4))
    c.execute("UPDATE t SET n = ? WHERE k = ?", (9, "a"))
    c.execute("COMMIT")
    assert c.execute("SELECT k, n FROM t ORDER BY k").fetchall() == [("a", 9), ("c", 4)]


def test_a_refused_value_sends_nothing_and_names_no_statement(store):
    c = store.conn
    c.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    trips = c.round_trips
    with pytest.raises(StoreError, match="NUL"):
        c.execute("INSERT INTO t VALUES (?)", ("a\x00",))
    assert c.round_trips == trips
    c.execute("INSERT INTO t VALUES (?)", ("a",))          # its first Parse, now
    assert c.execute("SELECT k FROM t").fetchall() == [("a",)]


def test_begin_and_commit_are_bound_to_statements_prepared_once(store):
    c = store.conn
    c.execute("CREATE TABLE t (k TEXT PRIMARY KEY)")
    for k in ("a", "b", "c"):
        c.begin()
        c.execute("INSERT INTO t VALUES (?)", (k,))
        c.execute("COMMIT")
    prepared = [r[0] for r in c.raw.execute("SELECT statement FROM pg_prepared_statements")]
    assert prepared.count(pg.sql.BEGIN) == 1 and prepared.count("COMMIT") == 1
    assert c.execute("SELECT k FROM t ORDER BY k").fetchall() == [("a",), ("b",), ("c",)]
