"""The wgk-trace/1 format: the schema validates every file under traces/, bad files fail in one line."""
from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pytest

from wgk.conformance.oracle.systems import CONVERGE, REVOKE

from wgk.conformance.cli.main import main
from wgk.conformance.traces import format as format_mod
from wgk.conformance.traces.format import (
    Trace, TraceError, dump_trace, load_trace, load_traces, parse_trace, schema, schema_errors, trace_files,
    write_trace,
)
from wgk.model.env import EnvKind
from wgk.model.vocab import Action, Actor, AttemptState, Code, Kind, Phase, Status, Way

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "traces"
ALL = trace_files([TRACES])


def test_there_are_traces_to_check():
    assert len(ALL) >= 56
    assert not [p for p in ALL if p.name.endswith((".schema.json", ".itf.json"))]


@pytest.mark.parametrize("path", ALL, ids=lambda p: str(p.relative_to(TRACES)))
def test_schema_validates_every_trace_file(path):
    doc = json.loads(path.read_text())
    assert schema_errors(doc) == []
    load_trace(path)                       # schema and semantic checks


@pytest.mark.parametrize("path", ALL, ids=lambda p: str(p.relative_to(TRACES)))
def test_every_trace_file_is_in_canonical_form(path):
    assert dump_trace(load_trace(path)) == path.read_text()


def test_schema_enums_are_the_vocabulary():
    d = schema()["$defs"]
    req = d["request"]["properties"]
    assert req["kind"]["enum"] == Kind.labels()
    assert req["actor"]["enum"] == Actor.labels()
    assert d["decision"]["properties"]["code"]["enum"] == [c for c in Code.labels() if c != "none"]
    # the model's environment steps, the daemon's convergence (run as requests) and the
    # operator's revocation of a principal
    assert d["env-step"]["properties"]["env"]["enum"] == EnvKind.labels() + [CONVERGE, REVOKE]
    tf = d["task-facts"]["properties"]
    assert tf["status"]["enum"] == Status.labels()
    assert tf["phase"]["enum"] == Phase.labels()
    assert tf["attempt-state"]["enum"] == AttemptState.labels()
    plan = tf["plan"]["oneOf"][1]["properties"]
    assert plan["way"]["enum"] == Way.labels() and plan["action"]["enum"] == Action.labels()


def test_the_implementation_speaks_the_models_codes_and_evidence_kinds():
    import ast
    from wgk.impl.contract.vocabulary import CODES, EVIDENCE_LABELS
    assert list(CODES) == [c for c in Code.labels() if c != "none"]
    noted = {n.args[1].value for p in (ROOT / "model").glob("rules_*.py")
             for n in ast.walk(ast.parse(p.read_text()))
             if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "note_evidence"}
    # besides, the archive's and the chat's receipts: model fields projected as evidence pairs
    from wgk.model.observe import ARCHIVE_RECEIPTS, CHAT_RECEIPTS
    assert noted | {"continuation"} | set(ARCHIVE_RECEIPTS) | set(CHAT_RECEIPTS) == \
        set(EVIDENCE_LABELS)
    # evidence is recorded under the kind of the request that reported it
    assert set(EVIDENCE_LABELS) - {"continuation"} <= set(Kind.labels())


def _minimal() -> dict:
    return {
        "format": "wgk-trace/1", "id": "t", "title": "t",
        "source": {"kind": "counterexample", "provenance": "test"}, "description": "",
        "graph": {"id": "g", "target": "main-0", "tasks": [{"name": "a"}]},
        "steps": [{"request": {"kind": "assign", "actor": "daemon", "task": "a", "key": "k1"},
                   "expect": {"decision": "applied"}}],
    }


def _error(doc: dict) -> str:
    with pytest.raises(TraceError) as e:
        parse_trace(json.dumps(doc), "x.json")
    return str(e.value)


def test_errors_name_the_json_pointer():
    doc = _minimal()
    doc["steps"][0]["request"]["kind"] = "submitt"
    msg = _error(doc)
    assert msg.startswith("x.json: /steps/0/request/kind: 'submitt' is not one of [")
    assert "\n" not in msg
    doc = _minimal()
    doc["steps"].append({"env": "edit", "task": "a"})
    assert _error(doc).startswith("x.json: /steps/1: 'content' is a required property")
    doc = _minimal()
    doc["steps"][0]["request"]["kind"] = "submit"
    assert "/steps/0/request: 'expected-phase' is a required property" in _error(doc)
    doc = _minimal()
    doc["expect"] = {"tasks": {"a": {"stauts": "done"}}}
    assert _error(doc).startswith("x.json: /expect/tasks/a: Additional properties")
    doc = _minimal()
    doc["expect"] = {"tasks": {"zz": {"status": "done"}}}
    assert _error(doc) == "x.json: /expect/tasks/zz: unknown task 'zz'"
    doc = _minimal()
    doc["graph"]["tasks"] = [{"name": "a", "deps": ["b"]}, {"name": "b", "deps": ["a"]}]
    assert _error(doc).startswith("x.json: /graph/tasks: dependency cycle")


def test_invalid_json_names_line_and_column():
    with pytest.raises(TraceError) as e:
        parse_trace('{\n  "format": "wgk-trace/1",\n  "id" "x"\n}\n', "bad.json")
    assert str(e.value) == "bad.json: invalid JSON at line 3 column 8: Expecting ':' delimiter"


def test_broken_trace_file_exits_2_with_one_line(tmp_path, capsys):
    src = (TRACES / "incidents" / "04-dead-worker-converges.json").read_text()
    bad = tmp_path / "broken.json"
    bad.write_text(src.replace('"kind": "dispatch"', '"kind": "dispatsh"', 1))
    assert main(["replay", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"wgk replay: {bad}: /steps/0/request/kind: 'dispatsh' is not one of [")
    assert len(err.splitlines()) == 1
    bad.write_text(src[:200])
    assert main(["replay", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert "invalid JSON at line" in err and len(err.splitlines()) == 1
    assert main(["replay", str(tmp_path / "missing.json")]) == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_write_then_load_round_trips(tmp_path):
    t = Trace.from_json(_minimal())
    t.expect = {"tasks": {"a": {"assigned": True, "owner": None}}}
    p = write_trace(t, tmp_path / "sub" / "t.json")
    text = p.read_text()
    assert text.endswith("}\n") and "\n  \"id\": \"t\",\n" in text
    again = load_trace(p)
    assert again == t and dump_trace(again) == text


def test_write_refuses_an_invalid_trace(tmp_path):
    t = Trace.from_json(_minimal())
    t.steps[0]["expect"] = {"decision": "maybe"}
    with pytest.raises(TraceError, match="/steps/0/expect/decision"):
        write_trace(t, tmp_path / "t.json")
    assert not (tmp_path / "t.json").exists()


def test_fuzz_counterexamples_are_valid_traces():
    fuzz = pytest.importorskip("wgk.conformance.oracle.fuzz")
    steps = [
        {"request": {"kind": "dispatch", "actor": "daemon", "task": "t1", "key": "d1", "expected-attempt": 0,
                     "owner": {"pid": 1, "birth": 2, "session": "s"}, "mint": "tok-1"}},
        {"env": "crash"},
        {"request": {"kind": "dispatch", "actor": "daemon", "task": "t1", "key": "d1", "expected-attempt": 0,
                     "owner": {"pid": 1, "birth": 2, "session": "s"}, "mint": "tok-1"}},
    ]
    doc = fuzz.counterexample_trace(fuzz.chain_graph(2), steps, seed=7, failure="example")
    validate_doc = parse_trace(json.dumps(doc), "fuzz.json")
    assert validate_doc.steps[2]["expect"]["decision"] == "duplicate"


def _corpus_with_a_bad_file(tmp_path, at: int, n: int = 40):
    """``n`` bundled traces copied, the one at position ``at`` (in file order) breaking the
    schema (a step of an unknown shape)."""
    files = ALL[:n]
    for k, f in enumerate(files):
        doc = json.loads(f.read_text())
        if k == at:
            doc["steps"][0] = {"neither": "request nor env"}
        (tmp_path / f"{k:03d}.json").write_text(json.dumps(doc))
    return tmp_path


@pytest.mark.parametrize("at", [0, 1, 2, 39])
def test_loading_on_several_processes_reports_what_one_reports(tmp_path, at):
    root = _corpus_with_a_bad_file(tmp_path, at)
    errors = []
    for workers in (1, 2, 3):
        with pytest.raises(TraceError) as e:
            load_traces([root], workers)
        errors.append(str(e.value))
    assert errors[0] == errors[1] == errors[2] and f"{at:03d}.json" in errors[0]
    os.remove(root / f"{at:03d}.json")
    assert [t.id for t in load_traces([root], 2)] == [t.id for t in load_traces([root])]


def test_the_schema_verdicts_checked_ahead_are_the_ones_taken(tmp_path, monkeypatch):
    root = _corpus_with_a_bad_file(tmp_path, 1)
    here = []
    monkeypatch.setattr(format_mod, "schema_errors",
                        lambda doc, orig=format_mod.schema_errors: here.append(1) or orig(doc))
    with pytest.raises(TraceError, match="001.json"):
        load_traces([root], 2)
    assert len(here) == 20 and not format_mod.AHEAD     # the other half in the forked process
    monkeypatch.setattr(format_mod, "_schema_share", lambda files: {})
    here.clear()
    with pytest.raises(TraceError, match="001.json"):      # nothing ahead: each checked in turn
        load_traces([root], 2)
    assert len(here) == 2


def test_the_validator_is_made_once_before_the_schema_checks_fork(tmp_path, monkeypatch):
    """The processes checking texts ahead take the validator the loading process made before
    it forked: made in one process, not in each."""
    root = _corpus_with_a_bad_file(tmp_path, 1)
    os.remove(root / "001.json")
    made = tmp_path / "made"
    monkeypatch.setattr(format_mod, "_validator", functools.lru_cache(maxsize=1)(
        lambda orig=format_mod._validator.__wrapped__: (
            made.open("a").write(f"{os.getpid()}\n"), orig())[1]))
    assert len(load_traces([root], 3)) == 39
    assert made.read_text().split() == [str(os.getpid())]
