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

#: Tables whose id SQLite assigns (rowid): PostgreSQL takes max + 1 inside the writing
#: transaction, which holds the ledger head, so ids are dense and equal on a rebuild
#: (a sequence would leave gaps after a rollback).
ASSIGNED_IDS = {"tasks": "id", "legacy_records": "id"}

LEDGER_HEAD = f"""
CREATE TABLE ledger_head (id INTEGER PRIMARY KEY CHECK (id = 1), seq BIGINT NOT NULL,
                          hash TEXT NOT NULL);
INSERT INTO ledger_head VALUES (1, 0, '{GENESIS}')
"""

HEAD_FOR_UPDATE = "SELECT seq, hash FROM ledger_head WHERE id = 1 FOR UPDATE"
HEAD_READ = "SELECT seq FROM ledger_head WHERE id = 1"

#: One append in one round trip: lock the head row (READ COMMITTED re-reads it after the
#: wait, so the chain is linear), insert the event linked to it (the hash is
#: ``ledger.link_v2``: sha256 of prev, the chain version 2, seq, event, the JSON of task
#: and key, and body, joined by newlines, UTF-8) and move the head, all inside the
#: writing transaction.
APPEND = """
WITH head AS (SELECT seq, hash FROM ledger_head WHERE id = 1 FOR UPDATE),
     event AS (INSERT INTO ledger SELECT seq + 1, hash,
                   encode(sha256(convert_to(hash || E'\n2\n' || (seq + 1)::text || E'\n'
                                            || %(event)s || E'\n' || %(task_json)s || E'\n'
                                            || %(key_json)s || E'\n' || %(body)s,
                                            'UTF8')), 'hex'),
                   %(event)s, %(task)s, %(key)s, %(body)s, 2 FROM head RETURNING seq, hash)
UPDATE ledger_head SET seq = event.seq, hash = event.hash FROM event WHERE ledger_head.id = 1
RETURNING event.seq, event.hash"""


def lock_tasks(ids: list[int], share: bool, begin: bool) -> str:
    """Row locks on task rows, then the ledger head as it is after them (each statement of
    a READ COMMITTED transaction sees what committed before it began): one round trip,
    opening the transaction too when ``begin``. ``ids`` are integers (no injection)."""
    listed = ", ".join(str(int(i)) for i in sorted(ids))
    mode = "SHARE" if share else "UPDATE"
    return (f"{BEGIN + '; ' if begin else ''}SELECT id FROM tasks WHERE id IN ({listed}) "
            f"ORDER BY id FOR {mode}; {HEAD_READ}")
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


@dataclass(frozen=True)
class Statement:
    sql: str
    returns_id: bool = False


_INSERT = re.compile(r"^\s*INSERT\s+(OR\s+(REPLACE|IGNORE)\s+)?INTO\s+(\w+)\s*(\(([^)]*)\))?\s*"
                     r"VALUES\s*\((.*)\)\s*$", re.S | re.I)


def translate(sql: str, columns) -> Statement:
    """The PostgreSQL form of one SQLite-dialect statement (``columns(table)`` lists a
    table's columns, for an ``INSERT OR REPLACE`` that names none)."""
    m = _INSERT.match(sql)
    if m is None:
        return Statement(_placeholders(sql))
    verb, table, cols, values = m.group(2), m.group(3), m.group(5), m.group(6)
    names = [c.strip() for c in cols.split(",")] if cols else None
    returns_id = False
    if table in ASSIGNED_IDS and names is not None and ASSIGNED_IDS[table] not in names:
        idc = ASSIGNED_IDS[table]
        names = [idc] + names
        values = f"(SELECT coalesce(max({idc}), 0) + 1 FROM {table}), " + values
        returns_id = True
    head = f"INSERT INTO {table}" + (f" ({', '.join(names)})" if names else "")
    out = f"{head} VALUES ({values})"
    if verb and verb.upper() == "IGNORE":
        out += " ON CONFLICT DO NOTHING"
    elif verb:
        key = PRIMARY_KEYS[table]
        rest = [c for c in (names or columns(table)) if c not in key]
        out += f" ON CONFLICT ({', '.join(key)}) DO UPDATE SET " + \
            ", ".join(f"{c} = EXCLUDED.{c}" for c in rest)
    if returns_id:
        out += f" RETURNING {ASSIGNED_IDS[table]}"
    return Statement(_placeholders(out), returns_id)


def _placeholders(sql: str) -> str:
    if "IN ()" in sql:                            # SQLite accepts an empty list; PostgreSQL not
        sql = sql.replace("IN ()", "IN (NULL)")
    if "%" in sql:
        sql = sql.replace("%", "%%")
    return sql.replace("?", "%s")
