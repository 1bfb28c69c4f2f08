"""The v2 family (SaveTransaction schema 2): each source step becomes one request.

``next_phase`` names the edge: the kind whose edge ends there (``prepared`` ->
submit (worker), ``quiescing`` -> quiesce, ``work-saved`` -> save-work, ...,
``accepted`` -> accept (daemon, not-required; evaluator pass after
``awaiting-acceptance``), ``disposition-recorded`` -> record-disposition with
disposition land (v2 names none; land is the strictest: the target moves by CAS
from the bound base), ``effect-committed`` -> commit-effect ...);
``needs-reconciliation`` with a ``hold`` fact -> ``legacy-done``
(legacy-import; evidence := the hold reason; the request's expected phase and
revision are checked against the transaction, legacy-done carries no CAS).
``source`` -> K (``graph_id``, ``task_id``, ``generation``, ``attempt_id``,
``attempt_fence``, ``worktree_lease_epoch``); ``process_epoch``,
``wrapper_epoch``, ``session_proof_digest`` -> the seeded owner (child epoch,
wrapper epoch, session); ``route_snapshot_cid`` and ``worktree_identity_digest``
identify the attempt and must be the same on every request. ``expected_phase``,
``expected_revision`` -> the CAS; ``idempotency_key`` -> key; ``action_key``
must be ``action:<key>``; ``fact.cid`` -> evidence; ``fact.binding`` ->
candidate and base (the binding's source must be the request's). The seeded
worktree holds the first bound candidate, the target is its base.

Decisions: ``applied``, ``duplicate`` (original: the first decision under that
key), ``rejected`` with ``stale-source`` -> stale-capability,
``idempotency-conflict``, ``illegal-phase-edge``, ``cas-moved`` /
``stale-revision`` -> cas-moved.

Facts: ``revision``; ``phase`` -> phase (``needs-reconciliation`` -> exit and
status needs-reconciliation); ``binding`` and ``source`` -> candidate, base,
generation, attempt, fence, lease-epoch, owner session and epochs;
``requests`` -> the journal: every key of the trace with its first decision
(WG journals applied requests only: its keys must be exactly our applied
keys); ``evidence_cids`` -> checked at import: each phase's cid is the evidence
of the applied request that made that edge (so it lives in that request's bytes,
and the journal fact covers it); ``hold_reason`` -> reason ``legacy-unproven``
and plan way hold; ``transaction_id`` must stay the same.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from wgk.conformance.traces.format import Trace
from wgk.conformance.traces.wg.common import (
    FAMILY_PATHS, PHASE_AFTER, V1_COMMIT, Src, Tx, decided, duplicate_of, origin_of, task_spec,
)

V2_REJECT = {"stale-source": "stale-capability", "idempotency-conflict": "idempotency-conflict",
             "illegal-phase-edge": "illegal-phase-edge", "cas-moved": "cas-moved",
             "stale-revision": "cas-moved"}
V2_HOLD_REASONS = {"legacy Done has no complete GraphSave": "legacy-unproven"}
V2_ACTORS = {"submit": "worker", "quiesce": "wrapper", "save-work": "wrapper", "seal-candidate": "daemon",
             "validate": "validator", "request-review": "daemon", "accept": "daemon",
             "record-disposition": "wrapper", "prepare-effect": "promoter", "commit-effect": "promoter",
             "prepare-cleanup": "cleanup", "commit-cleanup": "cleanup", "save-graph": "daemon"}
V2_SOURCE_K = ("graph_id", "task_id", "generation", "attempt_id", "attempt_fence", "worktree_lease_epoch")
V2_SOURCE_IDENTITY = ("process_epoch", "wrapper_epoch", "route_snapshot_cid", "session_proof_digest",
                      "worktree_identity_digest")


class V2:
    def __init__(self, doc: dict, file: str):
        self.file = file
        self.src = Src(doc, "", file)

    def source(self, s: Src) -> dict:
        out = {f: s.req(f) for f in V2_SOURCE_K + V2_SOURCE_IDENTITY}
        s.finish()
        m = re.fullmatch(r"attempt-(\d+)-(\d+)", str(out["attempt_id"]))
        if not m or int(m.group(1)) != out["generation"]:
            raise s.error(f"field 'attempt_id' {out['attempt_id']!r} is not attempt-<generation>-<n>", "attempt_id")
        out["attempt"] = int(m.group(2))
        return out

    def cap(self, src: dict) -> dict:
        return {"graph": src["graph_id"], "task": src["task_id"], "generation": src["generation"],
                "attempt": src["attempt"], "fence": src["attempt_fence"],
                "lease-epoch": src["worktree_lease_epoch"]}

    def check_identity(self, s: Src, src: dict) -> None:
        for f in V2_SOURCE_IDENTITY:
            if src[f] != self.attempt_src[f]:
                raise s.error(f"field {f!r} differs from the attempt's ({src[f]!r}): a request from "
                              "another process, route or worktree identity cannot be mapped", f)

    def firstbinding_of(self, steps: list) -> tuple[str, str] | None:
        for st in steps:
            b = ((st.get("request") or {}).get("fact") or {}).get("binding") if isinstance(st, dict) else None
            if isinstance(b, dict) and "candidate_id" in b:
                return b["candidate_id"], b.get("base_commit_oid")
        return None

    def run(self) -> Trace:
        s = self.src
        s.const("schema_version", 2)
        name = s.req("name", str)
        ini = s.sub("initial")
        ini.const("schema_version", 2)
        self.tx_id = ini.req("transaction_id", str)
        self.attempt_src = self.source(ini.sub("source"))
        ini.const("revision", 0)
        ini.const("phase", "absent")
        ini.const("evidence_cids", {})
        ini.const("requests", {})
        ini.finish()
        a = self.attempt_src
        bound = self.firstbinding_of(s.value.get("steps", []))
        target = bound[1] if bound else "main-0"
        worktree = bound[0] if bound else target
        task = a["task_id"]
        self.tx = Tx(task, a["graph_id"], {k: v for k, v in self.cap(a).items() if k not in ("graph", "task")},
                     target=target, worktree=worktree)
        seed = {"attempt": {
            "generation": a["generation"], "attempt": a["attempt"], "fence": a["attempt_fence"],
            "lease-epoch": a["worktree_lease_epoch"], "state": "running",
            "owner": {"pid": 4001, "birth": a["process_epoch"], "session": a["session_proof_digest"],
                      "wrapper-epoch": a["wrapper_epoch"], "child-epoch": a["process_epoch"]},
            "worktree": worktree, "origin": target}}
        self.applied_evidence: dict[str, str] = {}
        for st in s.items("steps"):
            self.step(st)
        final = self.final(s.sub("expected_final"))
        s.finish()
        return Trace(
            id="wg-v2-" + name.replace("_", "-"),
            title=f"WG SaveTransaction v2: {name.replace('_', ' ')}",
            source={"kind": "peer-fixture", "file": f"fixtures/wg/v2/{Path(self.file).name}",
                    "provenance": f"graphwork/wg {V1_COMMIT} {FAMILY_PATHS['v2']}/{Path(self.file).name} "
                                  "(SaveTransaction schema version 2), translated by wgk import-wg"},
            description=(f"The peer's golden vector {name} (SaveTransaction, schema version 2) on "
                         f"transaction {self.tx_id}, attempt {a['attempt_id']} fence {a['attempt_fence']} "
                         f"lease epoch {a['worktree_lease_epoch']} running; route {a['route_snapshot_cid']}, "
                         f"worktree identity {a['worktree_identity_digest']}. Each step names its source "
                         "step and expected decision in 'from'."),
            graph={"id": a["graph_id"], "target": target, "tasks": [task_spec(task)]},
            initial={task: seed}, steps=self.tx.steps, expect={"tasks": {task: final[0]}, "journal": final[1]},
        )

    def expected(self, e: Src, key: str) -> dict:
        status, code = e.req("status", str), e.get("code")
        e.finish()
        if status == "applied" and code is None:
            return decided("applied")
        if status == "duplicate" and code is None:
            if key not in self.tx.first:
                raise e.error(f"a duplicate of key {key!r} that was never sent cannot be mapped", "status")
            return duplicate_of(self.tx.first[key])
        if status == "rejected" and code in V2_REJECT:
            return decided("rejected", V2_REJECT[code])
        raise e.error(f"decision {status!r} {code!r} cannot be mapped", "code" if code else "status")

    def step(self, st: Src) -> None:
        r = st.sub("request")
        src = self.source(r.sub("source"))
        self.check_identity(r, src)
        key = r.req("idempotency_key", str)
        if r.req("action_key", str) != f"action:{key}":
            raise r.error(f"field 'action_key' must be 'action:{key}'", "action_key")
        exp_rev, exp_phase, nxt = r.req("expected_revision", int), r.req("expected_phase", str), r.req("next_phase", str)
        fact = r.sub("fact")
        expect = self.expected(st.sub("expected"), key)
        origin = origin_of(st.at, f"{exp_phase} -> {nxt}", st.value["expected"])
        kind_fact = fact.req("kind", str)
        if kind_fact == "hold":
            request = self.hold(r, fact, key, exp_phase, exp_rev, nxt)
        elif kind_fact == "evidence":
            request = self.edge(r, fact, key, src, exp_phase, exp_rev, nxt)
        else:
            raise fact.error(f"fact kind {kind_fact!r} cannot be mapped", "kind")
        fact.finish()
        r.finish()
        st.finish()
        self.tx.emit({"request": request}, expect, origin)
        if expect["decision"] == "applied" and kind_fact == "evidence":
            self.applied_evidence[nxt] = request["evidence"]

    def hold(self, r: Src, fact: Src, key: str, exp_phase: str, exp_rev: int, nxt: str) -> dict:
        if nxt != "needs-reconciliation":
            raise r.error(f"a hold to {nxt!r} cannot be mapped", "next_phase")
        if (exp_phase, exp_rev) != (self.tx.phase, self.tx.revision):
            raise r.error("a hold with a stale expected phase or revision cannot be mapped "
                          "(legacy-done carries no CAS)", "expected_revision")
        reason = fact.req("reason", str)
        if reason not in V2_HOLD_REASONS:
            raise fact.error(f"hold reason {reason!r} cannot be mapped", "reason")
        return self.tx.request("legacy-done", "legacy-import", key, evidence=reason)

    def edge(self, r: Src, fact: Src, key: str, src: dict, exp_phase: str, exp_rev: int, nxt: str) -> dict:
        kind = PHASE_AFTER.get(nxt)
        if kind is None:
            raise r.error(f"next phase {nxt!r} cannot be mapped", "next_phase")
        cid = fact.req("cid", str)
        candidate = base = None
        if fact.has("binding"):
            b = fact.sub("binding")
            if self.source(b.sub("source")) != src:
                raise b.error("the binding's source is not the request's", "source")
            candidate, base = b.req("candidate_id", str), b.req("base_commit_oid", str)
            b.finish()
        params: dict[str, Any] = {}
        if kind in ("save-work", "commit-effect"):
            params = {"candidate": candidate, "base": base}
        elif kind in ("seal-candidate", "validate", "accept"):
            params = {"candidate": candidate}
            if base is not None and self.tx.base is not None and base != self.tx.base:
                raise fact.error("the binding's base differs from the saved work's", "binding")
        elif candidate is not None and self.tx.candidate is not None and \
                (candidate, base) != (self.tx.candidate, self.tx.base):
            raise fact.error(f"{kind} carries no candidate, and the binding differs from the saved work's",
                             "binding")
        if kind == "validate":
            params["verdict"] = "pass"
        if kind == "accept":
            params["verdict"] = "pass" if exp_phase == "awaiting-acceptance" else "not-required"
        if kind == "record-disposition":
            params["disposition"] = "land"
        actor = V2_ACTORS[kind]
        if kind == "accept" and exp_phase == "awaiting-acceptance":
            actor = "evaluator"
        req = self.tx.request(kind, actor, key, cap=self.cap(src), evidence=cid, **params)
        req["expected-phase"], req["expected-revision"] = exp_phase, exp_rev
        return req

    def final(self, s: Src) -> tuple[dict, dict]:
        s.const("schema_version", 2)
        s.const("transaction_id", self.tx_id)
        src = self.source(s.sub("source"))
        self.check_identity(s, src)
        f: dict[str, Any] = {"revision": s.req("revision", int)}
        k = self.cap(src)
        f.update({"generation": k["generation"], "attempt": k["attempt"], "fence": k["fence"],
                  "lease-epoch": k["lease-epoch"],
                  "owner": {"session": src["session_proof_digest"], "wrapper-epoch": src["wrapper_epoch"],
                            "child-epoch": src["process_epoch"]}})
        phase = s.req("phase", str)
        if phase == "needs-reconciliation":
            f.update({"exit": "needs-reconciliation", "status": "needs-reconciliation"})
        elif phase in PHASE_AFTER or phase == "absent":
            f.update({"phase": phase, "exit": "none"})
        else:
            raise s.error(f"phase {phase!r} cannot be mapped", "phase")
        if s.has("binding"):
            b = s.sub("binding")
            if self.source(b.sub("source")) != src:
                raise b.error("the binding's source is not the transaction's", "source")
            f.update({"candidate": b.req("candidate_id", str), "base": b.req("base_commit_oid", str)})
            b.finish()
        if s.has("hold_reason"):
            reason = s.req("hold_reason", str)
            if reason not in V2_HOLD_REASONS:
                raise s.error(f"hold reason {reason!r} cannot be mapped", "hold_reason")
            f.update({"reason": V2_HOLD_REASONS[reason], "plan": {"way": "hold", "action": "await-operator"}})
        cids = s.req("evidence_cids", dict)
        for ph, cid in cids.items():
            if self.applied_evidence.get(ph) != cid:
                raise s.error(f"evidence cid {cid!r} for phase {ph!r} is not the evidence of the applied "
                              "request that made that edge", "evidence_cids")
        if set(cids) != set(self.applied_evidence):
            raise s.error("evidence_cids do not list every applied edge", "evidence_cids")
        requests = s.req("requests", dict)
        applied = {k for k, d in self.tx.first.items() if d["decision"] == "applied"}
        if set(requests) != applied:
            raise s.error(f"requests {sorted(requests)} are not the applied keys {sorted(applied)}", "requests")
        s.finish()
        return f, dict(self.tx.first)

