"""The review-before-publication kernel's scenarios (``formal/fixtures/simple-land/v1``).

WG's normative completion protocol: a worker-owned universal review — one
immutable manifest (requirements, contract, output and validation digests, the
integrated main), a FLIP review and an evaluation recorded on that manifest,
publication observed against the main the manifest integrated, completion.
The model has no review valve yet (issue 35): its validator and evaluator
review a sealed candidate, not a manifest, in a fixed order (validation,
then the evaluator's FLIP review: ``request-review`` and ``accept``), where WG
records the FLIP review first and the evaluation after it, each on the
manifest; the model has no ``unavailable`` evaluation and no manifest that
replaces another and invalidates both reviews. Every case records a FLIP review
(``record_flip``) before any evaluation, so no case maps one event for one
edge: each is read field by field (nothing unknown passes) and reported with
the first event the model cannot express, never dropped.
"""
from __future__ import annotations

from wgk.conformance.traces.wg.common import Src, Unmapped

MANIFEST = ("id", "requirements", "contract", "output_digest", "validation_digest", "integrated_main",
            "all_resolvable", "protected_free")
EVENT_FIELDS = {
    "submit_manifest": ("manifest",),
    "record_flip": ("manifest", "requirements", "verdict"),
    "record_eval": ("manifest", "requirements", "verdict"),
    "publish_observed": ("manifest", "observed_main", "succeeded", "outputs_match"),
    "complete": ("manifest", "outputs_still_resolve"),
}
FINAL = ("phase", "manifest", "flip", "eval", "publication", "publication_count", "failure_code")
#: event type -> why the model cannot express it
WHY = {
    "record_flip": "a FLIP review of an immutable manifest, before or without its evaluation: the model "
                   "has no review valve; it reviews a sealed candidate in a fixed order (the validator's "
                   "verdict, then the evaluator's FLIP review), with no requirements digest, so no event "
                   "sequence of WG's maps onto its edges one for one",
    "record_eval": "an evaluation of a manifest with verdict pass, reject or unavailable: the model's "
                   "evaluator accepts a candidate and has no 'unavailable'",
    "submit_manifest": "a manifest with requirements and a contract (land, report, explore): the model "
                       "saves a candidate on a base",
    "publish_observed": "publication observed against the manifest's integrated main",
    "complete": "completion of a published manifest",
}


class SimpleLand:
    def __init__(self, doc: dict, file: str):
        self.file = file
        self.src = Src(doc, "", file)

    def run(self):
        s = self.src
        s.const("schema_version", 1)
        unmapped = []
        for n, c in enumerate(s.items("cases")):
            name = c.req("name", str)
            events = c.items("events")
            decisions = c.req("expected_decisions", list)
            if len(decisions) != len(events):
                raise c.error("one expected decision per event", "expected_decisions")
            first = None
            for m, e in enumerate(events):
                kind = e.req("type", str)
                if kind not in EVENT_FIELDS:
                    raise e.error(f"event type {kind!r} cannot be mapped", "type")
                for f in EVENT_FIELDS[kind]:
                    v = e.req(f)
                    if kind == "submit_manifest":
                        m_src = e.sub("manifest")
                        for k in MANIFEST:
                            m_src.req(k)
                        m_src.finish()
                e.finish()
                if first is None and kind in WHY and kind != "submit_manifest":
                    first = (m, kind)
            x = c.sub("expected")
            for f in FINAL:
                x.req(f)
            x.finish()
            c.finish()
            m, kind = first if first else (0, "submit_manifest")
            unmapped.append(Unmapped(self.file, name, f"cases/{n}/events/{m}/type",
                                     f"{kind!r}: {WHY[kind]}"))
        s.finish()
        return [], unmapped
