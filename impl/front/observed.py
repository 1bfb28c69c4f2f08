"""What the kernel reports about its tasks: the facts of the observable projection, and ``show``.

Both read the tables through a kernel object (``conn``, ``ids()``, ``record()``,
``policy()``, ``plan()``, ``env``) and observe the environment now; neither writes.
"""
from __future__ import annotations

import json

from ..world.env import WorktreeView
from ..decisions.projection import TaskFacts, status
from ..storage.records import TaskRecord
from ..decisions.decision import effect_name
from ..contract.vocabulary import RECEIPTS

COUNTERS = ("compactions", "continuations", "acks", "provider-failures", "messages", "logs")
COUNTED_EVIDENCE = {"compaction": "compactions", "continuation": "continuations", "ack-continuation": "acks",
                    "provider-failure": "provider-failures", "message": "messages"}


def journal(conn, keys: list[str] | None = None) -> dict[str, dict]:
    """The stored responses by key (every key, or only ``keys``)."""
    if keys is None:
        rows = conn.execute("SELECT key, response FROM journal ORDER BY key")
    else:
        rows = [r for key in keys for r in conn.execute(
            "SELECT key, response FROM journal WHERE key = ?", (key,))]
    return {key: json.loads(resp) for key, resp in rows}


def task_facts(k, names: list[str]) -> dict[str, TaskFacts]:
    """The stored facts the observable projection of ``names`` needs, in few queries."""
    ids = k.ids()
    by_id = {ids[n]: n for n in names}
    where = ("" if len(by_id) == len(ids) else
             f" WHERE task IN ({', '.join(str(i) for i in by_id)})")
    evidence, counts = _evidence_and_counts(k, names, by_id, where)
    promotions = dict.fromkeys(names, 0)
    happened: set[str] = set()
    repo = k.env.repository
    # effects of the current generation only (a reopened task makes its effect again)
    for tid, effect, state, gen in k.conn.execute(
            "SELECT e.task, e.id, e.state, a.generation FROM effects e JOIN attempts a "
            "ON a.task = e.task AND a.fence = e.fence" + where.replace("task", "e.task")):
        if gen != k.record(by_id[tid]).generation:
            continue
        if state == "committed" or (state == "prepared" and repo.effect_observed(effect)):
            promotions[by_id[tid]] += 1
            happened.add(effect)
    last = {wt: content for wt, content in
            k.conn.execute("SELECT id, last_content FROM worktrees" + where)}
    out = {}
    for name in names:
        t = k.record(name)
        out[name] = TaskFacts(
            evidence=sorted(evidence[name]), counters=counts[name],
            promotions=promotions[name],
            effect_done=t.effect_done or effect_name(name, t) in happened,
            worktree=worktree_fact(k.env, t, last))
    return out


def _evidence_and_counts(k, names: list[str], by_id: dict[int, str], where: str):
    evidence: dict[str, list] = {n: [] for n in names}
    counts: dict[str, dict[str, int]] = {n: dict.fromkeys(COUNTERS, 0) for n in names}
    for tid, kind, ident, counted in k.conn.execute(
            "SELECT task, kind, ident, counted FROM evidence" + where):
        name = by_id[tid]
        evidence[name].append([kind, ident])
        counter = COUNTED_EVIDENCE.get(kind)
        if counter and (kind != "message" or counted):
            counts[name][counter] += 1
    for tid, n in k.conn.execute("SELECT task, count(*) FROM logs" + where + " GROUP BY task"):
        counts[by_id[tid]]["logs"] = n
    return evidence, counts


def worktree_fact(env, t: TaskRecord, last: dict[str, str | None]) -> dict:
    """The current attempt's worktree as observed (its last stored bytes once it is gone)."""
    if t.worktree_id is None:
        return {"present": False, "content": None, "origin": None}
    view: WorktreeView = env.repository.observe_worktree(t.worktree_id)
    content = view.content if view.present else last.get(t.worktree_id)
    return {"present": view.present, "content": content, "origin": t.origin}


def show(k, name: str) -> dict:
    """Everything the kernel holds about one task (see ``Kernel.show``)."""
    tid, t, p = k.ids()[name], k.record(name), k.policy(name)
    pl = k.plan(name)
    rows = lambda sql: [dict(zip([d[0] for d in cur.description], r))
                        for cur in [k.conn.execute(sql, (tid,))] for r in cur.fetchall()]
    return {
        "task": name, "deps": list(p.deps), "review-required": p.review_required,
        "requires-assignment": p.requires_assignment, "disposition-policy": p.disposition,
        "status": status(t), "plan": pl.to_json() if pl else None,
        "generation": t.generation, "attempt": t.attempt, "fence": t.fence,
        "lease-epoch": t.lease_epoch, "attempt-state": t.attempt_state,
        "owner": {"pid": t.owner_pid, "birth": t.owner_birth, "session": t.session,
                  "seen": t.owner_seen},
        "phase": t.phase, "exit": t.exit, "reason": t.reason, "revision": t.revision,
        "candidate": t.candidate, "base": t.base, "version": t.version,
        "retained": t.retained, "saved-work": t.saved_work, "imported": t.imported,
        "completion-receipt": t.completion_receipt,
        "paused": t.paused, "not-before": t.not_before,
        "route": t.route, "route-breaker": "unavailable" if t.route_unavailable else "available",
        "route-probe-at": t.probe_at,
        "reopening": t.reopening,
        "receipts": {r: {"fence": b.fence, "candidate": b.candidate, "base": b.base}
                     for r, b in zip(RECEIPTS, t.receipts) if b.exists},
        "phases": _phase_history(k, name),
        "evidence": [[kind, i, seq] for kind, i, seq in k.conn.execute(
            "SELECT kind, ident, seq FROM evidence WHERE task = ? ORDER BY seq, kind, ident",
            (tid,))],
        "attempts": rows("SELECT fence, generation, attempt, state, worktree, origin, "
                         "saved_work, imported, opened_seq FROM attempts WHERE task = ? "
                         "ORDER BY fence"),
        "pins": rows("SELECT ref, content, seq FROM pins WHERE task = ? ORDER BY seq"),
        "effects": rows("SELECT id, disposition, candidate, base, state, re_observed, "
                        "prepared_seq, settled_seq FROM effects WHERE task = ? "
                        "ORDER BY prepared_seq"),
        "worktrees": rows("SELECT id, fence, origin, path, planned_removal, removed, "
                          "last_content FROM worktrees WHERE task = ? ORDER BY fence"),
        "legacy": [{"source": s_, "line": ln, "status": st,
                    "original": o.decode("utf-8", "replace")}
                   for s_, ln, st, o in k.conn.execute(
                       "SELECT source, line, legacy_status, original FROM legacy_records "
                       "WHERE task = ? ORDER BY id", (name,))],
    }


def _phase_history(k, name: str) -> list[dict]:
    """Every ledger event of the task that changed its phase or exit, in order."""
    phases = []
    for seq, key, body in k.conn.execute(
            "SELECT seq, key, body FROM ledger WHERE task = ? AND event IN ('request', 'seed') "
            "ORDER BY seq", (name,)):
        b = json.loads(body)
        ch = b.get("changes", {})
        if "phase" in ch or "exit" in ch:
            entry = {"seq": seq, "key": key, "kind": b.get("request", {}).get("kind")}
            entry.update({f: ch[f] for f in ("phase", "exit", "reason") if f in ch})
            phases.append(entry)
    return phases
