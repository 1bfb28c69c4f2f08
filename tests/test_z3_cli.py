"""wgk prove / check / mutants: exit codes, JSON shapes, files, one-line usage errors."""
from __future__ import annotations

import contextlib
import io
import json
import subprocess

import pytest

from wgk.conformance.cli.main import main


def wgk(*args: str) -> subprocess.CompletedProcess:
    """``wgk ARGS`` run by the command's ``main`` in this process: its exit code (argparse's
    own exit included) and its output as the finished command gives them. What these tests
    check is what the command prints and returns, not the interpreter's start (an exception
    escaping ``main`` fails the test as a traceback would)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return subprocess.CompletedProcess(["wgk", *args], code, out.getvalue(), err.getvalue())


def test_prove_json_shape_and_exit_code():
    out = wgk("prove", "--tasks", "1", "--jobs", "1", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["failed"] == 0 and data["unknown"] == 0 and data["proved"] == len(data["results"])
    assert {"invariant", "transition", "status", "seconds"} <= set(data["results"][0])
    assert {r["invariant"] for r in data["results"]} >= {"done-iff-graphsave", "idempotent-replay"}
    reached = {w["goal"]: w for w in data["witnesses"]}
    assert reached["done-reached"]["status"] == "reached"
    assert all(w["status"] == "reached" for w in data["witnesses"])
    assert data["ok"] is True


def test_prove_one_invariant_text():
    out = wgk("prove", "--tasks", "1", "--invariant", "promotion-at-most-once")
    assert out.returncode == 0, out.stderr
    assert "proved  promotion-at-most-once" in out.stdout
    assert "done-iff-graphsave" not in out.stdout


def test_check_finds_a_mutant_counterexample_and_writes_files(tmp_path):
    trace, itf = tmp_path / "t.json", tmp_path / "t.itf.json"
    out = wgk("check", "--invariant", "cas-base-exact", "--mutant", "cas-ignores-moved-target",
              "--depth", "11", "--tasks", "1", "--out", str(trace), "--itf", str(itf), "--json")
    assert out.returncode == 1, out.stderr
    data = json.loads(out.stdout)
    assert data["status"] == "violated" and data["found_at"] <= 11
    assert data["reproduce"].startswith("wgk check --invariant cas-base-exact")
    assert "--mutant cas-ignores-moved-target" in data["reproduce"]
    doc = json.loads(trace.read_text())
    assert doc["format"] == "wgk-trace/1" and doc["source"]["kind"] == "counterexample"
    assert doc["steps"][-1]["request"]["kind"] == "commit-effect"
    ex = json.loads(itf.read_text())
    assert len(ex["states"]) == data["found_at"] + 1 and "vars" in ex


def test_a_model_trace_written_by_check_replays_with_wgk_replay(tmp_path):
    trace = tmp_path / "lost.json"
    out = wgk("check", "--reach", 't1.attempt_state == "lost"', "--tasks", "1", "--depth", "5",
              "--out", str(trace))
    assert out.returncode == 1, out.stderr
    assert f"reproduce: wgk replay {trace}" in out.stdout
    again = wgk("replay", str(trace))
    assert again.returncode == 0, again.stdout + again.stderr
    assert "PASS" in again.stdout


def test_check_text_prints_the_trace_and_the_command():
    out = wgk("check", "--reach", 't1.attempt_state == "lost"', "--tasks", "1", "--depth", "5")
    assert out.returncode == 1, out.stderr
    assert "REACHED" in out.stdout and "reproduce: wgk check --reach" in out.stdout
    assert "step 0: dispatch(t1) -> applied" in out.stdout


def test_check_reports_nothing_found_with_exit_zero():
    out = wgk("check", "--reach", 't1.promotions >= 2', "--tasks", "1", "--depth", "4", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["status"] == "unreachable" and data["found_at"] is None


def test_mutants_json_shape():
    out = wgk("mutants", "--name", "pid-only-liveness", "--name", "phase-skip", "--tasks", "1",
              "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["killed"] == data["total"] == 2 and data["model"]["survives"] is True
    row = data["mutants"][0]
    assert row["name"] == "pid-only-liveness" and row["killed"] is True
    assert any(b.startswith("proof:") for b in row["by"]) and any(
        b.startswith("bmc:") for b in row["by"])
    # all three means, per mutant: the named proof, exploration, the incident traces
    assert row["proof"] == {"failed": True, "invariant": "liveness-needs-exact-birth",
                            "transition": row["proof"]["transition"], "kind": "invariant"}
    assert row["explore"]["detected"] is True and row["explore"]["path"]
    assert row["traces"] and all(set(t) == {"trace", "detects", "why"} for t in row["traces"])
    assert row["means"][0] == "proof" and {"explore", "trace"} & set(row["means"])


@pytest.mark.parametrize("args, needle", [
    (["prove", "--invariant", "no-such-thing"], "unknown invariant 'no-such-thing'"),
    (["prove", "--tasks", "0"], "--tasks"),
    (["check", "--invariant", "no-such-thing"], "unknown invariant"),
    (["check", "--reach", "t9.status == 'done'"], "unknown task 't9'"),
    (["check", "--reach", "t1.status = 'done'"], "--reach"),
    (["check", "--reach", "t1.status == 'done'", "--mutant", "nope"], "unknown mutant 'nope'"),
    (["check", "--reach", "t1.status == 'done'", "--groups", "core,bogus"], "unknown group"),
    (["mutants", "--name", "nope"], "unknown mutant 'nope'"),
])
def test_bad_usage_is_one_line_and_exit_two(args, needle):
    out = wgk(*args)
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stderr.count("\n") == 1 and needle in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("cmd, example", [
    ("prove", "wgk prove --tasks 4"), ("check", "wgk check --reach"), ("mutants", "wgk mutants --json")])
def test_help_shows_examples(cmd, example):
    out = wgk(cmd, "--help")
    assert out.returncode == 0 and example in out.stdout


def test_a_solver_model_disagreement_exits_one_with_one_line(monkeypatch, capsys):
    from wgk.conformance.cli import main as cli
    from wgk.conformance.cli import cmd_check
    from wgk.conformance.z3.prove import SymbolicMismatch

    def disagree(*args, **kwargs):
        raise SymbolicMismatch("step 1: solver decided applied, model rejected")
    monkeypatch.setattr(cmd_check, "check", disagree)
    code = cli.main(["check", "--reach", "t1.status == 'done'", "--tasks", "1"])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1 and "disagree" in err


def test_a_run_through_a_protected_content_is_written_with_its_path_and_replays(tmp_path):
    """The bounded instance marks a content as touching a protected path; the trace written
    from a run that edits it names a path its graph's pattern protects, so the implementation
    reads the same fact from its repository."""
    trace = tmp_path / "held.json"
    out = wgk("check", "--reach", 't1.reason == "protected-path"', "--tasks", "1", "--depth", "7",
              "--groups", "core,env", "--out", str(trace))
    assert out.returncode == 1, out.stderr
    doc = json.loads(trace.read_text())
    assert doc["graph"]["protected-paths"] == [".ci/**"]
    assert [s["paths"] for s in doc["steps"] if s.get("env") == "edit"] == [[".ci/protected"]]
    again = wgk("replay", str(trace), "--system", "both")
    assert again.returncode == 0, again.stdout + again.stderr


def test_witness_paths_are_written_and_a_malformed_file_is_one_line_exit_two(
        monkeypatch, capsys, tmp_path):
    from wgk.conformance.cli import main as cli
    from wgk.conformance.z3 import witnesses
    f = tmp_path / "paths.json"
    monkeypatch.setattr(witnesses, "PATHS_FILE", f)
    args = ["prove", "--tasks", "1", "--invariant", "lost-reached", "--write-witness-paths"]
    assert cli.main(args) == 0
    assert list(witnesses.recorded_paths(f)) == ["lost-reached"]
    capsys.readouterr()
    for bad in ('{"format": ', '{"format": "wgk-witness-paths/1", "paths": {"x": [1]}}'):
        f.write_text(bad)
        assert cli.main(args) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(f) in err and "Traceback" not in err
        assert f.read_text() == bad                                  # nothing written
    f.write_text('{"format": ')
    with pytest.raises(witnesses.PathsError, match=r"paths\.json:1:12: not JSON"):
        witnesses.recorded_paths(f)
