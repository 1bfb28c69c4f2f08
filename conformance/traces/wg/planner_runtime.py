"""The production planner's persisted state files (``tests/fixtures/planner_runtime``).

**convergence-state-v1** (the daemon planner's state: per-task key, progress, owner,
scheduled action with a deadline, effects): each task becomes a task of the trace's
graph, brought by the steps of a well-behaved client into the situation its
scheduled action is due in; the expected plan is that action in our vocabulary:

| scheduled action | situation written | plan |
| --- | --- | --- |
| cleanup_finish | the effect committed (land) | scheduled drive-transaction (the cleanup is the next edge) |

A task whose scheduled action has no counterpart is reported with its field:
``probe_route`` (a provider route's health probe, acknowledged as an effect: the
model has no routes). The deadline (WG's wall clock) and the key (generation,
attempt, fence) are kept in the description, not compared: the model's attempts
are its own.

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
every route breaker (the model has no provider routes), is reported with its field.
"""
from __future__ import annotations

from datetime import datetime

from pathlib import Path

from wgk.conformance.traces.format import Trace
from wgk.conformance.traces.wg.common import V1_COMMIT, Src, Unmapped
from wgk.conformance.traces.wg.scenario import Scenario

KEY = ("graph_id", "task_id", "generation", "attempt_id", "fence")
SCHEDULED = {"cleanup_finish": ("commit-effect", {"way": "scheduled", "action": "drive-transaction"})}
WHY = {"probe_route": "a provider route's health probe (its effect acknowledged): the model has no routes"}


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
            sc.request("unpause", "operator", t, cap=False, deadline=at,
                       note=f"the dispatch backoff: nothing opens an attempt before {wake}")
            sc.emit({"request": {"kind": "dispatch", "actor": "daemon", "task": t,
                                 "key": sc.key("dispatch", t), "expected-attempt": 0,
                                 "owner": {"pid": 4901, "birth": 1901, "session": f"{t}-s1",
                                           "wrapper-epoch": 1, "child-epoch": 1}},
                     "expect": {"decision": "rejected", "code": "not-due"}},
                    note="a dispatch before the wake time is refused")
            facts[t] = {"plan": {"way": "wait", "action": "await-not-before", "deadline": at},
                        "not-before": at, "attempt": 0}
            described.append(
                f"{name} (goal {task} generation {generation}, contract {contract}, priority {priority}; "
                f"{backoff.get('failures_without_progress')} failures without progress, backoff base "
                f"{backoff.get('base_seconds')}s cap {backoff.get('cap_seconds')}s; pending action "
                f"{pending.get('action_id')} on {pending.get('attempt_id')} fence {pending.get('fence')}) "
                f"waits for its dispatch until {wake}, {at} ns after {start}: wait await-not-before")
        for rid in list(breakers.value):
            b = breakers.sub(rid)
            state, probe = b.req("state", str), b.req("next_probe_at", str)
            out.append(Unmapped(self.file, rid, f"route_breakers/{rid}",
                                f"a provider route's breaker ({state}, next probe at {probe}): the model "
                                "has no provider routes"))
        if not facts:
            return [], out
        return [(self.stem, self.trace(
            "the goal scheduler's persisted state", sc, facts,
            "The peer's persisted goal state, the model's clock at last_reconciled_at "
            f"({start}) counting nanoseconds: " + "; ".join(described)
            + ". The route breakers are reported (the model has no provider routes)."))], out

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
        for eid in list(effects.value):
            e = effects.sub(eid)
            for f in ("effect_id", "task", "action", "issue_epoch", "status"):
                e.req(f)
            e.finish()
        effects.finish()
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
            if action not in SCHEDULED:
                unmapped.append(Unmapped(self.file, key["task_id"], f"tasks/{tid}/scheduled/action",
                                         f"{action!r}: {WHY.get(action, 'no counterpart in the model')}"))
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
        if not facts:
            return [], unmapped
        return [(self.stem, self.trace(
            "the production planner's persisted state", sc, facts,
            f"The peer's persisted convergence state of {graph_id} at logical time {time}, "
            "each task brought into the situation its scheduled action is due in: "
            + "; ".join(described) + " (WG's deadlines are wall clock, not compared)."))], unmapped
