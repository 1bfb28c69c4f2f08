"""The peer's 28 golden vectors: re-import equals the committed traces, and each replays."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from wgk.conformance.cli.main import main
from wgk.conformance.traces.wg import WgImportError, import_file, import_paths, import_results
from wgk.conformance.traces.wg.files import import_cases
from wgk.conformance.oracle.historical import replay_historical
from wgk.conformance.oracle.replay import replay
from wgk.conformance.traces.format import dump_trace, load_trace, trace_files

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "fixtures" / "wg"
if not SHARED.is_dir():
    SHARED = Path("/work/shared/fixtures/wg")
COMMITTED = ROOT / "traces" / "peers" / "wg"
#: The families these tests pin: WG's finish protocol (v1), SaveTransaction (v2) and the
#: deletion-map traces; the folder's other families are imported by their own tests.
FAMILY_DIRS = ("v1", "v2", "deletion-map")
SOURCES = sorted(p for d in FAMILY_DIRS for p in (SHARED / d).rglob("*.json")
                 if p.name != "index.json")

pytestmark = pytest.mark.skipif(not SHARED.is_dir(), reason="the peer fixtures are not checked out")

def test_all_28_fixtures_are_imported():
    imported = import_paths([SHARED / d for d in FAMILY_DIRS])
    assert len(SOURCES) == 28 and len(imported) == 28
    assert sorted(i.family for i in imported).count("v1") == 15
    assert len(trace_files([COMMITTED / d for d in FAMILY_DIRS])) == 28


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_reimport_equals_the_committed_trace(src):
    item = import_file(src)
    committed = item.out_path(COMMITTED)
    assert dump_trace(item.trace) == committed.read_text()
    assert item.trace.source["file"] == f"fixtures/wg/{item.family}/{src.name}"


@pytest.mark.parametrize("path", trace_files([COMMITTED]), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_committed_peer_trace_replays_through_the_model(path):
    trace = load_trace(path)
    result = replay(trace)
    assert result.passed, "\n".join(d.describe() for d in result.divergences)


#: The facts each family's expected_final always translates to.
FINAL_FACTS = {
    "v1": {"attempt-state", "owner", "leases", "plan", "deadline", "candidate", "base", "disposition",
           "receipts", "promotions", "counters", "dependency-satisfied", "recovery-rank"},
    "v2": {"revision", "generation", "attempt", "fence", "lease-epoch", "owner", "exit"},
    "deletion-map": {"counters", "evidence", "exit", "assigned", "promotions"},
}


def _source_count(doc: dict) -> int:
    if "events" in doc:
        return len(doc["events"])
    if "single_kernel_replay" in doc:
        return len(doc["single_kernel_replay"]["steps"])
    return len(doc["steps"])


@pytest.mark.parametrize("src", SOURCES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_source_decision_and_final_fact_is_kept(src):
    doc = json.loads(src.read_text())
    trace = import_file(src).trace
    pointers = {s["from"]["pointer"] for s in trace.steps}
    assert len(pointers) == _source_count(doc), "every source event/step became at least one step"
    for s in trace.steps:
        if "request" in s:
            assert "expect" in s, "every request carries the expected decision"
    facts = next(iter(trace.expect["tasks"].values()))
    assert FINAL_FACTS[src.parent.name] <= set(facts), "every final fact is translated"


def test_import_cli_writes_identical_bytes(tmp_path, capsys):
    # every published case maps (exit 0); every trace written is the committed one
    assert main(["import-wg", str(SHARED), "--out", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["count"] == 28 + NEW_TRACES and doc["not-mapped"] == NOT_MAPPED
    for f in trace_files([tmp_path]):
        assert f.read_text() == (COMMITTED / f.relative_to(tmp_path)).read_text()


def _copy(tmp_path, family, name, edit):
    doc = json.loads((SHARED / family / name).read_text())
    edit(doc)
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def test_an_unmapped_field_is_an_error_naming_it(tmp_path):
    p = _copy(tmp_path, "v1", "happy_land.json", lambda d: d["events"][1].update(colour="blue"))
    with pytest.raises(WgImportError) as e:
        import_file(p)
    assert str(e.value) == f"{p}: /events/1/colour: field 'colour' cannot be mapped"


def test_a_route_breaker_is_its_leased_goals_open_route(tmp_path):
    src = SHARED / "planner-runtime" / "convergence-state-v1.json"
    (item,), _ = import_cases(src)
    facts = item.trace.expect["tasks"]["legacy-goal"]
    # 04:07:06.222333444 - 04:00:00.999999999, in nanoseconds; the wake time comes first
    assert (facts["route"], facts["route-breaker"], facts["route-probe-at"]) == \
        ("pi|openrouter|b3:endpoint", "unavailable", 425_222_333_445)
    assert facts["plan"]["action"] == "await-not-before"
    outages = [s for s in item.trace.steps if s.get("request", {}).get("kind") == "provider-failure"]
    assert len(outages) == 4 and {s["request"]["route"] for s in outages} == {facts["route"]}
    for field, edit in (("state", lambda b: b.update(state="half-open")),
                        ("probe_lease/task_id", lambda b: b["probe_lease"].update(task_id="other"))):
        p = _copy(tmp_path, "planner-runtime", "convergence-state-v1.json",
                  lambda d: edit(d["route_breakers"]["pi|openrouter|b3:endpoint"]))
        (item,), unmapped = import_cases(p)
        assert [u.field for u in unmapped] == [f"route_breakers/pi|openrouter|b3:endpoint/{field}"]
        assert "route" not in item.trace.expect["tasks"]["legacy-goal"]


def test_a_scheduled_route_probe_and_its_acknowledged_effect(tmp_path):
    src = SHARED / "planner-runtime" / "planner-state-v1.json"
    (item,), unmapped = import_cases(src)
    assert unmapped == []
    facts = item.trace.expect["tasks"]["settled-task"]
    assert facts["plan"] == {"way": "runnable", "action": "dispatch"}
    assert facts["route-breaker"] == "available"
    due = [s for s in item.trace.steps if "expect-facts" in s]
    assert due[0]["expect-facts"]["tasks"]["settled-task"]["plan"] == \
        {"way": "runnable", "action": "probe-route"}
    probes = [s["request"] for s in item.trace.steps if s.get("request", {}).get("kind") == "probe-route"]
    assert probes and probes[0].get("succeeded") is True
    effect = "effect:" + "d" * 64
    p = _copy(tmp_path, "planner-runtime", "planner-state-v1.json",
              lambda d: d["effects"][effect]["status"].update(acknowledged="failed"))
    (item,), _ = import_cases(p)
    assert item.trace.expect["tasks"]["settled-task"]["plan"] == \
        {"way": "wait", "action": "await-route-probe"}
    p = _copy(tmp_path, "planner-runtime", "planner-state-v1.json",
              lambda d: d["effects"][effect].update(status={"issued": True}))
    (item,), unmapped = import_cases(p)
    assert [u.field for u in unmapped] == [f"effects/{effect}/status"]
    assert "settled-task" not in item.trace.expect["tasks"]
    p = _copy(tmp_path, "planner-runtime", "planner-state-v1.json", lambda d: d.update(effects={}))
    (item,), _ = import_cases(p)
    assert item.trace.expect["tasks"]["settled-task"]["plan"] == \
        {"way": "runnable", "action": "probe-route"}


@pytest.mark.parametrize("family,name,edit,message", [
    ("v1", "happy_land.json", lambda d: d["events"][0].update(type="teleport"),
     "/events/0/type: event type 'teleport' cannot be mapped"),
    ("v1", "happy_land.json", lambda d: d["expected_decisions"][3].update(reason="bad_weather", status="rejected"),
     "/expected_decisions/3/reason: rejection reason 'bad_weather' cannot be mapped"),
    ("v1", "happy_land.json", lambda d: d["expected_final"].pop("promotion_count"),
     "/expected_final/promotion_count: field 'promotion_count' is missing"),
    ("v2", "happy_cleanup_boundary_v2.json",
     lambda d: d["steps"][4]["request"]["source"].update(route_snapshot_cid="wgcid:v2:other"),
     "/steps/4/request/route_snapshot_cid: field 'route_snapshot_cid' differs"),
    ("v2", "stale_source_v2.json", lambda d: d["steps"][0]["expected"].update(code="gremlins"),
     "/steps/0/expected/code: decision 'rejected' 'gremlins' cannot be mapped"),
    ("deletion-map", "03-duplicate-provider-event.json",
     lambda d: d["single_kernel_replay"]["steps"][0].update(decision="applied-maybe"),
     "/single_kernel_replay/steps/0/decision: decision 'applied-maybe' cannot be mapped"),
    ("deletion-map", "01-lost-ipc-response-after-durable-mutation.json",
     lambda d: d["single_kernel_replay"]["expected_final"]["effect_ids"].append("teleport:x"),
     "/single_kernel_replay/expected_final/effect_ids: effect id 'teleport:x' cannot be mapped"),
])
def test_unmappable_input_is_an_error_with_its_pointer(tmp_path, family, name, edit, message):
    p = _copy(tmp_path, family, name, edit)
    with pytest.raises(WgImportError) as e:
        import_file(p)
    assert str(e.value).startswith(f"{p}: {message}")


def test_import_cli_exit_2_on_bad_input(tmp_path, capsys):
    p = _copy(tmp_path, "v1", "happy_land.json", lambda d: d["events"][1].update(colour="blue"))
    assert main(["import-wg", str(p), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"wgk import-wg: {p}: /events/1/colour: field 'colour' cannot be mapped"
    assert not (tmp_path / "out").exists()


def test_index_file_is_checked_not_imported(tmp_path):
    d = tmp_path / "dm"
    shutil.copytree(SHARED / "deletion-map", d)
    assert import_file(d / "index.json") is None
    (d / "02-live-pid-missing-heartbeat.json").unlink()
    with pytest.raises(WgImportError, match="/traces/1: listed trace"):
        import_file(d / "index.json")


def _dir_with_an_unknown_family(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(SHARED / "v1" / "happy_land.json", src / "happy_land.json")
    (src / "notes.json").write_text(json.dumps({"schema_version": 7, "name": "not a fixture"}))
    return src


def test_a_file_of_an_unknown_family_is_skipped_not_fatal(tmp_path, capsys):
    src = _dir_with_an_unknown_family(tmp_path)
    out = tmp_path / "out"
    assert main(["import-wg", str(src), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"skipped {src / 'notes.json'}: /: not a WG fixture" in err
    assert "1 traces written" in err
    assert (out / "v1" / "happy_land.json").read_text() == (COMMITTED / "v1" / "happy_land.json").read_text()
    assert not (out / "v1" / "notes.json").exists()


def test_import_json_gives_a_result_per_file(tmp_path, capsys):
    src = _dir_with_an_unknown_family(tmp_path)
    assert main(["import-wg", str(src), "--out", str(tmp_path / "out"), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["count"] == 1
    files = {Path(f["source"]).name: f for f in doc["files"]}
    assert files["happy_land.json"]["status"] == "imported"
    assert files["happy_land.json"]["trace"] == "wg-v1-happy-land"
    assert files["notes.json"]["status"] == "skipped"
    assert "not a WG fixture" in files["notes.json"]["reason"]


def test_import_json_reports_an_error_per_file_and_writes_nothing(tmp_path, capsys):
    src = _dir_with_an_unknown_family(tmp_path)
    _copy(src, "v1", "cas_target_movement.json", lambda d: d["events"][1].update(colour="blue"))
    out = tmp_path / "out"
    assert main(["import-wg", str(src), "--out", str(out), "--json"]) == 2
    captured = capsys.readouterr()
    statuses = {Path(f["source"]).name: f["status"] for f in json.loads(captured.out)["files"]}
    assert statuses == {"cas_target_movement.json": "error", "happy_land.json": "imported",
                        "notes.json": "skipped"}
    assert captured.err.strip().endswith("/events/1/colour: field 'colour' cannot be mapped")
    assert not out.exists()


# --- the rest of the published corpus: daemon planner, runtime reducer, simple-land, planner state ---

NEW_DIRS = ("daemon", "runtime", "simple-land", "planner-runtime")
NEW_SOURCES = sorted(p for d in NEW_DIRS for p in (SHARED / d).rglob("*.json"))
#: traces written: daemon v1 9 of 9, daemon v2 4 of 4, daemon v3 1 of 1, runtime 7 of 7,
#: simple-land 6 of 6, planner state 2 files (both tasks; the goal behind its backoff and its
#: route's open breaker)
NEW_TRACES = 9 + 4 + 1 + 7 + 6 + 2
#: reported: none
NOT_MAPPED = 0


def _cases(path: Path) -> set[str]:
    """The names of the cases a published file holds (a task or goal of a state file)."""
    doc = json.loads(path.read_text())
    if "cases" in doc:
        return {c["name"] for c in doc["cases"]}
    if "goals" in doc:
        return set(doc["goals"])
    if "tasks" in doc and "trace" not in doc:
        return {t["key"]["task_id"] for t in doc["tasks"].values()}
    return {doc["name"]}


def test_every_published_case_is_imported_or_reported_with_its_field():
    assert len(NEW_SOURCES) == 14 + 1 + 1 + 2
    assert sum(len(_cases(p)) for p in NEW_SOURCES if "planner-runtime" not in str(p)) == 47 - 20
    results = import_results(NEW_SOURCES)
    written = [i for r in results for i in r.traces]
    unmapped = [u for r in results for u in r.unmapped]
    assert (len(written), len(unmapped)) == (NEW_TRACES, NOT_MAPPED)
    for p in NEW_SOURCES:
        r = next(r for r in results if r.source == p)
        reported = {u.case for u in r.unmapped}
        mapped = {i.stem or p.stem for i in r.traces}
        if "planner-runtime" in str(p):     # a state file: one trace for the tasks it maps
            mapped = {t["name"] for i in r.traces for t in i.trace.graph["tasks"]} \
                | {s["from"]["pointer"].rsplit("/", 1)[-1] for i in r.traces for s in i.trace.steps}
        names = {json.loads(p.read_text()).get("name")} if "daemon" in str(p) else _cases(p)
        assert names <= mapped | reported | {p.stem}, p
        assert not (mapped & reported), p
        for u in r.unmapped:
            assert u.field and u.reason and u.line().startswith(f"{p}: case {u.case}: field {u.field}: ")


@pytest.mark.parametrize("src", NEW_SOURCES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_new_family_reimport_equals_the_committed_traces(src):
    traces, _ = import_cases(src)
    for item in traces:
        assert dump_trace(item.trace) == item.out_path(COMMITTED).read_text()


DAEMON_V1 = sorted((COMMITTED / "daemon" / "v1").glob("*.json"))


@pytest.mark.parametrize("path", DAEMON_V1, ids=lambda p: p.stem)
def test_historical_ruleset_reproduces_the_violation_and_corrected_does_not(path):
    trace = load_trace(path)
    assert trace.historical["violation"] == path.stem
    result = replay_historical(trace)
    assert result.passed, "\n".join(d.describe() for d in result.divergences)
    # the two rulesets disagree on this task: each expectation fails under the other planner
    assert not replay_historical(trace, "corrected").passed
    swapped = load_trace(path)
    swapped.expect = swapped.historical["expect"]
    assert not replay(swapped).passed


def test_replay_planner_historical_cli(tmp_path, capsys):
    d = COMMITTED / "daemon"
    assert main(["replay", str(d), "--planner", "historical"]) == 0
    out = capsys.readouterr().out
    assert f"{len(DAEMON_V1)} passed, 0 failed" in out
    assert main(["replay", str(d), "--planner", "historical", "--system", "both"]) == 2
    assert "--planner historical is a ruleset of the model's planner" in capsys.readouterr().err
    assert main(["replay", str(COMMITTED / "v1"), "--planner", "historical"]) == 2
    assert "carries a 'historical' expectation" in capsys.readouterr().err


def test_a_daemon_case_whose_way_differs_is_reported_not_dropped(tmp_path, capsys):
    p = _copy(tmp_path, "daemon/v1", "park_resume_overlap.json",
              lambda d: d.update(expected_corrected_wait="human_answer"))
    traces, unmapped = import_cases(p)
    assert traces == [] and [u.line() for u in unmapped] == [
        f"{p}: case park_resume_overlap: field expected_corrected_wait: 'human_answer': only "
        "'correlated_message' is mapped for this incident"]
    assert main(["import-wg", str(p), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert f"not mapped: {p}: case park_resume_overlap: field expected_corrected_wait" in err
    assert "0 traces written" in err and "1 cases not mapped" in err


def test_a_goal_behind_its_dispatch_backoff_is_a_not_before_time(tmp_path):
    src = SHARED / "planner-runtime" / "convergence-state-v1.json"
    traces, unmapped = import_cases(src)
    (item,) = traces
    facts = item.trace.expect["tasks"]["legacy-goal"]
    # 04:05:06.123456789 - 04:00:00.999999999, in nanoseconds
    assert facts["not-before"] == facts["plan"]["deadline"] == 305_123_456_790
    assert unmapped == []
    p = _copy(tmp_path, "planner-runtime", "convergence-state-v1.json",
              lambda d: d["goals"]["legacy-goal#3"].update(stage="await-review"))
    traces, unmapped = import_cases(p)
    assert not traces and unmapped[0].field == "goals/legacy-goal#3/stage"


@pytest.mark.parametrize("family,name,edit,message", [
    ("daemon/v1", "park_resume_overlap.json",
     lambda d: d["trace"]["observations"][0]["observation"].update(colour="blue"),
     "/trace/observations/0/observation/colour: field 'colour' cannot be mapped"),
    ("daemon/v2", "orphan_before_spawn.json",
     lambda d: d["trace"]["initial_state"].update(fail_closed=True),
     "/trace/initial_state/fail_closed: field 'fail_closed' is True; only False can be mapped"),
    ("runtime/v1", "exited_worker_finish.json", lambda d: d["cases"][0]["expected"].update(extra=1),
     "/cases/0/expected/extra: field 'extra' cannot be mapped"),
    ("simple-land/v1", "scenarios.json", lambda d: d["cases"][0]["events"][0].update(type="teleport"),
     "/cases/0/events/0/type: event type 'teleport' cannot be mapped"),
    ("daemon/v3", "stale_worktree_spawn_owner.json", lambda d: d.update(expected_actions=[]),
     "/expected_actions: field 'expected_actions' is empty"),
    ("planner-runtime", "convergence-state-v1.json", lambda d: d["goals"].update(x=5),
     "/goals/x: expected an object"),
])
def test_new_family_unknown_input_is_an_error_with_its_pointer(tmp_path, family, name, edit, message):
    p = _copy(tmp_path, family, name, edit)
    with pytest.raises(WgImportError) as e:
        import_cases(p)
    assert str(e.value).startswith(f"{p}: {message}")


@pytest.mark.parametrize("edit,field", [
    (lambda d: [o["observation"]["owner"].update(kind="authenticated_live")
                for o in d["trace"]["observations"]], "observation/owner/kind"),
    (lambda d: d.update(expected_actions=["spawn_attempt"]), "expected_actions"),
    (lambda d: d["trace"]["observations"][1]["observation"].update(worktree_id="agent-7"),
     "trace/observations"),
    (lambda d: [o["observation"]["current_attempt"].update(fence=3)
                for o in d["trace"]["observations"]], "observation/current_attempt"),
])
def test_a_stale_worktree_case_other_than_the_mapped_one_is_reported_with_its_field(tmp_path, edit,
                                                                                       field):
    """The v3 case maps (reclaim = the reset's pin of a proven-dead owner's bytes, spawn = the
    dispatch importing them); a live owner, other actions, differing observations or other
    keys are reported, never written."""
    p = _copy(tmp_path, "daemon/v3", "stale_worktree_spawn_owner.json", edit)
    traces, unmapped = import_cases(p)
    assert traces == [] and len(unmapped) == 1 and field in unmapped[0].field, unmapped
