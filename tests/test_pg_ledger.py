"""The ledger on PostgreSQL while writers overlap, and a host dying mid-request.

Writers do not wait for each other's commits (the chain is sealed by whichever
appending transaction holds the seal row, never waited for); a number whose
transaction rolled back becomes a ``skipped`` event, so the sequence stays
gap-free and the chain linear; a ``kill -9`` of a real child process mid-request,
before or after its COMMIT, followed by the same request under the same key,
gives one decision. Runs when ``WGK_TEST_POSTGRES`` names a reachable server.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from wgk.impl import Crash, Kernel, MemoryWorld, Pragmas, TaskPolicy
from wgk.impl.storage import pg_conn, pg_sql

from pg_support import pg_dsn, pg_server  # noqa: F401  (fixtures)

OWNER = {"pid": 4001, "birth": 911, "session": "s1"}


def dispatch(task: str, key: str | None = None) -> dict:
    return {"kind": "dispatch", "actor": "daemon", "task": task, "key": key or f"d:{task}",
            "expected-attempt": 0, "owner": OWNER}


def kernel(dsn: str, **kw) -> Kernel:
    return Kernel(dsn, MemoryWorld.create(target="main-0").environment(), **kw)


def seqs(k: Kernel) -> list[int]:
    return [r[0] for r in k.conn.execute("SELECT seq FROM ledger ORDER BY seq")]


class HeldAtCommit:
    """A hook that sends the request's writes (its append among them) and its seal at its
    COMMIT boundary, then holds the transaction open until released."""

    def __init__(self, k: Kernel, key: str):
        self.k, self.key = k, key
        self.appended, self.release = threading.Event(), threading.Event()

    def __call__(self, boundary) -> None:
        if boundary.kind == "commit" and boundary.when == "before" and boundary.key == self.key:
            self.k.store.conn.native(pg_sql.SEAL_NOW, (False,))   # as its COMMIT's round trip
            self.appended.set()                                   # does, then waits for the fsync
            assert self.release.wait(60)


def race_one_held_writer(dsn: str) -> tuple[dict | BaseException, threading.Thread, HeldAtCommit]:
    """Writer A appends for task a and holds its transaction open; writer B then decides on
    task b. Returns B's answer (or its error) while A is still open."""
    setup = kernel(dsn)
    setup.create_graph("g", [TaskPolicy("a"), TaskPolicy("b")])
    setup.close()
    a, b = kernel(dsn), kernel(dsn, pragmas=Pragmas(busy_timeout_ms=3000))
    held = a.hook = HeldAtCommit(a, "d:a")
    answers: dict = {}
    writer = threading.Thread(target=lambda: answers.setdefault("a", a.handle(dispatch("a"))))
    writer.start()
    assert held.appended.wait(60)
    try:
        got = b.handle(dispatch("b"))
    except BaseException as e:              # (the old design: B waits for A's seal lock)
        got = e
    finally:
        b.close()
    held.answers, held.kernel = answers, a
    return got, writer, held


def test_a_writer_does_not_wait_for_another_writers_commit(pg_dsn, monkeypatch):
    monkeypatch.setattr(pg_conn, "SEAL_EVERY", 1)          # B seals at its commit too
    got, writer, held = race_one_held_writer(pg_dsn)
    assert got == {"decision": "applied"}
    assert writer.is_alive()                 # B committed while A's transaction was still open
    held.release.set()
    writer.join(60)
    assert held.answers["a"] == {"decision": "applied"}
    held.kernel.close()
    k = kernel(pg_dsn)
    verdict = k.verify_ledger()
    assert verdict.ok and verdict.events == 5 and seqs(k) == [1, 2, 3, 4, 5]
    order = [r[0] for r in k.conn.execute("SELECT key FROM ledger WHERE seq > 3 ORDER BY seq")]
    assert order == ["d:a", "d:b"]          # A took its number first, B committed first
    assert k.audit().ok and k.rebuild().ok
    k.close()


def test_with_the_seal_row_waited_for_the_second_writer_waits(pg_dsn, monkeypatch):
    """The check above can fail: a seal that waits for the seal row (as a head row locked
    until COMMIT would) makes B wait for A's commit, here until its lock timeout."""
    monkeypatch.setattr(pg_conn, "SEAL_EVERY", 1)
    k = kernel(pg_dsn)
    k.conn.native(pg_sql.SEAL_FUNCTION.replace("FOR UPDATE SKIP LOCKED", "FOR UPDATE"))
    k.close()
    got, writer, held = race_one_held_writer(pg_dsn)
    held.release.set()
    writer.join(60)
    held.kernel.close()
    assert isinstance(got, Exception) and getattr(got, "sqlstate", None) == "55P03"  # lock timeout


def test_a_rolled_back_append_is_recorded_as_skipped_and_the_chain_stays_linear(pg_dsn):
    k = kernel(pg_dsn)
    k.create_graph("g", [TaskPolicy("a"), TaskPolicy("b")])

    def crash_after_writes(boundary):
        if boundary.kind == "commit" and boundary.when == "before" and boundary.key == "d:a":
            k.store.conn.sync()              # the append reached the server: its number is taken
            raise Crash(boundary)
    k.hook = crash_after_writes
    with pytest.raises(Crash):
        k.handle(dispatch("a"))
    k.hook = lambda boundary: None
    assert k.handle(dispatch("b")) == {"decision": "applied"}
    verdict = k.verify_ledger()                  # the seal reaches the number a's try took
    events = list(k.conn.execute("SELECT seq, event, key FROM ledger ORDER BY seq"))
    assert [e[1] for e in events] == ["graph-created", "task-added", "task-added", "skipped",
                                      "request"]
    assert events[3][0] == 4 and events[4][2] == "d:b"
    assert verdict.ok and verdict.events == 5 and seqs(k) == [1, 2, 3, 4, 5]
    assert k.handle(dispatch("a")) == {"decision": "applied"}     # the same key: decided once
    assert k.verify_ledger().ok and k.audit().ok and k.rebuild().ok
    k.close()


CHILD = textwrap.dedent("""
    import os, signal, sys
    from wgk.impl import Kernel, MemoryWorld, TaskPolicy
    dsn, when, sent = sys.argv[1], sys.argv[2], sys.argv[3] == "sent"
    k = Kernel(dsn, MemoryWorld.create(target="main-0").environment())
    k.create_graph("g", [TaskPolicy("a")])
    k.handle({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d:a",
              "expected-attempt": 0, "owner": {"pid": 4001, "birth": 911, "session": "s1"},
              "mint": "0" * 64})

    def die(boundary):
        if boundary.kind == "commit" and boundary.when == when and boundary.key == "reset":
            if sent:
                k.store.conn.sync()           # the writes reached the server, COMMIT did not
            os.kill(os.getpid(), signal.SIGKILL)
    k.hook = die
    k.handle({"kind": "reset", "actor": "operator", "task": "a", "key": "reset",
              "expected-generation": 0})
    sys.exit(7)          # not reached
""")

RESET = {"kind": "reset", "actor": "operator", "task": "a", "key": "reset",
         "expected-generation": 0}


@pytest.mark.parametrize("when, sent, answer", [
    ("before", "queued", {"decision": "applied"}),
    ("before", "sent", {"decision": "applied"}),
    ("after", "sent", {"decision": "duplicate", "original": {"decision": "applied"}}),
])
def test_kill_9_mid_request_then_the_same_key_gives_one_decision(pg_dsn, when, sent, answer):
    child = subprocess.run([sys.executable, "-c", CHILD, pg_dsn, when, sent], timeout=120)
    assert child.returncode == -signal.SIGKILL
    k = kernel(pg_dsn)                       # another daemon, another connection
    assert k.handle(RESET) == answer
    assert k.handle(RESET) == {"decision": "duplicate", "original": {"decision": "applied"}}
    assert k.project()["journal"]["reset"] == {"decision": "applied"}
    keys = [r[0] for r in k.conn.execute("SELECT key FROM ledger WHERE event = 'request'")]
    assert keys == ["d:a", "reset"]          # one decision for the key
    a = k.project_tasks(["a"])["a"]           # over a live owner the reset is its intent alone
    assert (a["generation"], a["reopening"]) == (0, True)
    assert k.verify_ledger().ok and k.audit().ok and k.rebuild().ok
    skipped = [r[0] for r in k.conn.execute("SELECT seq FROM ledger WHERE event = 'skipped'")]
    assert skipped == ([4] if sent == "sent" and when == "before" else [])
    k.close()


AWKWARD = [None, "", "plain-key_1.2", 'q"uote', "back\\slash", "tab\tnew\nline\r", "\x01\x1f\x7f",
           "caf\u00e9", "\u20ac 5", "\U0001F600 astral", "mixed \u00e9\"\\\n\U0001F600", "/slash"]


def test_the_seal_hashes_every_column_as_the_ledger_does(pg_dsn):
    """The chain is computed in SQL (``wgk_link``) and checked in Python (``ledger.link_v2``):
    the same hash for texts PostgreSQL and Python encode differently as JSON (non-ASCII)."""
    from wgk.impl.storage.ledger import link_v2
    k = kernel(pg_dsn)
    for text in AWKWARD:
        got = k.conn.native("SELECT wgk_link(%s, 7, 'request', %s, %s, %s)",
                            ("0" * 64, text, text, "{}")).fetchone()[0]
        assert got == link_v2("0" * 64, 7, "request", text, text, "{}"), repr(text)
    k.create_graph("g", [TaskPolicy("a")])
    for n, text in enumerate(t for t in AWKWARD if t):
        answer = k.handle({"kind": "heartbeat", "actor": "worker", "task": "a", "key": text,
                           "cap": {"graph": "g", "task": "a", "generation": 0, "attempt": 1,
                                   "fence": 1, "lease-epoch": 1}, "evidence": f"e{n}"})
        assert answer.get("decision") == "rejected", answer      # no attempt: still journaled
    verdict = k.verify_ledger()
    assert verdict.ok and verdict.events == 2 + len(AWKWARD) - 2
    k.close()


def _seq_scans(conn, table: str) -> int:
    """How many times ``table`` was scanned whole so far (the statistics flushed first)."""
    conn.native("SELECT pg_stat_force_next_flush()")
    conn.native("SELECT pg_stat_clear_snapshot()")
    return conn.native("SELECT seq_scan FROM pg_stat_user_tables WHERE relid = %s::regclass",
                       (table,)).fetchone()[0]


def test_the_lock_function_finds_task_rows_by_their_index_on_a_small_table(pg_dsn):
    """``wgk_lock`` plans its statements once per session (not at every request), and that
    plan reads the task rows through the primary key even when made over a table of a few
    rows, where a scan of the whole table looks cheaper and would stay the plan as the
    table grows (``pg_sql.LOCK_PLANNED_ONCE``): no request's lock scans ``tasks`` whole."""
    k = kernel(pg_dsn)
    k.create_graph("g", [TaskPolicy(f"t{i}") for i in range(3)])
    conn = k.store.conn

    before = _seq_scans(conn, "tasks")
    for _ in range(12):                        # past the 5 custom plans of the default mode
        for share in (False, True):
            for ids in ([1, 2], [2]):              # (one row: looked up by its key alone)
                conn.raw.execute("BEGIN")
                stamps = conn.raw.execute(pg_sql.LOCK, (ids, share, True, None)).fetchall()
                assert sorted(name for name, *_ in stamps) == [f"t{i - 1}" for i in ids]
                conn.raw.execute("ROLLBACK")
    assert _seq_scans(conn, "tasks") - before < 3
    k.close()


def test_the_seal_finds_ledger_rows_by_their_index(pg_dsn):
    """``wgk_seal`` looks ledger rows up by number; its last check (any number past the head)
    on a generic plan scanned the whole ledger at every seal, a cost growing with the ledger
    (``pg_sql.SEAL_ON_INDEXES``): no seal scans ``ledger`` whole, however many times it runs."""
    k = kernel(pg_dsn)
    k.create_graph("g", [TaskPolicy("a")])
    conn = k.store.conn

    before = _seq_scans(conn, "ledger")
    for _ in range(12):                        # past the 5 custom plans of PL/pgSQL's default
        assert conn.native(pg_sql.SEAL_NOW, (False,)).fetchone()[0] is not None
    assert _seq_scans(conn, "ledger") - before < 3
    k.close()


def test_the_committed_rows_are_counted_on_the_ledgers_index(pg_dsn):
    """The count every request reads (``pg_sql.ROWS``) is a function planned once per session
    (``pg_sql.ROWS_FUNCTION``), prepared: its one plan, made over a ledger of a few rows,
    still finds the rows past the sealed head by the index, however many times it runs."""
    k = kernel(pg_dsn)
    k.create_graph("g", [TaskPolicy("a")])
    conn = k.store.conn
    count = conn.native("SELECT count(*) FROM ledger").fetchone()[0]
    assert conn.prepared(pg_sql.ROWS).fetchone()[0] == count > 0

    before = _seq_scans(conn, "ledger")
    for _ in range(12):                        # past the 5 custom plans of the default mode
        assert conn.prepared(pg_sql.ROWS).fetchone()[0] == count
    assert _seq_scans(conn, "ledger") - before < 3
    k.close()


def test_migration_4_gives_a_database_of_version_3_the_rows_function(pg_dsn, monkeypatch):
    """A database made by a kernel whose PostgreSQL schema stopped at version 3 (no
    ``wgk_rows``) is upgraded when a kernel of this version opens it, and keeps its events."""
    with monkeypatch.context() as m:
        m.setattr(pg_sql, "PG_SCHEMA_VERSION", 3)
        m.setattr(pg_sql, "LOCK", "SELECT name, stamp FROM wgk_lock(%s, %s, %s, %s)")
        m.setattr(pg_sql, "ROWS", "SELECT seq + (SELECT count(*) FROM ledger WHERE seq > "
                                  "(SELECT seq FROM ledger_seal WHERE id = 1)) FROM ledger_seal")
        old = kernel(pg_dsn)
        old.create_graph("g", [TaskPolicy("a")])
        assert old.handle(dispatch("a"))["decision"] == "applied"
        assert old.store.meta("pg-schema-version") == "3"
        assert old.conn.native("SELECT to_regproc('wgk_rows')").fetchone()[0] is None
        events = seqs(old)
        old.close()
    k = kernel(pg_dsn)
    assert k.store.meta("pg-schema-version") == str(pg_sql.PG_SCHEMA_VERSION)
    settings = k.conn.native("SELECT proconfig FROM pg_proc WHERE oid = to_regproc('wgk_lock')")
    assert settings.fetchall() == [(["plan_cache_mode=force_generic_plan", "enable_seqscan=off"],)]
    assert seqs(k) == events
    assert k.conn.prepared(pg_sql.ROWS).fetchone()[0] == len(events)
    assert k.handle(dispatch("a"))["decision"] == "duplicate"
    assert k.verify_ledger().ok
    k.close()


def _upgraded(pg_dsn, monkeypatch, version: int, lock: str):
    """A kernel opened on a database made at PostgreSQL schema ``version`` (its lock read by
    ``lock``) with one dispatch applied: upgraded to the latest schema, the lock function's
    settings kept and the ledger's events as they were."""
    with monkeypatch.context() as m:
        m.setattr(pg_sql, "PG_SCHEMA_VERSION", version)
        m.setattr(pg_sql, "LOCK", lock)
        old = kernel(pg_dsn)
        old.create_graph("g", [TaskPolicy("a"), TaskPolicy("b")])
        assert old.handle(dispatch("a"))["decision"] == "applied"
        assert old.store.meta("pg-schema-version") == str(version)
        events = seqs(old)
        old.close()
    k = kernel(pg_dsn)
    assert k.store.meta("pg-schema-version") == str(pg_sql.PG_SCHEMA_VERSION)
    settings = k.conn.native("SELECT proconfig FROM pg_proc WHERE oid = to_regproc('wgk_lock')")
    assert settings.fetchall() == [(["plan_cache_mode=force_generic_plan", "enable_seqscan=off"],)]
    assert seqs(k) == events
    return k


def test_migration_5_gives_the_lock_function_the_count_of_committed_rows(pg_dsn, monkeypatch):
    """A database of PostgreSQL version 4 (``wgk_lock`` returning names and stamps only) is
    upgraded by migration 5: its lock function counts the committed ledger rows in the
    statement that reads the stamps, a used key too (only the count), and a request no
    longer sends ``ROWS`` beside its locks."""
    k = _upgraded(pg_dsn, monkeypatch, 4, "SELECT name, stamp FROM wgk_lock(%s, %s, %s, %s)")
    events = seqs(k)                                     # (the old database's, kept)
    conn = k.store.conn
    last = dict(conn.native("SELECT task, max(seq) FROM ledger WHERE task IS NOT NULL "
                            "GROUP BY task").fetchall())
    conn.raw.execute("BEGIN")
    try:
        got = conn.raw.execute(pg_sql.LOCK, ([1, 2], False, True, None)).fetchall()
    finally:
        conn.raw.execute("ROLLBACK")
    assert sorted(g[:3] for g in got) == [("a", last["a"], len(events)),
                                          ("b", last["b"], len(events))]
    key = conn.native("SELECT key FROM journal LIMIT 1").fetchone()[0]
    used = conn.raw.execute(pg_sql.LOCK, ([1], False, True, key)).fetchall()
    assert [u[:3] for u in used] == [(None, None, len(events))]

    sent = []
    monkeypatch.setattr(conn, "_put", lambda text, params=None, put=conn._put: (
        sent.append(text), put(text, params))[1])
    assert k.handle(dispatch("b"))["decision"] == "applied"
    count = conn.native("SELECT count(*) FROM ledger").fetchone()[0]
    store = k.store
    store._rows = None
    conn.begin_early([1], "k:unused")           # as a request read ahead does
    sent.clear()
    try:
        token = store.data_version()            # its count came with the locks
        assert sent == [] and store._rows == count
        assert store.data_version() == token and pg_sql.ROWS in sent    # (then: asked alone)
    finally:
        store.settle()
    assert k.verify_ledger().ok
    k.close()


def test_migration_6_gives_the_lock_function_the_requests_journal_read(pg_dsn, monkeypatch):
    """A database of PostgreSQL version 5 (``wgk_lock`` without the journal's answer) is
    upgraded by migration 6: for a used key its lock function returns the journal row's digest
    and response beside the count, and a request read ahead sends no journal read of its own:
    a new key's answer and a used key's (the stored response, nothing appended) both come
    from the locks' round trip."""
    k = _upgraded(pg_dsn, monkeypatch, 5,
                  "SELECT name, stamp, rows FROM wgk_lock(%s, %s, %s, %s)")
    events = seqs(k)                                     # (the old database's, kept)
    conn = k.store.conn
    stored = conn.native("SELECT digest, response FROM journal WHERE key = 'd:a'").fetchone()
    conn.raw.execute("BEGIN")
    try:
        used = conn.raw.execute(pg_sql.LOCK, ([1], False, True, "d:a")).fetchall()
        fresh = conn.raw.execute(pg_sql.LOCK, ([1], False, True, "d:unused")).fetchall()
    finally:
        conn.raw.execute("ROLLBACK")
    assert used == [(None, None, len(events), *stored)]
    assert [f[3:] for f in fresh] == [(None, None)] and fresh[0][0] == "a"

    assert k.task_id("b") == 2                  # (a task the caches know: read ahead)
    sent = []
    monkeypatch.setattr(conn, "_put", lambda text, params=None, put=conn._put: (
        sent.append(text), put(text, params))[1])
    assert k.handle(dispatch("b"))["decision"] == "applied"
    assert sent[:2] == [pg_sql.BEGIN, pg_sql.LOCK]
    assert not any("FROM journal" in text for text in sent)
    before = seqs(k)
    sent.clear()
    again = k.handle(dispatch("b"))
    assert not any("FROM journal" in text for text in sent)
    assert again["decision"] == "duplicate" and pg_sql.APPEND not in sent and seqs(k) == before
    assert k.verify_ledger().ok
    k.close()
