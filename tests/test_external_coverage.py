"""Coverage over the protocol: the stored witnesses are sent to the kernel under test, and
the cells recorded are those of what it was sent, not what wgk's own kernel was sent in
process. The sections that cannot cross a process boundary are listed with their reasons.
"""
from __future__ import annotations

import sys

from wgk.conformance.oracle import witnesses
from wgk.conformance.oracle.external_runs import Kernel, Translating, Unusable
from wgk.conformance.reports.gate import run_section
from wgk.conformance.reports.gate_budget import BUNDLED_TRACES
from wgk.conformance.reports.gate_coverage import measure
from wgk.conformance.reports.gate_external import IN_PROCESS
from wgk.conformance.traces.format import load_traces

SERVED = f"{sys.executable} -m wgk.impl.serve"


def _one_trace_doc() -> tuple[list, dict]:
    doc = witnesses.load()
    counts: dict[str, int] = {}
    for w in doc["witnesses"]:
        if not w["fork"]:
            counts[w["trace"]] = counts.get(w["trace"], 0) + 1
    tid = max(counts, key=counts.get)                  # the trace with most inline witnesses
    loaded = [t for t in load_traces([str(BUNDLED_TRACES)]) if t.id == tid]
    ws = [w for w in doc["witnesses"] if w["trace"] == tid and not w["fork"]]
    return loaded, dict(doc, witnesses=ws)


def test_witnesses_sent_over_the_protocol_cover_what_they_cover_in_process():
    loaded, doc = _one_trace_doc()
    kernel = Kernel(SERVED)
    kernel.probe()
    inside = measure(loaded, None, doc)
    over = measure(loaded, None, doc, make_impl=lambda t: Translating(kernel.system(t), lambda e: Unusable(f"t: {e}")))
    alone = measure(loaded, None, dict(doc, witnesses=[]))
    assert over["problems"] == [] and inside["problems"] == []
    assert over["covered"] == inside["covered"] > alone["covered"]


def test_sections_that_cannot_cross_a_process_boundary_are_listed_and_skipped():
    loaded = load_traces([str(BUNDLED_TRACES / "incidents" / "04-dead-worker-converges.json")])
    assert {"tamper", "contract", "batches", "impl-mutants", "verify-guards"} <= set(IN_PROCESS)
    s = run_section("tamper", "quick", loaded=loaded, external=Kernel(SERVED))
    assert s.skipped == f"not over the protocol: {IN_PROCESS['tamper']}"
    c = run_section("coverage", "quick", loaded=loaded, external=Kernel(SERVED))
    assert [ch.verdict for ch in c.checks] == ["skip"] and "default budget" in c.checks[0].detail


def test_the_report_lists_what_does_not_cross_the_process_boundary():
    from wgk.conformance.reports.gate_external import summary
    from wgk.conformance.reports.gate_report import GateResult
    loaded = load_traces([str(BUNDLED_TRACES / "incidents" / "04-dead-worker-converges.json")])
    kernel = Kernel(SERVED)
    kernel.probe()
    external = summary(kernel, loaded)
    assert external["in-process"] == IN_PROCESS
    text = GateResult("quick", [], 0.0, external=external).summary()
    line = next(ln for ln in text.splitlines() if "not over the protocol" in ln)
    assert all(name in line for name in IN_PROCESS)
    assert GateResult("quick", [], 0.0, external=external).to_json()["external"]["in-process"]
