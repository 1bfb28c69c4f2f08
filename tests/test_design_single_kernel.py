"""The single-kernel design document stays true to the code, and `wgk complexity` measures it."""
from __future__ import annotations

import importlib
import json
import re

import pytest

from wgk.conformance.cli import main as cli

from wgk.conformance.reports import complexity

from wgk.conformance.reports import docgen
from wgk.conformance.reports.complexity import BUDGET, ROOT, measure
from wgk.model.env import EnvKind
from wgk.model.invariants import REGISTRY
from wgk.model.rules import RULES
from wgk.model.vocab import AUTHORITY, Actor, Kind

DOC = ROOT / docgen.DOC


@pytest.fixture(scope="module")
def measured():
    return measure()


def section(title: str) -> str:
    text = DOC.read_text()
    start = text.index(title)
    end = text.find("\n## ", start + 1)
    return text[start:end]


# --- generated blocks ---------------------------------------------------------------------------

def test_generated_blocks_are_identical():
    stale = docgen.check(DOC)
    assert not stale, ("\n".join(s.diff for s in stale)
                       + f"\nrefresh with: {docgen.REFRESH}")


def test_a_changed_block_is_reported_with_a_diff(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(DOC.read_text().replace("`declare-lost` (daemon)", "`declare-lost` (operator)", 1))
    stale = docgen.check(doc)
    assert [s.name for s in stale] == ["attempt-states"]
    assert "+| `lost` | terminal | `declare-lost` (daemon) |" in "".join(s.diff for s in stale)


def test_a_missing_block_is_reported(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text(re.sub(r"<!-- generated:codes:begin -->.*?<!-- generated:codes:end -->\n", "",
                          DOC.read_text(), flags=re.S))
    assert [s.name for s in docgen.check(doc)] == ["codes"]


def test_state_tables_agree_with_the_registries():
    kinds = docgen.block_kinds()
    for k in Kind:
        actors = ", ".join(a.label for a in sorted(AUTHORITY[k]))
        assert f"| `{k.label}` | {actors} |" in kinds
    states = docgen.entered_by("attempt_state")
    assert [k.label for k in states["lost"]] == ["declare-lost"]
    assert {k.label for k in states["succeeded"]} == {"save-graph", "reconstruct"}
    assert [k.label for k in states["none"]] == ["reopen"]      # a reopen leaves no attempt
    # evidence never stores a terminal attempt state
    from wgk.model.vocab import EVIDENCE_KINDS
    terminal = {k for s, ks in states.items() if s not in ("none", "running") for k in ks}
    assert not terminal & EVIDENCE_KINDS
    assert [k.label for k in docgen.entered_by("owner_seen")["live"]] == ["probe-owner"]


# --- the crash/fault matrix and the deletion list -----------------------------------------------

FAULTS = ("response loss", "daemon restart", "pid reuse", "heartbeat loss", "duplicate events",
          "multiple compactions", "terminal races", "observer exit", "crash at each transaction phase")


def matrix_rows() -> list[list[str]]:
    lines = section("## 3. The crash/fault matrix").splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("| fault"))
    table = []                                   # the fault table alone, not a later one
    for line in lines[start + 2:]:
        if not line.startswith("| "):
            break
        table.append(line)
    rows = [line.split(" | ") for line in table]
    assert rows
    return rows


def test_matrix_covers_every_required_fault():
    names = [r[0].lstrip("| ").strip() for r in matrix_rows()]
    for fault in FAULTS:
        assert fault in names


def test_matrix_names_existing_traces_and_invariants():
    for row in matrix_rows():
        fault, does, invariants, traces, command = row
        ids = re.findall(r"`([a-z-]+)`", invariants)
        files = re.findall(r"`(traces/[^`]+\.json)`", traces)
        assert ids and files, fault
        for i in ids:
            assert i in REGISTRY, f"{fault}: unknown invariant id {i}"
        for f in files:
            assert (ROOT / f).is_file(), f"{fault}: no trace {f}"
        replayed = re.fullmatch(r"`wgk replay (\S+) --system both --crash-cuts` \|", command.strip())
        assert replayed, f"{fault}: {command}"
        assert replayed.group(1) in files, f"{fault}: the command replays a trace the row does not name"


def test_every_audited_path_is_mapped_and_every_named_function_imports():
    audit = complexity.load_audit()
    assert len(audit.traces) == 8 and len(audit.evidence) == 24
    cited = {(e.trace.rsplit("/", 1)[1][:2], e.symbol) for e in audit.evidence}
    assert cited == set(docgen.REPLACED)
    for where in docgen.REPLACED.values():
        for name in re.findall(r"`(wgk\.[\w.]+)`", where):
            assert resolve(name) is not None, name
        for path in re.findall(r"`(traces/[^`]+)`", where):
            assert (ROOT / path).is_file()


def resolve(dotted: str):
    """The object a dotted name names: the longest importable module, then attributes."""
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:n]))
        except ModuleNotFoundError:
            continue
        for attr in parts[n:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def test_audit_classifications_quote_the_audit():
    audit = complexity.load_audit()
    for name, symbol, _ in complexity.AUDIT_TERMINAL_PATHS:
        assert symbol in audit.descriptions[complexity.audit_file(audit, name)]
    for name, store in complexity.AUDIT_STORES:
        assert store in audit.descriptions[complexity.audit_file(audit, name)]
    name, quote = complexity.AUDIT_REDUCERS
    assert quote in audit.descriptions[complexity.audit_file(audit, name)]


# --- wgk complexity -----------------------------------------------------------------------------

def test_figures_equal_independent_recounts(measured):
    assert measured.get("request-kinds").value == len(Kind)
    assert measured.get("actors").value == len(Actor)
    assert measured.get("env-step-kinds").value == len(EnvKind)
    assert measured.get("authority-pairs").value == sum(len(v) for v in AUTHORITY.values())
    assert measured.get("rule-functions").value == len(set(RULES.values())) == len(Kind)
    assert measured.get("reducers").items == ("impl/decisions/rules.py:decide",)
    assert measured.get("stores-of-record").items == ("ledger",)
    assert set(measured.get("journals").items) == {"journal", "ledger"}
    assert measured.get("helper-processes").value == 0
    from wgk.impl.front.kernel import Kernel
    public = {n for n in vars(Kernel) if not n.startswith("_")}
    assert set(measured.get("kernel-public-methods").items) == public
    # the same request kinds can make an attempt terminal in both: the model's by its rules'
    # names, the implementation's by the kinds whose write (or step's columns) is a writer
    from wgk.impl.decisions.rules import RULES as IMPL_RULES
    from wgk.impl.decisions.transaction import STEPS
    # a model helper that writes the terminal state stands for the rule that calls it
    called_by = {"open_generation": "reset"}
    model_writers = {called_by.get(w, w) for w in
                     (i.split(":")[1] for i in measured.get("terminal-writers-model").items)}
    impl_writers = {i.split(":")[1] for i in measured.get("terminal-writers-impl").items}
    impl_kinds = {k for k, rule in IMPL_RULES.items() if rule.then.__name__ in impl_writers} | \
        {k for k, step in STEPS.items() if step.sets.__name__ in impl_writers}
    assert impl_kinds == {w.replace("_", "-") for w in model_writers}
    assert "seeded" in impl_writers and len(impl_writers) == len(impl_kinds) + 1
    for f in measured.figures:
        if f.name not in ("helper-processes",):
            assert f.value > 0, f.name


def test_code_lines_skip_blanks_comments_and_docstrings():
    text = '"""Module\n\ndoc."""\n# a comment\n\ndef f():\n    """Doc."""\n    return 1  # trailing\n'
    assert complexity.code_lines(text) == 2


def test_every_budget_entry_is_measured(measured):
    assert {f.name for f in measured.figures} == set(BUDGET)
    assert all(reason for _, reason in BUDGET.values())


def run_cli(capsys, *argv):
    code = cli.main(["complexity", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_prints_every_figure(capsys):
    code, out, _ = run_cli(capsys, "--json")
    data = json.loads(out)
    assert code == 0 and data["ok"] is True and data["over"] == []
    assert set(data["figures"]) == set(BUDGET)
    for name, f in data["figures"].items():
        assert set(f) == {"name", "group", "value", "limit", "reason", "over", "baseline", "items"}
        assert f["baseline"]["value"] is None or f["baseline"]["value"] > 0
        assert f["baseline"]["counted"]
    assert data["figures"]["request-kinds"]["value"] == len(Kind)


def test_check_passes_within_budget(capsys):
    code, out, _ = run_cli(capsys, "--check")
    assert code == 0 and "within budget" in out


def test_check_fails_naming_the_figure_over_its_limit(monkeypatch, capsys):
    tight = dict(BUDGET, **{"request-kinds": (len(Kind) - 1, "test")})
    assert measure(budget=tight).over[0].name == "request-kinds"
    monkeypatch.setattr(complexity, "BUDGET", tight)
    code, out, _ = run_cli(capsys, "--check")
    assert code == 1
    assert f"over budget: request-kinds = {len(Kind)} > limit {len(Kind) - 1}" in out


def test_bad_usage_exits_2(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["complexity", "--no-such-flag"])
    assert e.value.code == 2
