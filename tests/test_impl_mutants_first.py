"""Through the protocol, a mutant first meets the check that killed it in process (the
catalogue records which), on the one trace that check names; only when that does not kill it
does the rest of the gate run. A planted survivor is still reported as one."""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from wgk.conformance.oracle.impl_mutants import IDENTITY
from wgk.conformance.oracle.impl_mutants_catalogue import IMPL_MUTANTS, MUTANTS_BY_NAME
from wgk.conformance.oracle.impl_mutants_kills import KILLED_IN_PROCESS
from wgk.conformance.reports.impl_mutant_child import named_trace
from wgk.conformance.reports.impl_mutants import CatalogueRun, first_pass, run_mutant
from wgk.conformance.traces.format import load_traces

ROOT = Path(__file__).resolve().parents[1]
INCIDENTS = ROOT / "traces" / "incidents"
STALE = str(INCIDENTS / "10-stale-capability-rejected.json")
HELD_ONCE = str(INCIDENTS / "07b-repeated-message-held-once.json")
SERVED = {"command": f"{sys.executable} -m wgk.impl.serve", "timeout": 60.0}
SECTIONS = ["replay", "probes"]


def test_every_mutant_the_sections_kill_in_process_records_the_section_and_check():
    from wgk.conformance.reports.gate import SECTIONS as GATE, TRACE_SECTIONS, bundled_traces
    loaded = load_traces([str(bundled_traces())])
    sections = set(dict(GATE)) | {"tests"}
    for m in IMPL_MUTANTS:
        if m.name in ("planner-first-of-several", "effect-without-review"):
            assert not m.killed_in_process and m.survives, m.name     # explained survivors
            continue
        assert m.killed_in_process == KILLED_IN_PROCESS[m.name], m.name
        section, check = m.killed_in_process
        assert section in sections and check, m.name
        if section in ("replay", "probes"):     # a trace, or the whole section (it stopped)
            assert named_trace(check, loaded) is not None or check == section, (m.name, check)
        if section not in TRACE_SECTIONS:
            assert named_trace(check, loaded) is None, (m.name, check)


def test_in_process_or_for_a_section_that_does_not_cross_the_protocol_there_is_no_first_pass():
    m = MUTANTS_BY_NAME["evidence-replaced"]
    assert first_pass(m, SECTIONS, None) is None
    assert first_pass(m, SECTIONS, SERVED) == {"section": "replay",
                                               "check": "incident-07b-repeated-message-held-once"}
    assert first_pass(m, ["probes"], SERVED) is None, "its section is not run"
    assert first_pass(MUTANTS_BY_NAME["land-without-cas"], ["replay", "contract"], SERVED) is None


def test_a_mutant_is_killed_over_the_protocol_by_the_one_trace_that_killed_it_in_process():
    m = MUTANTS_BY_NAME["evidence-replaced"]
    r = run_mutant(m, "quick", SECTIONS, traces=[STALE, HELD_ONCE], timeout=300, external=SERVED)
    assert r.verdict == "killed" and r.through_protocol, r.to_json()
    assert r.section == "replay" and r.check == "incident-07b-repeated-message-held-once"
    assert r.first == {"section": "replay", "check": r.check, "trace": r.check, "killed": True}
    assert [(s["name"], s["checks"], s.get("first")) for s in r.sections] == [("replay", 1, True)]
    assert r.to_json()["first-pass"]["killed"] is True


def test_when_the_first_pass_misses_the_rest_of_the_gate_runs_and_says_which_section_killed():
    m = replace(MUTANTS_BY_NAME["evidence-replaced"],
                killed_in_process=("replay", "incident-10-stale-capability-rejected"))
    r = run_mutant(m, "quick", SECTIONS, traces=[STALE, HELD_ONCE], timeout=300, external=SERVED)
    assert r.first["killed"] is False and r.first["trace"] == "incident-10-stale-capability-rejected"
    assert r.verdict == "killed" and r.section == "replay", r.to_json()
    assert r.check == "incident-07b-repeated-message-held-once"
    assert [s["name"] for s in r.sections] == ["replay", "replay"]


def test_a_planted_survivor_whose_first_pass_passes_is_reported_as_a_survivor_and_a_surprise():
    planted = replace(IDENTITY, name="planted-survivor", survives="",
                      killed_in_process=("replay", "incident-10-stale-capability-rejected"))
    r = run_mutant(planted, "quick", SECTIONS, traces=[STALE], timeout=300, external=SERVED)
    assert r.verdict == "survived", r.to_json()
    assert r.first["killed"] is False
    assert [s["name"] for s in r.sections] == ["replay", "replay", "probes"]
    run = CatalogueRun("quick", None, [r], r.seconds, external=True)
    assert run.surprises() == [r] and run.killed == 0


def test_the_report_through_the_protocol_counts_the_kills_by_section_and_by_the_first_pass():
    from wgk.conformance.cli.impl_mutants_view import summary
    from wgk.conformance.reports.impl_mutants import MutantRun
    a, b, c = (MUTANTS_BY_NAME[n] for n in ("token-not-checked", "begin-deferred",
                                            "deliver-role-unchecked"))
    runs = [MutantRun(a, "killed", 1.0, "replay", "t", "d", external=True,
                      first={"section": "replay", "check": "t", "trace": "t", "killed": True}),
            MutantRun(b, "killed", 1.0, "races", "run", "d", external=True,
                      first={"section": "races", "check": "r", "trace": None, "killed": True}),
            MutantRun(c, "killed", 1.0, "replay", "u", "d", external=True,
                      first={"section": "coverage", "check": "w", "trace": None, "killed": False})]
    both = CatalogueRun("quick", None, runs, 3.0, external=True).to_json()["external"]
    assert both["by-section"] == {"replay": 2, "races": 1} and both["first-pass"] == 2
    assert runs[2].to_json()["first-pass"]["killed"] is False
    text = summary(CatalogueRun("quick", None, runs, 3.0, external=True))
    assert "3 killed over it (replay 2, races 1; 2 by the check that killed it in process)" in text
