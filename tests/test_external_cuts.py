"""Crash cuts over the protocol: every durable boundary the kernel passes, on its own world
and on a real one the harness makes.

The served kernel counts, for every request of a trace, exactly the durable boundaries wgk's
kernel passes in process (the in-process cuts crash before and after each; over the protocol
the kernel dies after the k-th, and once as the request is read: the same durable states). On
the real world each cut keeps the harness's repository and owner processes across the
kernel's restart, and the harness reads the repository itself afterwards.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from wgk.impl import Recorder

from wgk.conformance.oracle.external_real import RealExternal
from wgk.conformance.oracle.external_runs import Kernel, boundaries_of, crash_cuts_external
from wgk.conformance.oracle.impl_system import ImplSystem
from wgk.conformance.traces.format import load_traces

ROOT = Path(__file__).resolve().parents[1]
INCIDENTS = ROOT / "traces" / "incidents"
DEAD = INCIDENTS / "04-dead-worker-converges.json"
PHASES = INCIDENTS / "13-crash-at-every-phase.json"
SERVED = f"{sys.executable} -m wgk.impl.serve"


def _in_process_after_boundaries(trace) -> list[int | None]:
    recorder = Recorder()
    impl = ImplSystem(trace, hook=recorder)
    out = []
    try:
        for step in trace.steps:
            start = len(recorder.seen)
            impl.apply(step)
            out.append(sum(b.when == "after" for b in recorder.seen[start:])
                       if "request" in step else None)
    finally:
        impl.close()
    return out


def test_the_served_kernel_counts_the_boundaries_the_in_process_cuts_crash_at():
    kernel = Kernel(SERVED)
    for trace in load_traces([str(DEAD), str(PHASES)]):
        inside = _in_process_after_boundaries(trace)
        assert boundaries_of(trace, kernel) == inside, trace.id
        assert sum(n for n in inside if n) > 0


def test_crash_cuts_on_the_real_world_over_the_protocol():
    kernel = Kernel(SERVED)
    trace = load_traces([str(DEAD)])[0]
    memory = crash_cuts_external(trace, kernel)
    real = crash_cuts_external(trace, kernel, real=True)
    assert real.real and real.passed, [d.describe() for c in real.cuts for d in c.divergences][:2]
    assert [c.name for c in real.cuts] == [c.name for c in memory.cuts]
    counts = boundaries_of(trace, kernel, real=True)
    assert len(real.cuts) == sum(n + 1 for n in counts if n is not None)


def test_the_harness_reads_the_real_repository_against_the_model():
    trace = load_traces([str(DEAD)])[0]
    ext = RealExternal(SERVED, trace, timeout=30)
    try:
        ext.apply(trace.steps[0])                      # dispatch a: one worktree
        projection = ext.project()
        assert ext.repository_problem(projection, "main-0") is None
        assert "target" in ext.repository_problem(dict(projection, target="main-1"), "main-0")
        listed = subprocess.run(["git", "-C", ext.repository, "worktree", "list", "--porcelain"],
                                capture_output=True, text=True, check=True).stdout
        path = [ln.split(" ", 1)[1] for ln in listed.splitlines() if ln.startswith("worktree ")][1]
        subprocess.run(["git", "-C", ext.repository, "worktree", "remove", "--force", path],
                       check=True, capture_output=True)
        assert "0 worktrees" in ext.repository_problem(projection, "main-0")
        subprocess.run(["git", "-C", ext.repository, "commit", "-q", "--allow-empty", "-m", "x"],
                       check=True, capture_output=True,
                       env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
                            "PATH": "/usr/bin:/bin"})
        assert "still" not in ext.repository_problem(projection, "main-0")
        assert "main" in ext.repository_problem(projection, "main-0")
    finally:
        ext.close()


def test_the_default_budget_cuts_every_trace_over_the_protocol():
    from wgk.conformance.reports.gate_external import cut_traces, real_cut_traces
    loaded = load_traces([str(DEAD), str(PHASES)])
    kernel = Kernel(SERVED)
    kernel.probe()
    assert cut_traces("default", loaded, kernel) == loaded
    assert len(cut_traces("quick", loaded + loaded, kernel)) == 3
    memory_only = Kernel(SERVED, capabilities=dict(kernel.capabilities, worlds=["memory"]))
    assert real_cut_traces("quick", loaded, memory_only) == []


def test_traces_a_kernel_cannot_take_are_counted_apart_from_the_budget_s_sample():
    from wgk.conformance.reports.gate import run_section
    loaded = load_traces([str(DEAD), str(PHASES)])
    caps = Kernel(SERVED).probe()
    few = Kernel(SERVED, capabilities=dict(caps, kinds=["heartbeat"]))
    s = run_section("crash-cuts", "quick", loaded=loaded, external=few)
    assert [(c.verdict, c.detail) for c in s.checks] == [
        ("skip", "2 traces not cut: they send what the kernel does not declare")]
