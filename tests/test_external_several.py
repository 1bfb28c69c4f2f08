"""Several instances of an external kernel on one storage (``processes`` of 2 or more).

wgk's served kernel declares several processes: two instances take a trace's steps in turn
in lockstep with the model, and three race for each round's task with exactly one winner, on
a SQLite file and on PostgreSQL. A kernel whose joining instance works on a private copy of
the storage (tests/data/fake_kernel.py ``split-brain``) fails both; the Node.js kernel
declares one process and both sections are skipped with that reason.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from wgk.conformance.oracle.external_runs import Kernel
from wgk.conformance.oracle.external_several import race_external, two_kernels_external
from wgk.conformance.oracle.races import RACES
from wgk.conformance.reports.gate import run_section
from wgk.conformance.traces.format import load_traces

from pg_support import server

ROOT = Path(__file__).resolve().parents[1]
INCIDENTS = ROOT / "traces" / "incidents"
#: a dispatch, edits and a convergence; a lost response re-sent; crashes at every phase
TWO = [INCIDENTS / "04-dead-worker-converges.json", INCIDENTS / "05-lost-response-retried.json",
       INCIDENTS / "13-crash-at-every-phase.json"]
SERVED = f"{sys.executable} -m wgk.impl.serve"
SPLIT = f"{sys.executable} {Path(__file__).resolve().parent / 'data' / 'fake_kernel.py'} split-brain"
NODE_KERNEL = ROOT / "examples" / "node-kernel" / "kernel.js"


def test_served_kernel_declares_several_processes_and_two_instances_pass_in_turn():
    kernel = Kernel(SERVED)
    assert kernel.probe()["processes"] >= 2
    for trace in load_traces([str(p) for p in TWO]):
        r = two_kernels_external(trace, kernel)
        assert r.verdict == "pass", (trace.id, r.divergences[:1])
    assert any(s.get("env") == "crash" for s in trace.steps)     # both instances restarted


@pytest.mark.parametrize("name", RACES)
def test_served_kernel_races_between_processes_with_one_winner_a_round(name):
    r = race_external(Kernel(SERVED), name, processes=3, rounds=4)
    assert r.ok, r.problems
    assert r.codes.get("applied") == 4 and sum(r.codes.values()) == 12


def test_races_on_postgresql_leave_no_schema_behind():
    dsn = server()
    import psycopg
    r = race_external(Kernel(f"{SERVED} --postgres {dsn}"), "reset-racing-completion",
                      processes=3, rounds=4)
    assert r.ok, r.problems
    with psycopg.connect(dsn) as c:
        left = c.execute("SELECT count(*) FROM information_schema.schemata "
                         "WHERE schema_name LIKE 'wgk_serve_%'").fetchone()[0]
    assert left == 0


def test_a_joining_instance_on_a_private_copy_fails_with_trace_and_step():
    kernel = Kernel(SPLIT)
    trace = load_traces([str(TWO[0])])[0]
    r = two_kernels_external(trace, kernel)
    assert r.verdict == "fail"
    assert r.divergences[0].trace == trace.id and r.divergences[0].step == 0
    race = race_external(kernel, "two-dispatchers", processes=3, rounds=2)
    assert not race.ok and race.problems[0] == "round 0: 3 winners"


def test_gate_sections_run_several_instances_over_the_protocol():
    loaded = load_traces([str(p) for p in TWO[:2]])
    for name in ("two-kernels", "races"):
        s = run_section(name, "quick", loaded=loaded, external=Kernel(SERVED))
        assert s.verdict == "pass" and s.checks, (name, [c.detail for c in s.checks])
        assert all(c.verdict == "pass" for c in s.checks)
    broken = run_section("races", "quick", loaded=loaded, external=Kernel(SPLIT))
    assert broken.verdict in ("fail", "error") and "winners" in broken.checks[0].detail
    # on the real world the private copies make the same worktree twice: the kernel dies there
    real = [c for c in broken.checks if "real world" in c.name]
    assert real and real[0].verdict in ("fail", "error") and "two-dispatchers" in real[0].name


@pytest.mark.skipif(not shutil.which("node"), reason="Node.js is not installed")
def test_a_kernel_declaring_one_process_skips_both_sections_with_the_reason():
    loaded = load_traces([str(TWO[0])])
    for name in ("two-kernels", "races"):
        s = run_section(name, "quick", loaded=loaded, external=Kernel(f"node {NODE_KERNEL}"))
        assert s.skipped and "processes: 1" in s.skipped


def test_a_race_sending_an_undeclared_kind_is_skipped_with_its_reason():
    from wgk.conformance.oracle.external_several import RACE_NEEDS, race_missing
    from wgk.conformance.oracle.races import request
    for name, (kinds, _) in RACE_NEEDS.items():          # the needs cover what a race sends
        sent = {request(name, "t0", i)["kind"] for i in range(4)} if name == "two-dispatchers" \
            else {request(name, "t0", i)["kind"] for i in range(4)} | {"dispatch"}
        assert sent == kinds, name
    caps = {"kinds": ["dispatch", "heartbeat"], "processes": 8}
    assert race_missing("two-dispatchers", caps) is None
    assert race_missing("two-terminal-reports", caps) == "sends what is not declared: fail"
    assert "edit" in race_missing("reset-racing-completion",
                                  dict(caps, kinds=["dispatch", "reset", "submit"], env=[]))
