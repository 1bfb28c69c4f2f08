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


def _graph():
    """A graph with components of many states (the slice's own has only single ones): the
    retry-without-budget mutant's, which retries forever."""
    from wgk.conformance.check.liveness_mutants import LIVENESS_MUTANTS
    m = LIVENESS_MUTANTS["retry-without-budget"]
    g = explore(m.instance, rules=m.rule_table(), keep_graph=True).graph
    return g


def _networkx(g, nodes):
    import networkx as nx
    return [list(c) for c in nx.strongly_connected_components(g.subgraph(nodes))]


def _subsets(g):
    import random
    rng = random.Random(7)
    nodes = list(g.nodes)
    yield nodes                                         # the whole graph: its own order
    yield nodes[: len(nodes) // 3]                      # under half: the set's order
    yield [u for u in nodes if u % 5]                   # over half
    for _ in range(4):
        k = rng.randrange(1, len(nodes))
        yield rng.sample(nodes, k)                      # the order given does not matter
    yield nodes[::-1] + [10**9]                         # a node not in the graph is left out


def test_components_on_the_plain_adjacency_are_networkx_s_in_its_order():
    from wgk.conformance.check.liveness import strongly_connected
    g = _graph()
    for nodes in _subsets(g):
        ours = [list(c) for c in strongly_connected(g._succ, nodes, len(g._succ))]
        assert ours == _networkx(g, nodes)
        assert sum(len(c) for c in ours) == len(set(nodes) & set(g.nodes))
        big = [c for c in ours if len(c) > 1]
        assert big or len(nodes) < len(g) // 2     # the whole graph and over half: cycles


def test_a_component_built_in_another_order_is_caught():
    """The check above compares each component's iteration order, which the lasso's witness
    states follow: a component built otherwise (here: in preorder) is told apart."""
    from wgk.conformance.check.liveness import strongly_connected
    g = _graph()
    differs = False
    for nodes in _subsets(g):
        planted = [sorted(c, reverse=True) for c in
                   strongly_connected(g._succ, nodes, len(g._succ))]
        differs |= planted != _networkx(g, nodes)
    assert differs


def _searches(monkeypatch, keep=None):
    """Every search made, kept; with ``keep``, its contexts kept (True) or not, whatever its
    number of tasks."""
    made = []
    init = explore_mod._Search.__init__

    def watched(self, *args, **kwargs):
        init(self, *args, **kwargs)
        if keep is not None:
            self.space.keep = keep
        made.append(self)
    monkeypatch.setattr(explore_mod._Search, "__init__", watched)
    return made


def _result(r) -> dict:
    out = r.to_json()
    del out["seconds"], out["states_per_second"]
    return out


WIDE = Instance(tasks=1, attempts=2, generations=2,
                groups=("core", "evidence", "review", "operator", "env"))


@pytest.mark.parametrize("workers", [1, 2])
def test_one_task_keeps_no_context_s_steps_or_verdict(monkeypatch, workers):
    """At one task a local context is its state's key written out, met once: the search keeps
    neither its steps nor its verdict, and finds what a search keeping them finds."""
    made = _searches(monkeypatch)
    r = explore(WIDE, max_states=20_000, workers=workers)
    space = made[-1].space
    assert not space.keep and space.local == {} and made[-1].task_verdicts == {}
    assert len(space.task_of) > 1000 and r.transitions > r.distinct_states
    monkeypatch.undo()
    made = _searches(monkeypatch, keep=True)
    kept = explore(WIDE, max_states=20_000, workers=workers)
    assert len(made[-1].space.local) > 1000
    assert _result(kept) == _result(r)


def test_two_tasks_keep_the_contexts_they_share(monkeypatch):
    made = _searches(monkeypatch)
    r = explore(Instance(tasks=2), liveness=True)
    search = made[-1]
    assert search.space.keep and search.task_verdicts
    # every context's steps are kept: fewer than the states expanded, since they are shared
    assert 0 < len(search.space.local) < r.distinct_states
    monkeypatch.undo()
    _searches(monkeypatch, keep=False)
    assert _result(explore(Instance(tasks=2), liveness=True)) == _result(r)
