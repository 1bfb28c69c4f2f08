"""The fuzzer's graph shapes, its one-field changes of a request, and counterexamples that are
always valid traces."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from wgk.conformance.oracle import fuzz
from wgk.conformance.oracle.fuzz_shapes import SHAPES, one_field_changed, shaped_graph
from wgk.conformance.oracle.systems import ModelSystem
from wgk.conformance.traces.format import load_trace
from wgk.model.state import Graph


def two_dependencies(graph: dict) -> list[str]:
    return [t["name"] for t in graph["tasks"] if len(t["deps"]) >= 2]


def test_every_shape_is_a_graph_and_fan_in_and_diamond_join_two_dependencies():
    for shape in SHAPES:
        g = shaped_graph(2, shape)
        Graph.build([t["name"] for t in g["tasks"]], {t["name"]: t["deps"] for t in g["tasks"]})
    assert two_dependencies(shaped_graph(2, "chain")) == []
    assert two_dependencies(shaped_graph(2, "fan-in")) == ["t3"]
    assert shaped_graph(4, "diamond")["tasks"][3]["deps"] == ["t2", "t3"]
    assert shaped_graph(1, "chain") == fuzz.chain_graph(1)


REQUEST = {"kind": "dispatch", "actor": "daemon", "task": "t1", "key": "k1", "expected-attempt": 0,
           "owner": {"pid": 5001, "birth": 50010, "session": "s1", "wrapper-epoch": 1,
                     "child-epoch": 1}, "mint": "tok-t1-1"}


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_any_one_field_changed_under_the_same_key_is_an_idempotency_conflict(data):
    m = ModelSystem(shaped_graph(1, "chain"))
    assert m.apply({"request": REQUEST}) == {"decision": "applied"}
    other = one_field_changed(data, REQUEST)
    assert other["key"] == REQUEST["key"] and other != REQUEST
    diff = [k for k in REQUEST if other[k] != REQUEST[k]]
    assert len(diff) == 1
    assert m.apply({"request": other}) == {"decision": "rejected", "code": "idempotency-conflict"}


def test_a_counterexample_that_is_not_a_valid_trace_is_written_nowhere(tmp_path):
    bad = dict(REQUEST, **{"expected-attempt": -1})
    doc = fuzz.counterexample_trace(shaped_graph(1), [{"request": bad}], seed=1, failure="boom")
    path, failure = fuzz.write_counterexample(doc, str(tmp_path), "boom")
    assert path is None and list(tmp_path.iterdir()) == []
    assert "not written" in failure and "/steps/0/request/expected-attempt" in failure
    good = fuzz.counterexample_trace(shaped_graph(1), [{"request": REQUEST}], seed=1, failure="boom")
    path, failure = fuzz.write_counterexample(good, str(tmp_path), "boom")
    assert failure == "boom" and load_trace(path).steps[0]["request"] == REQUEST


def test_generated_requests_are_schema_valid_even_when_stale(tmp_path):
    """A failing lockstep run against a system that lies writes a loadable trace."""
    class Liar:
        def __init__(self, graph):
            self.m = ModelSystem(graph)

        def apply(self, step):
            d = self.m.apply(step)
            return {"decision": "applied"} if d and d.get("decision") == "rejected" else d

        def project(self):
            return self.m.project()

        def check(self):
            return []

        def close(self):
            pass
    r = fuzz.run_fuzz(fuzz.FuzzConfig(tasks=2, shape="fan-in", system=Liar), examples=50, steps=20,
                      seed=3, out_dir=str(tmp_path))
    assert r.verdict == "fail" and r.trace_path, r.failure
    load_trace(r.trace_path)


def test_the_fuzzer_draws_the_operators_pause_and_unpause():
    """Pause and unpause (with a not-before time) are among the machine's requests, so a
    system that ignores the pause is caught in lockstep."""
    from wgk.model.actions import task_steps
    from wgk.model.state import initial_state
    from wgk.model.vocab import Kind
    inst = fuzz.fuzz_instance(fuzz.FuzzConfig(tasks=1))
    assert "pause" in inst.groups
    s = initial_state(Graph.build(["a"], graph_id="g"))
    kinds = [r.kind for r in task_steps(inst, s, 0) if hasattr(r, "kind")]
    assert Kind.PAUSE in kinds and Kind.UNPAUSE in kinds

    class IgnoresPause:
        """Answers a pause as the model does but never pauses the task."""
        def __init__(self, graph):
            self.m = ModelSystem(graph)

        def apply(self, step):
            req = step.get("request") or {}
            if req.get("kind") == "pause":
                return {"decision": "applied"}
            return self.m.apply(step)

        def project(self):
            return self.m.project()

        def check(self):
            return []

        def close(self):
            pass
    r = fuzz.run_fuzz(fuzz.FuzzConfig(tasks=1, system=IgnoresPause), examples=200, steps=15,
                      seed=4)
    assert r.verdict == "fail", r
