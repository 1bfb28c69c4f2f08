"""Rebuilding every projection from the ledger, and auditing the live state.

``rebuild`` replays the ledger into a fresh database through the very
``apply_event`` the live path uses, then compares every projected table and
the observable projection with the live ones: equal, or the differences. A
broken hash link stops the replay and is reported.

``audit`` checks the stored state against the kernel's invariants (each by
its id) and the ledger against the journal; findings are data.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from ..storage import authority
from ..contract.errors import one_line
from ..decisions import reopen
from ..storage.apply import apply_event
from ..storage.ledger import LedgerVerdict
from ..decisions.planner import plan
from ..decisions.projection import finished, satisfies_dependents, status
from ..storage.schema import FACT_COLUMNS, PROJECTED_TABLES, facts
from ..storage.store import Pragmas, Store, held
from ..contract.vocabulary import COMMITTED_PHASES, RECEIPTS


@dataclass
class RebuildReport:
    ledger: LedgerVerdict
    events: int = 0
    differences: list[str] = field(default_factory=list)
    applied: bool = False

    @property
    def ok(self) -> bool:
        return self.ledger.ok and not self.differences

    def to_json(self) -> dict:
        return {"ok": self.ok, "ledger": self.ledger.to_json(), "events": self.events,
                "differences": self.differences, "applied": self.applied}


@dataclass(frozen=True)
class Replayed:
    """A database image holding the ledger replayed through event ``seq``, whose hash is
    ``head`` (``replayed``): a later rebuild of a ledger that verifies and still holds
    ``head`` at ``seq`` starts from it and replays only the events after ``seq``. The hash
    chain covers every column of every event, so those events are the ones replayed here."""

    image: bytes
    seq: int
    head: str


class Scratch:
    """A scratch kernel on the image of an earlier replay (``start``), opened in memory by
    the first rebuild given it and kept for the next ones (``close`` when done): each such
    rebuild replays the events after ``start.seq`` in a transaction it then rolls back, so
    every one starts from the image itself without opening a database again. For small
    databases (a crash cut's): the compared rows are read into Python."""

    def __init__(self, start: Replayed | None):
        self.start = start
        self.kernel = None
        self.conn = None            # the scratch's one connection
        self.on: Replayed | None = None    # the image its database holds

    def move(self, start: Replayed) -> "Scratch":
        """The next rebuilds start from ``start``: the kept connection takes its image when
        next opened (a new scratch kernel on it, its caches empty), not a new connection."""
        self.start = start
        return self

    def open(self, kernel):
        """The scratch kernel, of ``kernel``'s class and observing its environment."""
        if self.kernel is None or self.on is not self.start:
            if self.conn is None:
                self.conn = held(":memory:")
            self.conn.deserialize(self.start.image)
            store = Store(":memory:", pragmas=Pragmas(synchronous="OFF"), conn=self.conn)
            self.kernel = type(kernel)(":memory:", kernel.env, store=store)
            self.on = self.start
        self.kernel.env = kernel.env
        self.kernel.cache.forget()
        return self.kernel

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.kernel = self.conn = self.on = None


def replay(kernel, path: str, since: int = 0, image: bytes | None = None,
           conn=None) -> tuple:
    """A kernel of the same class on a scratch database at ``path`` (``Store.scratch``:
    fresh, or ``image``, the ledger's events through ``since`` replayed) with the ledger's
    events after ``since`` replayed into it, and the number of events replayed. ``conn``: a
    held connection (``store.held``) the database is made on when it is in memory and starts
    from an image, instead of a new connection; one that holds that very image (``Held.image``,
    set by ``replayed``) is not given its pages again (SQLite would parse the schema again)."""
    if conn is not None and path == ":memory:" and image is not None:
        if getattr(conn, "image", None) is not image:   # it holds that image already: kept
            conn.deserialize(image)
        conn.image = None                  # written to from here on
        store = Store(path, pragmas=Pragmas(synchronous="OFF"), conn=conn)
        fresh = type(kernel)(path, kernel.env, store=store)
    else:
        fresh = type(kernel)(path, kernel.env, pragmas=Pragmas(synchronous="OFF"), image=image)
    try:
        with fresh.store.atomic():
            n = _replay_events(kernel, fresh, since)
    except BaseException:
        fresh.close()
        raise
    return fresh, n


def _replay_events(kernel, fresh, since: int) -> int:
    """The ledger's events after ``since`` appended to ``fresh`` and applied (``Corrupt``: an
    event that does not apply); how many."""
    n = 0
    for ev in kernel.ledger.events(since):
        seq = fresh.ledger.append(ev.event, ev.body, task=ev.task, key=ev.key)
        try:
            apply_event(fresh, seq, ev.event, json.loads(ev.body), key=ev.key, task=ev.task)
        except Exception as e:
            raise Corrupt(f"the ledger does not replay at seq {ev.seq}: {one_line(e)}") from None
        n += 1
        if n % 20_000 == 0:
            fresh.cache.records.clear()   # bounded memory; records reload from tables
    return n


def rebuild(kernel, *, apply: bool = False, start: Replayed | None = None,
            scratch: Scratch | None = None, live: dict | None = None) -> RebuildReport:
    """Replay the ledger and compare (``apply``: then replace the live tables with it). A
    ledger that does not replay (a corrupt event) is a difference of one line, never an
    exception: nothing is replaced then. ``start``: an earlier replay of this ledger's first
    events (``replayed``), used when the verified ledger still holds its head; ``scratch``:
    one kept open on such a replay, used then (not with ``apply``); ``live``: the live
    kernel's projection (``project()``) as it stands, already computed by the caller, compared
    instead of projecting the live kernel again."""
    kernel.cache.sync()
    verdict = kernel.ledger.verify()
    report = RebuildReport(verdict)
    if not verdict.ok:
        report.differences.append(f"ledger broken at seq {verdict.broken_at}: {verdict.problem}")
        return report
    if scratch is not None and not apply and _holds(kernel, scratch.start):
        return _rebuild_on(kernel, scratch, report, live)
    with kernel.store.scratch() as path:
        image, since = _start(kernel, start)
        try:
            fresh, report.events = replay(kernel, path, since, image)
            report.events += since
        except Corrupt as e:
            report.differences.append(str(e))
            return report
        try:
            _compare(kernel, fresh, report, live)
            if apply and report.differences:
                _replace_tables(kernel, fresh)
                report.applied = True
        finally:
            fresh.close()
    return report


def _rebuild_on(kernel, scratch: Scratch, report: RebuildReport,
                live: dict | None = None) -> RebuildReport:
    """``rebuild`` on the scratch kernel, in a transaction rolled back afterwards."""
    fresh = scratch.open(kernel)
    try:
        with fresh.store.atomic() as unit:
            unit.abandon()                # the next rebuild starts from the image again
            report.events = scratch.start.seq + _replay_events(kernel, fresh, scratch.start.seq)
            _compare(kernel, fresh, report, live)
    except Corrupt as e:
        report.differences.append(str(e))
    finally:
        fresh._forget()
    return report


def _compare(kernel, fresh, report: RebuildReport, live: dict | None = None) -> None:
    report.differences += compare_tables(kernel, fresh.store)
    if not report.differences:
        report.differences += compare_projections(kernel, fresh, live=live)


def _holds(kernel, start: Replayed) -> bool:
    """Whether the (verified) ledger holds ``start.head`` at ``start.seq``."""
    row = kernel.conn.execute("SELECT hash FROM ledger WHERE seq = ?", (start.seq,)).fetchone()
    return row is not None and row[0] == start.head


def _start(kernel, start: Replayed | None) -> tuple[bytes | None, int]:
    """The image a replay starts from and the last event it holds: ``start`` when the
    (verified) ledger holds ``start.head`` at ``start.seq``, else the empty database (0); no
    image when the backend takes none."""
    if not kernel.store.takes_images:
        return None, 0
    if start is not None and _holds(kernel, start):
        return start.image, start.seq
    return kernel.store.empty(), 0


def replayed(kernel, start: Replayed | None = None, conn=None) -> Replayed | None:
    """The verified ledger replayed into a fresh database, kept as an image for later
    rebuilds (``start``: an earlier image to go on from; ``conn``: a held connection the
    database is made on, ``replay``); None when the ledger does not verify or replay, or the
    backend takes no images."""
    kernel.cache.sync()
    verdict = kernel.ledger.verify()
    if not kernel.store.takes_images or not verdict.ok:
        return None
    with kernel.store.scratch() as path:
        try:
            image, since = _start(kernel, start)
            fresh, _ = replay(kernel, path, since, image, conn)
        except Corrupt:
            return None
        try:
            if fresh.ledger.head()[0] != verdict.events:     # appended to since it verified
                return None
            image = fresh.conn.serialize()
            if conn is not None and fresh.conn is conn:
                conn.image = image             # what it holds: the next replay goes on from it
            return Replayed(image, verdict.events, verdict.head)
        finally:
            fresh.close()


class Corrupt(Exception):
    """A stored fact the kernel cannot read back (one line naming where)."""


def compare_tables(kernel, other) -> list[str]:
    """Every projected table, row for row, against the store ``other``. A scratch database
    held in memory (``Store.scratch``: this database is small) is compared in Python, each
    table's rows as a multiset; a larger one in the database (no row is loaded into Python):
    one query asks which tables differ; only those are described."""
    if getattr(other, "path", None) == ":memory:":
        return [d for d in (_rows_differ(t, kernel.conn, other.conn) for t in PROJECTED_TABLES)
                if d is not None]
    out = []
    c = kernel.conn
    with kernel.store.attached(other) as (main, rebuilt):
        differ = set(_differing(c, main, rebuilt))
        for table in [t for t in PROJECTED_TABLES if t in differ]:
            cols = facts(table)
            live_only = c.execute(f"SELECT {cols} FROM {main}.{table} EXCEPT "
                                  f"SELECT {cols} FROM {rebuilt}.{table} LIMIT 3").fetchall()
            rebuilt_only = c.execute(f"SELECT {cols} FROM {rebuilt}.{table} EXCEPT "
                                     f"SELECT {cols} FROM {main}.{table} LIMIT 3").fetchall()
            counts = [c.execute(f"SELECT count(*) FROM {db}.{table}").fetchone()[0]
                      for db in (main, rebuilt)]
            if live_only or rebuilt_only or counts[0] != counts[1]:
                out.append(f"table {table}: {counts[0]} live rows, {counts[1]} rebuilt; "
                           f"live only {live_only}, rebuilt only {rebuilt_only}")
    return out


def _rows_differ(table: str, live, rebuilt) -> str | None:
    """How ``table`` differs between the two connections (None: the same rows, each as many
    times), its rows read into Python."""
    mine = live.execute(f"SELECT {facts(table)} FROM {table}").fetchall()
    theirs = rebuilt.execute(f"SELECT {facts(table)} FROM {table}").fetchall()
    if mine == theirs or Counter(mine) == Counter(theirs):
        return None
    live_only, rebuilt_only = (sorted((x - y).elements(), key=repr)[:3] for x, y in
                               ((Counter(mine), Counter(theirs)), (Counter(theirs), Counter(mine))))
    return (f"table {table}: {len(mine)} live rows, {len(theirs)} rebuilt; "
            f"live only {live_only}, rebuilt only {rebuilt_only}")


def _differing(c, main: str, rebuilt: str) -> list[str]:
    """The projected tables whose rows differ between the two databases (either side holds
    a row the other does not, or their row counts differ), in one query."""
    parts = [f"SELECT '{t}' WHERE (SELECT count(*) FROM {main}.{t}) <> "
             f"(SELECT count(*) FROM {rebuilt}.{t}) "
             f"OR EXISTS (SELECT {c} FROM {main}.{t} EXCEPT SELECT {c} FROM {rebuilt}.{t}) "
             f"OR EXISTS (SELECT {c} FROM {rebuilt}.{t} EXCEPT SELECT {c} FROM {main}.{t})"
             for t, c in ((t, facts(t)) for t in PROJECTED_TABLES)]
    return [row[0] for row in c.execute(" UNION ALL ".join(parts)).fetchall()]


def compare_projections(kernel, fresh, chunk: int = 2000, live: dict | None = None) -> list[str]:
    """The observable projection, task by task (in chunks), then the globals (``live``: the
    live kernel's whole projection as it stands, used when it shows every task)."""
    names = kernel.names()
    given = live if live is not None and set(live.get("tasks", ())) == set(names) else None
    for i in range(0, len(names), chunk):
        part = names[i:i + chunk]
        shown = given["tasks"] if given is not None else kernel.project_tasks(part)
        rebuilt = fresh.project_tasks(part)
        for name in part:
            if shown[name] != rebuilt[name]:
                return [f"the observable projection of task {name!r} differs"]
    live = dict(given, tasks={}) if given is not None else kernel.project(tasks=False)
    rebuilt = fresh.project(tasks=False)
    # "now" is the clock, read at two instants, not a fact the ledger determines
    live.pop("now", None)
    rebuilt.pop("now", None)
    diff = sorted(k for k in set(live) | set(rebuilt) if live.get(k) != rebuilt.get(k))
    return [] if not diff else [f"the observable projection's globals differ: {', '.join(diff)}"]


def _replace_tables(kernel, fresh) -> None:
    c = kernel.conn
    with kernel.store.attached(fresh.store) as (main, rebuilt):
        with kernel.store.atomic():
            for table in PROJECTED_TABLES:
                if table in FACT_COLUMNS:           # its control columns kept (see below)
                    _replace_facts(c, table, main, rebuilt)
                    continue
                c.execute(f"DELETE FROM {main}.{table}")
                c.execute(f"INSERT INTO {main}.{table} SELECT * FROM {rebuilt}.{table}")
    kernel.cache.invalidate()


def _replace_facts(c, table: str, main: str, rebuilt: str) -> None:
    """``table``'s facts replaced by the rebuilt ones, row by row (its key is its first fact
    column); each kept row's control columns (a task's stamp) as they were, a new row's
    their defaults."""
    key, *rest = FACT_COLUMNS[table]
    cols = facts(table)
    c.execute(f"DELETE FROM {main}.{table} "
              f"WHERE {key} NOT IN (SELECT {key} FROM {rebuilt}.{table})")
    c.execute(f"UPDATE {main}.{table} SET ({', '.join(rest)}) = (SELECT {', '.join(rest)} "
              f"FROM {rebuilt}.{table} r WHERE r.{key} = {table}.{key})")
    c.execute(f"INSERT INTO {main}.{table} ({cols}) SELECT {cols} FROM {rebuilt}.{table} "
              f"WHERE {key} NOT IN (SELECT {key} FROM {main}.{table})")


# --- audit --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    check: str
    task: str | None
    detail: str

    def to_json(self) -> dict:
        return {"check": self.check, "task": self.task, "detail": self.detail}


@dataclass
class AuditReport:
    findings: list[Finding]
    tasks: int
    events: int

    @property
    def ok(self) -> bool:
        return not self.findings

    def to_json(self) -> dict:
        return {"ok": self.ok, "tasks": self.tasks, "events": self.events,
                "findings": [f.to_json() for f in self.findings]}


def audit(kernel, anchors=()) -> AuditReport:
    """Every finding, one line each; a fact that cannot be read back is a finding
    (``corrupt``), never an exception."""
    kernel.cache.sync()
    out: list[Finding] = []
    verdict = kernel.ledger.verify(1, anchors)
    if not verdict.ok:
        out.append(Finding("ledger-chain", None, f"broken at seq {verdict.broken_at}: "
                                                 f"{verdict.problem}"))
    else:
        out += [Finding("authority-under-chain", None, d)
                for d in _guarded_lines(lambda: kernel.ledger.checked(authority.differences))]
    out += _guarded(None, lambda: _journal_matches_ledger(kernel))
    views = {name: (st, bool(sat), pending) for name, st, sat, pending in kernel.conn.execute(
        "SELECT t.name, v.status, v.satisfied, v.pending FROM task_view v "
        "JOIN tasks t ON t.id = v.task")}
    pinned = {(task, content) for task, content in kernel.conn.execute(
        "SELECT t.name, p.content FROM pins p JOIN tasks t ON t.id = p.task")}
    for name in kernel.ids():
        if name not in views:
            out.append(Finding("status-projection", name, "no row in task_view"))
            continue
        out += _guarded(name, lambda: _task_findings(kernel, name, views[name], pinned))
    out += _guarded(None, lambda: _target_history(kernel))
    return AuditReport(out, len(kernel.ids()), verdict.events)


def _guarded_lines(check) -> list[str]:
    try:
        return check()
    except Exception as e:
        return [one_line(e)]


def _guarded(task: str | None, check) -> list[Finding]:
    """A check's findings; a stored fact it cannot read is the finding ``corrupt``."""
    try:
        return check()
    except Exception as e:
        return [Finding("corrupt", task, one_line(e))]


def _target_history(kernel) -> list[Finding]:
    """Every landed candidate, and the base it landed on, is still in the target's history
    (a repository without history, the in-memory double, has no ``descends``)."""
    repo = kernel.env.repository
    descends = getattr(repo, "descends", None)
    target = repo.target()
    if descends is None or target is None:
        return []
    out = []
    # guards: target-history-grows
    for effect, name, candidate, base in kernel.conn.execute(
            "SELECT e.id, t.name, e.candidate, e.base FROM effects e JOIN tasks t ON t.id = e.task "
            "WHERE e.disposition = 'land' AND e.state = 'committed' ORDER BY e.settled_seq"):
        lost = [c for c in (candidate, base) if c and not descends(target, c)]
        if lost:
            out.append(Finding("target-history-grows", name,
                               f"land {effect}: {', '.join(c[:12] for c in lost)} no longer in "
                               f"the history of the target {target[:12]}"))
    return out


def _journal_matches_ledger(kernel) -> list[Finding]:
    journal = dict(kernel.conn.execute("SELECT key, seq FROM journal"))
    events = dict(kernel.conn.execute("SELECT key, seq FROM ledger WHERE event = 'request'"))
    if journal == events:
        return []
    only_j = sorted(set(journal) - set(events))[:3]
    only_l = sorted(set(events) - set(journal))[:3]
    return [Finding("journal-matches-ledger", None,
                    f"{len(journal)} journal rows, {len(events)} request events; journal only "
                    f"{only_j}, ledger only {only_l}")]


def _task_findings(kernel, name: str, view, pinned) -> list[Finding]:
    out = []
    t = kernel.record(name)
    p = kernel.policy(name)
    deps = [kernel.record(d) for d in p.deps]
    st, sat, pending = view
    if (st, sat) != (status(t), satisfies_dependents(t)):
        out.append(Finding("status-projection", name, f"stored {st}/{sat}, computed "
                                                      f"{status(t)}/{satisfies_dependents(t)}"))
    if pending != sum(1 for d in deps if not d.graph_saved):
        out.append(Finding("status-projection", name, f"stored pending {pending}"))
    agree = t.fence != 0 and t.exit == "none" and all(t.receipt(k) == t.binding for k in RECEIPTS) \
        and t.phase == "graph-saved"
    if (status(t) == "done") != agree:
        out.append(Finding("done-iff-graphsave", name, f"status {status(t)}, receipts agree {agree}"))
    if t.attempt_state == "succeeded" and not all(d.graph_saved for d in deps):
        out.append(Finding("dependency-needs-done", name, "succeeded with a dependency not Done"))
    out += _reopen_findings(kernel, name, t, deps)
    if t.legacy_done and satisfies_dependents(t):
        out.append(Finding("legacy-never-satisfies", name, "a legacy claim satisfies dependents"))
    stray = [k for k in RECEIPTS if t.receipt(k).fence not in (0, t.fence)]
    if stray:
        out.append(Finding("receipts-fenced", name, f"receipts of another fence: {stray}"))
    promotions = kernel.conn.execute(
        "SELECT count(*) FROM effects e JOIN attempts a ON a.task = e.task AND a.fence = e.fence "
        "WHERE e.task = ? AND e.state = 'committed' AND a.generation = ?",
        (kernel.ids()[name], t.generation)).fetchone()[0]
    if promotions > 1:
        out.append(Finding("promotion-at-most-once", name, f"{promotions} effects"))
    if not finished(t):
        pl = plan(kernel, name, kernel.observe(name))
        if pl.way == "hold" and (pl.reason == "no way forward" or pl.reason.startswith("several")):
            out.append(Finding("exactly-one-way-forward", name, pl.reason))
        if t.running and t.owner_seen == "dead" and pl.way == "live-owner":
            out.append(Finding("no-dead-owner-in-progress-without-action", name, pl.reason))
    if t.retained is not None and (name, t.retained) not in pinned:
        out.append(Finding("retained-work-never-erased", name,
                           f"retained {t.retained} has no immutable ref"))
    return out


def _reopen_findings(kernel, name: str, t, deps) -> list[Finding]:
    """A task whose effect is prepared, committed or Done has every dependency Done on the
    generation its attempt opened on."""
    committed = t.phase in COMMITTED_PHASES or t.effect_done
    if committed and (not all(d.graph_saved for d in deps) or reopen.deps_reopened(kernel, name)):
        return [Finding("reopen-fences-dependents", name,
                        f"{t.phase} with a dependency reopened or not Done")]
    return []
