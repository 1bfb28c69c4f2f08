"""Tamper checks: a kernel database edited behind the kernel's back must be reported.

After a trace runs on the implementation (a closed graph: ``probes.closed_copy``), its
SQLite database files are copied as they are on disk (the write-ahead log included) and an
anchor ``(seq, hash)`` of the ledger's head is taken, as ``wgk kernel anchor`` keeps one
outside the database. Then, on a fresh copy each time, one edit is made with SQLite
directly: each column of each table that grants authority or answers for the past (the
ledger, the journal's digests and responses, the principals and their roles, the attempts'
token hashes, the receipts) is changed in one row; rows are deleted; the write-ahead log is
cut after half of its frames (the later commits lost). The kernel reopened on the edited copy must report it: ``verify-ledger`` or the
audit (against the anchor) is not ok, and says why in one line per finding. A closed kernel
must stay closed: a request without a credential is still refused ``not-authenticated``
(or the kernel refuses to serve at all).

This check reads and writes database files: it cannot run over the external protocol (an
external kernel's storage is its own), and it is skipped on PostgreSQL.

Results are data (``TamperResult``); nothing here prints.
"""
from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable

from wgk.conformance.oracle.impl_system import ImplSystem
from wgk.conformance.oracle.systems import StepError
from wgk.conformance.traces.format import Trace

#: (table, column, the rows edited: a WHERE clause) — the authority and history columns.
#: Every column of the ledger; the journal's digest and response; each principal column;
#: the attempts' token hashes; each receipt column.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("ledger", "prev", "seq = (SELECT max(seq) FROM ledger)"),
    ("ledger", "hash", "seq = (SELECT max(seq) FROM ledger)"),
    ("ledger", "event", "seq = (SELECT max(seq) FROM ledger)"),
    ("ledger", "task", "seq = (SELECT max(seq) FROM ledger WHERE task IS NOT NULL)"),
    ("ledger", "task", "seq = (SELECT min(seq) FROM ledger)"),
    ("ledger", "key", "seq = (SELECT max(seq) FROM ledger WHERE key IS NOT NULL)"),
    ("ledger", "key", "seq = (SELECT min(seq) FROM ledger)"),
    ("ledger", "body", "seq = (SELECT max(seq) FROM ledger)"),
    ("ledger", "seq", "seq = (SELECT max(seq) FROM ledger)"),
    ("journal", "digest", "key = (SELECT max(key) FROM journal)"),
    ("journal", "response", "key = (SELECT max(key) FROM journal)"),
    ("journal", "key", "key = (SELECT max(key) FROM journal)"),
    ("principals", "secret_sha256", "name = (SELECT min(name) FROM principals)"),
    ("principals", "roles", "name = (SELECT min(name) FROM principals)"),
    ("principals", "revoked", "name = (SELECT min(name) FROM principals)"),
    ("principals", "name", "name = (SELECT min(name) FROM principals)"),
    ("attempts", "token_hash", "token_hash IS NOT NULL"),
    ("receipts", "fence", "1 = 1"),
    ("receipts", "candidate", "candidate IS NOT NULL"),
    ("receipts", "base", "base IS NOT NULL"),
)
#: Tables whose rows are deleted (the last row, then every row).
DELETED = ("ledger", "journal", "principals", "receipts")


@dataclass
class Tamper:
    """One edit and what the reopened kernel said."""

    name: str
    reported: bool = False
    closed: bool = True
    lines: list[str] = field(default_factory=list)
    problem: str = ""                # why the edit could not be made (no such row)

    @property
    def ok(self) -> bool:
        return bool(self.problem) or (self.reported and self.closed
                                      and all("\n" not in line for line in self.lines))

    def to_json(self) -> dict:
        out = {"tamper": self.name, "reported": self.reported, "closed": self.closed,
               "lines": self.lines[:3]}
        if self.problem:
            out["skipped"] = self.problem
        return out


@dataclass
class TamperResult:
    trace: str
    tampers: list[Tamper] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def made(self) -> list[Tamper]:
        return [t for t in self.tampers if not t.problem]

    @property
    def failures(self) -> list[Tamper]:
        return [t for t in self.tampers if not t.ok]


def _edit(column: str) -> str:
    """An SQL expression that changes a value of ``column``, whatever its type."""
    if column in ("seq", "fence", "revoked"):
        return f"{column} + 1" if column != "revoked" else "1 - revoked"
    return f"CASE WHEN {column} IS NULL THEN 'x' ELSE {column} || 'x' END"


def edits() -> list[tuple[str, Callable[[sqlite3.Connection], int]]]:
    """Every tamper as (name, a function making it on an open connection: rows changed)."""
    out: list[tuple[str, Callable[[sqlite3.Connection], int]]] = []
    for table, column, where in COLUMNS:
        sql = f"UPDATE {table} SET {column} = {_edit(column)} WHERE {where}"
        out.append((f"edit {table}.{column} where {where}",
                    lambda c, sql=sql: c.execute(sql).rowcount))
    for table in DELETED:
        last = f"DELETE FROM {table} WHERE rowid = (SELECT max(rowid) FROM {table})" \
            if table in ("ledger", "principals") else \
            f"DELETE FROM {table} WHERE {_first_key(table)}"
        out.append((f"delete the last row of {table}", lambda c, s=last: c.execute(s).rowcount))
        out.append((f"delete every row of {table}",
                    lambda c, t=table: c.execute(f"DELETE FROM {t}").rowcount))
    return out


def _first_key(table: str) -> str:
    return {"journal": "key = (SELECT max(key) FROM journal)",
            "receipts": "task = (SELECT min(task) FROM receipts)"}[table]


def tamper_trace(trace: Trace) -> TamperResult:
    """Run ``trace`` on the implementation, then every tamper on a copy of its database."""
    t0 = time.perf_counter()
    result = TamperResult(trace.id)
    with tempfile.TemporaryDirectory(prefix="wgk-tamper-") as tmp:
        os.mkdir(os.path.join(tmp, "run"))
        impl = ImplSystem(trace, workdir=os.path.join(tmp, "run"))
        try:
            for step in trace.steps:
                impl.apply(step)
            head = impl.kernel.verify_ledger()
            if not head.ok:
                result.problems.append(f"the untouched database does not verify: {head.problem}")
                return result
            anchor = [(head.events, head.head)]
            pristine = os.path.join(tmp, "pristine")
            os.mkdir(pristine)
            for suffix in ("", "-wal"):
                if os.path.exists(impl.path + suffix):
                    shutil.copyfile(impl.path + suffix, os.path.join(pristine, "k.db" + suffix))
            world = impl.world
            shutil.copytree(pristine, os.path.join(tmp, "untouched"))   # closing checkpoints
            baseline = _judge(os.path.join(tmp, "untouched"), world, anchor, "untouched")
            if baseline.reported or not baseline.closed:
                result.problems.append("the untouched copy is reported or open: "
                                       + "; ".join(baseline.lines[:2]))
                return result
            for n, (name, make) in enumerate(edits() + [("drop the later half of the write-ahead log", None)]):
                result.tampers.append(_tampered(pristine, os.path.join(tmp, f"t{n}"), name, make,
                                                world, anchor))
        except StepError as e:
            result.problems.append(str(e))
        finally:
            impl.close()
    result.seconds = time.perf_counter() - t0
    return result


def _tampered(pristine: str, folder: str, name: str, make, world, anchor) -> Tamper:
    shutil.copytree(pristine, folder)
    db = os.path.join(folder, "k.db")
    if make is None:                                   # the write-ahead log lost
        wal = db + "-wal"
        if not os.path.exists(wal) or os.path.getsize(wal) == 0:
            return Tamper(name, problem="no write-ahead log on disk to truncate")
        os.truncate(wal, _half_of_the_frames(wal))
    else:
        conn = sqlite3.connect(db, isolation_level=None)
        try:
            changed = make(conn)
        except sqlite3.DatabaseError as e:
            changed, why = 0, str(e)
        else:
            why = "no row to change"
        finally:
            conn.close()
        if not changed:
            return Tamper(name, problem=why)
    return _judge(folder, world, anchor, name)


def _half_of_the_frames(wal: str) -> int:
    """The size of the write-ahead log cut after half of its frames (its 32-byte header, then
    frames of a 24-byte header and one page): the later commits are lost, the earlier kept."""
    with open(wal, "rb") as f:
        page = int.from_bytes(f.read(32)[8:12], "big") or 4096
    frames = (os.path.getsize(wal) - 32) // (24 + page)
    return 32 + (frames // 2) * (24 + page)


def _judge(folder: str, world, anchor, name: str) -> Tamper:
    """Reopen the kernel on ``folder``'s database: verify-ledger and the audit (with the
    anchor), then a request without a credential."""
    from wgk.impl import Kernel
    from wgk.impl.contract.errors import StoreError
    t = Tamper(name)
    try:
        k = Kernel(os.path.join(folder, "k.db"), world.environment())
    except Exception as e:                         # refusing to open is reporting it
        t.reported, t.lines = True, [_one_line(e)]
        return t
    try:
        lines: list[str] = []
        try:
            v = k.verify_ledger(anchors=anchor)
            if not v.ok:
                lines += v.lines()
        except Exception as e:
            lines.append(_one_line(e))
        try:
            a = k.audit(anchor)
            lines += [f"{f.check}: {f.task or '-'}: {f.detail}" for f in a.findings]
        except Exception as e:
            lines.append(_one_line(e))
        t.reported, t.lines = bool(lines), lines
        try:
            answer = k.handle({"kind": "heartbeat", "actor": "operator", "task": "a",
                               "key": "tamper-open?"}, None)
            t.closed = answer.get("code") == "not-authenticated"
        except (StoreError, Exception):
            t.closed = True                          # it refuses to serve at all
    finally:
        try:
            k.close()
        except Exception:
            pass
    return t


def _one_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


__all__ = ["COLUMNS", "DELETED", "Tamper", "TamperResult", "edits", "tamper_trace"]
