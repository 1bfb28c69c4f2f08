"""All the PostgreSQL-specific SQL of the kernel, in one place.

The kernel's modules write their statements once, in the SQLite dialect
(``?`` placeholders, ``INSERT OR REPLACE`` / ``INSERT OR IGNORE``, implicit
rowids); ``translate`` turns each into its PostgreSQL form (``%s``,
``ON CONFLICT``, an explicit id chosen inside the writing transaction) and the
schema is the same migrations with PostgreSQL types (``BIGINT``, ``BYTEA``,
byte-order ``TEXT COLLATE "C"`` so that ``ORDER BY`` matches SQLite's), plus
the single-row ledger head that serialises appends.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .ledger import GENESIS
from .schema import MIGRATIONS

#: The primary key of every table that an ``INSERT OR REPLACE`` / ``OR IGNORE`` targets.
PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    "meta": ("key",), "attempts": ("task", "fence"), "owners": ("task", "fence"),
    "receipts": ("task", "kind"), "evidence": ("task", "kind", "ident"), "effects": ("id",),
    "worktrees": ("id",), "pins": ("ref",),
}

#: Tables whose id SQLite assigns (rowid): on PostgreSQL the connection assigns max + 1,
#: read inside the writing transaction, which holds the graph lock exclusively (graph
#: edits, see ``GRAPH_LOCK``), then counts on; so ids are dense and equal on a rebuild (a
#: sequence would leave gaps after a rollback).
ASSIGNED_IDS = {"tasks": "id", "legacy_records": "id"}

LEDGER_HEAD = f"""
CREATE TABLE ledger_head (id INTEGER PRIMARY KEY CHECK (id = 1), seq BIGINT NOT NULL,
                          hash TEXT NOT NULL);
INSERT INTO ledger_head VALUES (1, 0, '{GENESIS}')
"""

#: The advisory locks of one kernel schema: class ``hashtext(current_schema())``; object 0
#: is the graph lock (exclusive for a graph edit, shared for a request), objects 1..64 the
#: buckets of appended sequence numbers (shared by the appending transaction, tried
#: exclusively by a sealer that finds a hole: held means the append may still commit).
LOCK_CLASS = "hashtext(current_schema())"
SEQ_BUCKETS = 64
GRAPH_LOCK = f"SELECT pg_advisory_xact_lock({LOCK_CLASS}, 0)"
#: The row locks of the lock functions: several task rows in the order of their ids (no two
#: requests wait on each other in opposite orders); from migration 4 on, the graph's shared
#: lock when asked, then one task row by its key alone.
_LOCK_MANY = """  IF share THEN
    PERFORM 1 FROM tasks WHERE id = ANY(ids) ORDER BY id FOR SHARE;
  ELSE
    PERFORM 1 FROM tasks WHERE id = ANY(ids) ORDER BY id FOR UPDATE;
  END IF;
"""
_LOCK_GRAPH_AND_ONE = f"""  IF graph THEN
    PERFORM pg_advisory_xact_lock_shared({LOCK_CLASS}, 0);
  END IF;
  IF one IS NOT NULL THEN
    IF share THEN
      PERFORM 1 FROM tasks WHERE id = one FOR SHARE;
    ELSE
      PERFORM 1 FROM tasks WHERE id = one FOR UPDATE;
    END IF;
"""
#: A request's locks in one statement: unless ``key`` is journaled already (a duplicate or a
#: conflict, answered without a lock), the graph lock (shared, when ``graph``), then the task
#: rows in id order (``FOR SHARE`` or ``FOR UPDATE``); then each locked task's last event,
#: read by a statement of its own (a READ COMMITTED statement sees what committed before it
#: began: after the locks were granted). No row: nothing was locked.
LOCK_FUNCTION = f"""
CREATE OR REPLACE FUNCTION wgk_lock(ids BIGINT[], share BOOLEAN, graph BOOLEAN, p_key TEXT)
RETURNS TABLE (name TEXT, stamp BIGINT) LANGUAGE plpgsql AS $$
BEGIN
  IF p_key IS NOT NULL AND EXISTS (SELECT 1 FROM journal WHERE key = p_key) THEN
    RETURN;
  END IF;
  IF graph THEN
    PERFORM pg_advisory_xact_lock_shared({LOCK_CLASS}, 0);
  END IF;
{_LOCK_MANY}  RETURN QUERY SELECT t.name::TEXT, (SELECT max(l.seq) FROM ledger l WHERE l.task = t.name)
               FROM tasks t WHERE t.id = ANY(ids);
END $$"""
LOCK = "SELECT name, stamp, rows, digest, response FROM wgk_lock(%s, %s, %s, %s)"
#: The lock function's statements planned once per session: with the ids an array, a custom
#: plan always looks cheaper than the generic one, so PostgreSQL's default planned them again
#: at every request (the planner was 13-15 % of a request's server CPU). Each of them looks
#: rows up by a key: with sequential scans off, the one plan uses the indexes whatever the
#: tables' size was when it was made (a plan made while ``tasks`` held eight rows would
#: otherwise scan it whole until autovacuum's statistics replace it).
LOCK_PLANNED_ONCE = ("ALTER FUNCTION wgk_lock(BIGINT[], BOOLEAN, BOOLEAN, TEXT) "
                     "SET plan_cache_mode = force_generic_plan SET enable_seqscan = off")
#: The seal's statements too look rows up by a key, but PL/pgSQL's default takes their
#: generic plans after five runs, and the generic plan of its last check (``EXISTS`` of a
#: number past the head: a third of the ledger, the planner guesses) scans the ledger from
#: its first row: 9 ms per seal on a ledger of 100,000 events, growing with the ledger.
SEAL_ON_INDEXES = "ALTER FUNCTION wgk_seal(BOOLEAN) SET enable_seqscan = off"

#: The hash of one ledger event, in SQL: ``ledger.link_v2`` (chain version 2: sha256 of
#: prev, "2", seq, event, the JSON of task and of key, and body, joined by newlines,
#: UTF-8, hex). ``wgk_json`` is Python's ``json.dumps`` of a text: PostgreSQL escapes the
#: same characters the same way, except that Python also escapes DEL and everything
#: beyond ASCII (``\\u`` and four hex digits, surrogate pairs above U+FFFF), which the slow
#: path does (``tests/test_pg_ledger.py`` compares both on awkward texts).
JSON_SLOW = r"""
CREATE OR REPLACE FUNCTION wgk_json_escaped(j TEXT) RETURNS TEXT
LANGUAGE plpgsql IMMUTABLE STRICT AS $$
DECLARE
  out TEXT := '';
  c TEXT;
  cp INTEGER;
BEGIN
  FOREACH c IN ARRAY regexp_split_to_array(j, '') LOOP
    cp := ascii(c);
    IF cp < 127 THEN
      out := out || c;
    ELSIF cp < 65536 THEN
      out := out || '\u' || lpad(to_hex(cp), 4, '0');
    ELSE
      out := out || '\u' || to_hex(55296 + ((cp - 65536) >> 10))
                 || '\u' || to_hex(56320 + ((cp - 65536) & 1023));
    END IF;
  END LOOP;
  RETURN out;
END $$"""
JSON_TEXT = r"""
CREATE OR REPLACE FUNCTION wgk_json(t TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN t IS NULL THEN 'null'
              WHEN t ~ '^[\x01-\x7e]*$' THEN to_json(t)::TEXT
              ELSE wgk_json_escaped(to_json(t)::TEXT) END
$$"""
LINK = """
CREATE OR REPLACE FUNCTION wgk_link(prev TEXT, seq BIGINT, event TEXT, task TEXT, key TEXT,
                                    body TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE AS $$
  SELECT encode(sha256(convert_to(prev || E'\\n2\\n' || seq::TEXT || E'\\n' || event || E'\\n'
                                  || wgk_json(task) || E'\\n' || wgk_json(key) || E'\\n' || body,
                                  'UTF8')), 'hex')
$$"""

#: The same two functions in PL/pgSQL (migration 3): a SQL function whose body calls a
#: function that is not immutable is not inlined, and then PostgreSQL parsed and planned
#: its body at every call, three times per sealed row; PL/pgSQL keeps its expressions' plans.
JSON_TEXT_PL = r"""
CREATE OR REPLACE FUNCTION wgk_json(t TEXT) RETURNS TEXT LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  RETURN CASE WHEN t IS NULL THEN 'null' WHEN t ~ '^[\x01-\x7e]*$' THEN to_json(t)::TEXT
              ELSE wgk_json_escaped(to_json(t)::TEXT) END; END $$"""
LINK_PL = """
CREATE OR REPLACE FUNCTION wgk_link(prev TEXT, seq BIGINT, event TEXT, task TEXT, key TEXT,
                                    body TEXT) RETURNS TEXT LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  RETURN encode(sha256(convert_to(prev || E'\\n2\\n' || seq::TEXT || E'\\n' || event || E'\\n'
                                  || wgk_json(task) || E'\\n' || wgk_json(key) || E'\\n' || body,
                                  'UTF8')), 'hex');
END $$"""

#: Seal: chain, in number order, the events after the sealed head that this transaction
#: sees (committed, or its own), holding the seal row (``ledger_seal``) until COMMIT, and
#: write the row once at the end (a row updated at every append of a bulk transaction
#: would grow a chain of versions that every later lookup walks). A missing number is
#: either an append still in flight (its bucket is held: stop, or wait when ``wait``) or
#: one that will never commit (its transaction rolled back: recorded as a ``skipped``
#: event). Without ``wait`` the seal row is skipped when another transaction holds it.
SEAL_FUNCTION = f"""
CREATE OR REPLACE FUNCTION wgk_seal(wait BOOLEAN) RETURNS BIGINT LANGUAGE plpgsql AS $$
DECLARE
  head BIGINT;
  start BIGINT;
  digest TEXT;
  linked TEXT;
BEGIN
  IF wait THEN
    SELECT seq, hash INTO head, digest FROM ledger_seal WHERE id = 1 FOR UPDATE;
  ELSE
    SELECT seq, hash INTO head, digest FROM ledger_seal WHERE id = 1 FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
      RETURN NULL;
    END IF;
  END IF;
  start := head;
  LOOP
    UPDATE ledger SET prev = digest, hash = wgk_link(digest, seq, event, task, key, body)
      WHERE seq = head + 1 RETURNING hash INTO linked;
    IF FOUND THEN
      head := head + 1;
      digest := linked;
      CONTINUE;
    END IF;
    EXIT WHEN NOT EXISTS (SELECT 1 FROM ledger WHERE seq > head + 1);
    IF wait THEN
      PERFORM pg_advisory_xact_lock({LOCK_CLASS}, 1 + ((head + 1) % {SEQ_BUCKETS})::int);
    ELSIF NOT pg_try_advisory_xact_lock({LOCK_CLASS}, 1 + ((head + 1) % {SEQ_BUCKETS})::int) THEN
      EXIT;
    END IF;
    INSERT INTO ledger (seq, event, body, chain) VALUES (head + 1, 'skipped', '{{}}', 2)
      ON CONFLICT (seq) DO NOTHING;      -- (or its append committed meanwhile: chained next)
  END LOOP;
  IF head > start THEN
    UPDATE ledger_seal SET seq = head, hash = digest WHERE id = 1;
  END IF;
  RETURN head;
END $$"""

#: The condition of a record's writes (``tables.STAMP``): a row that no longer holds the
#: values the decision read is a serialization failure, and the request is run again.
EXPECT_FUNCTION = """
CREATE OR REPLACE FUNCTION wgk_expect(held BOOLEAN) RETURNS BOOLEAN LANGUAGE plpgsql AS $$
BEGIN
  IF held IS NOT TRUE THEN
    RAISE EXCEPTION 'wgk: a row changed under the decision' USING ERRCODE = '40001';
  END IF;
  RETURN TRUE;
END $$"""

#: The number of committed ledger rows (``ROWS``) in a function planned once per session on
#: the ledger's index (migration 4): as a plain statement it was parsed and planned at every
#: request (the largest part of the planner's share of a request's server CPU); prepared on
#: its own, its one plan, made while the ledger was small, scanned the whole ledger.
ROWS_FUNCTION = """
CREATE OR REPLACE FUNCTION wgk_rows() RETURNS BIGINT LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
BEGIN
  RETURN (SELECT s.seq + (SELECT count(*) FROM ledger l WHERE l.seq > s.seq)
          FROM ledger_seal s WHERE s.id = 1);
END $$"""

#: The lock function again (migration 4), with one task row (nearly every request) looked up
#: by its key alone: over an array, the plan of each of its lookups was a bitmap scan, a
#: sort and a nested loop, whose start-up at every request cost more than the lookup.
#: (``CREATE OR REPLACE`` replaces the settings too: ``LOCK_PLANNED_ONCE``'s are repeated.)
LOCK_FUNCTION_ONE = f"""
CREATE OR REPLACE FUNCTION wgk_lock(ids BIGINT[], share BOOLEAN, graph BOOLEAN, p_key TEXT)
RETURNS TABLE (name TEXT, stamp BIGINT) LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
  one BIGINT := CASE WHEN cardinality(ids) = 1 THEN ids[1] END;
BEGIN
  IF p_key IS NOT NULL AND EXISTS (SELECT 1 FROM journal WHERE key = p_key) THEN
    RETURN;
  END IF;
{_LOCK_GRAPH_AND_ONE}    RETURN QUERY SELECT t.name::TEXT, (SELECT max(l.seq) FROM ledger l WHERE l.task = t.name)
                 FROM tasks t WHERE t.id = one;
    RETURN;
  END IF;
{_LOCK_MANY}  RETURN QUERY SELECT t.name::TEXT, (SELECT max(l.seq) FROM ledger l WHERE l.task = t.name)
               FROM tasks t WHERE t.id = ANY(ids);
END $$"""

#: The lock function counting the committed ledger rows too (migration 5), in the statement
#: that reads the stamps (one snapshot, taken after the locks were granted): a request's
#: first round trip carried ``ROWS`` as a statement of its own beside the locks, and a
#: request whose stamps moved sent it in a round trip of its own. Every call returns at
#: least one row: a used key returns only the count (its name and stamp NULL).
ROWS_COUNT = ("(SELECT s.seq + (SELECT count(*) FROM ledger l WHERE l.seq > s.seq) "
              "FROM ledger_seal s WHERE s.id = 1)")
LOCK_FUNCTION_COUNTED = f"""
CREATE FUNCTION wgk_lock(ids BIGINT[], share BOOLEAN, graph BOOLEAN, p_key TEXT)
RETURNS TABLE (name TEXT, stamp BIGINT, rows BIGINT) LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
  one BIGINT := CASE WHEN cardinality(ids) = 1 THEN ids[1] END;
BEGIN
  IF p_key IS NOT NULL AND EXISTS (SELECT 1 FROM journal WHERE key = p_key) THEN
    RETURN QUERY SELECT NULL::TEXT, NULL::BIGINT, {ROWS_COUNT};
    RETURN;
  END IF;
{_LOCK_GRAPH_AND_ONE}    RETURN QUERY SELECT t.name::TEXT, (SELECT max(l.seq) FROM ledger l WHERE l.task = t.name),
                        c.n
                 FROM (SELECT {ROWS_COUNT} AS n) c LEFT JOIN tasks t ON t.id = one;
    RETURN;
  END IF;
{_LOCK_MANY}  RETURN QUERY SELECT t.name::TEXT, (SELECT max(l.seq) FROM ledger l WHERE l.task = t.name),
                      c.n
               FROM (SELECT {ROWS_COUNT} AS n) c LEFT JOIN tasks t ON t.id = ANY(ids);
END $$"""

#: The request's journal read (the kernel's text, ``front.kernel.JOURNAL``) that the lock
#: function begun ahead answers (migration 6); any other text is sent on its own.
JOURNAL_READ = "SELECT digest, response FROM journal WHERE key = ?"
#: The lock function answering the request's journal read as well (migration 6): it looked
#: the key up already (a used key takes no lock), and a request read the same journal row
#: again in a statement of its own before its transaction (one more statement, index probe
#: and transaction per request). A used key's row carries the count, its digest and its
#: response; every other row carries NULL for both.
LOCK_FUNCTION_JOURNALED = f"""
CREATE FUNCTION wgk_lock(ids BIGINT[], share BOOLEAN, graph BOOLEAN, p_key TEXT)
RETURNS TABLE (name TEXT, stamp BIGINT, rows BIGINT, digest TEXT, response TEXT)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_seqscan = off AS $$
DECLARE
  one BIGINT := CASE WHEN cardinality(ids) = 1 THEN ids[1] END;
  used_digest TEXT;
  used_response TEXT;
BEGIN
  IF p_key IS NOT NULL THEN
    SELECT j.digest, j.response INTO used_digest, used_response FROM journal j
      WHERE j.key = p_key;
    IF FOUND THEN
      RETURN QUERY SELECT NULL::TEXT, NULL::BIGINT, {ROWS_COUNT}, used_digest, used_response;
      RETURN;
    END IF;
  END IF;
{_LOCK_GRAPH_AND_ONE}    RETURN QUERY SELECT t.name::TEXT, (SELECT max(l.seq) FROM ledger l WHERE l.task = t.name),
                        c.n, NULL::TEXT, NULL::TEXT
                 FROM (SELECT {ROWS_COUNT} AS n) c LEFT JOIN tasks t ON t.id = one;
    RETURN;
  END IF;
{_LOCK_MANY}  RETURN QUERY SELECT t.name::TEXT, (SELECT max(l.seq) FROM ledger l WHERE l.task = t.name),
                      c.n, NULL::TEXT, NULL::TEXT
               FROM (SELECT {ROWS_COUNT} AS n) c LEFT JOIN tasks t ON t.id = ANY(ids);
END $$"""
JOURNALED = 6
DROP_LOCK = "DROP FUNCTION wgk_lock(BIGINT[], BOOLEAN, BOOLEAN, TEXT)"

#: PostgreSQL's own migrations, after the shared ones (``meta`` key ``pg-schema-version``).
PG_MIGRATIONS: dict[int, list[str]] = {1: [
    "ALTER TABLE ledger_head RENAME TO ledger_seal",
    "ALTER TABLE ledger ALTER COLUMN prev DROP NOT NULL, ALTER COLUMN hash DROP NOT NULL",
    "CREATE SEQUENCE ledger_seq",
    "SELECT setval('ledger_seq', max(seq)) FROM ledger HAVING max(seq) IS NOT NULL",
    "CREATE INDEX ledger_by_task ON ledger (task, seq)",
    JSON_SLOW, JSON_TEXT, LINK, SEAL_FUNCTION, LOCK_FUNCTION,
], 2: [EXPECT_FUNCTION], 3: [LOCK_PLANNED_ONCE, SEAL_ON_INDEXES, JSON_TEXT_PL, LINK_PL],
    4: [ROWS_FUNCTION, LOCK_FUNCTION_ONE],
    5: [DROP_LOCK, LOCK_FUNCTION_COUNTED], 6: [DROP_LOCK, LOCK_FUNCTION_JOURNALED]}
PG_SCHEMA_VERSION = max(PG_MIGRATIONS)

#: One append: the next number of the ledger's sequence, its bucket held (shared) until
#: COMMIT (a sealer that finds the number missing knows the append may still commit);
#: written unchained, chained by the next seal (``pg_conn.SEAL_EVERY``, ``verify``).
APPEND = (f"INSERT INTO ledger (seq, event, task, key, body, chain) SELECT n.s, %s, %s, %s, %s, 2 "
          f"FROM (SELECT nextval('ledger_seq') AS s) n CROSS JOIN LATERAL "
          f"(SELECT pg_advisory_xact_lock_shared({LOCK_CLASS}, 1 + (n.s % {SEQ_BUCKETS})::int)) b "
          f"RETURNING seq")
SEAL_NOW = "SELECT wgk_seal(%s)"
#: After a bulk graph edit (autovacuum would analyze them later; until then the planner
#: takes 100k tasks for a few pages and a readiness check scans them all).
ANALYZE = "ANALYZE tasks, task_view, edges, ledger"
SEALED_HEAD = "SELECT seq, hash FROM ledger_seal WHERE id = 1"
CURRENT_SEQ = "currval('ledger_seq')"
#: Every committed ledger row, counted cheaply (the sealed head plus the rows after it):
#: it changes whenever any connection commits an event (``ROWS_FUNCTION``; sent prepared).
ROWS = "SELECT wgk_rows()"
RESTORE_SEQ = "SELECT setval('ledger_seq', greatest(max(seq), 1), max(seq) IS NOT NULL) FROM ledger"

ENCODING = "SHOW server_encoding"
SCHEMA_EXISTS = "SELECT to_regclass('meta') IS NOT NULL, (SELECT count(*) FROM pg_tables " \
                "WHERE schemaname = current_schema())"
MIGRATION_LOCK = "SELECT pg_advisory_xact_lock(7315172018)"   # one migrator at a time
BEGIN = "BEGIN ISOLATION LEVEL READ COMMITTED"
TABLES = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
COLUMNS = ("SELECT column_name FROM information_schema.columns WHERE table_schema = "
           "current_schema() AND table_name = %s ORDER BY ordinal_position")

#: SQLSTATEs after which the whole transaction is run again with the same key.
RETRY_STATES = frozenset({"40001", "40P01"})     # serialization failure, deadlock detected
UNIQUE_VIOLATION = "23505"
#: A unique violation on these is a concurrent request with the same key (journal), or an
#: append whose number a sealer recorded as skipped a moment before it was written (ledger).
RETRY_CONSTRAINTS = frozenset({"journal_pkey", "ledger_pkey"})


def schema(version: int) -> list[str]:
    """The statements that take a PostgreSQL schema from ``version - 1`` to ``version``."""
    text = MIGRATIONS[version]
    text = re.sub(r"\bWITHOUT ROWID\b", "", text)
    text = re.sub(r"\bINTEGER\b", "BIGINT", text)
    text = re.sub(r"\bBLOB\b", "BYTEA", text)
    text = re.sub(r"\bTEXT\b", 'TEXT COLLATE "C"', text)
    if version == 1:
        text += ";" + LEDGER_HEAD
    return [s for s in text.split(";") if s.strip()]


def pg_schema(version: int) -> list[str]:
    """The statements of PostgreSQL's own migration ``version``."""
    return PG_MIGRATIONS[version]


@dataclass(frozen=True)
class Statement:
    sql: str
    #: the table whose id the connection assigns (its first parameter), see ``ASSIGNED_IDS``
    assigns: str | None = None
    #: a write whose result is not needed at once (queued until the next read or COMMIT)
    deferrable: bool = False


_WRITES = ("INSERT", "UPDATE", "DELETE", "SAVEPOINT", "RELEASE", "ROLLBACK TO")


def _statement(text: str, assigns: str | None = None) -> Statement:
    deferrable = "RETURNING" not in text.upper() and text.lstrip().upper().startswith(_WRITES)
    return Statement(text, assigns, deferrable)


_INSERT = re.compile(r"^\s*INSERT\s+(OR\s+(REPLACE|IGNORE)\s+)?INTO\s+(\w+)\s*(\(([^)]*)\))?\s*"
                     r"VALUES\s*\((.*)\)\s*$", re.S | re.I)


def translate(sql: str, columns) -> Statement:
    """The PostgreSQL form of one SQLite-dialect statement (``columns(table)`` lists a
    table's columns, for an ``INSERT OR REPLACE`` that names none)."""
    m = _INSERT.match(sql)
    if m is None:
        return _statement(_placeholders(sql))
    verb, table, cols, values = m.group(2), m.group(3), m.group(5), m.group(6)
    names = [c.strip() for c in cols.split(",")] if cols else None
    assigns = None
    if table in ASSIGNED_IDS and names is not None and ASSIGNED_IDS[table] not in names:
        names = [ASSIGNED_IDS[table]] + names
        values = "?, " + values
        assigns = table
    head = f"INSERT INTO {table}" + (f" ({', '.join(names)})" if names else "")
    out = f"{head} VALUES ({values})"
    if verb and verb.upper() == "IGNORE":
        out += " ON CONFLICT DO NOTHING"
    elif verb:
        key = PRIMARY_KEYS[table]
        rest = [c for c in (names or columns(table)) if c not in key]
        out += f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET " + \
            ", ".join(f"{c} = EXCLUDED.{c}" for c in rest)
    return _statement(_placeholders(out), assigns)


def next_id(table: str) -> str:
    """The first id a graph edit assigns in ``table`` (it holds the graph lock: the next
    ones follow it, dense, as SQLite's rowids)."""
    return f"SELECT coalesce(max({ASSIGNED_IDS[table]}), 0) + 1 FROM {table}"


def _placeholders(sql: str) -> str:
    if "IN ()" in sql:                            # SQLite accepts an empty list; PostgreSQL not
        sql = sql.replace("IN ()", "IN (NULL)")
    if "%" in sql:
        sql = sql.replace("%", "%%")
    return sql.replace("?", "%s")
