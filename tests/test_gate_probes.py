"""The probes section: the implementation's own authority and edge tables held to the
model's in behaviour (no test compares the tables as copies)."""
from __future__ import annotations

from pathlib import Path

import pytest

from wgk.conformance.oracle.impl_system import ImplSystem
from wgk.conformance.oracle.probes import probe_trace
from wgk.conformance.reports.gate import run_section
from wgk.conformance.traces.format import load_trace
from wgk.impl.contract import vocabulary

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "traces" / "recorded" / "demo-run.json"


def _probe(tmp_path):
    return probe_trace(load_trace(DEMO), lambda t: ImplSystem(t, workdir=str(tmp_path)))


def test_the_implementation_answers_every_probe_as_the_model_does(tmp_path):
    r = _probe(tmp_path)
    assert r.ok and r.mismatch is None and r.probes > 100, r.to_json()


def test_an_edge_the_implementation_grants_too_much_is_caught(tmp_path, monkeypatch):
    monkeypatch.setitem(vocabulary.EDGES, "seal-candidate",
                        (frozenset({"work-saved", "prepared"}), "candidate-sealed"))
    r = _probe(tmp_path)
    assert not r.ok
    assert r.mismatch["request"]["kind"] == "seal-candidate"
    assert r.mismatch["request"]["expected-phase"] == "prepared"
    assert r.mismatch["model"] == {"decision": "rejected", "code": "illegal-phase-edge"}


def test_an_actor_the_implementation_lets_through_is_caught(tmp_path, monkeypatch):
    monkeypatch.setitem(vocabulary.AUTHORITY, "accept",
                        frozenset({"evaluator", "daemon", "validator"}))
    r = _probe(tmp_path)
    assert not r.ok
    assert (r.mismatch["request"]["kind"], r.mismatch["request"]["actor"]) == ("accept", "validator")
    assert r.mismatch["model"]["code"] == "not-authorized"


def test_the_section_fails_naming_the_probe(monkeypatch):
    monkeypatch.setitem(vocabulary.AUTHORITY, "accept",
                        frozenset({"evaluator", "daemon", "validator"}))
    section = run_section("probes", "quick", loaded=[load_trace(DEMO)])
    [check] = section.checks
    assert check.verdict == "fail" and "accept as validator" in check.detail, check.detail
    assert "in-memory world" in check.data["world"]


# --- adversarial variants: K, tokens, senders, revocation ------------------------------------

INCIDENTS = ROOT / "traces" / "incidents"


def test_each_field_of_k_is_varied_stale_ahead_and_never_issued_and_tokens_three_ways():
    from wgk.conformance.oracle.probes import K_FIELDS, cap_variants, closed_copy
    from wgk.conformance.oracle.systems import ModelSystem
    trace = closed_copy(load_trace(INCIDENTS / "24-fan-in-waits-for-every-dependency.json"))
    model = ModelSystem(trace)
    cap = {"graph": "g", "task": "a", "generation": 1, "attempt": 2, "fence": 3, "lease-epoch": 4}
    wire = {"kind": "submit", "actor": "worker", "task": "a", "cap": cap, "token": "tok-a-2"}
    got = dict(cap_variants(wire, model, {"a": ["tok-a-1", "tok-a-2"], "b": ["tok-b-1"]}))
    for f in K_FIELDS:
        assert got[f"{f}-stale"]["cap"][f] == cap[f] - 1
        assert got[f"{f}-ahead"]["cap"][f] == cap[f] + 1
        assert got[f"{f}-never-issued"]["cap"][f] > cap[f] + 1
    assert got["task-foreign"]["cap"]["task"] == "b"
    assert "token" not in got["token-none"]
    assert got["token-of-another-attempt"]["token"] == "tok-b-1"
    assert got["token-stale"]["token"] == "tok-a-1"
    assert got["token-none/broker"]["actor"] == "broker"      # broker may submit: probed too


def test_a_closed_copy_sends_every_request_as_a_holder_of_its_role():
    from wgk.conformance.oracle.probes import actor_variants, closed_copy
    from wgk.conformance.oracle.systems import ModelSystem
    trace = closed_copy(load_trace(INCIDENTS / "33-external-wait.json"))
    assert all(s["request"]["principal"] == f"{s['request']['actor']}-1"
               for s in trace.steps if "request" in s)
    model = ModelSystem(trace)
    names = dict(actor_variants({"kind": "deliver", "actor": "operator", "task": "a"}, model.graph))
    assert names["principal-own"]["principal"] == "operator-1"
    assert names["principal-another"]["principal"] == "operator-2"
    assert names["principal-without-role"]["principal"] != "operator-1"
    assert "principal" not in names["principal-none"]


def test_every_variant_of_the_unmutated_implementation_is_refused_alike_and_changes_nothing(tmp_path):
    from wgk.conformance.oracle.probes import closed_copy
    r = probe_trace(closed_copy(load_trace(INCIDENTS / "33-external-wait.json")),
                    lambda t: ImplSystem(t, workdir=str(tmp_path)))
    assert r.ok, r.to_json()
    variants = {v for _, v in r.cells}
    assert {"lease-epoch-ahead", "lease-epoch-never-issued", "fence-stale", "task-foreign",
            "token-none", "token-stale", "principal-without-role", "principal-none",
            "principal-revoked"} <= variants, sorted(variants)


def test_a_lease_epoch_taken_as_a_lower_bound_is_caught(tmp_path, monkeypatch):
    from wgk.impl.decisions import rules

    def lower_bound(ctx):
        t, c = ctx.record, ctx.request.cap
        if t.attempt_state == "none":
            return "unknown-attempt"
        if (c.generation, c.attempt, c.fence) != (t.generation, t.attempt, t.fence) \
                or c.lease_epoch < t.lease_epoch:
            return "stale-capability"
        return None
    monkeypatch.setattr(rules, "capability_failure", lower_bound)
    r = probe_trace(load_trace(INCIDENTS / "10-stale-capability-rejected.json"),
                    lambda t: ImplSystem(t, workdir=str(tmp_path)))
    assert not r.ok and r.mismatch["variant"].startswith("lease-epoch-"), r.mismatch
    assert r.mismatch["model"] == {"decision": "rejected", "code": "stale-capability"}


@pytest.mark.parametrize("mutant, trace", [
    ("deliver-role-unchecked", "33-external-wait.json"),
    ("revoked-still-authenticates", "18-worker-poses-as-validator.json"),
    ("broker-without-token", "02-brokered-handoff-without-worktree-context.json"),
])
def test_issue_33s_authority_bugs_fail_the_probes_section(mutant, trace):
    from wgk.conformance.oracle.impl_mutants_catalogue import MUTANTS_BY_NAME
    from wgk.conformance.reports.impl_mutants import run_patches
    r = run_patches(mutant, MUTANTS_BY_NAME[mutant].patches, budget="quick", sections=["probes"],
                    traces=[str(INCIDENTS / trace)], timeout=300)
    assert r["verdict"] == "killed" and r["section"] == "probes", r


def test_the_state_the_probes_compare_is_the_projection_without_its_journal(tmp_path):
    trace = load_trace(DEMO)
    system = ImplSystem(trace, workdir=str(tmp_path))
    try:
        for step in trace.steps[:6] + [{}]:
            whole = system.project()
            assert system.project_without_journal() == {k: v for k, v in whole.items()
                                                         if k != "journal"}
            if step:
                system.apply(step)
        assert whole["journal"] and whole["tasks"]
    finally:
        system.close()


def test_a_refused_variant_that_changes_the_state_is_caught(tmp_path, monkeypatch):
    from wgk.conformance.oracle.probes import closed_copy
    applied = ImplSystem.apply

    def ticking(self, step):
        answer = applied(self, step)
        if str(step.get("request", {}).get("key", "")).startswith("variant-"):
            self.world.clock.advance(1)        # a refusal that moves the clock
        return answer
    monkeypatch.setattr(ImplSystem, "apply", ticking)
    r = probe_trace(closed_copy(load_trace(INCIDENTS / "33-external-wait.json")),
                    lambda t: ImplSystem(t, workdir=str(tmp_path)))
    assert not r.ok and r.mismatch["changed"] == ["now"], r.mismatch
