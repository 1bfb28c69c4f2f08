"""The conformance core: wire conversion, the model as a system, the oracle, fuzzing."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from wgk.conformance.oracle.fuzz import FuzzConfig, chain_graph, counterexample_trace, run_fuzz
from wgk.conformance.oracle.lockstep import Observed, Oracle, diff_values, select
from wgk.conformance.oracle.systems import ModelSystem, StepError
from wgk.conformance.oracle.wire import WireError, request_from_wire, request_to_wire
from wgk.model.observe import Names

GRAPH = {"id": "g", "target": "main-0", "tasks": [{"name": "a", "deps": []},
                                                  {"name": "b", "deps": ["a"]}]}


def dispatch(key="k1", pid=10):
    return {"kind": "dispatch", "actor": "daemon", "task": "a", "key": key, "expected-attempt": 0,
            "owner": {"pid": pid, "birth": 100, "session": "s1"}, "mint": f"tok-{key}"}


def test_wire_round_trip_and_pointer_errors():
    names = Names()
    wire = {"kind": "commit-effect", "actor": "promoter", "task": "a", "key": "p",
            "cap": {"graph": "g", "task": "a", "generation": 0, "attempt": 1, "fence": 1,
                    "lease-epoch": 1},
            "expected-phase": "effect-prepared", "expected-revision": 8,
            "candidate": "c-a1", "base": "main-0"}
    r = request_from_wire(wire, names)
    assert request_to_wire(r, names) == wire
    with pytest.raises(WireError) as e:
        request_from_wire({**wire, "kind": "commit"}, names)
    assert e.value.pointer == "/kind" and "commit-effect" in str(e.value)
    with pytest.raises(WireError) as e:
        request_from_wire({k: v for k, v in wire.items() if k != "expected-revision"}, names)
    assert e.value.pointer == "/expected-revision"
    with pytest.raises(WireError) as e:
        request_from_wire({**wire, "cap": {**wire["cap"], "fence": "one"}}, names, "/steps/3/request")
    assert e.value.pointer == "/steps/3/request/cap/fence"


def test_model_system_answers_in_wire_form():
    m = ModelSystem(GRAPH)
    assert m.apply({"request": dispatch()}) == {"decision": "applied"}
    assert m.apply({"request": dispatch()}) == {"decision": "duplicate", "original": {"decision": "applied"}}
    assert m.apply({"request": dispatch(pid=11)}) == {"decision": "rejected", "code": "idempotency-conflict"}
    p = m.project()
    assert p["tasks"]["a"]["status"] == "in-progress" and p["tasks"]["a"]["owner"]["pid"] == 10
    assert p["journal"]["k1"] == {"decision": "applied"}
    with pytest.raises(StepError):
        m.apply({"env": "edit", "task": "b", "content": "x"})   # b has no running owner


def test_oracle_accepts_a_faithful_system_and_names_divergences():
    spec, sut = ModelSystem(GRAPH), ModelSystem(GRAPH)
    oracle = Oracle(spec, trace="t")
    step = {"request": dispatch()}
    v = oracle.is_valid_step(step, Observed(sut.apply(step), sut.project()))
    assert v.valid and v.model_decision == {"decision": "applied"}
    # a system that answers differently and projects differently
    step2 = {"request": dispatch(key="k2", pid=12)}
    lying = Observed({"decision": "applied"}, {**sut.project(), "target": "elsewhere"})
    v = oracle.is_valid_step(step2, lying)
    assert not v.valid
    whats = {d.what for d in v.divergences}
    assert whats == {"lockstep-decision", "lockstep-projection"}
    proj = next(d for d in v.divergences if d.what == "lockstep-projection")
    assert [f.path for f in proj.diffs] == ["target", "journal.k2"]
    assert "expected rejected:cas-moved, got applied" in \
        next(d for d in v.divergences if d.what == "lockstep-decision").describe()


def test_diff_and_select():
    assert [d.path for d in diff_values({"a": {"b": 1, "c": 2}}, {"a": {"b": 2, "c": 2}})] == ["a.b"]
    same = {"a": {"b": [1, {"x": None}], "c": 2}}
    assert diff_values(same, json.loads(json.dumps(same))) == []
    assert [d.path for d in diff_values(same, {"a": {"b": [1, {"x": 0}], "c": 2}})] == ["a.b"]
    assert [d.path for d in diff_values({"a": 1}, {"a": 1, "z": None})] == ["z"]
    assert diff_values({"a": 1}, {"a": True}) == [] and diff_values(1, True) == []
    assert select({"tasks": {"a": {"x": 1, "evidence": []}}}, ["tasks.*.evidence"]) == \
        {"tasks": {"a": {"x": 1}}}


def test_fuzz_model_passes_and_is_reproducible(tmp_path):
    r1 = run_fuzz(FuzzConfig(tasks=2), examples=30, steps=20, seed=5)
    assert r1.verdict == "pass"


class _Recording(ModelSystem):
    """The model, writing down every step it is sent (``sent``)."""

    sent: list[str] = []

    def __init__(self, graph):
        super().__init__(graph, checking=False)     # the oracle's model checks the invariants

    def apply(self, step):
        _Recording.sent.append(json.dumps(step, sort_keys=True))
        return super().apply(step)


def test_fuzz_draws_the_same_runs_whatever_constants_the_imported_modules_hold(monkeypatch):
    """Hypothesis draws, now and then, a constant of the source of the modules the process has
    imported (100 and 101 are choices of a request's kind); the fuzz does not, so a seed's runs
    do not depend on what was imported before (the test suite's collection imports them all)."""
    from hypothesis.internal.cache import LRUCache
    from hypothesis.internal.conjecture import providers
    runs = []
    for found in (providers.Constants(), providers.Constants(integers={100, 101})):
        monkeypatch.setattr(providers, "_get_local_constants", lambda found=found: found)
        monkeypatch.setattr(providers, "CONSTANTS_CACHE", LRUCache(1024))
        monkeypatch.setattr(_Recording, "sent", [])
        assert run_fuzz(FuzzConfig(tasks=1, system=_Recording), examples=12, steps=10,
                        seed=3).verdict == "pass"
        runs.append(_Recording.sent)
    assert len(runs[0]) > 50 and runs[0] == runs[1]


class _Liar(ModelSystem):
    """A system with a planted bug: it accepts a second dispatch while one runs (``lied_after``:
    the number of steps each lie came after)."""

    lied_after: list[int] = []

    def __init__(self, graph):
        super().__init__(graph, checking=False)     # the oracle's model checks the invariants
        self.steps_taken = 0

    def apply(self, step):
        self.steps_taken += 1
        d = super().apply(step)
        if "request" in step and step["request"]["kind"] == "dispatch" and d.get("code") == "attempt-live":
            _Liar.lied_after.append(self.steps_taken)
            return {"decision": "applied"}
        return d


def test_fuzz_finds_a_planted_bug_and_writes_a_trace(tmp_path, monkeypatch):
    monkeypatch.setattr(_Liar, "lied_after", [])
    r = run_fuzz(FuzzConfig(tasks=1, system=lambda g: _Liar(g)), examples=300, steps=10, seed=2,
                 out_dir=str(tmp_path))
    assert r.verdict == "fail" and "attempt-live" in r.failure
    trace = json.loads(open(r.trace_path).read())
    assert trace["format"] == "wgk-trace/1" and trace["source"]["kind"] == "counterexample"
    kinds = [s["request"]["kind"] for s in trace["steps"] if "request" in s]
    assert kinds.count("dispatch") >= 2 and len(trace["steps"]) <= 6   # shrunk
    assert max(_Liar.lied_after) > 6          # from a failing run longer than the trace written
    assert trace["steps"][-1]["expect"] == {"decision": "rejected", "code": "attempt-live"}


class _Refuser(ModelSystem):
    """A system with a planted bug: it refuses every submit as malformed."""

    def __init__(self, graph):
        super().__init__(graph, checking=False)     # the oracle's model checks the invariants

    def apply(self, step):
        if "request" in step and step["request"]["kind"] == "submit":
            raise StepError("/request: malformed (planted)")
        return super().apply(step)


def test_fuzz_asks_the_model_about_a_request_the_system_refuses_as_malformed(tmp_path):
    r = run_fuzz(FuzzConfig(tasks=1, system=lambda g: _Refuser(g)), examples=100, steps=10, seed=2,
                 out_dir=str(tmp_path))
    assert r.verdict == "fail" and "refused a request the model decides" in r.failure, r.failure
    trace = json.loads(open(r.trace_path).read())
    assert trace["steps"][-1]["request"]["kind"] == "submit"


def test_counterexample_trace_replays_expected_decisions_from_the_model():
    graph = chain_graph(1)
    t = counterexample_trace(graph, [{"request": {**dispatch(), "task": "t1"}}], seed=1, failure="x")
    assert t["steps"][0]["expect"] == {"decision": "applied"}


def test_external_system_over_json_lines_survives_kill_9():
    import sys
    from wgk.conformance.oracle.external import ExternalSystem
    ext = ExternalSystem([sys.executable, "-m", "wgk.conformance.oracle.adapter", "--system", "model"], GRAPH)
    try:
        spec = ModelSystem(GRAPH)
        oracle = Oracle(spec, trace="external")
        steps = [{"request": dispatch()}, {"env": "edit", "task": "a", "content": "w1"},
                 {"env": "crash"}, {"request": dispatch()},
                 {"request": {**dispatch(key="k3"), "expected-attempt": 1}}]
        for step in steps:
            # a crash step is a real kill -9 and a restart on the same storage
            observed = Observed(ext.apply(step), ext.project())
            verdict = oracle.is_valid_step(step, observed)
            assert verdict.valid, [d.describe() for d in verdict.divergences]
        assert ext.project()["tasks"]["a"]["worktree"]["content"] == "w1"
        with pytest.raises(StepError):
            ext.apply({"env": "edit", "task": "b", "content": "x"})
    finally:
        ext.close()


@pytest.mark.parametrize("name", ["04-dead-worker-converges", "46-review-valve-land"])
def test_a_model_run_without_checks_decides_and_projects_alike_and_refuses_check(name, monkeypatch):
    """``checking=False`` (the crash cuts' run of the model): the same decisions and projections
    at every step, no invariant evaluated, and ``check`` refuses instead of answering."""
    from wgk.conformance.traces.format import load_trace
    trace = load_trace(Path(__file__).resolve().parents[1] / "traces" / "incidents" / f"{name}.json")
    checked, unchecked = ModelSystem(trace), ModelSystem(trace, checking=False)

    def evaluated(*_):
        raise AssertionError("an invariant was evaluated")
    monkeypatch.setattr(unchecked, "_state_violations", evaluated)
    monkeypatch.setattr(unchecked, "_step_violations", evaluated)
    for step in trace.steps:
        outcomes = []
        for system in (checked, unchecked):
            try:
                outcomes.append(system.apply(step))
            except StepError as e:
                outcomes.append(str(e))
        assert outcomes[0] == outcomes[1]
        assert checked.project() == unchecked.project()
        assert checked.check() == []
        with pytest.raises(RuntimeError, match="checks no invariant"):
            unchecked.check()
