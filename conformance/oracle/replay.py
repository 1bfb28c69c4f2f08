"""Replay a ``wgk-trace/1`` through one or more systems and compare with its expectations.

Every decision is compared with the trace's expectation, the expected facts
with each system's projection, and — when more than one system runs — every
other system against the first (the model) through the ``Oracle`` after every
step: the same decision and the same projection. Verdicts are data:
``replay`` returns a ``TraceResult`` with one ``StepResult`` per step and a
list of ``Divergence`` records naming trace, step, system, request, expected
and actual, and for facts a field-by-field diff.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from wgk.model.vocab import TOKEN_BEARERS, Exit, Kind, Phase

from wgk.conformance.oracle.lockstep import (
    Divergence, Observed, Oracle, _step_label, match_facts, meets_expectations,
)
from wgk.conformance.oracle.systems import ModelSystem, StepError, System
from wgk.conformance.traces.format import Trace


@dataclass(frozen=True)
class StepResult:
    """One step: what the trace expected and what each system answered."""

    index: int
    step: dict
    expected: dict | None
    decisions: dict[str, dict | None]
    ok: bool

    def to_json(self) -> dict:
        return {"index": self.index, "step": _step_label(self.step), "expected": self.expected,
                "decisions": self.decisions, "ok": self.ok}


@dataclass(frozen=True)
class TraceResult:
    """The verdict of one trace: pass iff no divergence."""

    id: str
    path: str | None
    systems: tuple[str, ...]
    steps: tuple[StepResult, ...]
    divergences: tuple[Divergence, ...]
    crash_cuts: int = 0

    @property
    def passed(self) -> bool:
        return not self.divergences

    @property
    def verdict(self) -> str:
        return "pass" if self.passed else "fail"

    def to_json(self) -> dict:
        return {"id": self.id, "path": self.path, "verdict": self.verdict,
                "systems": list(self.systems), "steps": len(self.steps),
                "crash_cuts": self.crash_cuts,
                "divergences": [d.to_json() for d in self.divergences]}


# --- the runner ----------------------------------------------------------------------------


def _apply(system: System, trace: Trace, n: int, step: dict, out: list[Divergence]):
    """Apply one step to one system; a step it cannot take becomes a divergence."""
    try:
        return True, system.apply(step)
    except StepError as e:
        out.append(Divergence(trace.id, n, system.name, "step-error", step, None, str(e)))
        return False, None


def replay(trace: Trace, systems: Sequence[System] | None = None) -> TraceResult:
    """Run every step through every system and compare with the trace.

    The first system is the reference; every other one is held to it by the
    oracle after each step (lockstep)."""
    systems = list(systems) if systems is not None else [ModelSystem(trace)]
    ref, others = systems[0], systems[1:]
    oracle = Oracle(ref, trace=trace.id)
    divs: list[Divergence] = []
    results: list[StepResult] = []
    for s in systems:
        bad = s.check()
        if bad:
            divs.append(Divergence(trace.id, None, s.name, "invariant", None, [], bad))
    for n, step in enumerate(trace.steps):
        before = len(divs)
        decisions: dict[str, dict | None] = {}
        oracle.n = n - 1
        try:
            decisions[ref.name] = oracle.advance(step)
            divs += meets_expectations(trace.id, n, step, ref, decisions[ref.name])
            ref_ok = True
        except StepError as e:
            divs.append(Divergence(trace.id, n, ref.name, "step-error", step, None, str(e)))
            ref_ok = False
        for s in others:
            took, decisions[s.name] = _apply(s, trace, n, step, divs)
            if not took:
                continue
            divs += meets_expectations(trace.id, n, step, s, decisions[s.name])
            if ref_ok:
                observed = Observed(decisions[s.name], s.project())
                divs += [d for d in oracle.compare(step, decisions[ref.name], observed, system=s.name)
                         if d.what != "invariant"]
        results.append(StepResult(n, step, step.get("expect"), decisions, len(divs) == before))
    for s in systems:
        if trace.expect:
            diffs = match_facts(trace.expect, s.project())
            if diffs:
                divs.append(Divergence(trace.id, None, s.name, "final-facts", None, trace.expect,
                                       None, tuple(diffs)))
    return TraceResult(trace.id, trace.path, tuple(s.name for s in systems), tuple(results),
                       tuple(divs))


def replay_model(trace: Trace) -> TraceResult:
    """The trace through the model alone."""
    return replay(trace, [ModelSystem(trace)])


def states(trace: Trace) -> list[tuple[dict | None, dict | None, dict]]:
    """``(step, decision, projection)`` for the initial state and after every step, by the model
    (the initial entry has step and decision None). Used by the ITF export, whose state
    variables are the target, the clock, the tasks and the journal (``ready`` is derived)."""
    m = ModelSystem(trace)
    state = lambda: {k: v for k, v in m.project().items() if k != "ready"}   # derived, not a variable
    out: list[tuple[dict | None, dict | None, dict]] = [(None, None, state())]
    for step in trace.steps:
        out.append((step, m.apply(step), state()))
    return out


# --- building traces ---------------------------------------------------------------------------


CURRENT = "current"


def _expect(e: str | dict | None) -> dict | None:
    """``"applied"``, ``"rejected:cas-moved"``, ``"duplicate"`` ... or a decision object."""
    if e is None or isinstance(e, dict):
        return e
    decision, _, code = e.partition(":")
    return {"decision": decision, "code": code} if code else {"decision": decision}


#: The labels of the actors that speak for an attempt's own process.
BEARER_LABELS = frozenset(a.label for a in TOKEN_BEARERS)


class TraceBuilder:
    """Write a trace step by step as a well-behaved client would send it.

    The builder tracks the model state only to fill in what a correct caller
    knows (the current K, expected phase and revision, expected attempt and
    generation); every expected decision and fact is given explicitly by the
    author, never taken from the model. Any field can be overridden to play a
    stale, racing or replaying caller."""

    def __init__(self, id: str, title: str, source: dict, description: str, tasks: list[dict],
                 *, graph_id: str = "g", target: str = "main-0", initial: dict | None = None):
        self.trace = Trace(id=id, title=title, source=source, description=description,
                           graph={"id": graph_id, "target": target, "tasks": tasks},
                           initial=initial or {})
        self.model = ModelSystem(self.trace)
        self._n = 0
        self._minted = 0

    # what a correct caller knows
    def cap(self, task: str) -> dict:
        t = self.model.state.task(task)
        return {"graph": self.trace.graph["id"], "task": task, "generation": t.generation,
                "attempt": t.attempt, "fence": t.fence, "lease-epoch": t.lease_epoch}

    def phase(self, task: str) -> str:
        t = self.model.state.task(task)
        return Exit(t.exit).label if t.exit != Exit.NONE else Phase(t.phase).label

    def request(self, kind: str, actor: str, task: str, *, key: str | None = None,
                cap: Any = CURRENT, expected_phase: Any = CURRENT, expected_revision: Any = CURRENT,
                **params: Any) -> dict:
        from wgk.model.vocab import NEEDS_CAPABILITY, TRANSACTION_KINDS
        k = Kind.parse(kind)
        known = task in self.model.state.graph.index
        if key is None:
            self._n += 1
            key = f"{kind}:{task}:{self._n}"
        r: dict[str, Any] = {"kind": kind, "actor": actor, "task": task, "key": key}
        if cap == CURRENT:
            cap = self.cap(task) if known and k in NEEDS_CAPABILITY else None
        if cap is not None:
            r["cap"] = cap
        if k in TRANSACTION_KINDS:
            r["expected-phase"] = self.phase(task) if expected_phase == CURRENT else expected_phase
            r["expected-revision"] = (self.model.state.task(task).revision
                                      if expected_revision == CURRENT else expected_revision)
        if k in (Kind.DISPATCH, Kind.RETRY) and "expected_attempt" not in params and known:
            params["expected_attempt"] = self.model.state.task(task).attempt
        if k in (Kind.RESET, Kind.REOPEN) and "expected_generation" not in params and known:
            params["expected_generation"] = self.model.state.task(task).generation
        self._tokens(r, k, actor, task, known, params)
        for name, value in params.items():
            if value is not None:
                r[name.replace("_", "-")] = value
        return r

    def _tokens(self, r: dict, k: Kind, actor: str, task: str, known: bool, params: dict) -> None:
        """An opener mints a fresh symbolic token; the attempt's own process and a
        continuation present the current attempt's (unless the author gave one)."""
        from wgk.model.vocab import MINTING_KINDS
        if k in MINTING_KINDS and "mint" not in params:
            self._minted += 1
            params["mint"] = f"tok-{task}-{self._minted}"
        t = self.model.state.task(task) if known else None
        presents = k == Kind.RESUME or (r.get("cap") is not None and actor in BEARER_LABELS)
        if presents and "token" not in params and t is not None and t.token:
            params["token"] = self.model.names.tname(t.token)

    def send(self, kind: str, actor: str, task: str, expect: str | dict | None, *,
             note: str | None = None, facts: dict | None = None, **kw: Any) -> dict:
        """Append a request step (built like ``request``) and advance the tracked state."""
        return self.resend(self.request(kind, actor, task, **kw), expect, note=note, facts=facts)

    def resend(self, request: dict, expect: str | dict | None, *, note: str | None = None,
               facts: dict | None = None) -> dict:
        """Append an exact request again (a client re-sending, a stale or racing caller)."""
        step: dict[str, Any] = {"request": dict(request)}
        if expect is not None:
            step["expect"] = _expect(expect)
        return self._append(step, note, facts)["request"]

    def env(self, env: str, *, note: str | None = None, facts: dict | None = None, **fields: Any) -> None:
        step = {"env": env, **{k: v for k, v in fields.items() if v is not None}}
        self._append(step, note, facts)

    def _append(self, step: dict, note: str | None, facts: dict | None) -> dict:
        if facts:
            step["expect-facts"] = facts
        if note:
            step["note"] = note
        self.model.apply(step)
        self.trace.steps.append(step)
        return step

    def expect(self, facts: dict) -> Trace:
        self.trace.expect = facts
        return self.trace
