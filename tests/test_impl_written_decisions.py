"""A heartbeat and a provider failure are decided by the statement that writes them
(``tables.REPORT_IF_CURRENT``).

Its evidence row is written only while the request's K and token are the current
attempt's; when no row was written, the answer is read from the stored facts afterwards.
The tests run the kinds of refusal on a real SQLite file, show that the guard list is not
what decides an accepted heartbeat, and take the statement's conditions away to show that
it is the statement that refuses.
"""
from __future__ import annotations

import hashlib

import pytest

from wgk.impl import Kernel, MemoryWorld, TaskPolicy
from wgk.impl.decisions import rules
from wgk.impl.front import kernel as kernel_module
from wgk.impl.storage import tables

TOKEN = "the-token"
OWNER = {"pid": 4001, "birth": 911, "session": "s1"}


@pytest.fixture
def k(tmp_path):
    world = MemoryWorld.create(target="main-0")
    k = Kernel(str(tmp_path / "kernel.db"), world.environment())
    k.create_graph("g", [TaskPolicy("a"), TaskPolicy("b")])
    assert k.handle({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d",
                     "expected-attempt": 0, "owner": OWNER,
                     "mint": hashlib.sha256(TOKEN.encode()).hexdigest()})["decision"] == "applied"
    yield k
    k.close()


def beat(n: int, task: str = "a", token: str = TOKEN, **cap) -> dict:
    k = {"graph": "g", "task": task, "generation": 0, "attempt": 1, "fence": 1, "lease-epoch": 1}
    return {"kind": "heartbeat", "actor": "worker", "task": task, "key": f"hb{n}",
            "cap": {**k, **cap}, "evidence": f"beat-{n % 2}", "token": token}


def rows(k: Kernel) -> list[tuple]:
    return k.conn.execute("SELECT task, kind, ident, seq FROM evidence ORDER BY seq").fetchall()


REFUSED = [
    (beat(1, **{"lease-epoch": 2}), "stale-capability"),
    (beat(2, fence=0), "stale-capability"),
    (beat(3, graph="h"), "stale-capability"),
    (beat(4, token="another"), "token-mismatch"),
    (beat(5, task="b"), "unknown-attempt"),
    ({**beat(6), "cap": {**beat(6)["cap"], "task": "b"}}, "stale-capability"),
    (beat(7, task="zz"), "unknown-task"),
]


def test_a_heartbeat_is_written_under_its_conditions_and_refused_from_the_stored_facts(k):
    assert k.handle(beat(0)) == {"decision": "evidence-only"}
    assert [r[1:3] for r in rows(k)] == [("heartbeat", "beat-0")]
    for request, code in REFUSED:
        assert k.handle(request) == {"decision": "rejected", "code": code}, request
    assert len(rows(k)) == 1                          # a refused heartbeat wrote no row
    assert k.handle(beat(8)) == {"decision": "evidence-only"}    # its id seen: as it was
    assert len(rows(k)) == 1
    assert k.handle(beat(0))["decision"] == "duplicate"
    assert k.audit().findings == [] and k.rebuild().ok and k.verify_ledger().ok


def test_an_accepted_heartbeat_runs_no_guard_list(k, monkeypatch):
    def guard_list(ctx):
        raise AssertionError("the guard list ran")
    monkeypatch.setattr(kernel_module, "decide", guard_list)
    monkeypatch.setattr(rules, "decide", guard_list)
    assert k.handle(beat(0)) == {"decision": "evidence-only"}
    assert k.handle(beat(1, **{"lease-epoch": 2})) == {"decision": "rejected",
                                                        "code": "stale-capability"}


def test_without_the_statements_conditions_a_stale_heartbeat_is_written(k, monkeypatch):
    unconditional = (tables.REPORT_IF_CURRENT.split(" WHERE ")[0]     # the task's name only
                     + " WHERE t.name = ? AND coalesce(?, ?, ?, ?, ?, ?, ?, 1) IS NOT NULL")
    monkeypatch.setattr(tables, "REPORT_IF_CURRENT", unconditional)
    answer = k.handle(beat(1, **{"lease-epoch": 2}))
    assert answer == {"decision": "evidence-only"}   # the refusal came from the statement
    assert [r[2] for r in rows(k)] == ["beat-1"]


def test_a_batch_decides_heartbeats_by_their_writes_too(k):
    answers = k.handle_batch([beat(0), beat(1, token="x"), beat(3)])
    assert answers == [{"decision": "evidence-only"},
                       {"decision": "rejected", "code": "token-mismatch"},
                       {"decision": "evidence-only"}]
    assert len(rows(k)) == 2 and k.rebuild().ok


def test_a_provider_failure_is_applied_when_its_row_is_written_and_only_then(k, monkeypatch):
    monkeypatch.setattr(rules, "decide", lambda ctx: (_ for _ in ()).throw(AssertionError()))
    failure = lambda n, ident, **cap: {**beat(n, **cap), "kind": "provider-failure",
                                       "actor": "wrapper", "key": f"pf{n}", "evidence": ident}
    assert k.handle(failure(1, "rate-limit")) == {"decision": "applied"}
    assert k.handle(failure(2, "rate-limit")) == {"decision": "evidence-only"}    # seen
    assert k.handle(failure(3, "quota", fence=2)) == {"decision": "rejected",
                                                      "code": "stale-capability"}
    assert k.handle(failure(4, "quota")) == {"decision": "applied"}
    assert [r[1:3] for r in rows(k)] == [("provider-failure", "rate-limit"),
                                         ("provider-failure", "quota")]
    assert k.rebuild().ok and k.audit().findings == []


def step(n: int, kind: str, actor: str, phase: str, revision: int, **cap) -> dict:
    return {**beat(n, **cap), "kind": kind, "actor": actor, "key": f"{kind}{n}",
            "expected-phase": phase, "expected-revision": revision}


def phase_of(k: Kernel) -> tuple:
    return k.conn.execute("SELECT phase, revision FROM transactions t JOIN tasks ON tasks.id = "
                          "t.task WHERE tasks.name = 'a'").fetchone()


def test_a_plain_step_moves_its_row_under_its_conditions_and_only_then(k, monkeypatch):
    assert k.handle(step(1, "submit", "worker", "absent", 0))["decision"] == "applied"
    monkeypatch.setattr(rules, "decide", lambda ctx: (_ for _ in ()).throw(AssertionError()))
    for request, code in [
            (step(2, "quiesce", "wrapper", "prepared", 0), "cas-moved"),
            (step(3, "quiesce", "wrapper", "absent", 1), "cas-moved"),
            (step(4, "quiesce", "wrapper", "prepared", 1, **{"lease-epoch": 2}), "stale-capability"),
            (step(5, "quiesce", "wrapper", "prepared", 1, token="x"), "token-mismatch"),
            (step(6, "quiesce", "wrapper", "prepared", 1, task="b"), "unknown-attempt")]:
        assert k.handle(request) == {"decision": "rejected", "code": code}, request
        assert phase_of(k) == ("prepared", 1)
    assert k.handle(step(7, "quiesce", "wrapper", "prepared", 1)) == {"decision": "applied"}
    assert phase_of(k) == ("quiescing", 2) and k.record("a").phase == "quiescing"
    assert k.handle(step(8, "quiesce", "wrapper", "prepared", 1)) == {
        "decision": "rejected", "code": "cas-moved"}
    assert k.audit().findings == [] and k.rebuild().ok and k.verify_ledger().ok
    k._forget()
    assert (k.record("a").phase, k.record("a").revision) == ("quiescing", 2)


def test_without_the_steps_conditions_a_stale_step_moves_the_row(k, monkeypatch):
    assert k.handle(step(1, "submit", "worker", "absent", 0))["decision"] == "applied"
    unconditional = ("UPDATE transactions SET phase = ?, revision = revision + 1 WHERE task = ? "
                     "AND coalesce(?, ?, {}, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1) IS NOT NULL")
    monkeypatch.setattr(tables, "STEP_IF_CURRENT", unconditional)
    answer = k.handle(step(2, "quiesce", "wrapper", "prepared", 1, **{"lease-epoch": 2}))
    assert answer == {"decision": "applied"}          # the refusal came from the statement
    assert phase_of(k) == ("quiescing", 2)
