"""Seen while it runs: progress per section, per-section times, JUnit times and readable names;
and the gate library standing on its own (no CLI imports)."""
from __future__ import annotations

import ast
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from wgk.conformance.check.explore import Instance
from wgk.conformance.cli import cmd_gate
from wgk.conformance.cli.main import main
from wgk.conformance.reports import gate

ROOT = Path(__file__).resolve().parent.parent
INCIDENTS = ROOT / "traces" / "incidents"
TRACES = [str(INCIDENTS / "10-stale-capability-rejected.json"),
          str(INCIDENTS / "16-two-dispatchers-one-attempt.json")]


@pytest.fixture(autouse=True)
def small(monkeypatch):
    monkeypatch.setitem(gate.BUDGETS, "quick", {"explore": [Instance(tasks=1, groups=("core",))],
                                                "replay": True, "crash-cuts": ["in-process"],
                                                "fuzz": {"examples": 4, "steps": 6, "tasks": 1}})


def test_progress_ticks_count_up_to_each_sections_total(tmp_path):
    ticks: list[gate.Tick] = []
    r = gate.run_gate("quick", progress=ticks.append, traces=TRACES, counterexamples=str(tmp_path))
    assert r.verdict == "pass", r.summary()
    ran = ["explore", "replay", "crash-cuts", "fuzz"]
    finals = [t for t in ticks if t.final]
    assert [t.section for t in finals] == ran               # skipped sections report no progress
    assert all(t.label == "pass" and t.done == t.total == len(r.section(t.section).checks)
               for t in finals)
    replay = [t for t in ticks if t.section == "replay" and not t.final]
    assert [t.done for t in replay] == [0, 1, 2] and {t.total for t in replay} == {2}
    assert replay[-1].label == "incident-16-two-dispatchers-one-attempt"
    cuts = [t for t in ticks if t.section == "crash-cuts" and not t.final]
    assert cuts[-1].done == cuts[-1].total == 3             # two traces, then the restarts
    assert cuts[-1].label == "restarts on the held connection"
    fuzz = [t for t in ticks if t.section == "fuzz" and not t.final]
    assert fuzz[-1].total == 4 and fuzz[-1].done >= 1       # one tick per generated run
    assert all(t.seconds >= 0 and t.rate >= 0 for t in ticks)


def test_the_cli_shows_progress_only_on_a_terminal_or_when_asked(tmp_path, capsys):
    args = ["gate", "--quick", "--traces", *TRACES, "--counterexamples", str(tmp_path)]
    assert main(args) == 0
    assert "[replay]" not in capsys.readouterr().err          # stderr is not a terminal here
    assert main(args + ["--progress"]) == 0
    err = capsys.readouterr().err
    assert re.search(r"^\[replay\] 0/2 ", err, re.M)
    assert re.search(r"^\[replay\] PASS: 2 checks in \d+\.\d+s \(\d+\.\d+/s\)$", err, re.M)
    assert re.search(r"^\[crash-cuts\] PASS: \d+ checks in ", err, re.M)


def test_on_a_terminal_the_progress_line_is_redrawn():
    out = io.StringIO()
    view = cmd_gate.ProgressView(out, tty=True)
    view(gate.Tick("replay", 0, 58, 0.0))
    view(gate.Tick("replay", 58, 58, 2.0, "pass", final=True))
    text = out.getvalue()
    assert text.startswith("\r\x1b[K[replay] 0/58 0.0s (0.0/s)")
    assert text.endswith("\r\x1b[K[replay] PASS: 58 checks in 2.0s (29.0/s)\n")


def test_the_summary_and_json_give_each_sections_time(tmp_path, capsys, monkeypatch):
    assert main(["gate", "--quick", "--traces", *TRACES, "--counterexamples", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for name in ("explore", "replay", "crash-cuts", "fuzz"):
        assert re.search(rf"^{name}\s+PASS\s+\d+/\d+\s+\d+\.\d+s$", out, re.M), out
    monkeypatch.setenv("WGK_GATE_SCRATCH", str(tmp_path))
    assert main(["gate", "--quick", "--json", "--traces", *TRACES,
                 "--counterexamples", str(tmp_path)]) == 0
    result = json.loads(capsys.readouterr().out)
    sections = result["sections"]
    assert result["scratch"] == str(tmp_path)           # where its databases were kept
    assert all(isinstance(s["seconds"], float) for s in sections.values())
    assert sections["replay"]["pass"] == 2 and sections["replay"]["fail"] == 0


def test_junit_has_times_skips_and_readable_names(tmp_path, capsys):
    junit = tmp_path / "gate.xml"
    assert main(["gate", "--quick", "--junit", str(junit), "--traces", *TRACES,
                 "--counterexamples", str(tmp_path)]) == 0
    root = ET.parse(junit).getroot()
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert all(float(s.get("time")) >= 0 for s in suites.values())
    assert all(c.get("time") is not None for c in root.iter("testcase"))
    assert suites["prove"].get("skipped") == "1"
    assert suites["prove"].find("testcase/skipped").get("message").startswith("not run in the")
    [explore] = suites["explore"].findall("testcase")
    assert explore.get("name") == "tasks=1 attempts=1 groups=core"
    cut = suites["crash-cuts"].find("testcase")
    assert cut.get("classname") == "wgk.crash-cuts.incident-10-stale-capability-rejected"
    assert cut.get("name").startswith("step ") and cut.get("name").endswith("(in-process)")


def test_a_proof_frame_is_named_by_invariant_and_transition():
    from wgk.conformance.reports.gate_report import Check, case_name
    c = Check("prove", "done-iff-graphsave after submit", "pass", 0.0, group="done-iff-graphsave")
    assert case_name(c) == "after submit"


def imports_of(path: Path) -> tuple[set[str], list[int]]:
    """The modules a file imports, and the lines of imports inside functions."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    nested = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            nested += [n.lineno for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))]
    return names, nested


@pytest.mark.parametrize("name", ["gate.py", "gate_report.py"])
def test_the_gate_library_imports_no_cli_and_imports_at_module_level(name):
    names, nested = imports_of(ROOT / "conformance" / "reports" / name)
    assert not [n for n in names if n.startswith("wgk.conformance.cli")]
    assert nested == []
