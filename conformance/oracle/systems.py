"""Systems under comparison, behind one interface.

A *system* takes the steps of a trace: ``apply(step)`` answers a request step
with its wire decision and takes an environment step (answering ``None``);
``project()`` is its observable projection (docs/vocabulary.md); ``check()``
lists the invariants its last step broke (``[]`` for a system that cannot
tell); ``close()`` releases it. A ``crash`` environment step is performed by
the system on itself: the model loses nothing, the implementation closes and
reopens its database, an external implementation is killed with ``kill -9``
and restarted. The model, the implementation and an external implementation
over JSON lines all present this interface, so replay, generated runs and crash
cuts share one code path.
"""
from __future__ import annotations

import copy

import hashlib
import hmac
import secrets
from dataclasses import fields, replace
from typing import Any, Protocol

from wgk.model.env import EnvError, apply_env
from wgk.model.invariants import always, step_violations, violations
from wgk.model.kernel import Decision, Rules, authenticated, decide, revoke_principal
from wgk.model.names import refused_name
from wgk.model.observe import Names, observe
from wgk.model.projections import ready_tasks
from wgk.model.protected import NOTHING_PROTECTED, Protected, touches
from wgk.model.rules import RULES
from wgk.model.state import Graph, GraphError, State, TaskState, initial_state
from wgk.model.vocab import Actor, AttemptState, Code, DecisionKind, OwnerSeen

from wgk.conformance.oracle.wire import WireError, env_from_wire, request_from_wire


class StepError(ValueError):
    """A step a system cannot take: an impossible environment step, a request it cannot build."""


class System(Protocol):
    """One side of a comparison: the model, the implementation, an external process."""

    name: str

    def apply(self, step: dict) -> dict | None: ...
    def project(self) -> dict: ...
    def check(self) -> list[str]: ...
    def close(self) -> None: ...


#: The environment step "the daemon converges" (the model: every due scheduled action; the
#: implementation: ``converge()``).
CONVERGE = "converge"

#: The step "the operator revokes a principal's credential" (``{"env": "revoke", "principal":
#: name}``; the model: ``revoke_principal``; the implementation: its principal revocation).
REVOKE = "revoke"

def with_ready(projection: dict, ready) -> dict:
    """The projection with ``ready``: the open tasks whose dependencies are all Done, by name
    (the model's readiness, the implementation's indexed one)."""
    return dict(projection, ready=sorted(ready))


#: Step fields that annotate a trace; the wire step is the rest.
ANNOTATIONS = ("expect", "expect-facts", "from", "note")


def env_part(step: dict) -> dict:
    """The environment step itself, without the trace's annotations."""
    return {k: v for k, v in step.items() if k not in ANNOTATIONS}


# --- principals: the credentials a run binds to a trace's principal names ----------------------

#: The oracle's key for this process: each trace principal's secret is derived from it.
_ORACLE_KEY = secrets.token_bytes(32)


def credential_of(principal: str | None) -> str | None:
    """The credential the oracle sends for a trace principal (``None``: no credential)."""
    if principal is None:
        return None
    secret = hmac.new(_ORACLE_KEY, principal.encode(), hashlib.sha256).hexdigest()
    return f"{principal}.{secret}"


def token_secret(name: str) -> str:
    """The secret the oracle binds to a trace's symbolic token name for this run (256 bits,
    hex): what the process the attempt was opened for presents."""
    return hmac.new(_ORACLE_KEY, b"token:" + name.encode(), hashlib.sha256).hexdigest()


def token_hash(name: str) -> str:
    """The sha256 of a symbolic token's secret: what an opener sends as ``mint``."""
    return hashlib.sha256(token_secret(name).encode()).hexdigest()


def bind_tokens(wire: Any) -> Any:
    """A trace request as its sender sends it: a symbolic ``token`` name becomes the secret,
    a symbolic ``mint`` name the secret's sha256 (other values are sent as written)."""
    if not isinstance(wire, dict) or not ({"token", "mint"} & set(wire)):
        return wire
    out = dict(wire)
    if isinstance(out.get("token"), str):
        out["token"] = token_secret(out["token"])
    if isinstance(out.get("mint"), str):
        out["mint"] = token_hash(out["mint"])
    return out


def split_principal(wire: Any) -> tuple[Any, str | None]:
    """The request as its sender sends it (tokens bound, ``bind_tokens``) without its
    ``principal``, and the credential to send it with."""
    wire = bind_tokens(wire)
    if not isinstance(wire, dict) or "principal" not in wire:
        return wire, None
    body = {k: v for k, v in wire.items() if k != "principal"}
    return body, credential_of(wire["principal"])


# --- a trace's graph and initial facts, in the model ----------------------------------------


def daemon_principal(spec: dict) -> str | None:
    """The trace principal that sends the daemon's convergence: the first declared one holding
    the daemon role (``None``: an open graph, or no daemon declared)."""
    for p in spec.get("principals", []):
        if "daemon" in p.get("roles", []):
            return p["name"]
    return None


def principals_of(spec: dict) -> dict | None:
    """A trace's declared principals and their roles (``None``: an open graph)."""
    if "principals" not in spec:
        return None
    out = {}
    for n, p in enumerate(spec["principals"]):
        try:
            out[p["name"]] = [Actor.parse(a) for a in p.get("roles", [])]
        except (KeyError, TypeError, ValueError) as e:
            raise StepError(f"/graph/principals/{n}: {e}") from None
    return out


def protected_of(spec: dict, steps: list, names: Names | None) -> Protected:
    """The contents a trace marks as touching a protected path: those of the edits whose
    files (``work.txt`` and its ``paths``) a pattern of ``graph.protected-paths`` matches."""
    patterns = spec.get("protected-paths", [])
    if not patterns or names is None:
        return NOTHING_PROTECTED
    marked = {names.cid(s["content"]) for s in steps
              if s.get("env") == "edit" and s.get("content")
              and touches(patterns, ["work.txt", *s.get("paths", [])]) is not None}
    return Protected(frozenset(marked))


def graph_of(spec: dict, names: Names | None = None, steps: list = ()) -> Graph:
    """The model's Graph for a trace's ``graph`` section (and the contents its ``steps``
    mark protected, interned in ``names``)."""
    tasks = spec["tasks"]
    try:
        return Graph.build(
            [t["name"] for t in tasks], {t["name"]: t.get("deps", []) for t in tasks},
            graph_id=spec.get("id", "g"),
            review_required=[t["name"] for t in tasks if t.get("review-required")],
            requires_assignment=[t["name"] for t in tasks if t.get("requires-assignment")],
            retry_budget={t["name"]: t["retry-budget"] for t in tasks if "retry-budget" in t},
            principals=principals_of(spec),
            protected=protected_of(spec, list(steps), names),
            protected_paths=spec.get("protected-paths", ()),
        )
    except GraphError as e:
        raise StepError(f"/graph: {e}") from None


def seed_task(t: TaskState, seed: dict, names: Names, target: int) -> TaskState:
    """A task as a trace's ``initial`` section describes it: an attempt that already exists."""
    ch: dict[str, Any] = {}
    a = seed.get("attempt")
    if a is not None:
        state = AttemptState.parse(a.get("state", "running"))
        live = state == AttemptState.RUNNING
        owner = a.get("owner") or {}
        birth = owner.get("birth", 0)
        leases = a.get("leases", {"worktree": live, "session": live, "finish": False})
        worktree = names.cid(a["worktree"]) if a.get("worktree") else target
        ch.update(
            generation=a["generation"], attempt=a["attempt"], fence=a["fence"],
            lease_epoch=a["lease-epoch"], attempt_state=state,
            owner_pid=owner.get("pid", 0) if live else 0, owner_birth=birth if live else 0,
            session=names.sid(owner.get("session")) if live else 0,
            wrapper_epoch=owner.get("wrapper-epoch", 1) if live else 0,
            child_epoch=owner.get("child-epoch", 1) if live else 0,
            owner_seen=OwnerSeen.parse(a.get("owner-seen", "unverified")),
            token=names.tid(a.get("token")),
            proc_birth=birth if live and a.get("alive", True) else 0,
            worktree_lease=leases.get("worktree", False), session_lease=leases.get("session", False),
            finish_lease=leases.get("finish", False),
            worktree=worktree if live else 0, worktree_present=live,
            origin=(names.cid(a["origin"]) if a.get("origin") else target) if live else 0,
        )
        ch["built_on"] = ch["origin"]          # a seeded attempt's base is its origin
        ch["worktree_base"] = ch["origin"]     # and its worktree is built on it
    return replace(t, **ch) if ch else t


def initial_model_state(graph: dict, initial: dict, names: Names, steps: list = ()) -> State:
    g = graph_of(graph, names, steps)
    target = names.cid(graph.get("target", "main-0"))
    s = initial_state(g, target=target)
    for name, seed in (initial or {}).items():
        if name not in g.index:
            raise StepError(f"/initial/{name}: unknown task")
        i = g.index[name]
        s = s.put(i, seed_task(s.tasks[i], seed, names, target))
    return s


# --- the model as a system ---------------------------------------------------------------


def decide_wire(s: State, r: Any, wire: Any, rules: Rules = RULES,
                decider: Any = None) -> tuple[Decision, State]:
    """The model's decision for a wire request. A name outside the grammar
    (``wgk.model.names``) is a wire-level refusal: once the sender is authenticated and
    the key is not in its journal (which answers as always), ``rejected/bad-name``,
    nothing journaled, nothing changed."""
    if (refused_name(wire) is not None and authenticated(s, r)
            and (r.key is None or s.journal.lookup(r.journal_key, r.digest)[0] is not True)):
        return Decision(DecisionKind.REJECTED, Code.BAD_NAME), s
    return decide(s, r, rules) if decider is None else decider.decide(s, r)


#: whether a new ModelSystem evaluates the rules and properties by the compiled model
#: (``wgk.conformance.check.compiled``) or by the interpreter (``wgk replay --interpreted``)
COMPILED = {"default": True}


def use_compiled(flag: bool) -> None:
    """Make the compiled model (True) or the interpreter (False) the default of new models."""
    COMPILED["default"] = flag



class ModelSystem:
    """The executable model: decide() for requests, apply_env() for environment steps.

    ``crash`` and ``lost-response`` change nothing in the model: every model field
    is durable, and a lost response only matters to the client that re-sends."""

    name = "model"

    def __init__(self, source: Any, initial: dict | None = None, *, rules: Rules = RULES,
                 compiled: bool | None = None, checking: bool = True):
        """``source`` is a Trace, or a trace's ``graph`` section (then ``initial`` may seed it).
        ``checking`` False: the run only decides and projects (a caller that never asks
        ``check``, as the crash cuts): no invariant is evaluated, and ``check`` raises."""
        self.checking = checking
        graph = getattr(source, "graph", source)
        initial = getattr(source, "initial", initial)
        self.names = Names()
        self.rules = rules
        self.state = initial_model_state(graph, initial or {}, self.names,
                                         getattr(source, "steps", ()))
        self.graph = self.state.graph
        self.daemon = daemon_principal(graph)
        self.last: tuple | None = None
        self.applied: dict | None = None
        self.compiled = None
        if COMPILED["default"] if compiled is None else compiled:
            from wgk.conformance.check.compiled import for_graph
            self.compiled = for_graph(self.state, rules, always("state"), (), always("step"))
        self._violations = self._state_violations(self.state) if checking else None

    def apply(self, step: dict) -> dict | None:
        """Take ``step``; ``applied`` is then ``step`` (None while it is taken, and after a step
        that raised), ``last`` the request's (state before, request, decision, state after)."""
        self.applied = None
        out = self._apply(step)
        self.applied = step
        return out

    def _apply(self, step: dict) -> dict | None:
        before = self.state
        if "request" in step:
            try:
                r = request_from_wire(step["request"], self.names, "/request")
            except WireError as e:
                raise StepError(str(e)) from None
            d, self.state = decide_wire(before, r, step["request"], self.rules, self.compiled)
            self.last = (before, r, d, self.state)
            self._violations = (self._state_violations(self.state)
                                + self._step_violations(*self.last)) if self.checking else None
            return d.to_json()
        if step.get("env") == CONVERGE:
            return self._converge()
        if step.get("env") == REVOKE:
            self.state = self._revoked(before, step)
            self.last = None
            self._violations = self._state_violations(self.state) if self.checking else None
            return None
        try:
            self.state = apply_env(before, env_from_wire(env_part(step), self.names))
        except (EnvError, WireError) as e:
            raise StepError(str(e)) from None
        self.last = None
        self._violations = self._state_violations(self.state) if self.checking else None
        return None

    @staticmethod
    def _revoked(s: State, step: dict) -> State:
        try:
            return revoke_principal(s, step.get("principal"))
        except ValueError as e:
            raise StepError(str(e)) from None

    def _converge(self) -> None:
        """The daemon converges: every due scheduled action (``daemon.converge``)."""
        from wgk.conformance.oracle.daemon import converge
        broken: list[str] = []
        converge(self, after_each=lambda: broken.extend(v for v in self.check() if v not in broken)
                 if self.checking else None)
        self.last = None
        self._violations = broken + [v for v in self._state_violations(self.state)
                                     if v not in broken] if self.checking else None
        return None

    def _state_violations(self, s: State) -> list[str]:
        """``violations(s)``, by the compiled model when there is one."""
        if self.compiled is None or len(s.tasks) != self.compiled.n or s.graph is not self.graph:
            return violations(s)
        bad = set()
        for i in range(len(s.tasks)):
            bad.update(self.compiled.verdict(s, i)[0])
        return [p.id for p in always("state") if p.id in bad]

    def _step_violations(self, s: State, r: Any, d: Decision, s2: State) -> list[str]:
        """``step_violations``, by the compiled model when there is one."""
        if self.compiled is None or s.graph is not self.graph:
            return step_violations(s, r, d, s2)
        return list(self.compiled.step_verdict(s, r, d, s2))

    def project(self) -> dict:
        return self.project_state(self.state)

    def project_state(self, state: Any) -> dict:
        """The projection of ``state``, a state of this model's run (its names are this run's)."""
        return with_ready(observe(state, self.names), ready_tasks(state))

    def check(self) -> list[str]:
        if self._violations is None:
            raise RuntimeError("this run of the model checks no invariant (checking=False)")
        return list(self._violations)


    def possible(self, step: dict) -> None:
        """Raise ``StepError`` when this model cannot take ``step`` (an environment step that
        cannot happen here, a request it cannot read); nothing changes either way."""
        saved = self.snapshot()
        try:
            if "request" in step or step.get("env") == CONVERGE:
                copy.copy(self).apply(step)       # its own state; the names restored below
                return
            if step.get("env") == REVOKE:
                self._revoked(self.state, step)
                return
            try:
                apply_env(self.state, env_from_wire(env_part(step), self.names))
            except (EnvError, WireError) as e:
                raise StepError(str(e)) from None
        finally:
            self.restore(saved)

    def snapshot(self) -> Any:
        """This run's state and every table of its names (content, sessions, tokens, external
        waits' correlations, provider routes: a table left out would keep what a later step
        interned, and a restored run would name a route or a wait the trace never named)."""
        return (self.state, {f.name: dict(getattr(self.names, f.name)) for f in fields(Names)})

    def restore(self, snap: Any) -> None:
        """Back to ``snap`` (this run's, or another run's of an equal graph: that graph is
        then this run's, so that its states are still evaluated by the compiled model, which
        is one for equal graphs)."""
        self.state, tables = snap
        for name, table in tables.items():
            setattr(self.names, name, dict(table))
        g = self.state.graph
        if g is not self.graph and self.compiled is not None:
            from wgk.conformance.check.compiled import graph_value
            mine = graph_value(self.graph)
            if mine is not None and graph_value(g) == mine:
                self.graph = g

    def close(self) -> None:
        pass
