"""docs/design-atomic-graph-work-save.md and its plan stay true to the code.

Every check is a function of ``wgk.conformance.reports.docgen_save`` that returns its
findings; each is run on the real document or plan (no findings) and on a
deliberately broken copy (the finding names what is wrong).
"""
from __future__ import annotations

import copy
import json
import re
import subprocess
import sys

import pytest

from wgk.conformance.cli.main import main
from wgk.conformance.reports import docgen_save as dg

ROOT = dg.ROOT


@pytest.fixture(scope="module")
def text() -> str:
    return dg.DOC.read_text()


@pytest.fixture(scope="module")
def plan() -> dict:
    return dg.load_plan()


# --- the plan: a DAG with one kernel gate and one synthesis gate ------------------------------


def test_plan_is_valid_json_and_acceptable(plan):
    subprocess.run([sys.executable, "-m", "json.tool", str(dg.PLAN)], check=True,
                   capture_output=True)
    assert dg.plan_problems(plan) == []


def test_plan_shape(plan):
    import networkx as nx
    g = dg.plan_graph(plan)
    assert nx.is_directed_acyclic_graph(g)
    by_phase = {}
    for t in plan["tasks"]:
        by_phase.setdefault(t["phase"], []).append(t["id"])
    (gate,) = by_phase["kernel-gate"]
    (final,) = by_phase["synthesis"]
    assert len(by_phase["adapter"]) >= 5
    for a in by_phase["adapter"]:
        assert gate in nx.ancestors(g, a)
        assert a in nx.ancestors(g, final)
    assert [n for n in g if g.out_degree(n) == 0] == [final]
    # the adapters really can fan out: no adapter depends on another
    adapters = set(by_phase["adapter"])
    assert all(set(t["depends_on"]) == {gate} for t in plan["tasks"] if t["id"] in adapters)


def _with(plan: dict, change) -> dict:
    bad = copy.deepcopy(plan)
    change({t["id"]: t for t in bad["tasks"]}, bad)
    return bad


def test_a_cycle_is_named(plan):
    bad = _with(plan, lambda t, p: t["model-vocabulary"]["depends_on"].append("synthesis-gate"))
    (problem,) = dg.plan_problems(bad)
    assert problem.startswith("not a DAG: ") and "synthesis-gate" in problem


def test_two_kernel_gates_are_found(plan):
    bad = _with(plan, lambda t, p: t["git-effects"].update(phase="kernel-gate"))
    assert dg.structure_problems(bad) == [
        "expected exactly one kernel-gate task, found 2: kernel-gate, git-effects"]


def test_an_adapter_beside_the_gate_is_found(plan):
    bad = _with(plan, lambda t, p: t["process-observer"].update(depends_on=["model-proofs"]))
    assert dg.structure_problems(bad) == [
        "process-observer: does not follow the kernel gate kernel-gate"]


def test_a_task_after_the_synthesis_gate_is_found(plan):
    def change(t, p):
        p["tasks"].append(dict(t["operator-cli"], id="canary", depends_on=["synthesis-gate"],
                               owned_files=["conformance/cli/cmd_demo.py"]))
    problems = dg.structure_problems(_with(plan, change))
    assert problems == ["canary: the synthesis gate synthesis-gate does not follow it"]


def test_a_task_without_a_field_is_named(plan):
    bad = _with(plan, lambda t, p: t["git-effects"].pop("non_goals"))
    assert dg.plan_problems(bad) == ["task 6: no field 'non_goals'"]
    assert dg.plan_problems({"tasks": []}) == ["the plan has no tasks"]


def test_parallel_tasks_owning_one_file_are_found(plan):
    bad = _with(plan, lambda t, p: t["git-effects"]["owned_files"].append("impl/storage/store.py"))
    assert dg.ownership_problems(bad) == [
        "sqlite-store and git-effects may run in parallel and both own impl/storage/store.py"]
    # the same file on two tasks in sequence is not a conflict
    seq = _with(plan, lambda t, p: t["synthesis-gate"]["owned_files"].append("impl/storage/store.py"))
    assert dg.ownership_problems(seq) == []


def test_missing_owned_file_and_bad_validation_commands_are_found(plan):
    def change(t, p):
        t["git-effects"]["owned_files"].append("impl/nonexistent.py")
        t["git-effects"]["validation"] += ["python -m pytest -q tests/test_nothing_here.py",
                                           "wgk no-such-command", "make all"]
    bad = _with(plan, change)
    assert dg.ownership_problems(bad) == ["git-effects: owned file impl/nonexistent.py does not exist"]
    assert dg.validation_problems(bad) == [
        "git-effects: python -m pytest -q tests/test_nothing_here.py: no test file "
        "tests/test_nothing_here.py",
        "git-effects: wgk no-such-command: 'no-such-command' is not a wgk subcommand",
        "git-effects: make all: neither pytest on a test file, a wgk subcommand nor python -m MODULE",
    ]


def test_markdown_table_agrees_with_the_json(text, plan):
    table = dg.parse_dag_table(text)
    assert table == {t["id"]: (t["phase"], tuple(t["depends_on"]), tuple(t["owned_files"]))
                     for t in plan["tasks"]}


# --- generated blocks -----------------------------------------------------------------------------


def test_generated_blocks_are_identical(text):
    diff = dg.doc_diff()
    assert diff == "", "refresh with: wgk docs --write\n" + diff


def test_generated_blocks_restate_the_code(text):
    from wgk.model.vocab import AUTHORITY, EDGES, Kind
    assert "| `accept` | `validated` \\| `awaiting-acceptance` | `accepted` |" in text
    assert len(re.findall(r"^\| `[a-z-]+` \| `[a-z-]+`.* \| `[a-z-]+` \|$",
                          dg.edges_table(), re.M)) == len(EDGES)
    assert len(dg.authority_table().splitlines()) == 2 + len(Kind) == 2 + len(AUTHORITY)


def test_a_stale_block_shows_as_a_diff(text, tmp_path):
    stale = text.replace("| `save-graph` | `cleanup-committed` | `graph-saved` |",
                         "| `save-graph` | `effect-committed` | `graph-saved` |")
    assert stale != text
    doc = tmp_path / "doc.md"
    doc.write_text(stale)
    diff = dg.doc_diff(doc)
    assert "-| `save-graph` | `effect-committed` | `graph-saved` |" in diff
    assert "+| `save-graph` | `cleanup-committed` | `graph-saved` |" in diff


def test_a_missing_marker_is_an_error(text):
    with pytest.raises(dg.DocError, match="generated block 'authority'"):
        dg.refreshed(text.replace("<!-- generated:authority:end -->", ""))


def test_check_command_exit_codes(tmp_path, monkeypatch, capsys):
    assert main(["docs", "--check"]) == 0
    stale = tmp_path / "stale.md"
    stale.write_text(dg.DOC.read_text().replace("| --- | --- | --- |", "| - | - | - |", 1))
    monkeypatch.setattr(dg, "DOC", stale)
    capsys.readouterr()
    assert main(["docs", "--check"]) == 1
    out, err = capsys.readouterr()
    assert "+| --- | --- | --- |" in out and "refresh: wgk docs --write" in err
    monkeypatch.setattr(dg, "DOC", tmp_path / "missing.md")
    assert main(["docs", "--check"]) == 2
    assert "missing.md" in capsys.readouterr().err


# --- the mutation/read inventory ------------------------------------------------------------------


def test_inventory_agrees_with_the_searches(text):
    searches = dg.parse_searches(text)
    assert {c for c, _ in searches} >= {
        "terminal", "ownership", "capture-worktree", "delete-worktree", "create-candidate",
        "promote", "satisfy-dependency", "reset", "retry", "migrate", "read-readiness",
        "read-status"}
    found = dg.inventory_from_searches(searches)
    problems = dg.inventory_differences(dg.parse_inventory(text), found)
    assert problems == [], "\n".join(problems)


def test_inventory_names_the_kernel_writers(text):
    rows = dg.parse_inventory(text)
    for entry in [("satisfy-dependency", "impl/decisions/transaction.py", "STEPS"),
                  ("promote", "impl/world/git.py", "GitRepository.land"),
                  ("read-status", "impl/decisions/projection.py", "StatusProjection.refresh"),
                  ("migrate", "impl/front/legacy.py", "import_legacy"),
                  ("ownership", "impl/decisions/seeding.py", "seeded")]:
        assert dg.Entry(*entry) in rows


def test_inventory_differences_name_missing_and_extra_rows(text):
    documented = dg.parse_inventory(text)
    gone = dg.Entry("promote", "impl/world/git.py", "GitRepository.land")
    fake = dg.Entry("promote", "impl/world/git.py", "GitRepository.push")
    assert dg.inventory_differences((documented - {gone}) | {fake}, documented) == [
        "missing from the inventory: promote: impl/world/git.py GitRepository.land",
        "in the inventory but not found: promote: impl/world/git.py GitRepository.push",
    ]


def test_enclosing_function_uses_the_syntax_tree():
    source = (ROOT / "impl/world/git.py").read_text().splitlines()
    line = next(i for i, s in enumerate(source, 1) if "def land(" in s) + 2
    assert dg.enclosing_function("impl/world/git.py", line) == "GitRepository.land"
    nested = next(i for i, s in enumerate((ROOT / "model/rules_save.py").read_text().splitlines(), 1)
                  if s.strip() == "def update():")
    assert dg.enclosing_function("model/rules_save.py", nested + 1) != "update"
    assert dg.enclosing_function("impl/world/git.py", 1) == "(module)"


def test_a_search_line_must_be_git_grep():
    with pytest.raises(dg.DocError, match="line 1"):
        dg.parse_searches("```inventory-searches\nterminal: grep -rn x impl\n```")
    with pytest.raises(dg.DocError, match="not a 'git grep -n'"):
        dg.run_search("git grep -E x -- impl")


# --- files the document names -----------------------------------------------------------------------


def test_every_named_trace_and_test_exists(text):
    named = set(re.findall(r"(?<![\w/])((?:traces|tests)/[\w./-]+\.(?:json|py))", text))
    traces = {n for n in named if n.startswith("traces/incidents/")}
    assert len(traces) >= 15
    missing = sorted(n for n in named if not (ROOT / n).is_file())
    assert missing == []


def test_crash_cut_table_covers_every_boundary_kind(text):
    from wgk.impl.world.hooks import BOUNDARY_KINDS
    section = text.split("## 5.")[1].split("## 6.")[0]
    for kind in BOUNDARY_KINDS:
        assert f"`{kind}`" in section
    for case in ("response lost", "version skew", "`prepare-effect`", "target moved"):
        assert case in section


def test_trace_matrix_markers_are_there_once(text):
    begin, end = "<!-- trace-matrix:begin -->", "<!-- trace-matrix:end -->"
    assert text.count(begin) == 1 and text.count(end) == 1
    assert text.index(begin) < text.index(end)
    before = text[:text.index(begin)]
    assert "generated by `wgk trace-matrix --markdown`" in before


def test_plan_file_names_the_design(plan):
    assert (ROOT / plan["design"]) == dg.DOC
    assert json.loads(dg.PLAN.read_text())["format"] == "wgk-plan/1"
