"""External waits on the kernel: a parked task is released only by the event it names, its
deadline runs out into a named hold through convergence, a park or delivery without its
event is bad input that changes nothing, and the operator answers from the CLI on a real
repository with a real worker process."""
from __future__ import annotations

import json

import pytest

from wgk.conformance.cli.main import main
from wgk.impl.protocol.world_steps import apply_env
from wgk.impl import BadRequest, Kernel, MemoryWorld, Pragmas, TaskPolicy

from test_impl_cli import fingerprint, run, setup, sleeper  # noqa: F401  (fixtures)

FAST = Pragmas(synchronous="OFF")
CAP = {"graph": "g", "task": "a", "generation": 0, "attempt": 1, "fence": 1, "lease-epoch": 1}


def parked_kernel(tmp_path, deadline: int = 0) -> Kernel:
    k = Kernel(str(tmp_path / "k.db"), MemoryWorld.create(target="main-0").environment(),
               pragmas=FAST)
    k.create_graph("g", [TaskPolicy("a")])
    assert k.handle({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d1",
                     "expected-attempt": 0,
                     "owner": {"pid": 4001, "birth": 911, "session": "s1"}}) == \
        {"decision": "applied"}
    apply_env(k, {"env": "edit", "task": "a", "content": "draft"})
    park = {"kind": "park", "actor": "worker", "task": "a", "key": "p1", "cap": CAP,
            "correlation": "question-17"}
    if deadline:
        park["deadline"] = deadline
    assert k.handle(park) == {"decision": "applied"}
    return k


def plan(k: Kernel) -> dict:
    return k.project()["tasks"]["a"]["plan"]


def test_only_the_event_a_wait_names_releases_it(tmp_path):
    k = parked_kernel(tmp_path)
    t = k.project()["tasks"]["a"]
    assert (t["attempt-state"], t["waiting-on"], t["retained"]) == ("parked", "question-17",
                                                                    "draft")
    assert plan(k)["action"] == "await-external"
    dispatch = {"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d2",
                "expected-attempt": 1, "owner": {"pid": 4002, "birth": 912, "session": "s2"}}
    assert k.handle(dispatch) == {"decision": "rejected", "code": "waiting"}
    other = {"kind": "deliver", "actor": "daemon", "task": "a", "key": "v1",
             "correlation": "ci-run-9", "evidence": "ci-9"}
    assert k.handle(other) == {"decision": "evidence-only"}
    assert k.project()["tasks"]["a"]["waiting-on"] == "question-17"
    assert k.converge().sent == []                 # nothing is due while it waits
    answer = {"kind": "deliver", "actor": "operator", "task": "a", "key": "v2",
              "correlation": "question-17", "evidence": "answer-17"}
    assert k.handle(answer) == {"decision": "applied"}
    assert k.handle(answer) == {"decision": "duplicate", "original": {"decision": "applied"}}
    assert plan(k)["action"] == "dispatch"
    assert k.handle(dict(dispatch, key="d3", imports="draft")) == {"decision": "applied"}
    t = k.project()["tasks"]["a"]
    assert (t["attempt"], t["retries"], t["imported"]) == (2, 0, "draft")
    assert ["deliver", "ci-9"] in t["evidence"] and ["deliver", "answer-17"] in t["evidence"]
    assert k.audit().ok and k.rebuild().ok


def test_a_deadline_runs_out_through_convergence_into_a_named_hold(tmp_path):
    k = parked_kernel(tmp_path, deadline=2)
    assert plan(k) == {"task": "a", "way": "wait", "action": "await-external",
                       "reason": "await-external", "deadline": 2}
    apply_env(k, {"env": "tick", "amount": 1})
    assert k.converge().sent == []
    apply_env(k, {"env": "tick", "amount": 1})
    sent = k.converge().sent
    assert [(s.request["kind"], s.response) for s in sent] == \
        [("expire-wait", {"decision": "applied"})]
    assert plan(k)["reason"] == "wait-expired" and plan(k)["way"] == "hold"
    assert k.converge().sent == []                 # a hold: nothing more is due
    assert k.handle({"kind": "deliver", "actor": "operator", "task": "a", "key": "late",
                     "correlation": "question-17"}) == {"decision": "evidence-only"}
    assert k.handle({"kind": "retry", "actor": "operator", "task": "a", "key": "r1",
                     "expected-attempt": 1,
                     "owner": {"pid": 4003, "birth": 913, "session": "s3"}}) == \
        {"decision": "applied"}
    assert not k.project()["tasks"]["a"]["wait-expired"]
    assert k.audit().ok and k.rebuild().ok


@pytest.mark.parametrize("change, message", [
    ({"correlation": None}, "park must carry 'correlation'"),
    ({"correlation": 17}, "/correlation"),
    ({"kind": "heartbeat", "evidence": "hb"}, "heartbeat names no external wait"),
])
def test_a_park_without_its_event_is_bad_input_and_changes_nothing(tmp_path, change, message):
    k = Kernel(str(tmp_path / "k.db"), MemoryWorld.create(target="main-0").environment(),
               pragmas=FAST)
    k.create_graph("g", [TaskPolicy("a")])
    k.handle({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d1",
              "expected-attempt": 0, "owner": {"pid": 4001, "birth": 911, "session": "s1"}})
    before = k.project()
    park = {"kind": "park", "actor": "worker", "task": "a", "key": "p1", "cap": CAP,
            "correlation": "q"}
    park.update(change)
    park = {f: v for f, v in park.items() if v is not None}
    with pytest.raises(BadRequest, match=message):
        k.handle(park)
    hostile = dict(park, kind="park", correlation="../../etc/passwd")
    hostile.pop("evidence", None)
    assert k.handle(hostile) == {"decision": "rejected", "code": "bad-name"}
    assert k.project() == before


def test_the_operator_answers_from_the_cli(setup, capsys, sleeper):  # noqa: F811
    db, tmp = setup
    assert run(capsys, db, "task", "add", "a")[0] == 0
    assert run(capsys, db, "dispatch", "a", "--pid", str(sleeper.pid), "--session", "s1",
               "--token-file", str(tmp / "a.token"))[0] == 0
    token = (tmp / "a.token").read_text().strip()
    worker = str(tmp / "w.credential")
    assert run(capsys, db, "principal", "add", "w", "--role", "worker", "--out", worker)[0] == 0
    park = json.dumps({"kind": "park", "actor": "worker", "task": "a", "key": "p1", "cap": CAP,
                       "token": token, "correlation": "question-17"})
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WGK_CREDENTIAL_FILE", worker)
        code, out, _ = run(capsys, db, "send", park)
    assert code == 0, out
    before = fingerprint(db)
    with pytest.raises(SystemExit) as usage:
        run(capsys, db, "deliver", "a")
    assert usage.value.code == 2 and "--correlation" in capsys.readouterr().err
    assert fingerprint(db) == before
    code, out, _ = run(capsys, db, "--json", "deliver", "a", "--correlation", "other-event")
    assert code == 0 and json.loads(out)["response"] == {"decision": "evidence-only"}
    code, out, _ = run(capsys, db, "--json", "deliver", "a", "--correlation", "question-17",
                       "--evidence", "answer-17")
    assert code == 0 and json.loads(out)["response"] == {"decision": "applied"}
    code, out, _ = run(capsys, db, "status", "--json")
    assert json.loads(out)["tasks"][0]["action"] == "dispatch"
    for sub in ("audit", "verify-ledger", "rebuild"):
        assert run(capsys, db, sub)[0] == 0, sub
