"""Decision coverage: the model's whole decision space as cells, and which of them the
implementation was sent.

A *cell* is one of three families, never their product:

- ``outcome``: (kind, each answer the model can give it: a decision, or a rejection
  with each code);
- ``actor``: (kind, who sends it: the role's own principal, a principal whose role the
  kind's authority does not cover (``other``), a principal without the role it claims, a
  revoked one, none (no credential the kernel issued));
- ``capability``: (kind, the K and token it carries: exact; each field of K stale, ahead
  (the numbers) or foreign (graph and task); no token, another attempt's token, a stale
  one of the same task).

``cells()`` enumerates them from the model's tables (``AUTHORITY``, ``NEEDS_CAPABILITY``,
``TOKEN_BEARERS``, ``TRANSACTION_KINDS``, ``EDGES``) and the rules themselves (the codes
each rule's guards name, the decisions its update answers, evaluated symbolically), and
gives each cell the model cannot reach its reason. ``classify`` puts one request, decided
by the model in a state, into its cells: a capability or actor cell only when that is the
request's one deviation (a request refused earlier never reaches the check).

``recording()`` instruments the lockstep driver: while it is active every implementation
system (``impl_system.ImplSystem``) keeps a shadow of the model beside it, and every
request sent to the implementation is classified into the cells it reaches.
"""
from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, replace
from typing import Any, Iterator

from wgk.model.kernel import authenticated, role_held
from wgk.model.requests import Capability, Request
from wgk.model.rules import RULES
from wgk.model.state import State
from wgk.model.vocab import (
    AUTHORITY, EDGES, NEEDS_CAPABILITY, TOKEN_BEARERS, TRANSACTION_KINDS, Actor, AttemptState,
    Code, DecisionKind, Kind,
)

FAMILIES = ("outcome", "actor", "capability")
ACTOR_CLASSES = ("own", "other", "without-role", "revoked", "none")
NUMERIC_K = ("generation", "attempt", "fence", "lease-epoch")
TOKEN_CLASSES = ("token-none", "token-other-attempt", "token-stale")
CAPABILITY_CLASSES = (("exact", "graph-foreign", "task-foreign")
                      + tuple(f"{f}-{d}" for f in NUMERIC_K for d in ("stale", "ahead"))
                      + TOKEN_CLASSES)
OUTCOMES = (tuple(d.label for d in DecisionKind if d != DecisionKind.REJECTED)
            + tuple(f"rejected:{c.label}" for c in Code if c != Code.NONE))

#: Codes every kind can be refused with: before its task or K is read.
ANY_KIND_CODES = (Code.NOT_AUTHENTICATED, Code.IDEMPOTENCY_CONFLICT, Code.ROLE_NOT_HELD,
                  Code.UNKNOWN_TASK, Code.BAD_NAME)


def cell(kind: Kind | str, family: str, value: str) -> str:
    """A cell's name: ``kind/family/value``."""
    return f"{kind.label if isinstance(kind, Kind) else kind}/{family}/{value}"


def split_cell(name: str) -> tuple[str, str, str]:
    kind, family, value = name.split("/", 2)
    return kind, family, value


# --- the decision space ---------------------------------------------------------------------


def token_kind(k: Kind) -> bool:
    """A request of ``k`` can be one that must present the attempt's token."""
    return k == Kind.RESUME or (k in NEEDS_CAPABILITY and bool(AUTHORITY[k] & TOKEN_BEARERS))


@functools.lru_cache(maxsize=1)
def _rule_answers() -> dict[Kind, tuple[frozenset, frozenset]]:
    """Per kind, the codes its rule's guards name and the decisions its update can answer
    (the rule evaluated on a symbolic task: its checks' codes are constants, its decision a
    term whose values the solver enumerates)."""
    import z3
    from wgk.conformance.z3.sym_backend import symbolic
    from wgk.model.actions import task_steps
    from wgk.model.state import Graph, initial_state
    from wgk.conformance.oracle.fuzz import FuzzConfig, fuzz_instance

    graph = Graph.build(["a", "b"], {"b": ["a"]}, graph_id="g")
    inst = fuzz_instance(FuzzConfig(tasks=2, review=True))
    requests: dict[Kind, list[Request]] = {}
    s0 = initial_state(graph)
    for i in range(2):
        for r in task_steps(inst, s0, i):
            if isinstance(r, Request):
                requests.setdefault(r.kind, []).append(r)
    out: dict[Kind, tuple[frozenset, frozenset]] = {}
    with symbolic():
        s = _symbolic_state(graph)
        for k in Kind:
            codes: set = set()
            kinds: set = set()
            variants = [replace(r, imports=1) for r in requests.get(k, [])]
            for r in requests.get(k, []) + variants + [_template(k)]:
                g = RULES[k](s, 1, s.tasks[1], r)
                codes |= {Code(c) for _, c in g.checks}
                kinds |= _values(z3, g.kind)
            out[k] = (frozenset(codes), frozenset(kinds))
    return out


def _template(k: Kind) -> Request:
    from wgk.model.requests import Owner
    from wgk.model.vocab import Phase
    extra: dict[str, Any] = {}
    if k in TRANSACTION_KINDS:
        extra = dict(expected_phase=EDGES.get(k, ((Phase.ABSENT,), 0))[0][0], expected_revision=0)
    return Request(k, sorted(AUTHORITY[k])[0], "b", key="k", owner=Owner(1, 1, 1),
                   cap=Capability("g", "b", 1, 1, 1, 1), token=1, mint=2, evidence="e",
                   correlation=1, **extra)


def _values(z3: Any, term: Any) -> set:
    if not isinstance(term, z3.ExprRef):
        return {DecisionKind(term)}
    found = set()
    for d in DecisionKind:
        solver = z3.Solver()
        solver.add(term == int(d))
        if solver.check() == z3.sat:
            found.add(d)
    return found


class _AnyEvidence:
    """A task's evidence holding any pair or none: each pair asked about is a fresh Bool."""

    def __init__(self, prefix: str):
        import z3
        self.z3, self.prefix, self.bits = z3, prefix, {}

    def has(self, item) -> Any:
        if item not in self.bits:
            self.bits[item] = self.z3.Bool(f"{self.prefix}.ev.{item}")
        return self.bits[item]

    def add(self, item) -> "_AnyEvidence":
        return self

    def count(self, pred) -> Any:
        return self.z3.Int(f"{self.prefix}.ev.count")


def _symbolic_state(graph) -> State:
    from wgk.conformance.z3.sym_state import Space, fresh_journal, fresh_task
    space = Space(graph, (), (), 0, 0, lambda shape, slots: "")
    tasks = []
    for name in graph.tasks:
        t = fresh_task(space, f"cells.{name}")
        object.__setattr__(t, "evidence", _AnyEvidence(f"cells.{name}"))
        tasks.append(t)
    import z3
    return State(graph=graph, tasks=tuple(tasks), target=z3.Int("cells.target"),
                 now=z3.Int("cells.now"), journal=fresh_journal(space, "cells"))


def outcome_reasons(k: Kind) -> dict[str, str | None]:
    """Each outcome of ``k``: None when the model can answer it, else why it cannot."""
    rule_codes, rule_kinds = _rule_answers()[k]
    codes = {c: "checked before anything else" for c in ANY_KIND_CODES}
    if AUTHORITY[k] != frozenset(Actor):
        codes[Code.NOT_AUTHORIZED] = "authority"
    if k in NEEDS_CAPABILITY:
        codes[Code.UNKNOWN_ATTEMPT] = codes[Code.STALE_CAPABILITY] = "K"
    if token_kind(k):
        codes[Code.TOKEN_MISMATCH] = "token"
    if k in TRANSACTION_KINDS:
        codes[Code.TERMINAL_ALREADY] = codes[Code.CAS_MOVED] = "transaction"
    if k in EDGES:
        codes[Code.ILLEGAL_PHASE_EDGE] = "edge"
    for c in rule_codes:
        codes[c] = "rule"
    out: dict[str, str | None] = {"duplicate": None}
    for d in (DecisionKind.APPLIED, DecisionKind.EVIDENCE_ONLY):
        out[d.label] = None if d in rule_kinds else f"the {k.label} rule never answers {d.label}"
    for c in Code:
        if c == Code.NONE:
            continue
        why = None if c in codes else _code_reason(k, c)
        out[f"rejected:{c.label}"] = why
    return out


def _code_reason(k: Kind, c: Code) -> str:
    if c == Code.NOT_AUTHORIZED:
        return f"every role may send {k.label}"
    if c in (Code.UNKNOWN_ATTEMPT, Code.STALE_CAPABILITY):
        return f"{k.label} carries no K"
    if c == Code.TOKEN_MISMATCH:
        return f"no request of {k.label} presents a token (no token-bearing role sends it)"
    if c in (Code.TERMINAL_ALREADY, Code.CAS_MOVED):
        return f"{k.label} does not move the SaveTransaction"
    if c == Code.ILLEGAL_PHASE_EDGE:
        return f"{k.label} is no main-line edge"
    return f"no check of {k.label} names {c.label}"


def actor_reasons(k: Kind) -> dict[str, str | None]:
    out: dict[str, str | None] = {a: None for a in ACTOR_CLASSES}
    if AUTHORITY[k] == frozenset(Actor):
        out["other"] = f"every role may send {k.label}: no role lacks its authority"
    return out


def capability_reasons(k: Kind) -> dict[str, str | None]:
    if k not in NEEDS_CAPABILITY and k != Kind.RESUME:
        return {c: f"{k.label} carries no K" for c in CAPABILITY_CLASSES}
    out: dict[str, str | None] = {c: None for c in CAPABILITY_CLASSES}
    if not token_kind(k):
        for c in TOKEN_CLASSES:
            out[c] = f"no role that presents a token may send {k.label}"
    return out


@functools.lru_cache(maxsize=1)
def cells() -> dict[str, str | None]:
    """Every cell of every kind: None when the model can reach it, else the reason it cannot."""
    out: dict[str, str | None] = {}
    for k in Kind:
        for family, reasons in (("outcome", outcome_reasons(k)), ("actor", actor_reasons(k)),
                                ("capability", capability_reasons(k))):
            for value, why in reasons.items():
                out[cell(k, family, value)] = why
    return out


def reachable() -> list[str]:
    return [c for c, why in cells().items() if why is None]


# --- classifying one request ----------------------------------------------------------------


def outcome_of(decision: dict) -> str:
    d = decision.get("decision", "?")
    return f"{d}:{decision['code']}" if d == "rejected" and decision.get("code") else d


def classify(s: State, r: Request, decision: dict, history: dict[int, set]) -> list[str]:
    """The cells the request ``r`` reaches in state ``s``, answered ``decision`` by the model
    (``history``: per task index, every token its attempts were opened with)."""
    out = [cell(r.kind, "outcome", outcome_of(decision))]
    if decision.get("code") == Code.BAD_NAME.label:    # refused as it was read: nothing checked
        return out
    fresh = r.key is None or s.journal.lookup(r.journal_key, r.digest)[0] is not True
    actor = _actor_class(s, r, fresh)
    if actor is not None and s.graph.closed:
        out.append(cell(r.kind, "actor", actor))
    if fresh and authenticated(s, r) and role_held(s, r):
        c = _capability_class(s, r, history)
        if c is not None:
            out.append(cell(r.kind, "capability", c))
    return out


def _actor_class(s: State, r: Request, fresh: bool) -> str | None:
    if r.principal is None or r.principal not in s.graph.principals:
        return "none"
    if r.principal in s.revoked:
        return "revoked"
    if not fresh:
        return None
    if r.actor not in s.graph.principals[r.principal]:
        return "without-role"
    return "own" if r.authorized else "other"


def _capability_class(s: State, r: Request, history: dict[int, set]) -> str | None:
    if not r.authorized or (r.kind not in NEEDS_CAPABILITY and not r.needs_token):
        return None
    i = s.graph.index.get(r.task)
    if i is None:
        return None
    t = s.tasks[i]
    off: list[str] = []
    if r.kind in NEEDS_CAPABILITY:
        c = r.cap
        if c is None or t.attempt_state == AttemptState.NONE:
            return None
        if c.graph != s.graph.graph_id:
            off.append("graph-foreign")
        if c.task != r.task:
            off.append("task-foreign")
        for name, have, sent in (("generation", t.generation, c.generation),
                                 ("attempt", t.attempt, c.attempt), ("fence", t.fence, c.fence),
                                 ("lease-epoch", t.lease_epoch, c.lease_epoch)):
            if sent < have:
                off.append(f"{name}-stale")
            elif sent > have:
                off.append(f"{name}-ahead")
    if r.needs_token:
        off += _token_class(s, i, r, history)
    if not off:
        return "exact"
    return off[0] if len(off) == 1 else None


def _token_class(s: State, i: int, r: Request, history: dict[int, set]) -> list[str]:
    t = s.tasks[i]
    if r.token == 0:
        return ["token-none"]
    if t.token != 0 and r.token == t.token:
        return []
    if r.token in history.get(i, ()):
        return ["token-stale"]
    if any(r.token in toks or r.token == s.tasks[j].token
           for j, toks in history.items() if j != i):
        return ["token-other-attempt"]
    return ["token-unknown"]


# --- the instrumentation --------------------------------------------------------------------

_SINK: dict[str, set | None] = {"cells": None}


@contextlib.contextmanager
def recording() -> Iterator[set]:
    """While active, every implementation system created records the cells of every request
    it is sent into the set yielded (nested recordings each see their own)."""
    previous = _SINK["cells"]
    found: set = set()
    _SINK["cells"] = found
    try:
        yield found
    finally:
        _SINK["cells"] = previous
        if previous is not None:
            previous |= found


def active() -> bool:
    return _SINK["cells"] is not None


@dataclass
class Shadow:
    """The model beside one implementation system: each step the implementation takes, the
    shadow takes too; each request is classified in the model's state before it. A step the
    model cannot take ends the shadow (the lockstep comparison reports the divergence)."""

    model: Any
    history: dict
    alive: bool = True
    #: the model is the lockstep's own reference, which takes each step before the shadow is
    #: told of it (``following``)
    follows: bool = False

    @staticmethod
    def following(model: Any) -> "Shadow | None":
        """A shadow that decides nothing itself: it reads each request's decision off ``model``,
        a run of the model from the same start that takes every step just before this shadow is
        told of it (the lockstep's reference, stepped first), and classifies it in the state
        before it, as a shadow of its own would have decided it there. A step the model did not
        take (it raised) ends the shadow, as it ends one deciding on its own."""
        if not active():
            return None
        shadow = Shadow(model, {}, follows=True)
        shadow._note()
        return shadow

    @staticmethod
    def of(source: Any, initial: dict | None) -> "Shadow | None":
        if not active():
            return None
        from wgk.conformance.oracle.systems import ModelSystem, StepError
        try:               # it classifies requests: no invariant evaluated (the lockstep's model does)
            model = ModelSystem(source, initial, checking=False)
        except StepError:
            return None
        shadow = Shadow(model, {})
        shadow._note()
        return shadow

    def _note(self) -> None:
        for i, t in enumerate(self.model.state.tasks):
            if t.token:
                self.history.setdefault(i, set()).add(t.token)

    def step(self, step: dict) -> None:
        if not self.alive:
            return
        from wgk.conformance.oracle.systems import StepError, decide_wire
        from wgk.conformance.oracle.wire import WireError, request_from_wire
        sink = _SINK["cells"]
        if self.follows:
            if getattr(self.model, "applied", None) is not step:
                self.alive = False              # the model did not take it
                return
            if "request" in step and sink is not None:
                s, r, d, _ = self.model.last
                sink.update(classify(s, r, d.to_json(), self.history))
            self._note()
            return
        try:
            if "request" in step:
                s = self.model.state
                r = request_from_wire(step["request"], self.model.names, "/request")
                d, self.model.state = decide_wire(s, r, step["request"], self.model.rules)
                if sink is not None:
                    sink.update(classify(s, r, d.to_json(), self.history))
            else:
                self.model.apply(step)
        except (StepError, WireError):
            self.alive = False
            return
        self._note()


# --- reports --------------------------------------------------------------------------------


def per_kind(covered: set, unreached: dict[str, str] | None = None) -> dict[str, dict]:
    """Per kind: reachable, covered and unreachable cells (with their reasons; ``unreached``:
    the cells the tables allow that are proved unreachable, with the proof as the reason,
    listed as unreachable)."""
    out: dict[str, dict] = {}
    for name, why in cells().items():
        why = why if why is not None else (unreached or {}).get(name)
        kind, family, value = split_cell(name)
        row = out.setdefault(kind, {"reachable": 0, "covered": 0, "uncovered": [],
                                    "unreachable": {}})
        if why is not None:
            row["unreachable"][f"{family}/{value}"] = why
            continue
        row["reachable"] += 1
        if name in covered:
            row["covered"] += 1
        else:
            row["uncovered"].append(f"{family}/{value}")
    return out


__all__ = ["ACTOR_CLASSES", "CAPABILITY_CLASSES", "FAMILIES", "OUTCOMES", "Shadow", "cell",
           "cells", "classify", "per_kind", "reachable", "recording", "split_cell"]
