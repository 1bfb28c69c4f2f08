"""Replay a ``wgk-trace/1`` through one or more systems and compare with its expectations.

A *system* is anything with ``apply(step) -> decision | None`` (the wire
decision of a request step, ``None`` for an environment step), ``project() ->
dict`` (the observable projection of docs/vocabulary.md) and ``check() ->
list[str]`` (ids of invariants the last step broke; a system that cannot tell
returns ``[]``). The model is one system (``ModelSystem``); the implementation
plugs in as a second one, and ``replay`` then runs both in lockstep: every
decision is compared with the trace's expectation and with the other system's,
every projection with the other system's after each step, and the expected
facts with each system's projection.

Verdicts are data: ``replay`` returns a ``TraceResult`` with one
``StepResult`` per step and a list of ``Divergence`` records, each naming the
trace, the step, the request, what was expected and what happened, and for
facts a field-by-field diff.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Protocol, Sequence

from wgk.model.env import EnvError, apply_env
from wgk.model.invariants import step_violations, violations
from wgk.model.kernel import decide
from wgk.model.observe import Names, observe
from wgk.model.state import Evidence, Graph, GraphError, State, TaskState, initial_state
from wgk.model.vocab import AttemptState, Exit, Kind, OwnerSeen, Phase, Reason

from .traces import Trace
from .wire import WireError, env_from_wire, request_from_wire


class StepError(ValueError):
    """A step a system cannot take: an impossible environment step, a request it cannot build."""


class System(Protocol):
    """One side of a replay: the model, or the implementation behind an adapter."""

    name: str

    def apply(self, step: dict) -> dict | None: ...
    def project(self) -> dict: ...
    def check(self) -> list[str]: ...


#: Step fields that annotate a trace; the wire step is the rest.
ANNOTATIONS = ("expect", "expect-facts", "from", "note")


def env_part(step: dict) -> dict:
    """The environment step itself, without the trace's annotations."""
    return {k: v for k, v in step.items() if k not in ANNOTATIONS}


# --- seeding a trace's initial facts ------------------------------------------------------


def graph_of(trace: Trace) -> Graph:
    tasks = trace.graph["tasks"]
    try:
        return Graph.build(
            [t["name"] for t in tasks], {t["name"]: t.get("deps", []) for t in tasks},
            graph_id=trace.graph["id"],
            review_required=[t["name"] for t in tasks if t.get("review-required")],
            requires_assignment=[t["name"] for t in tasks if t.get("requires-assignment")],
        )
    except GraphError as e:
        raise StepError(f"/graph: {e}") from None


def seed_task(t: TaskState, seed: dict, names: Names, target: int) -> TaskState:
    """A task as a trace's ``initial`` section describes it (a running attempt, legacy facts)."""
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
            proc_birth=birth if live and a.get("alive", True) else 0,
            worktree_lease=leases.get("worktree", False), session_lease=leases.get("session", False),
            finish_lease=leases.get("finish", False),
            worktree=worktree if live else 0, worktree_present=live,
            origin=(names.cid(a["origin"]) if a.get("origin") else target) if live else 0,
        )
    if "generation" in seed:
        ch["generation"] = seed["generation"]
    if "assigned" in seed:
        ch["assigned"] = bool(seed["assigned"])
    if "retained" in seed:
        ch["retained"] = names.cid(seed["retained"])
    if "promotions" in seed:
        ch["promotions"] = seed["promotions"]
    counters = seed.get("counters", {})
    for key, f in (("compactions", "compactions"), ("continuations", "continuations"),
                   ("acks", "acks"), ("provider-failures", "provider_failures"),
                   ("messages", "messages"), ("logs", "logs")):
        if key in counters:
            ch[f] = counters[key]
    if "legacy-done" in seed:
        ch.update(legacy_done=True, exit=Exit.NEEDS_RECONCILIATION, reason=Reason.LEGACY_UNPROVEN,
                  evidence=Evidence({("legacy-done", seed["legacy-done"])}))
    return replace(t, **ch) if ch else t


def initial_model_state(trace: Trace, names: Names) -> State:
    g = graph_of(trace)
    target = names.cid(trace.graph["target"])
    s = initial_state(g, target=target)
    for name, seed in trace.initial.items():
        i = g.index[name]
        s = s.put(i, seed_task(s.tasks[i], seed, names, target))
    return s


# --- the model as a system ---------------------------------------------------------------


class ModelSystem:
    """The executable model: decide() for requests, apply_env() for environment steps.

    ``crash`` and ``lost-response`` change nothing in the model: every model field
    is durable, and a lost response only matters to the client that re-sends."""

    name = "model"

    def __init__(self, trace: Trace):
        self.names = Names()
        self.state = initial_model_state(trace, self.names)
        self._violations = violations(self.state)

    def apply(self, step: dict) -> dict | None:
        before = self.state
        if "request" in step:
            try:
                r = request_from_wire(step["request"], self.names, "/request")
            except WireError as e:
                raise StepError(str(e)) from None
            d, self.state = decide(before, r)
            self._violations = violations(self.state) + step_violations(before, r, d, self.state)
            return d.to_json()
        try:
            self.state = apply_env(before, env_from_wire(env_part(step), self.names))
        except (EnvError, WireError) as e:
            raise StepError(str(e)) from None
        self._violations = violations(self.state)
        return None

    def project(self) -> dict:
        return observe(self.state, self.names)

    def check(self) -> list[str]:
        return list(self._violations)


SYSTEMS: dict[str, Callable[[Trace], System]] = {"model": ModelSystem}


# --- matching expected facts ---------------------------------------------------------------


@dataclass(frozen=True)
class FieldDiff:
    """One fact that differs: where (a dotted path), what was expected, what was seen."""

    path: str
    expected: Any
    actual: Any

    def to_json(self) -> dict:
        return {"path": self.path, "expected": self.expected, "actual": self.actual}

    def describe(self) -> str:
        return f"{self.path}: expected {_show(self.expected)}, got {_show(self.actual)}"


MISSING = object()


def _show(v: Any) -> str:
    if v is MISSING:
        return "(absent)"
    import json
    return json.dumps(v, sort_keys=False)


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def _evidence_key(item: Any) -> str:
    import json
    return json.dumps(item)


def _match_matcher(expected: dict, actual: Any, path: str) -> list[FieldDiff]:
    if not isinstance(actual, list):
        return [FieldDiff(path, expected, actual)]
    have = {_evidence_key(x) for x in actual}
    if "$contains" in expected:
        missing = [x for x in expected["$contains"] if _evidence_key(x) not in have]
        return [FieldDiff(path, expected, actual)] if missing else []
    kinds = set(expected["$kinds"])
    picked = sorted((x for x in actual if isinstance(x, list) and x and x[0] in kinds), key=_evidence_key)
    want = sorted(expected["$exactly"], key=_evidence_key)
    return [] if picked == want else [FieldDiff(path, expected, actual)]


def match_facts(expected: Any, actual: Any, path: str = "") -> list[FieldDiff]:
    """Diffs between listed facts and a projection: objects by the keys they list
    (recursively; a listed null matches an absent key), everything else by equality."""
    if isinstance(expected, dict) and any(k in expected for k in ("$contains", "$kinds")):
        return _match_matcher(expected, actual, path)
    if isinstance(expected, dict) and isinstance(actual, dict):
        out: list[FieldDiff] = []
        for key, want in expected.items():
            if key not in actual:
                if want is not None:
                    out.append(FieldDiff(_join(path, key), want, MISSING))
                continue
            out += match_facts(want, actual[key], _join(path, key))
        return out
    if expected == actual and type(expected) is type(actual):
        return []
    return [FieldDiff(path, expected, actual)]


def diff_values(a: Any, b: Any, path: str = "") -> list[FieldDiff]:
    """Every leaf where two projections differ (``a`` is taken as the reference)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[FieldDiff] = []
        for key in list(a) + [k for k in b if k not in a]:
            out += diff_values(a.get(key, MISSING), b.get(key, MISSING), _join(path, key))
        return out
    if a is MISSING or b is MISSING or a != b:
        return [FieldDiff(path, a, b)]
    return []


def decision_matches(expected: dict, actual: dict | None) -> bool:
    """Decision and code must be equal; ``original`` is checked when the expectation lists it."""
    if actual is None:
        return False
    if expected.get("decision") != actual.get("decision") or expected.get("code") != actual.get("code"):
        return False
    if "original" in expected:
        want, got = expected["original"], actual.get("original") or {}
        return want.get("decision") == got.get("decision") and want.get("code") == got.get("code")
    return True


def decision_label(d: dict | None) -> str:
    if d is None:
        return "(none)"
    label = d.get("decision", "?") + (f":{d['code']}" if d.get("code") else "")
    if d.get("original"):
        label += f" (original {decision_label(d['original'])})"
    return label


# --- results -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Divergence:
    """Where a system and the trace (or two systems) disagree.

    ``what``: ``decision`` (a decision differs from the expected one), ``facts``
    (per-step expected facts), ``final-facts``, ``invariant`` (the system reports a
    broken invariant), ``step-error`` (a step could not be taken), ``lockstep-decision``
    and ``lockstep-projection`` (two systems differ). ``step`` is the step index, or
    None for the final facts."""

    trace: str
    step: int | None
    system: str
    what: str
    request: dict | None
    expected: Any
    actual: Any
    diffs: tuple[FieldDiff, ...] = ()

    def to_json(self) -> dict:
        return {"trace": self.trace, "step": self.step, "system": self.system, "what": self.what,
                "request": self.request, "expected": self.expected, "actual": self.actual,
                "diff": [d.to_json() for d in self.diffs]}

    def describe(self) -> str:
        where = "final facts" if self.step is None else f"step {self.step}"
        head = f"{self.trace} {where} [{self.system}] {self.what}"
        if self.request is not None:
            head += f" on {_step_label(self.request)}"
        lines = [head]
        if self.what in ("decision", "lockstep-decision"):
            lines.append(f"  expected {decision_label(self.expected)}, got {decision_label(self.actual)}")
        elif self.what in ("invariant", "step-error"):
            lines.append(f"  {self.actual}")
        lines += ["  " + d.describe() for d in self.diffs]
        return "\n".join(lines)


def _step_label(step: dict) -> str:
    if "request" in step:
        r = step["request"]
        return f"{r.get('kind')} {r.get('task')} key={r.get('key')}"
    if "kind" in step and "actor" in step:
        return f"{step.get('kind')} {step.get('task')} key={step.get('key')}"
    return "env " + step.get("env", "?") + (f" {step['task']}" if step.get("task") else "")


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
    """Run every step through every system (in lockstep) and compare with the trace.

    The first system is the reference for lockstep comparisons."""
    systems = list(systems) if systems is not None else [ModelSystem(trace)]
    divs: list[Divergence] = []
    results: list[StepResult] = []
    for s in systems:
        bad = s.check()
        if bad:
            divs.append(Divergence(trace.id, None, s.name, "invariant", None, [], bad))
    for n, step in enumerate(trace.steps):
        before = len(divs)
        decisions: dict[str, dict | None] = {}
        for s in systems:
            took, decisions[s.name] = _apply(s, trace, n, step, divs)
            if not took:
                continue
            expected = step.get("expect")
            request = step.get("request", step)
            if expected is not None and not decision_matches(expected, decisions[s.name]):
                divs.append(Divergence(trace.id, n, s.name, "decision", request, expected,
                                       decisions[s.name]))
            bad = s.check()
            if bad:
                divs.append(Divergence(trace.id, n, s.name, "invariant", request, [], bad))
            if "expect-facts" in step:
                diffs = match_facts(step["expect-facts"], s.project())
                if diffs:
                    divs.append(Divergence(trace.id, n, s.name, "facts", request,
                                           step["expect-facts"], None, tuple(diffs)))
        divs += _lockstep(trace, n, step, systems, decisions)
        results.append(StepResult(n, step, step.get("expect"), decisions, len(divs) == before))
    for s in systems:
        if trace.expect:
            diffs = match_facts(trace.expect, s.project())
            if diffs:
                divs.append(Divergence(trace.id, None, s.name, "final-facts", None, trace.expect,
                                       None, tuple(diffs)))
    return TraceResult(trace.id, trace.path, tuple(s.name for s in systems), tuple(results),
                       tuple(divs))


def _lockstep(trace: Trace, n: int, step: dict, systems: Sequence[System],
              decisions: dict[str, dict | None]) -> list[Divergence]:
    """Every other system against the first: the same decision and the same projection."""
    if len(systems) < 2:
        return []
    ref = systems[0]
    out: list[Divergence] = []
    request = step.get("request", step)
    for s in systems[1:]:
        if decisions.get(s.name) != decisions.get(ref.name):
            out.append(Divergence(trace.id, n, s.name, "lockstep-decision", request,
                                  decisions.get(ref.name), decisions.get(s.name)))
        diffs = diff_values(ref.project(), s.project())
        if diffs:
            out.append(Divergence(trace.id, n, s.name, "lockstep-projection", request, None, None,
                                  tuple(diffs)))
    return out


def replay_model(trace: Trace) -> TraceResult:
    """The trace through the model alone."""
    return replay(trace, [ModelSystem(trace)])


def states(trace: Trace) -> list[tuple[dict | None, dict | None, dict]]:
    """``(step, decision, projection)`` for the initial state and after every step, by the model
    (the initial entry has step and decision None). Used by the ITF export."""
    m = ModelSystem(trace)
    out: list[tuple[dict | None, dict | None, dict]] = [(None, None, m.project())]
    for step in trace.steps:
        out.append((step, m.apply(step), m.project()))
    return out


# --- building traces ---------------------------------------------------------------------------


CURRENT = "current"


def _expect(e: str | dict | None) -> dict | None:
    """``"applied"``, ``"rejected:cas-moved"``, ``"duplicate"`` ... or a decision object."""
    if e is None or isinstance(e, dict):
        return e
    decision, _, code = e.partition(":")
    return {"decision": decision, "code": code} if code else {"decision": decision}


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
        if k == Kind.RESET and "expected_generation" not in params and known:
            params["expected_generation"] = self.model.state.task(task).generation
        for name, value in params.items():
            if value is not None:
                r[name.replace("_", "-")] = value
        return r

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
