"""The kernel on PostgreSQL: same API, same answers and projections as on SQLite, the same
ledger, audit, rebuild and verify; migrations, retries, group commit and the CLI.

Runs when ``WGK_TEST_POSTGRES`` names a reachable server (each test in a schema of
its own); skips with a one-line reason otherwise. The import-without-psycopg test
runs everywhere.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys

import pytest

from wgk.impl import Kernel, MemoryWorld, StoreError, TaskPolicy
from wgk.impl.storage import pg
from wgk.impl.storage.backends import open_store
from wgk.impl.storage.schema import SCHEMA_VERSION

from pg_support import pg_dsn, pg_server  # noqa: F401  (fixtures)
from test_impl_crash import SCRIPT, SPECS
from wgk.impl.protocol.world_steps import apply_env


def run_script(path: str) -> tuple[list[dict], dict, Kernel]:
    world = MemoryWorld.create(target="main-0")
    k = Kernel(path, world.environment())
    k.create_graph("g", SPECS)
    answers = []
    for step in SCRIPT:
        if "env" in step:
            apply_env(k, step)
        else:
            answers.append(k.handle(step))
            answers.append(k.handle(step))                 # a duplicate: the stored answer
    return answers, k.project(), k


def test_the_kernel_on_postgresql_answers_and_projects_as_on_sqlite(tmp_path, pg_dsn):
    lite_answers, lite, lk = run_script(str(tmp_path / "k.db"))
    answers, projected, k = run_script(pg_dsn)
    assert isinstance(k.store, pg.PgStore) and not isinstance(lk.store, pg.PgStore)
    assert answers == lite_answers
    assert projected["tasks"]["a"]["status"] == "done"
    assert projected == lite
    assert k.verify_ledger().ok and k.verify_ledger().head == lk.verify_ledger().head
    assert k.audit().ok
    report = k.rebuild()
    assert report.ok, report.differences
    assert {t: k.store.dump(t) for t in ("tasks", "journal", "task_view")} == \
        {t: lk.store.dump(t) for t in ("tasks", "journal", "task_view")}
    k.close()
    lk.close()


def test_rebuild_and_verify_see_tampering_on_postgresql(pg_dsn):
    _, _, k = run_script(pg_dsn)
    k.conn.execute("UPDATE task_view SET status = 'open' WHERE task = 1")
    report = k.rebuild()
    assert not report.ok and "task_view" in report.differences[0]
    assert k.rebuild(apply=True).applied
    assert k.rebuild().ok
    k.conn.execute("UPDATE ledger SET body = body || ' ' WHERE seq = 3")
    verdict = k.verify_ledger()
    assert not verdict.ok and verdict.broken_at == 3
    k.close()


def test_group_commit_on_postgresql_answers_like_one_at_a_time(tmp_path, pg_dsn):
    lite_answers, lite, lk = run_script(str(tmp_path / "k.db"))
    lk.close()
    world = MemoryWorld.create(target="main-0")
    k = Kernel(pg_dsn, world.environment())
    k.create_graph("g", SPECS)
    answers, batch = [], []
    for step in SCRIPT:
        if "env" in step:
            answers += k.handle_batch(batch)
            batch.clear()
            apply_env(k, step)
        else:
            batch += [step, step]
    answers += k.handle_batch(batch)
    assert answers == lite_answers
    assert k.project() == lite
    k.close()


def _open_concurrently(dsn: str, q) -> None:
    try:
        s = open_store(dsn)
        q.put(s.schema_version())
        s.close()
    except Exception as e:                         # reported to the parent
        q.put(repr(e))


def test_daemons_starting_at_once_migrate_an_empty_schema_once(pg_dsn):
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_open_concurrently, args=(pg_dsn, q)) for _ in range(4)]
    for p in procs:
        p.start()
    got = [q.get(timeout=60) for _ in procs]
    for p in procs:
        p.join()
    s = open_store(pg_dsn)
    assert got == [s.schema_version()] * 4 == [SCHEMA_VERSION] * 4
    assert s.meta("schema-version") == str(SCHEMA_VERSION)
    s.close()


def test_a_newer_schema_is_refused(pg_dsn):
    s = open_store(pg_dsn)
    s.conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema-version'")
    s.close()
    with pytest.raises(StoreError, match="newer than this kernel"):
        open_store(pg_dsn)


def test_a_deadlock_is_retried_with_the_same_key_invisibly(pg_dsn, monkeypatch):
    import psycopg
    world = MemoryWorld.create(target="main-0")
    k = Kernel(pg_dsn, world.environment())
    k.create_graph("g", [TaskPolicy("a")])
    real, calls = Kernel._decide_and_record, []

    def deadlock_once(kernel, rc, *a):
        calls.append(rc.key)
        if len(calls) == 1:
            k.conn.native("SELECT 1")              # the transaction did work before failing
            raise psycopg.errors.DeadlockDetected("deadlock detected")
        return real(kernel, rc, *a)
    monkeypatch.setattr(Kernel, "_decide_and_record", deadlock_once)
    answer = k.handle(SCRIPT[0])
    assert answer == {"decision": "applied"} and calls == ["dispatch:a", "dispatch:a"]
    assert k.project()["journal"] == {"dispatch:a": {"decision": "applied"}}
    assert k.verify_ledger().events == 3           # the graph, its task, one decision
    k.close()


def _append_tasks(dsn: str, me: int, n: int, q) -> None:
    world = MemoryWorld.create(target="main-0")
    k = Kernel(dsn, world.environment())
    for i in range(n):
        k.add_tasks([TaskPolicy(f"w{me}-{i}")])
        k.handle({"kind": "dispatch", "actor": "daemon", "task": f"w{me}-{i}",
                  "key": f"d{me}-{i}", "expected-attempt": 0,
                  "owner": {"pid": 6000 + me, "birth": 1, "session": f"s{me}"}})
    k.close()
    q.put(me)


def test_concurrent_appends_keep_the_ledger_gap_free_and_linear(pg_dsn):
    world = MemoryWorld.create(target="main-0")
    k = Kernel(pg_dsn, world.environment())
    k.create_graph("g", [])
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    procs = [ctx.Process(target=_append_tasks, args=(pg_dsn, me, 15, q)) for me in range(6)]
    for p in procs:
        p.start()
    assert sorted(q.get(timeout=120) for _ in procs) == list(range(6))
    for p in procs:
        p.join()
    verdict = k.verify_ledger()
    assert verdict.ok and verdict.events == 1 + 6 * 15 * 2
    seqs = [r[0] for r in k.conn.execute("SELECT seq FROM ledger ORDER BY seq")]
    assert seqs == list(range(1, len(seqs) + 1))
    assert sorted(r[0] for r in k.conn.execute("SELECT id FROM tasks")) == list(range(1, 91))
    assert k.audit().ok and k.rebuild().ok
    k.close()


def test_the_cli_runs_on_postgresql(tmp_path, pg_dsn):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t",
                    "commit", "-q", "--allow-empty", "-m", "init"], check=True)

    credential = tmp_path / "operator.credential"
    env = {**os.environ, "WGK_CREDENTIAL_FILE": str(credential)}

    def wgk(*args):
        return subprocess.run([sys.executable, "-m", "wgk.conformance.cli.main", "kernel",
                               "--db", pg_dsn, *args], capture_output=True, text=True, env=env)
    made = wgk("init", "--graph", "g", "--repo", str(repo), "--target", "refs/heads/main",
               "--credential-out", str(credential))
    assert made.returncode == 0, made.stderr
    assert credential.stat().st_mode & 0o777 == 0o600
    again = wgk("init", "--graph", "g", "--repo", str(repo), "--target", "refs/heads/main",
                "--credential-out", str(tmp_path / "second.credential"))
    assert again.returncode == 2 and "already holds graph 'g'" in again.stderr
    assert wgk("task", "add", "schema").returncode == 0
    out = wgk("dispatch", "schema", "--pid", str(os.getpid()), "--session", "s1")
    assert out.returncode == 0 and "applied" in out.stdout
    status = json.loads(wgk("status", "--json").stdout)
    assert "schema" in json.dumps(status)
    for command in ("audit", "verify-ledger", "rebuild"):
        assert wgk(command).returncode == 0, command


def test_a_dsn_without_psycopg_is_one_line_and_exit_2(tmp_path):
    code = ("import sys; sys.modules['psycopg'] = None\n"
            "import wgk.impl\n"                        # the implementation imports without it
            "from wgk.conformance.cli.main import main\n"
            "sys.exit(main(['kernel', '--db', 'postgresql://u@localhost/x', 'status']))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().count("\n") == 0 and "psycopg" in out.stderr
    assert "Traceback" not in out.stderr
