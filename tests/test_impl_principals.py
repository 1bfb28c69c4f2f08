"""Principals, role credentials and keys in their sender's namespace (BRIEF §8), in the
implementation: a closed kernel authenticates before it reads, roles are held by
principals, the journal is keyed by (principal, key), secrets are stored hashed."""
from __future__ import annotations

import hashlib
import os
import stat

import pytest

from wgk.impl import Client, Kernel, MemoryWorld, Pragmas, TaskPolicy
from wgk.impl.front.principals import PrincipalError
from wgk.impl.protocol.world_steps import apply_env

OWNER = {"pid": 4001, "birth": 911, "session": "s1"}


def closed_kernel(tmp_path, specs=(TaskPolicy("a"), TaskPolicy("b", deps=("a",)))):
    world = MemoryWorld.create(target="main-0")
    k = Kernel(str(tmp_path / "k.db"), world.environment(), pragmas=Pragmas(synchronous="OFF"))
    k.create_graph("g", list(specs))
    creds = {name: k.principals.add(name, roles) for name, roles in (
        ("daemon-1", ["daemon"]), ("worker-1", ["worker", "wrapper"]),
        ("validator-1", ["validator"]), ("operator-1", ["operator"]))}
    return k, world, creds


def test_a_closed_kernel_refuses_a_missing_or_forged_credential_and_consumes_nothing(tmp_path):
    k, _, creds = closed_kernel(tmp_path)
    reset = {"kind": "reset", "actor": "operator", "task": "a", "key": "r1",
             "expected-generation": 0}
    n = k.ledger_head()
    for credential in (None, "operator-1.guess", "mallory.x", creds["operator-1"] + "x", 7):
        assert k.handle(reset, credential) == {"decision": "rejected", "code": "not-authenticated"}
    assert k.handle({"not": "even a request"}) == {"decision": "rejected",
                                                    "code": "not-authenticated"}
    assert k.ledger_head() == n and k.project(tasks=False)["journal"] == {}
    assert k.handle(reset, creds["operator-1"])["decision"] == "applied"


@pytest.mark.raw_tokens          # the client does the token bookkeeping
def test_a_worker_labelling_itself_validator_is_refused_in_its_own_namespace(tmp_path):
    k, world, creds = closed_kernel(tmp_path)
    w, v = Client(k, creds["worker-1"]), Client(k, creds["validator-1"])
    daemon = Client(k, creds["daemon-1"])
    assert daemon.send("dispatch", "a", "daemon", owner=OWNER)["decision"] == "applied"
    w.hold("a", daemon.token("a"))                 # the opener hands its process the token
    apply_env(k, {"env": "edit", "task": "a", "content": "c1"})
    assert w.send("submit", "a", "worker")["decision"] == "applied"
    daemon.converge()
    assert k.record("a").phase == "candidate-sealed"
    forged = w.send("validate", "a", "validator", key="validate:a", candidate="c1", verdict="pass")
    assert forged == {"decision": "rejected", "code": "role-not-held"}
    assert k.record("a").phase == "candidate-sealed"
    assert v.send("validate", "a", "validator", key="validate:a", candidate="c1",
                  verdict="pass")["decision"] == "applied"
    journal = k.project(tasks=False)["journal"]
    assert {"worker-1/validate:a", "validator-1/validate:a"} <= set(journal)


@pytest.mark.raw_tokens          # the client does the token bookkeeping
def test_the_client_walks_a_task_to_done_and_its_dependent_becomes_ready(tmp_path):
    k, world, creds = closed_kernel(tmp_path)
    daemon, w = Client(k, creds["daemon-1"]), Client(k, creds["worker-1"])
    v = Client(k, creds["validator-1"])
    assert k.ready() == ["a"]
    daemon.send("dispatch", "a", "daemon", owner=OWNER)
    assert Client(k, creds["worker-1"]).send("submit", "a", "worker") == {
        "decision": "rejected", "code": "token-mismatch"}      # K alone proves nothing
    w.hold("a", daemon.token("a"))
    apply_env(k, {"env": "edit", "task": "a", "content": "c1"})
    assert w.send("submit", "a", "worker")["decision"] == "applied"
    daemon.converge()
    v.send("validate", "a", "validator", candidate=k.record("a").candidate, verdict="pass")
    daemon.converge()
    assert k.status("a") == "done" and k.ready() == ["b"]
    unauthenticated = Client(k, None).converge()
    assert all(s.response["code"] == "not-authenticated" for s in unauthenticated.sent)


@pytest.mark.raw_tokens
def test_the_client_keeps_the_token_across_a_lost_response_and_the_kernel_only_its_hash(tmp_path):
    k, world, creds = closed_kernel(tmp_path)
    daemon = Client(k, creds["daemon-1"])
    first = daemon.send("dispatch", "a", "daemon", key="d:a", owner=OWNER)
    token = daemon.token("a")
    again = daemon.send("dispatch", "a", "daemon", key="d:a", owner=OWNER)   # the response was lost
    assert first == {"decision": "applied"}
    assert again == {"decision": "duplicate", "original": {"decision": "applied"}}
    assert daemon.token("a") == token and len(token) == 64            # 256 bits, unchanged
    assert k.record("a").token_hash == hashlib.sha256(token.encode()).hexdigest()
    stored = b"".join(open(f, "rb").read() for f in tmp_path.iterdir() if f.is_file())
    assert token.encode() not in stored                        # neither journal nor ledger
    w = Client(k, creds["worker-1"]).hold("a", token)
    assert w.send("heartbeat", "a", "worker", evidence="hb1") == {"decision": "evidence-only"}


def test_secrets_are_stored_only_as_hashes_and_principals_are_managed(tmp_path):
    k, _, creds = closed_kernel(tmp_path)
    secret = creds["worker-1"].partition(".")[2]
    assert len(secret) >= 22                                    # >= 128 bits, urlsafe base64
    raw = b"".join(open(f, "rb").read() for f in tmp_path.glob("k.db*"))
    assert secret.encode() not in raw
    stored = k.conn.execute("SELECT secret_sha256 FROM principals WHERE name = 'worker-1'")
    assert stored.fetchone()[0] == hashlib.sha256(secret.encode()).hexdigest()
    with pytest.raises(PrincipalError, match="exists already"):
        k.principals.add("worker-1", ["worker"])
    with pytest.raises(PrincipalError, match="unknown role"):
        k.principals.add("w2", ["king"])
    k.principals.revoke("worker-1")
    assert k.handle({"kind": "message", "actor": "worker", "task": "a", "key": "m1",
                     "evidence": "hi"}, creds["worker-1"])["code"] == "not-authenticated"
    assert [p.name for p in k.principals.list() if p.revoked] == ["worker-1"]


def test_kernel_init_makes_the_database_and_the_credential_owner_only(tmp_path, capsys):
    import subprocess
    from wgk.conformance.cli.main import main
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    ref = subprocess.run(["git", "-C", str(repo), "symbolic-ref", "HEAD"], check=True,
                         capture_output=True, text=True).stdout.strip()
    db = str(tmp_path / "k.db")
    assert main(["kernel", "--db", db, "init", "--graph", "g", "--repo", str(repo),
                 "--target", ref]) == 0
    for path in (db, db + ".credential"):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    capsys.readouterr()
    assert main(["kernel", "--db", db, "task", "add", "a"]) == 2
    assert main(["kernel", "--db", db, "--credential", str(tmp_path / "none"), "reset", "a"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "not-authenticated" in err[0] and "credential file unreadable" in err[1]
    assert main(["kernel", "--db", db, "--credential", db + ".credential", "task", "add", "a"]) == 0
