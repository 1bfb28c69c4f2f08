"""The model's named planner rulesets: ``corrected`` is the planner, ``historical`` differs only
where the old daemon's incidents say it did."""
from __future__ import annotations

from pathlib import Path

import pytest

from wgk.model.planner_rulesets import CORRECTED, HISTORICAL, RULESET_WAYS, RULESETS, plan_under
from wgk.model.projections import WAYS, plan
from wgk.conformance.oracle.systems import ModelSystem
from wgk.conformance.traces.format import load_trace, trace_files

ROOT = Path(__file__).resolve().parent.parent
TRACES = trace_files([ROOT / "traces" / "incidents", ROOT / "traces" / "peers" / "wg" / "daemon"])


def _states(path):
    trace = load_trace(path)
    m = ModelSystem(trace)
    yield m.state
    for step in trace.steps:
        m.apply(step)
        yield m.state


def test_every_ruleset_names_a_condition_for_every_way():
    assert set(RULESETS) == {CORRECTED, HISTORICAL} == set(RULESET_WAYS)
    assert RULESET_WAYS[CORRECTED] == WAYS
    for name, conditions in RULESETS.items():
        assert set(conditions) == {w.name for w in RULESET_WAYS[name]}
    # the historical table's own ways: the chat creation request made again, the archive on
    # the daemon's own word
    assert {w.name for w in RULESET_WAYS[HISTORICAL]} - {w.name for w in WAYS} == {
        "request-chat", "archive"}


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_the_corrected_ruleset_is_the_planner(path):
    for s in _states(path):
        for i in range(len(s.tasks)):
            assert plan_under(CORRECTED, s, i) == plan(s, i)


def test_the_historical_ruleset_differs_on_some_states_and_an_unknown_one_is_refused():
    differ = sum(plan_under(HISTORICAL, s, i) != plan(s, i)
                 for p in TRACES for s in _states(p) for i in range(len(s.tasks)))
    assert differ > 0
    with pytest.raises(KeyError, match="unknown planner ruleset"):
        plan_under("optimistic", next(_states(TRACES[0])), 0)
