"""The traceability matrix: complete for every invariant, and the document's copy identical."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from wgk.conformance.cli import cmd_trace_matrix

from wgk.conformance.reports import tracematrix
from wgk.conformance.reports.trace_support import passed_cuts, supported
from wgk.conformance.cli.main import main
from wgk.conformance.oracle.crashcuts import crash_cuts, durable_boundaries
from wgk.conformance.traces.format import load_trace
from wgk.model.invariants import always, assumptions

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def matrix() -> tracematrix.Matrix:
    return tracematrix.build(tasks=3)


def test_every_invariant_has_a_row_and_every_column(matrix):
    assert [r.invariant for r in matrix.rows] == [p.id for p in always() + assumptions("state")]
    assert matrix.problems() == []
    for r in matrix.rows:
        assert r.frames and r.proved == r.frames, r.invariant
        assert r.traces and r.crash_cuts > 0 and r.guards, r.invariant


def test_a_listed_trace_reaches_the_invariants_antecedent(matrix):
    from wgk.model.invariants import REGISTRY
    listing: dict[str, list[str]] = {}
    for r in matrix.rows:
        assert r.supporting >= len(r.traces) > 0, r.invariant
        for rel in r.traces:
            listing.setdefault(rel, []).append(r.invariant)
    for rel, invariants in listing.items():     # one replay a trace, each property judged alone
        found = supported(load_trace(ROOT / rel), [REGISTRY[i] for i in invariants])
        for invariant in invariants:
            assert invariant in found, (invariant, rel)


def test_an_incident_tag_alone_links_no_trace(tmp_path):
    """A trace tagged with an invariant's incident that never reaches its antecedent does
    not support it; one that does, whatever its tag, does."""
    from wgk.model.invariants import REGISTRY
    legacy = REGISTRY["legacy-never-satisfies"]
    stale = json.loads((ROOT / "traces/incidents/10-stale-capability-rejected.json").read_text())
    stale["source"]["incident"] = 15                     # tagged as the legacy incident
    (tmp_path / "tagged.json").write_text(json.dumps(stale))
    assert supported(load_trace(tmp_path / "tagged.json"), [legacy]) == set()
    quarantined = load_trace(ROOT / "traces/incidents/15-legacy-done-quarantined.json")
    assert supported(quarantined, [legacy]) == {"legacy-never-satisfies"}
    rows = {legacy.id: tracematrix.Row(legacy.id, legacy.scope, legacy.doc, legacy.incidents,
                                       "f", "model/x.py:1")}
    tracematrix.trace_column(rows, [tmp_path / "tagged.json"])
    assert rows[legacy.id].traces == [] and "traces" in rows[legacy.id].missing()


def test_guards_point_at_code_in_the_implementation(matrix):
    for r in matrix.rows:
        for g in r.guards:
            lines = (ROOT / g.path).read_text().splitlines()
            assert g.path.startswith("impl/")
            assert r.invariant in lines[g.line - 2] and "# guards:" in lines[g.line - 2]
            assert lines[g.line - 1].strip() and not lines[g.line - 1].lstrip().startswith("#")


def test_the_document_carries_the_generated_table(matrix):
    block = tracematrix.document_block()
    assert block is not None, f"{tracematrix.DOCUMENT} lacks the trace-matrix markers"
    assert block == tracematrix.markdown(matrix), \
        "the matrix in the design document is stale: run wgk trace-matrix --write-docs"


def test_the_crash_column_counts_passed_cuts_not_boundaries():
    from wgk.conformance.reports.gate_report import Check
    checks = [Check("crash-cuts", "t1 step 1 commit after (in-process)", "pass", 0, group="t1"),
              Check("crash-cuts", "t1 step 2 commit after (in-process)", "fail", 0, group="t1"),
              Check("crash-cuts", "t1 step 2 commit after (kill)", "pass", 0, group="t1"),
              Check("crash-cuts", "t2 step 1 commit before (in-process)", "fail", 0, group="t2")]
    assert passed_cuts(checks) == {"t1": 1, "t2": 0}
    rel = "traces/incidents/16-two-dispatchers-one-attempt.json"
    trace = load_trace(ROOT / rel)
    rows = {"x": tracematrix.Row("x", "state", "", (), "f", "model/x.py:1", traces=[rel])}
    tracematrix.crash_column(rows, {rel: ROOT / rel}, lambda _: None, passed={trace.id: 0})
    assert rows["x"].crash_cuts == 0 and "crash test" in rows["x"].missing()
    tracematrix.crash_column(rows, {rel: ROOT / rel}, lambda _: None)      # run here
    assert rows["x"].crash_cuts == len(durable_boundaries(trace)) > 0


def test_a_missing_column_is_a_problem(matrix):
    row = dataclasses.replace(matrix.rows[0], traces=[], crash_cuts=0, guards=[],
                              proof_failures=["counterexample after submit-result"])
    broken = tracematrix.Matrix([row], matrix.tasks, [])
    assert not broken.ok
    assert set(row.missing()) == {"traces", "crash test", "runtime guard", "z3 proof"}
    assert any("counterexample after submit-result" in p for p in broken.problems())
    elsewhere = dataclasses.replace(matrix.rows[0], predicate_at="conformance/z3/lemmas.py:12")
    assert elsewhere.missing() == ["model rule"]


def test_guard_markers_are_parsed_and_bad_ones_reported(tmp_path):
    (tmp_path / "k.py").write_text(
        "class Kernel:\n"
        "    def commit(self, t):\n"
        "        # guards: cas-base-exact, promotion-at-most-once\n"
        "        if t.moved:\n"
        "            return 'needs-repair'\n"
        "        # guards: no-such-invariant\n"
        "        t.land()\n"
        "        # guards: first-terminal-wins\n"
        "\n"
        "        return t\n"
        "# guards:\n"
        "X = 1\n")
    rows = {p.id: tracematrix.Row(p.id, p.scope, p.doc, p.incidents, "f", "model/x.py:1")
            for p in always()}
    problems = tracematrix.guard_column(rows, tmp_path)
    g = rows["cas-base-exact"].guards
    assert [(x.line, x.function) for x in g] == [(4, "Kernel.commit")]
    assert rows["promotion-at-most-once"].guards == g
    assert not rows["first-terminal-wins"].guards
    assert any("'no-such-invariant'" in p and "k.py:6" in p for p in problems)
    assert any("k.py:8" in p and "directly above a statement" in p for p in problems)
    assert any("k.py:11" in p and "names no invariant" in p for p in problems)


def test_cli_check_json_and_stale_document(matrix, monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(cmd_trace_matrix, "build", lambda **_: matrix)
    assert main(["trace-matrix", "--check", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and out["document_current"] and len(out["rows"]) == len(always() + assumptions("state"))
    doc = tmp_path / "design.md"
    doc.write_text(f"intro\n{tracematrix.BEGIN}\n| old |\n{tracematrix.END}\nafter\n")
    monkeypatch.setattr(cmd_trace_matrix, "document_block",
                        lambda: tracematrix.document_block(doc))
    assert main(["trace-matrix", "--check"]) == 1
    assert "--write-docs" in capsys.readouterr().out
    tracematrix.write_document(matrix, doc)
    assert doc.read_text().startswith("intro\n") and doc.read_text().endswith("after\n")
    assert tracematrix.document_block(doc) == tracematrix.markdown(matrix)


def test_cli_bad_usage_exits_2(capsys):
    assert main(["trace-matrix", "--tasks", "9"]) == 2
    assert "--tasks" in capsys.readouterr().err


def test_the_gate_has_a_trace_matrix_section_that_can_fail(matrix, monkeypatch):
    from wgk.conformance.reports import gate
    assert "trace-matrix" in gate.BUDGETS["default"] and "trace-matrix" in gate.BUDGETS["deep"]
    monkeypatch.setattr(tracematrix, "build", lambda **_: matrix)
    checks = gate.trace_matrix_checks("default", None)
    assert [c.name for c in checks] == ([r.invariant for r in matrix.rows]
                                        + [f"obligation {n}" for n in range(1, 11)]
                                        + ["design document current"])
    assert {c.verdict for c in checks} == {"pass"}
    row = dataclasses.replace(matrix.rows[0], guards=[])
    broken = tracematrix.Matrix([row] + matrix.rows[1:], matrix.tasks, ["impl/x.py:3: bad marker"])
    monkeypatch.setattr(tracematrix, "build", lambda **_: broken)
    failed = [c for c in gate.trace_matrix_checks("default", None) if c.verdict == "fail"]
    assert [c.name for c in failed] == [row.invariant, "guard markers", "design document current"]
    assert "no runtime guard" in failed[0].detail


def test_the_gate_gives_the_matrix_the_frames_its_prove_section_proved():
    """The trace matrix takes the prove section's frames instead of proving them again: the
    rows come out the same as from its own proof, and frames that miss a row are not used."""
    from wgk.conformance.reports.gate_model import earlier_results, frame_checks
    from wgk.conformance.reports.gate_report import Section
    from wgk.conformance.z3.prove import prove
    from wgk.model.actions import Instance

    chosen = ("single-live-owner", "first-terminal-wins", "attempt-fencing")

    def rows():
        return {p.id: tracematrix.Row(p.id, p.scope, p.doc, p.incidents, "f", "x:1")
                for p in always() + assumptions("state") if p.id in chosen}
    checks = frame_checks(prove(Instance.proof(tasks=1), only=list(chosen)), 1)
    n = next(n for n, c in enumerate(checks) if c.group in rows() and c.data["solved"])
    checks[n] = dataclasses.replace(checks[n], verdict="fail", data=dict(
        checks[n].data, status="counterexample"))        # a frame the prove section failed
    earlier = earlier_results([Section("prove", checks, 0.0)])
    assert earlier.tasks == 1 and len(earlier.frames) == len(checks)
    own, given = rows(), rows()
    tracematrix.proof_column(own, 1, lambda _: None)
    tracematrix.proof_column(given, 1, lambda _: None, earlier.frames)
    first = checks[n].group
    assert given[first].proof_failures == [f"counterexample after {checks[n].data['transition']}"]
    given[first].proof_failures, given[first].proved = [], given[first].proved + 1
    assert given == own
    partial = rows()
    tracematrix.proof_column(partial, 1, lambda _: None,
                             [f for f in earlier.frames if f[0] != first])
    assert partial == own                                 # proved here again


def test_the_gate_gives_the_matrix_the_cutoff_claims_it_proved():
    rows = {i: tracematrix.Row(i, "state", "", (), "f", "x:1") for i in ("a", "b", "c")}
    claims = {"a": {"graphs": "every graph", "evidence_ids": "any number", "reasons": []},
              "b": {"graphs": "not generalised", "evidence_ids": "up to 2",
                    "reasons": ["reads another task"]}}
    tracematrix.proof_kind_column(rows, lambda _: None, claims)
    assert [r.proof_kind for r in rows.values()] == [
        "for every graph (cutoff theorem), evidence ids any number",
        "bounded: reads another task", "bounded: not in the report"]


def test_every_retained_obligation_of_wg_is_traced(matrix):
    """WG's ten retained obligations each name invariants whose rows are complete."""
    assert [o.number for o in matrix.obligations] == list(range(1, 11))
    for o in matrix.obligations:
        assert o.invariants and o.missing() == [], o.number
        assert len(o.rows) == len(o.invariants), o.number
        assert all(r.traces and r.crash_cuts and r.guards for r in o.rows), o.number
    assert "obligation 9" in tracematrix.text(matrix)
    assert "| 9. review and publication" in tracematrix.markdown(matrix)


def test_an_obligation_is_missing_when_its_invariant_is_unknown_or_incomplete():
    full = tracematrix.Row("first-terminal-wins", "step", "d", (), "f", "model/x.py:1",
                           frames=1, proved=1, traces=["t.json"], crash_cuts=2,
                           guards=[tracematrix.Guard("impl/x.py", 1, "f", ("first-terminal-wins",))])
    bare = tracematrix.Row("idempotent-replay", "step", "d", (), "f", "model/x.py:1",
                           frames=1, proved=1, traces=["t.json"], crash_cuts=0, guards=[])
    rows = {full.invariant: full, bare.invariant: bare}
    ok, unknown, incomplete, empty = tracematrix.obligations(rows, [
        (4, "first terminal intent wins", ("first-terminal-wins",)),
        (7, "one stable reconciliation effect", ("no-such-invariant",)),
        (2, "same key same response", ("idempotent-replay",)),
        (10, "nothing", ())])
    assert ok.missing() == []
    assert unknown.missing() == ["no-such-invariant: no such invariant"]
    assert incomplete.missing() == ["idempotent-replay: no crash test",
                                    "idempotent-replay: no runtime guard"]
    assert empty.missing() == ["no invariant"]
    m = tracematrix.Matrix([full], 3, [], [ok, unknown])
    assert not m.ok and m.problems() == ["obligation 7: no-such-invariant: no such invariant"]
    assert tracematrix.Matrix([full], 3, [], [ok]).ok


def test_the_gates_trace_matrix_section_fails_an_obligation_naming_no_known_invariant(monkeypatch):
    from wgk.conformance.reports import gate
    full = tracematrix.Row("first-terminal-wins", "step", "d", (), "f", "model/x.py:1",
                           frames=1, proved=1, traces=["t.json"], crash_cuts=2,
                           guards=[tracematrix.Guard("impl/x.py", 1, "f", ("first-terminal-wins",))])
    rows = {full.invariant: full}
    m = tracematrix.Matrix([full], 3, [], tracematrix.obligations(rows, [
        (4, "first terminal intent wins", ("first-terminal-wins",)),
        (7, "one stable reconciliation effect", ("no-such-invariant",))]))
    monkeypatch.setattr(tracematrix, "build", lambda **_: m)
    monkeypatch.setattr(tracematrix, "document_block", lambda: None)
    checks = {c.name: c for c in gate.trace_matrix_checks("default", None)}
    assert checks["obligation 4"].verdict == "pass"
    assert checks["obligation 7"].verdict == "fail"
    assert checks["obligation 7"].detail.startswith("no-such-invariant: no such invariant")
