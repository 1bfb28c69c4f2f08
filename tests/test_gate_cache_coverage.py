"""wgk gate --cache: the coverage keyed by what it read, not by every source file.

Its parts (the witnesses replayed against the implementation, one part per trace they start
from; whether they are stale, a part of its own; the counting after the other sections, with
the cells they sent and the replays' outcome as inputs) are recorded, and keyed beside the
sources by what they read as files (``gate_cache.coverage_reads``: the bundled traces, and,
for the part finding whether the witnesses are stale alone, whether the model's text is the
one they were searched on). Each test changes one thing a key covers and shows that exactly
the parts that read it run again; each fails when the key leaves that thing out.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from wgk.conformance.oracle import coverage
from wgk.conformance.reports import gate, gate_cache
from wgk.conformance.reports.gate_cache import GateCache

from gate_sources import cold_then_plain, copied_sources, edit_function, plain_report

ROOT = Path(__file__).resolve().parent.parent
INCIDENTS = ROOT / "traces" / "incidents"
NAMES = ["10-stale-capability-rejected.json", "16-two-dispatchers-one-attempt.json"]
BUDGET = {"coverage": True}
WITNESSES, STALE, COUNTING = "witness replays", "stale", "counting"


def kind(part: str) -> str:
    """A part's kind: a trace's replays (``WITNESSES`` and the trace's id), the currency, the
    counting."""
    return part.split(" (", 1)[0]


class Runs:
    """The gate's coverage alone over copied sources and bundled traces, with a cache, noting
    which of its parts ran and what each recorded running."""

    def __init__(self, tmp: Path):
        self.tmp, self.cache = tmp, tmp / "cache"
        self.sources = copied_sources(tmp)
        self.bundled = tmp / "bundled"
        shutil.copytree(gate_cache._schema_dir().parent, self.bundled,
                        ignore=shutil.ignore_patterns("__pycache__"))
        (tmp / "traces").mkdir()
        self.traces = [tmp / "traces" / n for n in NAMES]
        for n in NAMES:
            shutil.copy(INCIDENTS / n, tmp / "traces" / n)
        self.ran: list[str] = []
        self.proved: list[str] = []
        self.recorded: dict[str, dict[str, set[str]]] = {}

    def gate(self, monkeypatch, cache: bool = True):
        monkeypatch.setitem(gate.BUDGETS, "quick", dict(BUDGET))
        monkeypatch.setattr(gate_cache, "SOURCES", self.sources)
        monkeypatch.setattr(gate_cache, "_schema_dir", lambda: self.bundled / "schema")
        gate_cache._functions.cache_clear()
        gate_cache._pieces.cache_clear()
        gate_cache.file_digest.cache_clear()
        store = GateCache.store

        def noted(cache_self, key, checks, ran, via=None, outputs=None):
            if checks[0].name.startswith("unreachable "):   # a cell's proof, kept by the part
                self.proved.append(checks[0].name)             # finding whether they are stale
                return store(cache_self, key, checks, ran, via, outputs)
            data = checks[0].data
            part = COUNTING if checks[0].name != WITNESSES else STALE if "stale-reason" in data \
                else f"{WITNESSES} ({data['trace']})"
            self.ran.append(part)
            self.recorded[part] = {k: set(v) for k, v in (ran or {}).items()}
            return store(cache_self, key, checks, ran, via, outputs)
        monkeypatch.setattr(GateCache, "store", noted)
        self.ran, self.proved = [], []
        return gate.run_gate("quick", traces=[str(t) for t in self.traces], workers=1,
                             cache=str(self.cache) if cache else None)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return Runs(tmp_path_factory.mktemp("gate-cache-coverage"))


@pytest.fixture(scope="module")
def cold(runs):
    coverage.cells()              # computed before the gate: the part must compute it again
    return cold_then_plain(runs, lambda: (setattr(runs, "cold_proved", list(runs.proved)),
                                          list(runs.ran))[1])


def test_both_parts_are_kept_and_reused_and_the_report_is_the_plain_one(runs, cold,
                                                                        monkeypatch):
    from wgk.conformance.reports.gate_coverage import witness_traces
    first, ran, plain = cold
    assert sorted(ran) == sorted([COUNTING, STALE] + [f"{WITNESSES} ({t})" for t in witness_traces()])
    assert plain_report(first.to_json()) == plain_report(plain.to_json())
    # the model's text the witnesses': each unreachable cell's proof kept all the same, for a
    # run after a rule changed to find it (``gate_frames.unreachable_kept``)
    from wgk.conformance.oracle import witnesses
    assert sorted(runs.cold_proved) == sorted(f"unreachable {c}"
                                              for c in witnesses.load()["unfound"])
    again = runs.gate(monkeypatch)
    assert runs.ran == runs.proved == [] and again.cache["reused"] == again.cache["checks"] > 0
    assert again.cache["sections"] == {"coverage": again.cache["checks"]}
    assert plain_report(again.to_json()) == plain_report(first.to_json())


def _one_ran_by(runs: Runs, part: str, prefix: str, not_by: str | None) -> tuple[str, str]:
    """A function under ``prefix`` that ``part`` ran (and ``not_by`` did not), none that runs
    when the modules are imported (every part's key holds those: ``import_time_functions``)."""
    other = runs.recorded.get(not_by, {}) if not_by else {}
    imports = json.loads((runs.cache / "imports.json").read_text())["imports"]
    recorded: dict[str, set[str]] = {}
    for one, functions in runs.recorded.items():
        if kind(one) == part:
            for name, quals in functions.items():
                recorded.setdefault(name, set()).update(quals)
    found = sorted((name, q) for name, quals in recorded.items()
                   if name.startswith(prefix) for q in quals
                   if "<" not in q and q not in other.get(name, set())
                   and q not in imports.get(name, ()))
    assert found, f"no function under {prefix} ran by the {part} only"
    return found[0]


def test_an_implementation_function_the_replays_ran_reruns_them_and_not_the_counting(
        runs, cold, monkeypatch):
    """The counting ran nothing of the implementation (its cells come from the other
    sections' checks and the replays' outcome): it is reused when only the implementation
    changed and the replays' outcome is the same."""
    first, _, _ = cold
    assert not any(n.startswith("impl/") for n in runs.recorded[COUNTING])
    name, qual = _one_ran_by(runs, WITNESSES, "impl/", None)
    path = runs.sources["impl"] / name.split("/", 1)[1]
    before = edit_function(path, qual)
    try:
        result = runs.gate(monkeypatch)
        assert runs.ran == [p for p in sorted(runs.recorded) if kind(p) == WITNESSES
                            and qual in runs.recorded[p].get(name, ())] != []
        assert result.cache["reused"] == result.cache["checks"]
        assert plain_report(result.to_json()) == plain_report(first.to_json())
    finally:
        path.write_text(before)


def test_a_function_computing_the_cells_reruns_the_counting_even_when_computed_before(
        runs, cold, monkeypatch):
    """``coverage.cells`` is memoized in the process and was computed before the cold gate:
    the counting's part forgets it first (``gate_cache.forget``), so the functions computing
    the cells are among those it recorded, and a change to one runs it again."""
    assert "cells" in runs.recorded[COUNTING].get("conformance/oracle/coverage.py", set())
    path = runs.sources["conformance"] / "oracle" / "coverage.py"
    before = edit_function(path, "cells")
    try:
        runs.gate(monkeypatch)
        assert COUNTING in runs.ran
    finally:
        path.write_text(before)


def test_the_model_text_against_the_witnesses_reruns_the_part_that_reads_it(runs, cold,
                                                                            monkeypatch):
    """Whether the witnesses are stale reads of the model's text only whether it is the one
    they were searched on (``witnesses.model_digest``), and the replays' part finds it: a
    model function neither part ran, changed, turns that answer and runs the replays' part
    again; the counting, given the same outcome (the witnesses current by their cells and
    proofs), is reused; a second such function changed leaves the answer as it was, and
    nothing runs."""
    from wgk.conformance.oracle import witnesses
    assert witnesses.load()["model-digest"] == witnesses.model_digest(runs.sources["model"])
    ran_any = set().union(*(r.get("model/actions.py", set()) for r in runs.recorded.values()))
    path = runs.sources["model"] / "actions.py"
    quals = sorted(q for q, _, _ in gate_cache._functions(path)[1]
                   if q not in ran_any and "<" not in q)
    before = edit_function(path, quals[0])
    try:
        result = runs.gate(monkeypatch)
        assert runs.ran == [STALE]                   # the replays read nothing of the text
        assert result.cache["reused"] == result.cache["checks"]
        edit_function(path, quals[1])
        runs.gate(monkeypatch)
        assert runs.ran == []
    finally:
        path.write_text(before)


def test_a_bundled_trace_reruns_both_parts(runs, cold, monkeypatch):
    """The witnesses start from the bundled traces' states, read as files (not through the
    loaded traces): a bundled trace changed runs both parts again."""
    path = sorted((runs.bundled / "incidents").glob("*.json"))[0]
    before = path.read_text()
    path.write_text(before.replace("{", "{ ", 1))
    try:
        runs.gate(monkeypatch)
        assert sorted(runs.ran) == sorted(runs.recorded)
    finally:
        path.write_text(before)


def _ran(runs: Runs, name: str, qual: str) -> list[str]:
    """The parts that recorded running ``qual`` of file ``name``, in the parts' order."""
    return [p for p in runs.recorded if qual in runs.recorded[p].get(name, ())]


def test_a_rule_the_replays_of_some_traces_ran_reruns_those_and_the_counting(
        runs, cold, monkeypatch):
    """A statement added to ``assign``: of the replays, exactly the parts whose witnesses ran
    the rule run again, the others are reused (they read nothing of the model's text); the
    counting runs again, its cells reading every rule; the report is the cold one's. (The
    part finding whether the witnesses are stale may be reused here: the code that runs is the
    checkout's, whose text is the witnesses', and a test before kept it under the same answer
    with what it ran; in a gate whose code is its sources it runs the cells and the proofs.)"""
    first, _, _ = cold
    name = "model/rules_attempt.py"
    replays = [p for p in runs.recorded if kind(p) == WITNESSES]
    ran_it = [p for p in _ran(runs, name, "assign") if kind(p) == WITNESSES]
    assert 0 < len(ran_it) < len(replays)
    assert COUNTING in _ran(runs, name, "assign")
    path = runs.sources["model"] / "rules_attempt.py"
    before = edit_function(path, "assign")
    try:
        result = runs.gate(monkeypatch)
        assert sorted(p for p in runs.ran if p != STALE) == sorted(ran_it + [COUNTING])
        assert plain_report(result.to_json()) == plain_report(first.to_json())
    finally:
        path.write_text(before)
