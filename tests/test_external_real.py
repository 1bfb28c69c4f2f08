"""The real world over the protocol: a git repository and owner processes the harness makes.

wgk's served kernel declares the real world: traces run on a fresh repository the harness
created (named in ``start``) with every owner a real child process of the harness; the
kernel's worktrees are real ones in it, a dead owner is a real zombie, and the projection
is named back to the trace. A bug only the real world shows (a zombie counted alive) is
caught through the protocol there.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from wgk.conformance.oracle.external_real import RealExternal
from wgk.conformance.oracle.external_runs import Kernel, replay_external
from wgk.conformance.traces.format import load_traces

ROOT = Path(__file__).resolve().parents[1]
INCIDENTS = ROOT / "traces" / "incidents"
DEAD = INCIDENTS / "04-dead-worker-converges.json"
MOVED = INCIDENTS / "12-target-moved-needs-repair.json"
SERVED = f"{sys.executable} -m wgk.impl.serve"


def test_served_kernel_declares_the_real_world_and_passes_real_traces():
    kernel = Kernel(SERVED)
    assert "real" in kernel.probe()["worlds"]
    for trace in load_traces([str(DEAD), str(MOVED)]):
        r = replay_external(trace, kernel, real=True)
        assert r.verdict == "pass", (trace.id, [d.describe() for d in r.divergences[:1]])


def test_the_world_is_real_git_and_real_processes_named_back_to_the_trace():
    trace = load_traces([str(DEAD)])[0]
    ext = RealExternal(SERVED, trace, timeout=30)
    try:
        ext.apply(trace.steps[0])                                  # dispatch a, owner 4001
        repo = ext._root + "/repo"
        listed = subprocess.run(["git", "-C", repo, "worktree", "list"], capture_output=True,
                                text=True, check=True).stdout
        assert ext._root + "/worktrees" in listed                  # the kernel's real worktree
        (real_pid, _), = [k for k in ext.owners.back]
        assert real_pid != 4001 and Path(f"/proc/{real_pid}").exists()
        owner = ext.project()["tasks"]["a"]["owner"]
        assert (owner["pid"], owner["birth"]) == (4001, 911)       # named back
        ext.apply(trace.steps[1])                                  # owner-dies: a real SIGKILL
        state = Path(f"/proc/{real_pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        assert state == "Z"                                        # a zombie, unreaped
    finally:
        ext.close()


def test_a_zombie_counted_alive_is_caught_through_the_protocol_on_the_real_world_only():
    from wgk.conformance.oracle.impl_mutants_catalogue import IMPL_MUTANTS
    from wgk.conformance.reports.impl_mutants import run_mutant
    m = next(m for m in IMPL_MUTANTS if m.name == "zombie-is-live")
    served = {"command": SERVED, "timeout": 30.0}
    r = run_mutant(m, "quick", ["replay"], traces=[str(DEAD)], timeout=300, external=served)
    assert r.killed and r.section == "replay", (r.verdict, r.detail)
    assert "incident-04" in r.detail


def test_two_instances_and_races_on_one_real_world():
    from wgk.conformance.oracle.external_several import race_external, two_kernels_external
    kernel = Kernel(SERVED)
    trace = load_traces([str(DEAD)])[0]
    r = two_kernels_external(trace, kernel, real=True)
    assert r.verdict == "pass", [d.describe() for d in r.divergences[:1]]
    race = race_external(kernel, "two-dispatchers", processes=3, rounds=3, real=True)
    assert race.ok, race.problems
    assert sum(race.codes.values()) == 9, race.codes              # 3 rounds of 3 answers


def test_a_worktree_a_loser_left_in_the_real_repository_fails_the_race():
    from wgk.conformance.oracle.external_several import _check_repository
    from wgk.conformance.oracle.races import RaceResult, request
    graph = {"id": "g", "target": "main-0", "tasks": [{"name": "t0", "deps": []}]}
    ext = RealExternal(SERVED, graph, timeout=30)
    try:
        from wgk.conformance.oracle.external_several import _raw
        assert _raw(ext, request("two-dispatchers", "t0", 0))["decision"] == "applied"
        result = RaceResult("two-dispatchers", 1, 1)
        _check_repository(result, ext, ext.project())
        assert result.problems == []
        subprocess.run(["git", "-C", ext.repository, "worktree", "add", "-q", "--detach",
                        ext._root + "/stray"], check=True, capture_output=True)
        _check_repository(result, ext, ext.project())
        assert result.problems == ["repository: the repository lists 2 worktrees, "
                                   "the projection holds 1"]
    finally:
        ext.close()
