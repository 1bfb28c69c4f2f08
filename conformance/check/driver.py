"""A well-behaved client of the model, for tests, examples and trace import.

``Driver.send`` fills in what a correct caller would: the current capability
tuple K and the attempt's capability token, the expected phase and revision, a
fresh idempotency key, and a fresh token for a request that opens an attempt. Any of
them can be given explicitly to play a stale, racing or replaying caller.
After every step the driver can check every invariant and the ``TOUCHES``
frame condition, raising ``ModelViolation`` with the failing ids.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from wgk.model.env import EnvKind, EnvStep, apply_env
from wgk.model.invariants import step_violations, violations
from wgk.model.kernel import Decision, Rules, decide
from wgk.model.requests import Capability, Request
from wgk.model.rules import RULES, TOUCHES, changed_fields
from wgk.model.state import Graph, State, initial_state
from wgk.model.vocab import Actor, Exit, Kind, Phase, TRANSACTION_KINDS, NEEDS_CAPABILITY

CURRENT = "current"


class ModelViolation(AssertionError):
    """An invariant or a frame condition failed after a step."""


def current_capability(s: State, task: str) -> Capability:
    t = s.task(task)
    return Capability(s.graph.graph_id, task, t.generation, t.attempt, t.fence, t.lease_epoch)


def current_phase(s: State, task: str) -> Phase | Exit:
    t = s.task(task)
    return Exit(t.exit) if t.exit != Exit.NONE else Phase(t.phase)


@dataclass
class Driver:
    graph: Graph
    state: State | None = None
    rules: Rules = field(default_factory=lambda: RULES)
    check: bool = True
    history: list = field(default_factory=list)
    _n: int = 0
    _minted: int = 0

    def __post_init__(self) -> None:
        if self.state is None:
            self.state = initial_state(self.graph)

    def request(self, kind: Kind, actor: Actor, task: str, *, key: str | None = CURRENT,
                cap: Any = CURRENT, expected_phase: Any = CURRENT,
                expected_revision: Any = CURRENT, token: Any = CURRENT, mint: Any = CURRENT,
                **params: Any) -> Request:
        """Build a request as a correct caller would, with any field overridden."""
        s = self.state
        known = task in s.graph.index
        if key == CURRENT:
            self._n += 1
            key = f"{kind.label}:{task}:{self._n}"
        if cap == CURRENT:
            cap = current_capability(s, task) if known and kind in NEEDS_CAPABILITY else None
        if kind in TRANSACTION_KINDS:
            if expected_phase == CURRENT:
                expected_phase = current_phase(s, task) if known else Phase.ABSENT
            if expected_revision == CURRENT:
                expected_revision = s.task(task).revision if known else 0
        else:
            expected_phase = None if expected_phase == CURRENT else expected_phase
            expected_revision = None if expected_revision == CURRENT else expected_revision
        if kind in (Kind.DISPATCH, Kind.RETRY) and "expected_attempt" not in params and known:
            params["expected_attempt"] = s.task(task).attempt
        if kind in (Kind.RESET, Kind.REOPEN) and "expected_generation" not in params and known:
            params["expected_generation"] = s.task(task).generation
        r = Request(kind, actor, task, key=key, cap=cap, expected_phase=expected_phase,
                    expected_revision=expected_revision, **params)
        if mint == CURRENT:
            self._minted += 1
            mint = 90000 + self._minted if r.mints else 0
        if token == CURRENT:
            token = s.task(task).token if known and r.needs_token else 0
        return replace(r, token=token, mint=mint)

    def apply(self, r: Request) -> Decision:
        """Decide an explicit request and advance the state."""
        before = self.state
        d, after = decide(before, r, self.rules)
        if self.check:
            bad = violations(after) + step_violations(before, r, d, after)
            if r.task in before.graph.index:
                extra = changed_fields(before, after, before.graph.index[r.task]) - TOUCHES[r.kind]
                if extra:
                    bad.append(f"touches:{r.kind.label}:{','.join(sorted(extra))}")
                others = [j for j in range(len(before.tasks))
                          if j != before.graph.index[r.task] and before.tasks[j] != after.tasks[j]]
                if others:
                    bad.append(f"touches:{r.kind.label}:other-task")
            if bad:
                raise ModelViolation(f"after {r.kind.label} on {r.task}: " + ", ".join(bad))
        self.state = after
        self.history.append((r, d))
        return d

    def send(self, kind: Kind, actor: Actor, task: str, **kw: Any) -> Decision:
        return self.apply(self.request(kind, actor, task, **kw))

    def env(self, kind: EnvKind, task: str = "", **kw: Any) -> None:
        before = self.state
        self.state = apply_env(before, EnvStep(kind, task, **kw))
        self.history.append((EnvStep(kind, task, **kw), None))
        if self.check:
            bad = violations(self.state)
            if bad:
                raise ModelViolation(f"after env {kind.label}: " + ", ".join(bad))

    def task(self, name: str):
        return self.state.task(name)
