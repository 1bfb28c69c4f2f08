"""The model's mutants kept one by one (``gate_mutants``): a change re-runs exactly the mutants
whose kill read it, and what a kill reads is within its key.

The sources the keys are read from are a copy (``gate_cache.SOURCES``), and so are the traces
the mutants replay (``mutant_traces.corpus``); each test changes one thing in the copy (a
rule, a property, a lemma, an implementation function, a trace) and restores it. The code
that runs is the checkout's, so a mutant run again gives the verdict it gave: what is
checked is which mutants run again, and that the report is the cold one's.
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from wgk.conformance.oracle import mutant_traces
from wgk.conformance.reports import gate, gate_cache, gate_frames, gate_mutants
from wgk.conformance.reports.gate_cache import GateCache
from wgk.conformance.z3 import mutants
from wgk.model.actions import Instance

from gate_sources import plain_report
from test_gate_frames import Frames, _clear, _edit

ROOT = Path(__file__).resolve().parent.parent
#: A rule changed (double-dispatch, archive-without-confirmation, phase-skip), the kernel
#: patched (stale-capability-accepted: every kind), explored (second-terminal-overwrites-first).
CHOSEN = ("double-dispatch", "archive-without-confirmation", "phase-skip",
          "stale-capability-accepted", "second-terminal-overwrites-first")


class Runs(Frames):
    """The mutants section of the gate on the chosen mutants over copied sources (``Frames``'
    copy) and traces, with a cache, noting which mutants ran and the dependencies each was
    stored with."""

    def __init__(self, tmp: Path):
        super().__init__(tmp)
        self.traces = tmp / "traces"
        shutil.copytree(mutant_traces.corpus(), self.traces,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "counterexamples"))
        self.ran: list[str] = []
        self.deps: dict[str, dict[str, set[str]]] = {}

    def gate(self, monkeypatch, cache: bool = True, budget: dict | None = None):
        monkeypatch.setitem(gate.BUDGETS, "quick", budget or {"mutants": True})
        monkeypatch.setattr(gate_cache, "SOURCES", self.sources)
        monkeypatch.setattr(mutants, "MUTANTS", {n: mutants.MUTANTS[n] for n in CHOSEN})
        monkeypatch.setattr(mutant_traces, "corpus", lambda: self.traces)
        _clear()
        store = GateCache.store

        def noted(cache_self, key, checks, ran):
            self.ran.append(checks[0].name)
            self.deps[checks[0].name] = {k: set(v) for k, v in (ran or {}).items()}
            return store(cache_self, key, checks, ran)
        monkeypatch.setattr(GateCache, "store", noted)
        self.ran = []
        return gate.run_gate("quick", traces=[str(self.traces / "incidents")], workers=1,
                             cache=str(self.cache) if cache else None)

    def reading(self, name: str, qual: str) -> set[str]:
        """The mutants stored with function ``qual`` of rule file ``name`` among their
        dependencies."""
        return {m for m, deps in self.deps.items() if qual in deps.get(name, ())}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return Runs(tmp_path_factory.mktemp("gate-mutants"))


@pytest.fixture(scope="module")
def cold(runs):
    """The first run (every mutant run and kept), the mutants it ran, a run without cache."""
    with pytest.MonkeyPatch.context() as mp:
        return runs.gate(mp), list(runs.ran), runs.gate(mp, cache=False)


def test_every_mutant_is_kept_and_reused_and_the_report_is_the_same(runs, cold, monkeypatch):
    first, ran, plain = cold
    assert first.verdict == "pass" and sorted(ran) == sorted(CHOSEN)
    assert first.cache["reused"] == 0 and first.cache["checks"] == len(CHOSEN)
    # every kill but the kernel's patch reads some rule bodies only (the explored one too)
    every = {n: {q for q, _, _ in gate_cache._functions(runs.path(n))[1]}
             for n in runs.deps["double-dispatch"]}
    assert all(runs.deps[m] != every for m in ("double-dispatch", "archive-without-confirmation",
                                               "phase-skip", "second-terminal-overwrites-first"))
    again = runs.gate(monkeypatch)
    assert runs.ran == [] and again.cache["reused"] == len(CHOSEN)
    assert plain_report(again.to_json()) == plain_report(first.to_json()) == plain_report(plain.to_json())


@pytest.mark.parametrize("name, qual, rerun, reused", [
    # the archive rule: its mutant re-runs, the dispatch one and the explored one (its
    # instance sends no archive) are reused
    ("model/rules_archive.py", "archive", {"archive-without-confirmation"},
     {"double-dispatch", "second-terminal-overwrites-first"}),
    # the quiesce rule: its mutant re-runs, the dispatch one is reused
    ("model/rules_save.py", "quiesce", {"phase-skip"}, {"double-dispatch"}),
])
def test_a_changed_rule_reruns_exactly_the_mutants_whose_kill_read_it(runs, cold, monkeypatch,
                                                                    name, qual, rerun, reused):
    expected = runs.reading(name, qual)
    assert rerun <= expected and not reused & expected and expected != set(CHOSEN)
    before = _edit(runs.path(name), qual)
    try:
        result = runs.gate(monkeypatch)
        assert set(runs.ran) == expected
        assert result.cache["reused"] == len(CHOSEN) - len(expected)
        assert plain_report(result.to_json()) == plain_report(cold[0].to_json())
    finally:
        runs.path(name).write_text(before)
        _clear()
    runs.gate(monkeypatch)
    assert runs.ran == []                              # restored: the first entries hold again


@pytest.mark.parametrize("name, qual, every", [
    ("model/invariants_state.py", "ready_iff_dispatch_admitted", True),   # a property
    ("conformance/z3/lemmas.py", "receipts_follow_phase", True),          # a lemma
    ("impl/decisions/pauses.py", None, False),                            # the implementation
])
def test_a_property_or_a_lemma_reruns_every_mutant_and_the_implementation_none(
        runs, cold, monkeypatch, name, qual, every):
    path = runs.path(name)
    qual = qual or next(q for q, _, _ in gate_cache._functions(path)[1] if "<" not in q)
    before = _edit(path, qual)
    try:
        result = runs.gate(monkeypatch)
        assert sorted(runs.ran) == (sorted(CHOSEN) if every else [])
        assert plain_report(result.to_json()) == plain_report(cold[0].to_json())
    finally:
        path.write_text(before)
        _clear()


def test_a_changed_incident_trace_reruns_the_mutants_of_its_incident_only(runs, cold,
                                                                          monkeypatch):
    m = mutants.MUTANTS["archive-without-confirmation"]
    [trace] = [p for p in mutant_traces.incident_traces(m, runs.traces)
               if p.name.startswith("30-")]
    others = [n for n in CHOSEN if set(mutants.MUTANTS[n].incidents) & set(m.incidents)]
    assert others == ["archive-without-confirmation"]
    before = trace.read_text()
    changed = json.loads(before)
    changed["description"] = f"(changed) {changed.get('description', '')}"
    trace.write_text(json.dumps(changed))
    try:
        runs.gate(monkeypatch)
        assert runs.ran == ["archive-without-confirmation"]
    finally:
        trace.write_text(before)


def test_damaged_entries_are_ignored_with_a_warning_and_the_mutants_run_again(runs, cold,
                                                                             monkeypatch):
    kept = {e: e.read_bytes() for e in sorted(runs.cache.glob("*/*/*.pickle"))}
    assert len(kept) >= len(CHOSEN)
    for entry, good in kept.items():
        entry.write_bytes(good[:len(good) // 2])
    try:
        result = runs.gate(monkeypatch)
        assert sorted(runs.ran) == sorted(CHOSEN)
        warnings = result.cache["warnings"]
        assert len(warnings) >= len(CHOSEN)
        assert all("ignored" in w and "\n" not in w and ".pickle" in w for w in warnings)
        assert plain_report(result.to_json()) == plain_report(cold[0].to_json())
    finally:
        for entry, good in kept.items():
            entry.write_bytes(good)


def _untraced(fn):
    def run(*args, **kw):
        before = sys.gettrace()
        sys.settrace(None)
        try:
            return fn(*args, **kw)
        finally:
            sys.settrace(before)
    return run


def _owner(qual: str) -> str:
    while qual.rsplit(".", 1)[-1].startswith("<") and ".<locals>." in qual:
        qual = qual.rsplit(".<locals>.", 1)[0]
    return qual


@pytest.mark.parametrize("name", CHOSEN + ("reset-claims-continuation", "ready-by-status",
                                           "complete-before-publication", "trusts-actor-label",
                                           "publication-of-named-manifest"))
def test_what_a_kill_runs_of_the_rule_files_is_within_its_dependencies(name, tmp_path,
                                                                      monkeypatch):
    """Recorded while the mutant is killed as the gate kills it: every rule-file function
    that ran is among the dependencies its check is stored with (but for the prover's
    set-up, which runs every rule once and is keyed by its value kind by kind: not
    recorded)."""
    from wgk.conformance.reports.gate_model import mutant_checks
    from wgk.conformance.z3 import transition
    for found in ("_discover", "_actor_sensitive", "_logs_by_kind"):
        monkeypatch.setattr(transition, found, _untraced(getattr(transition, found)))
    ctx = gate_mutants.Context(tmp_path)
    with gate_mutants.explored_kinds() as kinds, gate_cache.recording() as ran:
        checks = mutant_checks("default", None, only={name})
    deps = ctx.dependencies(mutants.MUTANTS[name], checks, kinds)
    outside = [(f, q) for f, quals in ran.items() if gate_frames.RULE_FILES.fullmatch(f)
               for q in quals if q != "<module>" and _owner(q) not in deps[f]]
    assert not outside, outside[:5]
    assert checks[0].verdict == "pass"


def test_the_set_up_by_kind_is_the_set_up_of_the_prover():
    """The evidence and the kinds asking who, found kind by kind, make up what the prover's
    set-up finds for every kind at once (what the keys take apart by kind)."""
    from wgk.conformance.z3.prove import chain_deps
    from wgk.conformance.z3.symbolic import symbolic_graph
    from wgk.conformance.z3.transition import MODEL, _discover, _actor_sensitive
    from wgk.model.actions import Instance
    for tasks in (1, 2):
        inst = Instance.proof(tasks=tasks)
        graph = symbolic_graph(inst.task_names(), chain_deps(inst.tasks))
        by_kind = gate_mutants.kind_setup(tasks)
        who = _actor_sensitive(graph, MODEL)
        assert {k for k, (asks, _) in by_kind.items() if asks} == {k.name for k in who}
        pairs = {tuple(p) for _, logged in by_kind.values() for p in logged}
        universe = {(repr(a), repr(b)) for a, b in _discover(graph, inst.ids(), MODEL)}
        assert universe == pairs | {(a, repr(e)) for a, _ in pairs for e in inst.ids()}
        assert pairs


def test_the_keys_take_the_traces_each_mutant_replays(tmp_path):
    ctx = gate_mutants.Context(tmp_path)
    for m in mutants.MUTANTS.values():
        assert ctx.incident_traces(m) == sorted(mutant_traces.incident_traces(m)), m.name


def test_the_prover_walks_the_request_kinds_in_the_order_the_keys_assume():
    """``Context.dependencies`` takes the kinds before the failing one in ``Kind``'s order,
    then the environment's steps: the order of the prover's transitions."""
    from wgk.conformance.z3.prove import FAST, Prover
    from wgk.conformance.z3.transition import MODEL
    from wgk.model.actions import Instance
    from wgk.model.vocab import Kind
    for tasks in sorted({m.instance.tasks for m in mutants.MUTANTS.values()}):
        walked = Prover(Instance.proof(tasks=tasks), MODEL, transitions=(),
                        params=FAST).transitions
        kinds = [gate_frames.kind_name(t) for t in walked]
        first_env = kinds.index(None)
        assert all(k is None for k in kinds[first_env:])
        assert kinds[:first_env] == [k.name for k in Kind if k.name in kinds[:first_env]]


EXPLORED = Instance(tasks=1, groups=("core",))


def test_an_exploration_reruns_after_a_change_to_a_rule_it_ran_only(runs, cold, monkeypatch):
    """The core group sends no ``assign`` (a legacy request): a change to that rule reuses the
    exploration; a change to the dispatch rule runs it again."""
    budget = {"explore": [EXPLORED]}
    kept = runs.cache
    runs.cache = kept.parent / "explore-cache"
    try:
        first = runs.gate(monkeypatch, budget=budget)
        assert [c.section for c in first.checks] == ["explore"] and len(runs.ran) == 1
        deps = runs.deps[runs.ran[0]]
        assert "assign" not in deps["model/rules_attempt.py"]
        assert "dispatch" in deps["model/rules_attempt.py"]
        for qual, again in (("assign", False), ("dispatch", True)):
            before = _edit(runs.path("model/rules_attempt.py"), qual)
            try:
                result = runs.gate(monkeypatch, budget=budget)
                assert bool(runs.ran) == again, qual
                assert plain_report(result.to_json()) == plain_report(first.to_json())
            finally:
                runs.path("model/rules_attempt.py").write_text(before)
                _clear()
    finally:
        runs.cache = kept


def test_what_an_exploration_runs_of_the_rule_files_is_within_its_dependencies(tmp_path):
    from wgk.conformance.check.explore import explore
    ctx = gate_mutants.Context(tmp_path)
    with gate_mutants.kinds_run(set()) as kinds, gate_cache.recording() as ran:
        r = explore(EXPLORED)
    assert r.complete and kinds and "ASSIGN" not in kinds
    deps = ctx.kinds_functions(kinds)
    outside = [(f, q) for f, quals in ran.items() if gate_frames.RULE_FILES.fullmatch(f)
               for q in quals if q != "<module>" and _owner(q) not in deps[f]]
    assert not outside, outside[:5]
    from wgk.model.ruleset import RULES
    assert all(not hasattr(fn, "__wrapped__") for fn in RULES.values())     # restored


def test_the_gate_keys_mutants_and_explorations_by_what_they_read():
    """Importing the gate is enough for its cache to key them so (``gate_cache.READS``)."""
    import subprocess
    p = subprocess.run([sys.executable, "-c", "import wgk.conformance.reports.gate as g; "
                        "from wgk.conformance.reports import gate_cache as c; "
                        "print(c.READS.__name__)"], capture_output=True, text=True, timeout=120)
    assert p.stdout.strip() == "wgk.conformance.reports.gate_mutants", p.stderr
