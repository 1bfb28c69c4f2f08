"""The coverage's proofs of unreachable cells kept cell by cell in the gate's cache
(``gate_frames.unreachable_kept``): a change re-proves exactly the cells whose proof ran it.

The sources the keys are read from are a copy (``gate_cache.SOURCES`` points at it); each
test changes one function in the copy and restores it. The code that runs is the
checkout's, so a cell proved again gets the reason it got: what is checked is which cells
are proved again, and that a kept proof counts what it ran as run.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from wgk.conformance.oracle import witnesses
from wgk.conformance.reports import gate_cache, gate_frames, gate_mutants  # noqa: F401
from wgk.conformance.reports.gate_cache import GateCache, recording
from wgk.conformance.z3 import unreachable

from gate_sources import copied_sources, edit_function

UNFOUND = witnesses.load()["unfound"]


def _clear() -> None:
    gate_cache._functions.cache_clear()
    gate_cache._pieces.cache_clear()
    gate_cache.file_digest.cache_clear()


class Cells:
    """``unreachable_kept`` over copied sources with a cache, noting the kinds it proved."""

    def __init__(self, tmp: Path):
        self.cache = tmp / "cache"
        self.sources = copied_sources(tmp)

    def path(self, name: str) -> Path:
        return self.sources[name.split("/")[0]] / name.split("/", 1)[1]

    def run(self, monkeypatch, cells=UNFOUND):
        monkeypatch.setattr(gate_cache, "SOURCES", self.sources)
        _clear()
        proved: list[str] = []
        real = unreachable.prove_cell

        def noted(p, kind, code, tasks=unreachable.TASKS):
            proved.append(kind)
            return real(p, kind, code, tasks)
        monkeypatch.setattr(unreachable, "prove_cell", noted)
        cache = GateCache(self.cache, {"budget": "test"})
        with recording() as ran:
            got = gate_frames.unreachable_kept(cells, cache)
        return got, proved, ran, cache


@pytest.fixture(scope="module")
def cells(tmp_path_factory):
    return Cells(tmp_path_factory.mktemp("gate-unreachable"))


@pytest.fixture(scope="module")
def cold(cells):
    with pytest.MonkeyPatch.context() as mp:
        return cells.run(mp)


def _kinds() -> list[str]:
    return [unreachable.refusal(c)[0] for c in UNFOUND]


def test_every_cell_is_proved_kept_and_reused_with_the_reasons_of_prove_unreachable(
        cells, cold, monkeypatch):
    got, proved, _, cache = cold
    assert len(UNFOUND) > 3 and proved == _kinds()
    assert got == unreachable.prove_unreachable(UNFOUND) and len(got) == len(UNFOUND)
    again, proved2, ran, cache2 = cells.run(monkeypatch)
    assert again == got and proved2 == [] and cache2.warnings == []
    # a kept proof counts what it ran as run: each kind's rule, what the set-up ran
    assert {"commit_cleanup", "save_work"} <= ran["model/rules_save.py"]
    assert {"publish", "complete"} <= ran["model/rules_review.py"]
    assert "dispatch" in ran["model/rules_attempt.py"]       # a property runs it (set-up)
    assert "assign" not in ran["model/rules_attempt.py"]


def _edited(cells, monkeypatch, name: str, qual: str) -> list[str]:
    before = edit_function(cells.path(name), qual)
    try:
        proved = cells.run(monkeypatch)[1]
        assert cells.run(monkeypatch)[1] == []            # kept under the new text
    finally:
        cells.path(name).write_text(before)
        _clear()
    assert cells.run(monkeypatch)[1] == []                # restored: the first entries hold
    return proved


def test_a_changed_rule_reproves_the_cells_of_its_kind_only(cells, cold, monkeypatch):
    assert _edited(cells, monkeypatch, "model/rules_save.py", "commit_cleanup") == \
        ["commit-cleanup"]


def test_a_rule_no_proof_ran_reproves_nothing(cells, cold, monkeypatch):
    assert _edited(cells, monkeypatch, "model/rules_attempt.py", "assign") == []


def test_a_rule_a_property_runs_reproves_every_cell(cells, cold, monkeypatch):
    """The set-up evaluates the properties assumed; one runs the dispatch rule."""
    assert _edited(cells, monkeypatch, "model/rules_attempt.py", "dispatch") == _kinds()


def test_a_property_function_the_set_up_ran_reproves_every_cell(cells, cold, monkeypatch):
    ran = cold[2]
    [qual] = sorted(q for q in ran.get("model/invariants_state.py", ())
                    if "<" not in q)[:1]
    assert _edited(cells, monkeypatch, "model/invariants_state.py", qual) == _kinds()


def test_without_a_recording_every_cell_is_proved(cells, cold, monkeypatch):
    monkeypatch.setattr(gate_cache, "SOURCES", cells.sources)
    proved: list[str] = []
    real = unreachable.prove_unreachable
    monkeypatch.setattr(unreachable, "prove_unreachable",
                        lambda c: proved.append(1) or real(c))
    got = gate_frames.unreachable_kept(UNFOUND, GateCache(cells.cache, {"budget": "test"}))
    assert proved == [1] and got == cold[0]


def test_a_part_replaying_some_traces_witnesses_reads_those_traces_alone():
    """``bundled_as_loaded`` with ids: the traces of those ids, as every bundled trace read
    gives them (the part replaying one trace's witnesses needs no other)."""
    from wgk.conformance.reports.gate_coverage import bundled_as_loaded, witness_traces
    every = bundled_as_loaded([])
    ids = witness_traces()
    assert len(ids) > 5
    for some in ({ids[0]}, {ids[1], ids[-1]}, {"no-such-trace"}):
        got = bundled_as_loaded([], some)
        assert [(t.id, t.path) for t in got] == [(t.id, t.path) for t in every if t.id in some]
    # a trace the gate loaded (unchanged since) is given as loaded
    assert bundled_as_loaded(every, {ids[0]})[0].id == ids[0]
