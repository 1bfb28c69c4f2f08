"""Exploration: pinned state counts, violations found with shortest paths, CLI."""
from __future__ import annotations

import json
import subprocess
import sys

from wgk.conformance.check.explore import explore, to_dot
from wgk.model.actions import Instance
from wgk.model.invariants import REGISTRY
from wgk.model.rules import RULES, guarded
from wgk.model.vocab import Code, Kind

# Pinned distinct-state counts: a change to the model shows up here in review.
PINNED = {
    Instance(tasks=1): 2966,
    Instance(tasks=2): 62270,
}


# Pinned: the components of each explored graph that the liveness check examines (an
# infinite run could stay in them); none admits a fair run without progress.
PINNED_COMPONENTS = {
    Instance(tasks=1): 20,
    Instance(tasks=2): 230,
}


def test_pinned_state_counts_and_no_violation():
    for inst, count in PINNED.items():
        r = explore(inst, liveness=True)
        assert r.complete
        assert not r.violations, [v.to_json() for v in r.violations]
        assert r.distinct_states == count, (inst.describe(), r.distinct_states)
        assert r.liveness.violations == [], r.liveness.to_json()
        assert r.liveness.components == PINNED_COMPONENTS[inst], r.liveness.components


def test_sometimes_properties_are_reached():
    r = explore(Instance(tasks=2))
    for goal in ("done-reached", "dependent-done-reached", "needs-repair-reached",
                 "target-moved-reached", "lost-reached", "resume-reached", "pid-reuse-detected"):
        assert goal in r.reached, goal


def test_a_planted_bug_is_found_with_its_shortest_path():
    """Mutant: save-graph without checking receipts (incident 1, done without promotion)."""
    def save_graph_without_receipts(s, i, t, r):
        g = RULES[Kind.SAVE_GRAPH](s, i, t, r)
        return guarded([c for c in g.checks if c[1] != Code.EVIDENCE_MISSING], g.update, g.kind)

    # with the EDGES check still in place, skipping receipts needs a reachable
    # cleanup-committed without an effect receipt: drop the effect receipt too.
    def commit_effect_without_receipt(s, i, t, r):
        g = RULES[Kind.COMMIT_EFFECT](s, i, t, r)
        def update():
            s2 = g.update()
            t2 = s2.tasks[i]
            from dataclasses import replace
            from wgk.model.state import NO_RECEIPT
            from wgk.model.vocab import Receipt
            return s2.put(i, replace(t2, receipts=t2.with_receipt(Receipt.EFFECT, NO_RECEIPT)))
        return guarded(g.checks, update, g.kind)

    bad = dict(RULES)
    bad[Kind.SAVE_GRAPH] = save_graph_without_receipts
    bad[Kind.COMMIT_EFFECT] = commit_effect_without_receipt
    r = explore(Instance(tasks=1, groups=("core",)), rules=bad)
    ids = {v.invariant for v in r.violations}
    assert "done-iff-graphsave" in ids
    v = next(v for v in r.violations if v.invariant == "done-iff-graphsave")
    assert v.path[0].startswith("dispatch(t1)") and v.path[-1].startswith("save-graph(t1)")
    assert len(v.path) == 13          # the shortest path: dispatch + the 12 main-line edges


def test_dot_export():
    r = explore(Instance(tasks=1, groups=("core",)), keep_graph=True, max_states=30)
    dot = to_dot(r.graph)
    assert dot.startswith("digraph") and "->" in dot


def test_registry_covers_the_brief():
    brief = ["done-iff-graphsave", "dependency-needs-done", "legacy-never-satisfies",
             "attempt-fencing", "single-live-owner", "first-terminal-wins",
             "terminal-never-resurrects", "evidence-cannot-terminalize-live-owner",
             "promotion-at-most-once", "promotion-needs-review-of-exact-candidate",
             "cas-base-exact", "no-phase-skip", "idempotent-replay", "idempotency-conflict-holds",
             "exactly-one-way-forward", "no-dead-owner-in-progress-without-action",
             "compaction-occurrences-counted-once", "retained-work-never-erased",
             "retry-is-not-continuation-without-proof"]
    for pid in brief:
        assert pid in REGISTRY and REGISTRY[pid].kind == "always", pid
    for p in REGISTRY.values():
        assert p.doc.endswith(".") and p.doc.count(". ") == 0, p.id   # one sentence
    assert sum(p.kind == "sometimes" for p in REGISTRY.values()) >= 10


def test_explore_cli_json_and_exit_codes():
    out = subprocess.run([sys.executable, "-m", "wgk.conformance", "explore", "--tasks", "1",
                          "--json"], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["distinct_states"] == PINNED[Instance(tasks=1)]
    assert data["violations"] == [] and data["seconds"] >= 0
    bad = subprocess.run([sys.executable, "-m", "wgk.conformance", "explore", "--tasks", "0"],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "--tasks" in bad.stderr


def test_explore_help_shows_an_example():
    out = subprocess.run([sys.executable, "-m", "wgk.conformance", "explore", "--help"],
                         capture_output=True, text=True, check=True)
    assert "wgk explore --tasks 2" in out.stdout


def test_explore_checks_only_the_invariants_asked_for():
    from wgk.conformance.cli.main import main
    import io, contextlib
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["explore", "--tasks", "1", "--json", "--invariant", "done-iff-graphsave"])
    data = json.loads(out.getvalue())
    assert code == 0 and data["distinct_states"] == PINNED[Instance(tasks=1)]
    assert data["sometimes_reached"] == [] and data["sometimes_unreached"] == []


def test_the_local_context_holds_what_a_reopen_reads():
    """A reopen reads its dependents and a dependent's effect its dependencies' generations:
    the explorer's local context holds both, so a reopen under a Done dependent stays
    refused and a legacy Done is reopened, proven again and followed by its dependent."""
    inst = Instance(tasks=2, generations=2, groups=("core", "legacy", "reopen"))
    r = explore(inst, max_states=40_000)
    assert not r.violations, [v.to_json() for v in r.violations]
    assert "dependent-reruns-after-reopen" in r.reached
