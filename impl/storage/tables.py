"""Task records on their normalised tables, and the facts recorded beside a record.

``TaskTables`` loads a ``TaskRecord`` row by row (tasks, attempts, owners, leases,
transactions, receipts) and saves the changed columns (only the changed fields are
written); ``FactTables`` writes the facts a ledger event establishes (evidence,
logs, effect intents, worktrees, pins, closed attempts, legacy records).
"""
from __future__ import annotations

import sqlite3
from typing import Any

from ..contract.errors import StoreError
from .records import (
    CHANGE_NAME, EMPTY, NO_BINDING, RECORD_FIELDS, AttemptRow, Binding, LeaseRow, OwnerRow,
    VALVE_COLUMNS, ManifestRow, PublicationRow, TaskPolicy, TaskRecord, TaskRow, TransactionRow,
    ValveRow, VerdictRow,
)
from ..contract.vocabulary import (
    ATTEMPT_STATES, CONTRACTS, DISPOSITIONS, REVIEW_PHASES, REVIEW_VERDICTS, EXITS, FAILURES, FORMER_EVIDENCE_LABELS, OWNER_SEEN, PHASES,
    REASONS,
    RECEIPTS, SAVE_GRAPH_NEEDS,
)


# --- task records on their tables -------------------------------------------------------------

TASK_COLUMNS = ("generation", "attempt", "fence", "lease_epoch", "retained", "retained_base",
                "deadline", "assigned", "legacy_done", "reconstructed", "abandoned", "failure",
                "retries", "waiting_on", "wait_deadline", "wait_expired", "paused", "not_before",
                "reopening", "completion_receipt",
                "route", "route_unavailable", "probe_at")
#: the review valve's columns, also on the tasks row
REVIEW_COLUMNS = tuple(VALVE_COLUMNS)
_VALVE_PARTS = {"valve": ValveRow, "submitted": ManifestRow, "flip_review": VerdictRow,
                "evaluation_review": VerdictRow, "published": PublicationRow}
ATTEMPT_COLUMNS = {CHANGE_NAME["attempts", c]: c for c in AttemptRow._fields}
OWNER_COLUMNS = {CHANGE_NAME["owners", c]: c for c in OwnerRow._fields}
LEASE_KINDS = {CHANGE_NAME["leases", c]: c for c in LeaseRow._fields}
TX_COLUMNS = ("phase", "exit", "reason", "revision", "candidate", "base", "version",
              "disposition", "effect_done")
_LABELS = {"attempt_state": frozenset(ATTEMPT_STATES), "owner_seen": frozenset(OWNER_SEEN),
           "failure": frozenset(FAILURES),
           "phase": frozenset(PHASES), "exit": frozenset(EXITS), "reason": frozenset(REASONS),
           "disposition": frozenset(DISPOSITIONS), "contract": frozenset(CONTRACTS),
           "review_phase": frozenset(REVIEW_PHASES), "flip": frozenset(REVIEW_VERDICTS),
           "evaluation": frozenset(REVIEW_VERDICTS), "review_failure": frozenset(FAILURES)}
_BOOLS = {"assigned", "legacy_done", "reconstructed", "abandoned", "effect_done", "wait_expired",
          "paused", "reopening", "route_unavailable",
          "worktree_lease", "session_lease", "finish_lease"}

_TASK_BOOLS = _BOOLS & set(TASK_COLUMNS)
_mapped = set(TASK_COLUMNS) | set(REVIEW_COLUMNS) | set(ATTEMPT_COLUMNS) | set(OWNER_COLUMNS) \
    | set(LEASE_KINDS) \
    | set(TX_COLUMNS) | {"receipts"}
assert _mapped == set(RECORD_FIELDS), sorted(set(RECORD_FIELDS) ^ _mapped)


#: The change names written to the task's row and to its transaction's row (``save``).
_TASK_ROW = frozenset(TASK_COLUMNS + REVIEW_COLUMNS)
_TX_ROW = frozenset(TX_COLUMNS)


def _db(field: str, value: Any) -> Any:
    return int(value) if field in _BOOLS else value


_SQL: dict[tuple, str] = {}


def _sql(template: str, columns: list[str]) -> str:
    """``template`` with ``col = ?, ...`` for ``columns`` (each text made once)."""
    key = (template, *columns)
    text = _SQL.get(key)
    if text is None:
        text = _SQL[key] = template.format(", ".join(f"{c} = ?" for c in columns))
    return text


#: The first write of every record change: the task's stamp (a column of its transaction's row,
#: whose page the change's write of that row touches anyway) moves on, but only from the stamp
#: its record was read with. ``wgk_expect`` (a function of the connection on SQLite, of the
#: schema on PostgreSQL) raises a serialization failure when the row no longer holds it, so
#: a decision made on facts the database no longer holds is made again on the stored ones
#: (``Store.retryable``): a second line behind the locks (SQLite's writer lock, PostgreSQL's
#: row locks) that holds even where they do not.
STAMP = "UPDATE transactions SET stamp = stamp + 1 WHERE task = ? AND wgk_expect(stamp = ?)"


class TaskTables:
    """Reads a ``TaskRecord`` from its tables and writes the fields a request changed, each
    change only over the record it was decided on (``STAMP``)."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn
        #: task id -> the stamp its record was read (or last written) with
        self.stamps: dict[int, int] = {}
        self._sel_task = (f"SELECT {', '.join('t.' + c for c in TASK_COLUMNS + REVIEW_COLUMNS)}, s.stamp "
                          "FROM tasks t JOIN transactions s ON s.task = t.id WHERE t.id = ?")
        self._sel_attempt = ("SELECT " + ", ".join(ATTEMPT_COLUMNS.values())
                             + " FROM attempts WHERE task = ? AND fence = ?")
        self._sel_owner = ("SELECT " + ", ".join(OWNER_COLUMNS.values())
                           + " FROM owners WHERE task = ? AND fence = ?")
        self._sel_tx = "SELECT " + ", ".join(TX_COLUMNS) + " FROM transactions WHERE task = ?"

    def create(self, task_id: int) -> None:
        """The rows every task has from its creation on."""
        self.conn.execute("INSERT INTO transactions (task) VALUES (?)", (task_id,))
        self.stamps[task_id] = 0
        self.conn.executemany("INSERT INTO leases VALUES (?, ?, 0)",
                              [(task_id, k) for k in LEASE_KINDS.values()])

    def load_policy(self, task_id: int, name: str) -> TaskPolicy:
        """A task's policy: its flags and its dependencies (by name, sorted)."""
        review, assign, disposition, budget = self.conn.execute(
            "SELECT review_required, requires_assignment, disposition_policy, retry_budget "
            "FROM tasks WHERE id = ?", (task_id,)).fetchone()
        deps = tuple(n for (n,) in self.conn.execute(
            "SELECT t.name FROM edges e JOIN tasks t ON t.id = e.dep WHERE e.task = ? "
            "ORDER BY t.name", (task_id,)))
        return TaskPolicy(name, deps, bool(review), bool(assign), disposition, budget)

    def load(self, task_id: int) -> TaskRecord:
        c = self.conn
        found = c.execute(self._sel_task, (task_id,)).fetchone()
        if found is None:
            raise StoreError(f"task {task_id}: no row in tasks or transactions in the database")
        *row, self.stamps[task_id] = found
        task = dict(zip(TASK_COLUMNS, row))
        valve: dict[str, dict[str, Any]] = {part: {} for part in _VALVE_PARTS}
        for name, value in zip(REVIEW_COLUMNS, row[len(TASK_COLUMNS):]):
            part, field = VALVE_COLUMNS[name]
            valve[part][field] = value
        fence = task["fence"]
        attempt, owner = AttemptRow(), OwnerRow()
        if fence:
            attempt = AttemptRow(*c.execute(self._sel_attempt, (task_id, fence)).fetchone())
            owner = OwnerRow(*c.execute(self._sel_owner, (task_id, fence)).fetchone())
        held = dict(c.execute("SELECT kind, held FROM leases WHERE task = ?", (task_id,)))
        tx = dict(zip(TX_COLUMNS, c.execute(self._sel_tx, (task_id,)).fetchone()))
        receipts = list(EMPTY.receipts)
        index = {name: i for i, name in enumerate(RECEIPTS)}
        for kind, f, cand, base in c.execute(
                "SELECT kind, fence, candidate, base FROM receipts WHERE task = ?", (task_id,)):
            receipts[index[kind]] = Binding(f, cand, base)
        for name in _TASK_BOOLS:
            task[name] = bool(task[name])
        tx["effect_done"] = bool(tx["effect_done"])
        record = TaskRecord(
            TaskRow(**task), attempt, owner,
            LeaseRow(**{kind: bool(held.get(kind, 0)) for kind in LeaseRow._fields}),
            TransactionRow(**tx), tuple(receipts),
            *(row_type(**valve[part]) for part, row_type in _VALVE_PARTS.items()))
        for name, allowed in _LABELS.items():
            value = getattr(record, name)
            if (name not in ("attempt_state", "owner_seen") or fence) and value not in allowed:
                raise StoreError(f"task {task_id}: unknown {name.replace('_', '-')} "
                                 f"{value!r} in the database")
        return record

    def save(self, task_id: int, old: TaskRecord, new: TaskRecord, changes: dict[str, Any],
             seq: int, stamped: bool = False) -> None:
        """Write exactly the changed fields (``changes`` = records.changed(old, new));
        ``stamped``: the stamp moved on already, in this record's step (``step_if_current``)."""
        if not changes:
            return
        c = self.conn
        if not stamped:
            stamp = self.stamps[task_id]
            # guards: single-live-owner, first-terminal-wins
            c.execute(STAMP, (task_id, stamp))
            self.stamps[task_id] = stamp + 1
        cols = [f for f in changes if f in _TASK_ROW]
        if cols:
            c.execute(_sql("UPDATE tasks SET {} WHERE id = ?", cols),
                      [_db(f, changes[f]) for f in cols] + [task_id])
        if new.fence and new.fence != old.fence:
            c.execute("INSERT OR REPLACE INTO attempts VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                      (task_id, new.fence, new.generation, new.attempt, new.lease_epoch,
                       new.attempt_state, new.worktree_id, new.origin, new.base_hint,
                       new.saved_work, new.imported, seq, new.token_hash))
            c.execute("INSERT OR REPLACE INTO owners VALUES (?,?,?,?,?,?,?,?)",
                      (task_id, new.fence, new.owner_pid, new.owner_birth, new.session,
                       new.wrapper_epoch, new.child_epoch, new.owner_seen))
        elif new.fence:
            self._update(c, "attempts", ATTEMPT_COLUMNS, changes, task_id, new.fence)
            self._update(c, "owners", OWNER_COLUMNS, changes, task_id, new.fence)
        for field in changes:
            kind = LEASE_KINDS.get(field)
            if kind is not None:
                c.execute("UPDATE leases SET held = ? WHERE task = ? AND kind = ?",
                          (int(changes[field]), task_id, kind))
        cols = [f for f in changes if f in _TX_ROW]
        if cols or "fence" in changes:
            cols = cols + ["fence"] if "fence" in changes else cols
            c.execute(_sql("UPDATE transactions SET {} WHERE task = ?", cols),
                      [_db(f, getattr(new, f)) for f in cols] + [task_id])
        if "receipts" in changes:
            for name, before, after in zip(RECEIPTS, old.receipts, new.receipts):
                if before == after:
                    continue
                if after == NO_BINDING:
                    c.execute("DELETE FROM receipts WHERE task = ? AND kind = ?", (task_id, name))
                else:
                    c.execute("INSERT OR REPLACE INTO receipts VALUES (?, ?, ?, ?, ?)",
                              (task_id, name, *after))

    @staticmethod
    def step_statement(task_id: int, r, to: str, edge_from, seen: tuple = (None, None)
                       ) -> tuple[str, tuple]:
        """``STEP_IF_CURRENT`` with the step's own conditions (``STEP_CONDITIONS``) and its
        parameters, for request ``r`` moving task ``task_id``'s row to ``to``; ``seen``: what
        was observed of the environment before the write (``STEP_CONDITIONS``)."""
        c = r.cap
        own, values = STEP_CONDITIONS[r.kind]
        key = (STEP_IF_CURRENT, own, len(edge_from))
        sql = _SQL.get(key)
        if sql is None:
            sql = _SQL[key] = STEP_IF_CURRENT.format(", ".join("?" * len(edge_from)), own)
        return sql, (to, task_id, r.expected_phase, r.expected_revision, *sorted(edge_from), r.task,
                     c.task, c.generation, c.attempt, c.fence, c.lease_epoch, int(r.needs_token),
                     r.token_hash, *values(r, seen), c.graph)

    def step_if_current(self, task_id: int, r, to: str, edge_from,
                        seen: tuple = (None, None), stamped: bool = False) -> bool:
        """Move the transaction row to ``to`` under the request's conditions
        (``STEP_IF_CURRENT`` with the step's own, ``STEP_CONDITIONS``); whether it moved.
        ``stamped``: the task's stamp moves on in the same statement, from the one its record
        was read with (``STAMPED``: the step's other writes then take no ``STAMP``)."""
        sql, params = self.step_statement(task_id, r, to, edge_from, seen)
        if stamped:
            stamp = self.stamps[task_id]
            sql, params = _stamped(sql), (*params, stamp)
        # guards: attempt-fencing, token-required, first-terminal-wins, no-phase-skip
        moved = self.conn.execute(sql, params).rowcount == 1
        if moved and stamped:
            self.stamps[task_id] = stamp + 1
        return moved

    def step_back(self, task_id: int, phase: str, revision: int) -> None:
        """Move task ``task_id``'s transaction row back to the phase and revision it held
        before a step's write (its effect failed: the step did not happen)."""
        self.conn.execute("UPDATE transactions SET phase = ?, revision = ? WHERE task = ?",
                          (phase, revision, task_id))

    @staticmethod
    def open_statement(task_id: int, r, now: int) -> tuple[str, tuple]:
        """``OPEN_IF_ADMITTED`` and its parameters for dispatch ``r`` of task ``task_id`` at
        time ``now``."""
        return OPEN_IF_ADMITTED, (task_id, now, r.expected_attempt, r.imports, r.imports)

    def open_if_admitted(self, task_id: int, r, now: int) -> bool:
        """Move task ``task_id``'s attempt counters on for dispatch ``r`` while its admission
        holds at time ``now`` (``OPEN_IF_ADMITTED``); whether they moved."""
        sql, params = self.open_statement(task_id, r, now)
        moved = self.conn.execute(sql, params).rowcount == 1
        return moved

    def open_back(self, task_id: int) -> None:
        """Take back what ``OPEN_IF_ADMITTED`` moved on (the counters, one each)."""
        self.conn.execute("UPDATE tasks SET attempt = attempt - 1, fence = fence - 1, "
                          "lease_epoch = lease_epoch - 1 WHERE id = ?", (task_id,))

    def stamp(self, task_id: int) -> None:
        """Move the task's stamp on from the one its record was read with (``STAMP``)."""
        stamp = self.stamps[task_id]
        self.conn.execute(STAMP, (task_id, stamp))
        self.stamps[task_id] = stamp + 1

    @staticmethod
    def _update(c, table: str, mapping: dict[str, str], changes: dict, task_id: int,
                fence: int) -> None:
        cols = [f for f in changes if f in mapping]
        if cols:
            c.execute(_sql(f"UPDATE {table} SET {{}} WHERE task = ? AND fence = ?",
                           [mapping[f] for f in cols]),
                      [changes[f] for f in cols] + [task_id, fence])


# --- facts recorded beside a record ----------------------------------------------------------


#: A report's evidence row, written only while the request's K names the task's current
#: attempt (graph, task, generation, attempt, fence, lease epoch) and its token hash is that
#: attempt's: the request's conditions are the conditions of its one write. No row is
#: written when one of them does not hold, nor when the row is there already (its id seen).
REPORT_IF_CURRENT = (
    "INSERT INTO evidence (task, kind, ident, counted, seq) "
    "SELECT t.id, ?, ?, 0, ? FROM tasks t JOIN attempts a ON a.task = t.id AND a.fence = t.fence "
    "WHERE t.name = ? AND t.name = ? AND t.generation = ? AND t.attempt = ? AND t.fence = ? "
    "AND t.lease_epoch = ? AND a.state != 'none' AND a.token_hash = ? "
    "AND (SELECT value FROM meta WHERE key = 'graph-id') = ? ON CONFLICT DO NOTHING")


#: A step of the SaveTransaction decided by its write: the row moves only while it holds the
#: phase and revision the request expects on the main line, from a phase the edge leaves
#: (the first ``{}``: one ``?`` each), the request's K and token are the running attempt's
#: (the token only where the sender must present it), and the step's own conditions hold
#: (the second ``{}``: ``STEP_CONDITIONS``, over the task row ``t`` and the row moved).
STEP_IF_CURRENT = (
    "UPDATE transactions SET phase = ?, revision = revision + 1 "
    "WHERE task = ? AND phase = ? AND revision = ? AND exit = 'none' AND phase IN ({}) "
    "AND EXISTS (SELECT 1 FROM tasks t JOIN attempts a ON a.task = t.id AND a.fence = t.fence "
    "WHERE t.id = transactions.task AND t.name = ? AND t.name = ? AND t.generation = ? AND t.attempt = ? "
    "AND t.fence = ? AND t.lease_epoch = ? AND a.state = 'running' "
    "AND (? = 0 OR a.token_hash = ?){}) "
    "AND (SELECT value FROM meta WHERE key = 'graph-id') = ?")


#: ``STEP_IF_CURRENT`` (with a step's own conditions) that also moves the task's stamp on, on
#: ``STAMP``'s condition: one statement where the record was read before the step's write
#: (SQLite), whose other writes then need no statement for the stamp.
_STAMPED: dict[str, str] = {}


def _stamped(sql: str) -> str:
    text = _STAMPED.get(sql)
    if text is None:
        head, _, rest = sql.partition(" WHERE ")
        text = _STAMPED[sql] = (head + ", stamp = stamp + 1 WHERE " + rest
                                + " AND wgk_expect(stamp = ?)")
    return text


def _no_values(r, seen=None) -> tuple:
    return ()


def _candidate(r, seen=None) -> tuple:
    return (r.candidate,)


def _worktree_seen(r, seen=(None, None)) -> tuple:
    """The worktree observed present (its id; None when it is absent)."""
    return (seen[0],)


def _saved_as_seen(r, seen=(None, None)) -> tuple:
    """The worktree observed present and its content, the request's candidate and base."""
    return (seen[0], seen[1], r.candidate, r.base)


#: The request names the candidate the row holds (NULL equal to NULL, as in the record).
_NAMES_THE_CANDIDATE = " AND transactions.candidate IS NOT DISTINCT FROM ?"
#: Every receipt a graph save needs is bound to the attempt's (fence, candidate, base).
_EVERY_RECEIPT_BOUND = (
    " AND (SELECT count(*) FROM receipts g WHERE g.task = t.id AND g.kind IN ({}) "
    "AND g.fence = t.fence AND g.candidate IS NOT DISTINCT FROM transactions.candidate "
    "AND g.base IS NOT DISTINCT FROM transactions.base) = {}").format(
        ", ".join(f"'{k}'" for k in SAVE_GRAPH_NEEDS), len(SAVE_GRAPH_NEEDS))
#: An accept whose verdict is pass or not-required: a review is awaited exactly where the
#: policy requires one, and where it does, the verdict passes.
_REVIEW_AS_REQUIRED = (
    _NAMES_THE_CANDIDATE
    + " AND (t.review_required = 0 OR transactions.phase = 'awaiting-acceptance')"
    " AND (t.review_required = 1 OR transactions.phase != 'awaiting-acceptance')"
    " AND (t.review_required = 0 OR CAST(? AS TEXT) = 'pass')")

#: The attempt's worktree lease is held, and its worktree is the one observed present.
_WORKTREE_LEASED_AND_PRESENT = (
    " AND EXISTS (SELECT 1 FROM leases l WHERE l.task = t.id AND l.kind = 'worktree' "
    "AND l.held = 1) AND a.worktree = ?")
#: The attempt's worktree is the one observed present, the content observed in it is the
#: candidate the request names, and the request's base is the attempt's own.
_WORKTREE_HOLDS_THE_CANDIDATE_ON_ITS_BASE = (
    " AND a.worktree = ? AND CAST(? AS TEXT) IS NOT DISTINCT FROM CAST(? AS TEXT)"
    " AND a.base_hint IS NOT DISTINCT FROM ?")

#: Every dependency is Done on its own fence (graph-saved on the main line, its graph-save
#: receipt bound to that fence) ...
_EVERY_DEPENDENCY_DONE = (
    " AND NOT EXISTS (SELECT 1 FROM edges e JOIN tasks d ON d.id = e.dep "
    "JOIN transactions dx ON dx.task = d.id WHERE e.task = t.id AND NOT ("
    "dx.phase = 'graph-saved' AND dx.exit = 'none' AND d.fence != 0 AND EXISTS (SELECT 1 "
    "FROM receipts dg WHERE dg.task = d.id AND dg.kind = 'graph-save' AND dg.fence = d.fence)))")
#: ... and none opened a generation (a reset, a reopen) after the running attempt opened.
_NO_DEPENDENCY_REOPENED = (
    " AND NOT EXISTS (SELECT 1 FROM edges e JOIN generations dn ON dn.task = e.dep "
    "WHERE e.task = t.id AND dn.opened_seq > a.opened_seq)")
#: The request names the candidate and the base the row holds.
_NAMES_THE_CANDIDATE_AND_BASE = _NAMES_THE_CANDIDATE + " AND transactions.base IS NOT DISTINCT FROM ?"
#: The review receipt is bound to the attempt's (fence, candidate, base).
_REVIEW_BOUND_TO_THE_ATTEMPT = (
    " AND EXISTS (SELECT 1 FROM receipts v WHERE v.task = t.id AND v.kind = 'review' "
    "AND v.fence = t.fence AND v.candidate IS NOT DISTINCT FROM transactions.candidate "
    "AND v.base IS NOT DISTINCT FROM transactions.base)")
#: The effect may be made or recorded: it is recorded done already, the disposition is no
#: land, the target observed is the base the land expects, or the effect whose intent the
#: row's version prepared was observed made.
_TARGET_AT_THE_BASE_OR_EFFECT_DONE = (
    " AND (transactions.effect_done = 1 OR transactions.disposition IS DISTINCT FROM 'land'"
    " OR transactions.base IS NOT DISTINCT FROM CAST(? AS TEXT) OR (? = 1 AND EXISTS ("
    "SELECT 1 FROM effects e WHERE e.id = ? AND e.task = t.id AND e.fence = t.fence "
    "AND e.version = transactions.version)))")
#: The attempt's worktree is the one looked at, and it was observed absent, or holding
#: exactly the saved work with nothing beside it that no ref keeps.
_WORKTREE_HOLDS_ONLY_SAVED_BYTES = (
    " AND a.worktree IS NOT DISTINCT FROM CAST(? AS TEXT) AND (? = 0 OR ("
    "a.saved_work IS NOT DISTINCT FROM CAST(? AS TEXT) AND ? = 0))")


def _candidate_and_base_as_seen(r, seen=(None, None, None)) -> tuple:
    """The request's candidate and base, the target observed, and the effect observed made
    (1 or 0) with its name."""
    return (r.candidate, r.base, *seen)


def _cleanup_as_seen(r, seen=(None, 0, None, 0)) -> tuple:
    """The worktree looked at, observed present (1 or 0), its content, and whether it holds
    something no ref keeps (1 or 0)."""
    return seen


#: Each step the store decides by its write: the conditions of its own that read the stored
#: rows, in SQL (inside ``STEP_IF_CURRENT``'s ``EXISTS``), and the values they compare, in
#: order: the request's, and what was observed of the environment before the write
#: (``seen``, as ``transaction.OBSERVING_STEPS`` says for the steps that look). The
#: conditions that read the request alone are checked before (``transaction.WRITTEN_STEPS``);
#: a request they refuse takes the guard list.
STEP_CONDITIONS: dict[str, tuple[str, Any]] = {
    "submit": (_WORKTREE_LEASED_AND_PRESENT, _worktree_seen),
    "save-work": (_WORKTREE_HOLDS_THE_CANDIDATE_ON_ITS_BASE, _saved_as_seen),
    "quiesce": ("", _no_values),
    "seal-candidate": (_NAMES_THE_CANDIDATE, _candidate),
    "validate": (_NAMES_THE_CANDIDATE, _candidate),
    "request-review": (" AND t.review_required = 1", _no_values),
    "accept": (_REVIEW_AS_REQUIRED, lambda r, seen=None: (r.candidate, r.verdict)),
    "record-disposition": ("", _no_values),
    "prepare-effect": (_EVERY_DEPENDENCY_DONE + _NO_DEPENDENCY_REOPENED, _no_values),
    "commit-effect": (_NAMES_THE_CANDIDATE_AND_BASE + _REVIEW_BOUND_TO_THE_ATTEMPT
                      + _TARGET_AT_THE_BASE_OR_EFFECT_DONE, _candidate_and_base_as_seen),
    "prepare-cleanup": ("", _no_values),
    "commit-cleanup": (_WORKTREE_HOLDS_ONLY_SAVED_BYTES, _cleanup_as_seen),
    "save-graph": (_EVERY_RECEIPT_BOUND, _no_values),
}


#: A dispatch decided by its write: the task's attempt counters move on only while the
#: admission holds on the stored rows (docs/vocabulary.md, "Conditions, kind by kind", in its
#: order): the task is not abandoned, its current attempt did not succeed, no operator's hold
#: (a reconciliation, a blocked upgrade, a reset's pending intent), assigned where its policy
#: requires it, every dependency graph-saved on its own fence, not waiting, not paused, due at
#: the time observed before the write (the ``?`` compared with ``not_before``), its route
#: available, the attempt count the request expects, no attempt running, no wait that ran
#: out, and after a failed or lost attempt no semantic failure and a retry left in the budget;
#: a request that imports retained work names the work retained.
OPEN_IF_ADMITTED = (
    "UPDATE tasks SET attempt = attempt + 1, fence = fence + 1, lease_epoch = lease_epoch + 1 "
    "WHERE id = ? AND abandoned = 0 "
    "AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.task = tasks.id AND a.fence = tasks.fence "
    "AND a.state IN ('succeeded', 'running')) "
    "AND (SELECT x.exit FROM transactions x WHERE x.task = tasks.id) "
    "NOT IN ('needs-reconciliation', 'upgrade-blocked') AND reopening = 0 "
    "AND (assigned = 1 OR requires_assignment = 0) "
    "AND NOT EXISTS (SELECT 1 FROM edges e JOIN tasks d ON d.id = e.dep "
    "JOIN transactions dx ON dx.task = d.id WHERE e.task = tasks.id AND NOT ("
    "dx.phase = 'graph-saved' AND dx.exit = 'none' AND d.fence != 0 AND EXISTS (SELECT 1 FROM "
    "receipts g WHERE g.task = d.id AND g.kind = 'graph-save' AND g.fence = d.fence))) "
    "AND waiting_on IS NULL AND paused = 0 AND ? >= not_before AND route_unavailable = 0 "
    "AND attempt = ? AND wait_expired = 0 "
    "AND (attempt = 0 OR NOT EXISTS (SELECT 1 FROM attempts a WHERE a.task = tasks.id "
    "AND a.fence = tasks.fence AND a.state IN ('failed', 'lost')) "
    "OR (failure != 'semantic' AND retries < retry_budget)) "
    "AND (CAST(? AS TEXT) IS NULL OR retained = ?)")


class FactTables:
    """Writes the facts a decision records (evidence, logs, effects, worktrees, pins)."""

    def __init__(self, conn: sqlite3.Connection):
        self.conn = conn
        self._writers: dict[str, Any] = {}       # fact name -> its writer (looked up once)

    def write(self, task_id: int, facts: list[tuple[str, dict]], seq: int) -> None:
        for name, f in facts:
            writer = self._writers.get(name)
            if writer is None:
                writer = self._writers[name] = getattr(self, "_" + name.replace("-", "_"))
            writer(task_id, f, seq)

    @staticmethod
    def report_statement(r, seq: int) -> tuple[str, tuple]:
        """``REPORT_IF_CURRENT`` and its parameters for report ``r`` (its row given ``seq``)."""
        c = r.cap
        return REPORT_IF_CURRENT, (r.kind, r.evidence, seq, r.task, c.task, c.generation,
                                   c.attempt, c.fence, c.lease_epoch, r.token_hash, c.graph)

    def report_if_current(self, r, seq: int) -> bool:
        """Write ``r``'s evidence row under its conditions (``REPORT_IF_CURRENT``); whether
        a row was written (False: a condition failed, or the row was there already)."""
        _, params = self.report_statement(r, seq)
        # guards: attempt-fencing, token-required
        written = self.conn.execute(REPORT_IF_CURRENT, params).rowcount == 1
        return written

    def date_evidence(self, task_id: int, kind: str, ident: str, seq) -> None:
        """Give the evidence row written ahead of its event (with none) the event's number."""
        self.conn.execute("UPDATE evidence SET seq = ? WHERE task = ? AND kind = ? AND ident = ? "
                          "AND seq = 0", (seq, task_id, kind, ident))

    def has_evidence(self, task_id: int, kind: str, ident: str) -> bool:
        return self.conn.execute("SELECT 1 FROM evidence WHERE task = ? AND kind = ? AND ident = ?",
                                 (task_id, kind, ident)).fetchone() is not None

    def _evidence(self, task_id: int, f: dict, seq: int) -> None:
        kind = FORMER_EVIDENCE_LABELS.get(f["kind"], f["kind"])    # an older ledger's name
        # guards: compaction-occurrences-counted-once
        self.conn.execute("INSERT OR IGNORE INTO evidence VALUES (?, ?, ?, ?, ?)",
                          (task_id, kind, f["id"], int(f["counted"]), seq))

    def _log(self, task_id: int, f: dict, seq: int) -> None:
        self.conn.execute("INSERT INTO logs VALUES (?, ?)", (seq, task_id))

    def _effect_prepared(self, task_id: int, f: dict, seq: int) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO effects (id, task, fence, version, disposition, candidate, "
            "base, state, prepared_seq) VALUES (?, ?, ?, ?, ?, ?, ?, 'prepared', ?)",
            (f["id"], task_id, f["fence"], f["version"], f["disposition"], f["candidate"],
             f["base"], seq))

    def _effect_committed(self, task_id: int, f: dict, seq: int) -> None:
        self.conn.execute("UPDATE effects SET state = 'committed', re_observed = ?, "
                          "settled_seq = ? WHERE id = ?", (int(f["re-observed"]), seq, f["id"]))

    def _effect_void(self, task_id: int, f: dict, seq: int) -> None:
        self.conn.execute("UPDATE effects SET state = 'void', settled_seq = ? WHERE id = ?",
                          (seq, f["id"]))

    def _worktree_added(self, task_id: int, f: dict, seq: int) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO worktrees (id, task, fence, origin, path, last_content) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (f["worktree"], task_id, f["fence"], f["origin"], f["path"], f["origin"]))

    def _cleanup_planned(self, task_id: int, f: dict, seq: int) -> None:
        self.conn.execute("UPDATE worktrees SET planned_removal = 1, "
                          "last_content = coalesce(?, last_content) WHERE id = ?",
                          (f["content"], f["worktree"]))

    def _worktree_removed(self, task_id: int, f: dict, seq: int) -> None:
        self.conn.execute("UPDATE worktrees SET removed = 1, "
                          "last_content = coalesce(?, last_content) WHERE id = ?",
                          (f["content"], f["worktree"]))

    def _attempt_closed(self, task_id: int, f: dict, seq: int) -> None:
        """An attempt closed in the same request that opened its successor (retry)."""
        self.conn.execute("UPDATE attempts SET state = ? WHERE task = ? AND fence = ?",
                          (f["state"], task_id, f["fence"]))
        self.conn.execute("UPDATE owners SET pid = 0, birth = 0, session = NULL, wrapper_epoch = 0, "
                          "child_epoch = 0, seen = 'unverified' WHERE task = ? AND fence = ?",
                          (task_id, f["fence"]))

    def _generation_opened(self, task_id: int, f: dict, seq: int) -> None:
        self.conn.execute("INSERT INTO generations (task, generation, opened_seq, cause) "
                          "VALUES (?, ?, ?, ?)", (task_id, f["generation"], seq, f.get("cause")))

    def _pinned(self, task_id: int, f: dict, seq: int) -> None:
        self.conn.execute("INSERT OR IGNORE INTO pins VALUES (?, ?, ?, ?)",
                          (f["ref"], task_id, f["content"], seq))

    def _protected_path(self, task_id: int, f: dict, seq: int) -> None:
        """The path and pattern that held a candidate: the ledger keeps them; no table does."""

    def _legacy_record(self, task_id: int, f: dict, seq: int) -> None:
        self.conn.execute(
            "INSERT INTO legacy_records (task, source, line, original, legacy_status, seq) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (f["task"], f["source"], f["line"], f["original"].encode("utf-8", "surrogateescape"),
             f["status"], seq))


def policy_from_row(row) -> TaskPolicy:
    name, review, assign, disposition = row
    return TaskPolicy(name, (), bool(review), bool(assign), disposition)
