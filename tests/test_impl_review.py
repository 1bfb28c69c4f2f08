"""The review valve's writes stay in the valve's columns (the implementation's own guard)."""
from __future__ import annotations

from types import SimpleNamespace

from wgk.impl.decisions import review
from wgk.impl.storage.records import EMPTY, evolve


def test_a_valve_write_never_reaches_the_attempt_or_its_transaction():
    t = evolve(EMPTY, fence=1, attempt=1, attempt_state="running", phase="prepared",
               manifest="m-1", review_phase="accepted")
    ctx = SimpleNamespace(record=t)
    # a write that also tries to move the fence, close the attempt and skip a phase
    tried = evolve(t, review_phase="published", publication="m-1", publications=1,
                   fence=2, attempt_state="succeeded", phase="graph-saved")
    out = review._write(ctx, tried)
    assert out.decision == "applied"
    assert (out.record.review_phase, out.record.publication, out.record.publications) == \
        ("published", "m-1", 1)
    assert (out.record.fence, out.record.attempt_state, out.record.phase) == \
        (1, "running", "prepared")
