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

**planner-state-v1** (the goal scheduler: goals with a stage, blocker, backoff and a
pending action lease, route breakers) is reported: the model has no backoff,
no goal stage and no route breakers; its ``await-dispatch`` goal is a task whose
dispatch the model would admit at once, which is not the backoff WG persists.
"""
from __future__ import annotations

from pathlib import Path

from wgk.conformance.traces.format import Trace
from wgk.conformance.traces.wg.common import V1_COMMIT, Src, Unmapped
from wgk.conformance.traces.wg.scenario import Scenario

KEY = ("graph_id", "task_id", "generation", "attempt_id", "fence")
SCHEDULED = {"cleanup_finish": ("commit-effect", {"way": "scheduled", "action": "drive-transaction"})}
WHY = {"probe_route": "a provider route's health probe (its effect acknowledged): the model has no routes"}


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
        s.req("route_breakers", dict)
        s.req("last_reconciled_at", str)
        s.finish()
        out = []
        for name in list(goals.value):
            g = goals.sub(name)
            for f in ("goal", "priority", "blocker", "backoff", "last_authoritative_progress", "pending_action"):
                g.req(f)
            stage, wake = g.req("stage", str), g.req("next_wake_at", str)
            g.finish()
            out.append(Unmapped(self.file, name, f"goals/{name}/backoff",
                                f"stage {stage!r} with a backoff until {wake}: the model has no backoff, goal "
                                "stage or route breaker; a task it may dispatch is runnable at once"))
        return [], out

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
        name = Path(self.file).name
        trace = Trace(
            id="wg-planner-runtime-" + self.stem,
            title=f"WG planner runtime state: {self.stem}",
            source={"kind": "peer-fixture", "file": f"fixtures/wg/planner-runtime/{name}",
                    "provenance": f"graphwork/wg {V1_COMMIT} tests/fixtures/planner_runtime/{name} "
                                  "(the production planner's persisted state), translated by wgk import-wg"},
            description=(f"The peer's persisted convergence state of {graph_id} at logical time {time}, "
                         "each task brought into the situation its scheduled action is due in: "
                         + "; ".join(described) + " (WG's deadlines are wall clock, not compared)."),
            graph=sc.graph(), steps=sc.steps, expect={"tasks": facts},
        )
        return [(self.stem, trace)], unmapped
