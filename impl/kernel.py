"""The kernel: one database (SQLite, or PostgreSQL for a DSN), one task graph, an
injected environment.

``handle(request)`` is the only way state changes after the graph exists:

1. the journal: a used key with the same digest is a ``duplicate`` (the stored
   response, no write at all); with another digest ``idempotency-conflict``
   (no write either);
2. ``BEGIN IMMEDIATE`` (on PostgreSQL: ``BEGIN`` and row locks on the task and its
   dependencies, see ``pg``); the journal again (another process may have won);
3. authority, the task, then ``rules.decide`` (K, CAS, the rule's guards);
4. the decision's external effects, each a durable boundary through the hook
   (a failed CAS turns the decision into ``cas-moved``);
5. one ledger event, then ``apply_event`` writes the journal, the record's
   changed rows, the facts and the status projection from that event;
6. ``COMMIT`` (a boundary too).

Graph edits, seeds and legacy records are ledger events as well, so every
table can be rebuilt from the ledger by the same ``apply_event``.
"""
from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Iterable, Sequence

from . import audit as audit_
from . import converge as converge_
from . import legacy, observed
from .apply import apply_event
from .effects import CasMoved, perform
from .env import Environment
from .errors import GraphError, SeedError
from .graph import dependency_path, task_added_events
from .hooks import Hook, no_hook
from .ledger import LedgerVerdict
from .principals import DENIED, Principal, Principals, scoped_key
from .projection import Plan, StatusProjection, observable_task, plan, status
from .records import EMPTY, TaskPolicy, TaskRecord, changed, record_to_json
from .decision import Ctx, Observe, Outcome
from .rules import decide
from .seeding import Initial, check_initial, seeded
from .backends import open_store
from .store import Pragmas, dumps
from .tables import FactTables, TaskTables
from .wire import BadRequest, Request, decision, parse
from .vocabulary import DUPLICATE, REJECTED


class Kernel:
    """The durable attempt-control kernel of one task graph."""

    def __init__(self, path: str, env: Environment, *, hook: Hook = no_hook,
                 pragmas: Pragmas = Pragmas()):
        self.env = env
        self.store = open_store(path, hook=hook, pragmas=pragmas)
        self.conn = self.store.conn
        self.tables = TaskTables(self.conn)
        self.facts = FactTables(self.conn)
        self.ledger = self.store.ledger()
        self.view = StatusProjection(self.conn)
        self.principals = Principals(self.conn)
        self._who: Principal | None = None
        self._version: int | None = None
        self._forget()

    @property
    def hook(self) -> Hook:
        """The one hook every durable boundary passes through (commits and effects)."""
        return self.store.hook

    @hook.setter
    def hook(self, hook: Hook) -> None:
        self.store.hook = hook

    def close(self) -> None:
        self.store.close()

    # --- caches (valid while no other connection commits) ----------------------------------

    def _forget(self) -> None:
        self._graph_id: str | None = None
        self._ids: dict[str, int] | None = None
        self._policies: dict[str, TaskPolicy] = {}
        self._records: dict[str, TaskRecord] = {}
        self.ledger.forget()
        self.view.forget()

    def _sync(self) -> bool:
        """Drop the caches if another connection committed since we last looked."""
        v = self.store.data_version()
        if v != self._version:
            self._version = v
            self._forget()
            return True
        return False

    @property
    def graph_id(self) -> str | None:
        if self._graph_id is None:
            self._graph_id = self.store.meta("graph-id")
        return self._graph_id

    def ids(self) -> dict[str, int]:
        if self._ids is None:
            self._ids = dict(self.conn.execute("SELECT name, id FROM tasks ORDER BY id"))
        return self._ids

    def names(self) -> list[str]:
        self._sync()
        return list(self.ids())

    def policy(self, name: str) -> TaskPolicy:
        p = self._policies.get(name)
        if p is None:
            p = self._policies[name] = self.tables.load_policy(self.ids()[name], name)
        return p

    def record(self, name: str) -> TaskRecord:
        r = self._records.get(name)
        if r is None:
            r = self.tables.load(self.ids()[name])
            self._records[name] = r
        return r

    def observe(self, name: str) -> Observe:
        return Observe(self.env, name, self._effect_state)

    def _effect_state(self, effect: str) -> str | None:
        row = self.conn.execute("SELECT state FROM effects WHERE id = ?", (effect,)).fetchone()
        return None if row is None else row[0]

    # --- the graph ---------------------------------------------------------------------------

    def create_graph(self, graph_id: str, tasks: Iterable[TaskPolicy] = (),
                     config: dict[str, str] | None = None) -> None:
        """Create the one graph of this database (its id is part of every K)."""
        if not graph_id:
            raise GraphError("a graph needs a non-empty id")
        with self.store.atomic():
            self._sync()
            if self.graph_id is not None:
                raise GraphError(f"this database already holds graph {self.graph_id!r}")
            self._append("graph-created", {"graph": graph_id, "config": config or {}})
            self._add_tasks(list(tasks))

    def add_tasks(self, tasks: Iterable[TaskPolicy]) -> None:
        """Add new tasks (with dependencies on existing or new tasks) in one transaction."""
        with self.store.atomic():
            self._sync()
            if self.graph_id is None:
                raise GraphError("no graph: create the graph first")
            self._add_tasks(list(tasks))

    def _add_tasks(self, specs: list[TaskPolicy]) -> None:
        for body in task_added_events(self.ids(), specs):
            self._append("task-added", body)

    def import_records(self, tasks: list[TaskPolicy], records: list[dict]) -> None:
        """New tasks and the legacy records preserving their original bytes, in one
        transaction (see ``legacy.import_legacy``)."""
        with self.store.atomic():
            self._sync()
            if self.graph_id is None:
                raise GraphError("no graph: create the graph first")
            self._add_tasks(tasks)
            for body in records:
                self._append("legacy-record", body)

    def import_legacy(self, path: str, credential: str | None = None):
        """Import a WG-style graph.jsonl or JSON list (see ``legacy.import_legacy``); a closed
        kernel's claims are sent with a legacy-import ``credential``."""
        return legacy.import_legacy(self, path, credential=credential)

    def add_dependency(self, task: str, dep: str) -> None:
        """A new edge ``dep -> task``; refused when it closes a cycle (named) or the task
        already had an attempt (its admission was decided under the old dependencies)."""
        with self.store.atomic():
            self._sync()
            ids = self.ids()
            for n in (task, dep):
                if n not in ids:
                    raise GraphError(f"unknown task {n!r}")
            self.store.lock_tasks([ids[task]])     # against a concurrent dispatch of the task
            self._sync()
            if dep in self.policy(task).deps:
                raise GraphError(f"task {task!r} already depends on {dep!r}")
            if self.record(task).fence != 0 or self.record(task).legacy_done:
                raise GraphError(f"task {task!r} already had an attempt: its dependencies are fixed")
            path = dependency_path(self.conn, ids, task, dep)
            if path is not None:
                raise GraphError("dependency cycle: " + " -> ".join(path + [task]))
            self._append("dependency-added", {"task": task, "dep": dep})

    # --- seeding initial facts --------------------------------------------------------------------

    def seed(self, task: str, initial: Initial) -> None:
        """Seed the current attempt with explicit K (what a migration of running attempts
        does). The task must not have had an attempt yet."""
        check_initial(task, initial)
        with self.store.atomic():
            self._sync()
            if task not in self.ids():
                raise SeedError(f"unknown task {task!r}")
            t = self.record(task)
            new, effects = seeded(task, t, initial)
            facts = perform(self.env, self.hook, effects, None, new)
            if initial.generation:
                facts.append(("generation-opened", {"generation": initial.generation}))
            self._append("seed", {"task": task, "changes": record_to_json(changed(t, new)),
                                  "facts": facts})

    # --- requests ------------------------------------------------------------------------------

    def handle(self, wire: Any, credential: str | None = None) -> dict:
        """Decide one wire request sent with ``credential``; returns the wire decision
        (``BadRequest`` if malformed). A closed kernel authenticates before it reads."""
        who = self.principals.authenticate(credential)
        if who is DENIED:
            return decision(REJECTED, "not-authenticated")      # nothing read, nothing written
        r = self._as(who, parse(wire))
        return self._retrying(lambda: self._handle(r))

    def _handle(self, r: Request) -> dict:
        try:
            used = self._journal(r.key)           # duplicates: answered without any write
            # guards: idempotent-replay, idempotency-conflict-holds
            if used is not None:
                return self._answer_used(r, used)
            with self.store.atomic(r.key) as unit:
                if self._lock_and_sync(r):         # another process committed meanwhile
                    used = self._journal(r.key)
                    if used is not None:
                        unit.abandon()
                        return self._answer_used(r, used)
                response = self._decide_and_record(r)
                if is_hold(response):
                    unit.abandon()        # not an answer yet: nothing is written, the key stays free
            return response
        except BaseException:
            self._version = None
            self._forget()
            raise

    def _retrying(self, run, attempts: int = 50):
        """Run a transaction again after a deadlock or serialization failure (PostgreSQL):
        the same request, the same key, invisibly to the caller."""
        for n in range(attempts):
            try:
                return run()
            except Exception as e:
                if n + 1 == attempts or not self.store.retryable(e):
                    raise

    def _lock_and_sync(self, r: Request) -> bool:
        """Lock the request's task row and its dependencies' (PostgreSQL: the guards then
        hold until COMMIT; SQLite's writer lock already covers them), then drop caches
        that another connection's commit made stale."""
        if not self.store.row_locks:
            return self._sync()
        if r.task not in self.ids():              # a task added by another connection
            self._ids = None
        tid = self.ids().get(r.task)
        if tid is None:
            return self._sync()
        self.store.lock_tasks([tid])
        stale = self._sync()
        deps = self.policy(r.task).deps
        if deps:
            ids = self.ids()
            self.store.lock_tasks([ids[d] for d in deps], share=True)
            stale = self._sync() or stale
        return stale

    def _as(self, who: Principal | None, r: Request) -> Request:
        """The request in its sender's journal namespace; its roles checked in ``_decide``."""
        self._who = who
        return r if who is None else replace(r, key=scoped_key(who, r.key))

    def handle_batch(self, wires: Sequence[Any], credential: str | None = None) -> list[dict]:
        """Decide several requests with one commit for all of them (group commit).

        Each request is decided exactly as ``handle`` would decide it, in order,
        inside its own savepoint, and the answers are returned only after the one
        commit that makes them all durable: a crash before it loses every answer
        together, and the senders re-send under the same keys. A request whose
        decision performs an external effect (a worktree, a ref, a land) never
        waits behind uncommitted requests: the batch commits first and the effect
        opens the next commit, so every intent it relies on is durable before it
        happens. A malformed request refuses the whole batch before anything runs
        (``BadRequest`` naming its position)."""
        who = self.principals.authenticate(credential)
        if who is DENIED:
            return [decision(REJECTED, "not-authenticated") for _ in wires]
        requests = []
        for n, wire in enumerate(wires):
            try:
                requests.append(self._as(who, parse(wire)))
            except BadRequest as e:
                raise BadRequest(f"request {n}: {e}") from None
        answers: list[dict] = []
        try:
            while len(answers) < len(requests):
                answers += self._retrying(lambda: self._batch_commit(requests[len(answers):]))
            return answers
        except BaseException:
            self._version = None
            self._forget()
            raise

    def _batch_commit(self, requests: list[Request]) -> list[dict]:
        """Decide a prefix of ``requests`` in one transaction; their answers once committed."""
        answers: list[dict] = []
        try:
            with self.store.atomic(f"batch:{requests[0].key}"):
                self._sync()
                for r in requests:
                    try:
                        answers.append(self._in_savepoint(r, may_perform=not answers))
                    except _CommitFirst:
                        break                  # commit what is decided, then this one
        except BaseException:
            self._version = None
            self._forget()
            raise
        return answers

    def _in_savepoint(self, r: Request, may_perform: bool) -> dict:
        with self.store.atomic(r.key) as unit:
            if self.store.row_locks:
                self._lock_and_sync(r)
            used = self._journal(r.key)
            if used is not None:
                unit.abandon()
                return self._answer_used(r, used)
            response = self._decide_and_record(r, may_perform)
            if is_hold(response):
                unit.abandon()
            return response

    def _journal(self, key: str) -> tuple[str, str] | None:
        return self.conn.execute("SELECT digest, response FROM journal WHERE key = ?",
                                 (key,)).fetchone()

    @staticmethod
    def _answer_used(r: Request, used: tuple[str, str]) -> dict:
        digest, response = used
        # guards: idempotency-conflict-holds
        if digest != r.digest:
            return decision(REJECTED, "idempotency-conflict")
        # guards: idempotent-replay
        return decision(DUPLICATE, original=json.loads(response))

    def _decide_and_record(self, r: Request, may_perform: bool = True) -> dict:
        outcome, observe = self._decide(r)
        facts = list(outcome.facts)
        # guards: rejection-changes-nothing
        if outcome.changes_state and outcome.effects:
            if not may_perform:
                raise _CommitFirst()
            try:
                facts += perform(self.env, self.hook, outcome.effects, r.key, outcome.record)
            except CasMoved:
                outcome = Outcome(REJECTED, "cas-moved", outcome.record)
        response = decision(outcome.decision, outcome.code)
        if is_hold(response):
            return response
        body: dict[str, Any] = {"digest": r.digest, "response": response}
        changes = None
        # guards: rejection-changes-nothing
        if outcome.changes_state:
            # guards: unchanged-outside-touches
            changes = changed(self.record(r.task), outcome.record)
            body["changes"] = record_to_json(changes)
            body["facts"] = facts
        if observe is not None and observe.log:
            body["observed"] = observe.log
        # the request's canonical bytes (those of its digest) are stored as they are
        text = '{"request":' + r.canonical + "," + dumps(body)[1:]
        seq = self.ledger.append("request", text, task=r.task, key=r.key)
        apply_event(self, seq, "request", body, key=r.key, task=r.task,
                    record=outcome.record if changes is not None else None, changes=changes)
        return response

    def _decide(self, r: Request) -> tuple[Outcome, Observe | None]:
        # guards: role-held
        if self._who is not None and r.actor not in self._who.roles:
            return Outcome(REJECTED, "role-not-held", EMPTY), None
        if not r.authorized:
            return Outcome(REJECTED, "not-authorized", EMPTY), None
        if r.task not in self.ids():
            return Outcome(REJECTED, "unknown-task", EMPTY), None
        policy = self.policy(r.task)
        observe = self.observe(r.task)
        ctx = Ctx(
            graph_id=self.graph_id or "", policy=policy, record=self.record(r.task), request=r,
            deps_done=lambda: all(self.record(d).graph_saved for d in policy.deps),
            seen=lambda kind, ident: self._seen(r.task, kind, ident),
            observe=observe,
        )
        return decide(ctx), observe

    def _seen(self, task: str, kind: str, ident: str) -> bool:
        return self.conn.execute(
            "SELECT 1 FROM evidence WHERE task = ? AND kind = ? AND ident = ?",
            (self.ids()[task], kind, ident)).fetchone() is not None

    # --- the ledger and the one write path ---------------------------------------------------------

    def _append(self, event: str, body: dict) -> int:
        """Graph edits, seeds and legacy records: one ledger event, applied."""
        seq = self.ledger.append(event, dumps(body), task=body.get("task"))
        apply_event(self, seq, event, body)
        return seq

    # --- reading ---------------------------------------------------------------------------------

    def plan(self, name: str) -> Plan | None:
        self._sync()
        return plan(self, name, self.observe(name))

    def status(self, name: str) -> str:
        self._sync()
        return status(self.record(name))

    def active_tasks(self) -> list[str]:
        """Tasks with a running attempt outside a hold: where convergence may have work."""
        self._sync()
        return [n for (n,) in self.conn.execute(
            "SELECT tasks.name FROM task_view JOIN tasks ON tasks.id = task_view.task "
            "WHERE task_view.status IN ('in-progress', 'completing') ORDER BY tasks.id")]

    def converge(self, *, max_rounds: int = 64, credential: str | None = None):
        """Daemon convergence (see ``converge.converge``)."""
        return converge_.converge(self, max_rounds=max_rounds, credential=credential)

    def rebuild(self, *, apply: bool = False):
        """Replay the ledger into a fresh database and compare (see ``audit.rebuild``)."""
        return audit_.rebuild(self, apply=apply)

    def audit(self):
        """Check the stored state against the invariants (see ``audit.audit``)."""
        return audit_.audit(self)

    def verify_ledger(self, since: int = 1) -> LedgerVerdict:
        """The hash-linked ledger, from event ``since`` on (1: the whole ledger)."""
        self._sync()
        return self.ledger.verify(since)

    def ledger_head(self) -> int:
        """The sequence number of the last ledger event (0 for none)."""
        row = self.conn.execute("SELECT max(seq) FROM ledger").fetchone()
        return row[0] or 0

    def ready(self) -> list[str]:
        """Open tasks whose dependencies are all dependency-satisfying Done (indexed)."""
        self._sync()
        return self.view.ready()

    def show(self, name: str) -> dict:
        """Everything the kernel holds about one task: policy, status and plan, the current
        attempt and transaction, every receipt, the phase history, every evidence id,
        attempts, pins, effects, worktrees and legacy records."""
        self._sync()
        if name not in self.ids():
            raise GraphError(f"unknown task {name!r}")
        return observed.show(self, name)

    def project(self, *, tasks: bool = True, journal_keys: list[str] | None = None) -> dict:
        """The observable projection of docs/vocabulary.md, computed from the tables
        (environment facts — target, worktree bytes, effects — observed now); with
        ``journal_keys``, only those journal entries."""
        self._sync()
        return {"target": self.env.repository.target(), "now": self.env.clock.now(),
                "tasks": self.project_tasks(list(self.ids())) if tasks else {},
                "journal": observed.journal(self.conn, journal_keys)}

    def project_tasks(self, names: list[str]) -> dict[str, dict]:
        """The observable projection of some tasks."""
        self._sync()
        facts = observed.task_facts(self, names)
        return {name: observable_task(self, name, facts[name], self.observe(name))
                for name in names}


#: Rejections that only say "not yet" (an admission fact is missing): they are not an
#: answer to the key, so nothing is journaled and the same key is decided again on re-send.
HOLD_CODES = ("assignment-required", "dependency-not-done")


def is_hold(response: dict) -> bool:
    return response.get("decision") == REJECTED and response.get("code") in HOLD_CODES


class _CommitFirst(Exception):
    """A batched request would perform an effect behind uncommitted requests."""
