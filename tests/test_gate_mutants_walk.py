"""A mutant's proof walk kept transition by transition (``gate_mutants.kept_refute``): after a
change to one rule, a mutant whose kill read it checks again only the frames whose key changed,
and its verdict line is the one a run without the cache gives (a kind that now fails first
included)."""
from __future__ import annotations

import dataclasses

import pytest

from wgk.conformance.oracle.mutant_traces import trace_verdicts
from wgk.conformance.reports import gate_mutants
from wgk.conformance.z3 import kills, model_base, mutants, transition as tr
from wgk.conformance.z3.prove import Prover, chain_deps
from wgk.conformance.z3.symbolic import symbolic_graph
from wgk.model.actions import Instance
from wgk.model.vocab import Kind

from gate_sources import plain_report
from test_gate_frames import _clear, _edit
from test_gate_mutants import Runs

#: patches a function every kind reaches: its walk goes through the kinds from ``assign``
KERNEL = "stale-capability-accepted"
RULE = ("model/rules_attempt.py", "assign")


class Checked:
    """The frames checked (property, transition) while inside, noted on ``Prover.check``;
    ``failing``: frames made to fail (as if the model's rule now broke the property there)."""

    def __init__(self, monkeypatch, failing=()):
        self.frames: list[tuple[str, str]] = []
        self.failing = set(failing)
        real = Prover.check

        def check(prover, prop, transition, *args, **kw):
            self.frames.append((prop.id, transition))
            r = real(prover, prop, transition, *args, **kw)
            if (prop.id, transition) in self.failing:
                r = dataclasses.replace(r, status="counterexample")
            return r
        monkeypatch.setattr(Prover, "check", check)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return Runs(tmp_path_factory.mktemp("gate-mutants-walk"))


@pytest.fixture(scope="module")
def cold(runs):
    with pytest.MonkeyPatch.context() as mp:
        return runs.gate(mp)


def _line(result, name: str) -> str:
    [c] = [c for c in result.checks if c.section == "mutants" and c.name == name]
    return c.detail


def test_a_changed_rule_checks_again_only_its_frames_of_a_kept_walk(runs, cold, monkeypatch):
    assert cold.verdict == "pass"
    assert _line(cold, KERNEL).startswith("killed by proof:attempt-fencing@resume")
    assert "assign" in runs.deps[KERNEL]["model/rules_attempt.py"]
    before = _edit(runs.path(RULE[0]), RULE[1])
    try:
        checked = Checked(monkeypatch)
        result = runs.gate(monkeypatch)
        assert KERNEL in runs.ran
        # the mutant's walk: the assign frame checked again, the later ones kept
        assert checked.frames == [("attempt-fencing", "assign")]
        assert plain_report(result.to_json()) == plain_report(cold.to_json())
    finally:
        runs.path(RULE[0]).write_text(before)
        _clear()


def _tagged(path, qual: str, tag: str) -> str:
    """Add ``_changed = tag`` to the body of ``qual`` (each tag another text); the text before."""
    before = _edit(path, qual)
    path.write_text(path.read_text().replace("_changed = 1\n", f"_changed = {tag!r}\n", 1))
    _clear()
    return before


def test_a_kind_failing_first_after_the_change_gives_the_new_first_kill(runs, cold, monkeypatch):
    """``assign`` made to break the property (its text changed in the copy, its frame made to
    fail): the kept walk reports the kill at ``assign``, as the gate without the cache does.
    With a key that leaves the changed kind out, the kept walk says the recorded kill at
    ``resume``: wrong."""
    path = runs.path(RULE[0])
    before = _tagged(path, RULE[1], "fails")
    # the model's frames a run without the cache shares are kept for the process
    # (``model_base``): another test of this process may have proved ``assign``'s already
    monkeypatch.setattr(model_base, "_BASES", {})
    try:
        checked = Checked(monkeypatch, failing={("attempt-fencing", "assign")})
        kept = runs.gate(monkeypatch)
        assert KERNEL in runs.ran
        plain = runs.gate(monkeypatch, cache=False)
        assert _line(plain, KERNEL).startswith("killed by proof:attempt-fencing@assign")
        assert _line(kept, KERNEL) == _line(plain, KERNEL)
        assert plain_report(kept.to_json()) == plain_report(plain.to_json())
        # the guard broken: no kind's digest reads the rule files
        monkeypatch.setattr(gate_mutants.Context, "kind_digest", lambda self, kind: "blind")
        checked.failing.clear()
        path.write_text(before)
        _tagged(path, RULE[1], "blind-1")
        assert _line(runs.gate(monkeypatch), KERNEL) == _line(cold, KERNEL)
        path.write_text(before)
        _tagged(path, RULE[1], "blind-2")
        checked.failing.add(("attempt-fencing", "assign"))
        blind = runs.gate(monkeypatch)
        assert KERNEL in runs.ran
        assert _line(blind, KERNEL) == _line(cold, KERNEL) != _line(plain, KERNEL)
    finally:
        path.write_text(before)
        _clear()


def test_a_damaged_walk_is_ignored_with_a_warning_and_the_report_is_the_same(runs, cold,
                                                                             monkeypatch):
    walks = sorted((runs.cache / "mutants" / "walks").glob("*.json"))
    assert walks
    kept = {w: w.read_bytes() for w in walks}
    for w, good in kept.items():
        w.write_bytes(good[:len(good) // 2])
    before = _tagged(runs.path(RULE[0]), RULE[1], "damaged")
    try:
        result = runs.gate(monkeypatch)
        warnings = [w for w in result.cache["warnings"] if " walk) ignored" in w]
        assert warnings and all("\n" not in w for w in warnings)
        assert plain_report(result.to_json()) == plain_report(cold.to_json())
    finally:
        runs.path(RULE[0]).write_text(before)
        _clear()


@pytest.mark.parametrize("name", [KERNEL, "dead-owner-stays-in-progress", "replay-reexecutes-effect",
                                  "reset-before-owner-exit"])
def test_the_set_up_found_kind_by_kind_is_the_mutants_prover_set_up(name):
    """What the kept walk rests on: the kinds asking who and the evidence universe found kind
    by kind under the mutant make up what its prover's set-up finds for every kind at once."""
    m = mutants.MUTANTS[name]
    inst = Instance.proof(tasks=m.instance.tasks)
    graph = symbolic_graph(inst.task_names(), chain_deps(inst.tasks))
    sem = m.semantics()
    who = frozenset().union(*(tr._actor_sensitive(graph, sem, frozenset({k})) for k in Kind))
    assert who == tr._actor_sensitive(graph, sem)
    tr._cached(sem, "by-actor", lambda: who)
    logs = tr._logs_by_kind(graph, inst.ids(), sem)
    assert tr.universe_of(logs, inst.ids()) == tr._discover(graph, inst.ids(), m.semantics())


@pytest.mark.parametrize("name", [KERNEL, "dead-owner-stays-in-progress", "replay-reexecutes-effect",
                                  "reset-before-owner-exit"])
def test_a_kept_walk_finds_the_staged_walks_first_failure(name, tmp_path):
    m = mutants.MUTANTS[name]
    staged = kills.refute(m)
    ctx = gate_mutants.Context(tmp_path)
    for _ in range(2):                                  # walked, then taken from the record
        with gate_mutants.walk_kept(ctx, m):
            k = kills.first_kill(m, traces=trace_verdicts)
        assert (k.proof.invariant, k.proof.transition, k.proof.status) == \
            (staged.invariant, staged.transition, staged.status)
    assert not ctx.warnings and kills.refute.__module__ == kills.__name__


def test_the_models_set_up_is_kept_kind_by_kind(tmp_path, monkeypatch):
    """The model's set-up made from its parts kept kind by kind is ``kind_setup``'s; a kind
    whose digest changed is found again alone; with a key that leaves the kind out, a change
    of what its rule records would not be seen."""
    monkeypatch.setattr(tr, "_CACHE", {})             # the model's values of this test only
    assert gate_mutants.Context(tmp_path).kind_setup(1) == gate_mutants.kind_setup(1)
    found: list[set[str]] = []
    real_logs, real_digest = tr._logs_by_kind, gate_mutants.Context.kind_digest

    def logs(graph, ids, sem, kinds=None, around=None):
        found.append({k.name for k in kinds} if kinds is not None else {"every"})
        out = real_logs(graph, ids, sem, kinds, around)
        if Kind.ASSIGN in out:                          # as if assign recorded one more pair
            out[Kind.ASSIGN] = out[Kind.ASSIGN] | {("assign-new", "e1")}
        return out
    changed = lambda self, k: real_digest(self, k) + ("x" if k == "ASSIGN" else "")  # noqa: E731
    blind = lambda self, k: "blind"                                                    # noqa: E731
    for digest, logged, seen in ((changed, logs, [{"ASSIGN"}]),     # assign's text changed
                                 (blind, real_logs, None),          # the guard broken ...
                                 (blind, logs, [])):                # ... a change not seen
        monkeypatch.setattr(tr, "_CACHE", {})
        monkeypatch.setattr(tr, "_logs_by_kind", logged)
        monkeypatch.setattr(gate_mutants.Context, "kind_digest", digest)
        found.clear()
        setup = gate_mutants.Context(tmp_path).kind_setup(1)
        if seen is not None:
            assert found == seen
            assert (["'assign-new'", "'e1'"] in setup["ASSIGN"][1]) == bool(seen)
