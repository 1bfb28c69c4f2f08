"""Reopening a Done task on the implementation: the command line (help, bad input, the
happy path with a held dependent), schema version 8 (the generations say why they opened)
reached from version 6 through 7 (the external waits), and the audit of a dependent fenced
by the reopen."""
from __future__ import annotations

import hashlib
import json
import sqlite3

import pytest

from wgk.conformance.cli.main import main
from wgk.impl.world.git import GitRepository
from wgk.impl.storage.schema import MIGRATIONS, SCHEMA_VERSION
from wgk.impl.storage.store import Store

from test_impl_cli import run, setup  # noqa: F401  (the kernel CLI's fixture and runner)


def fingerprint(db: str) -> str:
    c = sqlite3.connect(db)
    rows = [r for t in ("tasks", "generations", "journal", "ledger") for r in
            c.execute(f"SELECT * FROM {t}").fetchall()]
    c.close()
    return hashlib.sha256(repr(rows).encode()).hexdigest()


def _done_by_reconstruct(capsys, db, tmp, task):
    legacy = tmp / f"{task}-{len(list(tmp.glob('*.jsonl')))}.jsonl"     # a new source each time
    legacy.write_text(json.dumps({"id": task, "status": "done"}) + "\n")
    assert run(capsys, db, "import-legacy", str(legacy))[0] == 0
    target = GitRepository(str(tmp / "repo")).target()
    code, out, _ = run(capsys, db, "reconstruct", task, "--candidate", target, "--base", target)
    assert code == 0, out


def test_reopen_help_names_an_example(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["kernel", "reopen", "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0
    assert "wgk kernel --db k.db reopen schema" in out and "dependency-reopened" in out


def test_reopen_bad_input_is_one_line_exit_2_and_nothing_changes(setup, capsys):
    db, _ = setup
    assert run(capsys, db, "task", "add", "a")[0] == 0
    before = fingerprint(db)
    code, out, err = run(capsys, db, "reopen", "zz")
    assert code == 2 and out == "" and "unknown task 'zz'" in err and err.count("\n") == 1
    code, out, _ = run(capsys, db, "reopen", "a", "--json")           # open: not Done
    assert code == 1 and json.loads(out)["response"]["code"] == "illegal-phase-edge"
    assert fingerprint(db) != before                  # the refusal is journaled, nothing else
    c = sqlite3.connect(db)
    assert c.execute("SELECT generation FROM tasks WHERE name = 'a'").fetchone() == (0,)


def test_reopen_a_done_task_its_dependent_waits_and_a_done_dependent_wins(setup, capsys):
    db, tmp = setup
    run(capsys, db, "task", "add", "a")
    run(capsys, db, "task", "add", "b", "--after", "a")
    _done_by_reconstruct(capsys, db, tmp, "a")
    assert json.loads(run(capsys, db, "status", "--json")[1])["ready"] == ["b"]
    code, out, _ = run(capsys, db, "reopen", "a", "--json")
    assert code == 0 and json.loads(out)["request"]["expected-generation"] == 0
    rows = {r["task"]: r for r in json.loads(run(capsys, db, "status", "--json")[1])["tasks"]}
    assert rows["a"]["status"] == "open" and rows["a"]["action"] == "dispatch"
    assert rows["b"]["action"] == "await-dependencies"
    c = sqlite3.connect(db)
    assert c.execute("SELECT g.generation, g.cause FROM generations g JOIN tasks t "
                     "ON t.id = g.task WHERE t.name = 'a' ORDER BY g.generation").fetchall() \
        == [(0, None), (1, "reopen")]
    code, out, _ = run(capsys, db, "reopen", "a")
    assert code == 1 and "illegal-phase-edge" in out                 # open again
    _done_by_reconstruct(capsys, db, tmp, "a")
    _done_by_reconstruct(capsys, db, tmp, "b")
    code, out, _ = run(capsys, db, "reopen", "a")
    assert code == 1 and "terminal-already" in out                   # b's Done came first
    assert run(capsys, db, "reopen", "b")[0] == 0                    # the leaf first
    assert run(capsys, db, "reopen", "a")[0] == 0
    for sub in ("audit", "verify-ledger", "rebuild"):
        code, out, _ = run(capsys, db, sub)
        assert code == 0, (sub, out)


def test_schema_8_follows_6_through_7(tmp_path):
    path = str(tmp_path / "old.db")
    Store(path, migrate_to=6).close()
    s = Store(path)
    assert s.schema_version() == SCHEMA_VERSION == max(MIGRATIONS) >= 8
    assert "waiting_on" in [r[1] for r in s.conn.execute("PRAGMA table_info(tasks)")]
    columns = [r[1] for r in s.conn.execute("PRAGMA table_info(generations)")]
    assert columns == ["task", "generation", "opened_seq", "cause"]
    assert s.migrate() == []
