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


def run(tmp_path, seed: int, steps: int) -> Pair:
    rng = random.Random(seed)
    pair = Pair(random_specs(rng), temp_db(tmp_path, f"k{seed}.db"))
    client = RandomClient(pair, rng)
    try:
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
