"""The race incidents as real multi-process races on PostgreSQL: 8 processes, 100 rounds.

Every round must have exactly one winner; afterwards the ledger verifies with one
event per decision and the audit and rebuild are clean (``conformance.oracle.races``).
The last test shows the races can fail: without the row locks and the writes' conditions
the same runs have several winners a round.
"""
from __future__ import annotations

import pytest

from wgk.conformance.oracle.races import RACES, race

from pg_support import NO_CONDITIONS, pg_server  # noqa: F401  (fixture)


@pytest.mark.parametrize("name", RACES)
def test_each_race_has_exactly_one_winner_a_round(pg_server, name):
    result = race(pg_server, name, processes=8, rounds=100)
    assert result.ok, result.problems[:5]
    assert result.codes.get("applied") == 100
    assert sum(result.codes.values()) == 800


def test_without_row_locks_the_races_have_several_winners(pg_server, monkeypatch):
    """Neither the row locks nor the writes' conditions (without the locks alone, the
    conditions keep one winner: ``test_impl_conditional_writes``)."""
    from wgk.impl import pg
    monkeypatch.setattr(pg.PgStore, "row_locks", False)
    monkeypatch.setattr(pg.sql, "PG_MIGRATIONS", {**pg.sql.PG_MIGRATIONS, 2: [NO_CONDITIONS]})
    result = race(pg_server, "two-dispatchers", processes=8, rounds=10)
    assert not result.ok
    assert any("winners" in p for p in result.problems)
