"""The kernel's API on the in-memory environment: graph edits, seeding, environment
steps, duplicates without writes, convergence and legacy import."""
from __future__ import annotations

import json

import pytest

from wgk.impl import (
    BadRequest, GraphError, Initial, Kernel, MemoryWorld, Pragmas, Recorder, SeedError, TaskPolicy,
)
from wgk.impl.front.legacy import LegacyError
from wgk.impl.protocol.world_steps import apply_env

FAST = Pragmas(synchronous="OFF")
OWNER = {"pid": 4001, "birth": 911, "session": "s1"}


def kernel(tmp_path, specs, target="main-0", hook=None):
    world = MemoryWorld.create(target=target)
    kw = {"hook": hook} if hook else {}
    k = Kernel(str(tmp_path / "k.db"), world.environment(), pragmas=FAST, **kw)
    k.create_graph("g", specs)
    return k, world


def cap(k, task):
    t = k.record(task)
    return {"graph": "g", "task": task, "generation": t.generation, "attempt": t.attempt,
            "fence": t.fence, "lease-epoch": t.lease_epoch}


def tx(k, task, kind, actor, **params):
    t = k.record(task)
    return k.handle({"kind": kind, "actor": actor, "task": task, "cap": cap(k, task),
                     "key": f"{kind}:{task}:{t.fence}:{t.revision}",
                     "expected-phase": t.visible_phase, "expected-revision": t.revision, **params})


def dispatch(k, task, pid=4001, key=None, expected=None):
    return k.handle({"kind": "dispatch", "actor": "daemon", "task": task, "key": key or f"d:{task}",
                     "expected-attempt": k.record(task).attempt if expected is None else expected,
                     "owner": dict(OWNER, pid=pid)})


def events(k):
    return k.conn.execute("SELECT count(*) FROM ledger").fetchone()[0]


# --- the graph ---------------------------------------------------------------------------------


def test_a_cycle_is_rejected_naming_it_and_nothing_is_written(tmp_path):
    k, _ = kernel(tmp_path, [TaskPolicy("a")])
    n = events(k)
    with pytest.raises(GraphError, match=r"dependency cycle: b -> c -> d -> b"):
        k.add_tasks([TaskPolicy("b", deps=("a", "d")), TaskPolicy("c", deps=("b",)),
                     TaskPolicy("d", deps=("c",))])
    with pytest.raises(GraphError, match="unknown task 'zz'"):
        k.add_tasks([TaskPolicy("b", deps=("zz",))])
    with pytest.raises(GraphError, match="already exists"):
        k.add_tasks([TaskPolicy("a")])
    assert events(k) == n and k.names() == ["a"]
    k.add_tasks([TaskPolicy("b", deps=("a",)), TaskPolicy("c", deps=("b",))])
    with pytest.raises(GraphError, match=r"dependency cycle: a -> b -> c -> a"):
        k.add_dependency("a", "c")
    k.add_dependency("c", "a")
    assert k.policy("c").deps == ("a", "b")
    dispatch(k, "a")
    with pytest.raises(GraphError, match="fixed"):
        k.add_dependency("a", "c")


def test_a_dependency_added_later_blocks_readiness(tmp_path):
    k, _ = kernel(tmp_path, [TaskPolicy("a"), TaskPolicy("b")])
    assert k.ready() == ["a", "b"]
    k.add_dependency("b", "a")
    assert k.ready() == ["a"]
    assert dispatch(k, "b") == {"decision": "rejected", "code": "dependency-not-done"}
    assert k.rebuild().ok


# --- seeding and the environment -------------------------------------------------------------


def test_seeding_a_running_attempt_with_explicit_k_and_owner(tmp_path):
    k, world = kernel(tmp_path, [TaskPolicy("a"), TaskPolicy("b")])
    k.seed("a", Initial(generation=2, attempt=1, fence=7, lease_epoch=3, pid=4242, birth=9,
                        session="s1", worktree="main-0"))
    a = k.project()["tasks"]["a"]
    assert (a["generation"], a["attempt"], a["fence"], a["lease-epoch"]) == (2, 1, 7, 3)
    assert a["owner"] == {"pid": 4242, "birth": 9, "session": "s1", "wrapper-epoch": 1,
                          "child-epoch": 1}
    assert a["worktree"] == {"present": True, "content": "main-0", "origin": "main-0"}
    assert a["status"] == "in-progress" and world.processes.birth_of(4242) == 9
    probe = {"kind": "probe-owner", "actor": "daemon", "task": "a", "key": "p", "cap": cap(k, "a"),
             "evidence": "pid:4242"}
    assert k.handle(probe) == {"decision": "evidence-only"}
    with pytest.raises(SeedError):
        k.seed("a", Initial(0, 1, 1, 1, 1, 1, "s", "main-0"))
    assert k.rebuild().ok


def test_environment_steps_on_the_memory_doubles(tmp_path):
    k, world = kernel(tmp_path, [TaskPolicy("a")])
    dispatch(k, "a")
    apply_env(k, {"env": "edit", "task": "a", "content": "c1"})
    assert k.project()["tasks"]["a"]["worktree"]["content"] == "c1"
    apply_env(k, {"env": "owner-dies", "task": "a"})
    assert world.processes.birth_of(4001) is None
    apply_env(k, {"env": "pid-reuse", "task": "a", "birth": 5})
    assert world.processes.birth_of(4001) == 5
    apply_env(k, {"env": "move-target", "content": "t1"})
    apply_env(k, {"env": "tick", "amount": 3})
    p = k.project()
    assert (p["target"], p["now"]) == ("t1", 3)
    from wgk.impl import EnvError
    with pytest.raises(EnvError):
        apply_env(k, {"env": "owner-dies", "task": "a"})        # the owner is not alive
    with pytest.raises(EnvError):
        apply_env(k, {"env": "crash"})


# --- requests ---------------------------------------------------------------------------------


def test_malformed_requests_get_no_decision_and_change_nothing(tmp_path):
    k, _ = kernel(tmp_path, [TaskPolicy("a")])
    n = events(k)
    bad = [
        {"kind": "dispatch", "actor": "daemon", "task": "a"},                     # no key
        {"kind": "launch", "actor": "daemon", "task": "a", "key": "k"},           # unknown kind
        {"kind": "submit", "actor": "worker", "task": "a", "key": "k"},           # no CAS
        {"kind": "dispatch", "actor": "daemon", "task": "a", "key": "k"},         # no owner
        {"kind": "heartbeat", "actor": "worker", "task": "a", "key": "k", "colour": "red"},
        {"kind": "heartbeat", "actor": "worker", "task": "a", "key": "k", "cap": {"graph": "g"}},
        {"kind": "save-work", "actor": "daemon", "task": "a", "key": "k",
         "expected-phase": "absent", "expected-revision": 0, "candidate": 7},
        ["not", "an", "object"],
    ]
    for body in bad:
        with pytest.raises(BadRequest):
            k.handle(body)
    assert events(k) == n


def test_duplicates_and_conflicts_are_answered_without_any_write(tmp_path):
    rec = Recorder()
    k, _ = kernel(tmp_path, [TaskPolicy("a")], hook=rec)
    assert dispatch(k, "a", key="d1") == {"decision": "applied"}
    stale = {"kind": "fail", "actor": "worker", "task": "a", "key": "f1",
             "cap": dict(cap(k, "a"), fence=9), "evidence": "x"}
    assert k.handle(stale) == {"decision": "rejected", "code": "stale-capability"}
    rec.seen.clear()
    changes = k.conn.total_changes
    assert dispatch(k, "a", key="d1", expected=0) == \
        {"decision": "duplicate", "original": {"decision": "applied"}}
    assert k.handle(stale) == {"decision": "duplicate",
                               "original": {"decision": "rejected", "code": "stale-capability"}}
    assert dispatch(k, "a", pid=99, key="d1", expected=0) == {"decision": "rejected",
                                                 "code": "idempotency-conflict"}
    assert k.conn.total_changes == changes and rec.seen == []
    # the same key with the same bytes is a duplicate even when the attempt is no longer current
    assert tx(k, "a", "submit", "worker") == {"decision": "applied"}
    k.handle({"kind": "reset", "actor": "operator", "task": "a", "key": "r",
              "expected-generation": 0})
    assert dispatch(k, "a", key="d1", expected=0)["decision"] == "duplicate"


def test_the_digest_ignores_defaults_and_owner_epochs_spelled_out(tmp_path):
    k, _ = kernel(tmp_path, [TaskPolicy("a")])
    body = {"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d1", "expected-attempt": 0,
            "owner": {"pid": 1, "birth": 2, "session": "s"}}
    assert k.handle(body)["decision"] == "applied"
    spelled = dict(body, owner={"pid": 1, "birth": 2, "session": "s", "wrapper-epoch": 1,
                                "child-epoch": 1}, evidence="", deadline=0, reason="none")
    assert k.handle(spelled)["decision"] == "duplicate"


# --- convergence ---------------------------------------------------------------------------------


def test_a_live_owner_with_a_missing_heartbeat_stays_running(tmp_path):
    k, world = kernel(tmp_path, [TaskPolicy("a")])
    dispatch(k, "a")
    k.handle({"kind": "heartbeat-timeout", "actor": "daemon", "task": "a", "key": "hbt",
              "cap": cap(k, "a"), "evidence": "bucket-4"})
    assert k.plan("a").to_json()["way"] == "scheduled"
    for _ in range(3):
        report = k.converge()
        world.clock.advance()
    assert k.record("a").attempt_state == "running" and k.record("a").owner_seen == "live"
    assert all(s.request["kind"] == "probe-owner" for s in report.sent)
    k.converge()
    n = events(k)
    again = k.converge()                      # the same tick, nothing changed: nothing written
    assert [s.response["decision"] for s in again.sent] == ["duplicate"] and events(k) == n


def test_a_dead_owner_converges_to_lost_on_its_deadline_and_becomes_runnable(tmp_path):
    k, world = kernel(tmp_path, [TaskPolicy("a")])
    dispatch(k, "a")
    apply_env(k, {"env": "edit", "task": "a", "content": "half"})
    apply_env(k, {"env": "owner-dies", "task": "a"})
    first = k.converge()
    assert [(s.request["kind"], s.response["decision"]) for s in first.sent] == \
        [("probe-owner", "applied")]
    # the same session may continue until the deadline: the plan is the wrapper's resume
    assert k.plan("a").to_json() == {"task": "a", "way": "wait", "action": "resume",
                                     "reason": "resume-continuation", "deadline": 1}
    n = events(k)
    assert k.converge().sent == [] and events(k) == n          # not due yet: nothing written
    world.clock.advance()
    k.converge()
    t = k.record("a")
    assert (t.attempt_state, t.retained) == ("lost", "half")
    assert k.plan("a").action == "dispatch"
    assert k.handle({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d2",
                     "expected-attempt": 1, "owner": dict(OWNER, pid=4002),
                     "imports": "half"}) == {"decision": "applied"}
    assert k.project()["tasks"]["a"]["worktree"]["content"] == "half"


def test_a_moved_target_sends_the_finish_to_repair_with_the_candidate_retained(tmp_path):
    k, world = kernel(tmp_path, [TaskPolicy("a")])
    dispatch(k, "a")
    apply_env(k, {"env": "edit", "task": "a", "content": "c1"})
    tx(k, "a", "submit", "worker")
    k.converge()
    tx(k, "a", "validate", "validator", candidate="c1", verdict="pass")
    for kind in ("accept", "record-disposition", "prepare-effect"):
        params = {"accept": {"candidate": "c1", "verdict": "not-required"},
                  "record-disposition": {"disposition": "land"}}.get(kind, {})
        assert tx(k, "a", kind, "daemon", **params)["decision"] == "applied"
    apply_env(k, {"env": "move-target", "content": "t1"})
    assert tx(k, "a", "commit-effect", "promoter", candidate="c1", base="main-0") == \
        {"decision": "rejected", "code": "cas-moved"}
    report = k.converge()
    assert [s.request["kind"] for s in report.sent] == ["mark-repair"]
    a = k.project()["tasks"]["a"]
    assert (a["status"], a["reason"], a["candidate"], a["promotions"]) == \
        ("needs-repair", "target-moved", "c1", 0)
    assert world.repository.target() == "t1"                     # never forced
    assert report.plans[0].to_json()["reason"] == "needs-repair: target-moved"
    assert report.plans[0].way == "hold"
    # the worker rebases its own work; a revised candidate lands from the new base
    t = k.record("a")
    assert k.handle({"kind": "revise", "actor": "worker", "task": "a", "cap": cap(k, "a"),
                     "key": "revise-not-rebased", "expected-phase": t.visible_phase,
                     "expected-revision": t.revision, "candidate": "c1", "base": "t1"}) == \
        {"decision": "rejected", "code": "base-mismatch"}        # not rebased: refused
    apply_env(k, {"env": "edit", "task": "a", "content": "c2", "onto": "t1"})
    assert tx(k, "a", "revise", "worker", candidate="c2", base="t1") == {"decision": "applied"}
    assert k.record("a").retained == "c1"
    k.converge()
    tx(k, "a", "validate", "validator", candidate="c2", verdict="pass")
    k.converge()
    assert k.status("a") == "done" and world.repository.target() == "c2"


def test_a_missing_or_changed_worktree_is_refused_under_its_own_code(tmp_path):
    k, world = kernel(tmp_path, [TaskPolicy("a"), TaskPolicy("b")])
    for task in ("a", "b"):
        dispatch(k, task, pid=4001 if task == "a" else 4002)
        apply_env(k, {"env": "edit", "task": task, "content": f"c-{task}"})
        tx(k, task, "submit", "worker")
        tx(k, task, "quiesce", "wrapper")
    # a's worktree is removed behind the kernel's back: there is nothing to save
    world.repository.remove_worktree(k.record("a").worktree_id)
    assert tx(k, "a", "save-work", "wrapper", candidate="c-a", base="main-0") == \
        {"decision": "rejected", "code": "worktree-missing"}
    # b's writer was not stopped: after its work was saved the worktree holds other bytes
    for kind, actor, params in (
            ("save-work", "wrapper", {"candidate": "c-b", "base": "main-0"}),
            ("seal-candidate", "daemon", {"candidate": "c-b"}),
            ("validate", "validator", {"candidate": "c-b", "verdict": "pass"}),
            ("accept", "daemon", {"candidate": "c-b", "verdict": "not-required"}),
            ("record-disposition", "wrapper", {"disposition": "report"}),
            ("prepare-effect", "promoter", {}),
            ("commit-effect", "promoter", {"candidate": "c-b", "base": "main-0"}),
            ("prepare-cleanup", "cleanup", {})):
        assert tx(k, "b", kind, actor, **params) == {"decision": "applied"}, kind
    wt = k.record("b").worktree_id
    world.repository.write(wt, "c-b-late")
    assert tx(k, "b", "commit-cleanup", "cleanup") == \
        {"decision": "rejected", "code": "worktree-unsaved"}
    assert world.repository.observe_worktree(wt).content == "c-b-late"     # nothing erased


def test_every_unfinished_task_has_one_way_forward_or_a_named_hold(tmp_path):
    k, _ = kernel(tmp_path, [TaskPolicy("a"), TaskPolicy("b", deps=("a",)),
                             TaskPolicy("c", requires_assignment=True), TaskPolicy("d")])
    dispatch(k, "a")
    k.handle({"kind": "legacy-done", "actor": "legacy-import", "task": "d", "key": "l",
              "evidence": "graph.jsonl:4"})
    plans = {p.task: (p.way, p.action, p.reason) for p in k.converge().plans}
    assert plans == {
        "a": ("live-owner", "probe-owner", "live-owner"),
        "b": ("wait", "await-dependencies", "await-dependencies"),
        "c": ("runnable", "assign", "assign"),
        "d": ("hold", "await-operator", "needs-reconciliation: legacy-unproven"),
    }


# --- legacy import -----------------------------------------------------------------------------

GRAPH_JSONL = (
    '{"id": "schema", "title": "Design the schema", "status": "done"}\n'
    '{"id": "api", "status": "Done", "after": ["schema"]}\n'
    '{"kind": "message", "text": "not a task"}\n'
    '{"id": "ui", "status": "in-progress", "after": ["api"]}\n'
    '{"id": "docs", "status": "open", "after": ["schema"]}\n'
)


def test_legacy_done_is_quarantined_with_its_bytes_and_the_dependents_it_would_have_unlocked(tmp_path):
    k, _ = kernel(tmp_path, [])
    path = tmp_path / "graph.jsonl"
    path.write_text(GRAPH_JSONL)
    report = k.import_legacy(str(path)).to_json()
    assert report["added"] == ["schema", "api", "ui", "docs"] and report["skipped-lines"] == [3]
    q = {r["task"]: r for r in report["quarantined"]}
    assert q["schema"]["status"] == "needs-reconciliation"
    assert q["schema"]["would-have-unlocked"] == ["api", "docs"]
    assert q["api"]["would-have-unlocked"] == ["ui"]
    assert {r["task"]: r["now"] for r in report["other"]} == {"ui": "open", "docs": "open"}
    assert dispatch(k, "docs") == {"decision": "rejected", "code": "dependency-not-done"}
    assert k.ready() == []
    lines = GRAPH_JSONL.split("\n")
    stored = dict(k.conn.execute("SELECT line, original FROM legacy_records"))
    assert stored[1] == lines[0].encode() and stored[4] == lines[3].encode()
    assert ["legacy-done", "graph.jsonl:1"] in k.project()["tasks"]["schema"]["evidence"]
    # the operator reopens one claim; the evidence stays
    k.handle({"kind": "reconcile", "actor": "operator", "task": "schema", "key": "rc"})
    assert k.status("schema") == "open"
    assert ["legacy-done", "graph.jsonl:1"] in k.project()["tasks"]["schema"]["evidence"]
    assert k.rebuild().ok and k.audit().ok


def test_a_plain_json_list_keeps_each_items_exact_text(tmp_path):
    k, _ = kernel(tmp_path, [])
    text = '[\n  {"id": "a", "status": "done"},\n  {"id": "b",  "status": "open", "deps": ["a"]}\n]\n'
    path = tmp_path / "tasks.json"
    path.write_text(text)
    report = k.import_legacy(str(path))
    assert [r["task"] for r in report.quarantined] == ["a"]
    stored = dict(k.conn.execute("SELECT task, original FROM legacy_records"))
    assert stored == {"a": b'{"id": "a", "status": "done"}',
                      "b": b'{"id": "b",  "status": "open", "deps": ["a"]}'}


@pytest.mark.parametrize("text, where", [
    ('{"id": "a", "status": "done"}\n{"id": "b", "status": \n', "graph.jsonl:2"),
    ('{"id": "a", "status": "done"}\n{"id": "a", "status": "open"}\n', "graph.jsonl:2"),
    ('{"id": "a", "after": ["ghost"]}\n', "graph.jsonl:1"),
    ('{"id": "a", "after": ["b"]}\n{"id": "b", "after": ["a"]}\n', "dependency cycle"),
    ('["a"]\n', "graph.jsonl:1"),
])
def test_a_malformed_legacy_file_names_the_place_and_writes_nothing(tmp_path, text, where):
    k, _ = kernel(tmp_path, [TaskPolicy("x")])
    n = events(k)
    path = tmp_path / "graph.jsonl"
    path.write_text(text)
    with pytest.raises(LegacyError, match=where):
        k.import_legacy(str(path))
    assert events(k) == n and k.names() == ["x"]


def test_show_lists_every_receipt_phase_and_evidence_id(tmp_path):
    k, _ = kernel(tmp_path, [TaskPolicy("a")])
    dispatch(k, "a")
    apply_env(k, {"env": "edit", "task": "a", "content": "c1"})
    k.handle({"kind": "heartbeat", "actor": "worker", "task": "a", "key": "hb", "cap": cap(k, "a"),
              "evidence": "hb-7"})
    tx(k, "a", "submit", "worker")
    k.converge()
    shown = k.show("a")
    json.dumps(shown)
    assert shown["status"] == "completing" and shown["phase"] == "candidate-sealed"
    assert set(shown["receipts"]) == {"work-save", "candidate"}
    assert ["heartbeat", "hb-7"] in [e[:2] for e in shown["evidence"]]
    assert [p["phase"] for p in shown["phases"]] == ["prepared", "quiescing", "work-saved",
                                                     "candidate-sealed"]
    assert shown["attempts"][0]["state"] == "running"
    assert shown["pins"][0]["ref"] == "worksave/a/f1-v1"


def test_an_admission_hold_is_not_an_answer_the_same_key_is_decided_again(tmp_path):
    rec = Recorder()
    k, _ = kernel(tmp_path, [TaskPolicy("a", requires_assignment=True), TaskPolicy("b", deps=("a",))],
                  hook=rec)
    rec.seen.clear()
    n = events(k)
    assert dispatch(k, "a", key="d-a", expected=0) == {"decision": "rejected",
                                                       "code": "assignment-required"}
    assert dispatch(k, "b", key="d-b", expected=0) == {"decision": "rejected",
                                                       "code": "dependency-not-done"}
    assert events(k) == n and rec.seen == [] and "d-a" not in k.project()["journal"]
    k.handle({"kind": "assign", "actor": "daemon", "task": "a", "key": "as"})
    assert dispatch(k, "a", key="d-a", expected=0) == {"decision": "applied"}
    assert dispatch(k, "a", key="d-a", expected=0)["decision"] == "duplicate"
