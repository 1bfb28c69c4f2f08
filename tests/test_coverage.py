"""Decision coverage: revocation in the model and the trace format, the cells of the
model's decision space, the instrumentation of the lockstep driver, the witnesses and the
gate's coverage section (which fails, naming the cell, when a witness is removed)."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from wgk.conformance.cli.main import main
from wgk.conformance.oracle import coverage, witnesses
from wgk.conformance.oracle.coverage import cells, classify, reachable, recording
from wgk.conformance.oracle.impl_system import ImplSystem
from wgk.conformance.oracle.replay import replay
from wgk.conformance.oracle.systems import ModelSystem, StepError
from wgk.conformance.reports.gate import SECTIONS
from wgk.conformance.reports.gate_budget import BUDGETS, bundled_traces
from wgk.conformance.reports.gate_coverage import coverage_checks
from wgk.conformance.reports.gate_split import LATE
from wgk.conformance.traces.format import TraceError, load_trace, load_traces, parse_trace
from wgk.model.kernel import authenticated, revoke_principal
from wgk.model.requests import Capability, Request
from wgk.model.state import Graph, initial_state
from wgk.model.vocab import NEEDS_CAPABILITY, Actor, Kind

ROOT = Path(__file__).resolve().parents[1]
REVOKED = ROOT / "traces" / "incidents" / "40-revoked-credential-refused.json"


@pytest.fixture(scope="module")
def loaded():
    return load_traces([str(bundled_traces())])


@pytest.fixture(scope="module")
def replayed(loaded):
    """The cells the traces alone reach, by the model."""
    return witnesses.trace_cells(loaded)


# --- revocation -------------------------------------------------------------------------------


def test_a_revoked_principal_is_answered_as_an_unknown_one():
    g = Graph.build(["a"], principals={"op": [Actor.OPERATOR]})
    s = initial_state(g)
    r = Request(Kind.RESET, Actor.OPERATOR, "a", key="k", expected_generation=0, principal="op")
    assert authenticated(s, r)
    s2 = revoke_principal(s, "op")
    assert not authenticated(s2, r) and s2.revoked == frozenset({"op"})
    assert revoke_principal(s2, "op") is s2
    with pytest.raises(ValueError, match="undeclared principal 'nobody'"):
        revoke_principal(s, "nobody")


def test_the_revoked_trace_replays_alike_and_breaks_an_implementation_that_ignores_revocation(
        monkeypatch):
    trace = load_trace(REVOKED)
    assert replay(trace, [ModelSystem(trace), ImplSystem(trace)]).passed
    monkeypatch.setattr(ImplSystem, "revoke", lambda self, name: None)
    r = replay(trace, [ModelSystem(trace), ImplSystem(trace)])
    assert not r.passed
    assert any(d.step == 2 and d.what == "lockstep-decision" for d in r.divergences)


@pytest.mark.parametrize("step, where", [
    ({"env": "revoke"}, "/steps/0"),
    ({"env": "revoke", "principal": "nobody"}, "/steps/0/principal"),
    ({"env": "tick", "amount": 1, "principal": "op"}, "/steps/0"),
])
def test_a_bad_revoke_step_is_one_line_naming_where(step, where):
    doc = {"format": "wgk-trace/1", "id": "t", "title": "t",
           "source": {"kind": "incident", "provenance": "p"}, "description": "",
           "graph": {"id": "g", "target": "m", "tasks": [{"name": "a"}],
                     "principals": [{"name": "op", "roles": ["operator"]}]},
           "steps": [step]}
    with pytest.raises(TraceError) as e:
        parse_trace(json.dumps(doc), "x.json")
    assert str(e.value).startswith(f"x.json: {where}") and "\n" not in str(e.value)


def test_the_model_refuses_a_revoke_of_an_undeclared_principal_as_a_step_error():
    m = ModelSystem(load_trace(REVOKED))
    with pytest.raises(StepError, match="undeclared"):
        m.apply({"env": "revoke", "principal": "mallory"})


# --- the cells --------------------------------------------------------------------------------


def test_cells_are_three_families_and_every_unreachable_one_says_why():
    every = cells()
    fams = {name.split("/")[1] for name in every}
    assert fams == set(coverage.FAMILIES)
    for k in Kind:
        assert f"{k.label}/outcome/duplicate" in reachable()
        if k not in NEEDS_CAPABILITY and k != Kind.RESUME:
            assert every[f"{k.label}/capability/exact"] == f"{k.label} carries no K"
    assert every["message/actor/other"].startswith("every role may send message")
    assert every["reset/outcome/rejected:stale-capability"] == "reset carries no K"
    assert every["dispatch/outcome/rejected:dependency-not-done"] is None
    assert all(why for why in every.values() if why is not None)
    # the rule's own codes are read from the rule, not listed by hand
    assert every["reset/outcome/rejected:held"] is None
    assert every["reset/outcome/rejected:dependency-not-done"] is not None


def test_classify_puts_a_request_into_one_cell_of_each_family_it_reaches():
    trace = load_trace(REVOKED)
    m = ModelSystem(trace)
    m.apply(trace.steps[0])
    m.apply(trace.steps[1])                              # operator-1 revoked
    s = m.state
    r = Request(Kind.RESET, Actor.OPERATOR, "a", key="z", expected_generation=1,
                principal="operator-1")
    got = classify(s, r, {"decision": "rejected", "code": "not-authenticated"}, {})
    assert got == ["reset/outcome/rejected:not-authenticated", "reset/actor/revoked"]
    other = Request(Kind.RESET, Actor.WORKER, "a", key="z", expected_generation=1,
                    principal="worker-1")
    assert "reset/actor/other" in classify(s, other, {"decision": "rejected",
                                                      "code": "not-authorized"}, {})
    posing = Request(Kind.RESET, Actor.OPERATOR, "a", key="z", expected_generation=1,
                     principal="worker-1")
    assert "reset/actor/without-role" in classify(s, posing, {"decision": "rejected",
                                                              "code": "role-not-held"}, {})


def test_capability_classes_name_the_one_field_off():
    trace = load_trace(ROOT / "traces" / "incidents" / "10-stale-capability-rejected.json")
    with recording() as sent:
        replay(trace, [ModelSystem(trace), ImplSystem(trace)])
    assert any("/capability/" in c for c in sent)
    assert all(c in cells() for c in sent)


def test_each_field_of_k_off_by_one_and_each_wrong_token_is_its_own_cell():
    trace = load_trace(ROOT / "traces" / "incidents" / "10-stale-capability-rejected.json")
    m = ModelSystem(trace)
    for step in trace.steps:
        if any(t.attempt_state == 1 and t.token for t in m.state.tasks):
            break
        m.apply(step)
    s = m.state
    i = next(n for n, t in enumerate(s.tasks) if t.attempt_state == 1 and t.token)
    t, name = s.tasks[i], s.graph.tasks[i]
    k = Capability(s.graph.graph_id, name, t.generation, t.attempt, t.fence, t.lease_epoch)
    hb = lambda **kw: Request(Kind.HEARTBEAT, Actor.WORKER, name, key="h", evidence="e",
                              **{"cap": k, "token": t.token, **kw})
    cap = lambda r: [c for c in classify(s, r, {"decision": "rejected"}, {i: {t.token, 99}})
                     if "/capability/" in c]
    assert cap(hb()) == ["heartbeat/capability/exact"]
    for field, label in (("generation", "generation"), ("attempt", "attempt"),
                         ("fence", "fence"), ("lease_epoch", "lease-epoch")):
        v = getattr(k, field)
        assert cap(hb(cap=replace(k, **{field: v + 1}))) == [f"heartbeat/capability/{label}-ahead"]
        if v > 0:
            assert cap(hb(cap=replace(k, **{field: v - 1}))) == [f"heartbeat/capability/{label}-stale"]
    assert cap(hb(cap=replace(k, graph="other"))) == ["heartbeat/capability/graph-foreign"]
    assert cap(hb(token=0)) == ["heartbeat/capability/token-none"]
    assert cap(hb(token=99)) == ["heartbeat/capability/token-stale"]
    assert cap(hb(token=0, cap=replace(k, fence=k.fence + 1))) == []     # two things off: none


def test_recording_sees_only_the_requests_sent_to_the_implementation():
    trace = load_trace(REVOKED)
    with recording() as sent:
        replay(trace, [ModelSystem(trace)])              # the model alone: nothing sent
    assert sent == set()
    with recording() as sent:
        replay(trace, [ModelSystem(trace), ImplSystem(trace)])
    assert {"reset/actor/revoked", "reset/outcome/applied", "message/actor/own"} <= sent


# --- the witnesses and the section ------------------------------------------------------------


def test_stored_witnesses_are_current_and_reach_every_reachable_cell_they_name(loaded):
    doc = witnesses.load()
    assert not witnesses.stale(doc, loaded), "stale: run wgk coverage --write"
    named = {c for w in doc["witnesses"] for c in w["cells"]}
    assert named <= set(reachable())
    assert named | set(doc["unfound"]) == set(reachable())


def test_a_changed_trace_makes_the_witnesses_stale(loaded, tmp_path):
    doc = witnesses.load()
    trace = next(t for t in loaded if t.id == doc["witnesses"][0]["trace"])
    copy_ = tmp_path / "changed.json"
    copy_.write_text(Path(trace.path).read_text().replace('"description": "', '"description": "x', 1))
    assert witnesses.stale(doc, [load_trace(copy_)])
    assert not witnesses.stale(doc, [trace])


def _one_witness(replayed) -> dict:
    """A witness reaching a cell the traces alone do not reach (the first inline one)."""
    doc = witnesses.load()
    w = next(w for w in doc["witnesses"]
             if not w["fork"] and w["steps"] and not set(w["cells"]) & replayed)
    return dict(doc, witnesses=[dict(w, cells=sorted(set(w["cells"]) - replayed))])


def test_the_section_fails_naming_the_cell_when_its_witness_is_removed(loaded, replayed):
    doc = _one_witness(replayed)
    w = doc["witnesses"][0]
    target = w["cells"][0]
    kind = target.split("/")[0]
    with_it = {c.name: c for c in coverage_checks("quick", None, loaded, replayed, doc)}
    assert with_it["witnesses"].verdict == "pass", with_it["witnesses"].detail
    assert target.split("/", 1)[1] not in with_it[kind].data["uncovered"]
    without = {c.name: c for c in coverage_checks("quick", None, loaded, replayed,
                                                  dict(doc, witnesses=[]))}
    assert without[kind].verdict == "fail"
    assert target in without[kind].detail or target.split("/", 1)[1] in without[kind].data["uncovered"]


def test_a_cell_no_search_reaches_is_unreachable_by_its_proof_and_fails_without_it(
        loaded, replayed):
    doc = witnesses.load()
    assert set(doc["unreached"]) <= set(doc["unfound"])
    cell_, why = next(iter(doc["unreached"].items()))
    kind = cell_.split("/")[0]
    short = cell_.split("/", 1)[1]
    none = dict(doc, witnesses=[])
    listed = {c.name: c for c in coverage_checks("quick", None, loaded, replayed, none)}
    assert listed[kind].data["unreachable"][short] == why and "proved unreachable (z3" in why
    assert short not in listed[kind].data["uncovered"]
    bare = {c.name: c for c in coverage_checks("quick", None, loaded, replayed,
                                               dict(none, unreached={}))}
    assert short in bare[kind].data["uncovered"] and bare[kind].verdict == "fail"


def test_a_stale_witness_file_fails_the_section_with_the_command(loaded, replayed):
    # the model's text changed (another digest) and so did its cells: stale by behaviour
    doc = dict(_one_witness(replayed), **{"model-digest": "0" * 64, "cells": "0" * 64})
    checks = {c.name: c for c in coverage_checks("quick", None, loaded, replayed, doc)}
    assert checks["witnesses"].verdict == "fail"
    assert checks["witnesses"].detail == ("stale (the model's cells or their reachability "
                                          "changed): run wgk coverage --write")
    # the text changed alone, every answer and proof the same: current
    same = dict(doc, cells=witnesses.cells_digest())
    checks = {c.name: c for c in coverage_checks("quick", None, loaded, replayed, same)}
    assert checks["witnesses"].verdict == "pass", checks["witnesses"].detail


def test_an_implementation_answering_a_witness_differently_fails_it(loaded, replayed, monkeypatch):
    doc = _one_witness(replayed)
    keys = {s["request"]["key"] for s in doc["witnesses"][0]["steps"] if "request" in s}
    real = ImplSystem.apply

    def lying(self, step):
        got = real(self, step)
        if "request" in step and step["request"].get("key") in keys:
            return {"decision": "applied"}
        return got
    monkeypatch.setattr(ImplSystem, "apply", lying)
    checks = {c.name: c for c in coverage_checks("quick", None, loaded, replayed, doc)}
    assert checks["witnesses"].verdict == "fail"
    assert doc["witnesses"][0]["cells"][0] in checks["witnesses"].detail


def test_the_gate_runs_coverage_late_in_every_budget():
    assert "coverage" in dict(SECTIONS) and "coverage" in LATE
    assert all(BUDGETS[b].get("coverage") for b in ("quick", "default", "deep"))


def test_the_cli_refuses_a_bad_trace_in_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert main(["coverage", "--traces", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert str(bad) in err and "\n" not in err


def test_no_cell_is_unreachable_only_because_an_exploration_did_not_reach_it():
    doc = witnesses.load()
    assert doc["unreached"] and set(doc["unreached"]) == set(doc["unfound"])
    assert all(why.startswith("proved unreachable (z3") for why in doc["unreached"].values())


def test_the_proofs_of_the_unreached_cells_hold_and_need_their_lemma(monkeypatch):
    from wgk.conformance.z3 import lemmas
    from wgk.conformance.z3.unreachable import prove_unreachable
    doc = witnesses.load()
    assert set(prove_unreachable(doc["unfound"])) == set(doc["unfound"])
    # a reachable refusal is not proved unreachable
    assert prove_unreachable(["archive/outcome/rejected:candidate-mismatch",
                              "dispatch/outcome/applied"]) == {}
    # without the lemma that the worktree exists mid-transaction, two proofs fail
    monkeypatch.delitem(lemmas.LEMMAS, "worktree-present-mid-transaction")
    left = set(prove_unreachable(doc["unfound"]))
    assert {"revise/outcome/rejected:worktree-missing",
            "save-work/outcome/rejected:worktree-missing"}.isdisjoint(left)


def test_the_written_witness_reaches_its_cell_on_the_model_and_the_implementation(loaded):
    from wgk.conformance.oracle.witnesses_written import written
    for w in written():
        cells, problems = witnesses.replay_witnesses(loaded, [w], ImplSystem)
        assert problems == [] and set(w["cells"]) <= cells
        assert w in witnesses.load()["witnesses"]
    found: list = []
    cells = [c for w in written() for c in w["cells"]]
    assert witnesses.add_written(found, cells + ["x"], loaded) == ["x"]
    assert found == written()
    found = []
    assert witnesses.add_written(found, ["archive/outcome/rejected:candidate-mismatch"],
                                 loaded) == []
    assert [w["cells"] for w in found] == [["archive/outcome/rejected:candidate-mismatch"]]


def test_the_witnesses_start_from_the_traces_the_gate_read_unless_their_file_changed(
        tmp_path, monkeypatch):
    """The section takes the bundled traces the gate read at its start (``remember``) rather
    than reading and validating every file again; a file changed since is read again, and a
    trace the gate did not record is read from its file."""
    import os
    from wgk.conformance.oracle import mutant_traces
    from wgk.conformance.reports import gate_coverage
    for p in sorted(Path(bundled_traces()).rglob("*.json"))[:2]:
        (tmp_path / p.name).write_bytes(p.read_bytes())
    monkeypatch.setattr(gate_coverage, "bundled_traces", lambda: tmp_path)
    first = load_traces([str(tmp_path)])
    assert [t.id for t in gate_coverage.bundled_as_loaded(first)] == [t.id for t in first]
    assert not any(a is b for a, b in zip(gate_coverage.bundled_as_loaded(first), first))
    mutant_traces.remember(first)
    assert all(a is b for a, b in zip(gate_coverage.bundled_as_loaded(first), first))
    changed = Path(first[0].path)
    changed.write_text(changed.read_text().replace('"title": "', '"title": "changed: ', 1))
    os.utime(changed, ns=(1, 1))
    again = gate_coverage.bundled_as_loaded(first)
    assert again[0] is not first[0] and again[0].title.startswith("changed: ")
    assert again[1] is first[1]


def test_the_witnesses_take_the_traces_read_from_the_same_paths_without_resolving_them(
        tmp_path, monkeypatch):
    """Asked again (each part of the witnesses asks), a bundled file named by the very path a
    trace was read from is that trace's, no path resolved; one read by another path to the same
    file (here through a link to the folder) is still found by resolving both."""
    import pathlib
    from wgk.conformance.oracle import mutant_traces
    from wgk.conformance.reports import gate_coverage
    for p in sorted(Path(bundled_traces()).rglob("*.json"))[:3]:
        (tmp_path / "corpus").mkdir(exist_ok=True)
        (tmp_path / "corpus" / p.name).write_bytes(p.read_bytes())
    (tmp_path / "link").symlink_to(tmp_path / "corpus")
    monkeypatch.setattr(gate_coverage, "bundled_traces", lambda: tmp_path / "corpus")
    first = load_traces([str(tmp_path / "corpus")])
    mutant_traces.remember(first)
    assert all(a is b for a, b in zip(gate_coverage.bundled_as_loaded(first), first))
    resolved = []            # asked again: the folder's listing kept, the paths as read
    real = pathlib.Path.resolve
    monkeypatch.setattr(pathlib.Path, "resolve",
                        lambda self, *a, **k: resolved.append(self) or real(self, *a, **k))
    assert all(a is b for a, b in zip(gate_coverage.bundled_as_loaded(first), first))
    assert resolved == []
    monkeypatch.setattr(pathlib.Path, "resolve", real)
    linked = load_traces([str(tmp_path / "link")])
    mutant_traces.remember(linked)
    assert all(a is b for a, b in zip(gate_coverage.bundled_as_loaded(linked), linked))


class _Contrary:
    """An implementation answering every step with a decision no model gives."""

    def __init__(self, trace):
        self.trace = trace

    def apply(self, step):
        return {"decision": "contrary", "trace": self.trace.id}

    def close(self):
        pass


def test_the_witnesses_replayed_on_two_processes_give_one_processs_cells_and_problems(loaded):
    """Shared among forked processes, the witnesses reach the same cells and report the same
    problems in the same order; an implementation answering everything wrongly gives a
    problem per run, in the order of the traces."""
    doc = witnesses.load()
    one = witnesses.replay_witnesses(loaded, doc["witnesses"], ImplSystem)
    two = witnesses.replay_witnesses(loaded, doc["witnesses"], ImplSystem, workers=2)
    assert one[0] and two == one
    with recording() as outer:
        witnesses.replay_witnesses(loaded, doc["witnesses"], ImplSystem, workers=2)
    assert outer == one[0]
    wrong = witnesses.replay_witnesses(loaded, doc["witnesses"], _Contrary, workers=3)
    assert len(wrong[1]) > 10 and wrong == witnesses.replay_witnesses(loaded, doc["witnesses"],
                                                                      _Contrary)


def test_the_witnesses_share_out_in_consecutive_runs_of_about_as_many_steps():
    jobs = [(n, [{"at": n % 7, "steps": [{}] * (n % 3)}]) for n in range(40)]
    for workers in (1, 2, 3, 8):
        chunks = witnesses._chunks(jobs, workers)
        assert [j for c in chunks for j in c] == jobs
        assert 1 <= len(chunks) <= workers and all(chunks)
    assert len(witnesses._chunks(jobs, 2)) == 2
    assert witnesses._chunks(jobs[:1], 4) == [jobs[:1]]
