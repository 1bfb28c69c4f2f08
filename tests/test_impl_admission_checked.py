"""SQLite: a request is admitted on the kernel's caches as they are, and they are checked once,
under its writer lock (``Store.checks_at_lock``); wherever that check finds that another
connection committed, the credential is authenticated again before anything is answered: a
principal revoked, or a kernel closed, by another connection is refused ``not-authenticated``
with nothing written, a re-sent request's stored answer included, and a key lands in the
namespace of the sender the database knows now."""
from __future__ import annotations

import pytest

from wgk.impl import Kernel, MemoryWorld, Pragmas, TaskPolicy

DENIED = {"decision": "rejected", "code": "not-authenticated"}


def message(key: str, actor: str = "operator", evidence: str = "x") -> dict:
    return {"kind": "message", "actor": actor, "task": "a", "key": key, "evidence": evidence}


@pytest.fixture
def two(tmp_path):
    """Two kernels on one database (two connections), a graph of one task."""
    world = MemoryWorld.create(target="main-0")
    path = str(tmp_path / "k.db")
    first = Kernel(path, world.environment(), pragmas=Pragmas(synchronous="OFF"))
    first.create_graph("g", [TaskPolicy("a")])
    second = Kernel(path, world.environment(), pragmas=Pragmas(synchronous="OFF"))
    yield first, second
    first.close()
    second.close()


def written(k: Kernel) -> tuple[int, dict]:
    return k.ledger_head(), k.project(tasks=False)["journal"]


def test_a_principal_revoked_by_another_connection_is_refused_new_and_resent(two):
    k, other = two
    creds = {n: k.principals.add(n, ["operator"]) for n in ("op-1", "op-2", "op-3")}
    for n in ("op-1", "op-2"):
        assert k.handle(message("m1"), creds[n])["decision"] == "evidence-only"
        assert k.handle(message("m1"), creds[n])["decision"] == "duplicate"
    other.principals.revoke("op-1")
    before = written(other)
    assert k.handle(message("m1"), creds["op-1"]) == DENIED        # a used key, its answer kept
    other.principals.revoke("op-2")
    assert k.handle(message("m2"), creds["op-2"]) == DENIED        # a new key, under the lock
    assert written(k)[1] == before[1] and k.ledger_head() == before[0] + 1   # (the revocation)
    assert k.handle(message("m2"), creds["op-3"])["decision"] == "evidence-only"
    assert k.handle(message("m1"), creds["op-1"]) == DENIED


def test_an_unrelated_commit_of_another_connection_keeps_the_sender(two):
    k, other = two
    cred = k.principals.add("op-1", ["operator"])
    other_cred = k.principals.add("op-2", ["operator"])
    assert k.handle(message("m1"), cred)["decision"] == "evidence-only"
    assert other.handle(message("o1", evidence="y"), other_cred)["decision"] == "evidence-only"
    assert k.handle(message("m2", evidence="z"), cred)["decision"] == "evidence-only"
    assert other.handle(message("o1", evidence="y"), other_cred)["decision"] == "duplicate"
    assert k.handle(message("m1"), cred)["decision"] == "duplicate"
    assert {"op-1/m1", "op-1/m2", "op-2/o1"} <= set(written(k)[1])


@pytest.mark.parametrize("resent", [True, False])
def test_a_kernel_closed_by_another_connection_refuses_no_credential(two, resent):
    k, other = two
    assert k.handle(message("m1"))["decision"] == "evidence-only"     # open: no credential
    assert k.handle(message("m1"))["decision"] == "duplicate"
    cred = other.principals.add("op-1", ["operator"])
    before = written(other)
    assert k.handle(message("m1" if resent else "m2")) == DENIED
    assert k.handle(message("m2" if resent else "m1")) == DENIED
    assert written(k) == before
    # the kernel's caches said open, the database says closed: the key is the sender's
    assert k.handle(message("m1"), cred)["decision"] == "evidence-only"
    journal = written(k)[1]
    assert {"m1", "op-1/m1"} <= set(journal)


def test_a_key_used_in_the_open_kernel_is_not_the_new_senders_answer(two):
    """The stale caches read the open kernel's key; checked, the sender's key is unused."""
    k, other = two
    assert k.handle(message("m1"))["decision"] == "evidence-only"
    cred = other.principals.add("op-1", ["operator"])
    answer = k.handle(message("m1", evidence="other"), cred)
    assert answer == {"decision": "evidence-only"}, answer         # not idempotency-conflict
    assert k.handle(message("m1", evidence="other"), cred)["decision"] == "duplicate"
