"""wgk kernel: the operator CLI on a real repository and real processes."""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys

import pytest

from wgk.conformance.cli.main import main
from wgk.impl.world.git import GitRepository, init_repository


@pytest.fixture
def setup(tmp_path, monkeypatch):
    init_repository(str(tmp_path / "repo"))
    db = str(tmp_path / "k.db")
    assert main(["kernel", "--db", db, "init", "--graph", "g", "--repo", str(tmp_path / "repo")]) == 0
    monkeypatch.setenv("WGK_CREDENTIAL_FILE", db + ".credential")   # the operator's, from init
    yield db, tmp_path
    GitRepository(str(tmp_path / "repo")).remove_all_worktrees()


def run(capsys, db, *args) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["kernel", "--db", db, *args])
    out, err = capsys.readouterr()
    return code, out, err


def fingerprint(db: str) -> str:
    c = sqlite3.connect(db)
    rows = [r for t in ("tasks", "edges", "journal", "ledger") for r in
            c.execute(f"SELECT * FROM {t}").fetchall()]
    c.close()
    return hashlib.sha256(repr(rows).encode()).hexdigest()


@pytest.fixture
def sleeper():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield p
    p.kill()
    p.wait()


def test_bad_input_is_one_line_exit_2_and_the_database_untouched(setup, capsys):
    db, tmp = setup
    assert run(capsys, db, "task", "add", "a")[0] == 0
    assert run(capsys, db, "task", "add", "b", "--after", "a")[0] == 0
    before = fingerprint(db)
    cases = [
        (("task", "add", "c", "--after", "ghost"), "unknown task 'ghost'"),
        (("task", "dep", "a", "--after", "b"), "dependency cycle: a -> b -> a"),
        (("show", "zz"), "unknown task 'zz'"),
        (("dispatch", "zz", "--pid", "1"), "unknown task 'zz'"),
        (("dispatch", "a", "--pid", str(2**22 + 3)), "no live process"),
        (("send", '{"kind": "dispatch"'), "request:"),
        (("send", '{"kind": "launch", "actor": "daemon", "task": "a", "key": "k"}'), "unknown label"),
    ]
    for args, message in cases:
        code, out, err = run(capsys, db, *args)
        assert code == 2 and out == "" and message in err and err.count("\n") == 1, (args, err)
    legacy = tmp / "graph.jsonl"
    legacy.write_text('{"id": "x", "status": "done"}\n{"id": "y", "status": \n')
    code, _, err = run(capsys, db, "import-legacy", str(legacy))
    assert code == 2 and f"{legacy}:2" in err
    assert fingerprint(db) == before


def test_a_missing_or_corrupt_database_is_bad_input(tmp_path, capsys):
    missing = str(tmp_path / "missing.db")
    code, _, err = run(capsys, missing, "status")
    assert code == 2 and "no kernel database" in err and not os.path.exists(missing)
    corrupt = tmp_path / "corrupt.db"
    junk = os.urandom(4096)
    corrupt.write_bytes(junk)
    code, _, err = run(capsys, str(corrupt), "status")
    assert code == 2 and "corrupt.db" in err and err.count("\n") == 1
    assert corrupt.read_bytes() == junk


def test_dispatch_status_show_converge_and_retry_on_real_processes(setup, capsys, sleeper):
    db, tmp = setup
    run(capsys, db, "task", "add", "a")
    run(capsys, db, "task", "add", "b", "--after", "a")
    code, out, _ = run(capsys, db, "dispatch", "b", "--pid", str(sleeper.pid))
    assert code == 1 and "dependency-not-done" in out
    code, out, _ = run(capsys, db, "dispatch", "a", "--pid", str(sleeper.pid), "--session", "s1",
                       "--json")
    assert code == 0 and json.loads(out)["response"] == {"decision": "applied"}
    code, out, _ = run(capsys, db, "status", "--json")
    rows = {r["task"]: r for r in json.loads(out)["tasks"]}
    assert rows["a"]["status"] == "in-progress" and rows["a"]["way"] == "live-owner"
    assert rows["b"]["action"] == "await-dependencies"
    code, out, _ = run(capsys, db, "status")
    assert out.splitlines()[0].split()[:3] == ["TASK", "STATUS", "WAY"]
    wt = GitRepository(str(tmp / "repo")).worktree_path("a/f1")
    with open(os.path.join(wt, "half.txt"), "w") as f:
        f.write("half\n")
    code, out, _ = run(capsys, db, "converge", "--json")
    assert [s["response"]["decision"] for s in json.loads(out)["sent"]] == ["evidence-only"]
    sleeper.kill()
    sleeper.wait()
    code, out, _ = run(capsys, db, "converge")
    assert "sent probe-owner for a: applied" in out and "a: wait / resume" in out
    replacement = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        code, out, _ = run(capsys, db, "retry", "a", "--pid", str(replacement.pid), "--json")
        assert code == 0, out
        request = json.loads(out)["request"]
        assert "imports" in request                      # the dirty work is carried over
        code, out, _ = run(capsys, db, "show", "a", "--json")
        shown = json.loads(out)
        assert [a["state"] for a in shown["attempts"]] == ["abandoned", "running"]
        assert shown["imported"] == request["imports"] == shown["retained"]
        assert shown["pins"][0]["ref"] == "retained/a/f1"
        code, out, _ = run(capsys, db, "show", "a")
        assert "receipts:" in out and "evidence:" in out and "probe" in out
    finally:
        replacement.kill()
        replacement.wait()
    for sub in ("audit", "verify-ledger", "rebuild"):
        code, out, _ = run(capsys, db, sub)
        assert code == 0, (sub, out)


def test_abandon_reconcile_and_reconstruct(setup, capsys):
    db, tmp = setup
    run(capsys, db, "task", "add", "a")
    run(capsys, db, "task", "add", "b", "--after", "a")
    legacy = tmp / "graph.jsonl"
    legacy.write_text('{"id": "a", "status": "done"}\n')
    code, out, _ = run(capsys, db, "import-legacy", str(legacy), "--json")
    report = json.loads(out)
    assert code == 0 and report["quarantined"][0]["would-have-unlocked"] == ["b"]
    target = GitRepository(str(tmp / "repo")).target()
    code, out, _ = run(capsys, db, "reconstruct", "a", "--candidate", "0" * 40, "--base", target)
    assert code == 1 and "evidence-missing" in out
    code, out, _ = run(capsys, db, "reconstruct", "a", "--candidate", target, "--base", target)
    assert code == 0
    code, out, _ = run(capsys, db, "status", "--json")
    assert json.loads(out)["ready"] == ["b"]
    assert run(capsys, db, "abandon", "b")[0] == 0
    code, out, _ = run(capsys, db, "abandon", "b")
    assert code == 1 and "terminal-already" in out
    assert run(capsys, db, "reconcile", "b")[0] == 1


def test_a_tampered_ledger_fails_verification_and_rebuild(setup, capsys):
    db, _ = setup
    run(capsys, db, "task", "add", "a")
    c = sqlite3.connect(db)
    seq = c.execute("SELECT seq FROM ledger WHERE event = 'task-added'").fetchone()[0]
    c.execute("UPDATE ledger SET body = replace(body, '\"a\"', '\"evil\"') WHERE seq = ?", (seq,))
    c.commit()
    c.close()
    code, out, _ = run(capsys, db, "verify-ledger")
    assert code == 1 and f"broken at seq {seq}" in out
    assert run(capsys, db, "rebuild")[0] == 1
    code, out, _ = run(capsys, db, "audit", "--json")
    assert code == 1 and json.loads(out)["findings"][0]["check"] == "ledger-chain"


def test_send_lines_decides_every_line_with_one_commit(setup, capsys, sleeper, monkeypatch):
    db, tmp = setup
    assert run(capsys, db, "task", "add", "a")[0] == 0
    assert run(capsys, db, "dispatch", "a", "--pid", str(sleeper.pid), "--session", "s1",
               "--token-file", str(tmp / "a.token"))[0] == 0
    token = (tmp / "a.token").read_text().strip()   # handed to the attempt's process
    worker = str(tmp / "w1.credential")            # heartbeats are the worker's to send
    assert run(capsys, db, "principal", "add", "w1", "--role", "worker", "--out", worker)[0] == 0
    monkeypatch.setenv("WGK_CREDENTIAL_FILE", worker)
    cap = {"graph": "g", "task": "a", "generation": 0, "attempt": 1, "fence": 1, "lease-epoch": 1}
    beat = lambda n, **kw: json.dumps({"kind": "heartbeat", "actor": "worker", "task": "a",
                                       "key": f"hb{n}", "cap": cap, "evidence": f"b{n}",
                                       "token": token, **kw})
    good = tmp / "beats.jsonl"
    good.write_text("\n".join([beat(1), beat(2), "", beat(1)]) + "\n")
    from wgk.impl.contract import wire
    from wgk.impl.cli import kernel_requests
    from wgk.impl.front import kernel
    parsed = []                                    # every line is parsed once on its way

    def counted(body):
        parsed.append(body["key"])
        return wire.parse(body)
    monkeypatch.setattr(kernel_requests, "parse", counted)
    monkeypatch.setattr(kernel, "parse", counted)
    code, out, _ = run(capsys, db, "send", "--lines", str(good))
    assert code == 0 and parsed == ["hb1", "hb2", "hb1"]
    assert out.splitlines() == [f"{good}:1: evidence-only", f"{good}:2: evidence-only",
                                f"{good}:4: duplicate"]
    stale = tmp / "stale.jsonl"
    stale.write_text(beat(3) + "\n" + beat(4, cap={**cap, "fence": 9}) + "\n")
    code, out, _ = run(capsys, db, "--json", "send", "--lines", str(stale))
    data = json.loads(out)
    assert code == 1 and data["requests"] == 2 and data["rejected"] == 1
    assert data["responses"][1] == {"decision": "rejected", "code": "stale-capability"}
    before = fingerprint(db)
    for text, message in ((beat(5) + "\n{\"kind\": \n", f"{tmp / 'bad.jsonl'}:2: "),
                          (beat(5) + "\n" + beat(6, kind="launch") + "\n",
                           f"{tmp / 'bad.jsonl'}:2: ")):
        (tmp / "bad.jsonl").write_text(text)
        code, out, err = run(capsys, db, "send", "--lines", str(tmp / "bad.jsonl"))
        assert code == 2 and out == "" and message in err and err.count("\n") == 1, err
    assert fingerprint(db) == before            # a bad line refuses the whole batch


def test_a_reset_over_a_live_owner_waits_for_its_proven_exit(setup, capsys, sleeper):
    db, _ = setup
    run(capsys, db, "task", "add", "a")
    assert run(capsys, db, "dispatch", "a", "--pid", str(sleeper.pid))[0] == 0
    assert run(capsys, db, "reset", "a")[0] == 0           # the intent, over a live owner
    shown = json.loads(run(capsys, db, "show", "a", "--json")[1])
    assert (shown["reopening"], shown["generation"], shown["attempt-state"]) == (True, 0, "running")
    assert "a reset's intent pending" in run(capsys, db, "show", "a")[1]
    code, out, _ = run(capsys, db, "reset", "a")
    assert code == 1 and "owner-not-proven-dead" in out
    sleeper.kill()
    sleeper.wait()
    assert run(capsys, db, "converge")[0] == 0             # the exit proven by a probe
    assert run(capsys, db, "reset", "a")[0] == 0           # released, one generation opened
    shown = json.loads(run(capsys, db, "show", "a", "--json")[1])
    assert (shown["reopening"], shown["generation"]) == (False, 1)
    assert "intent pending" not in run(capsys, db, "show", "a")[1]


def test_pause_and_resume_with_a_not_before_time(setup, capsys, sleeper):
    db, _ = setup
    run(capsys, db, "task", "add", "a")
    run(capsys, db, "task", "add", "b")
    assert run(capsys, db, "pause", "a")[0] == 0
    shown = json.loads(run(capsys, db, "show", "a", "--json")[1])
    assert (shown["paused"], shown["not-before"]) == (True, 0)
    assert "admission: paused, not before -" in run(capsys, db, "show", "a")[1]
    code, out, _ = run(capsys, db, "status", "--json")
    status = json.loads(out)
    assert status["ready"] == ["b"]
    code, out, _ = run(capsys, db, "dispatch", "a", "--pid", str(sleeper.pid))
    assert code == 1 and "paused" in out
    before = fingerprint(db)
    for args, message in ((("resume", "a", "--not-before", "-1"), "--not-before"),
                          (("pause", "zz"), "unknown task 'zz'")):
        code, out, err = run(capsys, db, *args)
        assert code == 2 and out == "" and message in err and err.count("\n") == 1, (args, err)
    assert fingerprint(db) == before
    far = 2 ** 40                                          # the kernel's clock is seconds
    assert run(capsys, db, "resume", "a", "--not-before", str(far))[0] == 0
    shown = json.loads(run(capsys, db, "show", "a", "--json")[1])
    assert (shown["paused"], shown["not-before"]) == (False, far)
    assert f"admission: not paused, not before {far}" in run(capsys, db, "show", "a")[1]
    code, out, _ = run(capsys, db, "status", "--json")
    assert json.loads(out)["ready"] == ["b"]
    code, out, _ = run(capsys, db, "dispatch", "a", "--pid", str(sleeper.pid))
    assert code == 1 and "not-due" in out
    assert run(capsys, db, "resume", "a")[0] == 0         # no not-before time: due at once
    code, out, _ = run(capsys, db, "status", "--json")
    assert json.loads(out)["ready"] == ["a", "b"]
    assert run(capsys, db, "dispatch", "a", "--pid", str(sleeper.pid))[0] == 0


def test_an_open_provider_route_holds_its_task_until_a_due_probe_succeeds(setup, capsys, sleeper, monkeypatch):
    import time
    db, tmp = setup
    run(capsys, db, "task", "add", "a")
    run(capsys, db, "task", "add", "b")
    assert run(capsys, db, "dispatch", "a", "--pid", str(sleeper.pid),
               "--token-file", str(tmp / "a.token"))[0] == 0
    worker = str(tmp / "w1.credential")
    assert run(capsys, db, "principal", "add", "w1", "--role", "worker", "--out", worker)[0] == 0
    cap = {"graph": "g", "task": "a", "generation": 0, "attempt": 1, "fence": 1, "lease-epoch": 1}
    route = "pi|openrouter|b3:endpoint"

    def send(name, **body):
        (tmp / f"{name}.jsonl").write_text(json.dumps({"actor": "daemon", "task": "a", "key": name,
                                                        **body}) + "\n")
        return run(capsys, db, "send", "--lines", str(tmp / f"{name}.jsonl"))
    assert send("outage", kind="provider-failure", cap=cap, route=route, evidence="o1",
                deadline=1)[0] == 0                      # the probe due at once (1 s after the epoch)
    operator = os.environ["WGK_CREDENTIAL_FILE"]
    monkeypatch.setenv("WGK_CREDENTIAL_FILE", worker)    # the attempt's process reports its failure
    assert send("fail", kind="fail", actor="worker", cap=cap, failure="provider", evidence="exit",
                token=(tmp / "a.token").read_text().strip())[0] == 0
    monkeypatch.setenv("WGK_CREDENTIAL_FILE", operator)
    shown = json.loads(run(capsys, db, "show", "a", "--json")[1])
    assert (shown["route"], shown["route-breaker"], shown["attempt-state"]) == \
        (route, "unavailable", "failed")
    assert (shown["plan"]["way"], shown["plan"]["action"]) == ("runnable", "probe-route")
    assert f"provider route: {route}, breaker unavailable, next probe at 1" in \
        run(capsys, db, "show", "a")[1]
    assert json.loads(run(capsys, db, "status", "--json")[1])["ready"] == ["b"]
    code, out, _ = run(capsys, db, "dispatch", "a", "--pid", str(os.getpid()))
    assert code == 1 and "route-unavailable" in out
    later = int(time.time()) + 2
    code, out, _ = send("probe-1", kind="probe-route", deadline=later)   # failed: armed again
    assert code == 0 and json.loads(run(capsys, db, "show", "a", "--json")[1])["route-probe-at"] == later
    code, out, _ = send("probe-2", kind="probe-route", succeeded=True)
    assert code == 1 and "probe-not-due" in out
    time.sleep(max(0.0, later - time.time()) + 0.1)
    assert send("probe-3", kind="probe-route", succeeded=True)[0] == 0
    shown = json.loads(run(capsys, db, "show", "a", "--json")[1])
    assert (shown["route-breaker"], shown["plan"]["action"]) == ("available", "dispatch")
    assert json.loads(run(capsys, db, "status", "--json")[1])["ready"] == ["a", "b"]
