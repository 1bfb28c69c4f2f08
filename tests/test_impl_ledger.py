"""The hash-linked ledger: verification, tampering, rebuild of every projection, and the
rule that no code path outside the one projection routine writes a status."""
from __future__ import annotations

import contextlib
import pathlib
import re
import sqlite3

from wgk.impl import Kernel, MemoryWorld, Pragmas, TaskPolicy
from wgk.impl.storage import store as store_module
from wgk.impl.front.audit import Scratch, replayed
from wgk.impl.storage.ledger import link_v2
from wgk.impl.protocol.world_steps import apply_env

FAST = Pragmas(synchronous="OFF")
OWNER = {"pid": 4001, "birth": 911, "session": "s1"}


def cap(k: Kernel, task: str) -> dict:
    t = k.record(task)
    return {"graph": "g", "task": task, "generation": t.generation, "attempt": t.attempt,
            "fence": t.fence, "lease-epoch": t.lease_epoch}


def tx(k: Kernel, task: str, kind: str, actor: str, **params) -> dict:
    t = k.record(task)
    return k.handle({"kind": kind, "actor": actor, "task": task, "cap": cap(k, task),
                     "key": f"{kind}:{task}:{t.fence}:{t.revision}",
                     "expected-phase": t.visible_phase, "expected-revision": t.revision,
                     **params})


def finished_pair(tmp_path) -> tuple[Kernel, MemoryWorld]:
    """a Done through the whole transaction, b dispatched, one rejection and evidence."""
    w = MemoryWorld.create(target="main-0")
    k = Kernel(str(tmp_path / "k.db"), w.environment(), pragmas=FAST)
    k.create_graph("g", [TaskPolicy("a"), TaskPolicy("b", deps=("a",))])
    assert k.handle({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d-a",
                     "expected-attempt": 0, "owner": OWNER})["decision"] == "applied"
    apply_env(k, {"env": "edit", "task": "a", "content": "c-a1"})
    k.handle({"kind": "heartbeat", "actor": "worker", "task": "a", "key": "hb", "cap": cap(k, "a"),
              "evidence": "hb-1"})
    assert tx(k, "a", "submit", "worker") == {"decision": "applied"}
    k.converge()
    assert tx(k, "a", "validate", "validator", candidate="c-a1", verdict="pass")["decision"] == "applied"
    k.converge()
    assert k.status("a") == "done"
    assert k.handle({"kind": "dispatch", "actor": "daemon", "task": "b", "key": "d-b",
                     "expected-attempt": 0, "owner": dict(OWNER, pid=4002)})["decision"] == "applied"
    assert k.handle({"kind": "fail", "actor": "worker", "task": "b", "key": "stale",
                     "cap": dict(cap(k, "b"), fence=9)})["code"] == "stale-capability"
    return k, w


def test_the_chain_verifies_and_every_request_is_one_event(tmp_path):
    k, _ = finished_pair(tmp_path)
    v = k.verify_ledger()
    assert v.ok and v.events == k.conn.execute("SELECT count(*) FROM ledger").fetchone()[0]
    requests = k.conn.execute("SELECT count(*) FROM ledger WHERE event = 'request'").fetchone()[0]
    assert requests == k.conn.execute("SELECT count(*) FROM journal").fetchone()[0]


def test_tampering_is_reported_with_the_first_broken_link(tmp_path):
    k, _ = finished_pair(tmp_path)
    k.conn.execute("UPDATE ledger SET body = replace(body, 'c-a1', 'c-evil') WHERE seq = 8")
    v = k.verify_ledger()
    assert not v.ok and v.broken_at == 8 and "hash" in v.problem
    report = k.rebuild()
    assert not report.ok and "seq 8" in report.differences[0]
    assert k.audit().findings[0].check == "ledger-chain"


def test_a_deleted_event_breaks_the_chain(tmp_path):
    k, _ = finished_pair(tmp_path)
    k.conn.execute("DELETE FROM ledger WHERE seq = 5")
    v = k.verify_ledger()
    assert not v.ok and v.broken_at == 6


def test_rebuild_reproduces_every_table_and_the_projection(tmp_path):
    k, _ = finished_pair(tmp_path)
    report = k.rebuild()
    assert report.ok, report.differences
    assert report.events == k.verify_ledger().events


def test_a_verdict_is_reused_only_while_nothing_changed(tmp_path):
    k, _ = finished_pair(tmp_path)
    walks = []
    k.conn.set_trace_callback(lambda sql: walks.append(sql) if "FROM ledger WHERE seq >=" in sql
                              else None)
    assert k.verify_ledger().ok and k.rebuild().ok and k.audit().ok
    assert len(walks) == 1                   # the rebuild and the audit reuse the verdict
    k.conn.execute("UPDATE ledger SET body = replace(body, 'c-a1', 'c-evil') WHERE seq = 8")
    assert k.verify_ledger().broken_at == 8  # a row written on this connection
    k.conn.execute("UPDATE ledger SET body = replace(body, 'c-evil', 'c-a1') WHERE seq = 8")
    assert k.verify_ledger().ok
    other = sqlite3.connect(k.store.path)
    other.execute("UPDATE ledger SET event = 'forged' WHERE seq = 3")
    other.commit()
    assert k.verify_ledger().broken_at == 3  # a commit of another connection
    assert len(walks) == 4


def _rehash(k: Kernel, since: int) -> None:
    """Re-hash the chain from ``since`` on, as one who rewrote an event would."""
    (prev,) = k.conn.execute("SELECT hash FROM ledger WHERE seq = ?", (since - 1,)).fetchone()
    rows = k.conn.execute("SELECT seq, event, task, key, body FROM ledger WHERE seq >= ? "
                          "ORDER BY seq", (since,)).fetchall()
    for seq, event, task, key, body in rows:
        digest = link_v2(prev, seq, event, task, key, body)
        k.conn.execute("UPDATE ledger SET prev = ?, hash = ? WHERE seq = ?", (prev, digest, seq))
        prev = digest


def test_a_rebuild_starts_from_an_earlier_replay_only_while_the_ledger_holds_it(tmp_path):
    k, _ = finished_pair(tmp_path)
    (hb,) = k.conn.execute("SELECT seq FROM ledger WHERE key = 'hb'").fetchone()
    early = replayed(k)
    assert early.seq == k.ledger_head()
    for n in range(3):
        assert k.handle({"kind": "heartbeat", "actor": "worker", "task": "b", "key": f"hb-b{n}",
                         "cap": cap(k, "b"), "evidence": f"hb-b{n}"})["decision"] == "evidence-only"
    assert k.ledger_head() == early.seq + 3
    full, started = k.rebuild(), k.rebuild(start=early)
    assert full.ok and started.ok and started.events == full.events == k.ledger_head()
    later = replayed(k, early)                # goes on from the earlier image
    assert later.seq == k.ledger_head() and k.rebuild(start=later).ok
    k.conn.execute("UPDATE ledger SET body = replace(body, '\"hb-1\"', '\"hb-9\"') WHERE seq = ?",
                   (hb,))
    _rehash(k, hb)                           # a rewritten history whose chain verifies
    assert k.verify_ledger().ok
    full, started = k.rebuild(), k.rebuild(start=early)
    assert not full.ok and any("evidence" in d for d in full.differences)
    assert started.differences == full.differences    # the image no longer holds: not used


def test_a_rebuild_on_a_kept_scratch_starts_from_its_image_every_time(tmp_path):
    k, _ = finished_pair(tmp_path)
    early = replayed(k)
    for n in range(2):
        k.handle({"kind": "heartbeat", "actor": "worker", "task": "b", "key": f"hb-b{n}",
                  "cap": cap(k, "b"), "evidence": f"hb-b{n}"})
    with contextlib.closing(Scratch(early)) as scratch:
        for _ in range(2):                   # the second rebuild finds the image as it was
            r = k.rebuild(scratch=scratch)
            assert r.ok and r.events == k.ledger_head()
            assert scratch.kernel.ledger_head() == early.seq
        k.conn.execute("UPDATE task_view SET status = 'done', satisfied = 1 WHERE task = "
                       "(SELECT id FROM tasks WHERE name = 'b')")
        planted = k.rebuild(scratch=scratch).differences
        assert planted and planted == k.rebuild().differences
        assert any("task_view" in d for d in planted)
        k.conn.execute("UPDATE task_view SET status = 'in-progress', satisfied = 0 WHERE task = "
                       "(SELECT id FROM tasks WHERE name = 'b')")
        (hb,) = k.conn.execute("SELECT seq FROM ledger WHERE key = 'hb'").fetchone()
        k.conn.execute("UPDATE ledger SET body = replace(body, '\"hb-1\"', '\"hb-9\"') "
                       "WHERE seq = ?", (hb,))
        _rehash(k, hb)                       # the image no longer holds: the scratch is not used
        rewritten = k.rebuild(scratch=scratch)
        assert not rewritten.ok and rewritten.differences == k.rebuild().differences
    assert scratch.kernel is None


def test_a_large_database_is_rebuilt_in_a_file_and_compared_in_the_database(tmp_path, monkeypatch):
    k, _ = finished_pair(tmp_path)
    k.conn.execute("UPDATE task_view SET status = 'done', satisfied = 1 WHERE task = "
                   "(SELECT id FROM tasks WHERE name = 'b')")
    k.conn.execute("INSERT INTO evidence SELECT task, kind, ident || '-twin', counted, seq "
                   "FROM evidence LIMIT 1")
    in_memory = k.rebuild().differences
    with k.store.scratch() as where:
        assert where == ":memory:"
    monkeypatch.setattr(store_module, "MEMORY_SCRATCH_BYTES", 0)
    with k.store.scratch() as where:
        assert where.endswith(".db")
    in_files = k.rebuild().differences
    assert len(in_memory) == 2 and in_files == in_memory
    assert any("evidence" in d for d in in_files) and any("task_view" in d for d in in_files)
    report = k.rebuild(apply=True)
    assert report.applied and k.rebuild().ok


def test_a_status_written_behind_the_kernels_back_is_found_and_repaired(tmp_path):
    k, _ = finished_pair(tmp_path)
    # b is in progress; someone writes "done" into the projection table directly
    k.conn.execute("UPDATE task_view SET status = 'done', satisfied = 1 WHERE task = "
                   "(SELECT id FROM tasks WHERE name = 'b')")
    findings = k.audit().findings
    assert [(f.check, f.task) for f in findings] == [("status-projection", "b")]
    report = k.rebuild(apply=True)
    assert not report.ok and report.applied
    assert any("task_view" in d for d in report.differences)
    assert k.rebuild().ok and k.audit().ok and k.status("b") == "in-progress"


def test_a_forged_receipt_is_caught_by_the_audit(tmp_path):
    k, _ = finished_pair(tmp_path)
    k.conn.execute("DELETE FROM receipts WHERE kind = 'effect' AND task = "
                   "(SELECT id FROM tasks WHERE name = 'a')")
    k._forget()
    checks = {f.check for f in k.audit().findings}
    assert "done-iff-graphsave" in checks
    assert not k.rebuild().ok


IMPL = pathlib.Path(__file__).resolve().parent.parent / "impl"
STATUS_WRITE = re.compile(r"(INSERT\s+(OR\s+\w+\s+)?INTO\s+task_view|UPDATE\s+task_view|"
                          r"SET\s+[^\"']*\bstatus\s*=|\bsatisfied\s*=\s*\?)", re.I)


def test_no_code_path_writes_a_status_outside_the_projection_routine():
    """Status is a projection: only projection.StatusProjection writes task_view."""
    writers = {}
    for path in sorted(IMPL.rglob("*.py")):
        hits = [i + 1 for i, line in enumerate(path.read_text().splitlines())
                if STATUS_WRITE.search(line)]
        if hits:
            writers[path.name] = hits
    assert set(writers) == {"projection.py"}, writers
    # and the only status/satisfied columns in the schema are the projection's
    schema = (IMPL / "storage" / "schema.py").read_text()
    assert len(re.findall(r"\bstatus TEXT\b", schema)) == 1
    assert "done" not in re.findall(r"'(\w+)'", schema)
    # no module but projection assigns a task status value
    for path in IMPL.rglob("*.py"):
        if path.name != "projection.py":
            assert not re.search(r"status\s*=\s*[\"']done[\"']", path.read_text()), path.name


def test_the_implementation_imports_neither_the_model_nor_conformance():
    """An independent implementation: impl/ imports nothing from wgk.model or wgk.conformance."""
    import ast
    found = {}
    for path in sorted(IMPL.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            bad = [n for n in names if n.startswith(("wgk.model", "wgk.conformance", "model",
                                                     "conformance"))]
            if bad:
                found.setdefault(path.name, []).extend(bad)
    assert found == {}
    assert len(list(IMPL.rglob("*.py"))) >= 12          # the walk saw the package


def test_a_reports_ledger_body_is_the_canonical_text_of_its_body(tmp_path):
    """A report's body is made from a text made once per kind and answer (``report_body``):
    each stored body is, byte for byte, the canonical text of the body it holds, whatever
    the evidence id (quotes, backslashes, text beyond ASCII, the marks the text is made with),
    and a refused report's too."""
    import hashlib
    import json as json_module
    from wgk.impl.storage.store import dumps
    token = "t-secret"
    k = Kernel(str(tmp_path / "r.db"), MemoryWorld.create(target="main-0").environment(),
               pragmas=FAST)
    k.create_graph("g", [TaskPolicy("a")])
    assert k.handle({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d",
                     "expected-attempt": 0, "owner": OWNER,
                     "mint": hashlib.sha256(token.encode()).hexdigest()})["decision"] == "applied"
    idents = ["beat", 'q"uote', "back\\slash", "zwölf €", "@ident@", "@digest@", "beat"]
    answers = []
    for n, ident in enumerate(idents):
        for kind, actor in (("heartbeat", "worker"), ("provider-failure", "wrapper")):
            answers.append(k.handle({"kind": kind, "actor": actor, "task": "a",
                                     "key": f"{kind}-{n}", "cap": cap(k, "a"), "token": token,
                                     "evidence": ident})["decision"])
    answers.append(k.handle({"kind": "heartbeat", "actor": "worker", "task": "a", "key": "stale",
                             "cap": dict(cap(k, "a"), fence=9), "token": token,
                             "evidence": "x"})["decision"])
    assert answers[-3:] == ["evidence-only", "evidence-only", "rejected"], answers
    assert "applied" in answers
    rows = k.conn.execute("SELECT body FROM ledger WHERE event = 'request' AND key != 'd'").fetchall()
    assert len(rows) == 2 * len(idents) + 1
    for (text,) in rows:
        body = json_module.loads(text)
        request = body.pop("request")
        assert text == '{"request":' + dumps(request) + "," + dumps(body)[1:], text
        if body["response"]["decision"] != "rejected":
            assert body["facts"][0][1]["id"] in idents
    k.close()

def test_the_authority_tables_are_checked_once_per_state_and_a_change_after_is_seen(tmp_path):
    k, _ = finished_pair(tmp_path)
    folds = []
    k.conn.set_trace_callback(lambda sql: folds.append(sql) if "FROM principals" in sql
                              else None)
    assert k.verify_ledger().ok and k.audit().ok
    assert len(folds) == 1                   # the audit reuses what verify-ledger found
    (kept,) = k.conn.execute("SELECT response FROM journal WHERE key = 'd-b'").fetchone()
    k.conn.execute("UPDATE journal SET response = '{}' WHERE key = 'd-b'")       # this connection
    assert "d-b" in k.verify_ledger().problem
    assert [f.check for f in k.audit().findings] == ["authority-under-chain"]
    k.conn.execute("UPDATE journal SET response = ? WHERE key = 'd-b'", (kept,))
    assert k.verify_ledger().ok
    with k.store.atomic() as unit:           # a change rolled back: the rows it read are gone
        k.conn.execute("DELETE FROM journal WHERE key = 'd-a'")
        assert "d-a" in k.verify_ledger().problem
        unit.abandon()
    assert k.verify_ledger().ok and k.audit().ok
    other = sqlite3.connect(k.store.path)    # another connection's commit
    other.execute("DELETE FROM journal WHERE key = 'd-a'")
    other.commit()
    other.close()
    assert "d-a" in k.verify_ledger().problem and not k.audit().ok


def test_a_written_steps_changes_are_the_columns_whose_value_it_changes(tmp_path, monkeypatch):
    """A step decided by its write records the changes made from the columns it writes
    (``transaction.changes``), with no comparison of whole records: exactly what
    ``records.changed`` gives for the record those columns make (so the ledger's bytes are
    the same), a column written with the value it held left out as ``changed`` leaves it."""
    from wgk.impl.decisions import transaction
    from wgk.impl.front import kernel as kernel_module
    from wgk.impl.storage.records import changed, evolve
    seen = []

    def checked(old, columns):
        got = transaction.changes(old, columns)
        assert got == changed(old, evolve(old, **columns)), (columns, got)
        seen.append((columns, got))
        return got
    monkeypatch.setattr(kernel_module, "step_changes", checked)
    k, _ = finished_pair(tmp_path)
    phases = {columns["phase"] for columns, _ in seen if "phase" in columns}
    assert {"prepared", "work-saved", "effect-committed", "graph-saved"} <= phases, phases
    assert any(set(columns) - set(got) for columns, got in seen)   # a value written as it was
    assert all(got and set(got) <= set(columns) for columns, got in seen)
    assert k.verify_ledger().ok
    k.close()
