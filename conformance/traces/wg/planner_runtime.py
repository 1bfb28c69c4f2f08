"""The production planner's persisted state files (``tests/fixtures/planner_runtime``).

**convergence-state-v1** (the daemon planner's state: per-task key, progress, owner,
scheduled action with a deadline, effects): each task becomes a task of the trace's
graph, brought by the steps of a well-behaved client into the situation its
scheduled action is due in; the expected plan is that action in our vocabulary:

| scheduled action | situation written | plan |
| --- | --- | --- |
| cleanup_finish | the effect committed (land) | scheduled drive-transaction (the cleanup is the next edge) |
| probe_route | the attempt failed on its provider route, whose breaker a provider failure on it opened (probe due at once) | runnable probe-route (the route prober's, as a dispatch is the dispatcher's) |

A ``probe_route`` task's effect of the same key and action, acknowledged, is the probe's
answer: ``succeeded`` closes the breaker (the plan is then ``runnable dispatch``),
``failed`` arms it again (``wait await-route-probe``); without one the plan stays the
scheduled probe. The state file names no route for such a task: the trace names it
``route:<task>``. Another status, or an effect whose task key is not the task's, is
reported with its field; so is a scheduled action without a counterpart. The deadline
(WG's wall clock), the key (generation, attempt, fence) and the effect's issue epoch are
kept in the description, not compared: the model's attempts are its own.

**The goal scheduler's state** (goals with a stage, blocker, backoff and a pending
action lease, route breakers): a goal in stage ``await-dispatch`` blocked by its
``dispatch`` backoff is a task whose not-before time is the backoff's wake time
(``next_wake_at``): the model's clock starts at ``last_reconciled_at`` and counts
nanoseconds, the operator's ``unpause`` sets the not-before time, and the plan is
WG's wait, ``wait await-not-before`` with that deadline (no path admits the task
before it: ``no-attempt-opens-paused-or-early``). The backoff's inputs (failures
without progress, base, cap, jitter seed), the goal's priority and digests and the
pending action's lease are kept in the description, not compared (the model's
attempts are its own). A goal in another stage or blocked by another thing, and
every route breaker is reported with its field.

**A route breaker** (``route_breakers``, keyed by the route: executor, provider or model and
the endpoint's digest) that is ``unavailable`` and whose probe is leased to a mapped goal's
task is that task's route's open breaker: the goal's task ran an attempt on the route that
failed on the provider (``consecutive_outages`` provider failures naming the route, each
opening the breaker with its next probe at ``next_probe_at``, in the same nanoseconds), so
the facts add ``route``, ``route-breaker: unavailable`` and ``route-probe-at``. The plan at
the reconciliation is still the not-before wait (the wake time comes first: no path admits
the task before it, nor onto the open route after it). The epoch, the probe lease and the
last failure marker are kept in the description. A breaker in another state, or leased to
a task no mapped goal names, is reported with its field.
"""
from __future__ import annotations

from datetime import datetime

from pathlib import Path

from wgk.conformance.traces.format import Trace
from wgk.conformance.traces.wg.common import V1_COMMIT, Src, Unmapped
from wgk.conformance.traces.wg.scenario import Scenario

KEY = ("graph_id", "task_id", "generation", "attempt_id", "fence")
SCHEDULED = {"cleanup_finish": ("commit-effect", {"way": "scheduled", "action": "drive-transaction"})}
PROBE = "probe_route"
#: A probe's acknowledged status -> the probe-route request's parameters and the plan after it.
PROBE_ANSWERS = {"succeeded": ({"succeeded": True}, {"way": "runnable", "action": "dispatch"}),
                 "failed": ({}, {"way": "wait", "action": "await-route-probe"})}
OWNER_PID = 4901


def nanoseconds(src: Src, field: str, text: str) -> int:
    """An RFC 3339 time with up to nine fractional digits, as nanoseconds since the epoch."""
    whole, dot, rest = text.partition(".")
    frac, zone = (rest[:-6], rest[-6:]) if dot else ("", whole[-6:])
    if not dot:
        whole = whole[:-6]
    try:
        if len(frac) > 9 or (frac and not frac.isdigit()):
            raise ValueError(text)
        seconds = datetime.fromisoformat(whole + zone).timestamp()
    except ValueError:
        raise src.error(f"not an RFC 3339 time with a zone: {text!r}", field) from None
    return int(seconds) * 1_000_000_000 + int(frac.ljust(9, "0") or 0)


class PlannerRuntime:
    def __init__(self, doc: dict, file: str):
        self.file = file
        self.src = Src(doc, "", file)
        self.stem = Path(file).stem

    def run(self):
        if "goals" in self.src.value:
            return self.goals()
        return self.convergence()

    def goals(self):
        s = self.src
        s.const("schema_version", 1)
        goals = s.sub("goals")
        breakers = s.sub("route_breakers")
        start = s.req("last_reconciled_at", str)
        s.finish()
        origin = nanoseconds(s, "last_reconciled_at", start)
        out, facts, described = [], {}, []
        leased = self.breakers(breakers, origin, out,
                               {g.get("goal", {}).get("task_id") for g in goals.value.values()
                                if isinstance(g, dict) and isinstance(g.get("goal"), dict)})
        sc = Scenario("graph-fixture", {"pointer": "/goals", "event": "goal state", "decision": None},
                      f"wg-planner-runtime:{self.stem}")
        for name in list(goals.value):
            g = goals.sub(name)
            goal = g.sub("goal")
            task, generation = goal.req("task_id", str), goal.req("generation", int)
            goal.req("goal_digest", str)
            contract = goal.req("completion_contract", str)
            goal.finish()
            priority, blocker = g.req("priority", int), g.req("blocker", str)
            backoff = g.req("backoff", dict)
            g.req("last_authoritative_progress", dict)
            pending = g.req("pending_action", dict)
            stage, wake = g.req("stage", str), g.req("next_wake_at", str)
            g.finish()
            if (stage, blocker, backoff.get("class")) != ("await-dispatch", "dispatch", "dispatch"):
                out.append(Unmapped(self.file, name, f"goals/{name}/stage",
                                    f"stage {stage!r} blocked by {blocker!r}: only a goal awaiting its "
                                    "dispatch behind its dispatch backoff is mapped (a not-before time)"))
                continue
            at = nanoseconds(g, "next_wake_at", wake) - origin
            if at <= 0:
                out.append(Unmapped(self.file, name, f"goals/{name}/next_wake_at",
                                    f"{wake}: a wake time not after last_reconciled_at is no backoff"))
                continue
            sc.origin = {"pointer": f"/goals/{name}", "event": stage, "decision": {"next_wake_at": wake}}
            t = sc.task(task)
            route = leased.pop(task, None)
            if route is not None:
                self.open_breaker(sc, t, route)
                sc.origin = {"pointer": f"/goals/{name}", "event": stage, "decision": {"next_wake_at": wake}}
            sc.request("unpause", "operator", t, cap=False, deadline=at,
                       note=f"the dispatch backoff: nothing opens an attempt before {wake}")
            sc.emit({"request": {"kind": "dispatch", "actor": "daemon", "task": t,
                                 "key": sc.key("dispatch", t),
                                 "expected-attempt": sc.attempts[t].attempt,
                                 "owner": {"pid": 4901, "birth": 1901, "session": f"{t}-s1",
                                           "wrapper-epoch": 1, "child-epoch": 1}},
                     "expect": {"decision": "rejected", "code": "not-due"}},
                    note="a dispatch before the wake time is refused")
            facts[t] = {"plan": {"way": "wait", "action": "await-not-before", "deadline": at},
                        "not-before": at, "attempt": sc.attempts[t].attempt}
            if route is not None:
                facts[t].update({"route": route["id"], "route-breaker": "unavailable",
                                 "route-probe-at": route["at"], "failure": "provider"})
            described.append(
                f"{name} (goal {task} generation {generation}, contract {contract}, priority {priority}; "
                f"{backoff.get('failures_without_progress')} failures without progress, backoff base "
                f"{backoff.get('base_seconds')}s cap {backoff.get('cap_seconds')}s; pending action "
                f"{pending.get('action_id')} on {pending.get('attempt_id')} fence {pending.get('fence')}) "
                f"waits for its dispatch until {wake}, {at} ns after {start}: wait await-not-before"
                + (f"; {route['described']}" if route is not None else ""))
        for task, route in leased.items():
            out.append(Unmapped(self.file, route["id"], f"route_breakers/{route['id']}/probe_lease/task_id",
                                f"the breaker's probe is leased to {task!r}, which no mapped goal names"))
        if not facts:
            return [], out
        return [(self.stem, self.trace(
            "the goal scheduler's persisted state", sc, facts,
            "The peer's persisted goal state, the model's clock at last_reconciled_at "
            f"({start}) counting nanoseconds: " + "; ".join(described) + "."))], out

    def breakers(self, breakers, origin: int, out: list, tasks: set) -> dict[str, dict]:
        """The unavailable route breakers whose probe is leased to a goal's task, by that task
        (each reported with its field otherwise)."""
        leased: dict[str, dict] = {}
        for rid in list(breakers.value):
            b = breakers.sub(rid)
            if b.req("route_id", str) != rid:
                raise b.error(f"route_id differs from its key {rid!r}", "route_id")
            epoch, state = b.req("epoch", int), b.req("state", str)
            outages, probe = b.req("consecutive_outages", int), b.req("next_probe_at", str)
            marker = b.req("last_failure_marker", str)
            lease = b.sub("probe_lease")
            action, task = lease.req("action_id", str), lease.req("task_id", str)
            lease_epoch, expires = lease.req("epoch", int), lease.req("expires_at", str)
            lease.finish()
            b.finish()
            at = max(nanoseconds(b, "next_probe_at", probe) - origin, 0)
            nanoseconds(lease, "expires_at", expires)
            if state != "unavailable":
                out.append(Unmapped(self.file, rid, f"route_breakers/{rid}/state",
                                    f"state {state!r}: only an unavailable (open) breaker is mapped"))
            elif outages < 1:
                out.append(Unmapped(self.file, rid, f"route_breakers/{rid}/consecutive_outages",
                                    f"{outages}: an open breaker needs an outage that opened it"))
            elif task not in tasks:
                out.append(Unmapped(self.file, rid, f"route_breakers/{rid}/probe_lease/task_id",
                                    f"the breaker's probe is leased to {task!r}, which no goal names"))
            else:
                leased[task] = {"id": rid, "at": at, "outages": outages, "described": (
                    f"its route {rid}'s breaker (epoch {epoch}, probe lease {action} epoch "
                    f"{lease_epoch} until {expires}, last failure {marker}) is open after "
                    f"{outages} consecutive outages, next probe at {probe}, {at} ns after the "
                    "reconciliation: no attempt opens on the route before a probe closes it")}
        breakers.finish()
        return leased

    @staticmethod
    def open_breaker(sc: Scenario, t: str, route: dict) -> None:
        """The goal's task's attempt on ``route`` failing on the provider: each consecutive
        outage a provider failure naming the route (its breaker open, next probe at its time)."""
        sc.origin = {"pointer": f"/route_breakers/{route['id']}", "event": "route breaker",
                     "decision": {"state": "unavailable"}}
        sc.dispatch(t)
        for n in range(1, route["outages"] + 1):
            sc.request("provider-failure", "daemon", t, evidence=f"outage-{n}", route=route["id"],
                       deadline=route["at"] or None,
                       note=f"outage {n} on the route: its breaker open, next probe at {route['at']}")
        sc.request("fail", "worker", t, failure="provider", evidence="provider-outage",
                   note="the attempt fails on the provider")

    def trace(self, what: str, sc, facts: dict, description: str) -> Trace:
        """The trace of this state file: the scenario ``sc`` built and the facts expected."""
        name = Path(self.file).name
        return Trace(
            id="wg-planner-runtime-" + self.stem,
            title=f"WG planner runtime state: {self.stem}",
            source={"kind": "peer-fixture", "file": f"fixtures/wg/planner-runtime/{name}",
                    "provenance": f"graphwork/wg {V1_COMMIT} tests/fixtures/planner_runtime/{name} "
                                  f"({what}), translated by wgk import-wg"},
            description=description,
            graph=sc.graph(), steps=sc.steps, expect={"tasks": facts},
        )

    def convergence(self):
        s = self.src
        s.const("schema_version", 1)
        graph_id = s.req("graph_id", str)
        time = s.req("logical_time", int)
        s.req("last_sequence", int)
        s.req("seen_observations", dict)
        tasks = s.sub("tasks")
        effects = s.sub("effects")
        s.const("early_acknowledgements", {})
        s.const("repaired_incidents", [])
        s.const("fail_closed", False)
        s.finish()
        acks = self.effects(effects)
        sc = Scenario(graph_id, {"pointer": "/tasks", "event": "convergence state", "decision": None},
                      f"wg-planner-runtime:{self.stem}")
        unmapped, facts, described = [], {}, []
        for tid in list(tasks.value):
            t = tasks.sub(tid)
            k = t.sub("key")
            key = {f: k.req(f) for f in KEY}
            k.finish()
            progress = t.req("progress_id", str)
            t.const("unfinished", True)
            t.const("owner", {"kind": "none"})
            t.const("incidents", [])
            sch = t.sub("scheduled")
            action, deadline = sch.req("action", str), sch.req("deadline", int)
            sch.finish()
            t.finish()
            if action == PROBE:
                why = self.probe(sc, tid, key, acks.pop((key["task_id"], PROBE), None), facts)
                if why is not None:
                    unmapped.append(Unmapped(self.file, key["task_id"], *why))
                    continue
                described.append(f"{key['task_id']} ({key['attempt_id']} generation "
                                 f"{key['generation']} fence {key['fence']}, progress {progress}): "
                                 f"{action} due at {deadline} -> runnable probe-route"
                                 + facts[key["task_id"]].pop("described"))
                continue
            if action not in SCHEDULED:
                unmapped.append(Unmapped(self.file, key["task_id"], f"tasks/{tid}/scheduled/action",
                                         f"{action!r}: no counterpart in the model"))
                continue
            last, plan = SCHEDULED[action]
            name = sc.task(key["task_id"])
            sc.origin = {"pointer": f"/tasks/{tid}", "event": action, "decision": {"scheduled": action}}
            sc.dispatch(name)
            sc.finish_until(name, last, f"{name}-candidate")
            facts[name] = {"plan": plan}
            described.append(f"{name} ({key['attempt_id']} generation {key['generation']} fence "
                             f"{key['fence']}, progress {progress}): {action} due at {deadline} -> "
                             f"{plan['way']} {plan['action']}")
        for (task, action), (eid, _, _, _) in acks.items():
            unmapped.append(Unmapped(self.file, task, f"effects/{eid}/action",
                                     f"{action!r}: an effect of no task scheduled for it"))
        if not facts:
            return [], unmapped
        return [(self.stem, self.trace(
            "the production planner's persisted state", sc, facts,
            f"The peer's persisted convergence state of {graph_id} at logical time {time}, "
            "each task brought into the situation its scheduled action is due in: "
            + "; ".join(described) + " (WG's deadlines are wall clock, not compared)."))], unmapped

    def effects(self, effects) -> dict[tuple[str, str], tuple]:
        """Each effect by its task and action: (its id, its task key, its issue epoch, its
        acknowledged status or None)."""
        out: dict[tuple[str, str], tuple] = {}
        for eid in list(effects.value):
            e = effects.sub(eid)
            if e.req("effect_id", str) != eid:
                raise e.error(f"effect_id differs from its key {eid!r}", "effect_id")
            k = e.sub("task")
            key = {f: k.req(f) for f in KEY}
            k.finish()
            action, epoch = e.req("action", str), e.req("issue_epoch", int)
            status = e.req("status", dict)
            e.finish()
            ack = status.get("acknowledged") if list(status) == ["acknowledged"] else None
            out[(key["task_id"], action)] = (eid, key, epoch, ack)
        effects.finish()
        return out

    def probe(self, sc: Scenario, tid: str, key: dict, effect: tuple | None,
              facts: dict) -> tuple[str, str] | None:
        """A task whose scheduled action is the route's probe: its attempt failed on the provider
        after a provider failure on its route opened the breaker (probe due at once), so the plan
        is the runnable probe-route; its acknowledged effect, if any, answers the probe. None,
        or the (field, reason) that cannot be mapped."""
        if effect is not None:
            eid, ekey, epoch, ack = effect
            if ekey != key:
                return f"effects/{eid}/task", f"{ekey}: not the key of the task scheduled for it"
            if ack not in PROBE_ANSWERS:
                return (f"effects/{eid}/status",
                        "only an effect acknowledged succeeded or failed is mapped")
        name, route = sc.task(key["task_id"]), f"route:{key['task_id']}"
        sc.origin = {"pointer": f"/tasks/{tid}", "event": PROBE, "decision": {"scheduled": PROBE}}
        sc.dispatch(name)
        sc.request("provider-failure", "daemon", name, evidence="route-outage", route=route,
                   note="an outage on the task's route opens its breaker (its probe due at once)")
        step = sc.request("fail", "worker", name, failure="provider", evidence="provider-outage",
                          note="the attempt fails on the provider: the route's probe is due")
        scheduled = {"way": "runnable", "action": "probe-route"}
        step["expect-facts"] = {"tasks": {name: {"plan": scheduled, "route": route,
                                                 "route-breaker": "unavailable"}}}
        if effect is None:
            facts[name] = {"plan": scheduled, "route-breaker": "unavailable",
                           "described": " (no effect acknowledged: the probe stays scheduled)"}
            return None
        eid, _, epoch, ack = effect
        params, after = PROBE_ANSWERS[ack]
        sc.origin = {"pointer": f"/effects/{eid}", "event": PROBE, "decision": {"acknowledged": ack}}
        sc.request("probe-route", "daemon", name, cap=False, **params,
                   note=f"the probe's effect (issue epoch {epoch}) acknowledged {ack}")
        facts[name] = {"plan": after, "route": route,
                       "route-breaker": "available" if ack == "succeeded" else "unavailable",
                       "described": f"; its effect {eid} (issue epoch {epoch}) acknowledged {ack}: "
                                    f"{after['way']} {after['action']}"}
        return None
