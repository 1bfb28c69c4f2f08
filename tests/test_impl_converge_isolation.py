"""One bad task never stops the rest: an effect that fails during convergence parks its task
with the named hold `effect-failed` for the run and convergence goes on with the others (real
git, real processes, the operator's command line)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from wgk.conformance.cli.main import main
from wgk.impl import Kernel, MemoryWorld, Pragmas, TaskPolicy
from wgk.impl.contract.errors import EnvError
from wgk.impl.world.git import GitRepository, init_repository

CAP = {"graph": "g", "generation": 0, "attempt": 1, "fence": 1, "lease-epoch": 1}


@pytest.fixture
def sleepers():
    started: list[subprocess.Popen] = []

    def start() -> int:
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        started.append(p)
        return p.pid

    yield start
    for p in started:
        p.kill()
        p.wait()


def run(capsys, db, *args) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["kernel", "--db", db, *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_a_failed_effect_parks_its_task_and_the_others_converge(tmp_path, capsys, monkeypatch,
                                                                 sleepers):
    repo = str(tmp_path / "repo")
    init_repository(repo)
    db = str(tmp_path / "k.db")
    assert main(["kernel", "--db", db, "init", "--graph", "g", "--repo", repo]) == 0
    operator = db + ".credential"
    monkeypatch.setenv("WGK_CREDENTIAL_FILE", operator)
    worker = str(tmp_path / "w.credential")
    assert run(capsys, db, "principal", "add", "w", "--role", "worker", "--out", worker)[0] == 0
    git = GitRepository(repo, worktrees=repo + "-worktrees")
    try:
        for name in ("a", "b", "c"):
            assert run(capsys, db, "task", "add", name)[0] == 0
            token = tmp_path / f"{name}.token"
            assert run(capsys, db, "dispatch", name, "--pid", str(sleepers()), "--session", name,
                       "--token-file", str(token))[0] == 0
            (tmp_path / "repo-worktrees" / name / "f1" / f"{name}.txt").write_text(name + "\n")
            submit = {"kind": "submit", "actor": "worker", "task": name, "key": f"s-{name}",
                      "cap": dict(CAP, task=name), "expected-phase": "absent",
                      "expected-revision": 0, "token": token.read_text().strip()}
            monkeypatch.setenv("WGK_CREDENTIAL_FILE", worker)
            assert run(capsys, db, "send", json.dumps(submit))[0] == 0
            monkeypatch.setenv("WGK_CREDENTIAL_FILE", operator)
        # someone else's commit squats a's WorkSave ref: pinning a's work there fails in git
        git.out("update-ref", git.ref("worksave/a/f1-v1"), git.target())
        code, out, err = run(capsys, db, "converge")
        assert code == 0, err
        lines = out.splitlines()
        assert any(line.startswith("a: hold / await-operator (effect-failed: GitError:")
                   for line in lines), out
        for name in ("b", "c"):
            assert f"sent seal-candidate for {name}: applied" in lines
        code, out, _ = run(capsys, db, "--json", "converge")
        report = json.loads(out)
        assert code == 0 and [f["task"] for f in report["failed"]] == ["a"]
        assert report["failed"][0]["request"]["kind"] == "save-work"
        shown = json.loads(run(capsys, db, "--json", "show", "a")[1])
        assert shown["phase"] == "quiescing"          # the failed save-work decided nothing
        assert run(capsys, db, "verify-ledger")[0] == 0 and run(capsys, db, "audit")[0] == 0
    finally:
        git.remove_all_worktrees()


class FailingLand(Exception):
    pass


def test_an_error_that_is_not_an_effect_still_stops_convergence(tmp_path):
    """Only what the environment raised is isolated: a broken database is not an effect."""
    world = MemoryWorld.create(target="main-0")
    k = Kernel(str(tmp_path / "k.db"), world.environment(), pragmas=Pragmas(synchronous="OFF"))
    k.create_graph("g", [TaskPolicy("a")])
    k.handle({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d",
              "expected-attempt": 0, "owner": {"pid": 4001, "birth": 911, "session": "s"}})
    world.processes.kill(4001)                     # a dead owner: convergence has work to do
    world.clock.advance(5)
    real_handle = k.handle

    def broken(request, credential=None):
        raise FailingLand("not an effect")
    k.handle = broken
    with pytest.raises(FailingLand):
        k.converge()
    k.handle = real_handle

    def failing(request, credential=None):
        raise EnvError("the process table cannot be read")
    k.handle = failing
    report = k.converge()
    assert list(report.failed) == ["a"] and report.plans[0].reason.startswith("effect-failed")
    k.close()
