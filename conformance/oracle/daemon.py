"""The trace step "the daemon converges", on the model: every due scheduled action.

A trace says ``{"env": "converge"}`` where the daemon runs one convergence. The
implementation runs its ``converge()``; the model runs this: for every task with
a running attempt (in order), its one way forward from the planner is acted on
when it is due (a live owner or a scheduled action whose deadline has come) by
the daemon request that takes it, until a round makes no progress:

- a live owner or a suspect is probed once per convergence, the evidence
  naming the owner's pid and the birth of the process now holding it
  (``pid:<pid>:birth:<birth|none>``);
- a proven-dead owner is declared lost;
- a chat creation request made under the attempt's key is reconciled (never made again);
- a target that moved before the compare-and-swap marks the task for repair;
- a transaction in flight takes its next main-line edge (the daemon's edges).

An applied action other than a probe must lower the task's convergence rank,
or the task is left alone for the rest of the run (stalled). Runnable work
(dispatch, assign) waits for a dispatcher. The daemon's idempotency keys are
deterministic, so that the journal both sides keep is the same: they are the
daemon's wire contract (``converge:<task>:...``), written here from that
contract and in the implementation from its own.

``undone(kernel, report)`` is the other half: after the implementation's
convergence, no due action may be left undone (its fixpoint).
"""
from __future__ import annotations

from typing import Any

from wgk.model.liveness import convergence_rank
from wgk.model.projections import next_edge, plan, status
from wgk.model.vocab import Action, Exit, Kind, OwnerSeen, Phase, Status, Way

#: How many rounds one convergence runs at most (as the implementation's).
MAX_ROUNDS = 64
#: The statuses of a task with a running attempt outside a hold: where convergence may act.
ACTIVE = (Status.IN_PROGRESS, Status.COMPLETING)


def visible_phase(t) -> str:
    """The phase a caller expects: the exit when one is set, else the phase."""
    return Exit(t.exit).label if t.exit != Exit.NONE else Phase(t.phase).label


def capability(graph_id: str, name: str, t) -> dict:
    return {"graph": graph_id, "task": name, "generation": t.generation, "attempt": t.attempt,
            "fence": t.fence, "lease-epoch": t.lease_epoch}


def probe(name: str, t, base: dict, now: int) -> dict:
    birth = t.proc_birth if t.proc_birth else "none"
    evidence = f"pid:{t.owner_pid}:birth:{birth}"
    seen = OwnerSeen(t.owner_seen).label
    return dict(base, kind="probe-owner", evidence=evidence,
                key=f"converge:{name}:f{t.fence}:probe:{evidence}:{seen}:t{now}")


def edge_request(s, i: int, name: str, t, tx: dict, cname) -> dict | None:
    """The next main-line edge of a transaction in flight, as the daemon sends it."""
    edge = next_edge(t, bool(s.graph.review_required[i]))
    if not edge:
        return None
    kind = Kind(edge)
    params: dict[str, Any] = {}
    if kind == Kind.ACCEPT:
        params = {"candidate": cname(t.candidate), "verdict": "not-required"}
    elif kind == Kind.SAVE_WORK:
        params = {"candidate": cname(t.worktree) if t.worktree_present else None,
                  "base": cname(t.built_on)}
    elif kind == Kind.SEAL_CANDIDATE:
        params = {"candidate": cname(t.candidate)}
    elif kind == Kind.RECORD_DISPOSITION:
        params = {"disposition": "land"}
    elif kind == Kind.COMMIT_EFFECT:
        params = {"candidate": cname(t.candidate), "base": cname(t.base)}
    return dict(tx, kind=kind.label, **params,
                key=f"converge:{name}:g{t.generation}:f{t.fence}:r{t.revision}:{kind.label}")


def next_request(s, i: int, now: int, probed: set[str], cname) -> dict | None:
    """The daemon request that takes task ``i``'s way forward now, or None (not due / not ours)."""
    p = plan(s, i)
    if p is None or p.way not in (Way.LIVE_OWNER, Way.SCHEDULED) or p.deadline > now:
        return None
    name, t = s.graph.tasks[i], s.tasks[i]
    base = {"actor": "daemon", "task": name, "cap": capability(s.graph.graph_id, name, t)}
    if p.action in (Action.PROBE_OWNER, Action.AWAIT_HANDOFF):    # a live owner: its re-probe
        if name in probed:
            return None
        probed.add(name)
        return probe(name, t, base, now)
    if p.action == Action.DECLARE_LOST:
        return dict(base, kind="declare-lost",
                    key=f"converge:{name}:g{t.generation}:f{t.fence}:declare-lost")
    if p.action == Action.RECONCILE_CHAT:
        return dict(base, kind="reconcile-chat", key=f"converge:{name}:f{t.fence}:reconcile-chat")
    tx = dict(base, **{"expected-phase": visible_phase(t), "expected-revision": t.revision})
    if p.action == Action.MARK_REPAIR:
        return dict(tx, kind="mark-repair", key=f"converge:{name}:f{t.fence}:r{t.revision}:mark-repair")
    if p.action == Action.DRIVE_TRANSACTION:
        return edge_request(s, i, name, t, tx, cname)
    return None


def converge(system, after_each=None) -> list[tuple[dict, dict]]:
    """One convergence on a ``ModelSystem``: every due action taken, in rounds, until no round
    makes progress; the (request, decision) pairs it sent (``after_each()`` after each)."""
    now = int(system.state.now)
    probed: set[str] = set()
    stalled: set[str] = set()
    sent: list[tuple[dict, dict]] = []
    for _ in range(MAX_ROUNDS):
        progressed = False
        for i, name in enumerate(system.state.graph.tasks):
            s = system.state
            if Status(status(s.tasks[i])) not in ACTIVE or name in stalled:
                continue
            request = next_request(s, i, now, probed, system.names.cname)
            if request is None:
                continue
            request = {k: v for k, v in request.items() if v is not None}
            if system.daemon is not None:
                request["principal"] = system.daemon
            rank = convergence_rank(s, i, s.tasks[i])
            decision = system.apply({"request": request})
            sent.append((request, decision))
            if after_each:
                after_each()
            if decision.get("decision") == "applied" and request["kind"] != "probe-owner":
                if convergence_rank(system.state, i, system.state.tasks[i]) < rank:
                    progressed = True
                else:
                    stalled.add(name)
        if not progressed:
            break
    return sent


def undone(kernel, report) -> list[str]:
    """Due actions a convergence left undone: a scheduled way forward whose deadline has come
    (a transaction to drive, a dead owner to declare lost, a suspect to probe, a repair to
    mark), and every task it stalled on."""
    now = kernel.env.clock.now()
    out = [f"{name}: {p.action} due since {p.deadline}" for name in kernel.names()
           if (p := kernel.plan(name)) is not None and p.way == "scheduled" and p.deadline <= now]
    return out + [f"{name}: stalled" for name in report.stalled]
