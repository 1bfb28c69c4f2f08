"""The race incidents as real multi-process races on PostgreSQL: 8 processes, 100 rounds.

Every round must have exactly one winner; afterwards the ledger verifies with one
event per decision and the audit and rebuild are clean (``conformance.oracle.races``).
That the races can fail (without the row locks and the writes' conditions the same runs
have several winners a round) is shown in ``test_impl_conditional_writes``, beside the
runs without the row locks that the conditions alone keep to one winner.
"""
from __future__ import annotations

import pytest

from wgk.conformance.oracle.races import RACES, race

from pg_support import pg_server  # noqa: F401  (fixture)


@pytest.mark.parametrize("name", RACES)
def test_each_race_has_exactly_one_winner_a_round(pg_server, name):
    result = race(pg_server, name, processes=8, rounds=100)
    assert result.ok, result.problems[:5]
    assert result.codes.get("applied") == 100
    assert sum(result.codes.values()) == 800
