"""The review-before-publication kernel's scenarios (``formal/fixtures/simple-land/v1``).

WG's normative completion protocol: a worker-owned universal review — one immutable
manifest (requirements, contract, output and validation digests, the integrated main), a
FLIP review and an evaluation recorded on that manifest, publication observed against the
main the manifest integrated, completion. The model's review valve (``model/rules_review``)
holds these as facts of the source task; each case becomes a trace that dispatches the
source worker's attempt and then sends one request per event:

| WG event | our request (sender) | fields |
| --- | --- | --- |
| `submit_manifest` | `submit-manifest` (worker, the attempt's K and token) | `id` → `candidate` `manifest-<id>`, `requirements` → `requirements-<n>`, `contract`, `output_digest` → `output-<n>`, `validation_digest` → `validation-<n>`, `integrated_main` → `base` `main-<n>`, `all_resolvable` → `resolvable`, `protected_free` → `protected-free` |
| `record_flip` | `record-flip` (validator) | `manifest` → `candidate`, `requirements`, `verdict` → `review` (`incomplete_evidence` → `incomplete-evidence`) |
| `record_eval` | `record-eval` (evaluator) | as `record_flip` |
| `publish_observed` | `publish` (promoter) | `manifest` → `candidate`, `observed_main` → `base` `main-<n>`, `succeeded`, `outputs_match` → `outputs-match` |
| `complete` | `complete` (worker, the attempt's K and token) | `manifest` → `candidate`, `outputs_still_resolve` → `resolvable` |
| `fail` | `fail-review` (worker) | `code` → `failure` (only 0, `none`, is mapped) |
| `retry` | `retry-review` (operator) | - |

A digest or main of 0 is WG's "none": the field is left out (0 in the model). WG's
decisions `applied` and `rejected` are ours; its `noop` is our `evidence-only`. WG's
rejections carry no code: the code ours gives is named per case in ``CODES`` (the first of
the contract's conditions that fails, docs/vocabulary.md, "The review valve"), and a
rejection not listed there is reported, never guessed. The expected final state becomes
the task's ``review`` facts (``eval`` → ``evaluation``, ``publication_count`` →
``publications``; a ``failure_code`` other than null is reported).
"""
from __future__ import annotations

from pathlib import Path

from wgk.conformance.traces.format import Trace
from wgk.conformance.traces.wg.common import V1_COMMIT, Src, Unmapped
from wgk.conformance.traces.wg.scenario import Scenario

MANIFEST = ("id", "requirements", "contract", "output_digest", "validation_digest", "integrated_main",
            "all_resolvable", "protected_free")
EVENT_FIELDS = {
    "submit_manifest": ("manifest",),
    "record_flip": ("manifest", "requirements", "verdict"),
    "record_eval": ("manifest", "requirements", "verdict"),
    "publish_observed": ("manifest", "observed_main", "succeeded", "outputs_match"),
    "complete": ("manifest", "outputs_still_resolve"),
    "fail": ("code",),
    "retry": (),
}
FINAL = ("phase", "manifest", "flip", "eval", "publication", "publication_count", "failure_code")
DECISIONS = {"applied": "applied", "rejected": "rejected", "noop": "evidence-only"}
CONTRACTS = ("land", "report", "explore")
VERDICTS = {"pass": "pass", "reject": "reject", "unavailable": "unavailable",
            "incomplete_evidence": "incomplete-evidence", "absent": "absent"}
PHASES = {"working": "working", "review_blocked": "review-blocked",
          "review_unavailable": "review-unavailable", "accepted": "accepted",
          "published": "published", "done": "done", "failed": "failed"}
#: (case, event index) -> the code of our rejection (the first condition that fails)
CODES = {
    ("flip_rejection_blocks_publication", 2): "illegal-phase-edge",   # the valve is review-blocked
    ("moved_main_rejects_land", 3): "main-moved",
}
TASK = "source"


def _name(prefix: str, n) -> str | None:
    return None if n in (0, None) else f"{prefix}-{n}"


class SimpleLand:
    def __init__(self, doc: dict, file: str):
        self.file = file
        self.src = Src(doc, "", file)

    def run(self):
        s = self.src
        s.const("schema_version", 1)
        traces, unmapped = [], []
        for n, c in enumerate(s.items("cases")):
            name = c.req("name", str)
            events = [(e, e.req("type", str)) for e in c.items("events")]
            decisions = c.req("expected_decisions", list)
            if len(decisions) != len(events):
                raise c.error("one expected decision per event", "expected_decisions")
            x = c.sub("expected")
            final = {f: x.req(f) for f in FINAL}
            x.finish()
            sc = Scenario("wg-simple-land", {"pointer": f"/cases/{n}", "event": name}, f"wg-simple-land-v1:{name}")
            sc.task(TASK)
            sc.dispatch(TASK)
            why = None
            for m, (e, kind) in enumerate(events):
                if kind not in EVENT_FIELDS:
                    raise e.error(f"event type {kind!r} cannot be mapped", "type")
                decision = DECISIONS.get(decisions[m])
                if decision is None:
                    raise c.error(f"decision {decisions[m]!r} cannot be mapped", f"expected_decisions/{m}")
                sc.origin = {"pointer": f"/cases/{n}/events/{m}", "event": kind, "decision": decisions[m]}
                params, why = self.params(e, kind, n, m)
                e.finish()
                if why:
                    unmapped.append(Unmapped(self.file, name, why[0], why[1]))
                    break
                step = sc.request(*params["request"], decision, cap=params["cap"], **params["fields"])
                if decision == "rejected":
                    code = CODES.get((name, m))
                    if code is None:
                        why = (f"cases/{n}/expected_decisions/{m}",
                               "a rejection whose code in our vocabulary the importer does not know")
                        unmapped.append(Unmapped(self.file, name, *why))
                        break
                    step["expect"]["code"] = code
            c.finish()
            if why:
                continue
            if final["failure_code"] is not None:
                unmapped.append(Unmapped(self.file, name, f"cases/{n}/expected/failure_code",
                                         "a failure code other than null is not mapped"))
                continue
            traces.append((name, self.trace(n, name, sc, final)))
        s.finish()
        return traces, unmapped

    def params(self, e: Src, kind: str, n: int, m: int):
        """Our request's (kind, actor, task), whether it carries K, and its fields; or why not."""
        at = f"cases/{n}/events/{m}"
        if kind == "submit_manifest":
            ms = e.sub("manifest")
            v = {k: ms.req(k) for k in MANIFEST}
            ms.finish()
            if v["contract"] not in CONTRACTS:
                return None, (f"{at}/manifest/contract", f"{v['contract']!r} is not a contract we know")
            return {"request": ("submit-manifest", "worker", TASK), "cap": True, "fields": {
                "candidate": _name("manifest", v["id"]),
                "requirements": _name("requirements", v["requirements"]),
                "output": _name("output", v["output_digest"]),
                "validation": _name("validation", v["validation_digest"]),
                "base": _name("main", v["integrated_main"]), "contract": v["contract"],
                "resolvable": v["all_resolvable"] or None, "protected_free": v["protected_free"] or None,
            }}, None
        if kind in ("record_flip", "record_eval"):
            verdict = VERDICTS.get(e.req("verdict"))
            if verdict is None:
                return None, (f"{at}/verdict", f"{e.req('verdict')!r} is not a verdict we know")
            our = "record-flip" if kind == "record_flip" else "record-eval"
            actor = "validator" if kind == "record_flip" else "evaluator"
            return {"request": (our, actor, TASK), "cap": False, "fields": {
                "candidate": _name("manifest", e.req("manifest")),
                "requirements": _name("requirements", e.req("requirements")),
                "review": None if verdict == "absent" else verdict}}, None
        if kind == "publish_observed":
            return {"request": ("publish", "promoter", TASK), "cap": False, "fields": {
                "candidate": _name("manifest", e.req("manifest")),
                "base": _name("main", e.req("observed_main")),
                "succeeded": e.req("succeeded", bool) or None,
                "outputs_match": e.req("outputs_match", bool) or None}}, None
        if kind == "complete":
            return {"request": ("complete", "worker", TASK), "cap": True, "fields": {
                "candidate": _name("manifest", e.req("manifest")),
                "resolvable": e.req("outputs_still_resolve", bool) or None}}, None
        if kind == "fail":
            if e.req("code") != 0:
                return None, (f"{at}/code", "only failure code 0 (none) is mapped")
            return {"request": ("fail-review", "worker", TASK), "cap": True, "fields": {}}, None
        return {"request": ("retry-review", "operator", TASK), "cap": False, "fields": {}}, None

    def trace(self, n: int, name: str, sc: Scenario, final: dict) -> Trace:
        phase = PHASES.get(final["phase"])
        review = {"phase": phase, "manifest": _name("manifest", final["manifest"]),
                  "flip": VERDICTS[final["flip"]], "evaluation": VERDICTS[final["eval"]],
                  "publication": _name("manifest", final["publication"]),
                  "publications": final["publication_count"], "failure": "none"}
        name_path = Path(self.file).name
        return Trace(
            id="wg-simple-land-v1-" + name.replace("_", "-"),
            title=f"WG simple land v1: {name.replace('_', ' ')}",
            source={"kind": "peer-fixture", "file": f"fixtures/wg/simple-land/v1/{name_path}",
                    "provenance": f"graphwork/wg {V1_COMMIT} formal/fixtures/simple-land/v1/{name_path} "
                                  f"(review-before-publication kernel, case {name}), translated by wgk import-wg"},
            description=(f"The peer's review-valve scenario {name}: the source worker's attempt is "
                         "dispatched, then each event is one request of the review valve; the final "
                         f"state is the task's review facts (phase {phase})."),
            graph=sc.graph(), steps=sc.steps,
            expect={"tasks": {TASK: {"review": review}}},
        )
