"""A trace's run of the model made once and played to the replay, the two kernels and the
crash cuts (``model_runs``): it answers as the model does step by step, it is made once per
trace in the gate (on the worker its parts are placed on), and every section still reports
what it reported with a model of its own."""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from wgk.conformance.oracle import model_runs
from wgk.conformance.oracle.model_runs import ModelRun, Played, model_system, shared
from wgk.conformance.oracle.systems import ModelSystem, StepError
from wgk.conformance.reports import gate
from wgk.conformance.reports.gate_budget import bundled_traces
from wgk.conformance.reports.gate_real import two_kernel_checks
from wgk.conformance.reports.gate_traces import crash_cut_checks, replay_checks
from wgk.conformance.traces.format import load_trace, load_traces

from gate_sources import report_shape, small_quick_budget

ROOT = Path(__file__).resolve().parent.parent
INCIDENTS = ROOT / "traces" / "incidents"
TRACES = [str(INCIDENTS / "10-stale-capability-rejected.json"),
          str(INCIDENTS / "16-two-dispatchers-one-attempt.json"),
          str(INCIDENTS / "06-live-owner-missing-heartbeat-stays-running.json")]


def _refusing(trace):
    """``trace`` with a step the model cannot take in its middle (an unknown environment step)."""
    steps = list(trace.steps)
    steps.insert(len(steps) // 2, {"env": "no-such-step"})
    return dataclasses.replace(trace, id=trace.id + "-refusing", steps=steps)


def _outcome(system, step):
    try:
        return "took", system.apply(step)
    except StepError as e:
        return "refused", str(e)


def test_a_played_run_answers_as_the_model_at_every_step_of_every_bundled_trace():
    traces = load_traces([str(bundled_traces())])
    traces.append(_refusing(load_trace(Path(TRACES[0]))))
    refused = 0
    for trace in traces:
        model, played = ModelSystem(trace), Played(ModelRun.of(trace))
        assert played.check() == model.check() and played.project() == model.project()
        for n, step in enumerate(trace.steps):
            got, want = _outcome(played, step), _outcome(model, step)
            assert got == want, (trace.id, n)
            refused += want[0] == "refused"
            assert played.check() == model.check(), (trace.id, n)
            assert played.project() == model.project(), (trace.id, n)
            assert played.state == model.state and played.last == model.last, (trace.id, n)
            assert played.applied is model.applied, (trace.id, n)
        assert played.project_state(played.state) == model.project_state(model.state)
    assert refused >= 1


def test_a_played_run_without_invariants_refuses_to_check_as_the_model_does():
    trace = load_trace(Path(TRACES[0]))
    with pytest.raises(RuntimeError):
        ModelSystem(trace, checking=False).check()
    with pytest.raises(RuntimeError):
        Played(ModelRun.of(trace), checking=False).check()


def test_a_played_run_takes_only_its_trace_s_own_steps_in_order():
    trace = load_trace(Path(TRACES[0]))
    played = Played(ModelRun.of(trace))
    with pytest.raises(RuntimeError, match="in order"):
        played.apply(dict(trace.steps[0]))          # an equal step, not the trace's own
    with pytest.raises(RuntimeError, match="in order"):
        played.apply(trace.steps[1])


def test_a_trace_the_model_cannot_set_up_is_refused_by_each_play():
    trace = load_trace(Path(TRACES[0]))
    broken = dataclasses.replace(trace, initial={"no-such-task": {}})
    with pytest.raises(StepError) as own:
        ModelSystem(broken)
    run = ModelRun.of(broken)
    for _ in range(2):
        with pytest.raises(StepError) as played:
            Played(run)
        assert str(played.value) == str(own.value)


def test_a_model_that_raises_mid_run_raises_at_that_step_when_played(monkeypatch):
    trace = load_trace(Path(TRACES[0]))
    real, calls = ModelSystem._apply, []

    def fails_third(self, step):
        calls.append(1)
        if len(calls) == 3:
            raise ZeroDivisionError("planted")
        return real(self, step)
    monkeypatch.setattr(ModelSystem, "_apply", fails_third)
    played = Played(ModelRun.of(trace))
    played.apply(trace.steps[0])
    played.apply(trace.steps[1])
    with pytest.raises(ZeroDivisionError, match="planted"):
        played.apply(trace.steps[2])


def _runs(monkeypatch, where: Path) -> None:
    """Each run of the model made for a trace (``ModelRun.of``) noted in ``where`` with the
    process that made it, and each ``ModelSystem`` made."""
    real_of, real_init = ModelRun.of, ModelSystem.__init__

    def of(trace):
        with open(where, "a") as f:
            f.write(f"run {trace.id} {os.getpid()}\n")
        return real_of(trace)

    def init(self, *a, **k):
        with open(where, "a") as f:
            f.write(f"model {os.getpid()}\n")
        real_init(self, *a, **k)
    monkeypatch.setattr(ModelRun, "of", staticmethod(of))
    monkeypatch.setattr(ModelSystem, "__init__", init)


def _checks(*sections):
    return [(c.section, c.name, c.verdict, c.detail, c.group) for s in sections for c in s]


def test_inside_shared_the_three_sections_make_one_run_of_the_model_per_trace(monkeypatch,
                                                                               tmp_path):
    loaded = load_traces(TRACES)
    own = _checks(replay_checks("quick", None, loaded), crash_cut_checks("quick", None, loaded),
                  two_kernel_checks("quick", None, loaded))
    where = tmp_path / "runs"
    _runs(monkeypatch, where)
    with shared():
        played = _checks(replay_checks("quick", None, loaded),
                         crash_cut_checks("quick", None, loaded),
                         two_kernel_checks("quick", None, loaded))
    assert played == own and all(c[2] == "pass" for c in played)
    lines = where.read_text().splitlines()
    assert sorted(l.split()[1] for l in lines if l.startswith("run")) == sorted(t.id for t in loaded)
    # one model per trace: the run's own
    assert sum(l.startswith("model") for l in lines) == len(loaded)
    assert not model_runs.active()
    where.unlink()
    replay_checks("quick", None, loaded)            # outside: a model of its own, as before
    assert not any(l.startswith("run") for l in where.read_text().splitlines())


def test_outside_shared_the_model_is_a_model_system_of_its_own():
    trace = load_trace(Path(TRACES[0]))
    assert type(model_system(trace)) is ModelSystem
    with shared():
        first, again = model_system(trace), model_system(trace, checking=False)
        assert isinstance(first, Played) and first.run is again.run and not again.checking


@pytest.fixture
def small(monkeypatch):
    small_quick_budget(monkeypatch)


@pytest.mark.parametrize("workers", [1, 2])
def test_the_gate_runs_the_model_once_per_trace_on_the_worker_of_its_parts(small, monkeypatch,
                                                                          tmp_path, workers):
    where = tmp_path / "runs"
    _runs(monkeypatch, where)
    r = gate.run_gate("quick", traces=TRACES, workers=workers)
    assert r.verdict == "pass"
    runs = [l.split()[1:] for l in where.read_text().splitlines() if l.startswith("run")]
    assert sorted(t for t, _ in runs) == sorted(load_trace(Path(p)).id for p in TRACES)


def test_a_planted_invariant_break_is_still_the_replay_s_alone_in_the_gate(small, monkeypatch):
    monkeypatch.setattr(ModelSystem, "_state_violations", lambda self, s: ["planted-invariant"])
    for workers in (1, 2):
        r = gate.run_gate("quick", traces=TRACES[:1], workers=workers)
        verdicts = {s.name: s.verdict for s in r.sections_run if s.verdict != "skipped"}
        assert verdicts == {"replay": "fail", "crash-cuts": "pass", "two-kernels": "pass"}
        [check] = [c for c in r.checks if c.section == "replay"]
        assert "[model] invariant" in check.detail


def test_a_planted_implementation_bug_fails_the_same_checks_with_the_run_shared(small,
                                                                               monkeypatch):
    import contextlib
    import wgk.impl.decisions.rules as rules
    monkeypatch.setattr(rules, "capability_failure",
                        lambda ctx: "unknown-attempt" if ctx.record.attempt_state == "none" else None)
    played = gate.run_gate("quick", traces=TRACES, workers=2)
    monkeypatch.setattr(model_runs, "shared", contextlib.nullcontext)
    own = gate.run_gate("quick", traces=TRACES, workers=2)
    assert report_shape(played) == report_shape(own)
    failed = {s.name for s in played.sections_run if s.verdict == "fail"}
    assert {"replay", "two-kernels"} <= failed
