"""The kernel: one database (SQLite, or PostgreSQL for a DSN), one task graph, an
injected environment, and the one request path.

``handle(request)`` is the only way state changes after the graph exists; graph edits,
seeds and legacy records are ledger events as well, so every table can be rebuilt from
the ledger by the same ``apply_event``. What it has read of its tables (ids, policies,
records) is one ``ReadCache`` (``storage.cache``), valid while no other connection commits.

The request path, one wire request (or a batch) in one transaction:

1. the journal: a key seen before with equal bytes answers ``duplicate`` with the
   stored response, with other bytes ``idempotency-conflict``; neither writes;
2. ``BEGIN IMMEDIATE`` (on PostgreSQL: ``BEGIN`` and row locks on the task and its
   dependencies, the store's ``lock_request``); the journal again (another process may
   have won), and on SQLite, which checks the caches here only (``Store.checks_at_lock``),
   the credential again on the principals as they are now;
3. authority, the task, then ``rules.decide`` (K, CAS, the rule's guards);
4. the decision's external effects, each a durable boundary through the hook
   (a failed CAS turns the decision into ``cas-moved``);
5. one ledger event, then ``apply_event`` writes the journal, the record's
   changed rows, the facts and the status projection from that event;
6. ``COMMIT`` (a boundary too).

Before any of it, a closed kernel authenticates the credential
(``not-authenticated``: nothing read) and the wire object is parsed
(``BadRequest``: nothing written). A request whose key is not used yet and
whose names fall outside the grammar (``names``) is ``bad-name``, and like a
hold it writes nothing: the key stays free.

A request is admitted once (``admit``: one authentication, one parse, its key in its
sender's namespace, its names checked) into a ``RequestContext``, and that context is
what every later step takes: nothing about the request is kept on the kernel. Whatever
depends on where the database lives (row locks, reads sent ahead) is the store's.
"""
from __future__ import annotations

import json
from json.encoder import encode_basestring_ascii
from dataclasses import replace
from typing import Any, Iterable, NamedTuple, Sequence

from ..storage import authority
from . import converge as converge_
from . import observed
from ..decisions import reopen
from ..contract import names, protect
from ..storage.apply import apply_event, response_text
from .effects import CasMoved, perform
from ..world.env import Environment
from ..contract.errors import BadRequest, GraphError, SeedError, StoreError
from ..decisions.graph import dependency_path, task_added_events
from ..world.hooks import Hook, no_hook
from ..storage.ledger import LedgerVerdict
from .principals import DENIED, Principal, Principals, scoped_key, sendable, well_formed
from ..decisions.planner import Plan, plan, plans
from ..decisions.projection import StatusProjection, observable_task, status
from ..storage.records import EMPTY, TaskPolicy, TaskRecord, changed, evolve, record_to_json
from ..decisions.decision import Ctx, Observe, Outcome
from ..decisions.rules import EDGES, RULES, decide, k_failure, transaction_failure
from ..decisions.transaction import (
    LOCKS_DEPENDENCIES, NOT_AHEAD, OBSERVING_STEPS, STEPS, WRITTEN_STEPS, changes as step_changes,
    written,
)
from ..decisions.decision import evidence_fact
from ..decisions.seeding import Initial, check_initial, seeded
from ..storage.backends import open_store
from ..storage.cache import ReadCache
from ..storage.store import Pragmas, Store, dumps
from ..storage.tables import FactTables, TaskTables
from ..contract.vocabulary import APPLIED, DUPLICATE, EVIDENCE_ONLY, REJECTED
from ..contract.wire import Request, decision, parse, refused_name, rekeyed


#: Rejections that only say "not yet" (an admission fact is missing): they are not an
#: answer to the key, so nothing is journaled and the same key is decided again on re-send.
HOLD_CODES = ("assignment-required", "dependency-not-done")
#: Rejections that write nothing at all: the holds, and a name outside the grammar (a
#: wire-level refusal: the request names nothing the kernel could hold).
UNJOURNALED = HOLD_CODES + ("bad-name",)


#: ``Kernel._handle``'s credential for a request admitted on caches checked just before.
CHECKED = object()


def is_hold(response: dict) -> bool:
    """A rejection that is not journaled (a hold, or ``bad-name``): the key stays free."""
    return response.get("decision") == REJECTED and response.get("code") in UNJOURNALED


class CommitFirst(Exception):
    """A batched request would perform an effect behind uncommitted requests."""


class RequestContext(NamedTuple):
    """One admitted request: its sender (None: an open kernel), the request parsed once with
    its key in the sender's namespace, why its names are refused (None: they are not), and
    what was observed for the write sent ahead with its locks (``Kernel._write_ahead``:
    the observations, what its statement was given, the worktree looked at; None: none).
    Immutable, and made by one tuple construction per request (no frozen ``__init__``)."""

    sender: Principal | None
    request: Request
    bad_name: str | None = None
    ahead: tuple | None = None

    @property
    def key(self) -> str:
        return self.request.key

    @property
    def role_held(self) -> bool:
        """The actor the request names is a role its sender holds (always, on an open kernel)."""
        return self.sender is None or self.request.actor in self.sender.roles


def context(who: Principal | None, r: Request, ahead: tuple | None = None) -> RequestContext:
    if who is not None:
        r = rekeyed(r, scoped_key(who, r.key))
    return RequestContext(who, r, refused_name(r), ahead if who is None else None)


JOURNAL = "SELECT digest, response FROM journal WHERE key = ?"

#: Kinds decided by the conditions of their one write (``_report_under_conditions``) where
#: the ledger's next number is known ahead: reports that record their evidence row and change
#: nothing else (docs/vocabulary.md: no condition of their own beyond K and the token), with
#: the answer when the row is written; a row already there (its id seen) is evidence-only.
WRITTEN_UNDER_CONDITIONS = {"heartbeat": EVIDENCE_ONLY, "provider-failure": APPLIED}


#: The stored text of each answer a write under its conditions gives (a report's, a step's
#: and a dispatch's when written).
_ANSWER_TEXTS = {answer: response_text(decision(answer))
                 for answer in {*WRITTEN_UNDER_CONDITIONS.values(), APPLIED}}


#: The admission of a new attempt and the opening it writes (``_dispatch_under_conditions``).
OPENING = RULES["dispatch"]


class _Stored(NamedTuple):
    """What a refusal is read from after a write whose conditions did not hold."""

    record: TaskRecord
    request: Request


#: A report's ledger body by (kind, answer), in three parts around its digest and its
#: evidence id (``report_body``).
_REPORT_BODIES: dict[tuple[str, str], tuple[str, str, str]] = {}
_DIGEST_MARK, _IDENT_MARK = "@digest@", "@ident@"


def report_body(kind: str, answer: str, digest: str, ident: str) -> str:
    """``dumps`` of a report's body whose evidence row was written (or seen), the opening
    brace left out: its canonical text is made once per kind and answer with marks where the
    digest and the evidence id go, and each request's text is those parts around them (the
    digest is hex; the id encoded as the canonical text encodes a string)."""
    parts = _REPORT_BODIES.get((kind, answer))
    if parts is None:
        text = dumps({"digest": _DIGEST_MARK, "response": decision(answer), "changes": {},
                      "facts": [evidence_fact(kind, _IDENT_MARK)]})[1:]
        head, _, rest = text.partition(f'"{_DIGEST_MARK}"')
        middle, _, tail = rest.partition(f'"{_IDENT_MARK}"')
        parts = _REPORT_BODIES[kind, answer] = (head + '"', '"' + middle, tail)
    head, middle, tail = parts
    return head + digest + middle + encode_basestring_ascii(ident) + tail


def answer_used(r: Request, used: tuple[str, str]) -> dict:
    digest, response = used
    # guards: idempotency-conflict-holds
    if digest != r.digest:
        return decision(REJECTED, "idempotency-conflict")
    # guards: idempotent-replay
    return decision(DUPLICATE, original=json.loads(response))



class Kernel:
    """The durable attempt-control kernel of one task graph."""

    def __init__(self, path: str, env: Environment, *, hook: Hook = no_hook,
                 pragmas: Pragmas = Pragmas(), image: bytes | None = None,
                 store: Store | None = None):
        """``image``: a scratch database's first bytes (``Store``); ``store``: one already
        open on ``path``, used instead of opening it."""
        self.env = env
        self.store = store if store is not None else \
            open_store(path, hook=hook, pragmas=pragmas, image=image)
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
        from . import legacy                                  # lazy: only an import reads it
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

    # --- requests: the one request path ---------------------------------------------------------

    def handle(self, wire: Any, credential: str | None = None) -> dict:
        """Decide one wire request sent with ``credential``; returns the wire decision
        (``BadRequest`` if malformed). A closed kernel authenticates before it reads."""
        parsed, ahead = self._read_ahead(wire, credential)
        late = self.store.checks_at_lock
        try:
            rc = self._admit(credential, wire, parsed, ahead, checked=not late)
            if rc is None:
                return decision(REJECTED, "not-authenticated")  # nothing read, nothing written
            return self._retrying(lambda: self._handle(rc, credential if late else CHECKED))
        finally:
            self.store.settle()

    def admit(self, wire: Any, credential: str | None = None) -> RequestContext | None:
        """Authenticate ``credential`` and parse ``wire`` once (``BadRequest`` if malformed):
        the request's context (``RequestContext.bad_name`` says why its names are refused),
        or None when the credential does not authenticate. ``handle_admitted`` decides it."""
        return self._admit(credential, wire)

    def handle_admitted(self, rc: RequestContext) -> dict:
        """Decide a request ``admit`` returned, as ``handle`` would (its own transaction,
        retried when it must be)."""
        try:
            return self._retrying(lambda: self._handle(rc))
        finally:
            self.store.settle()

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
        (``BadRequest`` naming its position). A wire request is parsed once; one that
        is a ``Request`` already (parsed by the caller, as ``wgk kernel send --lines``
        does to name a bad line) is taken as it is."""
        self.cache.sync()
        who = self.principals.authenticate(credential)
        if who is DENIED:
            return [decision(REJECTED, "not-authenticated") for _ in wires]
        requests: list[RequestContext] = []
        for n, wire in enumerate(wires):
            try:
                requests.append(context(who, wire if isinstance(wire, Request) else parse(wire)))
            except BadRequest as e:
                raise BadRequest(f"request {n}: {e}") from None
        answers: list[dict] = []
        try:
            while len(answers) < len(requests):
                answers += self._retrying(lambda: self._batch_commit(requests[len(answers):]))
        except BaseException:
            self.cache.invalidate()
            raise
        return answers

    def _admit(self, credential: str | None, wire: Any, parsed: Request | None = None,
               ahead: tuple | None = None, checked: bool = True) -> RequestContext | None:
        """The request's context, or None when the credential does not authenticate (nothing
        read); a malformed request raises ``BadRequest`` (nothing written). ``parsed``: the
        wire request parsed already (``_read_ahead``). ``checked``: the caches are checked
        first; else they are taken as they are, and ``_handle`` checks them before any
        answer (``Store.checks_at_lock``)."""
        if checked:
            self.cache.sync()              # another connection's commit: check the principals again
        else:
            self.cache.trim()
        who = self.principals.authenticate(credential)
        if who is DENIED:
            return None
        return context(who, parse(wire) if parsed is None else parsed, ahead)

    def _handle(self, rc: RequestContext, credential: Any = CHECKED) -> dict:
        """Decide an admitted request. ``credential``: ``CHECKED`` when ``rc`` was admitted on
        caches checked just before; else the credential it was sent with, authenticated
        again wherever the check of the caches (before a duplicate's answer, under the
        writer lock) finds them stale."""
        r = rc.request
        try:
            used = self._journal(r.key)           # duplicates: answered without any write
            if used is not None and credential is not CHECKED and self.cache.sync():
                rc = self._admitted_again(rc, credential)     # (its key is read again)
                return decision(REJECTED, "not-authenticated") if rc is None \
                    else self._handle(rc, CHECKED)
            # guards: idempotent-replay, idempotency-conflict-holds
            if used is not None:
                return answer_used(r, used)
            with self.store.atomic(r.key) as unit:
                if self._lock_and_sync(r):        # another process committed meanwhile
                    if credential is not CHECKED:
                        rc = self._admitted_again(rc, credential)
                        if rc is None:
                            unit.abandon()
                            return decision(REJECTED, "not-authenticated")
                        r = rc.request
                    used = self._journal(r.key)
                    if used is not None:
                        unit.abandon()
                        return answer_used(r, used)
                response = self._decide_and_record(rc)
                if is_hold(response):
                    unit.abandon()        # not an answer yet: nothing is written, the key stays free
            return response
        except BaseException:
            self.cache.invalidate()
            raise

    def _admitted_again(self, rc: RequestContext, credential: str | None
                        ) -> RequestContext | None:
        """``rc`` admitted again on the caches just checked: the same context while the
        credential proves the same sender, None when it proves none."""
        who = self.principals.authenticate(credential)
        if who is DENIED:
            return None
        if who == rc.sender:
            return rc
        r = rc.request
        if rc.sender is not None:                 # the key as sent, out of its namespace
            r = rekeyed(r, r.key[len(rc.sender.name) + 1:])
        return context(who, r)

    def _retrying(self, run, attempts: int = 50):
        """Run a transaction again after a deadlock or serialization failure (PostgreSQL),
        or a write whose condition no longer held: the same request, the same key,
        invisibly to the caller."""
        for n in range(attempts):
            try:
                return run()
            except Exception as e:
                if n + 1 == attempts or not self.store.retryable(e):
                    raise

    def _lock_and_sync(self, r: Request) -> bool:
        """Lock the rows the request's decision reads, as the store's dialect wants it
        (PostgreSQL: the task's row and its dependencies', held until COMMIT; SQLite's
        writer lock already covers them), and drop caches another connection's commit made
        stale (True when it did)."""
        return self.store.lock_request(
            lambda: self.task_id(r.task),         # (read again: added by another connection)
            lambda: [self.task_id(d) for d in self.policy(r.task).deps], self.cache.sync)

    def _batch_commit(self, requests: list[RequestContext]) -> list[dict]:
        """Decide a prefix of ``requests`` in one transaction; their answers once committed."""
        answers: list[dict] = []
        try:
            with self.store.atomic(f"batch:{requests[0].key}"):
                self.cache.sync()
                for rc in requests:
                    try:
                        answers.append(self._in_savepoint(rc, may_perform=not answers))
                    except CommitFirst:
                        break                  # commit what is decided, then this one
        except BaseException:
            self.cache.invalidate()
            raise
        return answers

    def _in_savepoint(self, rc: RequestContext, may_perform: bool) -> dict:
        r = rc.request
        with self.store.atomic(r.key) as unit:
            self._lock_and_sync(r)
            used = self._journal(r.key)
            if used is not None:
                unit.abandon()
                return answer_used(r, used)
            response = self._decide_and_record(rc, may_perform)
            if is_hold(response):
                unit.abandon()
            return response

    def _journal(self, key: str) -> tuple[str, str] | None:
        return self.conn.execute(JOURNAL, (key,)).fetchone()

    def _read_ahead(self, wire: Any, credential: str | None) -> tuple[Request | None, tuple | None]:
        """The request's journal entry (under its key as sent, in the namespace its credential
        names) and, for a task the caches know, its row lock: the store sends them ahead
        where a round trip can be saved (PostgreSQL), and asks for them only then. A report
        decided by its write, sent without a credential, sends that write with them
        (``_write_ahead``); the request parsed for it is returned (else None), with what
        was observed for that write (``RequestContext.ahead``)."""
        parsed: list = []

        def ahead() -> tuple[str, int | None, tuple | None, list[int]] | None:
            key = wire.get("key") if isinstance(wire, dict) else None
            # a key no store can hold (not UTF-8, a NUL) is read by nobody: parse refuses it
            if not sendable(key):
                return None
            name = credential.partition(".")[0] if well_formed(credential) else None
            task = wire.get("task")
            tid = self.cache.known_id(task) if isinstance(task, str) else None
            write, deps = None, []
            kind = wire.get("kind")
            if tid is not None and credential is None and (
                    kind in WRITTEN_UNDER_CONDITIONS or kind in WRITTEN_STEPS or kind == "dispatch"):
                write, deps = self._write_ahead(wire, tid, parsed) or (None, [])
            return (key if name is None else f"{name}/{key}"), tid, write, deps
        self.store.read_ahead(JOURNAL, ahead)
        return (parsed[0], parsed[1] if len(parsed) > 1 else None) if parsed else (None, None)

    def _write_ahead(self, wire: dict, tid: int, parsed: list) -> tuple[tuple, list[int]] | None:
        """The write that decides ``wire`` and the dependencies it reads (their ids, to be
        locked shared before it, as ``_lock_and_sync`` locks them): a report (its evidence
        row written with no number: ``_report_under_conditions`` on a store that does not
        know it ahead), a written step of task ``tid`` (``_step_under_conditions``) or a
        dispatch (``_dispatch_under_conditions``), when nothing before the write can refuse
        the request: it parses, names nothing refused, is authorized and carries K (a report,
        a token too; a step, what the request alone must hold). Sent with the request's locks,
        it is rolled back with them when the request does not take them up (a used key, a
        closed kernel). A step of ``OBSERVING_STEPS`` on a record the cache holds is sent too,
        with what it observed just before, and a dispatch with the time it read, which the
        request then takes up (``parsed``' second item). A write that reads the dependencies'
        rows (a dispatch, a step of ``LOCKS_DEPENDENCIES``) goes only where the cache knows
        them; the steps of ``NOT_AHEAD`` never do."""
        try:
            r = parse(wire)
        except BadRequest:
            return None                           # (parsed again, and refused, in its turn)
        parsed.append(r)
        if not r.authorized or refused_name(r) is not None:
            return None
        if r.kind == "dispatch" or r.kind in LOCKS_DEPENDENCIES:
            deps = self._known_dependencies(r.task)
            if deps is None:
                return None
            if r.kind == "dispatch":
                observe = self.observe(r.task)
                parsed.append((observe, (), None))
                return self.tables.open_statement(tid, r, observe.now()), deps
        else:
            deps = []
        if r.cap is None:
            return None
        if r.kind in WRITTEN_UNDER_CONDITIONS:
            return (self.facts.report_statement(r, 0), deps) if r.needs_token else None
        if r.kind in NOT_AHEAD:
            return None
        looking = OBSERVING_STEPS.get(r.kind)
        if looking is not None:
            record = self.cache.records.get(r.task)
            if record is None:
                return None
            observe = self.observe(r.task)
            seen = looking.seen(observe, record)
            parsed.append((observe, seen, looking.at(record)))
            return self.tables.step_statement(tid, r, STEPS[r.kind].to, EDGES[r.kind][0],
                                              seen), deps
        if not WRITTEN_STEPS[r.kind](r) or (
                r.kind == "seal-candidate" and self.cache.known_protected_paths() != ()):
            return None
        return self.tables.step_statement(tid, r, STEPS[r.kind].to, EDGES[r.kind][0]), deps

    def _known_dependencies(self, task: str) -> list[int] | None:
        """The ids of ``task``'s dependencies where the cache knows them all (no read)."""
        policy = self.cache.known_policy(task)
        if policy is None:
            return None
        ids = [self.cache.known_id(d) for d in policy.deps]
        return None if None in ids else ids

    def _decide_and_record(self, rc: RequestContext, may_perform: bool = True) -> dict:
        """Decide, perform the effects, append the event and apply it (inside the caller's unit)."""
        r = rc.request
        if rc.bad_name is None and rc.role_held and r.authorized:
            if r.kind in WRITTEN_UNDER_CONDITIONS:
                if r.needs_token:
                    return self._report_under_conditions(rc, self.ledger.seq_ahead())
            else:
                admits = WRITTEN_STEPS.get(r.kind)
                if admits is not None and admits(r) \
                        and (r.kind != "seal-candidate" or not self.protected_paths()):
                    return self._step_under_conditions(rc, may_perform)
            if r.kind == "dispatch":
                return self._dispatch_under_conditions(rc, may_perform)
        outcome, observe = self._decide_request(rc)
        facts = list(outcome.facts)
        # guards: rejection-changes-nothing
        if outcome.changes_state and outcome.effects:
            if not may_perform:
                raise CommitFirst()
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

    def _report_under_conditions(self, rc: RequestContext, seq: int | None) -> dict:
        """A report decided by its write: its evidence row is written only while the
        request's K and token are the current attempt's (``tables.REPORT_IF_CURRENT``), and
        when no row was written the answer is read from the stored facts: the refusal the
        record gives the request, else (its id seen before) evidence-only. ``seq``: the
        ledger's next number where it is known ahead (SQLite); where it is not (PostgreSQL's
        sequence), the row is written with none and given the append's number after it."""
        r = rc.request
        if r.cap is not None and seq is not None and self.facts.report_if_current(r, seq):
            # the row is written with the event's number: the event, then its journal row
            answer = WRITTEN_UNDER_CONDITIONS[r.kind]
            text = '{"request":' + r.canonical + "," + report_body(r.kind, answer, r.digest,
                                                                   r.evidence)
            appended = self.ledger.append("request", text, task=r.task, key=r.key)
            if appended != seq:
                raise StoreError(f"ledger event {appended}, where {seq} was written ahead")
            self.conn.execute("INSERT INTO journal VALUES (?, ?, ?, ?)",
                              (r.key, r.digest, _ANSWER_TEXTS[answer], seq))
            return {"decision": answer}
        answer, written = EVIDENCE_ONLY, False
        if r.cap is not None and seq is None and self.facts.report_if_current(r, 0):
            code, answer, written = None, WRITTEN_UNDER_CONDITIONS[r.kind], True
        else:
            tid = self.task_id(r.task)
            if tid is None:
                code = "unknown-task"
            else:
                code = k_failure(self.graph_id or "", _Stored(self.record(r.task), r)) \
                    or k_failure(self.graph_id or "", _Stored(self._stored(r.task), r))
                if code is None and not self.facts.has_evidence(tid, r.kind, r.evidence):
                    raise StoreError(f"task {r.task!r}: a {r.kind} was not written although "
                                     "the stored facts admit it")
        if code is not None:
            response = decision(REJECTED, code)
            body: dict[str, Any] = {"digest": r.digest, "response": response}
            text = '{"request":' + r.canonical + "," + dumps(body)[1:]
        else:
            response = decision(answer)
            text = '{"request":' + r.canonical + "," + report_body(r.kind, answer, r.digest,
                                                                   r.evidence)
        appended = self.ledger.append("request", text, task=r.task, key=r.key)
        if seq is None:
            if written:
                self.facts.date_evidence(self.task_id(r.task), r.kind, r.evidence, appended)
        elif appended != seq:
            raise StoreError(f"ledger event {appended}, where {seq} was written ahead")
        self.conn.execute("INSERT INTO journal VALUES (?, ?, ?, ?)",
                          (r.key, r.digest, response_text(response), appended))
        return response

    def _step_under_conditions(self, rc: RequestContext, may_perform: bool = True) -> dict:
        """A step of the SaveTransaction decided by its write: the transaction row moves only
        under the request's conditions and the step's own (``tables.STEP_IF_CURRENT``), with
        what a step of ``OBSERVING_STEPS`` observed just before (the worktree, the target, the
        effect); when it did not, the refusal is read from the stored facts and that same
        observation (K, then the running attempt, CAS and edge, then the step's own conditions
        in the contract's order). When it moved, the step's other columns and its receipt
        follow under the record's stamp, its effects are performed and its facts recorded; a
        land whose compare-and-swap fails moves the row back and is refused ``cas-moved``."""
        r = rc.request
        tid = self.task_id(r.task)
        if tid is None:
            return self._refused(r, "unknown-task")
        old = self.record(r.task)                 # read before the write moves the row ...
        step = STEPS[r.kind]
        looking = OBSERVING_STEPS.get(r.kind)
        observe, seen, looked_at = None, (), None
        if looking is not None:
            observe, seen, looked_at = rc.ahead or (None, (), None)
            if observe is None:
                observe, looked_at = self.observe(r.task), looking.at(old)
                seen = looking.seen(observe, old)
        stamped = self.store.steps_stamped
        moved = r.cap is not None and self.tables.step_if_current(
            tid, r, step.to, EDGES[r.kind][0], seen, stamped)
        if not moved and r.cap is not None and looking is not None \
                and looked_at != looking.at(old):
            # the write sent ahead looked at what the stored record no longer names
            observe = self.observe(r.task)
            seen = looking.seen(observe, old)
            moved = self.tables.step_if_current(tid, r, step.to, EDGES[r.kind][0], seen, stamped)
        if not moved:
            graph = self.graph_id or ""
            code = self._refusal(r, old, observe, lambda ctx: (
                k_failure(graph, ctx) or transaction_failure(ctx)
                or next((c.code for c in step.when if not c.holds(ctx)), None)))
            return self._refused(r, code, observe)
        if old.revision != r.expected_revision:
            # ... or after, where the write went ahead with the locks (PostgreSQL) and what
            # was read before was dropped: it moved the phase and revision alone, from those
            # the request names
            old = evolve(old, phase=r.expected_phase, revision=r.expected_revision)
        ctx = self._context(r, old, observe)
        observe = ctx.observe                     # (what the write reads is recorded too)
        outcome, columns = written(ctx)           # its columns, its receipt and its effects
        new = outcome.record
        facts = list(outcome.facts)
        if outcome.effects:
            if not may_perform:
                raise CommitFirst()               # (the savepoint takes the write back)
            try:
                facts += perform(self.env, self.hook, outcome.effects, r.key, new)
            except CasMoved:
                self.tables.step_back(tid, old.phase, old.revision)
                return self._refused(r, "cas-moved", observe)
        changes = step_changes(old, columns)      # (those `changed` gives for `new`)
        response = {"decision": APPLIED}
        # (the receipts' bindings are tuples: their canonical text is record_to_json's lists)
        body = {"digest": r.digest, "response": response, "changes": changes, "facts": facts}
        if observe is not None and observe.log:
            body["observed"] = observe.log
        seq = self._append_request(r, body)
        rest = {f: v for f, v in changes.items() if f not in ("phase", "revision")}
        if rest:
            self.tables.save(tid, old, new, rest, seq, stamped)
        elif not stamped:
            self.tables.stamp(tid)
        if facts:
            self.facts.write(tid, facts, seq)
        self.view.refresh(tid, new)
        self.cache.put_record(r.task, new)
        self.conn.execute("INSERT INTO journal VALUES (?, ?, ?, ?)",
                          (r.key, r.digest, _ANSWER_TEXTS[APPLIED], seq))
        return response

    def _refusal(self, r: Request, old: TaskRecord, observe: Observe | None, first) -> str:
        """The code that refuses ``r`` after its write did not happen: ``first``'s (the first
        condition that fails on a context) on ``old``, the record the cache held, and, where
        that admits the request, on the record as the database holds it now (``_stored``).
        ``observe``'s log is what the refusal read (cleared before each reading)."""
        for record in (old, None):
            if observe is not None:
                observe.log.clear()               # (logged again as the refusal reads it)
            code = first(self._context(r, self._stored(r.task) if record is None else record,
                                       observe))
            if code is not None:
                return code
        raise StoreError(f"task {r.task!r}: a {r.kind} was not written although the stored "
                         "facts admit it")

    def _dispatch_under_conditions(self, rc: RequestContext, may_perform: bool) -> dict:
        """A dispatch decided by its write: the task's attempt counters move on only while the
        admission holds on the stored rows at the time observed just before
        (``tables.OPEN_IF_ADMITTED``); when they did not, the refusal is read from the stored
        facts and that observation, in the contract's order (a hold writes nothing: the key
        stays free). When they moved, the new attempt's rows follow under the record's stamp
        and its worktree is created and its owner adopted."""
        r = rc.request
        tid = self.task_id(r.task)
        if tid is None:
            return self._refused(r, "unknown-task")
        observe = rc.ahead[0] if rc.ahead is not None else self.observe(r.task)
        old = self.cache.records.get(r.task)
        if old is None and rc.ahead is None:
            old = self.record(r.task)             # read before the write moves the row
        moved = self.tables.open_if_admitted(tid, r, observe.now())
        if old is None:
            # the write went ahead with the locks (PostgreSQL) over a record the cache no longer
            # holds (another connection committed): taken back, read, and decided again
            if moved:
                self.tables.open_back(tid)
            old = self.record(r.task)
            moved = moved and self.tables.open_if_admitted(tid, r, observe.now())
        if not moved:
            code = self._refusal(r, old, observe, lambda ctx: next(
                (c.code for c in OPENING.when if not c.holds(ctx)), None))
            response = decision(REJECTED, code)
            if is_hold(response):
                return response                   # not an answer yet: nothing written
            return self._refused(r, code, observe)
        outcome = OPENING.then(self._context(r, old, observe))
        if not may_perform:
            raise CommitFirst()                   # (the savepoint takes the write back)
        new = outcome.record
        facts = list(outcome.facts) + perform(self.env, self.hook, outcome.effects, r.key, new)
        changes = changed(old, new)
        response = {"decision": APPLIED}
        # (the receipts' bindings are tuples: their canonical text is record_to_json's lists)
        body = {"digest": r.digest, "response": response, "changes": changes, "facts": facts}
        if observe.log:
            body["observed"] = observe.log
        seq = self._append_request(r, body)
        self.tables.save(tid, old, new, changes, seq)    # (the counters again: as written)
        self.facts.write(tid, facts, seq)
        self.view.refresh(tid, new)
        self.cache.put_record(r.task, new)
        self.conn.execute("INSERT INTO journal VALUES (?, ?, ?, ?)",
                          (r.key, r.digest, _ANSWER_TEXTS[APPLIED], seq))
        return response

    def _stored(self, task: str) -> TaskRecord:
        """Task ``task``'s record as the database holds it now, and its dependencies' (read
        again where the cached ones admit a request whose write did not happen: a cache that
        another connection's commit made stale, where no lock kept it valid)."""
        self.cache.records.clear()
        return self.record(task)

    def _refused(self, r: Request, code: str, observe: Observe | None = None) -> dict:
        response = decision(REJECTED, code)
        body: dict[str, Any] = {"digest": r.digest, "response": response}
        if observe is not None and observe.log:
            body["observed"] = observe.log
        seq = self._append_request(r, body)
        self.conn.execute("INSERT INTO journal VALUES (?, ?, ?, ?)",
                          (r.key, r.digest, response_text(response), seq))
        return response

    def _append_request(self, r: Request, body: dict) -> int:
        # the request's canonical bytes (those of its digest) are stored as they are
        text = '{"request":' + r.canonical + "," + dumps(body)[1:]
        return self.ledger.append("request", text, task=r.task, key=r.key)

    def _decide_request(self, rc: RequestContext):
        """The rule's outcome for a request (its names, authority, the task, then ``rules.decide``)."""
        r = rc.request
        # guards: rejection-changes-nothing
        if rc.bad_name is not None:
            return Outcome(REJECTED, "bad-name", EMPTY), None
        # guards: role-held
        if not rc.role_held:
            return Outcome(REJECTED, "role-not-held", EMPTY), None
        if not r.authorized:
            return Outcome(REJECTED, "not-authorized", EMPTY), None
        if self.task_id(r.task) is None:
            return Outcome(REJECTED, "unknown-task", EMPTY), None
        observe = self.observe(r.task)
        return decide(self._context(r, self.record(r.task), observe)), observe

    def _context(self, r: Request, record: TaskRecord, observe: Observe | None = None) -> Ctx:
        """What a rule reads of request ``r`` on ``record``, the task's stored record."""
        policy = self.policy(r.task)
        return Ctx(
            graph_id=self.graph_id or "", policy=policy, record=record, request=r,
            deps_done=lambda: all(self.record(d).graph_saved for d in policy.deps),
            seen=lambda kind, ident: self._seen(r.task, kind, ident),
            observe=self.observe(r.task) if observe is None else observe,
            protected_paths=self.protected_paths,
            deps_reopened=lambda: reopen.deps_reopened(self, r.task),
            dependents_committed=lambda: reopen.dependents_committed(self, r.task),
        )

    def _seen(self, task: str, kind: str, ident: str) -> bool:
        return self.conn.execute(
            "SELECT 1 FROM evidence WHERE task = ? AND kind = ? AND ident = ?",
            (self.task_id(task), kind, ident)).fetchone() is not None

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
                scratch: "audit_.Scratch | None" = None, live: dict | None = None):
        """Replay the ledger into a fresh database and compare (see ``audit.rebuild``;
        ``start``: an earlier replay of the ledger's first events, see ``audit.replayed``;
        ``scratch``: one kept open on such a replay, ``audit.Scratch``; ``live``: this
        kernel's ``project()`` as it stands, not projected again)."""
        from . import audit as audit_                         # lazy: not on the request path
        return audit_.rebuild(self, apply=apply, start=start, scratch=scratch, live=live)

    def audit(self, anchors: Iterable[tuple[int, str]] = ()):
        """Check the stored state against the invariants, and the ledger against ``anchors``
        (see ``audit.audit``)."""
        from . import audit as audit_                         # lazy: not on the request path
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
            wrong = self.ledger.checked(authority.differences)
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

