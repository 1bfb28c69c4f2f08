"""Applying one ledger event to the tables (the live path and the rebuild share it).

``apply_event(kernel, seq, event, body)`` writes what one event determines: the
graph's meta and tasks, the journal entry of a decided request, the record's
changed rows, the facts and the status projection. ``kernel`` is any object
with the kernel's tables and its ``cache`` (``store``, ``conn``, ``tables``, ``facts``,
``view``, ``cache``, ``ids()``, ``task_id()``, ``record()``): this module never imports the kernel.
"""
from __future__ import annotations

from .records import EMPTY, TaskPolicy, TaskRecord, apply_changes
from ..contract.vocabulary import DEFAULT_RETRY_BUDGET
from ..contract.canonical import canonical_json as dumps


def apply_event(k, seq: int, event: str, body: dict, *, key: str | None = None,
                task: str | None = None, record: TaskRecord | None = None,
                changes: dict | None = None) -> None:
    """Write the tables an event determines. The live path and ``rebuild`` both use this
    (``key`` and ``task`` are the ledger row's columns; ``record``/``changes`` spare the
    live path from decoding what it has just encoded)."""
    if event == "graph-created":
        k.store.set_meta("graph-id", body["graph"])
        for key, value in body.get("config", {}).items():
            k.store.set_meta(f"config:{key}", value)
        k.cache.graph_created(body["graph"])
    elif event == "task-added":
        _apply_task_added(k, seq, body)
    elif event == "dependency-added":
        ids = k.ids()
        tid, dep = ids[body["task"]], ids[body["dep"]]
        k.conn.execute("INSERT INTO edges VALUES (?, ?)", (tid, dep))
        k.view.add_dependency(tid, k.record(body["dep"]).graph_saved)
        k.cache.policy_changed(body["task"])
    elif event in ("seed", "request"):
        if event == "request":
            k.conn.execute("INSERT INTO journal VALUES (?, ?, ?, ?)",
                           (key, body["digest"], response_text(body["response"]), seq))
        if "changes" in body:
            name = body["task"] if event == "seed" else task
            _apply_task_changes(k, seq, name, changes if changes is not None else body["changes"],
                                body.get("facts", []), record)
    elif event in ("principal-added", "principal-revoked"):
        _apply_principal(k, seq, body)
    elif event == "legacy-record":
        k.facts.write(0, [("legacy-record", body)], seq)
    elif event == "skipped":
        pass                  # a number no transaction committed (PostgreSQL's sequence)
    elif event == "ledger-sealed":
        pass                          # the ledger's own: version-1 rows sealed by a migration
    else:
        raise ValueError(f"unknown ledger event {event!r} at seq {seq}")


def _apply_principal(k, seq: int, body: dict) -> None:
    """A principal as the event leaves it (its row carries the event's seq)."""
    row = (body["secret-sha256"], ",".join(body["roles"]), int(body["revoked"]), seq,
           body["name"])
    if not k.conn.execute("UPDATE principals SET secret_sha256 = ?, roles = ?, revoked = ?, "
                          "seq = ? WHERE name = ?", row).rowcount:
        k.conn.execute("INSERT INTO principals (secret_sha256, roles, revoked, seq, name) "
                       "VALUES (?, ?, ?, ?, ?)", row)


_RESPONSES: dict[tuple, str] = {}


def response_text(response: dict) -> str:
    """The stored form of a response (memoised: there are few distinct ones)."""
    key = (response["decision"], response.get("code"))
    text = _RESPONSES.get(key)
    if text is None:
        text = _RESPONSES[key] = dumps(response)
    return text


def _apply_task_added(k, seq: int, body: dict) -> None:
    cur = k.conn.execute(
        "INSERT INTO tasks (name, review_required, requires_assignment, disposition_policy, "
        "retry_budget) VALUES (?, ?, ?, ?, ?)",
        (body["task"], int(body["review-required"]), int(body["requires-assignment"]),
         body["disposition"], body.get("retry-budget", DEFAULT_RETRY_BUDGET)))
    tid = cur.lastrowid
    ids = k.ids()
    ids[body["task"]] = tid
    k.tables.create(tid)
    k.cache.put_record(body["task"], EMPTY)   # what its new rows hold (no read needed)
    k.cache.put_policy(TaskPolicy(             # (its dependencies by name, as ``load_policy``)
        body["task"], tuple(sorted(body["deps"])), bool(body["review-required"]),
        bool(body["requires-assignment"]), body["disposition"],
        body.get("retry-budget", DEFAULT_RETRY_BUDGET)))
    k.conn.execute("INSERT INTO generations (task, generation, opened_seq) VALUES (?, 0, ?)",
                   (tid, seq))
    pending = 0
    for d in body["deps"]:
        k.conn.execute("INSERT INTO edges VALUES (?, ?)", (tid, ids[d]))
        pending += 0 if k.record(d).graph_saved else 1
    k.view.create(tid, EMPTY, pending)


def _apply_task_changes(k, seq: int, name: str, changes: dict, facts: list,
                        record: TaskRecord | None) -> None:
    tid = k.task_id(name)
    old = k.record(name)
    new = record if record is not None else apply_changes(old, changes)
    k.tables.save(tid, old, new, changes, seq)
    k.facts.write(tid, [(f[0], f[1]) for f in facts], seq)
    k.view.refresh(tid, new)
    k.cache.put_record(name, new)
