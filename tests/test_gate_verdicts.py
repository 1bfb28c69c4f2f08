"""Nothing checked is not a pass: empty trace sets, empty or raising sections and budget
values that turn a section off are reported as such (error or skipped), never as passing."""
from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from wgk.conformance.check.explore import Instance
from wgk.conformance.cli.main import main
from wgk.conformance.reports import gate, gate_model
from wgk.conformance.z3 import mutants

ROOT = Path(__file__).resolve().parent.parent
INCIDENT = ROOT / "traces" / "incidents" / "10-stale-capability-rejected.json"
FUZZ = {"examples": 3, "steps": 6, "tasks": 1}


def budget(monkeypatch, **values) -> None:
    """A small quick budget: one explore instance, replay, in-process crash cuts, a tiny fuzz run,
    with ``values`` overriding entries (None removes one)."""
    b = {"explore": [Instance(tasks=1, groups=("core",))], "replay": True,
         "crash-cuts": ["in-process"], "fuzz": dict(FUZZ)}
    for k, v in values.items():
        k = k.replace("_", "-")
        if v is None:
            b.pop(k, None)
        else:
            b[k] = v
    monkeypatch.setitem(gate.BUDGETS, "quick", b)


def gate_cli(tmp_path, capsys, *extra: str) -> tuple[int, dict, ET.Element]:
    junit = tmp_path / "gate.xml"
    code = main(["gate", "--quick", "--json", "--junit", str(junit),
                 "--counterexamples", str(tmp_path / "cex"), *extra])
    return code, json.loads(capsys.readouterr().out), ET.parse(junit).getroot()


def test_an_empty_trace_directory_is_an_error_naming_the_sections(tmp_path, capsys, monkeypatch):
    budget(monkeypatch)
    empty = tmp_path / "no-traces"
    empty.mkdir()
    code, out, junit = gate_cli(tmp_path, capsys, "--traces", str(empty))
    assert code == 2 and out["verdict"] == "error"
    secs = out["sections"]
    assert secs["replay"]["verdict"] == secs["crash-cuts"]["verdict"] == "error"
    assert str(empty) in secs["replay"]["checks"][0]["detail"]
    assert secs["explore"]["verdict"] == secs["fuzz"]["verdict"] == "pass"   # the others still ran
    errors = {s.get("name"): s.get("errors") for s in junit.findall("testsuite")}
    assert errors["replay"] == errors["crash-cuts"] == "1" and errors["explore"] == "0"
    [err] = junit.findall("testsuite[@name='replay']/testcase/error")
    assert "no traces to replay" in err.get("message")


def test_the_human_summary_names_the_error_and_exits_2(tmp_path, capsys, monkeypatch):
    budget(monkeypatch)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["gate", "--quick", "--traces", str(empty), "--counterexamples",
                 str(tmp_path / "cex")]) == 2
    out = capsys.readouterr().out
    assert re.search(r"^replay\s+ERROR", out, re.M) and re.search(r"^explore\s+PASS", out, re.M)
    assert "ERROR replay: no traces to replay in" in out and "gate ERROR" in out


def test_a_section_that_raises_is_an_error_and_the_others_run(tmp_path, capsys, monkeypatch):
    budget(monkeypatch)

    def broken(*a, **kw):
        raise RuntimeError("the explorer broke")
    monkeypatch.setattr(gate_model, "explore", broken)
    code, out, junit = gate_cli(tmp_path, capsys, "--traces", str(INCIDENT))
    assert code == 2 and out["verdict"] == "error"
    [check] = out["sections"]["explore"]["checks"]
    assert check["verdict"] == "error" and check["name"] == "explore"
    assert check["detail"] == "raised RuntimeError: the explorer broke"
    assert "Traceback" in check["data"]["traceback"]
    assert {out["sections"][s]["verdict"] for s in ("replay", "crash-cuts", "fuzz")} == {"pass"}


def test_a_section_that_checks_nothing_is_an_error(tmp_path, monkeypatch):
    budget(monkeypatch, mutants=True, explore=None, crash_cuts=None, fuzz=None)
    monkeypatch.setattr(mutants, "MUTANTS", {})
    r = gate.run_gate("quick", traces=[str(INCIDENT)], counterexamples=str(tmp_path))
    assert r.verdict == "error"
    assert r.section("mutants").verdict == "error"
    assert "checked nothing" in r.section("mutants").checks[0].detail
    assert r.section("replay").verdict == "pass"


def test_a_failure_and_an_error_together_exit_2(tmp_path, capsys, monkeypatch):
    budget(monkeypatch, crash_cuts=None, fuzz=None)
    lie = json.loads(INCIDENT.read_text())
    lie["expect"] = {"tasks": {"a": {"status": "done"}}}
    path = tmp_path / "lie.json"
    path.write_text(json.dumps(lie))
    monkeypatch.setattr(gate_model, "explore", lambda *a, **kw: 1 / 0)
    code, out, _ = gate_cli(tmp_path, capsys, "--traces", str(path))
    assert code == 2 and out["sections"]["replay"]["verdict"] == "fail"
    assert out["sections"]["explore"]["verdict"] == "error"


@pytest.mark.parametrize("off", [False, 0, [], None])
def test_a_false_budget_value_skips_the_section_and_says_so(tmp_path, capsys, monkeypatch, off):
    budget(monkeypatch, mutants=off, prove=off, explore=off, crash_cuts=None, fuzz=None)

    def must_not_run(*a, **kw):
        raise AssertionError("a section its budget turns off was run")
    monkeypatch.setattr(mutants, "kill", must_not_run)
    monkeypatch.setattr(gate_model, "prove", must_not_run)
    monkeypatch.setattr(gate_model, "explore", must_not_run)
    code, out, junit = gate_cli(tmp_path, capsys, "--traces", str(INCIDENT))
    assert code == 0 and out["verdict"] == "pass"
    for name in ("mutants", "prove", "explore", "contract", "probes", "crash-cuts", "two-kernels",
                 "batches", "tamper", "races", "fuzz", "trace-matrix"):
        sec = out["sections"][name]
        assert sec["verdict"] == "skipped" and sec["checks"] == [], name
        assert "not run in the quick budget" in sec["skipped"]
    assert out["sections"]["replay"]["verdict"] == "pass"
    skipped = [s.get("name") for s in junit.findall("testsuite") if s.get("skipped") == "1"]
    assert sorted(skipped) == ["batches", "contract", "coverage", "crash-cuts", "explore", "fuzz",
                               "impl-mutants", "mutants", "probes", "prove", "races", "tamper",
                               "trace-matrix", "two-kernels", "verify-guards"]
    assert len(junit.findall(".//testcase/skipped")) == 15


def test_the_summary_lists_skipped_sections(tmp_path, capsys, monkeypatch):
    budget(monkeypatch, mutants=False, crash_cuts=None, fuzz=None, explore=None)
    assert main(["gate", "--quick", "--traces", str(INCIDENT)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^mutants\s+SKIP\s+not run in the quick budget \(mutants: False\)", out, re.M)
    assert re.search(r"^crash-cuts\s+SKIP\s+not run in the quick budget \(not listed\)", out, re.M)


def test_nothing_run_at_all_is_an_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(gate.BUDGETS, "quick", {"replay": False})
    assert main(["gate", "--quick", "--traces", str(INCIDENT)]) == 2
    assert "no section checked anything" in capsys.readouterr().out


@pytest.mark.parametrize("entry,value,message", [
    ("prove", True, "prove must be a positive number"),
    ("mutants", "yes", "mutants must be true or false"),
    ("crash-cuts", ["sideways"], "crash-cuts must list modes"),
    ("fuzz", {"examples": 0, "steps": 3, "tasks": 1}, "fuzz.examples must be a positive number"),
    ("explore", [3], "explore must list instances"),
])
def test_a_malformed_budget_value_is_an_error(tmp_path, monkeypatch, entry, value, message):
    budget(monkeypatch, **{entry: value})
    r = gate.run_gate("quick", traces=[str(INCIDENT)], counterexamples=str(tmp_path))
    assert r.verdict == "error"
    [check] = r.section(entry).checks
    assert check.verdict == "error" and message in check.detail


def test_the_heavy_sections_split_into_parts_that_together_are_the_section():
    """The prove section runs its bounded and unbounded halves apart where the budget has
    both, explore one part per instance, fuzz one per graph shape; each part asks the
    section's function for its share only."""
    from wgk.conformance.reports.gate_budget import BUDGETS
    from wgk.conformance.reports.gate_split import split
    calls = []

    def call(name, budget, progress, **kw):
        calls.append((name, budget, kw.get("only")))
        return []
    for budget in ("quick", "default"):
        for name in ("prove", "explore", "fuzz"):
            for p in split(name, budget, {}, call):
                p.run(None)
    b = BUDGETS["default"]
    assert ("prove", "quick", None) in calls
    assert [c[2] for c in calls if c[:2] == ("prove", "default")] == [{"bounded"}, {"unbounded"}]
    assert [c[2] for c in calls if c[:2] == ("explore", "default")] == [
        {n} for n in range(len(b["explore"]))]
    assert [c[2] for c in calls if c[:2] == ("fuzz", "default")] == [
        {s} for s in b["fuzz"]["shapes"]]
