"""The replay's decision coverage read off the lockstep's own model: the same cells, trace by
trace, as a shadow deciding every request on a model run of its own."""
from __future__ import annotations

from wgk.conformance.oracle import coverage
from wgk.conformance.oracle.coverage import recording
from wgk.conformance.oracle.replay import replay
from wgk.conformance.oracle.select import systems_for
from wgk.conformance.oracle.systems import ModelSystem
from wgk.conformance.reports.gate_budget import bundled_traces
from wgk.conformance.traces.format import load_traces


def _cells(trace, lockstep: bool) -> set:
    with recording() as sent:
        systems = systems_for(trace, "both", lockstep=lockstep)
        try:
            assert (systems[1].shadow.follows if lockstep else not systems[1].shadow.follows)
            replay(trace, systems)
        finally:
            for s in systems:
                s.close()
    return set(sent)


def test_the_bundled_traces_send_the_same_cells_either_way():
    """Every sixth bundled trace, and each that revokes or converges."""
    loaded = load_traces([str(bundled_traces())])
    traces = [t for n, t in enumerate(loaded)
              if n % 6 == 0 or any(s.get("env") in ("revoke", "converge") for s in t.steps)]
    assert len(traces) < len(loaded)
    differ = [t.id for t in traces if _cells(t, True) != _cells(t, False)]
    assert not differ


def test_a_step_the_model_did_not_take_ends_the_following_shadow(monkeypatch):
    trace = load_traces([str(bundled_traces())])[0]
    model = ModelSystem(trace)
    with recording() as sent:
        shadow = coverage.Shadow.following(model)
        step = next(s for s in trace.steps if "request" in s)
        shadow.step(step)                   # told of a step the model has not taken
    assert not shadow.alive and not sent


def test_the_following_shadow_classifies_what_the_model_decided(monkeypatch):
    trace = next(t for t in load_traces([str(bundled_traces())])
                 if any("request" in s for s in t.steps))
    noted = []
    real = coverage.classify
    monkeypatch.setattr(coverage, "classify",
                        lambda s, r, d, h: noted.append((s, r, d)) or real(s, r, d, h))
    model = ModelSystem(trace)
    with recording():
        shadow = coverage.Shadow.following(model)
        for step in trace.steps:
            before = model.state
            answer = model.apply(step)
            shadow.step(step)
            if "request" in step:
                assert noted[-1][0] is before and noted[-1][2] == answer
    assert shadow.alive and noted
