"""The implementation against the model on random request sequences.

Every request goes to both; decisions must be equal and, after every step,
the observable projections must be equal field by field. Environment steps
(edit, owner death, pid reuse, target movement, ticks), key replays, key
conflicts, restarts of the implementation from its database and convergence
runs (whose requests the model decides too) are mixed in.
"""
from __future__ import annotations

import random

import pytest

from test_impl_pairing import Pair, RandomClient, diff, random_specs, temp_db
from wgk.impl import TaskPolicy


def run(tmp_path, seed: int, steps: int, initial: dict | None = None) -> Pair:
    rng = random.Random(seed)
    specs = random_specs(rng)
    if initial is not None:
        specs = [TaskPolicy(s.name, s.deps if s.name not in initial else (),
                            s.review_required, s.requires_assignment) for s in specs]
        initial = {n: v for n, v in initial.items() if n in {s.name for s in specs}}
    pair = Pair(specs, temp_db(tmp_path, f"k{seed}.db"), initial=initial or {})
    client = RandomClient(pair, rng)
    try:
        assert not diff(*pair.projections()), "the seeded states differ"
        for step in range(steps):
            roll = rng.random()
            if roll < 0.18:
                pair.env(client.env_step())
            elif roll < 0.21:
                pair.restart()
            elif roll < 0.26:
                report = pair.impl.converge()
                for sent in report.sent:
                    md = pair.model.apply(__import__("test_impl_pairing").to_model(
                        sent.request, pair.names)).to_json()
                    assert md == sent.response, (seed, step, sent.request, md, sent.response)
                    pair.history.append(sent.request)
            else:
                wire = client.request()
                md, idec = pair.send(wire)
                assert md == idec, (seed, step, wire, md, idec)
            model_view, impl_view = pair.projections()
            problems = diff(model_view, impl_view)
            assert not problems, (seed, step, pair.history[-1], problems[:8])
        rebuilt = pair.impl.rebuild()
        assert rebuilt.ok, rebuilt.differences
        audited = pair.impl.audit()
        assert audited.ok, [f.to_json() for f in audited.findings]
        return pair
    finally:
        pair.close()


@pytest.mark.parametrize("seed", range(40))
def test_random_sequences_agree_with_the_model(tmp_path, seed):
    run(tmp_path, seed, 120)


SEEDS = [
    {"a": {"attempt": {"generation": 0, "attempt": 1, "fence": 1, "lease-epoch": 1,
                       "owner": {"pid": 4242, "birth": 9, "session": "s1"}, "worktree": "main-0"}}},
    {"a": {"attempt": {"generation": 0, "attempt": 6, "fence": 10, "lease-epoch": 6,
                       "state": "none"}}},
    {"a": {"attempt": {"generation": 2, "attempt": 3, "fence": 7, "lease-epoch": 4,
                       "owner": {"pid": 4243, "birth": 5, "session": "s2", "wrapper-epoch": 2,
                                 "child-epoch": 3},
                       "worktree": "c1", "origin": "main-0", "alive": False}}},
    {"a": {"attempt": {"generation": 0, "attempt": 1, "fence": 1, "lease-epoch": 1,
                       "state": "failed", "owner-seen": "dead"}},
     "b": {"attempt": {"generation": 1, "attempt": 1, "fence": 2, "lease-epoch": 2,
                       "owner": {"pid": 4244, "birth": 6, "session": "s1"},
                       "owner-seen": "suspect", "leases": {"worktree": True, "session": False,
                                                           "finish": False}}}},
]


@pytest.mark.parametrize("case", range(len(SEEDS)))
@pytest.mark.parametrize("seed", range(5))
def test_seeded_initial_attempts_agree_with_the_model(tmp_path, case, seed):
    """Every initial fact a trace may give seeds the same state in both."""
    run(tmp_path, 1000 + seed, 60, initial=SEEDS[case])
