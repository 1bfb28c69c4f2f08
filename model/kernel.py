"""The one reducer: ``decide(state, request) -> (decision, state')``.

Order of checks, the same for every request:

0. authentication: a request naming a principal the graph does not know (or one
   whose credential was revoked), or
   naming none where the graph requires one, is ``not-authenticated`` and
   consumes nothing (no journal entry); every key lives in its sender's
   namespace (``Request.journal_key``);
1. the journal: a used key with the same bytes is a ``duplicate`` (the stored
   response is returned, nothing re-executes, even for an attempt that is no
   longer current); with different bytes it is ``idempotency-conflict``;
2. the principal holds the role it claims (``role-not-held``), and that role's
   authority covers the kind (``not-authorized``);
3. the task exists (``unknown-task``);
4. the exact capability tuple K, for kinds that carry one (``unknown-attempt``,
   ``stale-capability``), and for the requests of the attempt's own process (worker,
   wrapper, broker) and every continuation the attempt's capability token
   (``token-mismatch``): K is public, the token is not;
5. for SaveTransaction edges: a live attempt (``terminal-already``), the
   expected phase and revision (``cas-moved``), a legal edge
   (``illegal-phase-edge``);
6. the rule's own guards, then its update.

Every decision, rejections included, is stored under its key together with the
state change it made: request, response and effect commit together. The one
exception is a *hold*: a request rejected only because an admission fact is
not there yet (``assignment-required``, ``dependency-not-done``) has not been
answered; its key stays free and the same request is decided again when it is
re-sent, so a dispatcher retrying with a stable key is admitted once the
dependency is Done or the assignment receipt exists.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

from .logic import all_of, first_failure, ite, one_of
from .requests import EXIT_CODE_BASE, Request, phase_code
from .rules import RULES, Guarded
from .state import State, TaskState
from .vocab import (
    AttemptState as AS, Code, DecisionKind as D, EDGES, Exit, Kind, TRANSACTION_KINDS,
)


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer to one request. ``original`` is the stored response of a duplicate."""

    kind: Any
    code: Any = Code.NONE
    original_kind: Any = None
    original_code: Any = None

    @property
    def label(self) -> str:
        k = D(self.kind).label
        return k if self.code == Code.NONE else f"{k}:{Code(self.code).label}"

    def to_json(self) -> dict:
        out = {"decision": D(self.kind).label}
        if self.code != Code.NONE:
            out["code"] = Code(self.code).label
        if self.original_kind is not None:
            out["original"] = {"decision": D(self.original_kind).label}
            if self.original_code != Code.NONE:
                out["original"]["code"] = Code(self.original_code).label
        return out


Rules = Mapping[Kind, Callable[..., Guarded]]

#: Rejections that only say "not yet": not journaled, decided again on re-send.
HOLD_CODES = (Code.ASSIGNMENT_REQUIRED, Code.DEPENDENCY_NOT_DONE)


def is_hold(d: "Decision") -> Any:
    return all_of(d.kind == D.REJECTED, one_of(d.code, HOLD_CODES))


def current_phase_code(t: TaskState) -> Any:
    """The phase code (``requests.phase_code``) a client's ``expected_phase`` is compared with:
    the side exit's code if the transaction left the main line, else the phase's."""
    return ite(t.exit == Exit.NONE, t.phase, EXIT_CODE_BASE + t.exit)


def capability_matches(t: TaskState, r: Request) -> Any:
    c = r.cap
    return all_of(t.generation == c.generation, t.attempt == c.attempt,
                  t.fence == c.fence, t.lease_epoch == c.lease_epoch)


def token_presented(t: TaskState, r: Request) -> Any:
    """The request presents the current attempt's token (an attempt without one has none to
    present: nothing the attempt's process says is applied)."""
    return all_of(t.token != 0, t.token == r.token)


def generic_checks(s: State, i: int, t: TaskState, r: Request) -> list:
    """Checks 4 and 5 above, as ``(condition, code)`` pairs."""
    checks: list = []
    if r.needs_capability:
        checks += [
            (t.attempt_state != AS.NONE, Code.UNKNOWN_ATTEMPT),
            (capability_matches(t, r), Code.STALE_CAPABILITY),
        ]
    if r.needs_token:
        checks.append((token_presented(t, r), Code.TOKEN_MISMATCH))
    if r.kind in TRANSACTION_KINDS:
        checks += [
            (t.attempt_state == AS.RUNNING, Code.TERMINAL_ALREADY),
            (current_phase_code(t) == phase_code(r.expected_phase), Code.CAS_MOVED),
            (t.revision == r.expected_revision, Code.CAS_MOVED),
        ]
        if r.kind in EDGES:
            sources, _ = EDGES[r.kind]
            checks.append((all_of(t.exit == Exit.NONE, one_of(t.phase, sources)),
                           Code.ILLEGAL_PHASE_EDGE))
    return checks


def evaluate(s: State, checks: list, update: Callable[[], State], kind: Any) -> tuple[Decision, State]:
    """First failing guard names the rejection; otherwise the update happens."""
    if all(c is True or c is False for c, _ in checks):
        for cond, code in checks:
            if cond is False:
                return Decision(D.REJECTED, code), s
        return Decision(kind), update()
    ok = all_of(*[c for c, _ in checks])
    code = first_failure(checks, Code.NONE)
    return Decision(ite(ok, kind, D.REJECTED), code), ite(ok, update(), s)


def authenticated(s: State, r: Request) -> bool:
    """Check 0: the request names a principal the graph knows and has not revoked (or none, in
    an open graph): a revoked credential is answered as an unknown one."""
    if r.principal is None:
        return not s.graph.closed
    return r.principal in s.graph.principals and r.principal not in s.revoked


def revoke_principal(s: State, name: str) -> State:
    """The state after the principal ``name``'s credential is revoked (``ValueError`` for a
    principal the graph does not declare); revoking twice changes nothing more."""
    if name not in s.graph.principals or not s.graph.closed:
        raise ValueError(f"revoke names undeclared principal {name!r}")
    return s if name in s.revoked else replace(s, revoked=s.revoked | {name})


def role_held(s: State, r: Request) -> bool:
    """The role the request claims (its actor) is one its principal holds."""
    return r.principal is None or r.actor in s.graph.principals.get(r.principal, ())


def decide_fresh(s: State, r: Request, rules: Rules = RULES) -> tuple[Decision, State]:
    """Decide a request whose key is not in the journal (checks 2 to 6)."""
    if not authenticated(s, r):
        return Decision(D.REJECTED, Code.NOT_AUTHENTICATED), s
    if not role_held(s, r):
        return Decision(D.REJECTED, Code.ROLE_NOT_HELD), s
    return decide_authenticated(s, r, rules)


def decide_authenticated(s: State, r: Request, rules: Rules = RULES) -> tuple[Decision, State]:
    """Decide a fresh request whose sender is authenticated and holds its role (checks 4 to
    6): what the kernel answers the role itself, e.g. the daemon's dispatch."""
    if not r.authorized:
        return Decision(D.REJECTED, Code.NOT_AUTHORIZED), s
    i = s.graph.index.get(r.task)
    if i is None:
        return Decision(D.REJECTED, Code.UNKNOWN_TASK), s
    if r.needs_capability and (
        r.cap is None or r.cap.graph != s.graph.graph_id or r.cap.task != r.task
    ):
        return Decision(D.REJECTED, Code.STALE_CAPABILITY), s
    t = s.tasks[i]
    g = rules[r.kind](s, i, t, r)
    return evaluate(s, generic_checks(s, i, t, r) + g.checks, g.update, g.kind)


def journal_key_of(r: Request) -> Any:
    """The journal entry a request answers to: its key in its sender's namespace."""
    return r.journal_key


def decide(s: State, r: Request, rules: Rules = RULES,
           fresh: Callable[..., tuple[Decision, State]] | None = None) -> tuple[Decision, State]:
    """The reducer. A request without a key (bounded exploration only) skips the journal.
    ``fresh`` decides a request the journal does not answer (``decide_fresh``, or the same
    decision evaluated another way)."""
    decide_new = fresh or decide_fresh
    if r.key is None:
        return decide_new(s, r, rules)
    if not authenticated(s, r):
        return Decision(D.REJECTED, Code.NOT_AUTHENTICATED), s
    key, digest = journal_key_of(r), r.digest
    used, same, old_kind, old_code = s.journal.lookup(key, digest)
    if used is True:
        if same is True:
            return Decision(D.DUPLICATE, Code.NONE, old_kind, old_code), s
        if same is False:
            return Decision(D.REJECTED, Code.IDEMPOTENCY_CONFLICT), s
    d, s2 = decide_new(s, r, rules)
    fresh = ite(is_hold(d), s2, replace(s2, journal=s2.journal.put(key, digest, d.kind, d.code)))
    if used is False:
        return d, fresh
    return (
        Decision(
            ite(used, ite(same, D.DUPLICATE, D.REJECTED), d.kind),
            ite(used, ite(same, Code.NONE, Code.IDEMPOTENCY_CONFLICT), d.code),
            ite(used, old_kind, d.kind), ite(used, old_code, d.code),
        ),
        ite(used, s, fresh),
    )
