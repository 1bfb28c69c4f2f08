"""The gate: sections as data, JSON and JUnit output, exit codes, and that it can fail."""
from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from wgk.conformance.reports import gate
from wgk.conformance.cli.main import main
from wgk.conformance.check.explore import Instance

ROOT = Path(__file__).resolve().parent.parent
INCIDENT = ROOT / "traces" / "incidents" / "16-two-dispatchers-one-attempt.json"


def test_quick_gate_passes_with_json_and_junit(tmp_path, capsys):
    junit = tmp_path / "gate.xml"
    code = main(["gate", "--quick", "--json", "--junit", str(junit), "--traces", str(INCIDENT)])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["verdict"] == "pass"
    assert set(out["sections"]) >= {"explore", "replay", "fuzz"}
    assert out["sections"]["replay"]["checks"][0]["name"] == "incident-16-two-dispatchers-one-attempt"
    assert out["sections"]["trace-matrix"]["verdict"] == "skipped"     # not in the quick budget
    suites = ET.parse(junit).getroot()
    cases = suites.findall(".//testcase")
    assert len(cases) == sum(len(s["checks"]) for s in out["sections"].values()) + 3
    assert not suites.findall(".//failure") and not suites.findall(".//error")
    assert [s.get("name") for s in suites.findall("testsuite") if s.get("skipped") == "1"] == \
        ["trace-matrix", "impl-mutants", "verify-guards"]


@pytest.fixture
def tiny(monkeypatch):
    """A smaller quick budget for the tests that are about reporting, not coverage."""
    monkeypatch.setitem(gate.BUDGETS, "quick", {"explore": [Instance(tasks=1, groups=("core",))],
                                                "replay": True, "crash-cuts": ["in-process"],
                                                "fuzz": {"examples": 3, "steps": 8, "tasks": 1}})


def test_gate_fails_on_a_trace_the_model_contradicts(tmp_path, capsys, tiny):
    bad = json.loads(INCIDENT.read_text())
    for step in bad["steps"]:
        if step.get("expect", {}).get("code") == "cas-moved":
            step["expect"] = {"decision": "applied"}       # a lie about the second dispatcher
    path = tmp_path / "lie.json"
    path.write_text(json.dumps(bad, indent=2) + "\n")
    junit = tmp_path / "gate.xml"
    code = main(["gate", "--quick", "--junit", str(junit), "--traces", str(path)])
    out = capsys.readouterr().out
    assert code == 1 and "replay       FAIL" in out and "gate FAIL" in out
    failures = ET.parse(junit).getroot().findall(".//failure")
    assert len(failures) == 1 and "decision" in failures[0].get("message")


def test_gate_bad_trace_is_bad_input(tmp_path, capsys, tiny):
    path = tmp_path / "broken.json"
    path.write_text("{\"format\": \"wgk-trace/1\",")
    assert main(["gate", "--quick", "--traces", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "broken.json" in err


pytest_plugins = ["pytester"]
# The traces are given as ``--wgk-traces=PATH``: a bare path argument would make pytest read
# this project's configuration (workers per core) for the inner run.


def test_gate_inside_pytest(pytester, tiny):
    pytester.makepyfile(test_project="""
        def test_own(wgk_gate):
            result = wgk_gate("quick", traces=[%r])
            assert result.verdict == "pass", result.summary()
    """ % str(INCIDENT))
    result = pytester.runpytest("--wgk-gate", "quick", f"--wgk-traces={INCIDENT}", "-q", "-rs")
    sections = [s for s, _ in gate.SECTIONS if gate.BUDGETS["quick"].get(s)]
    # the project's test + one item per section run; the sections the budget skips are skipped
    result.assert_outcomes(passed=1 + len(sections), skipped=len(gate.SECTIONS) - len(sections))
    result.stdout.fnmatch_lines(["*not run in the quick budget*"])


def test_gate_inside_pytest_reports_a_failing_section(pytester, tmp_path, tiny):
    bad = json.loads(INCIDENT.read_text())
    bad["expect"] = {"tasks": {"a": {"status": "done"}}}
    path = tmp_path / "lie.json"
    path.write_text(json.dumps(bad, indent=2) + "\n")
    pytester.makepyfile(test_project="def test_own():\n    pass\n")
    result = pytester.runpytest("--wgk-gate", "quick", f"--wgk-traces={path}", "-q")
    sections = [s for s, _ in gate.SECTIONS if gate.BUDGETS["quick"].get(s)]
    result.assert_outcomes(passed=len(sections), failed=1,   # own test + the other sections
                           skipped=len(gate.SECTIONS) - len(sections))
    result.stdout.fnmatch_lines(["*wgk gate section replay: 1 check(s) failed*"])


def test_gate_inside_pytest_an_empty_trace_set_fails(pytester, tmp_path, tiny):
    empty = tmp_path / "empty"
    empty.mkdir()
    pytester.makepyfile(test_project="def test_own():\n    pass\n")
    result = pytester.runpytest("--wgk-gate", "quick", f"--wgk-traces={empty}", "-q")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed") == 2, outcomes            # replay and crash cuts
    result.stdout.fnmatch_lines(["*wgk gate section replay*", "*ERROR replay: no traces to replay in*"])


def test_gate_inside_pytest_rejects_an_unknown_budget(pytester):
    result = pytester.runpytest("--wgk-gate", "nightly")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*unknown budget 'nightly'*"])
