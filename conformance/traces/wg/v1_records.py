"""Owner records and expected facts of the v1 family (finish wire version 1).

Callers: ``task_id`` -> task, ``generation``, ``attempt_id`` ``attempt-<g>-<n>``
-> attempt n (g must equal ``generation``), ``fence``; the lease epoch of K is
1 when the caller's whole record equals the worktree-lease holder's record, 0
otherwise (v1 has no lease epoch: its lease *is* the owner record).
``wrapper_identity_digest`` -> session, ``child_identity_digest`` -> pid (4001,
4002, ... in order of appearance), ``child_epoch`` -> birth and child epoch,
``wrapper_epoch`` -> wrapper epoch; ``owned_child`` must be true. The graph is
``wg-v1`` with the one task; the target starts at the first ``base_cas`` seen.

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
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from wgk.conformance.traces.wg.common import Src, Tx, binding_of

V1_GRAPH = "wg-v1"
V1_OWNER_FIELDS = ("task_id", "generation", "attempt_id", "fence", "wrapper_epoch", "child_epoch",
                   "wrapper_identity_digest", "child_identity_digest", "owned_child")


@dataclass
class V1Identity:
    """How v1 owner records map to our owners (pids assigned in order of appearance)."""

    pids: dict[str, int] = field(default_factory=dict)

    def pid(self, child_digest: str) -> int:
        return self.pids.setdefault(child_digest, 4001 + len(self.pids))


class V1Records:
    """The owner records of one v1 file, and its initial and expected final facts."""

    tx: Tx
    holder: dict

    def __init__(self, doc: dict, file: str):
        self.file = file
        self.src = Src(doc, "", file)
        self.ids = V1Identity()

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

    def _candidate(self, s: Src) -> tuple[str, str, bool]:
        cid, base, free = s.req("id", str), s.req("base_cas", str), s.req("protected_free", bool)
        s.finish()
        return cid, base, free

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
        self._final_receipts(s, f, phase)
        f["promotions"] = s.req("promotion_count", int)
        f["counters"] = {"provider-failures": s.req("breaker_charges", int),
                         "messages": s.req("inert_messages", int)}
        f["dependency-satisfied"] = s.req("dependency_satisfied", bool)
        f["recovery-rank"] = s.req("recovery_rank", int)
        s.finish()
        return f

    def _final_receipts(self, s: Src, f: dict, phase: str) -> None:
        """Candidate, disposition and the receipts of the expected final facts."""
        fence = self.tx.k["fence"]
        receipts: dict[str, Any] = {}
        cand = None if s.get("candidate") is None else self._candidate(s.sub("candidate"))
        if cand is None:
            f.update(candidate=None, base=None)
            receipts.update({"work-save": None, "candidate": None, "validation": None})
        else:
            f.update(candidate=cand[0], base=cand[1])
            b = binding_of(fence, cand[0], cand[1])
            receipts.update({"work-save": b, "candidate": b, "validation": b})
        acc = None if s.get("accepted_candidate") is None else self._candidate(s.sub("accepted_candidate"))
        receipts["review"] = None if acc is None else binding_of(fence, acc[0], acc[1])
        ftx = s.get("finish_tx")
        if ftx is None:
            f["disposition"] = "none"
            receipts.update({"disposition": None, "effect": None, "cleanup": None})
        else:
            t = s.sub("finish_tx")
            tc = self._candidate(t.sub("candidate"))
            b = binding_of(fence, tc[0], tc[1])
            f["disposition"] = t.req("disposition", str)
            receipts["disposition"] = b
            receipts["effect"] = b if t.req("promotion_receipt", bool) else None
            receipts["cleanup"] = b if t.req("cleanup_committed", bool) else None
            t.finish()
        receipts["graph-save"] = binding_of(fence, cand[0], cand[1]) if phase == "done" and cand else None
        f["receipts"] = receipts
