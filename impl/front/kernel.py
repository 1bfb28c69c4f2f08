"""The kernel: one database (SQLite, or PostgreSQL for a DSN), one task graph, an
injected environment.

``handle(request)`` is the only way state changes after the graph exists (the
request path is ``handling``); graph edits, seeds and legacy records are ledger
events as well, so every table can be rebuilt from the ledger by the same
``apply_event``. What it has read of its tables (ids, policies, records) is one
``ReadCache`` (``storage.cache``), valid while no other connection commits.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

from dataclasses import replace

from . import audit as audit_
from ..storage import authority
from . import converge as converge_
from . import handling, legacy, observed
from ..contract import names, protect
from ..storage.apply import apply_event
from .effects import perform
from ..world.env import Environment
from ..contract.errors import GraphError, SeedError
from ..decisions.graph import dependency_path, task_added_events
from ..world.hooks import Hook, no_hook
from ..storage.ledger import LedgerVerdict
from .principals import Principals
from ..decisions.planner import Plan, plan, plans
from ..decisions.projection import StatusProjection, observable_task, status
from ..storage.records import TaskPolicy, TaskRecord, changed, record_to_json
from ..decisions.decision import Observe
from ..decisions.seeding import Initial, check_initial, seeded
from ..storage.backends import open_store
from ..storage.cache import ReadCache
from ..storage.store import Pragmas, dumps
from ..storage.tables import FactTables, TaskTables


class Kernel:
    """The durable attempt-control kernel of one task graph."""

    def __init__(self, path: str, env: Environment, *, hook: Hook = no_hook,
                 pragmas: Pragmas = Pragmas(), image: bytes | None = None):
        """``image``: a scratch database's first bytes (``Store``)."""
        self.env = env
        self.store = open_store(path, hook=hook, pragmas=pragmas, image=image)
        self.conn = self.store.conn
        self.tables = TaskTables(self.conn)
        self.facts = FactTables(self.conn)
        self.ledger = self.store.ledger()
        self.view = StatusProjection(self.conn)
        self.principals = Principals(self.store, self._append)
        self.cache = ReadCache(self.store, self.tables, (self.ledger, self.view, self.principals))

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
        self.cache.forget()

    def _sync(self) -> bool:
        """Drop what was read if another connection committed since (``ReadCache.sync``)."""
        return self.cache.sync()

    @property
    def graph_id(self) -> str | None:
        return self.cache.graph_id

    def protected_paths(self) -> tuple[str, ...]:
        """The graph policy's protected path patterns (``protect``; none: an empty tuple)."""
        return self.cache.protected_paths()

    def ids(self) -> dict[str, int]:
        """Every task's id by name (whole-graph readers and graph edits; a request looks up
        its own tasks with ``task_id``)."""
        return self.cache.ids()

    def task_id(self, name: str) -> int | None:
        return self.cache.task_id(name)

    def names(self) -> list[str]:
        self._sync()
        return list(self.ids())

    def knows(self, name: str) -> bool:
        """Whether the graph holds task ``name`` (one lookup by name, not every task)."""
        self._sync()
        return self.task_id(name) is not None

    def policy(self, name: str) -> TaskPolicy:
        return self.cache.policy(name)

    def record(self, name: str) -> TaskRecord:
        return self.cache.record(name)

    def observe(self, name: str) -> Observe:
        return Observe(self.env, name, self._effect_state)

    def _effect_state(self, effect: str) -> str | None:
        row = self.conn.execute("SELECT state FROM effects WHERE id = ?", (effect,)).fetchone()
        return None if row is None else row[0]

    # --- the graph ---------------------------------------------------------------------------

    def create_graph(self, graph_id: str, tasks: Iterable[TaskPolicy] = (),
                     config: dict[str, str] | None = None,
                     protected_paths: Iterable[str] = ()) -> None:
        """Create the one graph of this database (its id is part of every K); its policy's
        ``protected_paths`` (glob patterns, ``protect``) hold a candidate touching one."""
        bad = names.describe("graph id", graph_id)
        if bad is not None:
            raise GraphError(bad)
        patterns = protect.checked(protected_paths)
        if patterns:
            config = dict(config or {}, **{protect.CONFIG_KEY: protect.encode(patterns)})
        with self.store.atomic():
            self.store.lock_graph()               # graph edits exclude requests (PostgreSQL)
            self._sync()
            if self.graph_id is not None:
                raise GraphError(f"this database already holds graph {self.graph_id!r}")
            self._append("graph-created", {"graph": graph_id, "config": config or {}})
            self._add_tasks(list(tasks))

    def add_tasks(self, tasks: Iterable[TaskPolicy]) -> None:
        """Add new tasks (with dependencies on existing or new tasks) in one transaction."""
        with self.store.atomic():
            self.store.lock_graph()               # graph edits exclude requests (PostgreSQL)
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
            self.store.lock_graph()               # graph edits exclude requests (PostgreSQL)
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
            self.store.lock_graph()               # graph edits exclude requests (PostgreSQL)
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
            self.store.lock_graph()               # graph edits exclude requests (PostgreSQL)
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

    # --- requests (the path itself is ``handling``) ---------------------------------------------

    def handle(self, wire: Any, credential: str | None = None) -> dict:
        """Decide one wire request sent with ``credential``; returns the wire decision
        (``BadRequest`` if malformed). A closed kernel authenticates before it reads."""
        return handling.handle(self, wire, credential)

    def admit(self, wire: Any, credential: str | None = None) -> "handling.RequestContext | None":
        """Authenticate ``credential`` and parse ``wire`` once (``BadRequest`` if malformed):
        the request's context (``RequestContext.bad_name`` says why its names are refused),
        or None when the credential does not authenticate. ``handle_admitted`` decides it."""
        return handling.admit(self, credential, wire)

    def handle_admitted(self, rc: "handling.RequestContext") -> dict:
        """Decide a request ``admit`` returned, as ``handle`` would."""
        return handling.handle_admitted(self, rc)

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
        return handling.handle_batch(self, wires, credential)

    # --- the ledger and the one write path ---------------------------------------------------------

    def _append(self, event: str, body: dict, key: str | None = None) -> int:
        """Graph edits, seeds, legacy records and principals: one ledger event, applied."""
        seq = self.ledger.append(event, dumps(body), task=body.get("task"), key=key)
        apply_event(self, seq, event, body, key=key)
        return seq

    # --- reading ---------------------------------------------------------------------------------

    def plan(self, name: str) -> Plan | None:
        self._sync()
        return plan(self, name, self.observe(name))

    def status(self, name: str) -> str:
        self._sync()
        return status(self.record(name))

    def active_tasks(self) -> list[str]:
        """Tasks with a running attempt outside a hold, or an external wait with a deadline:
        where convergence may have work."""
        self._sync()
        return [n for (n,) in self.conn.execute(
            "SELECT tasks.name FROM task_view JOIN tasks ON tasks.id = task_view.task "
            "WHERE task_view.status IN ('in-progress', 'completing') "
            "OR (tasks.waiting_on IS NOT NULL AND tasks.wait_deadline > 0) ORDER BY tasks.id")]

    def converge(self, *, max_rounds: int = 64, credential: str | None = None):
        """Daemon convergence (see ``converge.converge``)."""
        return converge_.converge(self, max_rounds=max_rounds, credential=credential)

    def rebuild(self, *, apply: bool = False, start: "audit_.Replayed | None" = None,
                scratch: "audit_.Scratch | None" = None):
        """Replay the ledger into a fresh database and compare (see ``audit.rebuild``;
        ``start``: an earlier replay of the ledger's first events, see ``audit.replayed``;
        ``scratch``: one kept open on such a replay, ``audit.Scratch``)."""
        return audit_.rebuild(self, apply=apply, start=start, scratch=scratch)

    def audit(self, anchors: Iterable[tuple[int, str]] = ()):
        """Check the stored state against the invariants, and the ledger against ``anchors``
        (see ``audit.audit``)."""
        return audit_.audit(self, anchors)

    def verify_ledger(self, since: int = 1,
                      anchors: Iterable[tuple[int, str]] = ()) -> LedgerVerdict:
        """The hash-linked ledger, from event ``since`` on (1: the whole ledger), and each
        anchor ``(seq, hash)`` kept outside the database (a removed tail, a lost WAL or a
        re-hashed chain does not match it); for the whole ledger, also every table that grants
        authority or answers for the past against the events that wrote it (``authority``)."""
        self._sync()
        verdict = self.ledger.verify(since, anchors)
        if verdict.ok and since <= 1:
            wrong = authority.differences(self.conn)
            if wrong:
                verdict = replace(verdict, ok=False, problem=wrong[0], differences=tuple(wrong))
        return verdict

    def ledger_head(self) -> int:
        """The sequence number of the last ledger event (0 for none)."""
        row = self.conn.execute("SELECT max(seq) FROM ledger").fetchone()
        return row[0] or 0

    def ready(self) -> list[str]:
        """Tasks the daemon would dispatch now: the planner picks the ``dispatch`` way
        for them, the one admission predicate (not unassigned where an assignment is
        required, not parked on a wait, not held by a spent retry budget or a semantic
        failure). Its candidates come from the index: open, every dependency Done."""
        self._sync()
        candidates = self.view.ready()
        planned = plans(self, candidates, self.observe)
        # guards: ready-iff-dispatch-admitted
        return [n for n in candidates if planned[n] is not None and planned[n].action == "dispatch"]

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
        planned = plans(self, names, self.observe)
        return {name: observable_task(self, name, facts[name], planned[name]) for name in names}

