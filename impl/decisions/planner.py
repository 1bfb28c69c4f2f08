"""The planner, as a query over the stored facts: for an unfinished task, its one way forward.

``WAYS_SQL`` reads one task's row, its current attempt and owner, its leases, its
transaction and GraphSave receipt, its dependencies' transactions and receipts and the
generations they opened, and answers one column per way: 1 where that way's condition
holds. It reads the primary facts only, never the derived ``task_view`` (a Done is a
GraphSave receipt of the current fence). Four facts are observed, not stored, and are
bound as parameters: the clock, the target ref, whether the attempt's worktree is there
and whether the transaction's effect happened. Each is observed only for the task whose
stored facts it is about (a worktree of an owner proven dead, the effect and the target of
a prepared effect); otherwise it is bound as absent.

``plans`` plans several tasks with one statement, ``plan`` one. A task's row answers its
plan: exactly one way holds, or the plan is a named fail-closed hold (docs/vocabulary.md,
"The planner").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .decision import Observe


@dataclass(frozen=True)
class Way:
    name: str
    way: str
    action: str
    doc: str


WAYS: tuple[Way, ...] = (
    Way("assign", "runnable", "assign", "admission needs its assignment receipt"),
    Way("dispatch", "runnable", "dispatch", "dependencies are Done: open an attempt"),
    Way("repair-required", "hold", "await-operator",
        "the attempt's work was rejected: a repair, never an automatic retry"),
    Way("retry-budget-spent", "hold", "await-operator",
        "the task's automatic retries after failures are used up: an operator retries"),
    Way("await-dependencies", "wait", "await-dependencies", "a dependency is not Done yet"),
    Way("dependency-abandoned", "hold", "await-operator", "a dependency was abandoned"),
    Way("live-owner", "live-owner", "probe-owner",
        "the exact owner is running; it is re-probed on its deadline"),
    Way("await-handoff", "live-owner", "await-handoff",
        "the owner receipted its completion and may be alive: its handoff (the submit that "
        "opens the transaction) is awaited, it is re-probed on its deadline"),
    Way("reconcile-chat-request", "scheduled", "reconcile-chat",
        "the exact owner is running and the chat creation request made under its attempt's key "
        "is not reconciled: the chat it created is looked up by that key, never created again"),
    Way("probe-suspect", "scheduled", "probe-owner", "evidence raised suspicion: probe once"),
    Way("resume-continuation", "wait", "resume",
        "the exact owner is proven dead and its session may continue: the wrapper's resume "
        "until the deadline"),
    Way("declare-lost", "scheduled", "declare-lost",
        "the exact owner is proven dead with no terminal intent, and no continuation is "
        "planned (or its deadline has passed, or a reset's intent is pending: its "
        "ownership is released, never continued)"),
    Way("drive-transaction", "scheduled", "drive-transaction",
        "convergence drives the next SaveTransaction edge"),
    Way("await-review", "wait", "await-review", "the validator or evaluator must answer"),
    Way("mark-repair", "scheduled", "mark-repair", "the target moved before the CAS: needs repair"),
    Way("await-external", "wait", "await-external",
        "parked until the evidence its wait names arrives (or its deadline passes)"),
    Way("expire-wait", "scheduled", "expire-wait", "the external wait's deadline has passed: end it"),
    Way("wait-expired", "hold", "await-operator",
        "the external wait ran out: an operator retries or resets"),
    Way("paused", "hold", "await-operator",
        "the operator paused the task: nothing opens an attempt until it is unpaused"),
    Way("not-yet-due", "wait", "await-not-before",
        "the task's not-before time has not come: nothing opens an attempt before it"),
    Way("await-route-probe", "wait", "await-route-probe",
        "the task's provider route is unavailable (its breaker open): nothing opens an "
        "attempt on it, the route is probed at its next probe time"),
    Way("probe-route", "runnable", "probe-route",
        "the open breaker's probe is due: the daemon's route prober probes the route "
        "(succeeded: it closes; failed: it is armed again)"),
    Way("reopen-pending", "hold", "await-operator",
        "a reset's intent is pending and the old owner is released: the operator's reset "
        "opens the one new generation"),
    Way("hold", "hold", "await-operator", "fail-closed: an operator must act"),
    Way("dependency-reopened", "hold", "await-operator",
        "a dependency was reopened under the running attempt: its effect is refused, an "
        "operator resets the task"),
    Way("await-archive-confirmation", "wait", "await-archive-confirmation",
        "the daemon's archive backlog proposed the Done task: the operator's confirmation of the "
        "same digest comes first (then the archive names it; the daemon never archives on its "
        "own word)"),
)

#: The one way a Done row can still have: the backlog's proposal awaiting the operator.
ARCHIVE_WAYS = frozenset({"await-archive-confirmation"})

#: Ways timed by the wait's deadline column; every other way uses the attempt's.
WAIT_WAYS = frozenset({"await-external", "expire-wait"})
#: The ways whose deadline is the route's next probe time.
ROUTE_WAYS = frozenset({"await-route-probe", "probe-route"})


def _flag(condition: str) -> str:
    """A condition as 0 or 1 (SQLite has no booleans, PostgreSQL compares them strictly)."""
    return f"CASE WHEN {condition} THEN 1 ELSE 0 END"


#: An evidence row of the task (``t``) of a kind, by its id: a chat creation request or its
#: reconciliation under the attempt's fence, an archive's proposal, confirmation or archive.
_HAS = "EXISTS (SELECT 1 FROM evidence ev WHERE ev.task = t.id AND ev.kind = '{kind}' " \
    "AND ev.ident = {ident})"

#: The stored facts of some tasks, each a 0/1 flag, with the observed ones bound: the clock
#: and the target in ``env``, each task's worktree and effect in ``seen`` (``_ROW`` a task).
#: ``f`` is materialized: inlined, each way's condition would evaluate its flags again; ``g``
#: too (inlined, its flags are compiled again into every way's condition: a statement about a
#: fifth larger to prepare, which a kernel just opened does for each statement it runs first).
_FACTS = f"""
WITH env (now, target) AS (SELECT CAST(? AS BIGINT), CAST(? AS TEXT)),
seen (task, present, happened) AS (VALUES @SEEN@),
f AS MATERIALIZED (SELECT seen.task AS task,
    {_flag("t.abandoned = 1 OR (x.phase = 'graph-saved' AND x.exit = 'none' "
           "AND t.fence <> 0 AND gs.fence IS NOT NULL)")} AS finished,
    x.exit AS exit, x.reason AS reason, t.legacy_done AS legacy,
    t.deadline AS deadline, t.wait_deadline AS wait_deadline,
    {_flag("a.state = 'running'")} AS running,
    {_flag("x.phase <> 'absent'")} AS reserved,
    {_flag("x.exit <> 'none' OR t.legacy_done = 1")} AS held,
    {_flag("t.waiting_on IS NOT NULL")} AS waiting,
    {_flag("t.waiting_on IS NOT NULL OR t.wait_expired = 1")} AS parked,
    t.wait_expired AS expired,
    t.paused AS paused, t.not_before AS not_before, t.reopening AS reopening,
    {_flag("t.completion_receipt IS NOT NULL")} AS receipted,
    {_flag("env.now < t.not_before")} AS early,
    t.route_unavailable AS breaker_open, t.probe_at AS probe_at,
    {_flag("t.route_unavailable = 1 AND env.now >= t.probe_at")} AS probe_due,
    t.requires_assignment AS needs_assignment, t.assigned AS assigned,
    {_flag("t.requires_assignment = 0 OR t.assigned = 1")} AS admitted,
    {_flag("NOT EXISTS (SELECT 1 FROM edges e JOIN tasks d ON d.id = e.dep "
           "JOIN transactions dx ON dx.task = d.id LEFT JOIN receipts dr ON dr.task = d.id "
           "AND dr.kind = 'graph-save' AND dr.fence = d.fence WHERE e.task = t.id AND NOT "
           "(dx.phase = 'graph-saved' AND dx.exit = 'none' AND d.fence <> 0 "
           "AND dr.fence IS NOT NULL))")} AS deps_done,
    {_flag("EXISTS (SELECT 1 FROM edges e JOIN tasks d ON d.id = e.dep "
           "WHERE e.task = t.id AND d.abandoned = 1)")} AS dep_abandoned,
    {_flag("EXISTS (SELECT 1 FROM edges e JOIN generations g ON g.task = e.dep "
           "WHERE e.task = t.id AND g.opened_seq > a.opened_seq)")} AS dep_reopened,
    COALESCE(o.seen, 'unverified') AS seen,
    {_flag("t.attempt <> 0 AND a.state IN ('failed', 'lost') AND t.failure = 'semantic'")}
        AS repair,
    {_flag("t.attempt <> 0 AND a.state IN ('failed', 'lost') AND t.failure <> 'semantic' "
           "AND t.retries >= t.retry_budget")} AS spent,
    {_flag("t.waiting_on IS NOT NULL AND t.wait_deadline <> 0 "
           "AND env.now >= t.wait_deadline")} AS due,
    {_flag("ls.held = 1 AND lw.held = 1 AND seen.present = 1 AND env.now < t.deadline")}
        AS continues,
    {_flag("x.phase = 'candidate-sealed' "
           "OR (t.review_required = 1 AND x.phase = 'awaiting-acceptance')")} AS waits,
    {_flag("x.phase = 'effect-prepared' AND x.disposition = 'land' AND seen.happened = 0 "
           "AND COALESCE(env.target, '') <> COALESCE(x.base, '')")} AS target_moved,
    {_flag("x.phase = 'disposition-recorded'")} AS effect_next,
    {_flag(_HAS.format(kind="request-chat", ident="CAST(t.fence AS TEXT)") + " AND NOT "
           + _HAS.format(kind="reconcile-chat", ident="CAST(t.fence AS TEXT)"))} AS chat,
    {_flag("x.phase = 'graph-saved' AND x.exit = 'none' AND t.fence <> 0 AND gs.fence IS NOT NULL "
           "AND x.candidate IS NOT NULL AND "
           + _HAS.format(kind="propose-archive", ident="x.candidate") + " AND NOT "
           + _HAS.format(kind="archive", ident="x.candidate"))} AS proposed,
    {_flag(_HAS.format(kind="confirm-archive", ident="x.candidate"))} AS confirmed
  FROM seen JOIN tasks t ON t.id = seen.task CROSS JOIN env
  JOIN transactions x ON x.task = t.id
  LEFT JOIN attempts a ON a.task = t.id AND a.fence = t.fence
  LEFT JOIN owners o ON o.task = t.id AND o.fence = t.fence
  LEFT JOIN leases ls ON ls.task = t.id AND ls.kind = 'session'
  LEFT JOIN leases lw ON lw.task = t.id AND lw.kind = 'worktree'
  LEFT JOIN receipts gs ON gs.task = t.id AND gs.kind = 'graph-save' AND gs.fence = t.fence),
g AS MATERIALIZED (SELECT f.*,
    {_flag("f.running = 0 AND f.held = 0 AND f.parked = 0 AND f.reopening = 0")} AS idle,
    {_flag("f.running = 0 AND f.held = 0 AND f.parked = 0 AND f.reopening = 0 "
           "AND f.paused = 0 AND f.early = 0 AND f.breaker_open = 0")} AS open,
    {_flag("f.finished = 0 AND f.running = 0 AND f.held = 0 AND f.parked = 0 "
           "AND f.reopening = 0 AND f.paused = 0 AND f.early = 0 AND f.breaker_open = 1")}
        AS route_closed,
    {_flag("f.running = 0 AND f.held = 0")} AS stopped,
    {_flag("f.running = 1 AND f.reserved = 0 AND f.held = 0")} AS watching,
    {_flag("f.running = 1 AND f.held = 0 AND f.target_moved = 1")} AS moved,
    {_flag("f.running = 1 AND f.reserved = 1 AND f.held = 0 AND f.effect_next = 1 "
           "AND (f.deps_done = 0 OR f.dep_reopened = 1)")} AS reopened
  FROM f)
"""

#: Each way's condition over the flags of ``_FACTS`` (one column per way of ``WAYS``).
# guards: exactly-one-way-forward, no-dead-owner-in-progress-without-action, receipted-completion-waits-or-resumes
_CONDITIONS = {
    "assign": "open = 1 AND needs_assignment = 1 AND assigned = 0",
    "dispatch": "open = 1 AND deps_done = 1 AND admitted = 1 AND repair = 0 AND spent = 0",
    "repair-required": "open = 1 AND deps_done = 1 AND admitted = 1 AND repair = 1",
    "retry-budget-spent": "open = 1 AND deps_done = 1 AND admitted = 1 AND spent = 1",
    "await-dependencies": "open = 1 AND deps_done = 0 AND dep_abandoned = 0 AND admitted = 1",
    "dependency-abandoned": "open = 1 AND dep_abandoned = 1 AND admitted = 1",
    "live-owner": "watching = 1 AND receipted = 0 AND seen IN ('unverified', 'live') AND chat = 0",
    "await-handoff": "watching = 1 AND receipted = 1 AND seen IN ('unverified', 'live') AND chat = 0",
    "reconcile-chat-request": "watching = 1 AND seen IN ('unverified', 'live') AND chat = 1",
    "probe-suspect": "watching = 1 AND seen = 'suspect'",
    "resume-continuation": "watching = 1 AND seen = 'dead' AND continues = 1 AND reopening = 0",
    "declare-lost": "watching = 1 AND seen = 'dead' AND (continues = 0 OR reopening = 1)",
    "drive-transaction": "running = 1 AND reserved = 1 AND held = 0 AND moved = 0 "
                         "AND waits = 0 AND reopened = 0",
    "await-review": "running = 1 AND held = 0 AND waits = 1",
    "mark-repair": "moved = 1",
    "await-external": "stopped = 1 AND waiting = 1 AND due = 0",
    "expire-wait": "stopped = 1 AND due = 1",
    "wait-expired": "stopped = 1 AND waiting = 0 AND expired = 1",
    "paused": "idle = 1 AND paused = 1",
    "not-yet-due": "idle = 1 AND paused = 0 AND early = 1",
    "await-route-probe": "route_closed = 1 AND probe_due = 0",
    "probe-route": "route_closed = 1 AND probe_due = 1",
    "reopen-pending": "finished = 0 AND running = 0 AND held = 0 AND parked = 0 AND reopening = 1",
    "hold": "held = 1",
    "dependency-reopened": "reopened = 1",
    "await-archive-confirmation": "proposed = 1 AND confirmed = 0",
}

#: 1 where the way's condition holds, in the order of ``WAYS``, after what a plan reports.
WAYS_SQL = _FACTS + "SELECT task, finished, exit, reason, legacy, deadline, wait_deadline, " \
    "not_before, probe_at, " + \
    ", ".join(_flag(_CONDITIONS[w.name]) for w in WAYS) + " FROM g"


@dataclass(frozen=True)
class Plan:
    task: str
    way: str
    action: str
    reason: str
    deadline: int

    def to_json(self) -> dict:
        return {"task": self.task, "way": self.way, "action": self.action,
                "reason": self.reason, "deadline": self.deadline}


_ROW = "(CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS BIGINT))"
#: Tasks planned by one statement (three parameters each, well below SQLite's limit).
CHUNK = 500
_QUERIES: dict[tuple[str, int], str] = {}


def _query(n: int) -> str:
    """``WAYS_SQL`` for ``n`` tasks (each text made once)."""
    text = _QUERIES.get((WAYS_SQL, n))
    if text is None:
        text = _QUERIES[(WAYS_SQL, n)] = WAYS_SQL.replace("@SEEN@", ", ".join([_ROW] * n))
    return text


def plans(k, names: list[str], observe_of: Callable[[str], Observe]) -> dict[str, Plan | None]:
    """The plan of each task of ``names``, one statement per ``CHUNK`` of them. The facts
    the statement binds are observed only where they can matter: the clock; the target and
    the effect of a prepared effect; the worktree of an owner proven dead.

    A task's row is kept for the database state it was read in (``ReadCache.answers_now``),
    by what was bound for it: the clock, its observed facts and, for a prepared effect, the
    target (no other way reads the target). Asked again with that state and those facts
    (a projection and the ready list of one state, an audit after a projection), the row is
    the one the statement gave; any write, rollback or other connection's commit asks again."""
    out: dict[str, Plan | None] = {}
    ids = k.ids()
    cache = getattr(k, "cache", None)
    kept = cache.answers_now() if cache is not None else None
    for at in range(0, len(names), CHUNK):
        part = names[at:at + CHUNK]
        now, target, bound = None, None, {}
        for name in part:
            t, observe = k.record(name), observe_of(name)
            prepared = t.phase == "effect-prepared"
            now = observe.now() if now is None else now
            if prepared and target is None:
                target = observe.target()
            bound[name] = (ids[name], int(t.owner_seen == "dead" and observe.worktree(t).present),
                           int(prepared and observe.effect_happened(t)), prepared)
        rows = {}
        if kept is not None:
            for name in part:
                row = kept.get(_kept_key(now, target, bound[name]))
                if row is not None:
                    rows[row[0]] = row
        ask = [name for name in part if bound[name][0] not in rows]
        if ask:
            seen = [x for name in ask for x in bound[name][:3]]
            for row in k.conn.execute(_query(len(ask)), [now, target, *seen]):
                rows[row[0]] = row
            if kept is not None:
                for name in ask:
                    kept[_kept_key(now, target, bound[name])] = rows[bound[name][0]]
        for name in part:
            out[name] = _plan(name, rows[ids[name]])
    return out


def _kept_key(now, target, bound: tuple) -> tuple:
    """What a kept row of the planner answers for: the statement, the task, the clock, its
    observed facts, and the target where it is bound for a prepared effect."""
    tid, present, happened, prepared = bound
    return WAYS_SQL, tid, now, present, happened, target if prepared else None


def plan(k, name: str, observe: Observe) -> Plan | None:
    """The one way forward for an unfinished task, or a named hold (None when finished, except
    a Done row whose archive proposal awaits the operator's confirmation)."""
    return plans(k, [name], lambda _: observe)[name]


def _plan(name: str, row: tuple) -> Plan | None:
    finished, exit_, reason, legacy, deadline, wait_deadline, not_before, probe_at = row[1:9]
    ways = [w for w, on in zip(WAYS, row[9:]) if on and (not finished or w.name in ARCHIVE_WAYS)]
    if finished and not ways:
        return None
    # guards: exactly-one-way-forward
    if len(ways) != 1:
        why = "no way forward" if not ways else "several ways: " + ", ".join(w.name for w in ways)
        return Plan(name, "hold", "await-operator", why, 0)
    w = ways[0]
    reason = hold_reason(exit_, reason, legacy) if w.name == "hold" else w.name
    return Plan(name, w.way, w.action, reason,
                wait_deadline if w.name in WAIT_WAYS
                else not_before if w.name == "not-yet-due"
                else probe_at if w.name in ROUTE_WAYS else deadline)


def hold_reason(exit_: str, reason: str, legacy: int) -> str:
    if exit_ == "none":
        return "needs-reconciliation: legacy-unproven" if legacy else "hold"
    return f"{exit_}: {reason}"
