"""The deletion-map family (the peer's single-kernel replays of its incidents).

================================  ==============================================
source request kind               our steps (evidence := the key, unless noted)
================================  ==============================================
``log``                           ``log`` (worker)
``response-delivery``             env ``lost-response`` (key
                                  ``transport-loss:<key>`` of a delivered request)
``owner-observed-live``           ``probe-owner`` (process-observer)
``heartbeat-missing``             ``heartbeat-timeout`` (daemon)
``provider-failure-observed``     ``provider-failure`` (wrapper)
``threshold-compaction-settled``  ``compaction`` (wrapper; key
                                  ``compaction:<session>:<occ>``, evidence occ)
``effect-acknowledged``           ``ack-continuation`` (wrapper; key
                                  ``delivery-ack:continue:<attempt>:process-<n>:<occ>``)
``observer-eof``                  ``observe-eof`` (process-observer)
``exact-child-exit-without-``     env ``owner-dies``, ``probe-owner``
``terminal``                      (process-observer; key ``child-exit:pid-<p>:birth-<b>``)
``terminal-intent``               ``fail`` (worker; a key ``...:attempt-<n>:fence-<m>``
                                  names the caller's capability)
``attempt-reserve``               ``dispatch`` (daemon; expected attempt n-1)
``assignment-receipt``            ``assign`` (daemon)
``terminal-success-with-receipt`` the whole SaveTransaction, ``edit`` then
                                  ``submit`` ... ``save-graph`` (disposition deliver,
                                  candidate := the receipt of the after-state's
                                  ``terminal``), keys ``<key>/<kind>``
================================  ==============================================

The seeded attempt is the requests' ``attempt_id`` / ``fence`` (attempt n, lease
epoch n, generation 0; ``attempt_phase`` open seeds attempt n-1 with no
attempt running), owner pid 4242 birth 9 session ``session-4`` (the process and
session the keys name); the task is ``task-a``; it requires an assignment when
the file has an ``assignment-receipt``.

Decisions: ``applied``, ``applied-response-recorded``,
``applied-one-reconciliation-effect``, ``issue-one-effect`` -> applied;
``evidence-only`` -> evidence-only (or the lost-response env step);
``duplicate-noop``, ``duplicate-replay-original-response``,
``duplicate-same-rejection`` -> duplicate (original: the first decision under
the key); ``reject-stale-attempt`` -> rejected stale-capability;
``reject-assignment-required`` -> rejected assignment-required.

Facts (every step's ``after`` becomes that step's expected facts, the
``expected_final`` the final facts): ``attempt_phase`` running / open / done /
finishing -> attempt-state running / status open / status done / attempt-state
running with owner-seen dead; ``terminal`` ``succeeded:<r>`` -> attempt-state
succeeded, candidate r; ``requests`` -> journal (``completed:ok`` -> applied);
``effect_ids`` ``log:`` -> counters logs, ``continue:`` -> counters
continuations, ``publish:<r>`` -> promotions and the effect receipt's candidate,
``reconcile-disposition:`` -> plan scheduled declare-lost; ``observation_ids``
and ``continuation_ids`` -> the evidence entries of kinds probe-owner, observe-eof,
provider-failure, compaction and continuation, exactly; ``holds`` -> exit none,
``assignment-required`` -> plan runnable assign; ``assignment_receipt`` ->
assigned; ``provider_failure_count`` -> counters provider-failures. The
descriptive parts (incident, source evidence, current trace, contradiction,
invariants, notes) become the description and step notes.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from wgk.model.vocab import EDGES, Kind

from wgk.conformance.traces.format import Trace
from wgk.conformance.traces.wg.common import (
    FAMILY_PATHS, V1_COMMIT, Src, Tx, decided, duplicate_of, merge_facts, origin_of, task_spec,
)

DM_GRAPH = "wg-single-kernel"
DM_TASK = "task-a"
DM_OWNER = {"pid": 4242, "birth": 9, "session": "session-4", "wrapper-epoch": 1, "child-epoch": 1}
DM_APPLIED = ("applied", "applied-response-recorded", "applied-one-reconciliation-effect", "issue-one-effect")
DM_DUPLICATE = ("duplicate-noop", "duplicate-replay-original-response", "duplicate-same-rejection")
DM_REJECT = {"reject-stale-attempt": "stale-capability", "reject-assignment-required": "assignment-required"}
DM_OBSERVATION_KINDS = ["probe-owner", "observe-eof", "provider-failure", "compaction", "continuation"]
DM_STATE_FIELDS = ("attempt_phase", "terminal", "requests", "effect_ids", "observation_ids", "holds",
                   "assignment_receipt", "provider_failure_count", "continuation_ids")
COMPLETION = [("submit", "worker", ()), ("quiesce", "wrapper", ()), ("save-work", "wrapper", ("candidate", "base")),
              ("seal-candidate", "daemon", ("candidate",)), ("validate", "validator", ("candidate",)),
              ("accept", "daemon", ("candidate",)), ("record-disposition", "worker", ()),
              ("prepare-effect", "daemon", ()), ("commit-effect", "promoter", ("candidate", "base")),
              ("prepare-cleanup", "cleanup", ()), ("commit-cleanup", "cleanup", ()), ("save-graph", "daemon", ())]


class DeletionMap:
    def __init__(self, doc: dict, file: str):
        self.file = file
        self.src = Src(doc, "", file)
        self.sent: dict[str, list[dict]] = {}      # key -> the requests first sent under it

    def run(self) -> Trace:
        s = self.src
        s.const("trace_schema", "wg-single-attempt-deletion-audit/v1")
        s.const("credential_free", True)
        incident = s.req("incident", str)
        revision = s.req("source_revision", str)
        evidence = s.req("source_evidence", list)
        current = s.req("current_trace", list)
        contradiction = s.sub("current_contradiction")
        fact, risk = contradiction.req("fact", str), contradiction.req("risk", str)
        contradiction.finish()
        replay = s.sub("single_kernel_replay")
        steps = replay.req("steps", list)
        reqs = [st.get("request", {}) for st in steps if isinstance(st, dict)]
        attempts = {(q.get("attempt_id"), q.get("fence")) for q in reqs}
        if len(attempts) != 1:
            raise replay.error(f"requests name several attempts {sorted(map(str, attempts))}", "steps")
        attempt_id, fence = attempts.pop()
        m = re.fullmatch(r"attempt-(\d+)", str(attempt_id))
        if not m or not isinstance(fence, int):
            raise replay.error(f"attempt {attempt_id!r} fence {fence!r} cannot be mapped", "steps")
        self.n, self.fence = int(m.group(1)), fence
        self.attempt_id = attempt_id
        assignment = any(q.get("kind") == "assignment-receipt" for q in reqs)
        self.tx = Tx(DM_TASK, DM_GRAPH, {"generation": 0, "attempt": self.n, "fence": fence,
                                         "lease-epoch": self.n})
        seed = self.seed(replay.sub("initial"))
        self.state = replay.value["initial"]
        for st in replay.items("steps"):
            self.step(st)
        final = self.facts(replay.sub("expected_final"))
        if replay.value["expected_final"] != self.state:
            raise replay.error("expected_final is not the last step's after-state", "expected_final")
        invariants = replay.req("invariants", list)
        replay.finish()
        s.finish()
        number = Path(self.file).name.split("-")[0]
        description = (
            f"The peer's single-kernel replay of incident {incident} (deletion-map trace, source "
            f"revision {revision}). Historical trace: "
            + "; ".join(f"{e.get('seq')}. {e.get('authority')}: {e.get('event')}" for e in current)
            + f". Contradiction: {fact}. Risk: {risk}. Source evidence: "
            + "; ".join(f"{e.get('path')} {e.get('symbol')} {e.get('lines')}: {e.get('fact')}" for e in evidence)
            + ". Invariants: " + "; ".join(invariants) + "."
        )
        return Trace(
            id=f"wg-dm-{number}-{incident}",
            title=f"WG single-kernel replay: {incident.replace('-', ' ')}",
            source={"kind": "peer-fixture", "file": f"fixtures/wg/deletion-map/{Path(self.file).name}",
                    "provenance": f"graphwork/wg {V1_COMMIT} {FAMILY_PATHS['deletion-map']}/"
                                  f"{Path(self.file).name}, translated by wgk import-wg"},
            description=description,
            graph={"id": DM_GRAPH, "target": "main-0", "tasks": [task_spec(DM_TASK, assignment)]},
            initial={DM_TASK: seed}, steps=self.tx.steps, expect={"tasks": {DM_TASK: final[0]},
                                                                   "journal": final[1]},
        )

    def seed(self, s: Src) -> dict:
        phase = s.req("attempt_phase", str)
        for key, value in (("terminal", None), ("requests", {}), ("effect_ids", []), ("observation_ids", []),
                           ("holds", []), ("assignment_receipt", None), ("provider_failure_count", 0),
                           ("continuation_ids", [])):
            s.const(key, value)
        s.finish()
        if phase == "running":
            return {"attempt": {"generation": 0, "attempt": self.n, "fence": self.fence, "lease-epoch": self.n,
                                "state": "running", "owner": dict(DM_OWNER)}}
        if phase == "open":
            return {"attempt": {"generation": 0, "attempt": self.n - 1, "fence": self.fence - 1,
                                "lease-epoch": self.n - 1, "state": "none"}}
        raise s.error(f"attempt phase {phase!r} cannot be seeded", "attempt_phase")

    def decision(self, word: str, key: str, st: Src) -> dict:
        if word in DM_APPLIED:
            return decided("applied")
        if word == "evidence-only":
            return decided("evidence-only")
        if word in DM_DUPLICATE:
            if key not in self.tx.first:
                raise st.error(f"a duplicate of key {key!r} that was never sent cannot be mapped", "decision")
            return duplicate_of(self.tx.first[key])
        if word in DM_REJECT:
            return decided("rejected", DM_REJECT[word])
        raise st.error(f"decision {word!r} cannot be mapped", "decision")

    def step(self, st: Src) -> None:
        st.req("seq", int)
        r = st.sub("request")
        key, kind = r.req("idempotency_key", str), r.req("kind", str)
        r.const("attempt_id", self.attempt_id)
        r.const("fence", self.fence)
        r.finish()
        word = st.req("decision", str)
        if st.value.get("before") != self.state:
            raise st.error("'before' is not the previous step's after-state", "before")
        st.req("before")
        after = st.req("after", dict)
        note = st.get("note")
        origin = origin_of(st.at, kind, word)
        handler = getattr(self, "rq_" + kind.replace("-", "_"), None)
        if handler is None:
            raise r.error(f"request kind {kind!r} cannot be mapped", "kind")
        steps = handler(r, key, after)
        if kind == "response-delivery":
            if word != "evidence-only":
                raise st.error(f"decision {word!r} for a response delivery cannot be mapped", "decision")
            expects: list = []
        elif word in DM_DUPLICATE:
            if key not in self.sent:
                raise st.error(f"a duplicate of key {key!r} that was never sent cannot be mapped", "decision")
            steps = [{"request": dict(q["request"])} for q in self.sent[key]]
            expects = [duplicate_of(self.tx.first[q["request"]["key"]]) for q in steps]
        else:
            dec = self.decision(word, key, st)
            requests = [q for q in steps if "request" in q]
            expects = [dec] * len(requests) if dec["decision"] != "rejected" else [dec]
            self.sent.setdefault(key, [{"request": dict(q["request"])} for q in requests[:len(expects)]])
        last = None
        for q in steps:
            if "request" in q:
                if not expects:
                    break          # the client sends nothing after a rejection
                last = self.tx.emit(q, expects.pop(0), origin)
            else:
                last = self.tx.emit(q, None, origin)
        facts, journal = self.facts(st.sub("after"))
        st.finish()
        if last is not None:
            last["expect-facts"] = {"tasks": {DM_TASK: facts}, **({"journal": journal} if journal else {})}
            if note:
                last["note"] = note
        self.state = after

    # request kinds
    def _one(self, kind: str, actor: str, key: str, **params: Any) -> list[dict]:
        return [{"request": self.tx.request(kind, actor, key, **params)}]

    def rq_log(self, r: Src, key: str, after: dict) -> list[dict]:
        return self._one("log", "worker", key)

    def rq_response_delivery(self, r: Src, key: str, after: dict) -> list[dict]:
        m = re.fullmatch(r"transport-loss:(.+)", key)
        if not m or not any(k == m.group(1) or k.startswith(m.group(1) + "/") for k in self.tx.first):
            raise r.error(f"key {key!r} names no delivered request", "idempotency_key")
        return [{"env": "lost-response"}]

    def rq_owner_observed_live(self, r: Src, key: str, after: dict) -> list[dict]:
        self._check_process(r, key, r"pid:(\d+):birth-(\d+)")
        return self._one("probe-owner", "process-observer", key, evidence=key)

    def rq_heartbeat_missing(self, r: Src, key: str, after: dict) -> list[dict]:
        return self._one("heartbeat-timeout", "daemon", key, evidence=key)

    def rq_provider_failure_observed(self, r: Src, key: str, after: dict) -> list[dict]:
        return self._one("provider-failure", "wrapper", key, evidence=key)

    def rq_threshold_compaction_settled(self, r: Src, key: str, after: dict) -> list[dict]:
        m = re.fullmatch(r"compaction:([^:]+):(.+)", key)
        if not m or m.group(1) != DM_OWNER["session"]:
            raise r.error(f"key {key!r} is not compaction:{DM_OWNER['session']}:<occurrence>", "idempotency_key")
        return self._one("compaction", "wrapper", key, evidence=m.group(2))

    def rq_effect_acknowledged(self, r: Src, key: str, after: dict) -> list[dict]:
        m = re.fullmatch(r"delivery-ack:continue:([^:]+):process-(\d+):(.+)", key)
        if not m or m.group(1) != self.attempt_id or int(m.group(2)) != DM_OWNER["child-epoch"]:
            raise r.error(f"key {key!r} names no continuation of {self.attempt_id}", "idempotency_key")
        return self._one("ack-continuation", "wrapper", key, evidence=m.group(3))

    def rq_observer_eof(self, r: Src, key: str, after: dict) -> list[dict]:
        return self._one("observe-eof", "process-observer", key, evidence=key)

    def rq_exact_child_exit_without_terminal(self, r: Src, key: str, after: dict) -> list[dict]:
        self._check_process(r, key, r"child-exit:pid-(\d+):birth-(\d+)")
        return [{"env": "owner-dies", "task": DM_TASK}] + self._one(
            "probe-owner", "process-observer", key, evidence=key)

    def rq_terminal_intent(self, r: Src, key: str, after: dict) -> list[dict]:
        m = re.search(r":attempt-(\d+):fence-(\d+)$", key)
        cap = self.tx.cap(attempt=int(m.group(1)), fence=int(m.group(2))) if m else None
        return self._one("fail", "worker", key, cap=cap, evidence=key)

    def rq_attempt_reserve(self, r: Src, key: str, after: dict) -> list[dict]:
        if key != f"reserve:{DM_TASK}:{self.attempt_id}":
            raise r.error(f"key {key!r} is not reserve:{DM_TASK}:{self.attempt_id}", "idempotency_key")
        return self._one("dispatch", "daemon", key, expected_attempt=self.n - 1, owner=dict(DM_OWNER))

    def rq_assignment_receipt(self, r: Src, key: str, after: dict) -> list[dict]:
        return self._one("assign", "daemon", key, evidence=key)

    def rq_terminal_success_with_receipt(self, r: Src, key: str, after: dict) -> list[dict]:
        m = re.fullmatch(r"succeeded:(.+)", str(after.get("terminal")))
        if not m:
            raise r.error("a completion whose after-state names no receipt cannot be mapped", "kind")
        cand, base = m.group(1), self.tx.target
        steps: list[dict] = [{"env": "edit", "task": DM_TASK, "content": cand}]
        phase, revision = self.tx.phase, self.tx.revision
        for kind, actor, carried in COMPLETION:
            params: dict[str, Any] = {p: {"candidate": cand, "base": base}[p] for p in carried}
            if kind == "validate":
                params["verdict"] = "pass"
            if kind == "accept":
                params["verdict"] = "not-required"
            if kind == "record-disposition":
                params["disposition"] = "deliver"
            req = self.tx.request(kind, actor, f"{key}/{kind}", **params)
            req["expected-phase"], req["expected-revision"] = phase, revision
            phase, revision = EDGES[Kind.parse(kind)][1].label, revision + 1
            steps.append({"request": req})
        return steps

    def _check_process(self, r: Src, key: str, pattern: str) -> None:
        m = re.fullmatch(pattern, key)
        if not m or (int(m.group(1)), int(m.group(2))) != (DM_OWNER["pid"], DM_OWNER["birth"]):
            raise r.error(f"key {key!r} does not name the owner process pid {DM_OWNER['pid']} "
                          f"birth {DM_OWNER['birth']}", "idempotency_key")

    # facts
    def facts(self, s: Src) -> tuple[dict, dict]:
        f: dict[str, Any] = {}
        err = lambda m: s.error(m)  # noqa: E731
        phase = s.req("attempt_phase", str)
        table = {"running": {"attempt-state": "running"}, "open": {"status": "open"},
                 "done": {"status": "done", "attempt-state": "succeeded"},
                 "finishing": {"attempt-state": "running", "owner-seen": "dead"}}
        if phase not in table:
            raise s.error(f"attempt phase {phase!r} cannot be mapped", "attempt_phase")
        merge_facts(f, dict(table[phase]), err)
        terminal = s.get("terminal")
        if terminal is not None:
            m = re.fullmatch(r"succeeded:(.+)", str(terminal))
            if not m:
                raise s.error(f"terminal {terminal!r} cannot be mapped", "terminal")
            merge_facts(f, {"attempt-state": "succeeded", "candidate": m.group(1)}, err)
        elif phase == "done":
            raise s.error("a done attempt without a terminal cannot be mapped", "terminal")
        journal = {}
        for key, value in s.req("requests", dict).items():
            if value != "completed:ok":
                raise s.error(f"request state {value!r} cannot be mapped", "requests")
            subs = [k for k in self.tx.first if k == key or k.startswith(key + "/")] or [key]
            journal.update({k: decided("applied") for k in subs})
        effects = s.req("effect_ids", list)
        counts = {"logs": 0, "continuations": 0}
        promotions = 0
        for e in effects:
            if e.startswith("log:"):
                counts["logs"] += 1
            elif e.startswith(f"continue:{self.attempt_id}:process-"):
                counts["continuations"] += 1
            elif e == f"reconcile-disposition:{self.attempt_id}":
                # the one reconciliation scheduled for an exact exit without a terminal: the
                # proven-dead owner's session may continue until its deadline, then convergence
                # declares the attempt lost (the planned continuation)
                merge_facts(f, {"plan": {"way": "wait", "action": "resume"}}, err)
            elif e.startswith("publish:"):
                promotions += 1
                merge_facts(f, {"receipts": {"effect": {"candidate": e[len("publish:"):]}}}, err)
            else:
                raise s.error(f"effect id {e!r} cannot be mapped", "effect_ids")
        merge_facts(f, {"promotions": promotions}, err)
        entries = [self.observation(s, o) for o in s.req("observation_ids", list)]
        continuations = s.req("continuation_ids", list)
        entries += [["continuation", c] for c in continuations]
        if len(continuations) != counts["continuations"]:
            raise s.error("continuation ids and continue effects disagree", "continuation_ids")
        f["evidence"] = {"$kinds": list(DM_OBSERVATION_KINDS), "$exactly": entries}
        holds = s.req("holds", list)
        merge_facts(f, {"exit": "none"}, err)
        for h in holds:
            if h != "assignment-required":
                raise s.error(f"hold {h!r} cannot be mapped", "holds")
            merge_facts(f, {"plan": {"way": "runnable", "action": "assign"}}, err)
        merge_facts(f, {"assigned": s.get("assignment_receipt") is not None}, err)
        counts["provider-failures"] = s.req("provider_failure_count", int)
        f["counters"] = counts
        s.finish()
        return f, journal

    def observation(self, s: Src, o: str) -> list:
        for prefix, kind in (("pid:", "probe-owner"), ("child-exit:", "probe-owner"),
                             ("observer-eof:", "observe-eof"), ("provider-failure:", "provider-failure")):
            if o.startswith(prefix):
                return [kind, o]
        m = re.fullmatch(r"compaction:[^:]+:(.+)", o)
        if m:
            return ["compaction", m.group(1)]
        raise s.error(f"observation id {o!r} cannot be mapped", "observation_ids")

