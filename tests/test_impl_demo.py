"""wgk demo: the end-to-end run on real git and real workers, and checks that can fail."""
from __future__ import annotations

import json
import os

from wgk.impl.demo import checks, world
from wgk.conformance.cli.main import main


def test_the_demo_keeps_every_promise_and_its_checks_can_fail(tmp_path, capsys):
    workdir = tmp_path / "demo"
    assert main(["demo", "--workdir", str(workdir), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] and len(out["checks"]) >= 20 and all(c["ok"] for c in out["checks"])
    tasks = out["final"]["tasks"]
    assert [tasks[t]["status"] for t in ("schema", "api", "ui")] == ["done"] * 3
    assert (tasks["api"]["attempt"], tasks["ui"]["version"]) == (2, 2)
    assert any("killed api worker" in line for line in out["story"])
    # the checks compare facts: a different promise is reported broken
    k = world.open_kernel(str(workdir / "kernel.db"), str(workdir / "repo"))
    try:
        facts = {"final": k.project(), "schema": tasks["schema"]["candidate"],
                 "base": tasks["schema"]["base"], "moved": tasks["ui"]["base"],
                 "api-retained": tasks["api"]["retained"], "ui-v1": "0" * 40,
                 "ui-after-move": {"status": "needs-repair", "reason": "target-moved",
                                   "candidate": tasks["ui"]["retained"],
                                   "target": tasks["ui"]["base"]}}
        failed = {c.name for c in checks.check(k, facts) if not c.ok}
        assert failed == {"the moved target sent ui to needs-repair with its candidate retained",
                          "ui's first candidate stays retained, the revision is version 2",
                          # facts without the refusals and the private files: not assumed
                          "a worker labelling itself validator was refused (role-not-held)",
                          "a K-request without the attempt's token was refused (token-mismatch)",
                          "the database and every credential and token file are readable by "
                          "their owner only"}
    finally:
        k.close()


def test_the_demo_refuses_a_directory_that_already_holds_one(tmp_path, capsys):
    (tmp_path / "repo").mkdir()
    assert main(["demo", "--workdir", str(tmp_path)]) == 2
    assert "already holds a demo" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["repo"]
