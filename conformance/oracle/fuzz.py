"""Hypothesis stateful testing: generated request sequences from every actor.

A ``RuleBasedStateMachine`` draws requests (well-formed ones from the model's one
enumeration of what bounded actors send, ``wgk.model.actions``; then sometimes stale,
unauthorized, for an unknown task, with other bytes, replayed with the same key, same
key with other bytes) and environment steps
(owner death, pid reuse, target movement, edits, clock, crash + recover, lost
responses re-sent by their client). Every step goes to the model and, in
lockstep, to a system under test if one is given; the oracle checks decisions,
projections and every invariant after each step. A failure shrinks to a
minimal run, which is written as a ``wgk-trace/1`` file with the one command
that replays it.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from hypothesis import HealthCheck, Phase, settings, strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test

from wgk.model.actions import WITH_EVIDENCE, Instance, task_steps
from wgk.model.projections import next_edge
from wgk.model.requests import Request
from wgk.model.vocab import Actor, AttemptState, Exit, Kind

from wgk.conformance.oracle.fuzz_shapes import one_field_changed, shaped_graph
from wgk.conformance.oracle.lockstep import Observed, Oracle
from wgk.conformance.oracle.systems import ModelSystem, StepError
from wgk.conformance.oracle.wire import request_to_wire
from wgk.conformance.traces.format import TraceError, Trace, validate, write_trace

CONTENTS = ("w1", "w2", "w3", "w4")
EVIDENCE = ("e1", "e2", "e3")
FOREIGN = ("moved-1", "moved-2")


def chain_graph(tasks: int, *, review: bool = False) -> dict:
    return shaped_graph(tasks, "chain", review=review)


@dataclass
class FuzzConfig:
    tasks: int = 2
    review: bool = False
    shape: str = "chain"                            # fuzz_shapes.SHAPES
    system: Callable[[dict], Any] | None = None     # factory: graph spec -> system under test
    ignore: tuple[str, ...] = ()


@dataclass
class Run:
    """The steps of the current example (the last one is the shrunk failure)."""

    steps: list[dict] = field(default_factory=list)


LAST_RUN = Run()


#: Bounds no run of the machine reaches: the enumeration never runs out of attempts,
#: generations or candidate versions.
UNBOUNDED = 99
#: The request groups of the enumeration the machine draws from: all but the environment's
#: (the machine's own rule takes environment steps) and the intruder's (the machine varies
#: the actor of any request itself).
FUZZ_GROUPS = ("core", "evidence", "operator", "legacy", "waits", "pause", "receipt", "routes")


def fuzz_instance(config: FuzzConfig) -> Instance:
    """The instance whose enumeration (``wgk.model.actions``) gives the machine its
    well-behaved requests: every kind, and transaction edges from any phase."""
    return Instance(tasks=config.tasks, attempts=UNBOUNDED, generations=UNBOUNDED,
                    versions=UNBOUNDED, groups=FUZZ_GROUPS, review=config.review,
                    rejections=True, every_kind=True)


def _kinds_by_weight() -> list[Kind]:
    heavy = [Kind.DISPATCH, Kind.SUBMIT, Kind.QUIESCE, Kind.SAVE_WORK, Kind.SEAL_CANDIDATE,
             Kind.VALIDATE, Kind.ACCEPT, Kind.RECORD_DISPOSITION, Kind.PREPARE_EFFECT,
             Kind.COMMIT_EFFECT, Kind.PREPARE_CLEANUP, Kind.COMMIT_CLEANUP, Kind.SAVE_GRAPH,
             Kind.PROBE_OWNER, Kind.DECLARE_LOST]
    rare = {Kind.RESET, Kind.ABANDON, Kind.LEGACY_DONE, Kind.BLOCK_UPGRADE, Kind.REOPEN}
    return heavy * 3 + [k for k in Kind if k not in rare] + list(rare)


#: The kinds a drawn request is of, the main line's weighted up and the drastic ones down.
KINDS = _kinds_by_weight()


def _progress_kind(m: ModelSystem, task: str) -> Kind:
    """The request that moves ``task`` forward (what a convergent client sends)."""
    t = m.state.task(task)
    if t.attempt_state != AttemptState.RUNNING:
        return Kind.RECONSTRUCT if t.exit == Exit.NEEDS_RECONCILIATION else Kind.DISPATCH
    if t.exit == Exit.NEEDS_REPAIR:
        return Kind.REVISE
    if t.exit != Exit.NONE:
        return Kind.RECONCILE
    if t.owner_seen == 3 and t.phase == 0:
        return Kind.DECLARE_LOST
    edge = next_edge(t, m.graph.review_required[m.graph.index[task]])
    return Kind(edge) if edge else Kind.SUBMIT


def _stale(data, label: str) -> int:
    """0 (current) or, one time in ten, 1 (a step behind)."""
    return data.draw(st.sampled_from([0] * 9 + [1]), label=label)


class _Drawing:
    """Drawing one request like some client would: a request the model's bounded actors
    send (``actions.task_steps``), mostly the one that moves its task forward, then
    sometimes made stale, unauthorized, tokenless or forged, for an unknown task or with
    other bytes."""

    model: ModelSystem
    names: list[str]
    inst: Instance

    def _task(self, data) -> str:
        m = self.model
        active = [n for n in self.names if m.state.task(n).attempt_state == AttemptState.RUNNING
                  or all(m.state.tasks[d].phase == 13 for d in m.graph.deps[m.graph.index[n]])]
        pool = active or self.names
        return data.draw(st.sampled_from(pool + ["ghost"] if data.draw(st.integers(0, 30)) == 0
                                         else pool), label="task")

    def _well_behaved(self, data, task: str) -> Request:
        """A request of the kind that moves ``task`` forward, or of a drawn kind (drawing the
        kind first keeps a shrunk run's requests when earlier steps are dropped)."""
        m = self.model
        options = [r for r in task_steps(self.inst, m.state, m.graph.index[task])
                   if isinstance(r, Request)]
        if data.draw(st.integers(0, 9), label="progress") < 6:
            kind = _progress_kind(m, task)
        else:
            kind = data.draw(st.sampled_from(KINDS), label="kind")
        return data.draw(st.sampled_from([r for r in options if r.kind == kind] or options),
                         label="request")

    def _capability(self, data, req: dict) -> None:
        mode = data.draw(st.sampled_from(["current"] * 8 + ["stale", "none", "no-lease"]),
                         label="cap")
        c = req["cap"]
        if mode == "none":
            del req["cap"]
        elif mode == "stale":
            req["cap"] = dict(c, attempt=max(0, c["attempt"] - 1), fence=max(0, c["fence"] - 1))
        elif mode == "no-lease":
            req["cap"] = dict(c, **{"lease-epoch": 0})

    def _expectations(self, data, req: dict) -> None:
        """The compare-and-set fields, sometimes a step behind."""
        for name in ("expected-revision", "expected-attempt"):
            if name in req:
                req[name] = max(0, req[name] - _stale(data, f"stale-{name[9:]}"))

    def _owner(self, data, req: dict, kind: Kind) -> None:
        """A resume sometimes claims the attempt from another session."""
        if kind == Kind.RESUME and not data.draw(st.booleans(), label="same-session"):
            req["owner"] = dict(req["owner"], session=f"s{req['owner']['pid']}")

    def _token(self, data, req: dict) -> None:
        """The attempt's own process presents the attempt's token; sometimes none, another
        attempt's (an old worker, a foreign agent) or a guessed one."""
        if "token" not in req:
            return
        mode = data.draw(st.sampled_from(["held"] * 8 + ["none", "another", "guessed"]),
                         label="token")
        others = sorted(set(self.model.names.tokens) - {req["token"]})
        if mode == "none":
            del req["token"]
        elif mode == "another" and others:
            req["token"] = data.draw(st.sampled_from(others), label="another-token")
        elif mode == "guessed":
            req["token"] = "tok-guessed"

    def _payload(self, data, req: dict, kind: Kind) -> None:
        """Other bytes: another candidate, verdict, disposition or evidence id."""
        if "candidate" in req:
            req["candidate"] = data.draw(st.sampled_from((req["candidate"],) * 6 + CONTENTS),
                                         label="candidate")
        if kind in (Kind.VALIDATE, Kind.ACCEPT) and data.draw(st.integers(0, 4)) == 0:
            verdicts = ["pass", "fail"] + (["not-required"] if kind == Kind.ACCEPT else [])
            req["verdict"] = data.draw(st.sampled_from(verdicts), label="verdict")
        if kind == Kind.RECORD_DISPOSITION:
            req["disposition"] = data.draw(st.sampled_from(["land", "land", "deliver", "report"]),
                                           label="disposition")
        if kind in WITH_EVIDENCE:
            req["evidence"] = data.draw(st.sampled_from(EVIDENCE), label="evidence")
        if "correlation" in req:
            req["correlation"] = data.draw(st.sampled_from((req["correlation"],) * 3 + (
                "another-event",)), label="correlation")

    def _request(self, data) -> dict:
        task = self._task(data)
        known = task in self.model.graph.index
        r = self._well_behaved(data, task if known else self.names[0])
        req = request_to_wire(r, self.model.names)
        if data.draw(st.integers(0, 15)) == 0:
            req["actor"] = data.draw(st.sampled_from(list(Actor)), label="actor").label
        if not known:
            req["task"] = task
            req.pop("cap", None)
        elif "cap" in req:
            self._capability(data, req)
        self._expectations(data, req)
        self._owner(data, req, r.kind)
        self._token(data, req)
        self._payload(data, req, r.kind)
        return req


class _KernelMachine(_Drawing, RuleBasedStateMachine):
    """The state machine of ``make_machine``; its subclass sets ``graph`` and ``config``."""

    graph: dict = {}
    config: FuzzConfig = FuzzConfig()

    def __init__(self):
        super().__init__()
        graph, config = self.graph, self.config
        self.names = [t["name"] for t in graph["tasks"]]
        self.model = ModelSystem(graph)
        self.sut = config.system(graph) if config.system else None
        self.oracle = Oracle(self.model, ignore=config.ignore) if self.sut else None
        self.steps: list[dict] = []
        self.last_request: dict | None = None
        self.unacked: dict | None = None
        self.inst = fuzz_instance(config)
        LAST_RUN.steps = self.steps

    def _key(self, data, req: dict) -> None:
        policy = data.draw(st.sampled_from(["fresh"] * 10 + ["replay", "conflict", "one-field"]),
                           label="key")
        if policy == "replay" and self.last_request is not None:
            req.clear()
            req.update(self.last_request)
            return
        if policy == "one-field" and self.last_request is not None:
            req.clear()                       # the same key, exactly one field changed
            req.update(one_field_changed(data, self.last_request))
            return
        if policy == "conflict" and self.last_request is not None:
            req["key"] = self.last_request["key"]
            return
        req["key"] = f"k{len(self.steps) + 1}"

    def _do(self, step: dict) -> None:
        self.steps.append(step)
        request = step.get("request")
        try:
            if self.sut is None:
                self.model.apply(step)
                return self._check_model()
            if request is None:
                self.model_env_check(step)    # impossible environment steps are not taken
            observed = Observed(self.sut.apply(step), self.sut.project())
        except StepError as refused:
            self.steps.pop()
            if request is not None:           # the model is asked too: both must refuse it
                self._model_refuses(step, refused)
            return
        except Exception as crashed:          # the system under test failed on the step: a
            # divergence to shrink like any other (a broken protocol aborts: a BaseException)
            raise AssertionError(f"the system raised {type(crashed).__name__} on this step: "
                                 f"{crashed}") from crashed
        verdict = self.oracle.is_valid_step(step, observed)     # steps self.model too
        assert verdict.valid, "\n".join(d.describe() for d in verdict.divergences)

    def _model_refuses(self, step: dict, refused: StepError) -> None:
        """A request the system under test refused as malformed must be one the model cannot
        decide either; a decision of the model's is a divergence."""
        try:
            self.model_env_check(step)
        except StepError:
            return
        self.steps.append(step)
        raise AssertionError(f"the system refused a request the model decides: {refused}")

    def model_env_check(self, step: dict) -> None:
        self.model.possible(step)             # raises StepError when impossible

    def _check_model(self) -> None:
        bad = self.model.check()
        assert not bad, f"model invariants violated: {', '.join(bad)}"

    # --- rules --------------------------------------------------------------
    @rule(data=st.data())
    def send(self, data):
        req = self._request(data)
        self._key(data, req)
        self.last_request = dict(req)
        self._do({"request": req})

    @rule(data=st.data())
    def happen(self, data):
        kind = data.draw(st.sampled_from(["edit", "edit", "owner-dies", "pid-reuse", "move-target",
                                          "tick", "crash", "lost-response"]), label="env")
        step: dict[str, Any] = {"env": kind}
        if kind in ("edit", "owner-dies", "pid-reuse"):
            step["task"] = data.draw(st.sampled_from(self.names), label="env-task")
        if kind == "edit":
            step["content"] = data.draw(st.sampled_from(CONTENTS), label="content")
        if kind == "pid-reuse":
            step["birth"] = data.draw(st.integers(1, 3), label="birth")
        if kind == "move-target":
            step["content"] = data.draw(st.sampled_from(FOREIGN + CONTENTS), label="target")
        if kind == "lost-response":
            if self.last_request is None:
                return
            self._do(step)
            self._do({"request": dict(self.last_request)})   # the client re-sends, same key
            return
        if kind in ("edit", "owner-dies", "pid-reuse", "move-target", "tick"):
            try:
                self.model_env_check(step)
            except StepError:
                return
        self._do(step)


def make_machine(config: FuzzConfig):
    """The Hypothesis state machine for a graph of ``config.shape`` with ``config.tasks`` tasks."""
    graph = shaped_graph(config.tasks, config.shape, review=config.review)
    return type("KernelMachine", (_KernelMachine,), {"graph": graph, "config": config})


@dataclass
class FuzzResult:
    verdict: str                   # "pass" | "fail"
    examples: int
    seed: int | None
    failure: str | None = None
    trace_path: str | None = None
    steps: int = 0
    lockstep: bool = False          # the failure came from the implementation beside the model

    @property
    def reproduce(self) -> str | None:
        if not self.trace_path:
            return None
        return f"wgk replay {self.trace_path}" + (" --system both" if self.lockstep else "")

    def to_json(self) -> dict:
        return {"verdict": self.verdict, "examples": self.examples, "seed": self.seed,
                "failure": self.failure, "trace": self.trace_path, "steps": self.steps,
                "replay": self.reproduce}


def counterexample_trace(graph: dict, steps: list[dict], *, seed: int | None, failure: str) -> dict:
    """A shrunk failing run as a wgk-trace/1 document (expected decisions from the model)."""
    model = ModelSystem(graph)
    out_steps = []
    for step in steps:
        try:
            d = model.apply(step)
        except StepError:
            continue
        out_steps.append({"request": step["request"], "expect": d} if "request" in step else step)
    return {
        "format": "wgk-trace/1",
        "id": f"fuzz-{seed if seed is not None else 'run'}",
        "title": "Minimised counterexample found by generated request sequences",
        "source": {"kind": "counterexample", "provenance": f"wgk fuzz --seed {seed}"},
        "description": failure.splitlines()[0] if failure else "",
        "graph": graph,
        "steps": out_steps,
    }


def write_counterexample(doc: dict, out_dir: str, failure: str) -> tuple[str | None, str]:
    """Write a counterexample only as a valid trace (schema and semantics); one that is not is
    written nowhere and its failure says why. The path and the failure."""
    path = os.path.join(out_dir, f"{doc['id']}.json")
    try:
        validate(doc, path)
    except TraceError as e:
        return None, f"{failure}\n(not written: the counterexample is not a valid trace: {e})"
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    write_trace(Trace.from_json(doc, path), path)
    return path, failure


@contextlib.contextmanager
def _no_source_constants():
    """Hypothesis (recent versions) draws, now and then, a constant found in the source of the
    modules the process has imported so far (its "local constants", integers of at least 100
    among them: an index into ``KINDS``, 102 long, may be one). The runs a seed draws then
    depend on what the process imported before: after the test suite's collection the same
    seed shrank the same failure to another run than in a fresh process. Within this block
    Hypothesis sees no such constant, so a seed draws the same runs in any process."""
    try:
        from hypothesis.internal.conjecture import providers
        found, empty = providers._get_local_constants, providers.Constants()
    except (ImportError, AttributeError):      # a Hypothesis without them draws none
        yield
        return
    providers._get_local_constants = lambda: empty
    providers.CONSTANTS_CACHE.cache.clear()
    try:
        yield
    finally:
        providers._get_local_constants = found
        providers.CONSTANTS_CACHE.cache.clear()


def run_fuzz(config: FuzzConfig, *, examples: int = 200, steps: int = 30, seed: int | None = None,
             out_dir: str | None = None, database: str | None = None) -> FuzzResult:
    """Run the state machine; on failure write the shrunk run as a trace."""
    machine = make_machine(config)
    db = DirectoryBasedExampleDatabase(database) if database else None
    cfg = settings(max_examples=examples, stateful_step_count=steps, deadline=None, database=db,
                   suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
                   phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink])
    if seed is not None:
        import hypothesis
        machine = hypothesis.seed(seed)(machine)
    try:
        with _no_source_constants():
            run_state_machine_as_test(machine, settings=cfg)
    except AssertionError as e:
        failure = str(e)
        path = None
        if out_dir is not None:
            doc = counterexample_trace(shaped_graph(config.tasks, config.shape, review=config.review),
                                       LAST_RUN.steps, seed=seed, failure=failure)
            path, failure = write_counterexample(doc, out_dir, failure)
        return FuzzResult("fail", examples, seed, failure, path, len(LAST_RUN.steps),
                          lockstep=config.system is not None)
    return FuzzResult("pass", examples, seed)
