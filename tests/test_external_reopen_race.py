"""A reopen racing its dependents' effects between instances of a served kernel on one
storage, judged from the answers alone (``reopen-racing-effect``): wgk's kernel passes on a
SQLite file and on PostgreSQL; with the dependency rows left unlocked on PostgreSQL (the
planted bug ``pg-dependencies-unlocked``) a reopen and a dependent's effect are both applied
in one round, which no order of the two allows."""
from __future__ import annotations

import sys

from wgk.conformance.oracle.external_reopen_race import (
    NAME, NEEDS, dispatch, edge, EFFECT, judge, missing, reopen, reopen_race_external,
)
from wgk.conformance.oracle.external_runs import Kernel
from wgk.conformance.oracle.impl_mutants import materialize
from wgk.conformance.oracle.impl_mutants_catalogue import MUTANTS_BY_NAME
from wgk.conformance.oracle.races import RaceResult

from pg_support import server

SERVED = f"{sys.executable} -m wgk.impl.serve"


def test_wgks_kernel_passes_the_race_on_sqlite_and_postgresql():
    for command in (SERVED, f"{SERVED} --postgres {server()}"):
        r = reopen_race_external(Kernel(command), processes=3, rounds=4)
        assert r.ok, (command, r.problems)
        assert sum(r.codes.values()) == 4 * 5           # a reopen, two effects, two dispatches
        assert r.codes.get("applied", 0) >= 4


def test_dependency_rows_left_unlocked_on_postgresql_are_seen_from_the_answers(tmp_path):
    m = MUTANTS_BY_NAME["pg-dependencies-unlocked"]
    copy = materialize(m.patches, tmp_path / "copy", m.name)
    kernel = Kernel(f"env PYTHONPATH={copy} {SERVED} --postgres {server()}")
    for _ in range(5):    # a race: most runs of 12 rounds see it, and five runs make a miss rare
        r = reopen_race_external(kernel, processes=3, rounds=12)
        if not r.ok:
            break
    assert not r.ok
    assert any("were both answered applied" in p for p in r.problems), r.problems


def _answer(task: str, wire: dict, decision: str, code: str = "", at: float = 0.0) -> dict:
    a = {"decision": decision} | ({"code": code} if code else {})
    return {"request": wire, "answer": a, "sent": at, "answered": at + 0.01}


def test_the_judgement_refuses_every_round_no_order_allows():
    def round_of(reopened: str, effect: str, late: str, late_at: float = 1.0) -> list[str]:
        r = RaceResult(NAME, 2, 1)
        judge(r, {(0, 0, "reopen"): _answer("d0", reopen("d0"), *reopened.split(":")),
                  (0, 1, "effect"): _answer("e0-1", edge("e0-1", EFFECT), *effect.split(":")),
                  (0, 1, "dispatch"): _answer("u0-1", dispatch("u0-1", 1), *late.split(":"),
                                              at=late_at)})
        return r.problems
    assert round_of("applied", "rejected:dependency-reopened", "rejected:dependency-not-done") == []
    assert round_of("rejected:terminal-already", "applied", "applied") == []
    assert "both answered applied" in round_of("applied", "applied", "rejected:x")[0]
    assert "no effect" in round_of("rejected:terminal-already", "rejected:x", "applied")[0]
    assert "dependency-needs-done" in round_of("applied", "rejected:dependency-reopened",
                                               "applied")[0]
    # a dispatch sent before the reopen was answered may be ordered before it
    assert round_of("applied", "rejected:dependency-reopened", "applied", late_at=-1.0) == []


def test_a_kernel_not_declaring_what_the_race_sends_skips_it_with_the_reason():
    kinds, env = NEEDS
    assert missing({"kinds": sorted(kinds), "env": sorted(env)}) is None
    assert missing({"kinds": sorted(kinds - {"reopen"}), "env": []}) == \
        "sends what is not declared: reopen, edit"
