"""Daemon convergence: for every unfinished task, its one way forward, acted on when due.

``converge(kernel)`` reads owners, deadlines and transactions through the
planner and executes the due scheduled actions by sending the corresponding
daemon requests through ``kernel.handle`` — the same path as every other
request, with deterministic idempotency keys so that a convergence interrupted
by a crash is resumed, never repeated:

- ``probe-owner`` for a live owner on its deadline and for a suspect one (once
  per run): a live owner (pid and birth match) is recorded as evidence, a proven death as a write;
- ``declare-lost`` once a proven death's deadline has come;
- ``reconcile-chat`` when the chat requested for the current fence has no reconciliation
  row yet (sent once per fence: the chat is found by that fence, not created twice);
- the next SaveTransaction edge the daemon is authorised for (resuming an
  interrupted completion; an effect that already happened is re-observed);
- ``mark-repair`` when a land's target moved before the CAS.

Every applied action other than a probe and a chat's reconciliation (applied once per
key) must lower its task's ``convergence_rank``; a task whose action did not is reported ``stalled`` and
not acted on again in the run, so convergence never cycles without progress.

One task never stops the rest: an action whose effect fails (the repository or
the process table raises) decided nothing (its transaction rolled back); the
task is parked for the run with the named hold ``effect-failed`` and the safe
action ``await-operator`` (its plan in the report says why in one line), and
convergence goes on with the others. The next run tries it again.

Runnable tasks (dispatch, assign) need a worker and are left to a dispatcher;
waits and holds are reported with their reason. A verified-live owner is never
terminalised: nothing here sends a terminal request for a running owner whose
death was not proven.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from ..contract.errors import EffectError, EnvError, one_line
from ..decisions.planner import Plan
from ..decisions.projection import convergence_rank, finished
from ..storage.records import TaskRecord
from ..contract.vocabulary import APPLIED

#: The daemon's request for each phase whose next edge it drives.
DAEMON_EDGES = {
    "prepared": "quiesce",
    "quiescing": "save-work",
    "work-saved": "seal-candidate",
    "accepted": "record-disposition",
    "disposition-recorded": "prepare-effect",
    "effect-prepared": "commit-effect",
    "effect-committed": "prepare-cleanup",
    "cleanup-prepared": "commit-cleanup",
    "cleanup-committed": "save-graph",
}


@dataclass(frozen=True)
class Sent:
    request: dict
    response: dict

    def to_json(self) -> dict:
        return {"request": self.request, "response": self.response}


@dataclass
class ConvergeReport:
    plans: list[Plan] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)
    now: int = 0
    stalled: list[str] = field(default_factory=list)   # an applied action left the rank
    #: task -> its request and the one line its failed effect raised (parked for the run)
    failed: dict[str, tuple[dict, str]] = field(default_factory=dict)

    @property
    def holds(self) -> list[Plan]:
        return [p for p in self.plans if p.way == "hold"]

    def to_json(self) -> dict:
        out = {"now": self.now, "plans": [p.to_json() for p in self.plans],
               "sent": [s.to_json() for s in self.sent]}
        if self.stalled:
            out["stalled"] = self.stalled
        if self.failed:
            out["failed"] = [{"task": t, "request": r, "error": e}
                             for t, (r, e) in self.failed.items()]
        return out


def capability(kernel, name: str, t: TaskRecord) -> dict:
    return {"graph": kernel.graph_id, "task": name, "generation": t.generation,
            "attempt": t.attempt, "fence": t.fence, "lease-epoch": t.lease_epoch}


def next_request(kernel, name: str, p: Plan, now: int, probed: set[str]) -> dict | None:
    """The daemon request that acts on plan ``p`` now, or None (not due / not ours)."""
    if p.way not in ("live-owner", "scheduled") or p.deadline > now:
        return None
    t = kernel.record(name)
    if p.action == "expire-wait":
        return {"actor": "daemon", "task": name, "kind": "expire-wait",
                "key": f"converge:{name}:g{t.generation}:a{t.attempt}:expire-wait"}
    cap = capability(kernel, name, t)
    base = {"actor": "daemon", "task": name, "cap": cap}
    if p.action in ("probe-owner", "await-handoff"):     # a live owner: its re-probe on its deadline
        if name in probed:
            return None
        probed.add(name)
        birth = kernel.env.processes.birth_of(t.owner_pid)
        evidence = f"pid:{t.owner_pid}:birth:{'none' if birth is None else birth}"
        return dict(base, kind="probe-owner", evidence=evidence,
                    key=f"converge:{name}:f{t.fence}:probe:{evidence}:{t.owner_seen}:t{now}")
    # guards: no-dead-owner-in-progress-without-action
    if p.action == "declare-lost":
        return dict(base, kind="declare-lost",
                    key=f"converge:{name}:g{t.generation}:f{t.fence}:declare-lost")
    if p.action == "reconcile-chat":
        return dict(base, kind="reconcile-chat", key=f"converge:{name}:f{t.fence}:reconcile-chat")
    tx = dict(base, **{"expected-phase": t.visible_phase, "expected-revision": t.revision})
    if p.action == "mark-repair":
        return dict(tx, kind="mark-repair",
                    key=f"converge:{name}:f{t.fence}:r{t.revision}:mark-repair")
    if p.action == "drive-transaction":
        kind, params = _edge(kernel, name, t)
        if kind is None:
            return None
        key = f"converge:{name}:g{t.generation}:f{t.fence}:r{t.revision}:{kind}"
        return dict(tx, kind=kind, **params, key=key + _kept_suffix(kernel, kind, t))
    return None


def _kept_suffix(kernel, kind: str, t: TaskRecord) -> str:
    """A cleanup that would lose bytes no ref keeps is refused; once someone has kept or
    removed them, the next cleanup is a new request (its key names what it observed)."""
    if kind != "commit-cleanup" or t.worktree_id is None:
        return ""
    lost = kernel.env.repository.uncaptured(t.worktree_id)
    return ":unkept-" + hashlib.sha256(repr(lost).encode()).hexdigest()[:12] if lost else ""


def _edge(kernel, name: str, t: TaskRecord) -> tuple[str | None, dict[str, Any]]:
    policy = kernel.policy(name)
    if t.phase == "validated":
        if policy.review_required:
            return "request-review", {}
        return "accept", {"candidate": t.candidate, "verdict": "not-required"}
    kind = DAEMON_EDGES.get(t.phase)
    if kind == "save-work":
        view = kernel.env.repository.observe_worktree(t.worktree_id) if t.worktree_id else None
        content = view.content if view is not None and view.present else None
        return kind, {"candidate": content, "base": t.base_hint}
    if kind == "seal-candidate":
        return kind, {"candidate": t.candidate}
    if kind == "record-disposition":
        return kind, {"disposition": policy.disposition}
    if kind == "commit-effect":
        return kind, {"candidate": t.candidate, "base": t.base}
    return kind, {}


def converge(kernel, *, max_rounds: int = 64, credential: str | None = None) -> ConvergeReport:
    """Act on every due way forward until nothing more is due; report every plan. A closed
    kernel's convergence is sent with a daemon's ``credential`` (its keys in its namespace)."""
    now = kernel.env.clock.now()
    report = ConvergeReport(now=now)
    probed: set[str] = set()
    for _ in range(max_rounds):
        progressed = False
        for name in kernel.active_tasks():
            p = kernel.plan(name)
            if p is None or name in report.stalled or name in report.failed:
                continue
            request = next_request(kernel, name, p, now, probed)
            if request is None:
                continue
            request = {k: v for k, v in request.items() if v is not None}
            rank = convergence_rank(kernel.record(name))
            try:
                response = kernel.handle(request, credential)
            except (EnvError, EffectError) as e:
                report.failed[name] = (request, one_line(e))     # decided nothing: parked
                continue
            report.sent.append(Sent(request, response))
            if response["decision"] == APPLIED and request["kind"] == "reconcile-chat":
                progressed = True                 # applied once per key: it cannot cycle
            elif response["decision"] == APPLIED and request["kind"] != "probe-owner":
                if convergence_rank(kernel.record(name)) < rank:
                    progressed = True
                else:
                    report.stalled.append(name)
        if not progressed:
            break
    for name in kernel.names():
        if name in report.failed:
            report.plans.append(Plan(name, "hold", "await-operator",
                                     f"effect-failed: {report.failed[name][1]}", 0))
        elif not finished(kernel.record(name)):
            report.plans.append(kernel.plan(name))
    return report
