"""The gate against a kernel it did not ship with (``--external CMD``, wgk-conformance/2).

wgk's own kernel served over the protocol (``python -m wgk.impl.serve``) passes replay
and crash cuts through the crash hook; a kernel with a planted fault
(tests/data/fake_kernel.py) shows it: a divergence with its trace and step, a kernel that
dies, hangs or prints garbage is an ERROR naming trace, step and stderr (exit 2), kinds
it does not declare are SKIP and counted, a crash hook that is ignored is caught.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from wgk.model.vocab import Kind
from wgk.conformance.cli.main import main
from wgk.conformance.oracle.external import ExternalSystem, ProtocolError
from wgk.conformance.oracle.external_runs import (
    Kernel, Unusable, crash_cuts_external, replay_external,
)
from wgk.conformance.reports.gate import run_section
from wgk.conformance.traces.format import load_traces

from gate_sources import trace_with_rejected_dispatch
from no_leaked_children import leaked, running_children

ALL_KINDS = len(Kind)           # every request kind of the model

ROOT = Path(__file__).resolve().parents[1]
INCIDENTS = ROOT / "traces" / "incidents"
LOST = INCIDENTS / "05-lost-response-retried.json"
DEAD = INCIDENTS / "04-dead-worker-converges.json"
FAKE = Path(__file__).resolve().parent / "data" / "fake_kernel.py"
SERVED = f"{sys.executable} -m wgk.impl.serve"


def fake(mode: str) -> str:
    return f"{sys.executable} {FAKE} {mode}"


def wgk(*args: str) -> subprocess.CompletedProcess:
    """``wgk ARGS`` run by the command's ``main`` in this process (the kernel under test is
    its own process all the same: what is checked is what the harness makes of its answers,
    not wgk's own start; an exception escaping ``main`` fails the test as a traceback would)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return subprocess.CompletedProcess(["wgk", *args], code, out.getvalue(), err.getvalue())


def _counting_starts(monkeypatch) -> list:
    """Every start of a kernel's command from now on, one item each."""
    starts: list = []
    spawn = ExternalSystem._spawn

    def counted(self):
        starts.append(self.command)
        spawn(self)
    monkeypatch.setattr(ExternalSystem, "_spawn", counted)
    return starts


@pytest.fixture(scope="module")
def served_lost() -> SimpleNamespace:
    """The crash cuts of LOST through the served kernel inside ``Kernel.reusing()``, every
    start of its command counted, the children left running after it (the tests that read
    these cuts share them)."""
    trace = load_traces([str(LOST)])[0]
    kernel = Kernel(SERVED)
    with pytest.MonkeyPatch.context() as mp:
        starts = _counting_starts(mp)
        before = set(running_children())
        with kernel.reusing():
            spares = kernel.spares
            cuts = crash_cuts_external(trace, kernel)
        left = leaked(before, grace=1.0)
    return SimpleNamespace(trace=trace, kernel=kernel, cuts=cuts, starts=starts, spares=spares,
                           left=left)


def test_served_reference_kernel_passes_replay_and_crash_cuts_over_the_protocol(served_lost):
    kernel = Kernel(SERVED)
    with kernel.reusing():
        for trace in load_traces([str(LOST), str(DEAD)]):
            assert replay_external(trace, kernel).passed
            cuts = served_lost.cuts if trace.id == served_lost.trace.id else \
                crash_cuts_external(trace, kernel)
            assert cuts.cuts and cuts.passed, [d.describe() for c in cuts.cuts
                                               for d in c.divergences]
    assert kernel.capabilities["crash-hook"] and len(kernel.capabilities["kinds"]) == ALL_KINDS


def test_served_kernel_survives_a_crash_inside_a_request_and_answers_the_resend_as_duplicate():
    trace = load_traces([str(LOST)])[0]
    first = next(s for s in trace.steps if "request" in s)
    clean = ExternalSystem(SERVED, trace)
    try:
        assert clean.apply(first)["decision"] == "applied"
        n = clean.boundaries
    finally:
        clean.close()
    assert n >= 1
    ext = ExternalSystem(SERVED, trace)
    try:
        assert ext.apply_crashing(first, n) is None          # died after its last boundary
        again = ext.apply(first)
        assert again["decision"] == "duplicate", again
        assert ext.project()["tasks"]["a"]["status"] != "open"
    finally:
        ext.close()


def test_a_kernel_that_declares_reset_runs_each_cut_on_the_process_the_last_one_left(served_lost):
    """Inside ``Kernel.reusing()`` a case closes with ``reset`` and the next one takes its
    process: the command starts once for the count of boundaries and once per cut (its
    crash's restart), not twice per cut; the idle process is stopped on the way out."""
    kernel, cuts = served_lost.kernel, served_lost.cuts
    assert kernel.capabilities["reset"] is True and kernel.spares is None
    assert cuts.cuts and cuts.passed, [d.describe() for c in cuts.cuts for d in c.divergences]
    assert served_lost.spares.taken == len(cuts.cuts)
    assert len(served_lost.starts) == 1 + len(cuts.cuts)
    assert served_lost.left == {}


def test_a_kernel_that_does_not_declare_reset_is_never_sent_one(monkeypatch, tmp_path):
    trace = load_traces([str(LOST)])[0]
    sent = tmp_path / "resets"
    monkeypatch.setenv("FAKE_KERNEL_RESETS", str(sent))
    starts = _counting_starts(monkeypatch)
    kernel = Kernel(fake("no-reset"))
    with kernel.reusing():
        cuts = crash_cuts_external(trace, kernel)
        assert kernel.spares.taken == 0
    assert "reset" not in kernel.capabilities and not sent.exists()
    assert cuts.cuts and cuts.passed and len(starts) == 1 + 2 * len(cuts.cuts)


def test_a_system_closing_after_the_reuse_ended_stops_its_process():
    kernel = Kernel(SERVED)
    before = set(running_children())
    with kernel.reusing():
        ext = kernel.system({"id": "g", "target": "main-0", "tasks": [{"name": "a", "deps": []}]})
        spares = kernel.spares
    ext.close()                                         # after the spares were stopped
    assert leaked(before, grace=1.0) == {} and spares.take() is None


def test_a_reset_that_keeps_the_last_storage_fails_the_next_case():
    trace = load_traces([str(LOST)])[0]
    kernel = Kernel(fake("stale-reset"))
    with kernel.reusing():
        try:
            cuts = crash_cuts_external(trace, kernel)
        except Unusable:
            return                                      # an error, never a pass
    assert cuts.cuts and not cuts.passed


def test_served_kernel_reset_forgets_its_storage_and_takes_the_next_start(tmp_path):
    graph = {"id": "g", "target": "main-0", "tasks": [{"name": "a", "deps": []}]}
    dispatch = {"kind": "dispatch", "actor": "daemon", "task": "a", "key": "k1",
                "expected-attempt": 0, "mint": "0" * 64,
                "owner": {"pid": 10, "birth": 100, "session": "s1"}}
    start = {"op": "start", "protocol": "wgk-conformance/2", "graph": graph, "initial": {}}
    msgs = [dict(start, storage=str(tmp_path / "one")), {"op": "apply", "request": dispatch},
            {"op": "reset"}, {"op": "project"}, dict(start, storage=str(tmp_path / "two")),
            {"op": "project"}, {"op": "reset"},
            {"op": "recover", "protocol": "wgk-conformance/2", "storage": str(tmp_path / "one"),
             "graph": graph}, {"op": "project"}, {"op": "stop"}]
    p = subprocess.run([sys.executable, "-m", "wgk.impl.serve"],
                       input="\n".join(json.dumps(m) for m in msgs) + "\n",
                       capture_output=True, text=True, timeout=60)
    replies = [json.loads(ln) for ln in p.stdout.splitlines()]
    assert replies[0]["capabilities"]["reset"] is True and replies[2] == {"reset": True}
    assert replies[1]["decision"]["decision"] == "applied"
    assert "send start or recover first" in replies[3]["error"]      # nothing held after it
    assert replies[5]["projection"]["tasks"]["a"]["status"] == "open"
    assert replies[8]["projection"]["tasks"]["a"]["status"] != "open"  # its storage kept it
    assert replies[-1] == {"stopped": True} and p.returncode == 0


def test_a_reset_declared_as_anything_but_a_boolean_is_refused_at_start():
    from wgk.conformance.oracle.external import check_capabilities
    caps = {"kinds": [], "worlds": ["memory"], "processes": 1, "crash-hook": False}
    assert check_capabilities(dict(caps, reset=True))["reset"] is True
    with pytest.raises(ProtocolError, match="capabilities/reset: expected bool"):
        check_capabilities(dict(caps, reset="yes"))


def _cuts(trace, kernel: Kernel):
    """``crash_cuts_external`` with the processes reset between the cuts (what is checked here
    is what the kernel answers, not its start)."""
    with kernel.reusing():
        return crash_cuts_external(trace, kernel)


def test_an_ignored_crash_hook_is_a_failed_cut():
    trace = load_traces([str(LOST)])[0]
    cuts = _cuts(trace, Kernel(fake("lying-hook")))
    assert cuts.cuts and not cuts.passed
    assert {d.what for c in cuts.cuts for d in c.divergences} == {"boundary-not-reached"}


def test_a_cut_before_the_first_boundary_must_recover_the_prefix(served_lost):
    trace, cuts = served_lost.trace, served_lost.cuts
    zero = [c for c in cuts.cuts if c.index == 0]
    assert zero and all(c.verdict == "pass" for c in zero)
    assert len(zero) == sum("request" in s for s in trace.steps)     # one per request
    early = _cuts(trace, Kernel(fake("early-write")))
    failed = [c for c in early.cuts if c.verdict != "pass"]
    assert failed and all(c.index == 0 and "crash-after 0" in c.boundary for c in failed)


def test_a_crash_hook_that_counts_no_boundaries_is_an_error_never_a_pass():
    trace = load_traces([str(LOST)])[0]
    with pytest.raises(Unusable, match="no 'boundaries' count"):
        _cuts(trace, Kernel(fake("uncounted")))


def test_a_planted_divergence_shows_with_its_trace_and_step(tmp_path):
    path = trace_with_rejected_dispatch(tmp_path)
    r = wgk("replay", str(path), "--external", fake("diverge"))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "FAIL planted-dispatch" in r.stdout
    assert "planted-dispatch step 1 [external]" in r.stdout and "unknown-task" in r.stdout
    assert "reproduce: wgk replay" in r.stdout and "--external" in r.stdout
    honest = wgk("replay", str(path), "--external", fake("honest"))
    assert honest.returncode == 0 and "1 passed, 0 failed, 0 skipped" in honest.stdout


@pytest.mark.parametrize("mode, says", [
    ("die", "fake kernel: assertion failed in apply"),
    ("garbage", "is not JSON"),
    ("hang", "within 2s (hung?)"),
])
def test_a_kernel_that_dies_hangs_or_prints_garbage_is_an_error_exit_2(mode, says):
    r = wgk("replay", str(LOST), "--external", fake(mode), "--timeout", "2")
    assert r.returncode == 2, r.stdout + r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("ERROR"))
    assert "incident-05-lost-response-retried" in line and "step 0" in line and says in line, line
    assert "Traceback" not in r.stdout + r.stderr


def test_a_command_that_does_not_start_is_an_error_exit_2():
    r = wgk("replay", str(LOST), "--external", "/nonexistent/kernel --serve")
    assert r.returncode == 2 and "cannot start '/nonexistent/kernel'" in r.stdout, r.stdout
    assert "Traceback" not in r.stderr


def test_a_section_whose_kernel_breaks_is_an_error_naming_section_trace_and_step():
    loaded = load_traces([str(LOST)])
    section = run_section("replay", "quick", loaded=loaded, sources=[str(LOST)],
                          external=Kernel(fake("die"), 5.0))
    assert section.verdict == "error"
    detail = section.checks[-1].detail
    assert detail.startswith("[replay] trace incident-05-lost-response-retried: step 0")
    assert "assertion failed in apply" in detail


def test_undeclared_kinds_are_skipped_and_counted_never_passed():
    loaded = load_traces([str(INCIDENTS)])
    kernel = Kernel(fake("subset"))
    section = run_section("replay", "quick", loaded=loaded, sources=[str(INCIDENTS)],
                          external=kernel, workers=2)
    skipped = [c for c in section.checks if c.verdict == "skip"]
    ran = [c for c in section.checks if c.verdict != "skip"]
    assert skipped and all("sends kinds not declared" in c.detail for c in skipped)
    assert len(skipped) + len(ran) == len(loaded)
    assert all(c.verdict == "pass" for c in ran), [(c.name, c.detail) for c in ran]
    fuzz = run_section("fuzz", "quick", counterexamples="unused", external=kernel)
    assert fuzz.verdict == "skipped" and all(c.verdict == "skip" for c in fuzz.checks)
    r = wgk("replay", str(LOST), "--external", fake("subset"))
    assert r.returncode == 2, r.stdout                  # nothing checked is never a pass
    assert "SKIP incident-05-lost-response-retried" in r.stdout
    assert f"implements 2 of {ALL_KINDS} kinds: 1 of 1 traces skipped" in r.stdout
    assert "ERROR nothing checked" in r.stdout


def test_protocol_1_kernels_are_refused_at_start(tmp_path):
    old = tmp_path / "old.py"
    old.write_text("import sys\nfor line in sys.stdin:\n    print('{\"started\": true}', flush=True)\n")
    with pytest.raises(ProtocolError, match="capabilities"):
        ExternalSystem(f"{sys.executable} {old}", {"id": "g", "tasks": [{"name": "a", "deps": []}]})
    with pytest.raises(Unusable, match="capabilities"):
        Kernel(f"{sys.executable} {old}").probe()


def test_served_kernel_answers_bad_messages_with_one_line_errors(tmp_path):
    msgs = ["not json", json.dumps({"op": "apply", "request": {}}),
            json.dumps({"op": "start", "protocol": "wgk-conformance/1", "storage": str(tmp_path)}),
            json.dumps({"op": "stop"})]
    p = subprocess.run([sys.executable, "-m", "wgk.impl.protocol.serve"], input="\n".join(msgs) + "\n",
                       capture_output=True, text=True, timeout=60)
    replies = [json.loads(ln) for ln in p.stdout.splitlines()]
    assert [("error" in r) for r in replies] == [True, True, True, False]
    assert "send start or recover first" in replies[1]["error"]
    assert "unsupported protocol" in replies[2]["error"] and p.returncode == 0
    assert not os.listdir(tmp_path)


pytest_plugins = ["pytester"]


def test_gate_inside_pytest_against_an_external_kernel(pytester):
    pytester.makepyfile(test_project="def test_own():\n    pass\n")
    traces = INCIDENTS / "16-two-dispatchers-one-attempt.json"
    result = pytester.runpytest("--wgk-gate", "quick", f"--wgk-traces={traces}",
                                f"--wgk-external={fake('subset')}", "-k", "replay or fuzz or races",
                                "-q", "-rs")
    result.assert_outcomes(passed=1, skipped=2)          # replay; fuzz and races skipped
    result.stdout.fnmatch_lines(["*the kernel declares processes: 1*",
                                 "*every check skipped: generated runs send every kind*"])
    planted = pytester.runpytest("--wgk-gate", "quick", f"--wgk-traces={traces}",
                                 f"--wgk-external={fake('die')}", "-k", "replay", "-q")
    planted.assert_outcomes(failed=1)
    planted.stdout.fnmatch_lines(["*ERROR*assertion failed in apply*"])


def test_a_planted_bug_of_wgks_kernel_is_killed_through_the_protocol():
    """The mutated copy is what the served command imports (the child's PYTHONPATH), so the
    kill comes through the protocol; the unmutated copy survives the same sections."""
    from wgk.conformance.oracle.impl_mutants import IDENTITY
    from wgk.conformance.oracle.impl_mutants_catalogue import IMPL_MUTANTS
    from wgk.conformance.reports.impl_mutants import run_mutant
    served = {"command": SERVED, "timeout": 30.0}
    base = run_mutant(IDENTITY, "quick", ["replay"], traces=[str(LOST)], timeout=300,
                      external=served)
    assert base.verdict == "survived", base.detail
    m = next(m for m in IMPL_MUTANTS if m.name == "duplicate-decided-again")
    r = run_mutant(m, "quick", ["replay"], traces=[str(LOST)], timeout=300, external=served)
    assert r.killed and r.section == "replay", (r.verdict, r.detail)
    # the served process ran the mutated copy: its stderr names the copy's source
    assert r.detail.startswith("[replay] trace incident-05") and "/copy/wgk/impl/" in r.detail


def test_a_trace_with_seeds_is_skipped_by_a_kernel_that_declares_it_cannot_seed():
    from wgk.conformance.oracle.external_runs import applicable
    seeded = next(t for t in load_traces([str(ROOT / "traces")]) if t.initial)
    caps = {"kinds": sorted({s["request"]["kind"] for s in seeded.steps if "request" in s}),
            "worlds": ["memory"], "processes": 1, "crash-hook": True}
    assert applicable(seeded, caps) is None
    assert "seeds: false" in applicable(seeded, dict(caps, seeds=False))
    assert "not declared" in applicable(seeded, dict(caps, kinds=[]))


REVOKED = INCIDENTS / "40-revoked-credential-refused.json"


def test_hostile_credentials_over_the_protocol_are_unknown_ones_and_a_crash_on_one_is_caught(
        tmp_path, monkeypatch):
    """The probes section sends credentials of every shape JSON carries on a closed trace's
    graph: wgk's served kernel answers each not-authenticated; a copy that hashes a lone
    surrogate (surrogate-credential-crashes) answers an error, and the check fails."""
    from wgk.conformance.oracle.impl_mutants import child_env, materialize
    from wgk.conformance.oracle.impl_mutants_catalogue import MUTANTS_BY_NAME
    from wgk.conformance.reports.gate_external import bad_credential_check
    def served() -> Kernel:
        k = Kernel(SERVED)
        k.probe()                       # its capabilities, as the gate asks before a section
        return k
    loaded = load_traces([str(REVOKED), str(LOST)])
    good = bad_credential_check(loaded, served())
    assert good.verdict == "pass", good.detail
    assert bad_credential_check(load_traces([str(LOST)]), served()).verdict == "skip"
    m = MUTANTS_BY_NAME["surrogate-credential-crashes"]
    copy = materialize(m.patches, tmp_path / "copy", m.name)
    monkeypatch.setenv("PYTHONPATH", child_env(copy)["PYTHONPATH"])
    bad = bad_credential_check(loaded, served())
    assert bad.verdict == "fail" and "UnicodeEncodeError" in bad.detail, bad.detail
