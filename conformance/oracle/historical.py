"""Replay under a named historical planner ruleset (``wgk replay --planner historical``).

The model decides every request as always; only the planner differs: every
task's plan in the projection is the named ruleset's (``wgk.model.planner_rulesets``).
The trace's expected decisions are checked, its per-step facts are not (they
are the corrected planner's), and its final facts are the trace's ``historical``
section: the way the old planner took, the violation it is named after."""
from __future__ import annotations

from dataclasses import replace

from wgk.model.planner_rulesets import HISTORICAL, RULESETS, plan_under

from wgk.conformance.oracle.replay import TraceResult, replay
from wgk.conformance.oracle.systems import ModelSystem
from wgk.conformance.traces.format import Trace


class RulesetModelSystem(ModelSystem):
    """The model, its plans projected under a named planner ruleset."""

    def __init__(self, trace: Trace, ruleset: str):
        if ruleset not in RULESETS:
            raise KeyError(ruleset)
        super().__init__(trace)
        self.ruleset = ruleset
        self.name = f"model[{ruleset}]"

    def project(self) -> dict:
        out = super().project()
        for i, name in enumerate(self.state.graph.tasks):
            p = plan_under(self.ruleset, self.state, i)
            out["tasks"][name]["plan"] = p.to_json() if p is not None else None
        return out


def historical_view(trace: Trace) -> Trace:
    """The trace with its decisions kept, its corrected facts dropped and its historical
    expectation as the final facts."""
    steps = [{k: v for k, v in s.items() if k != "expect-facts"} for s in trace.steps]
    return replace(trace, steps=steps, expect=dict(trace.historical.get("expect", {})))


def replay_historical(trace: Trace, ruleset: str = HISTORICAL) -> TraceResult:
    """The trace's decisions, and its historical final facts, under the named ruleset."""
    view = historical_view(trace)
    return replay(view, [RulesetModelSystem(view, ruleset)])
