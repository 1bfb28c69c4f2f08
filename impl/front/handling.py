"""The request path of the kernel: one wire request (or a batch), one transaction.

``handle(kernel, wire)`` is the only way state changes after the graph exists:

1. the journal: a key seen before with equal bytes answers ``duplicate`` with the
   stored response, with other bytes ``idempotency-conflict``; neither writes;
2. ``BEGIN IMMEDIATE`` (on PostgreSQL: ``BEGIN`` and row locks on the task and its
   dependencies, see ``pg``); the journal again (another process may have won);
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
what every later step takes: nothing about the request is kept on the kernel.
``Kernel.handle`` and ``Kernel.handle_batch`` call ``handle`` and ``handle_batch``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from ..decisions import reopen
from ..storage.apply import apply_event
from ..decisions.decision import Ctx, Outcome
from .effects import CasMoved, perform
from ..contract.errors import BadRequest
from .principals import DENIED, Principal, scoped_key, sendable, well_formed
from ..storage.records import EMPTY, changed, record_to_json
from ..decisions.rules import decide
from ..storage.store import dumps
from ..contract.vocabulary import DUPLICATE, REJECTED
from ..contract.wire import Request, decision, parse, refused_name

#: Rejections that only say "not yet" (an admission fact is missing): they are not an
#: answer to the key, so nothing is journaled and the same key is decided again on re-send.
HOLD_CODES = ("assignment-required", "dependency-not-done")
#: Rejections that write nothing at all: the holds, and a name outside the grammar (a
#: wire-level refusal: the request names nothing the kernel could hold).
UNJOURNALED = HOLD_CODES + ("bad-name",)


def is_hold(response: dict) -> bool:
    """A rejection that is not journaled (a hold, or ``bad-name``): the key stays free."""
    return response.get("decision") == REJECTED and response.get("code") in UNJOURNALED


class CommitFirst(Exception):
    """A batched request would perform an effect behind uncommitted requests."""


@dataclass(frozen=True, slots=True)
class RequestContext:
    """One admitted request: its sender (None: an open kernel), the request parsed once with
    its key in the sender's namespace, and why its names are refused (None: they are not)."""

    sender: Principal | None
    request: Request
    bad_name: str | None = field(default=None)

    @property
    def key(self) -> str:
        return self.request.key

    @property
    def role_held(self) -> bool:
        """The actor the request names is a role its sender holds (always, on an open kernel)."""
        return self.sender is None or self.request.actor in self.sender.roles


def admit(kernel, credential: str | None, wire: Any) -> RequestContext | None:
    """The request's context, or None when the credential does not authenticate (nothing
    read); a malformed request raises ``BadRequest`` (nothing written)."""
    kernel.cache.sync()                  # another connection's commit: check the principals again
    who = kernel.principals.authenticate(credential)
    if who is DENIED:
        return None
    return context(who, parse(wire))


def context(who: Principal | None, r: Request) -> RequestContext:
    if who is not None:
        r = replace(r, key=scoped_key(who, r.key))
    return RequestContext(who, r, refused_name(r))


def handle(kernel, wire: Any, credential: str | None = None) -> dict:
    read_ahead(kernel, wire, credential)
    try:
        rc = admit(kernel, credential, wire)
        if rc is None:
            return decision(REJECTED, "not-authenticated")  # nothing read, nothing written
        return retrying(kernel, lambda: _handle(kernel, rc))
    finally:
        kernel.store.settle()


def handle_admitted(kernel, rc: RequestContext) -> dict:
    """Decide a request ``admit`` admitted (its own transaction, retried when it must be)."""
    try:
        return retrying(kernel, lambda: _handle(kernel, rc))
    finally:
        kernel.store.settle()


def _handle(kernel, rc: RequestContext) -> dict:
    r = rc.request
    try:
        used = journal(kernel, r.key)           # duplicates: answered without any write
        # guards: idempotent-replay, idempotency-conflict-holds
        if used is not None:
            return answer_used(r, used)
        with kernel.store.atomic(r.key) as unit:
            if lock_and_sync(kernel, r):         # another process committed meanwhile
                used = journal(kernel, r.key)
                if used is not None:
                    unit.abandon()
                    return answer_used(r, used)
            response = decide_and_record(kernel, rc)
            if is_hold(response):
                unit.abandon()        # not an answer yet: nothing is written, the key stays free
        return response
    except BaseException:
        kernel.cache.invalidate()
        raise


def retrying(kernel, run, attempts: int = 50):
    """Run a transaction again after a deadlock or serialization failure (PostgreSQL):
    the same request, the same key, invisibly to the caller."""
    for n in range(attempts):
        try:
            return run()
        except Exception as e:
            if n + 1 == attempts or not kernel.store.retryable(e):
                raise


def lock_and_sync(kernel, r: Request) -> bool:
    """Lock the request's task row and its dependencies' (PostgreSQL: the guards then
    hold until COMMIT; SQLite's writer lock already covers them), then drop caches
    that another connection's commit made stale."""
    if not kernel.store.row_locks:
        return kernel.cache.sync()
    tid = kernel.task_id(r.task)                # (read again: added by another connection)
    if tid is None:
        return kernel.cache.sync()
    kernel.store.lock_tasks([tid])
    stale = kernel.cache.sync()
    deps = kernel.policy(r.task).deps
    if deps:
        kernel.store.lock_tasks([kernel.task_id(d) for d in deps], share=True)
        stale = kernel.cache.sync() or stale
    return stale


def handle_batch(kernel, wires: Sequence[Any], credential: str | None = None) -> list[dict]:
    kernel.cache.sync()
    who = kernel.principals.authenticate(credential)
    if who is DENIED:
        return [decision(REJECTED, "not-authenticated") for _ in wires]
    requests: list[RequestContext] = []
    for n, wire in enumerate(wires):
        try:
            requests.append(context(who, parse(wire)))
        except BadRequest as e:
            raise BadRequest(f"request {n}: {e}") from None
    answers: list[dict] = []
    try:
        while len(answers) < len(requests):
            answers += retrying(kernel, lambda: _batch_commit(kernel, requests[len(answers):]))
    except BaseException:
        kernel.cache.invalidate()
        raise
    return answers


def _batch_commit(kernel, requests: list[RequestContext]) -> list[dict]:
    """Decide a prefix of ``requests`` in one transaction; their answers once committed."""
    answers: list[dict] = []
    try:
        with kernel.store.atomic(f"batch:{requests[0].key}"):
            kernel.cache.sync()
            for rc in requests:
                try:
                    answers.append(_in_savepoint(kernel, rc, may_perform=not answers))
                except CommitFirst:
                    break                  # commit what is decided, then this one
    except BaseException:
        kernel.cache.invalidate()
        raise
    return answers


def _in_savepoint(kernel, rc: RequestContext, may_perform: bool) -> dict:
    r = rc.request
    with kernel.store.atomic(r.key) as unit:
        if kernel.store.row_locks:
            lock_and_sync(kernel, r)
        used = journal(kernel, r.key)
        if used is not None:
            unit.abandon()
            return answer_used(r, used)
        response = decide_and_record(kernel, rc, may_perform)
        if is_hold(response):
            unit.abandon()
        return response


JOURNAL = "SELECT digest, response FROM journal WHERE key = ?"


def journal(kernel, key: str) -> tuple[str, str] | None:
    return kernel.conn.execute(JOURNAL, (key,)).fetchone()


def read_ahead(kernel, wire: Any, credential: str | None) -> None:
    """PostgreSQL: the request's journal entry (under its key as sent, in the namespace its
    credential names) and, for a task the caches know, BEGIN and its row lock unless that
    key is used, travel with the credential check's round trip; a request admitted under
    another key or task reads again, and what it does not take up is rolled back unread."""
    key = wire.get("key") if isinstance(wire, dict) else None
    # a key no store can hold (not UTF-8, a NUL) is read by nobody: parse refuses it
    if kernel.store.row_locks and sendable(key):
        name = credential.partition(".")[0] if well_formed(credential) else None
        task = wire.get("task")
        tid = kernel.cache.known_id(task) if isinstance(task, str) else None
        kernel.store.read_ahead(JOURNAL, key if name is None else f"{name}/{key}", tid)


def answer_used(r: Request, used: tuple[str, str]) -> dict:
    digest, response = used
    # guards: idempotency-conflict-holds
    if digest != r.digest:
        return decision(REJECTED, "idempotency-conflict")
    # guards: idempotent-replay
    return decision(DUPLICATE, original=json.loads(response))


def decide_and_record(kernel, rc: RequestContext, may_perform: bool = True) -> dict:
    """Decide, perform the effects, append the event and apply it (inside the caller's unit)."""
    r = rc.request
    outcome, observe = decide_request(kernel, rc)
    facts = list(outcome.facts)
    # guards: rejection-changes-nothing
    if outcome.changes_state and outcome.effects:
        if not may_perform:
            raise CommitFirst()
        try:
            facts += perform(kernel.env, kernel.hook, outcome.effects, r.key, outcome.record)
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
        changes = changed(kernel.record(r.task), outcome.record)
        body["changes"] = record_to_json(changes)
        body["facts"] = facts
    if observe is not None and observe.log:
        body["observed"] = observe.log
    # the request's canonical bytes (those of its digest) are stored as they are
    text = '{"request":' + r.canonical + "," + dumps(body)[1:]
    seq = kernel.ledger.append("request", text, task=r.task, key=r.key)
    apply_event(kernel, seq, "request", body, key=r.key, task=r.task,
                record=outcome.record if changes is not None else None, changes=changes)
    return response


def decide_request(kernel, rc: RequestContext):
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
    if kernel.task_id(r.task) is None:
        return Outcome(REJECTED, "unknown-task", EMPTY), None
    policy = kernel.policy(r.task)
    observe = kernel.observe(r.task)
    ctx = Ctx(
        graph_id=kernel.graph_id or "", policy=policy, record=kernel.record(r.task), request=r,
        deps_done=lambda: all(kernel.record(d).graph_saved for d in policy.deps),
        seen=lambda kind, ident: _seen(kernel, r.task, kind, ident),
        observe=observe, protected_paths=kernel.protected_paths,
        deps_reopened=lambda: reopen.deps_reopened(kernel, r.task),
        dependents_committed=lambda: reopen.dependents_committed(kernel, r.task),
    )
    return decide(ctx), observe


def _seen(kernel, task: str, kind: str, ident: str) -> bool:
    return kernel.conn.execute(
        "SELECT 1 FROM evidence WHERE task = ? AND kind = ? AND ident = ?",
        (kernel.task_id(task), kind, ident)).fetchone() is not None
