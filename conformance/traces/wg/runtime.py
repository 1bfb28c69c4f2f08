"""The production reducer's cases (``formal/fixtures/runtime/v1``): one file, one attempt's
capability, seven cases of (owner proven dead, completion receipted, transaction phase) with
the rank and pending action the reducer gives.

Each mapped case becomes a trace that dispatches the attempt, drives its SaveTransaction to
the phase the case names (or only receipts the owner's completion, ``receipt-completion``,
where the case has a receipt and no transaction), and ends with the owner's death (the
crash) or, for a live owner, the daemon's probe: the expected plan is the pending action,
the expected recovery rank the reducer's rank (replay with ``--crash-cuts`` crashes the
implementation at every durable boundary on the way):

| case (phase, receipt, owner) | situation written | rank -> recovery-rank | pending -> plan |
| --- | --- | --- | --- |
| crash_before_receipt (none, no, dead) | an edit, the owner dies, the daemon probes it | await_receipt -> 0 | resume_same_session -> wait resume |
| incident_receipt_no_transaction (none, yes, dead) | an edit, the wrapper receipts the completion (receipt-completion), the owner dies, the daemon probes it | receipt_no_transaction -> 0 (completion-receipt set, phase absent) | resume_same_session -> wait resume |
| live_wrapper_waits_for_handoff (none, yes, live) | an edit, the wrapper receipts the completion, the daemon probes the live owner | receipt_no_transaction -> 0 (completion-receipt set, phase absent) | wait_for_receipt -> live-owner await-handoff |
| crash_after_transaction (merge-pending, yes, dead) | the disposition recorded (land) | transaction_durable -> 1 | promote -> scheduled drive-transaction |
| crash_after_promotion (promoted, yes, dead) | the effect committed | promoted -> 2 | cleanup -> scheduled drive-transaction |
| crash_after_cleanup (cleaned, yes, dead) | the cleanup committed | cleaned -> 2 | complete -> scheduled drive-transaction |
| stale_unrelated_wrapper (promoted, yes, dead; another wrapper's identity) | the effect committed, then a heartbeat with the attempt's K from a wrapper without the attempt's token | promoted -> 2 | reject_stale -> rejected token-mismatch; the plan stays scheduled drive-transaction |

The capability's identity digests become the owner's session; its epochs the
owner's. ``deadline_unix`` is the reducer's wall-clock retry deadline (``now_unix``
+ 5); the model's clock is logical, so it is kept in the description, not compared.

WG's two ranks before the transaction, ``await_receipt`` and ``receipt_no_transaction``,
are both our recovery rank 0 (nothing in flight); they differ in the fact
``completion-receipt`` (null, or the receipted content), which the traces compare too.
"""
from __future__ import annotations

from pathlib import Path

from wgk.conformance.traces.format import Trace
from wgk.conformance.traces.wg.common import V1_COMMIT, Src, Unmapped
from wgk.conformance.traces.wg.scenario import Scenario

CAP_FIELDS = ("task_id", "generation", "attempt_id", "fence", "wrapper_epoch", "child_epoch",
              "wrapper_identity_digest", "child_identity_digest", "owned_child")
#: case name -> (transaction phase, receipted, owner dead, rank, pending, last finish step or None,
#: recovery rank, plan)
CASES = {
    "crash_before_receipt": (None, False, True, "await_receipt", "resume_same_session", None, 0,
                             {"way": "wait", "action": "resume"}),
    "crash_after_transaction": ("merge-pending", True, True, "transaction_durable", "promote",
                                "record-disposition", 1, {"way": "scheduled", "action": "drive-transaction"}),
    "crash_after_promotion": ("promoted", True, True, "promoted", "cleanup", "commit-effect", 2,
                              {"way": "scheduled", "action": "drive-transaction"}),
    "crash_after_cleanup": ("cleaned", True, True, "cleaned", "complete", "commit-cleanup", 2,
                            {"way": "scheduled", "action": "drive-transaction"}),
    "stale_unrelated_wrapper": ("promoted", True, True, "promoted", "reject_stale", "commit-effect", 2,
                                {"way": "scheduled", "action": "drive-transaction"}),
    "incident_receipt_no_transaction": (None, True, True, "receipt_no_transaction", "resume_same_session",
                                        None, 0, {"way": "wait", "action": "resume"}),
    "live_wrapper_waits_for_handoff": (None, True, False, "receipt_no_transaction", "wait_for_receipt",
                                       None, 0, {"way": "live-owner", "action": "await-handoff"}),
}
#: the only field of a presented capability that may differ from the attempt's (stale_unrelated_wrapper)
FOREIGN_FIELD = "wrapper_identity_digest"
UNMAPPED: dict[str, tuple[str, str]] = {}


class Runtime:
    def __init__(self, doc: dict, file: str):
        self.file = file
        self.src = Src(doc, "", file)

    def capability(self, c: Src) -> dict:
        out = {f: c.req(f) for f in CAP_FIELDS}
        c.finish()
        return out

    def run(self):
        s = self.src
        s.const("reducer_version", 1)
        cap = self.capability(s.sub("capability"))
        traces, unmapped = [], []
        for n, c in enumerate(s.items("cases")):
            name = c.req("name", str)
            presented = self.capability(c.sub("presented_capability")) if c.has("presented_capability") else cap
            dead, receipted = c.req("owner_proven_dead", bool), c.req("completion_receipted", bool)
            phase, now = c.req("transaction_phase"), c.req("now_unix", int)
            e = c.sub("expected")
            e.const("reducer_version", 1)
            rank, pending, deadline = e.req("rank", str), e.req("pending_action", str), e.req("deadline_unix")
            e.finish()
            c.finish()
            if name in UNMAPPED:
                unmapped.append(Unmapped(self.file, name, f"cases/{n}/{UNMAPPED[name][0]}", UNMAPPED[name][1]))
                continue
            if name not in CASES:
                unmapped.append(Unmapped(self.file, name, f"cases/{n}/name", "case not known to the importer"))
                continue
            foreign = sorted(f for f in CAP_FIELDS if presented[f] != cap[f])
            if foreign != ([FOREIGN_FIELD] if name == "stale_unrelated_wrapper" else []):
                unmapped.append(Unmapped(self.file, name, f"cases/{n}/presented_capability",
                                         "only another wrapper's identity with the attempt's K is mapped "
                                         "(stale_unrelated_wrapper)"))
                continue
            want_phase, want_receipt, want_dead, want_rank, want_pending, last, rr, plan = CASES[name]
            got = {"transaction_phase": phase, "completion_receipted": receipted, "owner_proven_dead": dead,
                   "expected/rank": rank, "expected/pending_action": pending}
            want = dict(zip(got, (want_phase, want_receipt, want_dead, want_rank, want_pending)))
            bad = [f for f in got if got[f] != want[f]]
            if bad:
                unmapped.append(Unmapped(self.file, name, f"cases/{n}/{bad[0]}",
                                         f"{got[bad[0]]!r}: only {want[bad[0]]!r} is mapped for this case"))
                continue
            traces.append((name, self.trace(n, name, cap, (phase, receipted, dead), now, rank, pending,
                                            deadline, last, rr, plan, presented if presented != cap else None)))
        s.finish()
        return traces, unmapped

    def trace(self, n, name, cap, situation, now, rank, pending, deadline, last, rr, plan, foreign) -> Trace:
        phase, receipted, dead = situation
        task = cap["task_id"]
        sc = Scenario("wg-runtime", {"pointer": f"/cases/{n}", "event": name,
                                     "decision": {"rank": rank, "pending_action": pending}},
                      f"wg-runtime-v1:{name}")
        sc.task(task)
        sc.dispatch(task, session=cap["wrapper_identity_digest"].replace(":", "."))
        receipt = None
        if last is None:
            sc.env("edit", task=task, content=f"{task}-half")
        else:
            sc.finish_until(task, last, f"{task}-candidate")
        if receipted and last is None:
            receipt = f"{task}-half"
            sc.request("receipt-completion", "wrapper", task, candidate=receipt,
                       note="the wrapper receipts its child's finish; no transaction opens")
        if dead:
            sc.env("owner-dies", task=task, note="the crash: the owner (wrapper and child) is gone")
        if last is None:
            sc.env("converge", note="the daemon probes the owner: " + ("proven dead" if dead else "alive"))
        seen = ("dead" if dead else "live") if last is None else "unverified"
        facts = {"plan": plan, "recovery-rank": rr, "owner-seen": seen}
        if last is None:
            facts.update({"completion-receipt": receipt, "phase": "absent", "status": "in-progress"})
        if foreign is not None:
            step = sc.request("heartbeat", "wrapper", task, "rejected", token="tok-unrelated-wrapper",
                              note=f"an unrelated wrapper ({foreign[FOREIGN_FIELD]}) presents the attempt's K "
                                   "without the attempt's capability token")
            step["expect"] = {"decision": "rejected", "code": "token-mismatch"}
            facts["promotions"] = 1
        name_path = Path(self.file).name
        return Trace(
            id="wg-runtime-v1-" + name.replace("_", "-"),
            title=f"WG runtime reducer v1: {name.replace('_', ' ')}",
            source={"kind": "peer-fixture", "file": f"fixtures/wg/runtime/v1/{name_path}",
                    "provenance": f"graphwork/wg {V1_COMMIT} formal/fixtures/runtime/v1/{name_path} "
                                  f"(production reducer, case {name}), translated by wgk import-wg"},
            description=(f"The peer's reducer case {name}: {cap['attempt_id']} fence {cap['fence']} "
                         f"(wrapper {cap['wrapper_identity_digest']}, child {cap['child_identity_digest']}), "
                         f"transaction phase {phase}, completion {'receipted' if receipted else 'not receipted'}, "
                         f"owner {'proven dead' if dead else 'alive'}, at {now}: rank {rank} (our "
                         f"recovery rank {rr}), pending {pending} (our plan {plan['way']} "
                         f"{plan['action']}), retry deadline {deadline} (wall clock, not compared)."),
            graph=sc.graph(), steps=sc.steps,
            expect={"tasks": {task: facts}},
        )
