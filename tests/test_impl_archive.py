"""Archiving a Done task on the kernel's API: the operator's confirmation of the exact
digest comes first, an archive naming another digest is refused by name, both receipts are
evidence the ledger rebuilds, and only the operator confirms."""
from __future__ import annotations

from wgk.impl import Kernel, MemoryWorld, Pragmas, TaskPolicy
from wgk.impl.protocol.world_steps import apply_env

FAST = Pragmas(synchronous="OFF")
OWNER = {"pid": 4001, "birth": 911, "session": "s1"}


def done_kernel(tmp_path) -> Kernel:
    world = MemoryWorld.create(target="main-0")
    k = Kernel(str(tmp_path / "k.db"), world.environment(), pragmas=FAST)
    k.create_graph("g", [TaskPolicy("a")])
    k.handle({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d",
              "expected-attempt": 0, "owner": OWNER})
    apply_env(k, {"env": "edit", "task": "a", "content": "c1"})
    t = k.record("a")
    k.handle({"kind": "submit", "actor": "worker", "task": "a", "key": "s",
              "cap": {"graph": "g", "task": "a", "generation": 0, "attempt": 1, "fence": 1,
                      "lease-epoch": 1},
              "expected-phase": t.visible_phase, "expected-revision": t.revision})
    k.converge()
    t = k.record("a")
    k.handle({"kind": "validate", "actor": "validator", "task": "a", "key": "v",
              "cap": {"graph": "g", "task": "a", "generation": 0, "attempt": 1, "fence": 1,
                      "lease-epoch": 1},
              "expected-phase": t.visible_phase, "expected-revision": t.revision,
              "candidate": "c1", "verdict": "pass"})
    k.converge()
    assert k.status("a") == "done"
    return k


def send(k: Kernel, kind: str, actor: str, key: str, digest: str) -> dict:
    return k.handle({"kind": kind, "actor": actor, "task": "a", "key": key, "candidate": digest})


def evidence(k: Kernel) -> list:
    return k.project()["tasks"]["a"]["evidence"]


def test_an_archive_needs_the_confirmation_of_its_exact_digest_first(tmp_path):
    k = done_kernel(tmp_path)
    refused = {"decision": "rejected", "code": "archive-unconfirmed"}
    assert send(k, "archive", "cleanup", "a1", "c1") == refused
    assert send(k, "confirm-archive", "operator", "c0", "main-0") == \
        {"decision": "rejected", "code": "candidate-mismatch"}
    assert send(k, "confirm-archive", "daemon", "c0b", "c1") == \
        {"decision": "rejected", "code": "not-authorized"}
    assert evidence(k) == []
    assert send(k, "confirm-archive", "operator", "c1", "c1") == {"decision": "applied"}
    assert evidence(k) == [["confirm-archive", "c1"]]
    assert send(k, "archive", "cleanup", "a2", "main-0") == refused     # another digest
    assert send(k, "archive", "cleanup", "a3", "c1") == {"decision": "applied"}
    assert evidence(k) == [["archive", "c1"], ["confirm-archive", "c1"]]
    assert send(k, "archive", "daemon", "a4", "c1") == \
        {"decision": "rejected", "code": "terminal-already"}
    assert k.status("a") == "done"
    assert k.audit().ok and k.rebuild().ok
    assert evidence(k) == [["archive", "c1"], ["confirm-archive", "c1"]]


def test_nothing_is_archived_before_it_is_done(tmp_path):
    k = Kernel(str(tmp_path / "k.db"), MemoryWorld.create(target="main-0").environment(),
               pragmas=FAST)
    k.create_graph("g", [TaskPolicy("a")])
    for kind, actor in (("confirm-archive", "operator"), ("archive", "daemon")):
        assert send(k, kind, actor, kind, "main-0") == \
            {"decision": "rejected", "code": "illegal-phase-edge"}


def plan(k: Kernel):
    p = k.plan("a")
    return None if p is None else (p.way, p.action, p.reason)


def test_the_archive_backlog_proposes_and_the_plan_waits_for_the_operators_confirmation(tmp_path):
    k = done_kernel(tmp_path)
    assert plan(k) is None                                           # Done: nothing planned
    assert send(k, "propose-archive", "daemon", "p0", "main-0") == \
        {"decision": "rejected", "code": "candidate-mismatch"}
    assert send(k, "propose-archive", "operator", "p0b", "c1") == \
        {"decision": "rejected", "code": "not-authorized"}
    assert send(k, "propose-archive", "daemon", "p1", "c1") == {"decision": "applied"}
    assert plan(k) == ("wait", "await-archive-confirmation", "await-archive-confirmation")
    assert send(k, "propose-archive", "cleanup", "p2", "c1") == {"decision": "evidence-only"}
    assert send(k, "archive", "daemon", "a1", "c1") == \
        {"decision": "rejected", "code": "archive-unconfirmed"}      # never on its own word
    assert send(k, "confirm-archive", "operator", "c1", "c1") == {"decision": "applied"}
    assert plan(k) is None
    assert send(k, "archive", "cleanup", "a2", "c1") == {"decision": "applied"}
    assert evidence(k) == [["archive", "c1"], ["confirm-archive", "c1"], ["propose-archive", "c1"]]
    assert send(k, "propose-archive", "daemon", "p3", "c1") == \
        {"decision": "rejected", "code": "terminal-already"}


def test_a_chat_request_is_made_once_per_fence_and_convergence_reconciles_it(tmp_path):
    world = MemoryWorld.create(target="main-0")
    k = Kernel(str(tmp_path / "k.db"), world.environment(), pragmas=FAST)
    k.create_graph("g", [TaskPolicy("a")])
    k.handle({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d",
              "expected-attempt": 0, "owner": OWNER})
    cap = {"graph": "g", "task": "a", "generation": 0, "attempt": 1, "fence": 1, "lease-epoch": 1}

    def chat(kind: str, key: str) -> dict:
        return k.handle({"kind": kind, "actor": "daemon", "task": "a", "key": key, "cap": cap})

    assert chat("reconcile-chat", "r0") == {"decision": "rejected", "code": "chat-unrequested"}
    assert chat("request-chat", "q1") == {"decision": "applied"}
    assert plan(k) == ("scheduled", "reconcile-chat", "reconcile-chat-request")
    assert chat("request-chat", "q1") == {"decision": "duplicate", "original": {"decision": "applied"}}
    assert chat("request-chat", "q2") == {"decision": "rejected", "code": "chat-requested"}
    sent = [s.request["kind"] for s in k.converge().sent]
    assert sent[0] == "reconcile-chat" and sent.count("reconcile-chat") == 1
    assert plan(k) == ("live-owner", "probe-owner", "live-owner")
    assert ["reconcile-chat", "1"] in evidence(k) and ["request-chat", "1"] in evidence(k)
    assert chat("reconcile-chat", "r1") == {"decision": "evidence-only"}
    assert chat("request-chat", "q3") == {"decision": "rejected", "code": "chat-requested"}
