"""The gate's sections on real effects: the environment contract and real races on SQLite.

Each planted bug is a real backend broken the way a real bug would break it; the
section that guards it must fail, naming the case."""
from __future__ import annotations

import pytest

from wgk.impl.world import git as git_mod, proc as proc_mod
from wgk.impl.storage import store as store_mod
from wgk.conformance.oracle.contract import contract_results
from wgk.conformance.oracle.races import race
from wgk.conformance.reports import gate


def broken(results) -> dict[str, str]:
    return {r.name: r.detail for r in results if not r.ok}


def test_every_real_backend_keeps_the_contract_of_its_double():
    results = contract_results()
    assert not broken(results)
    worlds = {(r.backend, r.world) for r in results}
    assert worlds == {("memory", "memory"), ("git", "real"), ("proc", "real"), ("sqlite", "real")}


def test_a_land_that_skips_the_ancestry_check_breaks_the_contract(monkeypatch):
    monkeypatch.setattr(git_mod.GitRepository, "descends", lambda self, commit, ancestor: True)
    bad = broken(contract_results())
    assert bad == {"repository: a land never drops a commit of the target [git]":
                   "a candidate that does not descend from its base was landed: the moved "
                   "target's commit is dropped"}


def test_a_store_acknowledging_before_the_disk_breaks_the_contract(monkeypatch):
    real_init = store_mod.Store.__init__

    def relaxed(self, path, **kw):          # the kernel's store opened with synchronous=NORMAL
        real_init(self, path, **dict(kw, pragmas=store_mod.Pragmas(synchronous="NORMAL")))
    monkeypatch.setattr(store_mod.Store, "__init__", relaxed)
    bad = broken(contract_results())
    assert list(bad) == ["store: a commit reaches the disk before it is acknowledged [sqlite]"]


def test_a_land_without_its_compare_and_swap_breaks_the_contract(monkeypatch):
    real_git = git_mod.GitRepository.git

    def forced(self, *args, **kw):           # update-ref of the target without the old value
        if args[:2] == ("update-ref", "--create-reflog"):
            args = args[:-1]
        return real_git(self, *args, **kw)
    monkeypatch.setattr(git_mod.GitRepository, "git", forced)
    bad = broken(contract_results())
    assert "repository: a moved target refuses the land [git]" in bad
    assert not any("[memory]" in name for name in bad)


def test_a_zombie_counted_as_alive_breaks_the_contract(monkeypatch):
    real_open = open

    def no_zombies(path, *a, **kw):          # /proc reports every exited child as sleeping
        f = real_open(path, *a, **kw)
        if str(path).endswith("/stat") and "/proc/" in str(path) and "b" in (a[0] if a else ""):
            data = f.read().replace(b") Z ", b") S ")
            f.close()
            import io
            return io.BytesIO(data)
        return f
    monkeypatch.setattr(proc_mod, "open", no_zombies, raising=False)
    bad = broken(contract_results())
    assert bad == {"processes: a zombie is not alive [proc]":
                   "a zombie (exited, not reaped) counts as a live owner"}


def test_the_race_incidents_have_one_winner_a_round_on_sqlite():
    for name in ("two-dispatchers", "reset-racing-completion", "two-terminal-reports"):
        r = race(None, name, processes=3, rounds=6)
        assert r.ok, r.problems
        assert r.codes.get("applied") == 6


def test_deferred_transactions_lose_the_race_on_sqlite(monkeypatch):
    monkeypatch.setattr(store_mod.Store, "begin", lambda self: self.conn.execute("BEGIN DEFERRED"))
    r = race(None, "two-dispatchers", processes=3, rounds=6)
    assert not r.ok and "database is locked" in r.problems[0]


def test_the_gate_runs_the_contract_and_the_races_and_says_on_what(monkeypatch):
    monkeypatch.setitem(gate.BUDGETS, "quick", {"contract": True,
                                                "races": {"processes": 2, "rounds": 3}})
    r = gate.run_gate("quick", traces=[str(gate.bundled_traces() / "incidents")])
    assert r.section("contract").verdict == "pass" and r.section("races").verdict == "pass"
    assert {c.data["world"] for c in r.section("contract").checks} == {"memory", "real"}
    assert {c.data["world"] for c in r.section("races").checks} == {"sqlite, real processes"}


@pytest.mark.parametrize("value", [{"processes": 0, "rounds": 3}, True])
def test_a_race_budget_of_the_wrong_shape_is_an_error(monkeypatch, value):
    monkeypatch.setitem(gate.BUDGETS, "quick", {"races": value})
    r = gate.run_gate("quick", traces=[str(gate.bundled_traces() / "incidents")])
    assert r.section("races").verdict == "error"
