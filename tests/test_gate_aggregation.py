"""Shapes that catch aggregation bugs: a fan-in whose dependents declare their dependencies
in every order, and batches whose members commit together."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

from wgk.conformance.oracle.batches import batch_replay
from wgk.conformance.oracle.impl_mutants_catalogue import MUTANTS_BY_NAME
from wgk.conformance.reports.impl_mutants import run_patches
from wgk.conformance.traces.format import load_trace

INCIDENTS = Path(__file__).resolve().parents[1] / "traces" / "incidents"
FAN_IN = INCIDENTS / "37-fan-in-every-order.json"
DIAMOND = INCIDENTS / "38-wide-diamond-joins-every-branch.json"
NAMES = INCIDENTS / "27-nested-and-clashing-names-refused.json"


def test_the_fan_in_trace_declares_three_dependencies_in_every_order():
    tasks = json.loads(FAN_IN.read_text())["graph"]["tasks"]
    orders = {tuple(t["deps"]) for t in tasks if set(t.get("deps", ())) == {"a", "b", "c"}}
    assert orders == set(itertools.permutations(["a", "b", "c"]))
    # and the wide diamond's branches are Done out of their declared order
    steps = json.loads(DIAMOND.read_text())["steps"]
    done = [s["request"]["task"] for s in steps if s.get("request", {}).get("kind") == "dispatch"
            and s["request"]["task"].startswith("b") and s["expect"]["decision"] == "applied"]
    assert done == ["b3", "b1", "b4", "b2"]


def test_admission_looking_at_one_dependency_fails_the_replay_of_the_fan_in_and_the_diamond():
    for name in ("admission-first-dependency", "admission-last-dependency"):
        m = MUTANTS_BY_NAME[name]
        r = run_patches(m.name, m.patches, budget="quick", sections=["replay"],
                        traces=[str(FAN_IN), str(DIAMOND)], timeout=300)
        assert r["verdict"] == "killed" and r["section"] == "replay", (name, r)


def test_an_unmutated_batch_never_recovers_a_split():
    r = batch_replay(load_trace(NAMES), size=3)
    assert r.cuts and not [d for c in r.cuts for d in c.divergences] and not r.divergences


def test_a_batch_whose_members_commit_one_by_one_is_a_split():
    m = MUTANTS_BY_NAME["batch-commits-each"]
    r = run_patches(m.name, m.patches, budget="quick", sections=["batches"], traces=[str(NAMES)],
                    timeout=300)
    assert r["verdict"] == "killed" and r["section"] == "batches", r
    assert "batch-split" in r["detail"], r
