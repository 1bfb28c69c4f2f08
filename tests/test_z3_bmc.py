"""Bounded model checking: shortest witnesses replay, impossible states are unreachable,
traces export as wgk-trace/1 and ITF, and --reach expressions are checked."""
from __future__ import annotations

import pytest

from wgk.conformance.z3.bmc import Goal, check, goal_for
from wgk.conformance.z3.bmc import follow, invariant_goal
from wgk.conformance.z3.witnesses import (
    DEFAULT_WITNESS, WITNESSES, recorded_paths, sometimes_goals, witness, witness_along, write_paths,
)
from wgk.model.invariants import REGISTRY
from wgk.conformance.z3.reach_expr import ReachError, compile_reach
from wgk.conformance.traces.format import load_trace
from wgk.model.env import apply_env, EnvStep
from wgk.model.actions import Instance
from wgk.model.kernel import decide
from wgk.model.projections import status
from wgk.model.vocab import DecisionKind as D, Status


def reach(text: str, inst: Instance) -> Goal:
    expr = compile_reach(text, inst.graph().tasks)
    return Goal("reach", text, "reach", "state", state=expr.holds)


def replay(inst: Instance, trace):
    """Run a trace's steps through the executable model from the instance's initial state."""
    s = inst.initial()
    for step, d in zip(trace.steps, trace.decisions):
        if isinstance(step, EnvStep):
            s = apply_env(s, step)
        else:
            d2, s = decide(s, step)
            assert d2 == d
    return s


def test_reach_finds_the_shortest_done_and_it_replays():
    inst = Instance(tasks=1, groups=("core",))
    r = check(reach('t1.status == "done"', inst), inst, 13)
    assert r.status == "reached" and r.found_at == 13          # dispatch + 12 main-line edges
    final = replay(inst, r.trace)
    assert status(final.tasks[0]) == Status.DONE
    assert final == r.trace.states[-1]
    assert all(d.kind == D.APPLIED for d in r.trace.decisions)


def test_an_impossible_state_is_unreachable_within_depth():
    """A dependent in progress while its dependency needs repair (dependency-needs-done)."""
    inst = Instance(tasks=2, groups=("core", "env"))
    r = check(reach('t2.status == "in-progress" and t1.status == "needs-repair"', inst), inst, 7)
    assert r.status == "unreachable" and r.trace is None and len(r.per_depth) == 8


def test_an_invariant_holds_within_depth_on_the_model():
    inst = Instance(tasks=1, groups=("core", "env"))
    r = check(goal_for("promotion-at-most-once"), inst, 8)
    assert r.status == "holds" and r.found_at is None


def test_a_sometimes_property_gets_a_witness():
    r = witness("lost-reached")
    assert r.status == "reached" and 1 <= r.found_at <= 4
    assert r.trace.states[-1].tasks[0].attempt_state.label == "lost"


def test_trace_exports(tmp_path):
    inst = Instance(tasks=1, groups=("core", "env"))
    r = check(reach('t1.attempt_state == "lost"', inst), inst, 4)
    trace = r.trace
    trace.id, trace.provenance = "lost", "wgk check --reach ..."
    doc = trace.to_wgk().to_json()
    assert doc["format"] == "wgk-trace/1" and doc["source"]["kind"] == "counterexample"
    assert doc["graph"]["tasks"][0]["name"] == "t1" and doc["graph"]["target"] == "c1"
    requests = [s["request"] for s in doc["steps"] if "request" in s]
    assert requests[0]["kind"] == "dispatch" and requests[0]["task"] == "t1"
    assert all("expect" in s for s in doc["steps"] if "request" in s)
    assert len({q["key"] for q in requests}) == len(requests)      # a key of its own each
    assert all(isinstance(q["owner"]["session"], str) for q in requests if "owner" in q)
    loaded = load_trace(trace.write(tmp_path / "lost.json"))
    assert loaded.steps == doc["steps"]                              # schema-valid, canonical
    itf = trace.to_itf()
    assert set(itf) == {"#meta", "vars", "states"}
    assert len(itf["states"]) == r.found_at + 1
    first = itf["states"][0]
    assert first["#meta"] == {"index": 0} and first["now"] == {"#bigint": "0"}
    task = dict(first["tasks"]["#map"])["t1"]
    assert task["status"] == "open" and task["attempt"] == {"#bigint": "0"}
    last = dict(itf["states"][-1]["tasks"]["#map"])["t1"]
    assert last["attempt-state"] == "lost"


@pytest.mark.parametrize("text, message", [
    ("t3.status == 'open'", "unknown task 't3'"),
    ("t1.status == 'finished'", "unknown Status 'finished'"),
    ("t1.colour == 1", "unknown field 'colour'"),
    ("__import__('os').system('true')", "not allowed here: call"),
    ("t1.status < 'done'", "only compares with == and !="),
    ("t1.attempt == 'one'", "compares with an int"),
    ("t1.status ==", "column"),
    ("", "empty expression"),
])
def test_bad_reach_expressions(text, message):
    with pytest.raises(ReachError, match=message):
        compile_reach(text, ("t1", "t2"))


def test_reach_expression_evaluates_concretely():
    s = Instance(tasks=2).initial()
    assert compile_reach('t1.status == "open" and not t2.abandoned', ("t1", "t2")).holds(s) is True
    assert compile_reach("t1.phase in ('absent', 'prepared') and t1.attempt < 1",
                         ("t1", "t2")).holds(s) is True
    assert compile_reach("target == t1.base or now > 3", ("t1", "t2")).holds(s) is False


# --- recorded witness paths (what the gate follows) ---------------------------------------

def test_every_sometimes_property_has_a_recorded_path_that_still_reaches_it():
    """The gate follows these; a stale one would only cost it a search, so it is caught here."""
    paths = recorded_paths()
    assert set(paths) == set(sometimes_goals())
    for goal in sometimes_goals():
        r, how = witness_along(goal, paths)
        assert (goal, r.status, how) == (goal, "reached", "recorded path")
        assert r.found_at == len(paths[goal]) and r.path == paths[goal]
        assert r.trace.states[-1] == replay(WITNESSES.get(goal, DEFAULT_WITNESS)[0], r.trace)


def test_a_path_that_no_longer_reaches_its_goal_is_searched_for():
    goal = invariant_goal(REGISTRY["lost-reached"])
    inst = WITNESSES["lost-reached"][0]
    path = recorded_paths()["lost-reached"]
    assert follow(goal, inst, path) is not None
    assert follow(goal, inst, path[:-1]) is None                    # one step short
    assert follow(goal, inst, ["dispatch(t1)"] + path[2:]) is None  # the owner never died
    assert follow(goal, inst, path[:-1] + ["declare-lost(t9)"]) is None   # no such template
    assert follow(invariant_goal(REGISTRY["done-reached"]), inst, path) is None
    r, how = witness_along("lost-reached", {"lost-reached": path[:-1]})
    assert (r.status, how) == ("reached", "search: recorded path stale")
    assert r.found_at == len(path)


def test_recorded_paths_are_written_beside_the_others(tmp_path):
    f = tmp_path / "paths.json"
    write_paths({"lost-reached": ["a(t1)"], "no-such-property": ["b(t1)"]}, f)
    write_paths({"done-reached": ["c(t1)"]}, f)
    # a goal that is no property is dropped when the file is written again
    assert recorded_paths(f) == {"done-reached": ["c(t1)"], "lost-reached": ["a(t1)"]}
    f.write_text('{"paths": []}')
    with pytest.raises(ValueError, match="not a wgk-witness-paths/1 document"):
        recorded_paths(f)
    assert recorded_paths(tmp_path / "absent.json") == {}
