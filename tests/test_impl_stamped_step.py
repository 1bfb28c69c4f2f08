"""SQLite: a step of the SaveTransaction moves its task's stamp on in its own statement
(``tables.TaskTables.step_if_current`` with ``stamped``; ``Store.steps_stamped``), on the
stamp's condition (``tables.STAMP``): a step over a record another connection wrote since it
was read is refused by that statement and made again on the stored facts, and the step's other
writes take no statement of their own for the stamp. A kernel taking the stamp's separate
statement (PostgreSQL's way) gives the same answers, ledger, tables and stamps."""
from __future__ import annotations

import hashlib
import sqlite3

import pytest

from wgk.impl import Kernel, MemoryWorld, TaskPolicy
from wgk.impl.contract.wire import parse
from wgk.impl.decisions.rules import EDGES
from wgk.impl.storage.schema import PROJECTED_TABLES
from wgk.impl.storage.store import Store

OWNER = {"pid": 4001, "birth": 911, "session": "s1"}
TOKEN = "step-token"
MINT = hashlib.sha256(TOKEN.encode()).hexdigest()
CAP = {"graph": "g", "task": "a", "generation": 0, "attempt": 1, "fence": 1, "lease-epoch": 1}
DISPATCH = {"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d:a",
            "expected-attempt": 0, "owner": OWNER, "mint": MINT}
SUBMIT = {"kind": "submit", "actor": "worker", "task": "a", "key": "submit:a", "cap": CAP,
          "expected-phase": "absent", "expected-revision": 0, "token": TOKEN}
QUIESCE = {"kind": "quiesce", "actor": "wrapper", "task": "a", "key": "quiesce:a", "cap": CAP,
           "expected-phase": "prepared", "expected-revision": 1, "token": TOKEN}


def _stamp(k: Kernel) -> int:
    return k.conn.execute("SELECT stamp FROM transactions WHERE task = ?",
                          (k.ids()["a"],)).fetchone()[0]


def _dispatched(tmp_path) -> tuple[Kernel, Kernel]:
    db = str(tmp_path / "kernel.db")
    world = MemoryWorld.create(target="main-0")
    first = Kernel(db, world.environment())
    first.create_graph("g", [TaskPolicy("a")])
    assert first.handle(DISPATCH)["decision"] == "applied"
    world.repository.write(first.record("a").worktree_id, "w")
    assert first.handle(SUBMIT)["decision"] == "applied"
    return first, Kernel(db, world.environment())


@pytest.mark.parametrize("stamped", [True, False])
def test_a_step_over_a_record_written_since_it_was_read_is_refused_by_its_statement(
        tmp_path, stamped):
    first, second = _dispatched(tmp_path)
    tid = first.ids()["a"]
    first.record("a")                                      # read, with its stamp
    second.record("a")
    with second.store.atomic():
        second.tables.stamp(tid)                           # another connection's write
    before = _stamp(first)
    r, edge = parse(QUIESCE), EDGES["quiesce"][0]
    if not stamped:                                        # the statement without the stamp
        with first.store.atomic():
            assert first.tables.step_if_current(tid, r, "quiescing", edge)
        return
    with pytest.raises(sqlite3.OperationalError) as failed:
        with first.store.atomic():
            first.tables.step_if_current(tid, r, "quiescing", edge, stamped=True)
    assert first.store.retryable(failed.value)
    assert _stamp(first) == before
    assert first.conn.execute("SELECT phase, revision FROM transactions WHERE task = ?",
                              (tid,)).fetchone() == ("prepared", 1)


def test_a_stale_kernels_step_is_made_again_on_the_stored_facts(tmp_path):
    first, second = _dispatched(tmp_path)
    first.record("a")
    first.cache.sync = lambda: False                       # it never sees other commits
    second.record("a")
    with second.store.atomic():
        second.tables.stamp(second.ids()["a"])
    failures, retryable = [], first.store.retryable
    first.store.retryable = lambda e: failures.append(str(e)) or retryable(e)
    assert first.handle(QUIESCE)["decision"] == "applied"  # run again after the refusal
    assert len(failures) == 1 and _stamp(second) == 4
    first._forget()
    assert first.record("a").phase == "quiescing" and first.audit().findings == []


def _run(tmp_path, name: str, stamped: bool, monkeypatch) -> dict:
    monkeypatch.setattr(Store, "steps_stamped", stamped)
    world = MemoryWorld.create(target="main-0")
    k = Kernel(str(tmp_path / name), world.environment())
    k.create_graph("g", [TaskPolicy("a")])
    answers = [k.handle(DISPATCH)]
    world.repository.write(k.record("a").worktree_id, "w")
    base = world.repository.target()
    for n, (kind, actor, phase, kw) in enumerate([
            ("submit", "worker", "absent", {}), ("quiesce", "wrapper", "prepared", {}),
            ("save-work", "wrapper", "quiescing", {"candidate": "w", "base": base}),
            ("seal-candidate", "daemon", "work-saved", {"candidate": "w"}),
            ("validate", "validator", "candidate-sealed", {"candidate": "w", "verdict": "pass"})]):
        wire = {"kind": kind, "actor": actor, "task": "a", "key": f"{kind}:a", "cap": CAP,
                "expected-phase": phase, "expected-revision": n, **kw}
        if actor in ("worker", "wrapper"):
            wire["token"] = TOKEN
        answers.append(k.handle(wire))
    tables = {t: k.store.dump(t) for t in PROJECTED_TABLES}
    out = {"answers": answers, "tables": tables, "stamp": _stamp(k),
           "ledger": k.conn.execute("SELECT seq, event, task, key, body FROM ledger").fetchall()}
    k.close()
    return out


def test_the_stamped_step_writes_what_the_stamps_own_statement_writes(tmp_path, monkeypatch):
    stamped = _run(tmp_path, "stamped.db", True, monkeypatch)
    apart = _run(tmp_path, "apart.db", False, monkeypatch)
    assert [a["decision"] for a in stamped["answers"]] == ["applied"] * 6
    assert stamped == apart
