"""The kernel: one SQLite database, one task graph, an injected environment.

``handle(request)`` is the only way state changes after the graph exists:

1. the journal: a used key with the same digest is a ``duplicate`` (the stored
   response, no write at all); with another digest ``idempotency-conflict``
   (no write either);
2. ``BEGIN IMMEDIATE``; the journal again (another process may have won);
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
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from .env import EnvError, Environment, WorktreeView
from .hooks import REF_UPDATE, WORKTREE_ADD, WORKTREE_REMOVE, Boundary, Hook, no_hook
from .ledger import Ledger, LedgerVerdict
from .projection import (
    Plan, StatusProjection, TaskFacts, observable_task, plan, status,
)
from .records import (
    EMPTY, TaskPolicy, TaskRecord, apply_changes, changed, evolve, record_to_json,
)
from .rules import Action, Ctx, Observe, Outcome, decide, effect_name
from .store import FactTables, Pragmas, Store, TaskTables, dumps
from .vocabulary import ATTEMPT_STATES, DISPOSITIONS, DUPLICATE, OWNER_SEEN, RECEIPTS, REJECTED
from .wire import BadRequest, Request, decision, parse


class GraphError(ValueError):
    """A graph edit that cannot be made (unknown task, duplicate, cycle, fixed dependencies)."""


class SeedError(ValueError):
    """Initial facts that cannot be seeded (task already has an attempt, malformed)."""


class EffectError(RuntimeError):
    """An external effect did not do what it must (e.g. a removed worktree is still there)."""


@dataclass(frozen=True)
class Initial:
    """Initial facts a migration seeds: the current attempt with its explicit K.

    A running attempt (the default) has its exact owner and a worktree holding
    ``worktree`` (started from ``origin``, by default the same content); the owner
    process is alive unless ``alive`` is false. An attempt in any other state
    keeps only its K, what was proven about its owner, and its leases."""

    generation: int
    attempt: int
    fence: int
    lease_epoch: int
    pid: int = 0
    birth: int = 0
    session: str | None = None
    worktree: str | None = None
    origin: str | None = None
    wrapper_epoch: int = 1
    child_epoch: int = 1
    state: str = "running"
    owner_seen: str = "unverified"
    alive: bool = True
    leases: dict | None = None      # {"worktree", "session", "finish"}: by default held while running


class Kernel:
    """The durable attempt-control kernel of one task graph."""

    def __init__(self, path: str, env: Environment, *, hook: Hook = no_hook,
                 pragmas: Pragmas = Pragmas()):
        self.env = env
        self.store = Store(path, hook=hook, pragmas=pragmas)
        self.conn = self.store.conn
        self.tables = TaskTables(self.conn)
        self.facts = FactTables(self.conn)
        self.ledger = Ledger(self.conn)
        self.view = StatusProjection(self.conn)
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
            tid = self.ids()[name]
            review, assign, disposition = self.conn.execute(
                "SELECT review_required, requires_assignment, disposition_policy FROM tasks "
                "WHERE id = ?", (tid,)).fetchone()
            deps = tuple(n for (n,) in self.conn.execute(
                "SELECT t.name FROM edges e JOIN tasks t ON t.id = e.dep WHERE e.task = ? "
                "ORDER BY t.name", (tid,)))
            p = TaskPolicy(name, deps, bool(review), bool(assign), disposition)
            self._policies[name] = p
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
        known = self.ids()
        new = {}
        for s in specs:
            if not s.name:
                raise GraphError("a task needs a non-empty name")
            if s.name in known or s.name in new:
                raise GraphError(f"task {s.name!r} already exists")
            if s.disposition not in DISPOSITIONS[1:]:
                raise GraphError(f"task {s.name!r}: unknown disposition {s.disposition!r}")
            new[s.name] = s
        for s in specs:
            for d in s.deps:
                if d not in known and d not in new:
                    raise GraphError(f"task {s.name!r} depends on unknown task {d!r}")
        cycle = find_cycle({s.name: s.deps for s in specs}, set(new))
        if cycle:
            raise GraphError("dependency cycle: " + " -> ".join(cycle))
        for s in specs:
            self._append("task-added", {
                "task": s.name, "deps": sorted(set(s.deps)), "review-required": s.review_required,
                "requires-assignment": s.requires_assignment, "disposition": s.disposition})

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

    def import_legacy(self, path: str):
        """Import a WG-style graph.jsonl or JSON list (see ``legacy.import_legacy``)."""
        from .legacy import import_legacy
        return import_legacy(self, path)

    def add_dependency(self, task: str, dep: str) -> None:
        """A new edge ``dep -> task``; refused when it closes a cycle (named) or the task
        already had an attempt (its admission was decided under the old dependencies)."""
        with self.store.atomic():
            self._sync()
            ids = self.ids()
            for n in (task, dep):
                if n not in ids:
                    raise GraphError(f"unknown task {n!r}")
            if dep in self.policy(task).deps:
                raise GraphError(f"task {task!r} already depends on {dep!r}")
            if self.record(task).fence != 0 or self.record(task).legacy_done:
                raise GraphError(f"task {task!r} already had an attempt: its dependencies are fixed")
            path = self._dependency_path(task, dep)
            if path is not None:
                raise GraphError("dependency cycle: " + " -> ".join(path + [task]))
            self._append("dependency-added", {"task": task, "dep": dep})

    def _dependency_path(self, start: str, goal: str) -> list[str] | None:
        """A path of dependents from ``start`` to ``goal`` (None when unreachable)."""
        seen = {start}
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            if node == goal:
                return path
            for (nxt,) in self.conn.execute(
                    "SELECT t.name FROM edges e JOIN tasks t ON t.id = e.task "
                    "WHERE e.dep = ?", (self.ids()[node],)):
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
        return None

    # --- seeding initial facts --------------------------------------------------------------------

    def seed(self, task: str, initial: Initial) -> None:
        """Seed the current attempt with explicit K (what a migration of running attempts
        does). The task must not have had an attempt yet."""
        if initial.state not in ATTEMPT_STATES or initial.owner_seen not in OWNER_SEEN:
            raise SeedError(f"task {task!r}: unknown attempt state {initial.state!r} or "
                            f"owner knowledge {initial.owner_seen!r}")
        if initial.fence < 0 or initial.attempt < 0 or initial.generation < 0 \
                or (initial.state != "none" and initial.fence < 1):
            raise SeedError(f"task {task!r}: a seeded attempt needs fence >= 1")
        live = initial.state == "running"
        held = {"worktree": live, "session": live, "finish": False, **(initial.leases or {})}
        with self.store.atomic():
            self._sync()
            if task not in self.ids():
                raise SeedError(f"unknown task {task!r}")
            t = self.record(task)
            if t.fence != 0 or t.attempt_state != "none":
                raise SeedError(f"task {task!r} already has an attempt")
            new = evolve(
                t, generation=initial.generation, attempt=initial.attempt, fence=initial.fence,
                lease_epoch=initial.lease_epoch, attempt_state=initial.state,
                owner_seen=initial.owner_seen, worktree_lease=bool(held["worktree"]),
                session_lease=bool(held["session"]), finish_lease=bool(held["finish"]),
            )
            actions = []
            if live:
                wt = f"{task}/f{initial.fence}"
                origin = initial.origin if initial.origin is not None else initial.worktree
                new = evolve(new, owner_pid=initial.pid, owner_birth=initial.birth,
                             session=initial.session, wrapper_epoch=initial.wrapper_epoch,
                             child_epoch=initial.child_epoch, worktree_id=wt, origin=origin,
                             base_hint=origin)
                actions.append(Action("create-worktree", (wt, initial.worktree)))
                if initial.alive:
                    actions.append(Action("adopt", (initial.pid, initial.birth)))
            facts = self._perform(actions, None, new)
            if initial.generation:
                facts.append(("generation-opened", {"generation": initial.generation}))
            self._append("seed", {"task": task, "changes": record_to_json(changed(t, new)),
                                  "facts": facts})

    # --- requests ------------------------------------------------------------------------------

    def handle(self, wire: Any) -> dict:
        """Decide one wire request; returns the wire decision (``BadRequest`` if malformed)."""
        r = parse(wire)
        try:
            used = self._journal(r.key)           # duplicates: answered without any write
            # guards: idempotent-replay, idempotency-conflict-holds
            if used is not None:
                return self._answer_used(r, used)
            with self.store.atomic(r.key) as unit:
                if self._sync():                   # another process committed meanwhile
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

    def handle_batch(self, wires: Sequence[Any]) -> list[dict]:
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
        requests = []
        for n, wire in enumerate(wires):
            try:
                requests.append(parse(wire))
            except BadRequest as e:
                raise BadRequest(f"request {n}: {e}") from None
        answers: list[dict] = []
        try:
            while len(answers) < len(requests):
                with self.store.atomic(f"batch:{requests[len(answers)].key}"):
                    self._sync()
                    uncommitted = 0
                    for r in requests[len(answers):]:
                        try:
                            answers.append(self._in_savepoint(r, effects=not uncommitted))
                        except _CommitFirst:
                            break                  # commit what is decided, then this one
                        uncommitted += 1
            return answers
        except BaseException:
            self._version = None
            self._forget()
            raise

    def _in_savepoint(self, r: Request, effects: bool) -> dict:
        with self.store.atomic(r.key) as unit:
            used = self._journal(r.key)
            if used is not None:
                unit.abandon()
                return self._answer_used(r, used)
            response = self._decide_and_record(r, effects)
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

    def _decide_and_record(self, r: Request, effects: bool = True) -> dict:
        outcome, observe = self._decide(r)
        facts = list(outcome.facts)
        # guards: rejection-changes-nothing
        if outcome.changes_state and outcome.actions:
            if not effects:
                raise _CommitFirst()
            try:
                facts += self._perform(outcome.actions, r.key, outcome.record)
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

    # --- external effects ---------------------------------------------------------------------

    def _boundary(self, kind: str, key: str | None, detail: str, effect: Callable[[], Any]) -> Any:
        self.hook(Boundary(kind, "before", key, detail))
        result = effect()
        self.hook(Boundary(kind, "after", key, detail))
        return result

    def _perform(self, actions: list[Action], key: str | None, record: TaskRecord) -> list:
        """Perform a decision's effects in order; returns the facts they establish."""
        repo = self.env.repository
        facts: list[tuple[str, dict]] = []
        for a in actions:
            if a.name == "adopt":
                self.env.processes.adopt(*a.args)
            elif a.name == "create-worktree":
                wt, start = a.args
                self._boundary(WORKTREE_ADD, key, wt, lambda: repo.create_worktree(wt, start))
                facts.append(("worktree-added", {"worktree": wt, "fence": record.fence,
                                                 "origin": start, "path": repo.worktree_path(wt)}))
            elif a.name == "pin":
                ref, content = a.args
                self._boundary(REF_UPDATE, key, ref, lambda: repo.pin(ref, content))
                facts.append(("pinned", {"ref": ref, "content": content}))
            elif a.name == "land":
                effect, candidate, base = a.args
                if not self._boundary(REF_UPDATE, key, effect,
                                      lambda: repo.land(effect, candidate, base)):
                    raise CasMoved(effect)
            elif a.name == "output":
                effect, candidate, disposition = a.args
                self._boundary(REF_UPDATE, key, effect,
                               lambda: repo.output(effect, candidate, disposition))
            elif a.name == "remove-worktree":
                (wt,) = a.args
                self._boundary(WORKTREE_REMOVE, key, wt, lambda: self._remove_exactly(wt))
            else:
                raise EffectError(f"unknown action {a.name!r}")
        return facts

    def _remove_exactly(self, wt: str) -> None:
        repo = self.env.repository
        repo.remove_worktree(wt)
        if repo.observe_worktree(wt).present:
            raise EffectError(f"worktree {wt} is still present after its removal")

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

    def converge(self, *, max_rounds: int = 64):
        """Daemon convergence (see ``converge.converge``)."""
        from .converge import converge
        return converge(self, max_rounds=max_rounds)

    def rebuild(self, *, apply: bool = False):
        """Replay the ledger into a fresh database and compare (see ``audit.rebuild``)."""
        from .audit import rebuild
        return rebuild(self, apply=apply)

    def audit(self):
        """Check the stored state against the invariants (see ``audit.audit``)."""
        from .audit import audit
        return audit(self)

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
        tid, t, p = self.ids()[name], self.record(name), self.policy(name)
        pl = self.plan(name)
        rows = lambda sql: [dict(zip([d[0] for d in cur.description], r))
                            for cur in [self.conn.execute(sql, (tid,))] for r in cur.fetchall()]
        phases = []
        for seq, key, body in self.conn.execute(
                "SELECT seq, key, body FROM ledger WHERE task = ? AND event IN ('request', 'seed') "
                "ORDER BY seq", (name,)):
            b = json.loads(body)
            ch = b.get("changes", {})
            if "phase" in ch or "exit" in ch:
                entry = {"seq": seq, "key": key, "kind": b.get("request", {}).get("kind")}
                entry.update({f: ch[f] for f in ("phase", "exit", "reason") if f in ch})
                phases.append(entry)
        return {
            "task": name, "deps": list(p.deps), "review-required": p.review_required,
            "requires-assignment": p.requires_assignment, "disposition-policy": p.disposition,
            "status": status(t), "plan": pl.to_json() if pl else None,
            "generation": t.generation, "attempt": t.attempt, "fence": t.fence,
            "lease-epoch": t.lease_epoch, "attempt-state": t.attempt_state,
            "owner": {"pid": t.owner_pid, "birth": t.owner_birth, "session": t.session,
                      "seen": t.owner_seen},
            "phase": t.phase, "exit": t.exit, "reason": t.reason, "revision": t.revision,
            "candidate": t.candidate, "base": t.base, "version": t.version,
            "retained": t.retained, "saved-work": t.saved_work, "imported": t.imported,
            "receipts": {k: {"fence": b.fence, "candidate": b.candidate, "base": b.base}
                         for k, b in zip(RECEIPTS, t.receipts) if b.exists},
            "phases": phases,
            "evidence": [[k, i, seq] for k, i, seq in self.conn.execute(
                "SELECT kind, ident, seq FROM evidence WHERE task = ? ORDER BY seq, kind, ident",
                (tid,))],
            "attempts": rows("SELECT fence, generation, attempt, state, worktree, origin, "
                             "saved_work, imported, opened_seq FROM attempts WHERE task = ? "
                             "ORDER BY fence"),
            "pins": rows("SELECT ref, content, seq FROM pins WHERE task = ? ORDER BY seq"),
            "effects": rows("SELECT id, disposition, candidate, base, state, re_observed, "
                            "prepared_seq, settled_seq FROM effects WHERE task = ? "
                            "ORDER BY prepared_seq"),
            "worktrees": rows("SELECT id, fence, origin, path, planned_removal, removed, "
                              "last_content FROM worktrees WHERE task = ? ORDER BY fence"),
            "legacy": [{"source": s_, "line": ln, "status": st,
                        "original": o.decode("utf-8", "replace")}
                       for s_, ln, st, o in self.conn.execute(
                           "SELECT source, line, legacy_status, original FROM legacy_records "
                           "WHERE task = ? ORDER BY id", (name,))],
        }

    def project(self, *, tasks: bool = True, journal_keys: list[str] | None = None) -> dict:
        """The observable projection of docs/vocabulary.md, computed from the tables
        (environment facts — target, worktree bytes, effects — observed now); with
        ``journal_keys``, only those journal entries."""
        self._sync()
        if journal_keys is None:
            rows = self.conn.execute("SELECT key, response FROM journal ORDER BY key")
        else:
            rows = [r for key in journal_keys for r in self.conn.execute(
                "SELECT key, response FROM journal WHERE key = ?", (key,))]
        journal = {key: json.loads(resp) for key, resp in rows}
        return {"target": self.env.repository.target(), "now": self.env.clock.now(),
                "tasks": self.project_tasks(list(self.ids())) if tasks else {},
                "journal": journal}

    def project_tasks(self, names: list[str]) -> dict[str, dict]:
        """The observable projection of some tasks."""
        self._sync()
        facts = self._task_facts(names)
        return {name: observable_task(self, name, facts[name], self.observe(name))
                for name in names}

    def _task_facts(self, names: list[str]) -> dict[str, TaskFacts]:
        ids = self.ids()
        by_id = {ids[n]: n for n in names}
        where = ("" if len(by_id) == len(ids) else
                 f" WHERE task IN ({', '.join(str(i) for i in by_id)})")
        evidence: dict[str, list] = {n: [] for n in names}
        counts: dict[str, dict[str, int]] = {n: dict.fromkeys(COUNTERS, 0) for n in names}
        for tid, kind, ident, counted in self.conn.execute(
                "SELECT task, kind, ident, counted FROM evidence" + where):
            name = by_id[tid]
            evidence[name].append([kind, ident])
            counter = COUNTED_EVIDENCE.get(kind)
            if counter and (kind != "message" or counted):
                counts[name][counter] += 1
        for tid, n in self.conn.execute("SELECT task, count(*) FROM logs" + where
                                        + " GROUP BY task"):
            counts[by_id[tid]]["logs"] = n
        promotions = dict.fromkeys(names, 0)
        happened: set[str] = set()
        repo = self.env.repository
        for tid, effect, state in self.conn.execute("SELECT task, id, state FROM effects" + where):
            if state == "committed" or (state == "prepared" and repo.effect_observed(effect)):
                promotions[by_id[tid]] += 1
                happened.add(effect)
        last = {wt: content for wt, content in
                self.conn.execute("SELECT id, last_content FROM worktrees" + where)}
        out = {}
        for name in names:
            t = self.record(name)
            out[name] = TaskFacts(
                evidence=sorted(evidence[name]), counters=counts[name],
                promotions=promotions[name],
                effect_done=t.effect_done or effect_name(name, t) in happened,
                worktree=self._worktree_fact(t, last))
        return out

    def _worktree_fact(self, t: TaskRecord, last: dict[str, str | None]) -> dict:
        if t.worktree_id is None:
            return {"present": False, "content": None, "origin": None}
        view: WorktreeView = self.env.repository.observe_worktree(t.worktree_id)
        content = view.content if view.present else last.get(t.worktree_id)
        return {"present": view.present, "content": content, "origin": t.origin}

    # --- environment steps (the model's env steps, on whatever backends are injected) ------------

    def apply_env(self, step: dict) -> None:
        """Apply one environment step: edit, owner-dies, pid-reuse, move-target, tick.

        A step the world cannot take now raises ``EnvError``, with the model's guards:
        only a live owner writes, and only before quiescing or in repair; only a live
        owner dies; a pid is reused by another birth only after its owner died; the
        target moves to another commit; the clock moves forward."""
        kind = step.get("env")
        repo, procs, clock = self.env.repository, self.env.processes, self.env.clock
        self._sync()
        try:
            if kind == "tick":
                clock.advance(int(step.get("amount", 1)))
            elif kind == "move-target":
                if not step.get("content") or repo.target() == step["content"]:
                    raise EnvError("move-target is not possible now: the target is there already")
                repo.move_target(step["content"])
            elif kind in ("edit", "owner-dies", "pid-reuse"):
                task = step.get("task")
                if task not in self.ids():
                    raise EnvError(f"environment step {kind} names unknown task {task!r}")
                t = self.record(task)
                born = procs.birth_of(t.owner_pid) or 0 if t.owner_pid else 0
                if kind == "edit":
                    self._edit(t, task, step.get("content"), born)
                elif kind == "owner-dies":
                    if born == 0 or born != t.owner_birth:
                        raise EnvError(f"owner-dies is not possible now: the owner of task "
                                       f"{task!r} is not alive")
                    procs.kill(t.owner_pid)
                else:
                    birth = int(step["birth"])
                    if not (born != t.owner_birth and birth not in (0, t.owner_birth, born)
                            and t.owner_birth != 0):
                        raise EnvError(f"pid-reuse is not possible now for task {task!r}")
                    procs.reuse(t.owner_pid, birth)
            else:
                raise EnvError(f"{kind!r} is not an environment step the kernel can apply")
        except AttributeError as e:
            raise EnvError(f"this environment cannot perform {kind!r} ({e})") from None

    def _edit(self, t: TaskRecord, task: str, content: str | None, born: int) -> None:
        view = self.env.repository.observe_worktree(t.worktree_id) if t.worktree_id else None
        writable = (t.running and view is not None and view.present and born == t.owner_birth
                    and ((t.exit == "none" and t.phase in ("absent", "prepared"))
                         or t.exit == "needs-repair"))
        # guards: worksave-exact
        if not writable or not content or view.content == content:
            raise EnvError(f"edit is not possible now for task {task!r}")
        self.env.repository.write(t.worktree_id, content)


#: Rejections that only say "not yet" (an admission fact is missing): they are not an
#: answer to the key, so nothing is journaled and the same key is decided again on re-send.
HOLD_CODES = ("assignment-required", "dependency-not-done")


def is_hold(response: dict) -> bool:
    return response.get("decision") == REJECTED and response.get("code") in HOLD_CODES


class _CommitFirst(Exception):
    """A batched request would perform an effect behind uncommitted requests."""


class CasMoved(Exception):
    """The target moved between the check and the compare-and-swap."""


COUNTERS = ("compactions", "continuations", "acks", "provider-failures", "messages", "logs")
COUNTED_EVIDENCE = {"compaction": "compactions", "continuation": "continuations", "ack": "acks",
                    "provider-failure": "provider-failures", "message": "messages"}


# --- applying one ledger event (live and during rebuild) ------------------------------------------


def apply_event(k: "Kernel", seq: int, event: str, body: dict, *, key: str | None = None,
                task: str | None = None, record: TaskRecord | None = None,
                changes: dict | None = None) -> None:
    """Write the tables an event determines. The live path and ``rebuild`` both use this
    (``key`` and ``task`` are the ledger row's columns; ``record``/``changes`` spare the
    live path from decoding what it has just encoded)."""
    if event == "graph-created":
        k.store.set_meta("graph-id", body["graph"])
        for key, value in body.get("config", {}).items():
            k.store.set_meta(f"config:{key}", value)
        k._graph_id = body["graph"]
    elif event == "task-added":
        _apply_task_added(k, seq, body)
    elif event == "dependency-added":
        ids = k.ids()
        tid, dep = ids[body["task"]], ids[body["dep"]]
        k.conn.execute("INSERT INTO edges VALUES (?, ?)", (tid, dep))
        k.view.add_dependency(tid, k.record(body["dep"]).graph_saved)
        k._policies.pop(body["task"], None)
    elif event in ("seed", "request"):
        if event == "request":
            k.conn.execute("INSERT INTO journal VALUES (?, ?, ?, ?)",
                           (key, body["digest"], response_text(body["response"]), seq))
        if "changes" in body:
            name = body["task"] if event == "seed" else task
            _apply_task_changes(k, seq, name, changes if changes is not None else body["changes"],
                                body.get("facts", []), record)
    elif event == "legacy-record":
        k.facts.write(0, [("legacy-record", body)], seq)
    else:
        raise ValueError(f"unknown ledger event {event!r} at seq {seq}")


_RESPONSES: dict[tuple, str] = {}


def response_text(response: dict) -> str:
    """The stored form of a response (memoised: there are few distinct ones)."""
    key = (response["decision"], response.get("code"))
    text = _RESPONSES.get(key)
    if text is None:
        text = _RESPONSES[key] = dumps(response)
    return text


def _apply_task_added(k: "Kernel", seq: int, body: dict) -> None:
    cur = k.conn.execute(
        "INSERT INTO tasks (name, review_required, requires_assignment, disposition_policy) "
        "VALUES (?, ?, ?, ?)",
        (body["task"], int(body["review-required"]), int(body["requires-assignment"]),
         body["disposition"]))
    tid = cur.lastrowid
    ids = k.ids()
    ids[body["task"]] = tid
    k.tables.create(tid)
    k.conn.execute("INSERT INTO generations VALUES (?, 0, ?)", (tid, seq))
    pending = 0
    for d in body["deps"]:
        k.conn.execute("INSERT INTO edges VALUES (?, ?)", (tid, ids[d]))
        pending += 0 if k.record(d).graph_saved else 1
    k.view.create(tid, EMPTY, pending)


def _apply_task_changes(k: "Kernel", seq: int, name: str, changes: dict, facts: list,
                        record: TaskRecord | None) -> None:
    tid = k.ids()[name]
    old = k.record(name)
    new = record if record is not None else apply_changes(old, changes)
    k.tables.save(tid, old, new, changes, seq)
    k.facts.write(tid, [(f[0], f[1]) for f in facts], seq)
    k.view.refresh(tid, new)
    k._records[name] = new


def find_cycle(deps: dict[str, Iterable[str]], among: set[str]) -> list[str] | None:
    """A dependency cycle among ``among`` as a path ``a -> b -> ... -> a`` (dependency first)."""
    dependents: dict[str, list[str]] = {n: [] for n in among}
    for task, ds in deps.items():
        for d in ds:
            if d in among:
                dependents[d].append(task)
    state: dict[str, int] = {}
    for root in sorted(among):
        if root in state:
            continue
        stack = [(root, iter(sorted(dependents[root])))]
        path = [root]
        state[root] = 1
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(child) == 1:
                return path[path.index(child):] + [child]
            elif child not in state:
                state[child] = 1
                path.append(child)
                stack.append((child, iter(sorted(dependents[child]))))
    return None
