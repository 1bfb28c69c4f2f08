"""Translate the peer's golden vectors (graphwork/wg fixtures) into ``wgk-trace/1``.

Three families (``../shared/fixtures/wg/``): finish wire **v1** (15 files),
SaveTransaction schema **v2** (5) and the single-kernel **deletion map** (8).
Every expected decision and every expected final fact is kept, translated into
our vocabulary; the source file and a JSON pointer per step are kept in the
trace (``source.file``, ``steps[].from``). A field or event the importer cannot
map is an error naming the file, the JSON pointer and the field: every field of
every source object is either translated, or checked against what the trace
already says (and then named in the table below); nothing is dropped.

Idempotency keys: a v1 event has none, so each gets a stable key derived from
its content, ``wg:<type>:<sha256 of the canonical event, 12 hex>/<our kind>``:
an identical re-delivered event is a duplicate. v2 and deletion-map requests
keep their keys (``<key>/<our kind>`` when one request becomes several).

One source event may become several of our steps; the CAS fields
(expected phase and revision) are those a well-behaved client knows from the
responses it was given, i.e. from the fixture's own expected decisions.

v1 (finish wire version 1)
--------------------------

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

Callers: ``task_id`` -> task, ``generation``, ``attempt_id`` ``attempt-<g>-<n>``
-> attempt n (g must equal ``generation``), ``fence``; the lease epoch of K is
1 when the caller's whole record equals the worktree-lease holder's record, 0
otherwise (v1 has no lease epoch: its lease *is* the owner record).
``wrapper_identity_digest`` -> session, ``child_identity_digest`` -> pid (4001,
4002, ... in order of appearance), ``child_epoch`` -> birth and child epoch,
``wrapper_epoch`` -> wrapper epoch; ``owned_child`` must be true. The graph is
``wg-v1`` with the one task; the target starts at the first ``base_cas`` seen.

Decisions: ``applied`` -> applied (every step of the event); ``rejected`` with
``stale_capability`` / ``cas_moved`` -> that rejection on the event's first
request (the client sends nothing after a rejection); ``noop`` -> ``duplicate``
(with the original decision) of every request of an identical event delivered
before, ``evidence-only`` for a first ``message`` or ``ownership_contention``,
an env step for ``crash``.

Facts (``initial`` and ``expected_final``): ``phase`` running -> attempt-state
running, done -> attempt-state succeeded, status done, phase graph-saved;
``owner`` -> owner (as above) or null; ``worktree_lease`` / ``session_lease`` /
``finish_lease`` -> ``leases`` (a lease record must equal the owner record);
``pending_action`` null -> plan way live-owner (running) or no plan (done),
``promote`` -> plan way scheduled (our planner names the action after what
convergence does: drive-transaction, or mark-repair once the target moved);
``action_deadline`` -> deadline (null -> 0); ``candidate`` -> candidate, base and
the work-save, candidate and validation receipts; ``accepted_candidate`` -> the
review receipt; ``finish_tx`` -> disposition, the disposition receipt,
``promotion_receipt`` -> the effect receipt, ``cleanup_committed`` -> the cleanup
receipt; ``promotion_count`` -> promotions; ``breaker_charges`` -> counters
provider-failures (what the breaker charges); ``inert_messages`` -> counters
messages; ``dependency_satisfied``; ``recovery_rank``. ``settled`` and
``owner_proven_dead`` (initial only) -> the owner alive / owner-seen dead.

v2 (SaveTransaction schema 2)
-----------------------------

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

Deletion map (single-kernel replays)
------------------------------------

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
and ``continuation_ids`` -> the evidence entries of kinds probe, eof,
provider-failure, compaction and continuation, exactly; ``holds`` -> exit none,
``assignment-required`` -> plan runnable assign; ``assignment_receipt`` ->
assigned; ``provider_failure_count`` -> counters provider-failures. The
descriptive parts (incident, source evidence, current trace, contradiction,
invariants, notes) become the description and step notes.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from wgk.model.vocab import EDGES, Kind, NEEDS_CAPABILITY, TRANSACTION_KINDS

from wgk.conformance.traces.format import Trace

V1_COMMIT = "b0892ea7"
FAMILIES = ("v1", "v2", "deletion-map")
FAMILY_PATHS = {
    "v1": "formal/fixtures/v1",
    "v2": "formal/fixtures/v2",
    "deletion-map": "docs/research/traces/wg-control-plane-authority-deletion-map",
}
PHASE_AFTER = {to.label: kind.label for kind, (_, to) in EDGES.items()}


class WgImportError(ValueError):
    """A source field or event that cannot be mapped: ``file: /pointer: message``."""

    def __init__(self, file: str, at: str, message: str):
        super().__init__(f"{file}: {at or '/'}: {message}")
        self.file = file
        self.at = at


# --- reading source objects, field by field ------------------------------------------------


class Src:
    """A source object whose every field must be consumed: ``finish()`` names the first unmapped one."""

    def __init__(self, value: Any, at: str, file: str):
        self.value = value
        self.at = at
        self.file = file
        self.used: set[str] = set()
        if not isinstance(value, dict):
            raise self.error("expected an object")

    def error(self, message: str, key: str | None = None) -> WgImportError:
        at = self.at + ("/" + key if key is not None else "")
        return WgImportError(self.file, at, message)

    def has(self, key: str) -> bool:
        return key in self.value

    def get(self, key: str, default: Any = None) -> Any:
        self.used.add(key)
        return self.value.get(key, default)

    def req(self, key: str, kind: type | tuple | None = None) -> Any:
        if key not in self.value:
            raise self.error(f"field {key!r} is missing", key)
        self.used.add(key)
        v = self.value[key]
        if kind is not None and not isinstance(v, kind):
            raise self.error(f"field {key!r} has an unexpected value {v!r}", key)
        return v

    def const(self, key: str, expected: Any) -> None:
        v = self.req(key)
        if v != expected:
            raise self.error(f"field {key!r} is {v!r}; only {expected!r} can be mapped", key)

    def sub(self, key: str) -> "Src":
        return Src(self.req(key), f"{self.at}/{key}", self.file)

    def items(self, key: str) -> list["Src"]:
        seq = self.req(key, list)
        return [Src(v, f"{self.at}/{key}/{i}", self.file) for i, v in enumerate(seq)]

    def finish(self) -> None:
        extra = [k for k in self.value if k not in self.used]
        if extra:
            raise self.error(f"field {extra[0]!r} cannot be mapped", extra[0])


def _merge(facts: dict, more: dict, err: Callable[[str], WgImportError], path: str = "") -> dict:
    """Merge nested fact dicts; the same fact with two different values is an error."""
    for k, v in more.items():
        if k in facts and isinstance(facts[k], dict) and isinstance(v, dict) \
                and not any(m in v for m in ("$kinds", "$contains")):
            _merge(facts[k], v, err, f"{path}.{k}")
        elif k in facts and facts[k] != v:
            raise err(f"conflicting facts for {path}.{k}: {facts[k]!r} and {v!r}")
        else:
            facts[k] = v
    return facts


def content_key(value: Any) -> str:
    raw = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(raw).hexdigest()[:12]


def _dec(decision: str, code: str | None = None) -> dict:
    return {"decision": decision, "code": code} if code else {"decision": decision}


def _dup(original: dict) -> dict:
    return {"decision": "duplicate", "original": original}


def _binding(fence: int, candidate: str, base: str) -> dict:
    return {"fence": fence, "candidate": candidate, "base": base}


# --- shared trace-writing state ------------------------------------------------------------------


@dataclass
class Tx:
    """What a well-behaved client knows from the responses it was given."""

    task: str
    graph: str
    k: dict
    phase: str = "absent"
    revision: int = 0
    target: str = "main-0"
    worktree: str = "main-0"
    candidate: str | None = None
    base: str | None = None
    disposition: str | None = None
    steps: list[dict] = field(default_factory=list)
    first: dict[str, dict] = field(default_factory=dict)   # key -> first decision

    def cap(self, **override: Any) -> dict:
        return {"graph": self.graph, "task": self.task, **self.k, **override}

    def request(self, kind: str, actor: str, key: str, cap: dict | None = None, **params: Any) -> dict:
        r: dict[str, Any] = {"kind": kind, "actor": actor, "task": self.task, "key": key}
        k = Kind.parse(kind)
        if k in NEEDS_CAPABILITY:
            r["cap"] = cap if cap is not None else self.cap()
        if k in TRANSACTION_KINDS:
            r["expected-phase"] = self.phase
            r["expected-revision"] = self.revision
        for name, value in params.items():
            if value is not None:
                r[name.replace("_", "-")] = value
        return r

    def emit(self, step: dict, expect: dict | None, origin: dict) -> dict:
        if expect is not None:
            step["expect"] = expect
        step["from"] = origin
        self.steps.append(step)
        if "request" in step and expect is not None:
            key = step["request"]["key"]
            self.first.setdefault(key, expect)
            if expect["decision"] == "applied":
                self.advance(step["request"])
        return step

    def advance(self, r: dict) -> None:
        """An applied request: move the transaction as the client will have seen it."""
        k = Kind.parse(r["kind"])
        if k in EDGES:
            self.phase = EDGES[k][1].label
            self.revision += 1
        if k == Kind.SAVE_WORK:
            self.candidate, self.base = r["candidate"], r["base"]
        if k == Kind.RECORD_DISPOSITION:
            self.disposition = r["disposition"]
        if k == Kind.COMMIT_EFFECT and self.disposition == "land":
            self.target = r["candidate"]
        if k == Kind.LEGACY_DONE:
            self.phase, self.revision = "needs-reconciliation", self.revision + 1


def _origin(at: str, event: str, decision: Any) -> dict:
    return {"pointer": at, "event": event, "decision": decision}


def _task_spec(name: str, requires_assignment: bool = False) -> dict:
    return {"name": name, "deps": [], "review-required": False, "requires-assignment": requires_assignment}


# --- v1 ----------------------------------------------------------------------------------------

V1_GRAPH = "wg-v1"
V1_OWNER_FIELDS = ("task_id", "generation", "attempt_id", "fence", "wrapper_epoch", "child_epoch",
                   "wrapper_identity_digest", "child_identity_digest", "owned_child")
V1_REJECT = {"stale_capability": "stale-capability", "cas_moved": "cas-moved"}


@dataclass
class V1Identity:
    """How v1 owner records map to our owners (pids assigned in order of appearance)."""

    pids: dict[str, int] = field(default_factory=dict)

    def pid(self, child_digest: str) -> int:
        return self.pids.setdefault(child_digest, 4001 + len(self.pids))


class V1:
    def __init__(self, doc: dict, file: str):
        self.file = file
        self.src = Src(doc, "", file)
        self.ids = V1Identity()
        self.delivered: dict[str, list[dict]] = {}     # event content -> its request steps

    def record(self, s: Src) -> dict:
        """A v1 owner/caller/lease record, checked field by field."""
        out = {f: s.req(f) for f in V1_OWNER_FIELDS}
        s.finish()
        if out["owned_child"] is not True:
            raise s.error("field 'owned_child' is false: an owner without its child cannot be mapped",
                          "owned_child")
        m = re.fullmatch(r"attempt-(\d+)-(\d+)", str(out["attempt_id"]))
        if not m or int(m.group(1)) != out["generation"]:
            raise s.error(f"field 'attempt_id' {out['attempt_id']!r} is not attempt-<generation>-<n>",
                          "attempt_id")
        out["attempt"] = int(m.group(2))
        return out

    def owner_of(self, rec: dict) -> dict:
        return {"pid": self.ids.pid(rec["child_identity_digest"]), "birth": rec["child_epoch"],
                "session": rec["wrapper_identity_digest"], "wrapper-epoch": rec["wrapper_epoch"],
                "child-epoch": rec["child_epoch"]}

    def caller_cap(self, rec: dict) -> dict:
        same = all(rec[f] == self.holder[f] for f in V1_OWNER_FIELDS)
        return {"graph": V1_GRAPH, "task": rec["task_id"], "generation": rec["generation"],
                "attempt": rec["attempt"], "fence": rec["fence"], "lease-epoch": 1 if same else 0}

    # initial state
    def seed(self, s: Src) -> tuple[str, dict]:
        s.const("wire_version", 1)
        s.const("phase", "running")
        owner = self.record(s.sub("owner"))
        for lease in ("worktree_lease", "session_lease"):
            if self.record(s.sub(lease)) != owner:
                raise s.error(f"field {lease!r} is held by another identity than the owner", lease)
        for key, value in (("finish_lease", None), ("pending_action", None), ("action_deadline", None),
                           ("candidate", None), ("accepted_candidate", None), ("finish_tx", None),
                           ("promotion_count", 0)):
            s.const(key, value)
        settled = s.req("settled", bool)
        dead = s.req("owner_proven_dead", bool)
        charges = s.req("breaker_charges", int)
        inert = s.req("inert_messages", int)
        s.finish()
        self.holder = owner
        seed = {"attempt": {
            "generation": owner["generation"], "attempt": owner["attempt"], "fence": owner["fence"],
            "lease-epoch": 1, "state": "running", "owner": self.owner_of(owner), "alive": not settled,
            "owner-seen": "dead" if dead else "unverified",
            "leases": {"worktree": True, "session": True, "finish": False},
        }}
        counters = {k: v for k, v in (("provider-failures", charges), ("messages", inert)) if v}
        if counters:
            seed["counters"] = counters
        return owner["task_id"], seed

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
            graph={"id": V1_GRAPH, "target": base, "tasks": [_task_spec(task)]},
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
        origin = _origin(at, kind, dec.value)
        ckey = json.dumps(raw, sort_keys=True)
        if status == "noop" and ckey in self.delivered:
            for step in self.delivered[ckey]:
                self.tx.emit({"request": dict(step["request"])}, _dup(step["expect"]), origin)
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
                expects = [_dec("evidence-only")] * len(requests)
            else:
                raise dec.error(f"noop for a first {kind!r} event cannot be mapped", "status")
        elif status == "applied":
            expects = [_dec("applied")] * len(requests)
        else:
            expects = [_dec("rejected", code)]
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

    def _candidate(self, s: Src) -> tuple[str, str, bool]:
        cid, base, free = s.req("id", str), s.req("base_cas", str), s.req("protected_free", bool)
        s.finish()
        return cid, base, free

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
    def final(self, s: Src) -> dict:
        s.const("wire_version", 1)
        phase = s.req("phase", str)
        f: dict[str, Any] = {}
        err = s.error
        if phase == "running":
            f["attempt-state"] = "running"
        elif phase == "done":
            f.update({"status": "done", "attempt-state": "succeeded", "phase": "graph-saved"})
        else:
            raise err(f"phase {phase!r} cannot be mapped", "phase")
        owner = None if s.get("owner") is None else self.record(s.sub("owner"))
        f["owner"] = None if owner is None else self.owner_of(owner)
        leases = {}
        for key, name in (("worktree_lease", "worktree"), ("session_lease", "session"), ("finish_lease", "finish")):
            if s.get(key) is None:
                leases[name] = False
                continue
            if self.record(s.sub(key)) != owner:
                raise err(f"field {key!r} is held by another identity than the owner", key)
            leases[name] = True
        f["leases"] = leases
        pending = s.get("pending_action")
        if pending == "promote":
            f["plan"] = {"way": "scheduled"}
        elif pending is None:
            f["plan"] = None if phase == "done" else {"way": "live-owner"}
        else:
            raise err(f"pending action {pending!r} cannot be mapped", "pending_action")
        deadline = s.get("action_deadline")
        f["deadline"] = 0 if deadline is None else deadline
        if isinstance(f["plan"], dict) and deadline is not None:
            f["plan"]["deadline"] = deadline
        fence = self.tx.k["fence"]
        receipts: dict[str, Any] = {}
        cand = None if s.get("candidate") is None else self._candidate(s.sub("candidate"))
        if cand is None:
            f.update(candidate=None, base=None)
            receipts.update({"work-save": None, "candidate": None, "validation": None})
        else:
            f.update(candidate=cand[0], base=cand[1])
            b = _binding(fence, cand[0], cand[1])
            receipts.update({"work-save": b, "candidate": b, "validation": b})
        acc = None if s.get("accepted_candidate") is None else self._candidate(s.sub("accepted_candidate"))
        receipts["review"] = None if acc is None else _binding(fence, acc[0], acc[1])
        ftx = s.get("finish_tx")
        if ftx is None:
            f["disposition"] = "none"
            receipts.update({"disposition": None, "effect": None, "cleanup": None})
        else:
            t = s.sub("finish_tx")
            tc = self._candidate(t.sub("candidate"))
            b = _binding(fence, tc[0], tc[1])
            f["disposition"] = t.req("disposition", str)
            receipts["disposition"] = b
            receipts["effect"] = b if t.req("promotion_receipt", bool) else None
            receipts["cleanup"] = b if t.req("cleanup_committed", bool) else None
            t.finish()
        receipts["graph-save"] = _binding(fence, cand[0], cand[1]) if phase == "done" and cand else None
        f["receipts"] = receipts
        f["promotions"] = s.req("promotion_count", int)
        f["counters"] = {"provider-failures": s.req("breaker_charges", int),
                         "messages": s.req("inert_messages", int)}
        f["dependency-satisfied"] = s.req("dependency_satisfied", bool)
        f["recovery-rank"] = s.req("recovery_rank", int)
        s.finish()
        return f


# --- v2 ----------------------------------------------------------------------------------------

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

    def first_binding(self, steps: list) -> tuple[str, str] | None:
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
        bound = self.first_binding(s.value.get("steps", []))
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
            graph={"id": a["graph_id"], "target": target, "tasks": [_task_spec(task)]},
            initial={task: seed}, steps=self.tx.steps, expect={"tasks": {task: final[0]}, "journal": final[1]},
        )

    def expected(self, e: Src, key: str) -> dict:
        status, code = e.req("status", str), e.get("code")
        e.finish()
        if status == "applied" and code is None:
            return _dec("applied")
        if status == "duplicate" and code is None:
            if key not in self.tx.first:
                raise e.error(f"a duplicate of key {key!r} that was never sent cannot be mapped", "status")
            return _dup(self.tx.first[key])
        if status == "rejected" and code in V2_REJECT:
            return _dec("rejected", V2_REJECT[code])
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
        origin = _origin(st.at, f"{exp_phase} -> {nxt}", st.value["expected"])
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


# --- deletion map -----------------------------------------------------------------------------

DM_GRAPH = "wg-single-kernel"
DM_TASK = "task-a"
DM_OWNER = {"pid": 4242, "birth": 9, "session": "session-4", "wrapper-epoch": 1, "child-epoch": 1}
DM_APPLIED = ("applied", "applied-response-recorded", "applied-one-reconciliation-effect", "issue-one-effect")
DM_DUPLICATE = ("duplicate-noop", "duplicate-replay-original-response", "duplicate-same-rejection")
DM_REJECT = {"reject-stale-attempt": "stale-capability", "reject-assignment-required": "assignment-required"}
DM_OBSERVATION_KINDS = ["probe", "eof", "provider-failure", "compaction", "continuation"]
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
            graph={"id": DM_GRAPH, "target": "main-0", "tasks": [_task_spec(DM_TASK, assignment)]},
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
            return _dec("applied")
        if word == "evidence-only":
            return _dec("evidence-only")
        if word in DM_DUPLICATE:
            if key not in self.tx.first:
                raise st.error(f"a duplicate of key {key!r} that was never sent cannot be mapped", "decision")
            return _dup(self.tx.first[key])
        if word in DM_REJECT:
            return _dec("rejected", DM_REJECT[word])
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
        origin = _origin(st.at, kind, word)
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
            expects = [_dup(self.tx.first[q["request"]["key"]]) for q in steps]
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
        _merge(f, dict(table[phase]), err)
        terminal = s.get("terminal")
        if terminal is not None:
            m = re.fullmatch(r"succeeded:(.+)", str(terminal))
            if not m:
                raise s.error(f"terminal {terminal!r} cannot be mapped", "terminal")
            _merge(f, {"attempt-state": "succeeded", "candidate": m.group(1)}, err)
        elif phase == "done":
            raise s.error("a done attempt without a terminal cannot be mapped", "terminal")
        journal = {}
        for key, value in s.req("requests", dict).items():
            if value != "completed:ok":
                raise s.error(f"request state {value!r} cannot be mapped", "requests")
            subs = [k for k in self.tx.first if k == key or k.startswith(key + "/")] or [key]
            journal.update({k: _dec("applied") for k in subs})
        effects = s.req("effect_ids", list)
        counts = {"logs": 0, "continuations": 0}
        promotions = 0
        for e in effects:
            if e.startswith("log:"):
                counts["logs"] += 1
            elif e.startswith(f"continue:{self.attempt_id}:process-"):
                counts["continuations"] += 1
            elif e == f"reconcile-disposition:{self.attempt_id}":
                _merge(f, {"plan": {"way": "scheduled", "action": "declare-lost"}}, err)
            elif e.startswith("publish:"):
                promotions += 1
                _merge(f, {"receipts": {"effect": {"candidate": e[len("publish:"):]}}}, err)
            else:
                raise s.error(f"effect id {e!r} cannot be mapped", "effect_ids")
        _merge(f, {"promotions": promotions}, err)
        entries = [self.observation(s, o) for o in s.req("observation_ids", list)]
        continuations = s.req("continuation_ids", list)
        entries += [["continuation", c] for c in continuations]
        if len(continuations) != counts["continuations"]:
            raise s.error("continuation ids and continue effects disagree", "continuation_ids")
        f["evidence"] = {"$kinds": list(DM_OBSERVATION_KINDS), "$exactly": entries}
        holds = s.req("holds", list)
        _merge(f, {"exit": "none"}, err)
        for h in holds:
            if h != "assignment-required":
                raise s.error(f"hold {h!r} cannot be mapped", "holds")
            _merge(f, {"plan": {"way": "runnable", "action": "assign"}}, err)
        _merge(f, {"assigned": s.get("assignment_receipt") is not None}, err)
        counts["provider-failures"] = s.req("provider_failure_count", int)
        f["counters"] = counts
        s.finish()
        return f, journal

    def observation(self, s: Src, o: str) -> list:
        for prefix, kind in (("pid:", "probe"), ("child-exit:", "probe"), ("observer-eof:", "eof"),
                             ("provider-failure:", "provider-failure")):
            if o.startswith(prefix):
                return [kind, o]
        m = re.fullmatch(r"compaction:[^:]+:(.+)", o)
        if m:
            return ["compaction", m.group(1)]
        raise s.error(f"observation id {o!r} cannot be mapped", "observation_ids")


# --- entry points -----------------------------------------------------------------------------


def family_of(doc: Any) -> str | None:
    if not isinstance(doc, dict):
        return None
    if doc.get("wire_version") == 1:
        return "v1"
    if doc.get("schema_version") == 2:
        return "v2"
    if doc.get("trace_schema") == "wg-single-attempt-deletion-audit/v1":
        return "index" if "single_kernel_replay" not in doc and "traces" in doc else "deletion-map"
    return None


TRANSLATORS = {"v1": V1, "v2": V2, "deletion-map": DeletionMap}


@dataclass(frozen=True)
class Imported:
    """One translated source file: its family and the trace."""

    source: Path
    family: str
    trace: Trace

    def out_path(self, out_dir: Path) -> Path:
        return out_dir / self.family / (self.source.stem + ".json")


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise WgImportError(str(path), "", f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except OSError as e:
        raise WgImportError(str(path), "", f"cannot read: {e.strerror}") from None


def check_index(path: Path, doc: dict) -> None:
    """A deletion-map ``index.json`` lists the trace files: each must exist beside it."""
    s = Src(doc, "", str(path))
    s.const("trace_schema", "wg-single-attempt-deletion-audit/v1")
    s.req("source_revision", str)
    s.req("credential_free", bool)
    names = s.req("traces", list)
    if s.req("incident_count", int) != len(names):
        raise s.error("incident_count is not the number of traces", "incident_count")
    s.finish()
    for i, name in enumerate(names):
        if not (path.parent / name).is_file():
            raise WgImportError(str(path), f"/traces/{i}", f"listed trace {name!r} does not exist")


def import_file(path: str | Path) -> Imported | None:
    """Translate one fixture file (None for a deletion-map index, which is only checked)."""
    p = Path(path)
    doc = read_json(p)
    family = family_of(doc)
    if family is None:
        raise WgImportError(str(p), "", "not a WG fixture: no wire_version 1, schema_version 2 or "
                                        "deletion-map trace_schema")
    if family == "index":
        check_index(p, doc)
        return None
    trace = TRANSLATORS[family](doc, str(p)).run()
    return Imported(p, family, trace)


def source_files(paths: list[str | Path]) -> list[Path]:
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out += sorted(p.rglob("*.json"))
        elif p.is_file():
            out.append(p)
        else:
            raise WgImportError(str(raw), "", "no such file or directory")
    return out


def import_paths(paths: list[str | Path]) -> list[Imported]:
    """Translate every fixture under ``paths`` (files, or directories searched for ``*.json``)."""
    out = []
    for f in source_files(paths):
        imported = import_file(f)
        if imported is not None:
            out.append(imported)
    return out
