"""The probes section: the implementation's own authority and edge tables held to the
model's in behaviour (no test compares the tables as copies)."""
from __future__ import annotations

from pathlib import Path

from wgk.conformance.oracle.impl_system import ImplSystem
from wgk.conformance.oracle.probes import probe_trace
from wgk.conformance.reports.gate import run_section
from wgk.conformance.traces.format import load_trace
from wgk.impl import vocabulary

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
