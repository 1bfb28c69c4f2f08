"""The races over the rows a decision reads (``wgk.conformance.oracle.dependency_races``):
a dependency's reopen against its dependents' admissions, and batches crossing two tasks
in opposite orders. They hold on SQLite and PostgreSQL; on PostgreSQL the first fails
when the dependency rows are not locked during an admission, and the second when a
deadlock is not run again (both planted here as the catalogue plants them)."""
from __future__ import annotations

import pytest

from wgk.conformance.oracle.dependency_races import DEPENDENCY_RACES, dependency_race
from wgk.impl.storage import pg

from pg_support import pg_dsn, pg_server  # noqa: F401  (fixtures)


@pytest.fixture(params=["sqlite", "postgresql"])
def dsn(request):
    return None if request.param == "sqlite" else request.getfixturevalue("pg_dsn")


@pytest.mark.parametrize("name", DEPENDENCY_RACES)
def test_the_races_hold_on_both_backends(dsn, name):
    r = dependency_race(dsn, name, processes=3, rounds=8 if name.startswith("reopen") else 2)
    assert r.ok, r.problems
    if name == "reopen-racing-admission":
        assert r.codes.get("applied", 0) >= 8          # every reopen, and what came before it
    else:
        assert r.codes.get("applied") == 4            # one winner per task and round


def test_an_admission_without_its_dependency_locks_is_caught(pg_dsn, monkeypatch):
    """The dependency rows not locked (the workers are forked: they take the patch along)."""
    def unlocked(store, task_id, deps, sync):
        tid = task_id()
        if tid is not None:
            store.lock_tasks([tid])
        return sync()
    monkeypatch.setattr(pg.PgStore, "lock_request", unlocked)
    r = dependency_race(pg_dsn, "reopen-racing-admission", processes=3, rounds=20)
    assert not r.ok
    assert any("after its dependency" in p and "was reopened" in p for p in r.problems), r.problems


def test_a_deadlock_not_run_again_is_caught(pg_dsn, monkeypatch):
    monkeypatch.setattr(pg.PgStore, "retryable", lambda self, e: False)
    r = dependency_race(pg_dsn, "crossed-batches", processes=2, rounds=3)
    assert not r.ok
    assert any("DeadlockDetected" in p or "deadlock" in p.lower() for p in r.problems), r.problems


def test_an_unknown_race_is_refused():
    with pytest.raises(ValueError, match="unknown race"):
        dependency_race(None, "nope")


def test_mutants_take_a_backend_only_with_impl(capsys):
    from wgk.conformance.cli.main import main
    code = main(["mutants", "--backend", "postgresql://nobody@127.0.0.1:1/none"])
    err = capsys.readouterr().err
    assert code == 2 and "--backend" in err and "--impl" in err and err.count("\n") == 1
    code = main(["mutants", "--impl", "--only", "pg-dependencies-unlocked", "--backend", "nope"])
    err = capsys.readouterr().err
    assert code == 2 and "expected sqlite or a postgresql:// DSN" in err and err.count("\n") == 1
