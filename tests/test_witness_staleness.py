"""The coverage witnesses are stale by what they read of the model, not by its text: a rule
edited without changing any answer keeps them current; an edit that makes a witness miss its
cell or a new cell reachable is reported. Each edit is made to a copy of wgk's packages run
in a process of its own (the checkout is never edited)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from wgk.conformance.oracle import witnesses
from wgk.conformance.oracle.impl_system import ImplSystem
from wgk.conformance.oracle.systems import ModelSystem
from wgk.conformance.reports.gate_budget import bundled_traces
from wgk.conformance.traces.format import load_traces

ROOT = Path(__file__).resolve().parents[1]

#: Run in the copy: the witnesses' stale reason, and the problems of replaying those of
#: ``unpause`` against the implementation and against the model itself (a system that changes
#: with the model: only the check that each witness reaches its cells can fail there).
PROGRAM = r"""
import json, sys
from wgk.conformance.oracle import witnesses
from wgk.conformance.oracle.impl_system import ImplSystem
from wgk.conformance.oracle.systems import ModelSystem
from wgk.conformance.reports.gate_coverage import bundled_as_loaded
assert witnesses.__file__.startswith(sys.argv[1]), witnesses.__file__
doc = witnesses.load()
bundled = bundled_as_loaded([])
ws = [w for w in doc["witnesses"] if any(c.startswith("unpause/") for c in w["cells"])]
print(json.dumps({
    "text-changed": doc["model-digest"] != witnesses.model_digest(),
    "stale": witnesses.stale_reason(doc, bundled),
    "impl": witnesses.replay_witnesses(bundled, ws, ImplSystem)[1],
    "model": witnesses.replay_witnesses(bundled, ws, lambda t: ModelSystem(t))[1]}))
"""

RULES = "model/rules_pause.py"
NEUTRAL = ('    same = all_of(not_(t.paused), t.not_before == r.deadline)\n',
           '    _changed = 1\n    same = all_of(not_(t.paused), t.not_before == r.deadline)\n')
#: unpause of an unpaused task with its deadline unchanged now answered applied: the witness
#: of ``unpause/outcome/evidence-only`` misses it, and no cell changes reachability
MISS = ('    same = all_of(not_(t.paused), t.not_before == r.deadline)\n',
        '    same = all_of(t.paused, t.not_before == r.deadline)\n')
#: pause refused ``not-due`` when the task is paused: a cell no check of pause named before
NEW_CELL = ('(not_(t.abandoned), Code.TERMINAL_ALREADY)],\n        lambda: s.put(i, replace(t, paused=True)),',
            '(not_(t.abandoned), Code.TERMINAL_ALREADY), (not_(t.paused), Code.NOT_DUE)],\n'
            '        lambda: s.put(i, replace(t, paused=True)),')


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    top = tmp_path_factory.mktemp("src")
    for part in ("model", "impl", "conformance", "traces"):
        shutil.copytree(ROOT / part, top / "wgk" / part,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return top


def _run_edited(copy: Path, edit: tuple[str, str]) -> dict:
    path = copy / "wgk" / RULES
    before = path.read_text()
    assert before.count(edit[0]) == 1
    path.write_text(before.replace(edit[0], edit[1]))
    try:
        env = dict(os.environ, PYTHONPATH=str(copy))
        p = subprocess.run([sys.executable, "-c", PROGRAM, str(copy / "wgk")], env=env,
                           capture_output=True, text=True, timeout=900, cwd=copy)
        assert p.returncode == 0, p.stderr[-2000:]
        return json.loads(p.stdout.strip().splitlines()[-1])
    finally:
        path.write_text(before)


def test_a_rule_edited_without_changing_an_answer_keeps_the_witnesses_current(copy):
    got = _run_edited(copy, NEUTRAL)
    assert got["text-changed"]            # the model's text changed: decided by behaviour
    assert got["stale"] is None and got["impl"] == [] and got["model"] == []


def test_a_rule_edit_that_makes_a_witness_miss_its_cell_is_reported(copy):
    got = _run_edited(copy, MISS)
    assert got["stale"] is None           # the same cells reachable, the same proofs
    assert any("witness of unpause/outcome/evidence-only no longer reaches it on the model"
               in p and "wgk coverage --write" in p for p in got["model"]), got["model"]
    assert got["impl"]                    # the implementation answers as before: it differs


def test_a_rule_edit_that_makes_a_new_cell_reachable_makes_them_stale(copy):
    got = _run_edited(copy, NEW_CELL)
    assert got["stale"] == "the model's cells or their reachability changed"


def test_a_witness_claiming_a_cell_it_does_not_reach_fails_its_replay():
    loaded = load_traces([str(bundled_traces())])
    doc = witnesses.load()
    w = next(w for w in doc["witnesses"] if w["cells"] == ["unpause/outcome/evidence-only"])
    assert witnesses.replay_witnesses(loaded, [w], ImplSystem)[1] == []
    claimed = dict(w, cells=["unpause/outcome/applied"])
    for make in (ImplSystem, lambda t: ModelSystem(t)):
        problems = witnesses.replay_witnesses(loaded, [claimed], make)[1]
        assert len(problems) == 1 and "witness of unpause/outcome/applied no longer reaches it" \
            in problems[0]


def test_a_witness_set_is_stale_when_its_proofs_or_cells_differ_from_the_model_now():
    doc = dict(witnesses.load(), **{"model-digest": "0" * 64})   # the text changed
    assert witnesses.stale_reason(doc) is None
    assert witnesses.stale_reason(dict(doc, cells="0" * 64)) == \
        "the model's cells or their reachability changed"
    fewer = dict(doc, unreached=dict(list(doc["unreached"].items())[1:]))
    assert witnesses.stale_reason(fewer) == "the proofs of the unreachable cells changed"
    assert witnesses.stale_reason(dict(witnesses.load(), cells="0" * 64)) is None  # text same
