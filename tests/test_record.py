"""wgk record: a run of the implementation becomes a trace the model replays."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from wgk.conformance.cli.main import main
from wgk.conformance.oracle.impl_system import ImplSystem
from wgk.conformance.oracle.record import RecordError, record_trace
from wgk.conformance.oracle.replay import replay
from wgk.conformance.traces.format import load_trace

ROOT = Path(__file__).resolve().parent.parent
INCIDENTS = ROOT / "traces" / "incidents"


def by_order(requests: list[dict]) -> list[dict]:
    """The requests with their symbolic tokens renamed in order of appearance: a recording
    knows a token only by its hash, so it names it anew, but the same token the same."""
    names: dict[str, str] = {}
    out = []
    for r in requests:
        r = dict(r)
        for f in ("mint", "token"):
            if f in r:
                r[f] = names.setdefault(r[f], f"t{len(names) + 1}")
        out.append(r)
    return out


def run_impl(trace, workdir) -> str:
    s = ImplSystem(trace, workdir=str(workdir))
    for step in trace.steps:
        s.apply(step)
    s.kernel.close()
    return str(workdir / "kernel.db")


@pytest.mark.parametrize("name", ["11-pid-reuse-is-owner-death.json", "12-target-moved-needs-repair.json",
                                  "acceptance-dead-worker-convergence.json"])
def test_recording_recovers_requests_decisions_and_the_world(name, tmp_path):
    original = load_trace(INCIDENTS / name)
    recorded = record_trace(run_impl(original, tmp_path), id="rec")
    requests = [s["request"] for s in original.steps if "request" in s]
    got = [s["request"] for s in recorded.steps if "request" in s]
    # a convergence step is recorded as the daemon requests it sent
    assert by_order([r for r in got if not r["key"].startswith("converge:")]) == by_order(requests)
    assert len(got) > len(requests) or not any(s.get("env") == "converge" for s in original.steps)
    # a tick is recorded only where a decision observed the clock
    world = [s for s in original.steps
             if "env" in s and s["env"] not in ("crash", "lost-response", "converge", "tick")]
    assert [s for s in recorded.steps if "env" in s and s["env"] != "tick"] == world
    assert replay(recorded).passed


def test_record_the_demo_and_replay_it(tmp_path, capsys):
    out = tmp_path / "demo.json"
    assert main(["record", "--demo", "--out", str(out), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["model"] == "pass" and result["reproduce"] == f"wgk replay {out}"
    trace = load_trace(out)
    assert trace.source["kind"] == "recorded-run"
    kinds = {s["request"]["kind"] for s in trace.steps if "request" in s}
    assert {"dispatch", "declare-lost", "commit-effect", "mark-repair", "revise", "save-graph"} <= kinds
    assert {"owner-dies", "move-target"} <= {s["env"] for s in trace.steps if "env" in s}


def test_a_file_that_is_not_a_kernel_database_is_bad_input(tmp_path, capsys):
    bad = tmp_path / "notes.db"
    bad.write_text("not sqlite")
    assert main(["record", "--db", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "notes.db" in err
    with pytest.raises(RecordError):
        record_trace(str(bad))
