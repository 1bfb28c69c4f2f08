"""The gate writes one self-contained HTML report per failing trace, next to its JUnit file."""
from __future__ import annotations

from pathlib import Path

from wgk.conformance.reports.gate_html import write_failure_reports
from wgk.conformance.reports.gate_report import Check, GateResult, Section

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "traces" / "incidents" / "12-target-moved-needs-repair.json"


def result(verdict: str) -> GateResult:
    check = Check("replay", "incident-12", verdict, 0.1, "step 3: expected applied",
                  {"trace": str(TRACE)})
    ok = Check("replay", "another", "pass", 0.1, "", {"trace": str(TRACE)})
    return GateResult("quick", [Section("replay", [check, ok], 0.2)], 0.2)


def test_a_failing_trace_gets_a_report_that_its_check_names(tmp_path):
    res = result("fail")
    written = write_failure_reports(res, tmp_path)
    assert len(written) == 1 and written[0].parent == tmp_path and written[0].suffix == ".html"
    html = written[0].read_text()
    assert "<html" in html.lower() and "commit-effect" in html   # the stepper with the trace's steps
    failing = [c for c in res.checks if c.verdict == "fail"][0]
    assert failing.data["report"] == str(written[0])


def test_a_passing_gate_writes_no_report(tmp_path):
    assert write_failure_reports(result("pass"), tmp_path) == []
    assert list(tmp_path.iterdir()) == []
