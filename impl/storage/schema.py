"""The kernel database's schema: forward migrations, the version, the projected tables."""
from __future__ import annotations

from ..contract.vocabulary import FORMER_EVIDENCE_LABELS


# --- schema and forward migrations ------------------------------------------------------

SCHEMA_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE tasks (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    review_required INTEGER NOT NULL DEFAULT 0,
    requires_assignment INTEGER NOT NULL DEFAULT 0,
    disposition_policy TEXT NOT NULL DEFAULT 'land',
    generation INTEGER NOT NULL DEFAULT 0,
    attempt INTEGER NOT NULL DEFAULT 0,
    fence INTEGER NOT NULL DEFAULT 0,
    lease_epoch INTEGER NOT NULL DEFAULT 0,
    retained TEXT,
    retained_base TEXT,
    deadline INTEGER NOT NULL DEFAULT 0,
    assigned INTEGER NOT NULL DEFAULT 0,
    legacy_done INTEGER NOT NULL DEFAULT 0,
    reconstructed INTEGER NOT NULL DEFAULT 0,
    abandoned INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE edges (
    task INTEGER NOT NULL, dep INTEGER NOT NULL, PRIMARY KEY (task, dep)
) WITHOUT ROWID;
CREATE TABLE generations (
    task INTEGER NOT NULL, generation INTEGER NOT NULL, opened_seq INTEGER NOT NULL,
    PRIMARY KEY (task, generation)
) WITHOUT ROWID;
CREATE TABLE attempts (
    task INTEGER NOT NULL, fence INTEGER NOT NULL,
    generation INTEGER NOT NULL, attempt INTEGER NOT NULL, lease_epoch INTEGER NOT NULL,
    state TEXT NOT NULL, worktree TEXT, origin TEXT, base_hint TEXT, saved_work TEXT,
    imported TEXT, opened_seq INTEGER NOT NULL,
    PRIMARY KEY (task, fence)
) WITHOUT ROWID;
CREATE TABLE owners (
    task INTEGER NOT NULL, fence INTEGER NOT NULL,
    pid INTEGER NOT NULL, birth INTEGER NOT NULL, session TEXT,
    wrapper_epoch INTEGER NOT NULL, child_epoch INTEGER NOT NULL, seen TEXT NOT NULL,
    PRIMARY KEY (task, fence)
) WITHOUT ROWID;
CREATE TABLE leases (
    task INTEGER NOT NULL, kind TEXT NOT NULL, held INTEGER NOT NULL,
    PRIMARY KEY (task, kind)
) WITHOUT ROWID;
CREATE TABLE transactions (
    task INTEGER PRIMARY KEY,
    fence INTEGER NOT NULL DEFAULT 0,
    phase TEXT NOT NULL DEFAULT 'absent',
    exit TEXT NOT NULL DEFAULT 'none',
    reason TEXT NOT NULL DEFAULT 'none',
    revision INTEGER NOT NULL DEFAULT 0,
    candidate TEXT, base TEXT,
    version INTEGER NOT NULL DEFAULT 0,
    disposition TEXT NOT NULL DEFAULT 'none',
    effect_done INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE receipts (
    task INTEGER NOT NULL, kind TEXT NOT NULL,
    fence INTEGER NOT NULL, candidate TEXT, base TEXT,
    PRIMARY KEY (task, kind)
) WITHOUT ROWID;
CREATE TABLE evidence (
    task INTEGER NOT NULL, kind TEXT NOT NULL, ident TEXT NOT NULL,
    counted INTEGER NOT NULL, seq INTEGER NOT NULL,
    PRIMARY KEY (task, kind, ident)
) WITHOUT ROWID;
CREATE TABLE logs (seq INTEGER PRIMARY KEY, task INTEGER NOT NULL);
CREATE TABLE effects (
    id TEXT PRIMARY KEY, task INTEGER NOT NULL, fence INTEGER NOT NULL,
    version INTEGER NOT NULL, disposition TEXT NOT NULL, candidate TEXT, base TEXT,
    state TEXT NOT NULL, re_observed INTEGER NOT NULL DEFAULT 0,
    prepared_seq INTEGER NOT NULL, settled_seq INTEGER
);
CREATE TABLE worktrees (
    id TEXT PRIMARY KEY, task INTEGER NOT NULL, fence INTEGER NOT NULL,
    origin TEXT, path TEXT, planned_removal INTEGER NOT NULL DEFAULT 0,
    removed INTEGER NOT NULL DEFAULT 0, last_content TEXT
);
CREATE TABLE pins (ref TEXT PRIMARY KEY, task INTEGER NOT NULL, content TEXT NOT NULL,
                   seq INTEGER NOT NULL);
CREATE TABLE journal (
    key TEXT PRIMARY KEY, digest TEXT NOT NULL, response TEXT NOT NULL, seq INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE ledger (
    seq INTEGER PRIMARY KEY, prev TEXT NOT NULL, hash TEXT NOT NULL, event TEXT NOT NULL,
    task TEXT, key TEXT, body TEXT NOT NULL
);
CREATE TABLE task_view (
    task INTEGER PRIMARY KEY, status TEXT NOT NULL, satisfied INTEGER NOT NULL,
    pending INTEGER NOT NULL
);
CREATE TABLE legacy_records (
    id INTEGER PRIMARY KEY, task TEXT NOT NULL, source TEXT NOT NULL, line INTEGER NOT NULL,
    original BLOB NOT NULL, legacy_status TEXT NOT NULL, seq INTEGER NOT NULL
);
"""

SCHEMA_V2 = """
CREATE INDEX edges_by_dep ON edges (dep, task);
CREATE INDEX task_view_ready ON task_view (status, pending);
"""

#: Every ledger column under the hash chain: rows written from now on carry chain version 2
#: (``ledger``); the rows already there stay version 1 and are sealed by one event
#: (``LEDGER_SEAL_VERSION``: the store appends it right after this step).
SCHEMA_V3 = """
ALTER TABLE ledger ADD COLUMN chain INTEGER NOT NULL DEFAULT 1
"""
LEDGER_SEAL_VERSION = 3

#: Evidence is recorded under the kind of the request that reported it: the rows of the
#: former names are renamed (the ledger keeps its events as written; a rebuild reads
#: the former names the same way, ``tables.FactTables``).
SCHEMA_V4 = ";\n".join(f"UPDATE evidence SET kind = '{new}' WHERE kind = '{old}'"
                       for old, new in FORMER_EVIDENCE_LABELS.items())

#: Each attempt keeps the sha256 of its capability token (set when it or a continuation
#: opens); attempts opened before have none, so nothing their process says is applied.
SCHEMA_V5 = """
ALTER TABLE attempts ADD COLUMN token_hash TEXT
"""

#: Each task's retry budget (policy), the automatic retries it used in this generation and
#: why its last attempt failed.
SCHEMA_V6 = """
ALTER TABLE tasks ADD COLUMN retry_budget INTEGER NOT NULL DEFAULT 2;
ALTER TABLE tasks ADD COLUMN retries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN failure TEXT NOT NULL DEFAULT 'none'
"""

#: A task's external wait: the event it waits for (a name), its deadline (0: none) and
#: whether a wait ran out.
SCHEMA_V7 = """
ALTER TABLE tasks ADD COLUMN waiting_on TEXT;
ALTER TABLE tasks ADD COLUMN wait_deadline INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN wait_expired INTEGER NOT NULL DEFAULT 0
"""

#: Why each generation after the first opened: ``reset`` or ``reopen`` (a Done task reopened);
#: the generations before have none.
SCHEMA_V8 = """
ALTER TABLE generations ADD COLUMN cause TEXT
"""

#: Each task's stamp: how many writes its record has had here. Every write of the record is
#: conditional on the stamp it was read with (``tables.TaskTables.save``). A stamp is this
#: database's concurrency control, not a fact of the ledger: no rebuild reproduces it (it is
#: not a projected table), and a migrated database's stamps start at 0.
SCHEMA_V9 = """
CREATE TABLE stamps (task INTEGER PRIMARY KEY, stamp INTEGER NOT NULL);
INSERT INTO stamps (task, stamp) SELECT id, 0 FROM tasks
"""

#: Principals are history, not configuration: each is added and revoked by a ledger event
#: (``principal-added``, ``principal-revoked``, keyed by the principal's name, whose body is the
#: principal as it stands after it), so the hash chain covers every credential hash, role and
#: revocation, and the table (each row with the seq of its last event) is rebuilt from the
#: ledger like every projected table. The table existed before, made on its first use: the
#: principals already in it are written to the ledger right after this step
#: (``PRINCIPALS_CHAINED_VERSION``). The index finds a principal's events without a scan.
SCHEMA_V10 = """
CREATE TABLE IF NOT EXISTS principals (
    name TEXT PRIMARY KEY, secret_sha256 TEXT NOT NULL, roles TEXT NOT NULL,
    revoked INTEGER NOT NULL DEFAULT 0
);
ALTER TABLE principals ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
CREATE INDEX ledger_principals ON ledger (key, seq)
    WHERE event IN ('principal-added', 'principal-revoked')
"""
PRINCIPALS_CHAINED_VERSION = 10

#: Two task columns: the operator's pause flag and the earliest time of the next attempt
#: (0 for none).
SCHEMA_V11 = """
ALTER TABLE tasks ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN not_before INTEGER NOT NULL DEFAULT 0
"""

#: The review valve's columns on the tasks row: the manifest the worker submitted last (id,
#: requirements, contract, output and validation digests, the main a Land manifest integrated),
#: FLIP's and the evaluation's verdicts with the manifest and requirements each names, the
#: publication (manifest, output, how many times) and a failed valve's code.
SCHEMA_V12 = """
ALTER TABLE tasks ADD COLUMN manifest TEXT;
ALTER TABLE tasks ADD COLUMN manifest_requirements TEXT;
ALTER TABLE tasks ADD COLUMN contract TEXT NOT NULL DEFAULT 'none';
ALTER TABLE tasks ADD COLUMN manifest_output TEXT;
ALTER TABLE tasks ADD COLUMN manifest_validation TEXT;
ALTER TABLE tasks ADD COLUMN manifest_main TEXT;
ALTER TABLE tasks ADD COLUMN review_phase TEXT NOT NULL DEFAULT 'working';
ALTER TABLE tasks ADD COLUMN flip TEXT NOT NULL DEFAULT 'absent';
ALTER TABLE tasks ADD COLUMN flip_manifest TEXT;
ALTER TABLE tasks ADD COLUMN flip_requirements TEXT;
ALTER TABLE tasks ADD COLUMN evaluation TEXT NOT NULL DEFAULT 'absent';
ALTER TABLE tasks ADD COLUMN evaluation_manifest TEXT;
ALTER TABLE tasks ADD COLUMN evaluation_requirements TEXT;
ALTER TABLE tasks ADD COLUMN publication TEXT;
ALTER TABLE tasks ADD COLUMN publication_output TEXT;
ALTER TABLE tasks ADD COLUMN publications INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN review_failure TEXT NOT NULL DEFAULT 'none'
"""

#: A task column: the operator asked for a reset while the attempt's owner could still be
#: alive; the row keeps that request until a probe sees the pid die and the owner is released.
SCHEMA_V13 = """
ALTER TABLE tasks ADD COLUMN reopening INTEGER NOT NULL DEFAULT 0
"""

#: A task column: the content the current attempt's owner receipted as its completion before
#: its transaction opened (a runtime that receipts a worker's finish apart from the
#: transaction: WG's reducer); cleared when the next attempt opens.
SCHEMA_V14 = """
ALTER TABLE tasks ADD COLUMN completion_receipt TEXT
"""

#: Three task columns: the name of the task's provider route, whether that
#: route's breaker is open (unavailable) and the time its next probe is due.
SCHEMA_V15 = """
ALTER TABLE tasks ADD COLUMN route TEXT;
ALTER TABLE tasks ADD COLUMN route_unavailable INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN probe_at INTEGER NOT NULL DEFAULT 0
"""

#: Each task's stamp on its transaction's row (a column of no fact: ``CONTROL_COLUMNS``), whose
#: page a record's write touches anyway, where a table of its own cost a page more per commit;
#: the stamps held are kept.
SCHEMA_V16 = """
ALTER TABLE transactions ADD COLUMN stamp INTEGER NOT NULL DEFAULT 0;
UPDATE transactions SET stamp = coalesce((SELECT s.stamp FROM stamps s
                                          WHERE s.task = transactions.task), 0);
DROP TABLE stamps
"""

#: ``effects``, ``worktrees`` and ``pins`` as tables keyed by their text key alone
#: (``WITHOUT ROWID``): a row written is one b-tree's page, where the rowid table and its key's
#: index were two. The same columns and rows; on PostgreSQL the same tables made again.
SCHEMA_V17 = """
CREATE TABLE effects_by_id (
    id TEXT PRIMARY KEY, task INTEGER NOT NULL, fence INTEGER NOT NULL,
    version INTEGER NOT NULL, disposition TEXT NOT NULL, candidate TEXT, base TEXT,
    state TEXT NOT NULL, re_observed INTEGER NOT NULL DEFAULT 0,
    prepared_seq INTEGER NOT NULL, settled_seq INTEGER
) WITHOUT ROWID;
INSERT INTO effects_by_id SELECT * FROM effects;
DROP TABLE effects;
ALTER TABLE effects_by_id RENAME TO effects;
CREATE TABLE worktrees_by_id (
    id TEXT PRIMARY KEY, task INTEGER NOT NULL, fence INTEGER NOT NULL,
    origin TEXT, path TEXT, planned_removal INTEGER NOT NULL DEFAULT 0,
    removed INTEGER NOT NULL DEFAULT 0, last_content TEXT
) WITHOUT ROWID;
INSERT INTO worktrees_by_id SELECT * FROM worktrees;
DROP TABLE worktrees;
ALTER TABLE worktrees_by_id RENAME TO worktrees;
CREATE TABLE pins_by_ref (ref TEXT PRIMARY KEY, task INTEGER NOT NULL, content TEXT NOT NULL,
                          seq INTEGER NOT NULL) WITHOUT ROWID;
INSERT INTO pins_by_ref SELECT * FROM pins;
DROP TABLE pins;
ALTER TABLE pins_by_ref RENAME TO pins
"""

#: version -> the SQL that takes a database from version - 1 to version.
MIGRATIONS: dict[int, str] = {1: SCHEMA_V1, 2: SCHEMA_V2, 3: SCHEMA_V3, 4: SCHEMA_V4,
                              5: SCHEMA_V5, 6: SCHEMA_V6, 7: SCHEMA_V7,
                              8: SCHEMA_V8, 9: SCHEMA_V9, 10: SCHEMA_V10, 11: SCHEMA_V11,
                              12: SCHEMA_V12, 13: SCHEMA_V13, 14: SCHEMA_V14,
                              15: SCHEMA_V15, 16: SCHEMA_V16, 17: SCHEMA_V17}
SCHEMA_VERSION = max(MIGRATIONS)

#: Columns of projected tables that hold no fact, only this database's concurrency control:
#: the stamps the writes of a record are conditional on. Any value is correct while readers
#: and writers agree, so a rebuild neither reproduces nor compares them.
CONTROL_COLUMNS: dict[str, tuple[str, ...]] = {"transactions": ("stamp",)}

#: The columns a rebuild compares and replaces of each table that has control columns: the
#: others (``tests/test_impl_migrations.py`` holds the two lists to the table's columns).
FACT_COLUMNS: dict[str, tuple[str, ...]] = {
    "transactions": ("task", "fence", "phase", "exit", "reason", "revision", "candidate", "base",
                     "version", "disposition", "effect_done")}


def facts(table: str) -> str:
    """The select list of ``table``'s facts: every column but its control columns."""
    return ", ".join(FACT_COLUMNS[table]) if table in FACT_COLUMNS else "*"

#: Tables whose rows the ledger must reproduce exactly (``rebuild``).
PROJECTED_TABLES = ("tasks", "edges", "generations", "attempts", "owners", "leases",
                    "transactions", "receipts", "evidence", "logs", "effects", "worktrees",
                    "pins", "journal", "task_view", "legacy_records", "principals")
