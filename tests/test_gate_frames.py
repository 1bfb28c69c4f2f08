"""The gate's proofs kept frame by frame (``gate_frames``): a change re-runs exactly the frames
whose key includes it.

The sources the keys are read from are a copy (``gate_cache.SOURCES`` points at it); each
test changes one thing in the copy (a rule, a helper some rules name, a helper a property
names, a lemma) and restores it. The code that runs is the checkout's, so a frame run again
gives the verdict it gave: what is checked is which frames run again.
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from wgk.conformance.reports import gate_cache, gate_frames, gate_mutants  # noqa: F401
from wgk.conformance.reports.gate_cache import GateCache
from wgk.conformance.reports.gate_model import frame_checks
from wgk.conformance.z3.prove import FAST, Prover, prove
from wgk.model.actions import Instance

from gate_sources import copied_sources, edit_function

INST = Instance.proof(tasks=1)


def _clear() -> None:
    gate_cache._functions.cache_clear()
    gate_cache._pieces.cache_clear()
    gate_cache.file_digest.cache_clear()


def _checks(report) -> list:
    """The gate's checks of a report, without their timings."""
    return [(c.name, c.verdict, c.detail, c.data, c.group) for c in frame_checks(report, 1)] + \
        [(n, ok, hint) for n, ok, _, hint in report.base_checks()]


class Frames:
    """``prove_kept`` over copied sources with a cache, noting the transitions it checked."""

    def __init__(self, tmp: Path):
        self.cache = tmp / "cache"
        self.sources = copied_sources(tmp)

    def path(self, name: str) -> Path:
        return self.sources[name.split("/")[0]] / name.split("/", 1)[1]

    def run(self, monkeypatch):
        monkeypatch.setattr(gate_cache, "SOURCES", self.sources)
        _clear()
        checked: list[str] = []
        real = gate_frames._transition

        def noted(prover, store, transition, key):
            checked.append(transition)
            return real(prover, store, transition, key)
        monkeypatch.setattr(gate_frames, "_transition", noted)
        report, store = gate_frames.prove_kept(INST, GateCache(self.cache, {"budget": "test"}))
        return report, store, checked

    def keys(self, monkeypatch) -> dict[str, str]:
        """Each unit's key (the transitions' and the init frames'), no frame checked."""
        from wgk.conformance.z3.prove import chain_deps
        from wgk.conformance.z3.symbolic import symbolic_graph
        from wgk.conformance.z3.transition import MODEL, actor_sensitive, discover_universe
        monkeypatch.setattr(gate_cache, "SOURCES", self.sources)
        _clear()
        graph = symbolic_graph(INST.task_names(), chain_deps(INST.tasks))
        store = gate_frames._store_for(GateCache(self.cache, {"budget": "test"}), INST,
                                       discover_universe(graph, INST.ids(), MODEL),
                                       actor_sensitive(graph, MODEL))
        prover, assumed = gate_frames.set_up(INST, store)
        out = {t: store.key(t, gate_frames.kind_name(t), assumed) for t in prover.transitions}
        out["init"] = store.init_key(assumed)
        return out


def _edit(path: Path, qual: str) -> str:
    """``edit_function``, the source caches cleared after it; the text before."""
    text = edit_function(path, qual)
    _clear()
    return text


@pytest.fixture(scope="module")
def frames(tmp_path_factory):
    return Frames(tmp_path_factory.mktemp("gate-frames"))


@pytest.fixture(scope="module")
def cold(frames):
    with pytest.MonkeyPatch.context() as mp:
        return frames.run(mp)


def test_every_frame_is_kept_and_reused_and_the_checks_are_those_of_prove(frames, cold,
                                                                         monkeypatch):
    report, store, checked = cold
    assert store.reused == 0 and store.ran > 1000 and len(checked) == len(set(checked)) > 40
    again, store2, checked2 = frames.run(monkeypatch)
    assert checked2 == [] and store2.ran == 0 and store2.reused == store.ran
    assert _checks(again) == _checks(report) == _checks(prove(INST))


def _one_kind(frames, monkeypatch, name: str, qual: str, expected: set[str]):
    keys = frames.keys(monkeypatch)
    before = _edit(frames.path(name), qual)
    try:
        changed = frames.keys(monkeypatch)
        # the init frames read what an environment step's do: reused
        assert {u for u in keys if keys[u] != changed[u]} == expected
        report, store, checked = frames.run(monkeypatch)
        assert set(checked) == expected
        assert store.reused == sum(1 for r in report.results if r.transition not in expected) \
            + (len(keys) - 1 - len(expected)) + len(report.init)      # + their enabledness
        assert _checks(report) == _checks(frames.run(monkeypatch)[0])
    finally:
        frames.path(name).write_text(before)
        _clear()
    assert frames.run(monkeypatch)[2] == []         # restored: the first entries hold again


def test_a_changed_rule_reruns_the_frames_of_its_kind_only(frames, cold, monkeypatch):
    _one_kind(frames, monkeypatch, "model/rules_attempt.py", "assign", {"assign"})


def test_a_changed_helper_reruns_the_frames_of_the_rules_that_name_it(frames, cold, monkeypatch):
    """``_done_and_unarchived`` is named by the archive, confirm-archive and propose-archive
    rules."""
    _one_kind(frames, monkeypatch, "model/rules_archive.py", "_done_and_unarchived",
              {"archive", "confirm-archive", "propose-archive"})


def test_a_helper_of_a_rule_a_property_runs_reruns_every_frame(frames, cold, monkeypatch):
    """``ready-iff-dispatch-admitted`` runs the dispatch rule: a helper of that rule is read
    by the assumptions of every frame (recorded while the prover is set up)."""
    keys = frames.keys(monkeypatch)
    before = _edit(frames.path("model/rules_attempt.py"), "_import_checks")
    try:
        changed = frames.keys(monkeypatch)
        assert all(keys[u] != changed[u] for u in keys)
    finally:
        frames.path("model/rules_attempt.py").write_text(before)
        _clear()
    assert frames.keys(monkeypatch) == keys


@pytest.mark.parametrize("name, qual", [
    ("model/rules_review.py", "evaluation_passed"),     # named by a property: every frame
    ("conformance/z3/lemmas.py", "receipts_follow_phase"),   # a lemma: assumed by every frame
    ("model/kernel.py", "decide_authenticated"),        # the kernel's checks
    ("model/env.py", "guard_and_update"),               # the environment's steps
])
def test_a_change_every_frame_reads_changes_every_key(frames, monkeypatch, name, qual):
    keys = frames.keys(monkeypatch)
    before = _edit(frames.path(name), qual)
    try:
        changed = frames.keys(monkeypatch)
        assert all(keys[u] != changed[u] for u in keys), name
    finally:
        frames.path(name).write_text(before)
        _clear()
    assert frames.keys(monkeypatch) == keys


def test_a_rule_files_constant_and_a_new_rule_file_change_every_key(frames, monkeypatch):
    keys = frames.keys(monkeypatch)
    path = frames.path("model/rules_pause.py")
    before = path.read_text()
    path.write_text(before + "\nEXTRA = 1\n")
    try:
        assert all(keys[u] != v for u, v in frames.keys(monkeypatch).items())
    finally:
        path.write_text(before)
    new = frames.path("model/rules_zzz.py")
    new.write_text("X = 1\n")
    try:
        assert all(keys[u] != v for u, v in frames.keys(monkeypatch).items())
    finally:
        new.unlink()
    assert frames.keys(monkeypatch) == keys


def _owner(qual: str) -> str:
    """The function whose own body holds code ``qual`` (a lambda or a comprehension is in
    the body of the function it is written in)."""
    while qual.rsplit(".", 1)[-1].startswith("<") and ".<locals>." in qual:
        qual = qual.rsplit(".<locals>.", 1)[0]
    return qual


def _chain_reach():
    """The model's transitions set up on the 1-task chain's symbolic graph, and the reach of
    the rule files' functions from each kind (``gate_frames.Reach``)."""
    from wgk.conformance.z3.prove import chain_deps
    from wgk.conformance.z3.symbolic import symbolic_graph
    from wgk.conformance.z3.transition import MODEL, actor_sensitive, discover_universe
    graph = symbolic_graph(INST.task_names(), chain_deps(INST.tasks))
    actor_sensitive(graph, MODEL)
    discover_universe(graph, INST.ids(), MODEL)
    files = gate_cache.source_files()
    reach = gate_frames.Reach(
        [(n, p) for n, p in files if gate_frames.RULE_FILES.fullmatch(n)],
        [(n, p) for n, p in gate_frames.imported(files)
         if not gate_frames.RULE_FILES.fullmatch(n)])
    return MODEL, reach


def test_what_the_prover_runs_of_the_rule_files_is_within_each_kinds_reach(monkeypatch):
    """Recorded transition by transition on the 1-task chain: its branches, its frames and its
    enabledness; every rule-file function that ran is in ``reach`` of that transition (the
    set-up is keyed by value: the universe, the kinds asking who sent, the assumptions'
    terms, which a property makes by running a rule: ``ready-iff-dispatch-admitted``)."""
    from types import SimpleNamespace
    from wgk.conformance.z3.basecase import enabledness
    MODEL, reach = _chain_reach()
    prover = Prover(INST, MODEL, transitions=(), params=FAST)
    outside = []
    for transition in prover.transitions:
        with gate_cache.recording() as ran:
            prover.build([transition])
            for p in prover.properties:
                prover.check(p, transition)
            enabledness(SimpleNamespace(groups={transition: prover.groups[transition]},
                                        sem=prover.sem, solver=prover.solver))
        allowed = reach.of(gate_frames.kind_name(transition))
        outside += [(transition, f, q) for f, quals in ran.items()
                    if gate_frames.RULE_FILES.fullmatch(f) for q in quals
                    if q != "<module>" and _owner(q) not in allowed[f]]
    assert not outside, outside[:5]
    assert any(q in reach.of("DISPATCH")["model/rules_attempt.py"]
               for q in ("_admission_checks", "_import_checks"))


def test_what_the_init_frames_run_of_the_rule_files_is_within_their_key(monkeypatch):
    """Recorded on the 1-task chain, the init frames (every state property on the initial
    state) run no rule-file function but those an environment step's frames can run
    (``reach.of(None)``) and those the prover's set-up ran (recorded, in their key through
    ``assumed``): ``ready-iff-dispatch-admitted`` runs the dispatch rule, which the set-up
    runs too."""
    from wgk.conformance.z3.basecase import init_frames
    MODEL, reach = _chain_reach()
    with gate_cache.recording() as set_up:
        prover = Prover(INST, MODEL, transitions=(), params=FAST)
    with gate_cache.recording() as ran:
        init = init_frames(prover)
    assert init and all(f.status == "proved" for f in init)
    allowed = reach.of(None)
    outside = [(f, q) for f, quals in ran.items() if gate_frames.RULE_FILES.fullmatch(f)
               for q in quals if q != "<module>" and _owner(q) not in allowed[f]
               and _owner(q) not in set_up.get(f, set())]
    assert not outside, outside[:5]
    # the set-up's part is not empty: a property runs the dispatch rule
    assert any(_owner(q) not in allowed[f] for f, quals in ran.items()
               if gate_frames.RULE_FILES.fullmatch(f) for q in quals if q != "<module>")


def test_a_damaged_entry_is_ignored_with_a_warning_and_checked_again(frames, cold, monkeypatch):
    # the entries the sources as they are read (a test before may have kept others, under edits),
    # of transitions (``run`` notes the transitions it checks, not the init frames)
    entries = sorted(p for p in (cold[1].dir / f"{k}.json" for unit, k in
                                 frames.keys(monkeypatch).items() if unit != "init")
                     if p.exists())
    assert len(entries) > 40
    victim = entries[0]
    good = victim.read_bytes()
    unit = json.loads(good)
    for damage in (good[:len(good) // 2], b"\x00garbage", json.dumps(
            dict(unit, format="wgk-proof-frames/0")).encode()):
        victim.write_bytes(damage)
        try:
            report, store, checked = frames.run(monkeypatch)
            assert len(checked) == 1 and len(store.warnings) == 1
            assert "ignored" in store.warnings[0] and "\n" not in store.warnings[0]
            assert _checks(report) == _checks(cold[0])
        finally:
            victim.write_bytes(good)


#: Witnesses whose recorded paths send ``assign`` (and dispatch, fail), ``reset`` alone, and
#: ``legacy-done`` alone (``conformance/z3/witness_paths.json``).
GOALS = ["repair-required-reached", "reset-reached", "needs-reconciliation-reached"]


@pytest.fixture(scope="module")
def witnesses(tmp_path_factory):
    """The witnesses of ``GOALS`` kept cold over copied sources: the cache, the sources, the
    reports."""
    tmp = tmp_path_factory.mktemp("gate-witnesses")
    sources = copied_sources(tmp)
    mp = pytest.MonkeyPatch()
    try:
        ran, reports = _witnesses(tmp / "cache", sources, mp)
    finally:
        mp.undo()
    return tmp / "cache", sources, ran, reports


def _witnesses(cache: Path, sources: dict, monkeypatch) -> tuple[list[str], list[dict]]:
    """``witnesses_kept(GOALS)``: the goals found again (not taken from the cache), the
    reports without their timings."""
    from wgk.conformance.z3 import witnesses
    monkeypatch.setattr(gate_cache, "SOURCES", sources)
    _clear()
    ran: list[str] = []
    real = witnesses.witness_reports

    def noted(goals, recorded=False):
        ran.extend(goals)
        return real(goals, recorded)
    monkeypatch.setattr(witnesses, "witness_reports", noted)
    store = SimpleNamespace(reused=0, ran=0, warnings=[], reach=SimpleNamespace(
        files=[(n, p) for n, p in gate_cache.source_files() if gate_frames.RULE_FILES.fullmatch(n)]))
    found = gate_frames.witnesses_kept(GOALS, GateCache(cache, {"budget": "test"}), store)
    assert store.ran == len(ran) and store.reused == len(GOALS) - len(ran) and not store.warnings
    return ran, [{k: v for k, v in w.items() if k != "seconds"} for w in found]


def test_each_witness_is_kept_and_rerun_only_when_a_kind_its_path_sends_changes(witnesses,
                                                                               monkeypatch):
    cache, sources, ran, reports = witnesses
    assert ran == GOALS and all(w["found_by"] == "recorded path" for w in reports)
    assert _witnesses(cache, sources, monkeypatch) == ([], reports)
    for name, qual, again in [("model/rules_attempt.py", "assign", ["repair-required-reached"]),
                              ("model/rules_operator.py", "reset", ["reset-reached"]),
                              ("model/rules_archive.py", "_done_and_unarchived", [])]:
        path = sources[name.split("/")[0]] / name.split("/", 1)[1]
        before = _edit(path, qual)
        try:
            assert _witnesses(cache, sources, monkeypatch) == (again, reports), qual
        finally:
            path.write_text(before)
            _clear()
    assert _witnesses(cache, sources, monkeypatch) == ([], reports)


@pytest.mark.parametrize("name, qual", [
    ("model/kernel.py", "decide_authenticated"),        # the executable model
    ("conformance/z3/unrolling.py", "Unrolling.extend"),  # the unrolling
    ("conformance/z3/witness_paths.json", None),        # the recorded paths
])
def test_a_change_every_witness_reads_reruns_every_witness(witnesses, monkeypatch, name, qual):
    cache, sources, _, reports = witnesses
    path = sources[name.split("/")[0]] / name.split("/", 1)[1]
    before = path.read_text()
    if qual is None:
        path.write_text(before.replace('"format"', ' "format"', 1))
    else:
        _edit(path, qual)
    try:
        assert _witnesses(cache, sources, monkeypatch) == (GOALS, reports), name
    finally:
        path.write_text(before)
        _clear()


def test_what_a_witness_runs_of_the_rule_files_is_within_its_dependencies(tmp_path):
    """Recorded goal by goal (what its unrolling's set-up finds by running every rule found
    first: keyed by value), every rule-file function a witness runs is among the functions
    its entry is kept with."""
    from wgk.conformance.z3.transition import MODEL, actor_sensitive, discover_universe
    from wgk.conformance.z3.witnesses import DEFAULT_WITNESS, WITNESSES, recorded_paths, \
        witness_reports
    context = gate_mutants.Context(tmp_path)
    paths = recorded_paths()
    outside = []
    for goal in GOALS + ["pid-reuse-detected", "compaction-continued"]:
        inst, _ = WITNESSES.get(goal, DEFAULT_WITNESS)
        graph = inst.initial().graph
        actor_sensitive(graph, MODEL)
        discover_universe(graph, inst.ids(), MODEL)
        with gate_cache.recording() as ran:
            [w] = witness_reports([goal], recorded=True)
        assert w["found_by"] == "recorded path"
        allowed = context.kinds_functions(gate_frames.path_kinds(paths[goal]))
        outside += [(goal, f, q) for f, quals in ran.items()
                    if gate_frames.RULE_FILES.fullmatch(f) for q in quals
                    if q != "<module>" and _owner(q) not in allowed[f]]
    assert not outside, outside[:5]
