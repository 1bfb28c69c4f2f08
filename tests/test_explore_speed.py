"""The exploration's own costs: the collector while searching, the liveness check's components
on the plain adjacency (each the same result as before, by construction and by test)."""
from __future__ import annotations

import gc

import pytest

from wgk.conformance.check import explore as explore_mod
from wgk.conformance.check.explore import SEARCH_GC_THRESHOLD, explore
from wgk.model.actions import Instance


def test_the_collector_runs_rarely_while_searching_and_as_before_after(monkeypatch):
    seen = []

    def liveness(*args):
        seen.append(gc.get_threshold())
        raise RuntimeError("stop")

    monkeypatch.setattr(explore_mod, "check_liveness", liveness)
    before = gc.get_threshold()
    assert before != SEARCH_GC_THRESHOLD
    with pytest.raises(RuntimeError):
        explore(Instance(tasks=1), liveness=True)
    assert seen == [SEARCH_GC_THRESHOLD]
    assert gc.get_threshold() == before         # restored, even when the search raised
