"""wgk explore --workers: the model's work shared among processes gives the same result."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from wgk.conformance.check import workers
from wgk.conformance.check.explore import explore
from wgk.model.actions import Instance
from wgk.model.rules import RULES, guarded
from wgk.model.vocab import Code, Kind


def summary(r) -> tuple:
    return (r.distinct_states, r.transitions, r.complete, r.reached, r.unreached,
            [(v.invariant, v.path) for v in r.violations])


@pytest.fixture
def every_job_shared(monkeypatch):
    """Send every level's work to the workers, however small (the size at which a level is
    kept in the calling process would otherwise keep the small instances' work at home)."""
    monkeypatch.setattr(workers, "SMALLEST_SHARE", 2)


def dispatch_without_dependencies(s, i, t, r):
    g = RULES[Kind.DISPATCH](s, i, t, r)
    return guarded([c for c in g.checks if c[1] != Code.DEPENDENCY_NOT_DONE], g.update, g.kind)


def test_two_workers_find_the_same_states_transitions_goals_and_violations(every_job_shared):
    inst = Instance(tasks=2, groups=("core", "env"))
    one, two = explore(inst), explore(inst, workers=2)
    assert two.workers == 2 and one.workers == 1
    assert summary(two) == summary(one)
    assert one.distinct_states > 1000


def test_a_planted_bug_is_found_with_the_same_shortest_path(every_job_shared):
    bad = dict(RULES)
    bad[Kind.DISPATCH] = dispatch_without_dependencies
    inst = Instance(tasks=2, groups=("core", "operator"))
    one, three = explore(inst, rules=bad), explore(inst, rules=bad, workers=3)
    assert one.violations, "the planted bug must be found for the comparison to mean anything"
    assert summary(three) == summary(one)
    v = three.violations[0]
    assert v.steps and len(v.steps) == len(v.path)      # the steps came back from the workers


def test_a_search_until_violated_stops_early_with_the_whole_searchs_violation(every_job_shared):
    """``until_violated`` stops once a violation is found, on one worker or several: that
    violation (invariant, path, steps) is the whole search's, found in fewer states; without
    a violation the search is the whole search."""
    bad = dict(RULES)
    bad[Kind.DISPATCH] = dispatch_without_dependencies
    inst = Instance(tasks=2, groups=("core", "operator"))
    whole = explore(inst, rules=bad)
    for n in (1, 2):
        early = explore(inst, rules=bad, until_violated=True, workers=n)
        assert not early.complete and early.distinct_states < whole.distinct_states / 2, n
        first = whole.violations[0]
        assert [(v.invariant, v.path, v.steps) for v in early.violations] == \
            [(first.invariant, first.path, first.steps)], n
    clean = Instance(tasks=1)
    assert summary(explore(clean, until_violated=True)) == summary(explore(clean))


def test_the_liveness_graph_is_the_same(every_job_shared):
    inst = Instance(tasks=1)
    one, two = explore(inst, liveness=True), explore(inst, liveness=True, workers=2)
    assert summary(two) == summary(one)
    assert two.liveness.to_json() == one.liveness.to_json()
    assert two.liveness.components == one.liveness.components > 0


def test_max_states_stops_at_the_same_state(every_job_shared):
    inst = Instance(tasks=2, groups=("core", "env"))
    one, two = explore(inst, max_states=700), explore(inst, max_states=700, workers=2)
    assert not two.complete
    assert summary(two) == summary(one)


def test_a_failure_in_a_worker_is_raised_in_the_caller(every_job_shared):
    parent = os.getpid()

    def dispatch_failing_in_a_worker(s, i, t, r):
        if os.getpid() != parent:
            raise RuntimeError("planted failure in a worker")
        return RULES[Kind.DISPATCH](s, i, t, r)

    rules = dict(RULES)
    rules[Kind.DISPATCH] = dispatch_failing_in_a_worker
    explore(Instance(tasks=1, groups=("core",)), rules=rules)      # fine where it runs here
    with pytest.raises(RuntimeError, match="planted failure in a worker"):
        explore(Instance(tasks=2, groups=("core",)), rules=rules, workers=2)


def test_cli_workers_zero_is_every_core_and_a_count_out_of_range_is_refused():
    run = [sys.executable, "-m", "wgk.conformance", "explore", "--tasks", "1", "--groups",
           "core", "--no-liveness"]
    p = subprocess.run(run + ["--workers", "0", "--json"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    import json
    assert json.loads(p.stdout)["workers"] == workers.every_core()
    most = max(64, 4 * workers.every_core())
    for bad in ("-1", str(most + 1)):       # no count that would fork the machine to a halt
        p = subprocess.run(run + ["--workers", bad], capture_output=True, text=True)
        assert p.returncode == 2
        assert p.stderr.strip().splitlines() == [
            f"wgk explore: --workers must be 0 (every core) to {most}, got {bad}"]


@pytest.mark.parametrize("n", [1, 2])
def test_a_time_budget_stops_the_search_incomplete_and_says_what_waits(n, every_job_shared):
    inst = Instance(tasks=2, groups=("core", "env"))
    whole = explore(inst, workers=n, max_seconds=3600)
    assert whole.complete and whole.queued == 0 and "queued" not in whole.to_json()
    assert summary(whole) == summary(explore(inst))
    cut = explore(inst, workers=n, max_seconds=1e-9)
    assert not cut.complete and cut.to_json()["queued"] == cut.queued > 0
    assert cut.distinct_states < whole.distinct_states


def test_max_seconds_is_refused_unless_above_zero():
    for bad in ("0", "-1", "nan"):
        p = subprocess.run([sys.executable, "-m", "wgk.conformance", "explore", "--tasks", "1",
                            "--max-seconds", bad], capture_output=True, text=True)
        assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
        assert "--max-seconds must be above 0" in p.stderr
