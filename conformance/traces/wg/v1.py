"""The v1 family (finish wire version 1): source events become our steps.

===========================  ====================================================
source event                 our steps
===========================  ====================================================
``candidate_validated``      ``edit`` (worktree := candidate id), ``submit``
                             (worker), ``quiesce`` (wrapper), ``save-work``
                             (wrapper; candidate, base := ``base_cas``),
                             ``seal-candidate`` (daemon), ``validate``
                             (validator; ``protected_free`` true -> pass, false
                             -> fail)
``child_settled``            ``accept`` (daemon, verdict not-required, deadline);
                             its candidate must be the validated one
``wrapper_handoff``          ``record-disposition`` (wrapper; disposition,
                             deadline), ``prepare-effect`` (daemon)
``begin_finish``             ``record-disposition`` (worker), ``prepare-effect``
``promote``                  ``move-target`` (when ``current_base_cas`` is not the
                             target), ``commit-effect`` (promoter; candidate, base)
``commit_cleanup``           ``prepare-cleanup``, ``commit-cleanup`` (cleanup),
                             ``save-graph`` (daemon)
``owner_proven_dead``        ``owner-dies`` (when ``truthful``), ``probe-owner``
                             (process-observer; ``deadline`` carried in the request)
``resume_same``              ``resume`` (wrapper; same pid and session, the new
                             epochs, birth := the new child epoch)
``message``                  ``message`` (worker; evidence := body)
``ownership_contention``     ``ownership-contention`` (wrapper; evidence := the
                             caller's identity)
``crash``                    env ``crash``
===========================  ====================================================

Decisions: ``applied`` -> applied (every step of the event); ``rejected`` with
``stale_capability`` / ``cas_moved`` -> that rejection on the event's first
request (the client sends nothing after a rejection); ``noop`` -> ``duplicate``
(with the original decision) of every request of an identical event delivered
before, ``evidence-only`` for a first ``message`` or ``ownership_contention``,
an env step for ``crash``.

Owner records, the seeded attempt and the expected facts are in ``v1_records``.
"""
from __future__ import annotations

import json
from pathlib import Path

from wgk.model.vocab import EDGES, Kind, TRANSACTION_KINDS

from wgk.conformance.traces.format import Trace
from wgk.conformance.traces.wg.common import (
    FAMILY_PATHS, V1_COMMIT, Src, Tx, content_key, decided, duplicate_of, origin_of, task_spec,
)
from wgk.conformance.traces.wg.v1_records import V1_GRAPH, V1Records

V1_REJECT = {"stale_capability": "stale-capability", "cas_moved": "cas-moved"}


class V1(V1Records):
    """One v1 file: its events, in order, with their expected decisions."""

    def __init__(self, doc: dict, file: str):
        super().__init__(doc, file)
        self.delivered: dict[str, list[dict]] = {}     # event content -> its request steps

    def first_base(self, events: list) -> str:
        for e in events:
            if isinstance(e, dict) and isinstance(e.get("candidate"), dict) and "base_cas" in e["candidate"]:
                return e["candidate"]["base_cas"]
        return "main-0"

    def run(self) -> Trace:
        s = self.src
        s.const("wire_version", 1)
        name = s.req("name", str)
        task, seed = self.seed(s.sub("initial"))
        events = s.req("events", list)
        decisions = s.req("expected_decisions", list)
        if len(events) != len(decisions):
            raise s.error(f"{len(events)} events but {len(decisions)} expected decisions", "expected_decisions")
        base = self.first_base(events)
        self.tx = Tx(task, V1_GRAPH, {"generation": self.holder["generation"],
                                      "attempt": self.holder["attempt"], "fence": self.holder["fence"],
                                      "lease-epoch": 1}, target=base, worktree=base)
        for i, (ev, dec) in enumerate(zip(s.items("events"), s.items("expected_decisions"))):
            self.event(ev, dec, i)
        final = self.final(s.sub("expected_final"))
        s.finish()
        seed["attempt"]["worktree"] = base
        seed["attempt"]["origin"] = base
        return Trace(
            id="wg-v1-" + name.replace("_", "-"),
            title=f"WG finish wire v1: {name.replace('_', ' ')}",
            source={"kind": "peer-fixture", "file": f"fixtures/wg/v1/{Path(self.file).name}",
                    "provenance": f"graphwork/wg {V1_COMMIT} {FAMILY_PATHS['v1']}/{Path(self.file).name} "
                                  "(finish wire version 1), translated by wgk import-wg"},
            description=self.describe(name, events),
            graph={"id": V1_GRAPH, "target": base, "tasks": [task_spec(task)]},
            initial={task: seed}, steps=self.tx.steps, expect={"tasks": {task: final}},
        )

    def describe(self, name: str, events: list) -> str:
        kinds = ", ".join(str(e.get("type")) for e in events if isinstance(e, dict))
        return (f"The peer's golden vector {name} (finish protocol, wire version 1), one attempt "
                f"attempt-0-1 already running. Source events: {kinds}. Each step names its source "
                "event and expected decision in 'from'.")

    def decision(self, d: Src) -> tuple[str, str | None]:
        status = d.req("status", str)
        reason = d.get("reason")
        d.finish()
        if status == "rejected":
            if reason not in V1_REJECT:
                raise d.error(f"rejection reason {reason!r} cannot be mapped", "reason")
            return status, V1_REJECT[reason]
        if reason is not None or status not in ("applied", "noop"):
            raise d.error(f"decision {status!r} cannot be mapped", "status")
        return status, None

    def event(self, ev: Src, dec: Src, i: int) -> None:
        raw = ev.value
        status, code = self.decision(dec)
        kind = ev.req("type", str)
        at = ev.at
        origin = origin_of(at, kind, dec.value)
        ckey = json.dumps(raw, sort_keys=True)
        if status == "noop" and ckey in self.delivered:
            for step in self.delivered[ckey]:
                self.tx.emit({"request": dict(step["request"])}, duplicate_of(step["expect"]), origin)
            self._consume(ev)
            return
        handler = getattr(self, "ev_" + kind, None)
        if handler is None:
            raise ev.error(f"event type {kind!r} cannot be mapped", "type")
        steps = handler(ev, f"wg:{kind}:{content_key(raw)}")
        ev.finish()
        requests = [st for st in steps if "request" in st]
        if status == "noop":
            if kind == "crash":
                expects: list = []
            elif kind in ("message", "ownership_contention"):
                expects = [decided("evidence-only")] * len(requests)
            else:
                raise dec.error(f"noop for a first {kind!r} event cannot be mapped", "status")
        elif status == "applied":
            expects = [decided("applied")] * len(requests)
        else:
            expects = [decided("rejected", code)]
        emitted = []
        for st in steps:
            if "request" in st:
                if not expects:
                    break          # the client sends nothing after a rejection
                st = self.tx.emit(st, expects.pop(0), origin)
                emitted.append(st)
            else:
                self.tx.emit(st, None, origin)
        self.delivered.setdefault(ckey, emitted)
        if kind == "resume_same" and status == "applied":
            self.holder = dict(self.holder, wrapper_epoch=raw["new_wrapper_epoch"],
                               child_epoch=raw["new_child_epoch"])

    def _consume(self, ev: Src) -> None:
        ev.used.update(ev.value)

    def _caller(self, ev: Src) -> tuple[dict, dict]:
        rec = self.record(ev.sub("caller"))
        return rec, self.caller_cap(rec)

    def ev_candidate_validated(self, ev: Src, key: str) -> list[dict]:
        _, cap = self._caller(ev)
        cid, base, free = self._candidate(ev.sub("candidate"))
        tx = self.tx
        steps: list[dict] = []
        if tx.worktree != cid:
            steps.append({"env": "edit", "task": tx.task, "content": cid})
            tx.worktree = cid
        plan = [("submit", "worker", {}), ("quiesce", "wrapper", {}),
                ("save-work", "wrapper", {"candidate": cid, "base": base}),
                ("seal-candidate", "daemon", {"candidate": cid}),
                ("validate", "validator", {"candidate": cid, "verdict": "pass" if free else "fail"})]
        return steps + self._chain(plan, key, cap)

    def _chain(self, plan: list, key: str, cap: dict) -> list[dict]:
        """Requests of one event; CAS fields follow the phases the chain itself walks through."""
        out = []
        phase, revision = self.tx.phase, self.tx.revision
        for kind, actor, params in plan:
            r = self.tx.request(kind, actor, f"{key}/{kind}", cap=cap, **params)
            if Kind.parse(kind) in TRANSACTION_KINDS:
                r["expected-phase"], r["expected-revision"] = phase, revision
                if Kind.parse(kind) in EDGES:
                    phase, revision = EDGES[Kind.parse(kind)][1].label, revision + 1
            out.append({"request": r})
        return out

    def ev_child_settled(self, ev: Src, key: str) -> list[dict]:
        _, cap = self._caller(ev)
        cid, base, _free = self._candidate(ev.sub("candidate"))
        if self.tx.candidate is not None and (cid, base) != (self.tx.candidate, self.tx.base):
            raise ev.error("the settled candidate is not the validated one", "candidate")
        deadline = ev.req("deadline", int)
        return self._chain([("accept", "daemon", {"candidate": cid, "verdict": "not-required",
                                                  "deadline": deadline})], key, cap)

    def ev_wrapper_handoff(self, ev: Src, key: str) -> list[dict]:
        _, cap = self._caller(ev)
        disposition, deadline = ev.req("disposition", str), ev.req("deadline", int)
        return self._chain([("record-disposition", "wrapper", {"disposition": disposition,
                                                                "deadline": deadline}),
                            ("prepare-effect", "daemon", {})], key, cap)

    def ev_begin_finish(self, ev: Src, key: str) -> list[dict]:
        _, cap = self._caller(ev)
        disposition = ev.req("disposition", str)
        return self._chain([("record-disposition", "worker", {"disposition": disposition}),
                            ("prepare-effect", "daemon", {})], key, cap)

    def ev_promote(self, ev: Src, key: str) -> list[dict]:
        _, cap = self._caller(ev)
        cid, base, current = ev.req("candidate_id", str), ev.req("base_cas", str), ev.req("current_base_cas", str)
        steps: list[dict] = []
        if current != self.tx.target:
            steps.append({"env": "move-target", "content": current})
            self.tx.target = current
        return steps + self._chain([("commit-effect", "promoter", {"candidate": cid, "base": base})], key, cap)

    def ev_commit_cleanup(self, ev: Src, key: str) -> list[dict]:
        _, cap = self._caller(ev)
        return self._chain([("prepare-cleanup", "cleanup", {}), ("commit-cleanup", "cleanup", {}),
                            ("save-graph", "daemon", {})], key, cap)

    def ev_crash(self, ev: Src, key: str) -> list[dict]:
        return [{"env": "crash"}]

    def ev_message(self, ev: Src, key: str) -> list[dict]:
        body = ev.req("body", str)
        return [{"request": self.tx.request("message", "worker", key + "/message", evidence=body)}]

    def ev_ownership_contention(self, ev: Src, key: str) -> list[dict]:
        rec, _ = self._caller(ev)
        who = (f"{rec['attempt_id']}:fence-{rec['fence']}:{rec['wrapper_identity_digest']}:"
               f"{rec['child_identity_digest']}:epochs-{rec['wrapper_epoch']}-{rec['child_epoch']}")
        return [{"request": self.tx.request("ownership-contention", "wrapper",
                                            key + "/ownership-contention", evidence=who)}]

    def ev_owner_proven_dead(self, ev: Src, key: str) -> list[dict]:
        rec, cap = self._caller(ev)
        truthful, deadline = ev.req("truthful", bool), ev.req("deadline", int)
        steps = [{"env": "owner-dies", "task": self.tx.task}] if truthful else []
        evidence = f"exit:{rec['child_identity_digest']}:epoch-{rec['child_epoch']}"
        return steps + self._chain([("probe-owner", "process-observer",
                                     {"evidence": evidence, "deadline": deadline})], key, cap)

    def ev_resume_same(self, ev: Src, key: str) -> list[dict]:
        rec, cap = self._caller(ev)
        w, c = ev.req("new_wrapper_epoch", int), ev.req("new_child_epoch", int)
        owner = dict(self.owner_of(rec), birth=c)
        owner["wrapper-epoch"], owner["child-epoch"] = w, c
        return self._chain([("resume", "wrapper", {"owner": owner})], key, cap)

    # expected final facts
