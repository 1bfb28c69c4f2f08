"""The gate against a kernel it did not ship with (``--external CMD``, wgk-conformance/2).

wgk's own kernel served over the protocol (``python -m wgk.impl.serve``) passes replay
and crash cuts through the crash hook; a kernel with a planted fault
(tests/data/fake_kernel.py) shows it: a divergence with its trace and step, a kernel that
dies, hangs or prints garbage is an ERROR naming trace, step and stderr (exit 2), kinds
it does not declare are SKIP and counted, a crash hook that is ignored is caught.
"""
from __future__ import annotations

import json
import shutil
import os
import subprocess
import sys
from pathlib import Path

import pytest

from wgk.model.vocab import Kind
from wgk.conformance.oracle.external import ExternalSystem, ProtocolError
from wgk.conformance.oracle.external_runs import (
    Kernel, Unusable, crash_cuts_external, replay_external,
)
from wgk.conformance.reports.gate import run_section
from wgk.conformance.traces.format import load_traces

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
    return subprocess.run([sys.executable, "-m", "wgk.conformance", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=600)


def trace_with_rejected_dispatch(tmp_path: Path) -> Path:
    doc = {"format": "wgk-trace/1", "id": "planted-dispatch",
           "title": "A dependent is not dispatched before its dependency is done",
           "source": {"kind": "counterexample", "provenance": "tests/test_external_gate.py"},
           "description": "Dispatch a, then b (which depends on a): b is rejected.",
           "graph": {"id": "g", "target": "main-0",
                     "tasks": [{"name": "a", "deps": []}, {"name": "b", "deps": ["a"]}]},
           "steps": [{"request": {"kind": "dispatch", "actor": "daemon", "task": "a", "key": "k1",
                                  "expected-attempt": 0, "mint": "t1",
                                  "owner": {"pid": 10, "birth": 100, "session": "s1"}},
                      "expect": {"decision": "applied"}},
                     {"request": {"kind": "dispatch", "actor": "daemon", "task": "b", "key": "k2",
                                  "expected-attempt": 0, "mint": "t2",
                                  "owner": {"pid": 11, "birth": 101, "session": "s2"}},
                      "expect": {"decision": "rejected", "code": "dependency-not-done"}}]}
    path = tmp_path / "planted.json"
    path.write_text(json.dumps(doc))
    return path


def test_served_reference_kernel_passes_replay_and_crash_cuts_over_the_protocol():
    kernel = Kernel(SERVED)
    for trace in load_traces([str(LOST), str(DEAD)]):
        assert replay_external(trace, kernel).passed
        cuts = crash_cuts_external(trace, kernel)
        assert cuts.cuts and cuts.passed, [d.describe() for c in cuts.cuts for d in c.divergences]
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


def test_an_ignored_crash_hook_is_a_failed_cut():
    trace = load_traces([str(LOST)])[0]
    cuts = crash_cuts_external(trace, Kernel(fake("lying-hook")))
    assert cuts.cuts and not cuts.passed
    assert {d.what for c in cuts.cuts for d in c.divergences} == {"boundary-not-reached"}


def test_a_cut_before_the_first_boundary_must_recover_the_prefix():
    trace = load_traces([str(LOST)])[0]
    cuts = crash_cuts_external(trace, Kernel(SERVED))
    zero = [c for c in cuts.cuts if c.index == 0]
    assert zero and all(c.verdict == "pass" for c in zero)
    assert len(zero) == sum("request" in s for s in trace.steps)     # one per request
    early = crash_cuts_external(trace, Kernel(fake("early-write")))
    failed = [c for c in early.cuts if c.verdict != "pass"]
    assert failed and all(c.index == 0 and "crash-after 0" in c.boundary for c in failed)


def test_a_crash_hook_that_counts_no_boundaries_is_an_error_never_a_pass():
    trace = load_traces([str(LOST)])[0]
    with pytest.raises(Unusable, match="no 'boundaries' count"):
        crash_cuts_external(trace, Kernel(fake("uncounted")))


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


NODE_KERNEL = ROOT / "examples" / "node-kernel" / "kernel.js"
NODE_OWN = ROOT / "examples" / "node-kernel" / "traces"
NODE_TRACES = [str(INCIDENTS / f"{name}.json") for name in (
    "16-two-dispatchers-one-attempt", "07b-repeated-message-held-once",
    "11-pid-reuse-is-owner-death", "17c-failure-report-during-completion",
    "12b-land-would-drop-a-commit", "35-provider-failure-after-candidate",
    "08-repeated-compactions-counted-once", "45-reset-under-a-live-owner-is-fenced",
    "03-reset-new-session-claims-continuation", "49-receipt-without-transaction",
    "50-provider-route-breaker", "31-typed-failures-and-retry-budget", "33-external-wait",
    "30-archive-needs-confirmed-digest", "51-chat-request-reconciled-never-made-again",
    "32b-old-generation-dependent-fenced")] + [
    str(ROOT / "traces" / "peers" / "wg" / "deletion-map" / "03-duplicate-provider-event.json"),
    str(ROOT / "traces" / "peers" / "wg" / "simple-land" / "v1" / "moved_main_rejects_land.json"), str(NODE_OWN)]
#: the trace (of NODE_TRACES: a file's stem, or the kernel's own directory) each bug is hunted with
NODE_BUG_TRACE = {"two-attempts": "16-two-dispatchers-one-attempt",
                  "message-counted-twice": "07b-repeated-message-held-once",
                  "retry-not-counted": "traces", "last-terminal-wins": "traces",
                  "requests-not-recovered": "16-two-dispatchers-one-attempt",
                  "foreign-cap-unknown": "traces", "land-without-cas": "12b-land-would-drop-a-commit",
                  "pid-reuse-looks-alive": "11-pid-reuse-is-owner-death",
                  "fail-beats-completion": "17c-failure-report-during-completion",
                  "convergence-not-durable": "35-provider-failure-after-candidate",
                  "seed-without-token": "03-duplicate-provider-event",
                  "reset-ignores-live-owner": "45-reset-under-a-live-owner-is-fenced",
                  "resume-without-proven-death": "03-reset-new-session-claims-continuation",
                  "second-receipt-replaces": "49-receipt-without-transaction",
                  "route-breaker-ignored": "50-provider-route-breaker",
                  "retry-keeps-budget-spent": "31-typed-failures-and-retry-budget",
                  "deliver-any-event": "33-external-wait",
                  "archive-unconfirmed": "30-archive-needs-confirmed-digest",
                  "chat-requested-twice": "51-chat-request-reconciled-never-made-again",
                  "dependency-generation-forgotten": "32b-old-generation-dependent-fenced",
                  "publish-onto-a-moved-main": "moved_main_rejects_land",
                  "abandoned-task-dispatched": "traces"}
NODE_BUGS = {
    # one attempt at a time and the expected-attempt CAS both dropped: two dispatchers win
    "two-attempts": ("    if (r['expected-attempt'] !== t.attempt) return reject('cas-moved');\n"
                     "    if (t.state === 'running') return reject('attempt-live');\n", "",
                     "incident-16-two-dispatchers-one-attempt step 1"),
    # a repeated message counted again
    "message-counted-twice": ("if (this.note(t, r.kind, r.evidence) && running) t.counters.messages += 1;",
                              "if (running && (this.note(t, r.kind, r.evidence) || true)) t.counters.messages += 1;",
                              "incident-07b-repeated-message-held-once step 2"),
    # a retry after a failed attempt not counted: the retry budget is never spent
    "retry-not-counted": ("    if (this.afterFailure(t)) t.retries += 1;", "",
                          "node-kernel-retries-and-first-terminal step 3"),
    # a later terminal report wins over the first
    "last-terminal-wins": ("const first = t.state === 'running' && t.phase === 'absent';",
                           "const first = t.phase === 'absent';",
                           "node-kernel-retries-and-first-terminal step 2"),
    # recover forgets the requests: what was acknowledged is lost across a crash
    "requests-not-recovered": ("if (r.request) this.decide(r.request, r.principal, true);",
                               "if (r.request) { /* forgotten */ }",
                               "(crash after boundary 1 of 1)"),
    # a cap naming another task taken as an unknown attempt (what docs/vocabulary.md said)
    "foreign-cap-unknown": ("if (cap.graph !== this.graph.id || cap.task !== r.task) return reject('stale-capability');",
                            "if (cap.graph !== this.graph.id || cap.task !== r.task) return reject('unknown-attempt');",
                            "node-kernel-foreign-cap-is-stale step 2"),
    # --- the evidence kinds, the SaveTransaction and convergence ---
    # the land moves a target that moved since the attempt's base: a commit is dropped
    "land-without-cas": ("        if (!(happened || !land || this.target === t.base)) return reject('cas-moved');\n",
                         "", "incident-12-land-would-drop-a-commit step 12"),
    # the probe reads the pid alone: a reused pid looks like the owner alive
    "pid-reuse-looks-alive": ("t.owner.birth !== 0 && t.procBirth === t.owner.birth;",
                              "t.owner.birth !== 0 && t.procBirth !== 0;",
                              "incident-11-pid-reuse-is-owner-death step 3"),
    # a failure report during a completion closes the attempt: the completion loses its terminal
    "fail-beats-completion": ("const first = t.state === 'running' && t.phase === 'absent';",
                              "const first = t.state === 'running';",
                              "incident-17c-failure-report-during-completion step 4"),
    # the requests convergence sends are decided but never logged: a crash forgets them
    "convergence-not-durable": ("const d = this.decide(request, this.daemon, false);",
                                "const d = this.decide(request, this.daemon, true);",
                                "incident-provider-failure-after-candidate step 4 (crash"),
    # a seeded attempt keeps no token: its own process is refused
    "seed-without-token": ("tokenHash: a.token || null,", "tokenHash: null,",
                           "wg-dm-03-duplicate-provider-event step 0"),
    # --- the operator's kinds, the continuation, the receipt and the provider routes ---
    # a reset over an owner that may be alive opens the generation at once: the owner is not fenced
    "reset-ignores-live-owner": ("    const held = this.ownerHeld(t);\n", "    const held = false;\n",
                                 "incident-45-reset-under-a-live-owner-is-fenced step 2"),
    # a resume without a probe that proved the owner dead: a new session claims a live attempt
    "resume-without-proven-death": ("    if (t.ownerSeen !== 'dead') return reject('owner-not-proven-dead');\n", "",
                                    "incident-03-reset-new-session-claims-continuation step 1"),
    # a second completion receipt replaces the first
    "second-receipt-replaces": ("        if (t.completionReceipt !== null) return reject('terminal-already');\n", "",
                                "incident-49-receipt-without-transaction step 6"),
    # an open route's breaker does not keep the task from a new attempt
    "route-breaker-ignored": ("    if (t.routeOpen) return 'route-unavailable';\n", "",
                              "incident-provider-route-breaker step 4"),
    # the operator's retry leaves the spent budget spent: the automatic retries never start again
    "retry-keeps-budget-spent": ("    t.retries = 0;\n", "", "incident-typed-failures-and-retry-budget step 6"),
    # --- external waits, archives, the chat and reopened dependencies ---
    # any delivery releases a wait, not only the one naming the event it waits for
    "deliver-any-event": ("        const matches = t.waitingOn !== null && r.correlation === t.waitingOn;\n",
                          "        const matches = t.waitingOn !== null;\n", "incident-external-wait step 4"),
    # an archive on the daemon's word, without the operator's confirmation of its digest
    "archive-unconfirmed": ("        if (r.kind === 'archive' && !(t.archiveConfirmed !== null && "
                            "r.candidate === t.archiveConfirmed)) {\n          return reject('archive-unconfirmed');\n"
                            "        }\n", "", "incident-30-archive-needs-confirmed-digest step 15"),
    # a second chat creation request under the same opening key
    "chat-requested-twice": ("        if (t.chatRequest === t.fence) return reject('chat-requested');\n", "",
                             "incident-chat-request-reconciled-never-made-again step 4"),
    # a dependency Done again on a new generation taken for the one the attempt opened on
    "dependency-generation-forgotten": (
        "  depsCurrent(t) { return this.depsDone(t) && t.depsGeneration === this.depsGeneration(t); }",
        "  depsCurrent(t) { return this.depsDone(t); }", "incident-32b-old-generation-dependent-fenced step 18"),
    # --- the review valve ---
    # a Land manifest published onto a main other than the one it integrated
    "publish-onto-a-moved-main": ("          check(v.contract !== 'land' || field('base') === v.main, 'main-moved') ||\n", "",
                                  "wg-simple-land-v1-moved-main-rejects-land step 4"),
    # an abandoned task is dispatched again
    "abandoned-task-dispatched": ("    if (t.abandoned) return 'held';\n", "",
                                  "node-kernel-abandon-holds-dependents step 5"),
}


@pytest.mark.skipif(not shutil.which("node"), reason="Node.js is not installed")
def test_node_kernel_passes_what_it_declares_with_crash_cuts():
    r = wgk("replay", *NODE_TRACES, "--crash-cuts", "--external", f"node {NODE_KERNEL}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{len(NODE_TRACES) - 1 + len(list(NODE_OWN.glob('*.json')))} passed, 0 failed, 0 skipped (external: implements {ALL_KINDS} of {ALL_KINDS} kinds" in r.stdout


@pytest.mark.skipif(not shutil.which("node"), reason="Node.js is not installed")
@pytest.mark.parametrize("bug", sorted(NODE_BUGS))
def test_bugs_planted_in_the_node_kernel_show_with_trace_and_step(tmp_path, bug):
    old, new, where = NODE_BUGS[bug]
    source = NODE_KERNEL.read_text()
    assert source.count(old) == 1
    planted = tmp_path / "kernel.js"
    planted.write_text(source.replace(old, new))
    trace = next(t for t in NODE_TRACES if Path(t).stem == NODE_BUG_TRACE[bug])   # the one that shows it
    r = wgk("replay", trace, "--crash-cuts", "--external", f"node {planted}")
    assert r.returncode == 1, r.stdout + r.stderr
    assert where in r.stdout, r.stdout


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
