"""The daemon planner's families (``formal/fixtures/daemon/v1``, ``v2``, ``v3``).

Each file is one observation trace of WG's daemon planner: an empty planner
state, then observations of one task (its key, owner, incidents, what the old
daemon found runnable, an external wait, a failed prerequisite), and the one
way forward WG expects. The model has no observation input: the importer
writes the steps a well-behaved client sends to bring the task into the
observed situation (``scenario``), and the expected plan is WG's way forward
in our vocabulary. A situation the model cannot express is reported, never
dropped (``Unmapped``: the file, the case, the field and why).

**v1** (trace schema 1, ruleset ``historical``): every case names the incident
the old daemon caused (``expected_historical_violation``) and the corrected
ruleset's way (``expected_corrected_action`` or ``expected_corrected_wait``).
The trace's final facts are the corrected plan; its ``historical`` section is
the plan of the model's named historical ruleset (``wgk.model.planner_rulesets``,
``wgk replay --planner historical``), i.e. the observation's ``runnable`` field
(or, without one, what the old daemon did with the owner):

| incident | situation written | corrected (WG -> ours) | historical (ours) |
| --- | --- | --- | --- |
| abandoned_dependency_satisfied_readiness | a dependency whose attempt was lost (owner dead, window closed, declared lost) | wait dependency_success -> wait await-dependencies | runnable dispatch (spawn_attempt) |
| control_plane_candidate_replacement | the candidate writes a protected path (``.wg/**``) and is sealed | fail_closed_hold -> hold await-operator (needs-repair: protected-path) | scheduled drive-transaction (promote_candidate) |
| dead_pi_owner_retaining_leases | owner (``proven_dead``) probed dead, its continuation window closed | release_dead_owner -> scheduled declare-lost | live-owner probe-owner |
| exited_wrapper_rejected_stale | owner dead, same session and worktree leases held, window open | resume_same_session -> wait resume | scheduled declare-lost |
| park_resume_overlap | the attempt parked on ``external_wait.wait_id`` | wait correlated_message -> wait await-external | runnable dispatch (resume_same_session: a new attempt) |
| reopen_before_owner_release | the owner probed (authenticated) live, the reset's intent persisted over it, then its exit proven | release_dead_owner -> scheduled declare-lost (the release; the reset then opens one generation) | runnable dispatch (spawn_attempt before the release) |
| target_moved_during_finish | the effect prepared, then the target moved | replan_finish -> scheduled mark-repair | scheduled drive-transaction (promote_candidate) |
| obsolete_daemon_chat_creation_lost_response | the daemon's chat creation request under the attempt's opening key, its answer lost; made again, refused ``chat-requested`` | reconcile_chat_request -> scheduled reconcile-chat | runnable request-chat (the creation made again) |
| surprise_archival_backlog | the task Done, proposed by the archive backlog (``propose-archive``); an archive on the daemon's word refused ``archive-unconfirmed`` | archive_confirmation -> wait await-archive-confirmation | scheduled archive (archive_batch) |

Every v1 incident maps; an incident the importer does not know, or a case whose corrected
way, owner or runnable differs from the table's, is reported with its field. WG's
observation of the archive backlog calls its task unfinished (its archive is not done); in
the model the task is Done (a GraphSave) and not archived, and only a Done task's result
can be proposed, confirmed and archived.

**v2** (trace schema 2, ruleset ``corrected``): the observed task is blocked on a
failed prerequisite (``failed_prerequisite.source``, a dependency in our graph,
its retry budget ``max_automatic_retries``); the expected action is the
prerequisite's plan, the observed task waits on its dependency:

| class | situation written | WG -> ours (the prerequisite's plan) |
| --- | --- | --- |
| orphan_before_spawn | dispatch, fail nothing-saved | retry_failed_prerequisite -> runnable dispatch |
| source_execution_no_progress | dispatch, fail zero-progress | retry_failed_prerequisite -> runnable dispatch |
| semantic_validation_rejected | dispatch, fail semantic | semantic_prerequisite_repair -> hold await-operator (repair-required) |
| provider_unavailable_after_durable_candidate | the candidate saved, sealed and validated, then provider-failure | replan_finish -> scheduled drive-transaction |

WG's keys (attempt ids, fences) and evidence ids are kept in the description
and in each step's ``from``; the attempts are the model's own (fence 1 ...).
``automatic_retries`` other than 0 is reported; the evidence's presence must
match what the written situation holds (saved work and candidate for the
provider class only).

**v3** (trace schema 3, ruleset ``corrected``): ``stale_worktree_spawn_owner``, a
proven-dead stale owner (generation 0, fence 1) holding the worktree the current
attempt (generation 1, fence 2) needs, observed twice. Written as: dispatch, the
owner's edit, its death proven, the operator's reset; WG's
``reclaim_retain_worktree`` is the reset's pin of the dead owner's bytes
(``retained``), ``spawn_attempt`` the dispatch of generation 1 on fence 2 importing
them (its worktree is its own, named by its fence: nothing is taken over); the
repeated observation re-sends that dispatch under its key, a duplicate. Other
actions, owners or keys are reported.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from wgk.conformance.traces.format import Trace
from wgk.conformance.traces.wg.common import V1_COMMIT, Src, Unmapped, WgImportError
from wgk.conformance.traces.wg.scenario import Scenario

FAMILY_PATH = "formal/fixtures/daemon"
EMPTY_STATE = {"last_sequence": None, "seen_observations": {}, "tasks": {}, "effects": {},
               "early_acknowledgements": {}, "repaired_incidents": [], "fail_closed": False}
PROTECTED = ".wg/**"


def plan(way: str, action: str, reason: str | None = None) -> dict:
    return {"way": way, "action": action, **({"reason": reason} if reason else {})}


# --- v1: the situations, one per incident -----------------------------------------------------


def _abandoned_dependency(sc: Scenario, task: str) -> dict:
    dep = sc.task(f"{task}-dependency")
    sc.task(task, deps=(dep,))
    sc.dispatch(dep)
    sc.env("owner-dies", task=dep)
    sc.env("converge", note="the dependency's owner is probed dead")
    sc.env("tick", amount=1)
    sc.env("converge", note="its window closed: the dependency's attempt is declared lost (abandoned)")
    return {dep: {"attempt-state": "lost", "status": "open"}}


def _protected_candidate(sc: Scenario, task: str) -> dict:
    sc.task(task)
    sc.protected_paths.append(PROTECTED)
    sc.dispatch(task)
    sc.finish_until(task, "seal-candidate", f"{task}-candidate", paths=[".wg/daemon.toml"])
    return {task: {"exit": "needs-repair", "reason": "protected-path"}}


def _dead_owner_window_closed(sc: Scenario, task: str) -> dict:
    sc.task(task)
    sc.dispatch(task)
    sc.env("owner-dies", task=task)
    sc.env("converge", note="the owner is probed: proven dead")
    sc.env("tick", amount=1, note="the continuation window closes with the leases still held")
    return {task: {"owner-seen": "dead", "attempt-state": "running",
                   "leases": {"worktree": True, "session": True}}}


def _exited_wrapper(sc: Scenario, task: str) -> dict:
    sc.task(task)
    sc.dispatch(task)
    sc.env("edit", task=task, content=f"{task}-half")
    sc.env("owner-dies", task=task)
    sc.env("converge", note="the wrapper exited: its owner is probed dead, its session may continue")
    return {task: {"owner-seen": "dead", "attempt-state": "running"}}


def _parked(sc: Scenario, task: str, wait_id: str) -> dict:
    sc.task(task)
    sc.dispatch(task)
    sc.request("park", "worker", task, correlation=wait_id)
    return {task: {"waiting-on": wait_id, "attempt-state": "parked"}}


def _reopen_before_release(sc: Scenario, task: str) -> dict:
    sc.task(task)
    sc.dispatch(task)
    sc.env("edit", task=task, content=f"{task}-half")
    sc.env("converge", note="the owner is probed: authenticated live")
    sc.emit({"request": {"kind": "reset", "actor": "operator", "task": task,
                         "key": sc.key("reset", task), "expected-generation": 0},
             "expect": {"decision": "applied"},
             "expect-facts": {"tasks": {task: {"generation": 0, "reopening": True,
                                               "attempt-state": "running"}}}},
            note="the reopen's intent is persisted over the live owner (the old K fenced)")
    sc.env("owner-dies", task=task)
    sc.env("converge", note="the owner's exit is proven")
    return {task: {"owner-seen": "dead", "attempt-state": "running", "generation": 0,
                   "reopening": True, "leases": {"worktree": True, "session": True}}}


def _chat_lost_response(sc: Scenario, task: str) -> dict:
    sc.task(task)
    sc.dispatch(task)
    sc.request("request-chat", "daemon", task,
               note="the chat creation request, made under the attempt's opening key (its fence)")
    sc.env("lost-response", note="the creation's answer never reached the daemon")
    sc.request("request-chat", "daemon", task, expect="rejected",
               note="made again under a fresh key, the request names the same attempt's key: refused")
    sc.steps[-1]["expect"]["code"] = "chat-requested"
    return {task: {"attempt-state": "running", "evidence": [["request-chat", "1"]]}}


def _archive_backlog(sc: Scenario, task: str) -> dict:
    sc.task(task)
    sc.dispatch(task)
    sc.finish_until(task, "save-graph", f"{task}-result")
    sc.request("propose-archive", "daemon", task, cap=False, candidate=f"{task}-result",
               note="the daemon's archive backlog proposes the Done task by its result's digest")
    sc.request("archive", "daemon", task, expect="rejected", cap=False, candidate=f"{task}-result",
               note="an archive on the daemon's own word: no confirmation names the digest")
    sc.steps[-1]["expect"]["code"] = "archive-unconfirmed"
    return {task: {"status": "done", "evidence": [["propose-archive", f"{task}-result"]]}}


def _target_moved(sc: Scenario, task: str) -> dict:
    sc.task(task)
    sc.dispatch(task)
    sc.finish_until(task, "prepare-effect", f"{task}-candidate")
    sc.env("move-target", content="main-1")
    return {task: {"phase": "effect-prepared", "promotions": 0}}


#: incident -> (owner kind, runnable, WG corrected (field, value), situation, corrected plan,
#: historical plan)
V1_CASES: dict[str, tuple] = {
    "abandoned_dependency_satisfied_readiness": (
        "none", "spawn_attempt", ("expected_corrected_wait", "dependency_success"), _abandoned_dependency,
        plan("wait", "await-dependencies"), plan("runnable", "dispatch")),
    "control_plane_candidate_replacement": (
        "none", "promote_candidate", ("expected_corrected_action", "fail_closed_hold"), _protected_candidate,
        plan("hold", "await-operator", "needs-repair: protected-path"), plan("scheduled", "drive-transaction")),
    "dead_pi_owner_retaining_leases": (
        "proven_dead", None, ("expected_corrected_action", "release_dead_owner"), _dead_owner_window_closed,
        plan("scheduled", "declare-lost"), plan("live-owner", "probe-owner")),
    "exited_wrapper_rejected_stale": (
        "none", None, ("expected_corrected_action", "resume_same_session"), _exited_wrapper,
        plan("wait", "resume", "resume-continuation"), plan("scheduled", "declare-lost")),
    "park_resume_overlap": (
        "none", "resume_same_session", ("expected_corrected_wait", "correlated_message"), _parked,
        plan("wait", "await-external"), plan("runnable", "dispatch")),
    "reopen_before_owner_release": (
        "authenticated_live", "spawn_attempt", ("expected_corrected_action", "release_dead_owner"),
        _reopen_before_release, plan("scheduled", "declare-lost"), plan("runnable", "dispatch")),
    "target_moved_during_finish": (
        "none", "promote_candidate", ("expected_corrected_action", "replan_finish"), _target_moved,
        plan("scheduled", "mark-repair"), plan("scheduled", "drive-transaction")),
    "obsolete_daemon_chat_creation_lost_response": (
        "none", None, ("expected_corrected_action", "reconcile_chat_request"), _chat_lost_response,
        plan("scheduled", "reconcile-chat", "reconcile-chat-request"),
        plan("runnable", "request-chat", "request-chat")),
    "surprise_archival_backlog": (
        "none", "archive_batch", ("expected_corrected_wait", "archive_confirmation"), _archive_backlog,
        plan("wait", "await-archive-confirmation", "await-archive-confirmation"),
        plan("scheduled", "archive", "archive")),
}

#: incident -> (the field that cannot be mapped, why): every v1 incident is mapped.
V1_UNMAPPED: dict[str, tuple[str, str]] = {}

#: WG's two actions for a proven-dead stale owner's worktree the current attempt needs.
V3_ACTIONS = ("reclaim_retain_worktree", "spawn_attempt")

# --- v2: failed prerequisites --------------------------------------------------------------------

#: class -> (WG (field, value), evidence present (work_save, candidate), our failure or None
#: (provider: the finish resumes), the prerequisite's plan)
V2_CASES = {
    "orphan_before_spawn": (("expected_action", "retry_failed_prerequisite"), (False, False),
                            "nothing-saved", plan("runnable", "dispatch")),
    "source_execution_no_progress": (("expected_action", "retry_failed_prerequisite"), (False, False),
                                     "zero-progress", plan("runnable", "dispatch")),
    "semantic_validation_rejected": (("expected_wait", "semantic_prerequisite_repair"), (True, True),
                                     "semantic", plan("hold", "await-operator", "repair-required")),
    "provider_unavailable_after_durable_candidate": (("expected_action", "replan_finish"), (True, True),
                                                     None, plan("scheduled", "drive-transaction")),
}


class Daemon:
    """One daemon fixture file: ``run()`` gives ``(traces, unmapped)``."""

    def __init__(self, doc: dict, file: str, version: int):
        self.doc = doc
        self.file = file
        self.version = version
        self.src = Src(doc, "", file)
        self.stem = Path(file).stem

    def unmapped(self, case: str, field: str, reason: str) -> tuple[list, list]:
        return [], [Unmapped(self.file, case, field, reason)]

    def trace_header(self, s: Src) -> tuple[Src, list[Src]]:
        t = s.sub("trace")
        t.const("trace_schema_version", self.version)
        t.const("planner_schema_version", self.version)
        t.const("redaction", "typed_identifiers_and_digests_only")
        t.const("ruleset", "historical" if self.version == 1 else "corrected")
        ini = t.sub("initial_state")
        ini.const("schema_version", self.version)
        self.graph_id = ini.req("graph_id", str)
        ini.const("logical_time", 0)
        for k, v in EMPTY_STATE.items():
            ini.const(k, v)
        ini.finish()
        obs = t.items("observations")
        t.finish()
        return t, obs

    def observation(self, o: Src, n: int) -> tuple[Src, int]:
        if o.req("sequence", int) != n + 1:
            raise o.error("observations must be numbered 1, 2, ...", "sequence")
        time = o.req("logical_time", int)
        return o.sub("observation"), time

    def key(self, ob: Src) -> dict:
        k = ob.sub("key")
        out = {f: k.req(f) for f in ("graph_id", "task_id", "generation", "attempt_id", "fence")}
        k.finish()
        if out["graph_id"] != self.graph_id:
            raise k.error("the key's graph is not the trace's", "graph_id")
        return out

    def run(self) -> tuple[list[tuple[str, Trace]], list[Unmapped]]:
        if self.version == 1:
            return self.run_v1()
        if self.version == 2:
            return self.run_v2()
        return self.run_v3()

    def one_unfinished_task(self, s, name):
        """The case's one observation, of an unfinished task: ((observation, time, key, progress),
        None), or (None, the case reported as not mapped) when it has another number of observations."""
        _, obs = self.trace_header(s)
        s.finish()
        if len(obs) != 1:
            return None, self.unmapped(name, "trace/observations", f"{len(obs)} observations; one is mapped")
        ob, time = self.observation(obs[0], 0)
        ob.const("type", "task")
        key = self.key(ob)
        progress = ob.req("progress_id", str)
        ob.const("unfinished", True)
        return (ob, time, key, progress), None

    # v1 ---------------------------------------------------------------------------------------

    def run_v1(self):
        s = self.src
        name = s.req("name", str)
        if s.req("expected_historical_violation", str) != name:
            raise s.error("the historical violation is not the case's name", "expected_historical_violation")
        action, wait = s.req("expected_corrected_action"), s.req("expected_corrected_wait")
        one, not_mapped = self.one_unfinished_task(s, name)
        if not_mapped:
            return not_mapped
        ob, time, key, progress = one
        owner = ob.sub("owner")
        owner_kind = owner.req("kind", str)
        owner_ids = {f: owner.get(f) for f in ("actor_id", "lease_id") if owner.has(f)}
        owner.finish()
        if ob.req("incidents", list) != [name]:
            raise ob.error("the observation's incidents are not exactly the case's", "incidents")
        runnable = ob.get("runnable")
        wait_id = None
        if ob.has("external_wait"):
            w = ob.sub("external_wait")
            wait_id, wait_kind = w.req("wait_id", str), w.req("kind", str)
            w.finish()
        ob.finish()
        if name in V1_UNMAPPED:
            return self.unmapped(name, *V1_UNMAPPED[name])
        if name not in V1_CASES:
            return self.unmapped(name, "expected_historical_violation", f"incident {name!r} is not known")
        kind, old_runnable, (field, value), situation, corrected, historical = V1_CASES[name]
        got = {"expected_corrected_action": action, "expected_corrected_wait": wait}
        if got[field] != value or any(v is not None for f, v in got.items() if f != field):
            return self.unmapped(name, field, f"{got[field]!r}: only {value!r} is mapped for this incident")
        if owner_kind != kind:
            return self.unmapped(name, "trace/observations/0/observation/owner/kind",
                                 f"{owner_kind!r}: only {kind!r} is mapped for this incident")
        if runnable != old_runnable:
            return self.unmapped(name, "trace/observations/0/observation/runnable",
                                 f"{runnable!r}: only {old_runnable!r} is mapped for this incident")
        if (wait_id is not None) != (situation is _parked):
            return self.unmapped(name, "trace/observations/0/observation/external_wait",
                                 "an external wait is mapped for park_resume_overlap only")
        task = key["task_id"]
        sc = Scenario(self.graph_id, {"pointer": "/trace/observations/0", "event": name,
                                      "decision": {field: value}}, f"wg-daemon-v1:{name}")
        extra = situation(sc, task, wait_id) if situation is _parked else situation(sc, task)
        facts = {task: {"plan": corrected}}
        for t, f in extra.items():
            facts.setdefault(t, {}).update(f)
        waits = f", external wait {wait_id} ({wait_kind})" if wait_id else ""
        trace = Trace(
            id="wg-daemon-v1-" + name.replace("_", "-"),
            title=f"WG daemon planner v1: {name.replace('_', ' ')}",
            source=self.source(1),
            description=(f"The peer's daemon observation {name} (ruleset historical, trace schema 1) of "
                         f"{key['task_id']} ({key['attempt_id']} generation {key['generation']} fence "
                         f"{key['fence']}, progress {progress}, owner {owner_kind}"
                         f"{' ' + str(owner_ids) if owner_ids else ''}{waits}, logical time {time}"
                         f"{', runnable ' + runnable if runnable else ''}), written as the steps that bring "
                         f"the task there. Corrected: WG's {field.split('_')[-1]} {value} is the plan "
                         f"{corrected['way']} {corrected['action']}; the historical ruleset plans "
                         f"{historical['way']} {historical['action']} (the incident {name})."),
            graph=sc.graph(), steps=sc.steps, expect={"tasks": facts},
            historical={"ruleset": "historical", "violation": name,
                        "expect": {"tasks": {task: {"plan": historical}}}},
        )
        return [(self.stem, trace)], []

    def source(self, version: int) -> dict:
        name = Path(self.file).name
        return {"kind": "peer-fixture", "file": f"fixtures/wg/daemon/v{version}/{name}",
                "provenance": f"graphwork/wg {V1_COMMIT} {FAMILY_PATH}/v{version}/{name} "
                              f"(daemon planner, trace schema {version}), translated by wgk import-wg"}

    # v2 ---------------------------------------------------------------------------------------

    def run_v2(self):
        s = self.src
        name = s.req("name", str)
        action, wait, cls = s.req("expected_action"), s.req("expected_wait"), s.req("expected_class", str)
        one, not_mapped = self.one_unfinished_task(s, name)
        if not_mapped:
            return not_mapped
        ob, time, key, progress = one
        ob.const("owner", {"kind": "none"})
        ob.const("incidents", [])
        fp = ob.sub("failed_prerequisite")
        ob.finish()
        src = fp.sub("source")
        prereq = {f: src.req(f) for f in ("graph_id", "task_id", "generation", "attempt_id", "fence")}
        src.finish()
        if fp.req("class", str) != cls:
            raise fp.error("the failure's class is not the case's expected_class", "class")
        ev = fp.sub("evidence")
        present = {}
        for part in ("work_save", "candidate", "session", "worktree"):
            e = ev.sub(part)
            present[part] = e.req("state", str) == "present"
            if present[part]:
                e.req("evidence_id", str)
            e.finish()
        ev.finish()
        retries, budget = fp.req("automatic_retries", int), fp.req("max_automatic_retries", int)
        fp.finish()
        at = "trace/observations/0/observation/failed_prerequisite"
        if cls not in V2_CASES:
            return self.unmapped(name, at + "/class", f"failure class {cls!r} is not mapped")
        (field, value), saved, failure, prereq_plan = V2_CASES[cls]
        got = {"expected_action": action, "expected_wait": wait}
        if got[field] != value or any(v is not None for f, v in got.items() if f != field):
            return self.unmapped(name, field, f"{got[field]!r}: only {value!r} is mapped for class {cls}")
        if retries != 0:
            return self.unmapped(name, at + "/automatic_retries", f"{retries}: only 0 is mapped")
        if (present["work_save"], present["candidate"]) != saved:
            return self.unmapped(name, at + "/evidence", "the saved work and candidate are present for "
                                 "exactly the classes that keep a durable candidate")
        task, pre = key["task_id"], prereq["task_id"]
        sc = Scenario(self.graph_id, {"pointer": "/trace/observations/0", "event": cls,
                                      "decision": {field: value}}, f"wg-daemon-v2:{name}")
        sc.task(pre, retry_budget=budget)
        sc.task(task, deps=(pre,))
        sc.dispatch(pre)
        if failure is None:
            sc.finish_until(pre, "validate", f"{pre}-candidate")
            sc.request("provider-failure", "wrapper", pre, evidence="provider-unavailable",
                       note="the provider fails after the candidate is durable")
        else:
            sc.request("fail", "worker", pre, failure=failure, evidence=cls.replace("_", "-"))
        facts = {pre: {"plan": prereq_plan, "retries": 0},
                 task: {"plan": plan("wait", "await-dependencies"), "attempt": 0, "fence": 0}}
        if failure is not None:
            facts[pre]["failure"] = failure
        trace = Trace(
            id="wg-daemon-v2-" + name.replace("_", "-"),
            title=f"WG daemon planner v2: {name.replace('_', ' ')}",
            source=self.source(2),
            description=(f"The peer's daemon observation {name} (ruleset corrected, trace schema 2): "
                         f"{task} ({key['attempt_id']}, progress {progress}, logical time {time}) is "
                         f"blocked on the failed prerequisite {pre} ({prereq['attempt_id']} generation "
                         f"{prereq['generation']} fence {prereq['fence']}), class {cls}, evidence "
                         f"{', '.join(p for p, v in present.items() if v) or 'none'} present, "
                         f"{retries} of {budget} automatic retries used. WG's {field.split('_')[-1]} "
                         f"{value} is the prerequisite's plan {prereq_plan['way']} {prereq_plan['action']}; "
                         f"{task} waits on its dependency."),
            graph=sc.graph(), steps=sc.steps, expect={"tasks": facts},
        )
        return [(self.stem, trace)], []

    # v3 ---------------------------------------------------------------------------------------

    def run_v3(self):
        s = self.src
        name = s.req("name", str)
        actions = s.req("expected_actions", list)
        if not actions:
            raise s.error("field 'expected_actions' is empty", "expected_actions")
        _, obs = self.trace_header(s)
        s.finish()
        seen = []
        for n, o in enumerate(obs):
            ob, time = self.observation(o, n)
            ob.const("type", "worktree_spawn")
            stale, current = self.attempt_key(ob, "stale_owner"), self.attempt_key(ob, "current_attempt")
            got = {"stale": stale, "current": current, "time": time,
                   "progress": ob.req("progress_id", str), "worktree": ob.req("worktree_id", str)}
            owner = ob.sub("owner")
            got["owner"] = {f: owner.req(f, str) for f in ("kind", "actor_id", "lease_id")}
            owner.finish()
            for part in ("owner_token", "observer_state"):
                e = ob.sub(part)
                got[part] = e.req("state", str)
                if got[part] == "present":
                    e.req("evidence_id", str)
                e.finish()
            ob.finish()
            seen.append(got)
        at = "trace/observations/0/observation"
        first = seen[0] if seen else None
        if actions != list(V3_ACTIONS):
            return self.unmapped(name, "expected_actions", f"{actions!r}: only {list(V3_ACTIONS)!r} is mapped")
        if first is None or any({k: v for k, v in o.items() if k != "time"}
                                != {k: v for k, v in first.items() if k != "time"} for o in seen):
            return self.unmapped(name, "trace/observations", "only the same observation repeated is mapped")
        if first["owner"]["kind"] != "proven_dead":
            return self.unmapped(name, at + "/owner/kind",
                                 f"{first['owner']['kind']!r}: only a proven-dead stale owner is mapped")
        st, cu = first["stale"], first["current"]
        if st["task_id"] != cu["task_id"] or (st["generation"], st["fence"]) != (0, 1) \
                or (cu["generation"], cu["fence"]) != (1, 2):
            return self.unmapped(name, at + "/current_attempt", "only a stale generation 0 fence 1 and a "
                                 "current generation 1 fence 2 of one task are mapped")
        return [(self.stem, self.v3_trace(name, first, len(seen)))], []

    def attempt_key(self, ob: Src, field: str) -> dict:
        k = ob.sub(field)
        out = {f: k.req(f) for f in ("graph_id", "task_id", "generation", "attempt_id", "fence")}
        k.finish()
        if out["graph_id"] != self.graph_id:
            raise k.error("the key's graph is not the trace's", "graph_id")
        return out

    def v3_trace(self, name: str, o: dict, times: int) -> Trace:
        """The stale owner's attempt (generation 0, fence 1) leaves its worktree dirty and is
        proven dead; the operator's reset opens generation 1 and retains that worktree's bytes
        under a pin (WG's ``reclaim_retain_worktree``); the dispatch of generation 1 opens fence 2
        on a worktree of its own importing them (``spawn_attempt``). Each repeated observation
        re-sends that dispatch under its key: a duplicate, one attempt."""
        task = o["current"]["task_id"]
        work = f"{task}-stale-work"
        sc = Scenario(self.graph_id, {"pointer": "/trace/observations/0", "event": "worktree_spawn",
                                      "decision": {"expected_actions": list(V3_ACTIONS)}},
                      f"wg-daemon-v3:{name}")
        sc.task(task)
        sc.dispatch(task)
        sc.env("edit", task=task, content=work, note=f"the stale owner's worktree {o['worktree']}")
        sc.env("owner-dies", task=task)
        sc.env("converge", note="the stale owner is probed: proven dead")
        sc.emit({"request": {"kind": "reset", "actor": "operator", "task": task,
                             "key": sc.key("reset", task), "expected-generation": 0},
                 "expect": {"decision": "applied"},
                 "expect-facts": {"tasks": {task: {"generation": 1, "retained": work,
                                                   "plan": plan("runnable", "dispatch")}}}},
                note="reclaim_retain_worktree: the proven-dead owner's bytes are retained under a pin")
        owner = {"pid": 4301, "birth": 1301, "session": f"{task}-s2", "wrapper-epoch": 1,
                 "child-epoch": 1}
        spawn = {"kind": "dispatch", "actor": "daemon", "task": task, "key": sc.key("dispatch", task),
                 "expected-attempt": 0, "owner": owner, "imports": work}
        for n in range(times):
            sc.origin = {"pointer": f"/trace/observations/{n}", "event": "worktree_spawn",
                         "decision": {"expected_actions": list(V3_ACTIONS)}}
            expect = ({"decision": "applied"} if n == 0
                      else {"decision": "duplicate", "original": {"decision": "applied"}})
            sc.emit({"request": dict(spawn), "expect": expect},
                    note="spawn_attempt: generation 1 opens fence 2 on its own worktree, importing them"
                    + ("" if n == 0 else " (the observation repeated: the same key, a duplicate)"))
        st, cu = o["stale"], o["current"]
        return Trace(
            id="wg-daemon-v3-" + name.replace("_", "-"),
            title=f"WG daemon planner v3: {name.replace('_', ' ')}",
            source=self.source(3),
            description=(f"The peer's daemon observation worktree_spawn (ruleset corrected, trace schema 3), "
                         f"observed {times} times: the stale owner {o['owner']['actor_id']} (lease "
                         f"{o['owner']['lease_id']}, proven dead) of {task} {st['attempt_id']} generation "
                         f"{st['generation']} fence {st['fence']} holds the worktree {o['worktree']} the "
                         f"current attempt {cu['attempt_id']} generation {cu['generation']} fence "
                         f"{cu['fence']} needs (progress {o['progress']}, owner token {o['owner_token']}, "
                         f"observer state {o['observer_state']}). WG's actions reclaim_retain_worktree, "
                         "spawn_attempt are here the reset's pin of the proven-dead owner's bytes "
                         "(retained) and the dispatch of generation 1 on fence 2 importing them; the new "
                         "attempt's worktree is its own (named by its fence), so nothing is taken over. "
                         "The repeated observation re-sends the dispatch under its key: a duplicate, "
                         "one attempt."),
            graph=sc.graph(), steps=sc.steps,
            expect={"tasks": {task: {"generation": 1, "attempt": 1, "fence": 2, "retained": work,
                                     "imported": work, "attempt-state": "running"}}},
        )


def daemon_translator(version: int) -> Callable[[dict, str], Any]:
    return lambda doc, file: Daemon(doc, file, version)


__all__ = ["Daemon", "V1_CASES", "V1_UNMAPPED", "V2_CASES", "WgImportError", "daemon_translator"]
