"""Witnesses written by hand for cells the search does not reach in its budget: each forks
from a bundled trace and names the cell it reaches; ``wgk coverage --write`` keeps those
whose cells the search left without one, and the gate replays them like any other (model
and implementation must answer each step alike).

- ``archive/outcome/rejected:candidate-mismatch``: the operator's confirmation of a Done
  result's digest survives a reopen; once the new generation is Done with another result,
  an archive naming the confirmed (old) digest passes the confirmation check and is
  refused candidate-mismatch (nothing is archived). Two whole completions deep: beyond the
  search's one- and two-step witnesses.
- The review valve's refusals of a request that is well addressed but incomplete or early,
  each one step from a state of trace 46 (the Land manifest's valve): FLIP's and the
  evaluation's verdict missing (``record-flip``/``record-eval`` ``evidence-missing``), a
  completion before the publication (``complete`` ``illegal-phase-edge``) and one whose
  outputs no longer resolve (``complete`` ``publication-unverified``).
"""
from __future__ import annotations

ARCHIVE_TRACE = "incident-30-archive-needs-confirmed-digest"
#: In that trace, before step 19: task a Done with c-a1 and the confirmation of c-a1 recorded.
ARCHIVE_AT = 19

_EDGES = (("submit", "worker", "absent", {}), ("quiesce", "wrapper", "prepared", {}),
          ("save-work", "wrapper", "quiescing", {"candidate": "c-a2", "base": "c-a1"}),
          ("seal-candidate", "daemon", "work-saved", {"candidate": "c-a2"}),
          ("validate", "validator", "candidate-sealed", {"candidate": "c-a2", "verdict": "pass"}),
          ("accept", "daemon", "validated", {"candidate": "c-a2", "verdict": "not-required"}),
          ("record-disposition", "wrapper", "accepted", {"disposition": "report"}),
          ("prepare-effect", "promoter", "disposition-recorded", {}),
          ("commit-effect", "promoter", "effect-prepared", {"candidate": "c-a2", "base": "c-a1"}),
          ("prepare-cleanup", "cleanup", "effect-committed", {}),
          ("commit-cleanup", "cleanup", "cleanup-prepared", {}),
          ("save-graph", "daemon", "cleanup-committed", {}))


def _archive_of_an_earlier_confirmation() -> dict:
    # the reopen opens generation 1 (fence 2); its dispatch takes fence 3 and lease epoch 2
    cap = {"graph": "g", "task": "a", "generation": 1, "attempt": 1, "fence": 3, "lease-epoch": 2}
    steps = [{"request": {"kind": "reopen", "actor": "operator", "task": "a",
                          "key": "cov-30-reopen", "expected-generation": 0}},
             {"request": {"kind": "dispatch", "actor": "daemon", "task": "a",
                          "key": "cov-30-dispatch-2", "expected-attempt": 0,
                          "owner": {"pid": 4002, "birth": 912, "session": "s2",
                                    "wrapper-epoch": 1, "child-epoch": 1}, "mint": "tok-a-2"}},
             {"env": "edit", "task": "a", "content": "c-a2"}]
    for n, (kind, actor, phase, kw) in enumerate(_EDGES):
        token = {"token": "tok-a-2"} if actor in ("worker", "wrapper") else {}
        steps.append({"request": {"kind": kind, "actor": actor, "task": "a",
                                  "key": f"cov-30-{kind}-2", "cap": cap, "expected-phase": phase,
                                  "expected-revision": n, **kw, **token}})
    steps.append({"request": {"kind": "archive", "actor": "daemon", "task": "a",
                              "key": "cov-30-archive-old", "candidate": "c-a1"}})
    return {"trace": ARCHIVE_TRACE, "at": ARCHIVE_AT, "fork": True,
            "cells": ["archive/outcome/rejected:candidate-mismatch"], "steps": steps}


VALVE_TRACE = "incident-review-valve-land"
_WORKER = {"cap": {"graph": "g", "task": "a", "generation": 0, "attempt": 1, "fence": 1,
                   "lease-epoch": 1}, "token": "tok-a-1"}


def _valve(at: int, cell: str, request: dict) -> dict:
    """One request of the valve on task a, before step ``at`` of trace 46."""
    kind = cell.split("/", 1)[0]
    return {"trace": VALVE_TRACE, "at": at, "fork": True, "cells": [cell],
            "steps": [{"request": {"kind": kind, "task": "a", "key": f"cov-46-{kind}-{at}",
                                   **request}}]}


def _valve_refusals() -> list[dict]:
    # before step 4: manifest-1 submitted; before 7: FLIP passed it; before 11: the evaluation
    # passed it (accepted); before 18: manifest-2 published
    return [
        _valve(4, "record-flip/outcome/rejected:evidence-missing",
               {"actor": "validator", "candidate": "manifest-1", "requirements": "req-1"}),
        _valve(7, "record-eval/outcome/rejected:evidence-missing",
               {"actor": "evaluator", "candidate": "manifest-1", "requirements": "req-1"}),
        _valve(11, "complete/outcome/rejected:illegal-phase-edge",
               {"actor": "worker", **_WORKER, "candidate": "manifest-1", "resolvable": True}),
        _valve(18, "complete/outcome/rejected:publication-unverified",
               {"actor": "worker", **_WORKER, "candidate": "manifest-2"}),
    ]


def written() -> list[dict]:
    """Every hand-written witness."""
    return [_archive_of_an_earlier_confirmation(), *_valve_refusals()]


__all__ = ["written"]
