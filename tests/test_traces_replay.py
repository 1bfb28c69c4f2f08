"""Model replay of the incident corpus, the verdicts it returns and the wgk replay command."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from wgk.conformance.cli.main import main
from wgk.conformance.oracle.lockstep import MISSING, decision_matches, match_facts
from wgk.conformance.oracle.replay import TraceBuilder, replay
from wgk.conformance.oracle.systems import ModelSystem
from wgk.conformance.traces.format import load_trace, trace_files

ROOT = Path(__file__).resolve().parent.parent
INCIDENTS = trace_files([ROOT / "traces" / "incidents"])
ACCEPTANCE = ("false-done-dependency-dispatch", "brokered-lost-worktree-handoff",
              "crash-at-every-transaction-phase", "dead-worker-convergence", "target-movement",
              "reset-retry", "lost-response", "legacy-done-migration")


def test_the_corpus_covers_every_incident_and_acceptance_trace():
    traces = [load_trace(p) for p in INCIDENTS]
    assert {t.source.get("incident") for t in traces} >= set(range(1, 18))
    names = {p.stem for p in INCIDENTS}
    for n in range(1, 18):
        assert any(name.startswith(f"{n:02d}-") for name in names), n
    for a in ACCEPTANCE:
        assert f"acceptance-{a}" in names


@pytest.mark.parametrize("path", INCIDENTS, ids=lambda p: p.stem)
def test_incident_trace_replays_through_the_model(path):
    trace = load_trace(path)
    requests = [s for s in trace.steps if "request" in s]
    assert requests and all("expect" in s for s in requests), "every request has its expected decision"
    assert trace.expect, "every incident has expected final facts"
    result = replay(trace)
    assert result.passed, "\n".join(d.describe() for d in result.divergences)
    assert len(result.steps) == len(trace.steps)
    assert all(r.ok for r in result.steps)


def _trace(name="04-dead-worker-converges.json"):
    return load_trace(ROOT / "traces" / "incidents" / name)


def test_a_wrong_expected_decision_is_a_divergence_naming_the_step():
    t = _trace()
    t.steps[5]["expect"] = {"decision": "rejected", "code": "owner-not-proven-dead"}
    r = replay(t)
    assert r.verdict == "fail"
    (d,) = r.divergences
    assert (d.trace, d.step, d.system, d.what) == ("incident-04-dead-worker-converges", 5, "model", "decision")
    assert d.request["kind"] == "dispatch"
    assert d.expected == {"decision": "rejected", "code": "owner-not-proven-dead"}
    assert d.actual == {"decision": "applied"}
    assert not r.steps[5].ok and r.steps[4].ok


def test_a_wrong_final_fact_is_a_field_by_field_diff():
    t = _trace()
    t.expect = {"tasks": {"a": {"status": "done", "attempt": 2, "owner": {"pid": 9}}}}
    (d,) = replay(t).divergences
    assert d.what == "final-facts" and d.step is None
    assert [(f.path, f.expected, f.actual) for f in d.diffs] == [
        ("tasks.a.status", "done", "in-progress"), ("tasks.a.owner.pid", 9, 4002)]


def test_an_impossible_environment_step_is_a_step_error():
    t = _trace()
    t.steps.insert(2, {"env": "owner-dies", "task": "a"})     # the owner is already dead
    r = replay(t)
    assert [d.what for d in r.divergences][0] == "step-error"
    assert "not possible" in r.divergences[0].actual


def test_fact_matching_semantics():
    actual = {"a": 1, "b": {"c": 2, "d": None}, "ev": [["probe-owner", "x"], ["heartbeat-timeout", "y"]]}
    assert match_facts({"b": {"c": 2}}, actual) == []
    assert match_facts({"zz": None}, actual) == []                 # a listed null matches an absent key
    assert match_facts({"b": {"d": None}}, actual) == []
    (d,) = match_facts({"zz": 1}, actual)
    assert d.path == "zz" and d.actual is MISSING
    assert match_facts({"a": True}, actual) != []                  # 1 is not True
    assert match_facts({"ev": {"$contains": [["probe-owner", "x"]]}}, actual) == []
    assert match_facts({"ev": {"$contains": [["probe-owner", "z"]]}}, actual) != []
    assert match_facts({"ev": {"$kinds": ["probe-owner"], "$exactly": [["probe-owner", "x"]]}}, actual) == []
    assert match_facts({"ev": {"$kinds": ["probe-owner", "observe-eof"], "$exactly": []}}, actual) != []
    assert match_facts({"ev": [["probe-owner", "x"]]}, actual) != []     # a list compares whole


def test_decision_matching():
    assert decision_matches({"decision": "applied"}, {"decision": "applied"})
    assert not decision_matches({"decision": "rejected"}, {"decision": "rejected", "code": "held"})
    dup = {"decision": "duplicate", "original": {"decision": "rejected", "code": "cas-moved"}}
    assert decision_matches({"decision": "duplicate"}, dup)
    assert not decision_matches({"decision": "duplicate", "original": {"decision": "applied"}}, dup)
    assert not decision_matches({"decision": "applied"}, None)


class Skewed(ModelSystem):
    """A second system that answers like the model except that a log request changes nothing."""

    name = "skewed"

    def apply(self, step):
        if "request" in step and step["request"]["kind"] == "log":
            return {"decision": "evidence-only"}
        return super().apply(step)


def _log_trace():
    b = TraceBuilder("t-log", "log", {"kind": "counterexample", "provenance": "test"}, "",
                     [{"name": "a"}])
    b.send("dispatch", "daemon", "a", "applied", owner={"pid": 1, "birth": 2, "session": "s"})
    b.send("log", "worker", "a", "applied")
    return b.expect({"tasks": {"a": {"counters": {"logs": 1}}}})


def test_lockstep_with_a_second_system():
    t = _log_trace()
    assert replay(t, [ModelSystem(t), ModelSystem(t)]).passed
    r = replay(t, [ModelSystem(t), Skewed(t)])
    whats = [(d.system, d.step, d.what) for d in r.divergences]
    assert ("skewed", 1, "decision") in whats
    assert ("skewed", 1, "lockstep-decision") in whats
    proj = [d for d in r.divergences if d.what == "lockstep-projection"][0]
    assert [f.path for f in proj.diffs] == ["tasks.a.counters.logs", "journal.log:a:2"]
    assert ("skewed", None, "final-facts") in whats


def test_the_builder_never_takes_expectations_from_the_model():
    b = TraceBuilder("t", "t", {"kind": "counterexample", "provenance": "test"}, "", [{"name": "a"}])
    b.send("declare-lost", "daemon", "a", "applied")     # wrong on purpose: the author's claim is kept
    assert b.trace.steps[0]["expect"] == {"decision": "applied"}
    assert replay(b.trace).divergences[0].actual == {"decision": "rejected", "code": "unknown-attempt"}


def test_replay_cli_json_and_exit_codes(tmp_path, capsys):
    assert main(["replay", str(ROOT / "traces" / "incidents"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["failed"] == 0 and out["passed"] == len(INCIDENTS)
    first = out["traces"][0]
    assert set(first) >= {"id", "verdict", "steps", "crash_cuts", "divergences"}
    doc = json.loads((ROOT / "traces" / "incidents" / "04-dead-worker-converges.json").read_text())
    doc["steps"][5]["expect"] = {"decision": "rejected", "code": "held"}
    bad = tmp_path / "04.json"
    bad.write_text(json.dumps(doc))
    assert main(["replay", str(bad)]) == 1
    text = capsys.readouterr().out
    assert "FAIL incident-04-dead-worker-converges" in text
    assert "step 5 [model] decision on dispatch a key=dispatch:a:4" in text
    assert "expected rejected:held, got applied" in text
    assert f"reproduce: wgk replay {bad} --system model" in text
    assert text.rstrip().endswith("0 passed, 1 failed")


@pytest.mark.parametrize("flags", [["--crash-cuts"], ["--kill"]])
def test_crash_cuts_of_the_model_alone_are_refused(flags, capsys):
    assert main(["replay", str(INCIDENTS[0]), *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert "use --system impl or --system both" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("system", ["impl", "both"])
def test_replay_through_the_implementation(system, capsys):
    assert main(["replay", str(INCIDENTS[0]), "--system", system, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["passed"] == 1 and out["traces"][0]["systems"] == (["model", "impl"] if system == "both"
                                                                  else ["impl"])


def test_replay_with_crash_cuts_reports_every_cut(capsys, tmp_path, monkeypatch):
    path = ROOT / "traces" / "incidents" / "05-lost-response-retried.json"
    monkeypatch.setenv("WGK_GATE_SCRATCH", str(tmp_path))
    assert main(["replay", str(path), "--system", "both", "--crash-cuts", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["traces"][0]["crash_cuts"] == 8 and out["traces"][0]["divergences"] == []
    assert out["scratch"] == str(tmp_path)          # in-process cuts: where the gate's go
    assert main(["replay", str(path), "--system", "impl", "--kill", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["traces"][0]["crash_cuts"] == 8 and out["scratch"] == tempfile.gettempdir()


RACE = ROOT / "traces" / "incidents" / "42-two-lands-race-one-target.json"


def _winner_lands(trace) -> int:
    return next(n for n, s in enumerate(trace.steps)
                if s.get("request", {}).get("key", "").startswith("commit-effect:a:"))


def test_a_cut_after_the_winners_land_expects_the_loser_to_plan_mark_repair():
    """The expected state after a cut that made a land durable is computed with that land: the
    other task prepared on the old target plans mark-repair, not its stale plan."""
    from wgk.conformance.oracle.crashcuts import crash_cuts, with_effects
    trace = load_trace(RACE)
    k = _winner_lands(trace)
    model = ModelSystem(trace)
    for step in trace.steps[:k]:
        model.apply(step)
    before, prefix = model.state, model.project()
    model.apply(trace.steps[k])
    effected = with_effects(model, before, model.state)
    assert prefix["tasks"]["b"]["plan"]["action"] == "drive-transaction"
    assert effected["target"] == "c-a1" and effected["tasks"]["a"]["effect-done"] is True
    assert effected["tasks"]["b"]["plan"]["action"] == "mark-repair"
    assert effected["tasks"]["a"]["plan"]["action"] == "drive-transaction"
    result = crash_cuts(trace, steps=range(k, k + 1))
    assert [c.boundary for c in result.cuts if "ref-update" in c.boundary]
    assert result.passed, [d.to_json() for c in result.failed for d in c.divergences]


def test_a_cut_expecting_the_state_without_the_durable_land_is_a_divergence(monkeypatch):
    """The check can fail: expected without the effect the cut made durable, the recovered
    state (target moved, the loser planning mark-repair) is reported as none of the three."""
    from wgk.conformance.oracle import crashcuts
    monkeypatch.setattr(crashcuts, "effects_made_durable", lambda before, after: before)
    trace = load_trace(RACE)
    k = _winner_lands(trace)
    result = crashcuts.crash_cuts(trace, steps=range(k, k + 1))
    failed = {c.boundary: [d.what for d in c.divergences] for c in result.failed}
    assert any("after ref-update" in b for b in failed)
    assert all(what == ["recovered-state"] for what in failed.values())
