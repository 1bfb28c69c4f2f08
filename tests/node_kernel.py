"""The Node.js kernel of examples/node-kernel and the bugs planted in copies of it, shared by
tests/test_external_node.py (the kernel passes what it declares, with crash cuts) and
tests/test_external_node_bugs.py (each planted bug shows with its trace and step)."""
from __future__ import annotations

import contextlib
import io
import shutil
import subprocess
from pathlib import Path

import pytest

from wgk.conformance.cli.main import main
from wgk.model.vocab import Kind

ALL_KINDS = len(Kind)           # every request kind of the model

ROOT = Path(__file__).resolve().parents[1]
INCIDENTS = ROOT / "traces" / "incidents"

#: the tests of a file that runs the Node.js kernel are skipped where Node.js is missing
needs_node = pytest.mark.skipif(not shutil.which("node"), reason="Node.js is not installed")


#: Variables of this environment the kernel under test is started without: it makes no TLS
#: connection, and Node.js reads and parses every certificate of the bundle
#: ``NODE_EXTRA_CA_CERTS`` names at each start (about two thirds of its start-up's CPU).
NOT_FOR_THE_KERNEL = ("NODE_EXTRA_CA_CERTS",)


def wgk(*args: str) -> subprocess.CompletedProcess:
    """``wgk ARGS`` run by the command's ``main`` in this process, its exit code and output as
    the finished command gives them (the kernel under test is its own process all the same:
    what these tests check is what it answers over the protocol, not wgk's own start); the
    kernels it starts inherit this process's environment without ``NOT_FOR_THE_KERNEL``."""
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as env:
        for name in NOT_FOR_THE_KERNEL:
            env.delenv(name, raising=False)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    return subprocess.CompletedProcess(["wgk", *args], code, out.getvalue(), err.getvalue())


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
