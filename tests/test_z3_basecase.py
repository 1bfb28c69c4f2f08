"""The base case and the non-vacuity of the inductive proofs: init frames and enabledness,
each shown able to fail."""
from __future__ import annotations

from dataclasses import replace

from wgk.conformance.z3.basecase import enabledness, init_frames, initial_of
from wgk.conformance.z3.prove import DOMAIN, Prover
from wgk.conformance.z3.transition import Semantics
from wgk.model.actions import Instance
from wgk.model.env import EnvKind
from wgk.model.invariants import REGISTRY
from wgk.model.rules import RULES
from wgk.model.ruleset import guarded
from wgk.model.state import TaskState
from wgk.model.vocab import Code, Kind


def _state_ids(prover):
    return [p.id for p in prover.state_props]


def test_every_state_property_holds_in_the_initial_state():
    prover = Prover(Instance.proof(tasks=2))
    frames = init_frames(prover)
    assert [f.invariant for f in frames] == _state_ids(prover)
    assert DOMAIN.id in _state_ids(prover) and "done-iff-graphsave" in _state_ids(prover)
    assert all(f.status == "proved" for f in frames), [f.to_json() for f in frames]


def test_an_initial_state_that_breaks_an_invariant_fails_its_init_frame():
    prover = Prover(Instance.proof(tasks=2))
    start = initial_of(prover.space.graph)
    bad = replace(start, tasks=(start.tasks[0], replace(TaskState(), promotions=2)))
    frames = {f.invariant: f for f in init_frames(prover, bad)}
    f = frames["promotion-at-most-once"]
    assert f.status == "counterexample" and f.tasks == ("t2",)
    assert "promotions" in f.detail or f.detail
    assert frames["done-iff-graphsave"].status == "proved"


def test_a_bad_initial_state_through_the_prover_hook_fails_the_report():
    prover = Prover(Instance.proof(tasks=1))
    start = initial_of(prover.space.graph)
    bad = replace(start, tasks=(replace(TaskState(), promotions=3),))
    report = Prover(Instance.proof(tasks=1), initial=bad).run(only=["promotion-at-most-once"])
    assert not report.ok and not report.base_ok
    assert [f.invariant for f in report.init] == ["promotion-at-most-once"]
    data = report.to_json()
    assert data["init"][0]["status"] == "counterexample" and data["base_ok"] is False


def test_every_transition_is_enabled_under_the_invariants():
    prover = Prover(Instance.proof(tasks=2))
    checks = enabledness(prover)
    assert [e.transition for e in checks] == list(prover.groups)
    env = (EnvKind.EDIT, EnvKind.OWNER_DIES, EnvKind.PID_REUSE, EnvKind.MOVE_TARGET, EnvKind.TICK)
    assert {k.label for k in Kind} | {f"env:{k.label}" for k in env} <= {e.transition
                                                                       for e in checks}
    assert all(e.status == "enabled" and e.witness for e in checks), \
        [e.to_json() for e in checks if e.status != "enabled"]


def _never(kind):
    base = RULES[kind]

    def rule(s, i, t, r):
        g = base(s, i, t, r)
        return guarded([(False, Code.CAS_MOVED)] + list(g.checks), g.update, g.kind)
    return rule


def test_a_transition_whose_guard_is_unsatisfiable_fails_the_proof_naming_it():
    table = dict(RULES)
    table[Kind.SAVE_GRAPH] = _never(Kind.SAVE_GRAPH)
    report = Prover(Instance.proof(tasks=1), Semantics("never-saves", table)).run(
        only=["done-iff-graphsave"])
    bad = [e for e in report.enabled if e.status != "enabled"]
    assert [e.transition for e in bad] == ["save-graph"]
    assert all(r.status == "proved" for r in report.results)   # the frames alone pass ...
    assert not report.ok                                        # ... vacuously: the proof fails
    names = [name for name, ok, _, _ in report.base_checks() if not ok]
    assert names == ["save-graph enabled under the invariants"]


def test_prove_json_lists_init_frames_and_enabledness(capsys):
    from wgk.conformance.cli.main import main
    import json
    rc = main(["prove", "--tasks", "1", "--invariant", "receipts-fenced", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 0 and data["ok"] and data["base_ok"]
    assert [f["invariant"] for f in data["init"]] == ["receipts-fenced"]
    assert data["init"][0]["frame"] == "init" and data["init"][0]["status"] == "proved"
    assert {e["transition"] for e in data["enabled"]} >= {k.label for k in Kind}
    assert all(e["status"] == "enabled" for e in data["enabled"])
    assert REGISTRY["receipts-fenced"].kind == "always"
