"""Traces on the real world: a fresh git repository and real child processes per trace."""
from __future__ import annotations

import io
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from wgk.impl.world import proc as proc_mod
from wgk.conformance.cli.main import main
from wgk.conformance.oracle.crashcuts import crash_cuts
from wgk.conformance.oracle.real_world import world_for
from wgk.conformance.oracle.replay import replay
from wgk.conformance.oracle.select import systems_for
from wgk.conformance.traces.format import load_trace

INCIDENTS = Path(__file__).resolve().parent.parent / "traces" / "incidents"
DEAD = INCIDENTS / "04-dead-worker-converges.json"


#: The environment variable that marks the owners a test started (their children inherit it).
MARK = "WGK_TEST_OWNER_MARK"


@pytest.fixture
def owners_left(monkeypatch):
    """The live ``sleep 3600`` owners this test started, found through /proc by a marker
    unique to the test in their environment: never another run's, a gate's or a user's."""
    mark = f"{MARK}={uuid.uuid4().hex}".encode()
    monkeypatch.setenv(MARK, mark.decode().partition("=")[2])
    return lambda: owned_sleepers(mark)


def owned_sleepers(mark: bytes) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read() != b"sleep\x003600\x00":      # (a zombie's is empty)
                    continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                if mark in f.read().split(b"\0"):
                    found.append(int(pid))
        except OSError:                                  # gone, or not ours to read
            continue
    return found


def on_real(path: Path):
    trace = load_trace(path)
    systems = systems_for(trace, "both", "real")
    try:
        return replay(trace, systems), systems[1]
    finally:
        for s in systems:
            s.close()


def test_the_world_a_trace_can_run_on():
    assert world_for(load_trace(DEAD))[0] == "real"
    assert world_for(load_trace(INCIDENTS / "11-pid-reuse-is-owner-death.json")) == (
        "memory", "pid reuse cannot be staged for real")


@pytest.mark.parametrize("name", ["04-dead-worker-converges.json", "12-target-moved-needs-repair.json"])
def test_a_trace_replays_on_real_git_and_real_processes(name, owners_left):
    before = len(owners_left())
    result, impl = on_real(INCIDENTS / name)
    assert result.verdict == "pass", [d.describe() for d in result.divergences]
    assert impl.world.kind == "real"
    assert len(owners_left()) == before, "every real owner is reaped when the world closes"


def test_the_real_target_is_a_commit_named_by_the_trace(tmp_path):
    trace = load_trace(INCIDENTS / "12-target-moved-needs-repair.json")
    [model, impl] = systems_for(trace, "both", "real")
    try:
        for step in trace.steps:
            model.apply(step)
            impl.apply(step)
        git = impl.world.repository.git
        assert len(git.target()) == 40 and impl.project()["target"] == model.project()["target"]
        assert git.out("cat-file", "-t", git.target()) == "commit"
    finally:
        model.close()
        impl.close()


def test_a_zombie_owner_counted_as_alive_fails_the_real_replay(monkeypatch):
    real_open = open

    def no_zombies(path, *a, **kw):
        f = real_open(path, *a, **kw)
        if str(path).startswith("/proc/") and str(path).endswith("/stat") and a and "b" in a[0]:
            data = f.read().replace(b") Z ", b") S ")
            f.close()
            return io.BytesIO(data)
        return f
    monkeypatch.setattr(proc_mod, "open", no_zombies, raising=False)
    result, _ = on_real(DEAD)
    assert result.verdict == "fail"
    assert any("owner-seen" in d.describe() or "plan" in d.describe() for d in result.divergences)


@pytest.mark.parametrize("mode", ["in-process", "kill"])
def test_crash_cuts_on_the_real_world(mode, owners_left):
    before = len(owners_left())
    r = crash_cuts(load_trace(DEAD), mode=mode, world="real")
    assert r.cuts and r.passed, [c.divergences[0].describe() for c in r.failed][:1]
    assert len(owners_left()) == before


def test_replay_cli_on_the_real_world(capsys):
    assert main(["replay", str(DEAD), "--system", "both", "--world", "real"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("1 passed, 0 failed")


def test_only_the_owners_this_test_started_are_counted(owners_left):
    """A ``sleep 3600`` started beside the run (another run's, a user's) is not counted; the
    owners the world starts are, while it is open."""
    before = owners_left()
    foreign = subprocess.Popen(["sleep", "3600"], env={k: v for k, v in os.environ.items()
                                                        if k != MARK})
    try:
        trace = load_trace(DEAD)
        [model, impl] = systems_for(trace, "both", "real")
        try:
            for step in trace.steps[:1]:          # the dispatch starts the owner
                model.apply(step)
                impl.apply(step)
            assert len(owners_left()) > len(before), "the world's live owner is counted"
        finally:
            model.close()
            impl.close()
        assert owners_left() == before and foreign.poll() is None
        assert foreign.pid not in owners_left()
    finally:
        foreign.kill()
        foreign.wait()


def test_every_budget_cuts_a_landing_trace_on_the_real_world_first():
    """A cut between a land's ref update in the real repository and the commit of its decision
    exists only in a trace that commits an effect: each budget's real-world cuts start there."""
    from wgk.conformance.reports.gate_traces import real_selection
    from wgk.conformance.traces.format import load_traces
    loaded = load_traces([Path(__file__).resolve().parents[1] / "traces"])
    by_id = {t.id: t for t in loaded}
    for budget in ("quick", "default"):
        chosen = real_selection(budget, loaded, "cuts")
        assert chosen, budget
        assert all(any(s.get("request", {}).get("kind") == "commit-effect" for s in by_id[i].steps)
                   for i in chosen), (budget, chosen)
    assert real_selection("quick", loaded, "cuts") == {"wg-runtime-v1-crash-after-promotion"}


def test_the_real_worlds_mark_moves_with_anything_a_kernel_reads_and_only_then(tmp_path, owners_left):
    """``RealWorld.mark``: equal while nothing changed (reading the world changes nothing);
    different after a worktree's bytes change behind git's back, a ref moves, an owner dies
    or the clock advances. The crash cuts hand a real world's projection to the rebuild
    (``_Shown``) and skip a convergence's repeated checks (``_fingerprint``) on it."""
    from wgk.conformance.oracle import crashcuts
    from wgk.conformance.oracle.impl_system import ImplSystem
    trace = load_trace(DEAD)
    impl = ImplSystem(trace, world=crashcuts.real_world("real", trace, str(tmp_path)))
    try:
        for step in trace.steps:
            if step.get("env") == "owner-dies":
                break
            impl.apply(step)
        world = impl.world
        mark = world.mark()
        shown = crashcuts._Shown(impl, impl.project())
        assert world.mark() == mark and shown.live(impl) == shown.projection
        assert crashcuts._fingerprint(impl) == crashcuts._fingerprint(impl) is not None
        file = next(p for p in sorted((tmp_path / "world" / "worktrees").rglob("*"))
                    if p.is_file() and p.name != ".git")
        file.write_text(file.read_text() + "changed\n")            # behind git's back
        assert world.mark() != mark and shown.live(impl) is None
        mark = world.mark()
        world.repository.move_target("someone else's")
        assert world.mark() != mark
        mark = world.mark()
        world.processes.kill(next(iter(world.processes.owners)))
        assert world.mark() != mark
        mark = world.mark()
        world.clock.advance(1)
        assert world.mark() != mark
    finally:
        impl.close()
