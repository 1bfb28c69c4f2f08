"""Every write of a task record is conditional on the stamp it was read with (``tables.STAMP``).

The locks (SQLite's writer lock, PostgreSQL's row locks) already keep a decision's facts
still while it is made; the write's own condition is the second line: a decision made on
facts the database no longer holds is not written but made again on the stored facts.
Each test stages a decision on stale facts for real (a second connection's commit the
first does not see, or races with the row locks taken away) and also runs it with the
condition disabled, to show it is the condition that keeps one winner.
"""
from __future__ import annotations

import sqlite3

import pytest

from wgk.conformance.oracle import races
from wgk.impl import Kernel, MemoryWorld, TaskPolicy
from wgk.impl.storage import pg, tables
from wgk.impl.storage.records import changed, evolve

from pg_support import NO_CONDITIONS, pg_server  # noqa: F401  (fixture)


def dispatch(i: int) -> dict:
    return races.request("two-dispatchers", "a", i)


#: A dispatch's statement without the admission it carries (``tables.OPEN_IF_ADMITTED``): its
#: parameters bound, compared with nothing; with it, a stale dispatch is refused by the
#: statement before the stamp's condition is reached.
UNCONDITIONAL_DISPATCH = (tables.OPEN_IF_ADMITTED.split(" WHERE ")[0] + " WHERE id = ? AND "
                          + " AND ".join(["(CAST(? AS TEXT) IS NULL OR 1 = 1)"] * 4))


def without_the_dispatch_statements_conditions(monkeypatch) -> None:
    monkeypatch.setattr(tables, "OPEN_IF_ADMITTED", UNCONDITIONAL_DISPATCH)


def stale_second_dispatch(tmp_path, condition: bool, monkeypatch=None) -> tuple[dict, dict, Kernel]:
    """Two kernels on one SQLite file; the second never notices the first's commit (its
    cache check is switched off) and dispatches the task the first already dispatched."""
    db = str(tmp_path / "kernel.db")
    world = MemoryWorld.create(target="main-0")
    first = Kernel(db, world.environment())
    first.create_graph("g", [TaskPolicy("a")])
    second = Kernel(db, world.environment())
    assert second.record("a").fence == 0                       # cached: nothing dispatched
    second.cache.sync = lambda: False                          # it never sees other commits
    if not condition:
        second.store.conn.create_function("wgk_expect", 1, lambda held: 1)
        without_the_dispatch_statements_conditions(monkeypatch)
    won = first.handle(dispatch(1))
    late = second.handle(dispatch(2))
    return won, late, first


def test_a_decision_on_stale_facts_is_made_again_on_the_stored_ones(tmp_path):
    won, late, k = stale_second_dispatch(tmp_path, condition=True)
    assert won["decision"] == "applied"
    assert late["decision"] == "rejected" and late["code"] in ("cas-moved", "attempt-live")
    k._forget()
    assert k.record("a").owner_pid == races._owner(1)["pid"]   # the winner's attempt stands
    assert k.audit().findings == [] and k.rebuild().ok


def test_without_the_condition_the_stale_decision_overwrites_the_winner(tmp_path, monkeypatch):
    won, late, k = stale_second_dispatch(tmp_path, condition=False, monkeypatch=monkeypatch)
    assert won["decision"] == "applied" and late["decision"] == "applied"   # two winners
    k._forget()
    assert k.record("a").owner_pid == races._owner(2)["pid"]   # the first attempt is gone


def test_a_write_over_a_record_that_moved_is_refused_by_the_statement_itself(tmp_path):
    """The condition is in the statement: the first kernel's write of a record read before
    the second kernel's commit fails, writes nothing, and is a failure the request path runs
    again."""
    db = str(tmp_path / "kernel.db")
    world = MemoryWorld.create(target="main-0")
    first = Kernel(db, world.environment())
    first.create_graph("g", [TaskPolicy("a")])
    second = Kernel(db, world.environment())
    read = first.record("a")
    assert second.handle(dispatch(2))["decision"] == "applied"
    stolen = evolve(read, fence=1, attempt=1)
    with pytest.raises(sqlite3.OperationalError) as failed:
        with first.store.atomic():
            first.tables.save(first.ids()["a"], read, stolen, changed(read, stolen), 0)
    assert first.store.retryable(failed.value)
    assert first.conn.execute("SELECT t.fence, s.stamp FROM tasks t JOIN transactions s "
                              "ON s.task = t.id WHERE t.name = 'a'").fetchone() == (1, 1)
    first._forget()
    assert first.record("a").owner_pid == races._owner(2)["pid"]


# --- PostgreSQL: the race incidents with the row locks taken away ---------------------------

@pytest.mark.parametrize("name", races.RACES)
def test_races_without_row_locks_keep_one_winner_by_the_writes_conditions(pg_server, name):
    result = races.race(pg_server, name, processes=8, rounds=100, row_locks=False)
    assert result.ok, result.problems[:5]
    assert sum(result.codes.values()) == 8 * 100 and result.codes["applied"] == 100


def test_races_without_row_locks_or_conditions_give_several_winners(pg_server, monkeypatch):
    monkeypatch.setattr(pg.sql, "PG_MIGRATIONS", {**pg.sql.PG_MIGRATIONS, 2: [NO_CONDITIONS]})
    without_the_dispatch_statements_conditions(monkeypatch)
    result = races.race(pg_server, "two-dispatchers", processes=8, rounds=30, row_locks=False)
    assert not result.ok
    assert any("winners" in p for p in result.problems), result.problems[:5]


def test_sqlite_has_no_row_locks_to_take_away():
    with pytest.raises(ValueError, match="writer lock"):
        races.race(None, "two-dispatchers", row_locks=False)


def test_the_gates_races_on_postgresql_run_with_and_without_row_locks(pg_server, monkeypatch):
    from wgk.conformance.reports import gate, gate_real
    monkeypatch.setitem(gate.BUDGETS, "quick", {"races": {"processes": 4, "rounds": 10,
                                                          "deadlocks": 2}})
    checks = gate_real.race_checks("quick", None, backend=pg_server)
    # three races in each of three worlds, and the two dependency races where rows are locked
    assert [c.verdict for c in checks] == ["pass"] * 13
    assert [c.group for c in checks].count("postgresql, no row locks") == 3
    assert {c.name for c in checks} >= {"reopen-racing-admission (postgresql)",
                                        "crossed-batches (postgresql)",
                                        "reopen-racing-admission (sqlite)"}
    monkeypatch.setattr(pg.sql, "PG_MIGRATIONS", {**pg.sql.PG_MIGRATIONS, 2: [NO_CONDITIONS]})
    without_the_dispatch_statements_conditions(monkeypatch)
    unguarded = gate_real.race_checks("quick", None, backend=pg_server)
    assert "fail" in {c.verdict for c in unguarded if c.group == "postgresql, no row locks"}


def test_a_task_without_its_stamp_is_a_one_line_store_error(tmp_path):
    from wgk.impl.contract.errors import StoreError
    world = MemoryWorld.create(target="main-0")
    k = Kernel(str(tmp_path / "kernel.db"), world.environment())
    k.create_graph("g", [TaskPolicy("a")])
    k.conn.execute("DELETE FROM transactions")
    k._forget()
    with pytest.raises(StoreError, match="task 1: no row in tasks or transactions"):
        k.record("a")
