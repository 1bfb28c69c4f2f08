"""A recorded run's expectations are the implementation's own answers: replaying one on the
implementation alone checks nothing against the model, and ``wgk replay`` says so."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from wgk.conformance.cli import cmd_prove, cmd_replay
from wgk.conformance.cli.main import main
from wgk.conformance.oracle import select
from wgk.conformance.z3 import witnesses

ROOT = Path(__file__).resolve().parent.parent
INCIDENT = ROOT / "traces" / "incidents" / "10-stale-capability-rejected.json"


@pytest.fixture
def recorded(tmp_path) -> Path:
    """A short trace marked as recorded from the implementation."""
    doc = json.loads(INCIDENT.read_text())
    doc["source"] = {"kind": "recorded-run", "provenance": "wgk record --db kernel.db"}
    path = tmp_path / "recorded.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


def test_a_recorded_run_on_the_implementation_alone_warns(recorded, capsys):
    assert main(["replay", str(recorded), "--system", "impl"]) == 0     # exit code unchanged
    captured = capsys.readouterr()
    [warning] = [line for line in captured.err.splitlines() if "warning" in line]
    assert str(recorded) in warning and "checks nothing against the model" in warning
    assert "warning" not in captured.out and "1 passed, 0 failed" in captured.out


def test_the_warning_with_crash_cuts_says_what_is_compared(recorded, capsys):
    assert main(["replay", str(recorded), "--system", "impl", "--crash-cuts", "--json"]) == 0
    err = capsys.readouterr().err
    assert "checks nothing against the model" in err and "only its crash cuts" in err


@pytest.mark.parametrize("system", ["both", "model"])
def test_no_warning_when_the_model_takes_part(recorded, capsys, system):
    assert main(["replay", str(recorded), "--system", system]) == 0
    assert "warning" not in capsys.readouterr().err


def test_other_traces_on_the_implementation_alone_do_not_warn(capsys):
    assert main(["replay", str(INCIDENT), "--system", "impl"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_the_cli_uses_the_librarys_selection_and_witnesses():
    assert cmd_replay.systems_for is select.systems_for
    assert cmd_prove.witness_reports is witnesses.witness_reports
    with pytest.raises(ValueError, match="unknown system"):
        select.systems_for(None, "neither")
