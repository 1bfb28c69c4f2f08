"""The gate on several workers gives the report it gives in turn: the same sections, checks,
verdicts and order, progress in the same order; a worker that dies is an error, not a hang."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from wgk.conformance.reports import gate, gate_pool
from wgk.conformance.reports.gate_pool import Part, run_parts
from wgk.conformance.reports.gate_report import Check

from gate_sources import report_shape, small_quick_budget

ROOT = Path(__file__).resolve().parent.parent
INCIDENTS = ROOT / "traces" / "incidents"
TRACES = [str(INCIDENTS / "10-stale-capability-rejected.json"),
          str(INCIDENTS / "16-two-dispatchers-one-attempt.json"),
          str(INCIDENTS / "06-live-owner-missing-heartbeat-stays-running.json")]


@pytest.fixture(autouse=True)
def small(monkeypatch):
    small_quick_budget(monkeypatch)


def test_two_workers_report_what_one_does_in_the_same_order(tmp_path):
    ticks = {1: [], 2: []}
    one = gate.run_gate("quick", ticks[1].append, traces=TRACES, workers=1)
    two = gate.run_gate("quick", ticks[2].append, traces=TRACES, workers=2)
    assert one.verdict == two.verdict == "pass"
    assert report_shape(one) == report_shape(two)
    assert sum(len(s.checks) for s in two.sections_run) > 3 * 3
    # the same ticks in the same order (times aside)
    assert [(t.section, t.done, t.total, t.label, t.final) for t in ticks[1]] == \
        [(t.section, t.done, t.total, t.label, t.final) for t in ticks[2]]


def test_a_planted_bug_fails_the_same_checks_on_two_workers(monkeypatch):
    import wgk.impl.decisions.rules as rules

    def no_fence(ctx):
        return "unknown-attempt" if ctx.record.attempt_state == "none" else None
    monkeypatch.setattr(rules, "capability_failure", no_fence)
    one = gate.run_gate("quick", traces=TRACES, workers=1)
    two = gate.run_gate("quick", traces=TRACES, workers=2)   # forked: the patch is inherited
    assert two.verdict == "fail" and report_shape(one) == report_shape(two)


def test_a_worker_that_dies_makes_its_part_an_error():
    def dies(progress):
        os._exit(9)

    def fine(progress):
        return [Check("b", "ok", "pass", 0.0)]
    parts = [Part("a", dies), Part("b", fine), Part("b", fine)]
    got = {}
    run_parts(parts, 2, None, lambda n, done: got.__setitem__(n, done))
    assert sorted(got) == [0, 1, 2]
    assert got[0].raised and "died" in got[0].checks[0].detail
    assert [c.verdict for n in (1, 2) for c in got[n].checks] == ["pass", "pass"]


def test_the_workers_send_their_ticks_only_when_someone_reads_them(monkeypatch):
    from wgk.conformance.reports.gate_budget import Tick

    def ticking(progress):
        for n in range(5):
            progress(Tick("a", n, 5, 0.0, f"step {n}"))
        return [Check("a", "ok", "pass", 0.0)]
    arrived = []
    real = gate_pool._Order.tick
    monkeypatch.setattr(gate_pool._Order, "tick",
                        lambda self, n, t: (arrived.append(t), real(self, n, t)))
    got, shown = {}, []
    run_parts([Part("a", ticking)] * 2, 2, None, lambda n, done: got.__setitem__(n, done))
    assert [c.verdict for n in (0, 1) for c in got[n].checks] == ["pass", "pass"]
    assert arrived == []                 # no progress: nothing crossed the queue
    run_parts([Part("a", ticking)] * 2, 2, shown.append, lambda n, done: None)
    assert len(arrived) == 10 and [t.label for t in shown] == [f"step {n}" for n in range(5)] * 2


def test_the_scratch_directory_is_chosen_and_restored(monkeypatch, tmp_path):
    import tempfile
    monkeypatch.setenv("WGK_GATE_SCRATCH", str(tmp_path))
    before = tempfile.tempdir
    with gate_pool.scratch() as where:
        assert where == str(tmp_path) == tempfile.gettempdir()
    assert tempfile.tempdir == before



def test_the_coverage_s_witnesses_replayed_on_a_worker_report_what_one_process_does(monkeypatch,
                                                                                   tmp_path):
    """On several workers the coverage's witnesses are replayed among the other sections'
    parts, in a worker, and the late coverage section counts them: the same checks, verdicts
    and details as in one process, which replays them itself."""
    from wgk.conformance.oracle import witnesses
    from wgk.conformance.reports.gate_coverage import witness_traces
    monkeypatch.setitem(gate.BUDGETS, "quick", {"replay": True, "coverage": True})
    where = tmp_path / "pids"
    real = witnesses.replay_witnesses

    def noted(*a, **k):
        with open(where, "a") as f:
            f.write(f"{os.getpid()}\n")
        return real(*a, **k)
    monkeypatch.setattr(witnesses, "replay_witnesses", noted)
    one = gate.run_gate("quick", traces=TRACES, workers=1)
    assert where.read_text().split() == [str(os.getpid())]
    where.unlink()
    two = gate.run_gate("quick", traces=TRACES, workers=2)
    pids = where.read_text().split()     # one part per trace the witnesses start from
    assert len(pids) == len(witness_traces()) and str(os.getpid()) not in pids
    assert report_shape(one) == report_shape(two)
    [coverage] = [s for s in two.sections_run if s.name == "coverage"]
    assert len(coverage.checks) > 10


def test_witness_replays_that_raise_on_a_worker_are_replayed_by_the_section(monkeypatch,
                                                                          tmp_path):
    """A witness part that raised leaves the replays to the coverage section, which reports as
    it does in one process."""
    from wgk.conformance.reports import gate_coverage
    monkeypatch.setitem(gate.BUDGETS, "quick", {"replay": True, "coverage": True})
    one = gate.run_gate("quick", traces=TRACES, workers=1)
    real, calls = gate_coverage.witness_replays, []

    def once_broken(*a, **k):
        calls.append(1)
        if os.getpid() != parent:
            raise RuntimeError("planted")
        return real(*a, **k)
    parent = os.getpid()
    monkeypatch.setattr(gate, "witness_replays", once_broken)
    monkeypatch.setattr(gate_coverage, "witness_replays", once_broken)
    two = gate.run_gate("quick", traces=TRACES, workers=2)
    assert calls == [1]                 # the section's own, in this process
    assert report_shape(one) == report_shape(two)


def test_one_witness_part_that_raises_leaves_every_replay_to_the_section(monkeypatch, tmp_path):
    """The witnesses are replayed in parts (one per trace they start from, one finding whether
    they are stale): one of them raising, the outcome of the others is not taken, and the
    coverage section replays them all itself, as in one process."""
    from wgk.conformance.reports import gate_coverage
    monkeypatch.setitem(gate.BUDGETS, "quick", {"replay": True, "coverage": True})
    one = gate.run_gate("quick", traces=TRACES, workers=1)
    real, parent = gate_coverage.witness_replays, os.getpid()
    broken = gate_coverage.witness_traces()[-1]

    def one_broken(*a, **k):
        if os.getpid() != parent and k.get("only") == {broken}:
            raise RuntimeError("planted")
        with open(tmp_path / "calls", "a") as f:
            f.write(f"{os.getpid()} {sorted(k.get('only') or ['all'])}\n")
        return real(*a, **k)
    monkeypatch.setattr(gate, "witness_replays", one_broken)
    monkeypatch.setattr(gate_coverage, "witness_replays", one_broken)
    two = gate.run_gate("quick", traces=TRACES, workers=2)
    calls = (tmp_path / "calls").read_text().splitlines()
    assert f"{parent} ['all']" in calls          # the section's own replay, in this process
    assert len(calls) == len(gate_coverage.witness_traces()) + 1   # the other parts' too
    assert report_shape(one) == report_shape(two)


def test_the_parts_of_a_worker_share_compiled_models_unless_the_cache_keeps_their_checks():
    """A part run by ``guarded`` keeps the models compiled for graphs before (the next part
    on an equal graph takes the same one); a part the gate's cache keeps (``gate.fresh``)
    starts with none, so that what it evaluates by compiled code is traced within it."""
    from wgk.conformance.oracle.systems import ModelSystem
    from wgk.conformance.traces.format import load_trace
    trace = load_trace(Path(TRACES[0]))
    first = gate_pool.guarded("replay", lambda: [ModelSystem(trace).compiled])
    again = gate_pool.guarded("replay", lambda: [ModelSystem(trace).compiled])
    kept = gate.fresh(lambda: [ModelSystem(trace).compiled])
    assert first.checks[0] is not None and again.checks[0] is first.checks[0]
    assert kept[0] is not first.checks[0]


def _noting(where, label: str, sleep: float = 0.0):
    def run(progress):
        import time
        time.sleep(sleep)
        with open(where, "a") as f:
            f.write(f"{label} {os.getpid()}\n")
        return [Check(label[0], label, "pass", 0.0)]
    return run


def test_a_group_s_parts_are_handed_out_together_by_their_summed_weight():
    parts = [Part("a", None, weight=1.0, group="x"), Part("a", None, weight=2.5),
             Part("b", None, weight=1.0), Part("b", None, weight=2.0, group="x"),
             Part("c", None, weight=0.5, group="y")]
    assert gate_pool.handouts(parts) == [(0, 3), (1,), (2,), (4,)]


def test_a_group_s_parts_run_on_one_worker_in_their_order(tmp_path):
    where = tmp_path / "ran"
    parts = [Part("a", _noting(where, f"a{n}", 0.02), weight=1.0, group=f"g{n}") for n in range(7)] + \
        [Part("b", _noting(where, f"b{n}", 0.02), weight=1.0, group=f"g{n}") for n in range(7)]
    got = {}
    run_parts(parts, 2, None, lambda n, done: got.__setitem__(n, done))
    assert sorted(got) == list(range(14))
    ran = [line.split() for line in where.read_text().splitlines()]
    pid = dict(ran)
    assert len(set(pid.values())) == 2                 # both workers had work
    for n in range(7):
        assert pid[f"a{n}"] == pid[f"b{n}"]
        assert ran.index([f"a{n}", pid[f"a{n}"]]) < ran.index([f"b{n}", pid[f"b{n}"]])


def test_a_worker_that_dies_in_a_group_makes_the_rest_of_its_group_errors_at_once(tmp_path):
    """The parts of its group still to run are errors when its death is seen, not when the
    other workers are done."""
    import time

    def dies(progress):
        time.sleep(0.3)                  # its start has crossed the queue
        os._exit(9)
    where = tmp_path / "ran"
    parts = [Part("a", dies, group="g"), Part("b", _noting(where, "b0"), group="g"),
             Part("b", _noting(where, "b1", 4.0))]
    got, when = {}, {}
    run_parts(parts, 2, None, lambda n, done: (got.__setitem__(n, done),
                                               when.__setitem__(n, time.monotonic())))
    assert sorted(got) == [0, 1, 2]
    assert all(got[n].raised and "died" in got[n].checks[0].detail for n in (0, 1))
    assert not got[2].raised and where.read_text().split()[0] == "b1"
    assert when[1] < when[2] - 1.0
