"""Shared helpers for the model tests."""
from __future__ import annotations

import pytest

from honest_tokens import honest_tokens  # noqa: F401  (autouse: raw API tests hold tokens)
from no_leaked_children import no_leaked_children  # noqa: F401  (autouse: protocol tests)
from slow_first import order

from wgk.conformance.check.driver import Driver
from wgk.model.env import EnvKind
from wgk.model.requests import Owner
from wgk.model.state import Graph
from wgk.model.vocab import Actor as A, Disposition, Kind as K, Verdict

BASE = 1          # the target's initial commit
WORK = 7          # bytes the owner writes


def owner(n: int = 1, epoch: int = 1) -> Owner:
    return Owner(pid=4000 + n, birth=900 + n * 10 + epoch, session=n, wrapper_epoch=epoch,
                 child_epoch=epoch)


def chain(*names: str, review: tuple[str, ...] = ()) -> Driver:
    deps = {names[i]: [names[i - 1]] for i in range(1, len(names))}
    return Driver(Graph.build(names, deps, graph_id="g", review_required=review))


def dispatch(d: Driver, task: str, n: int = 1):
    return d.send(K.DISPATCH, A.DAEMON, task, owner=owner(n))


def to_phase(d: Driver, task: str, last: K, *, work: int = WORK, disposition=Disposition.LAND):
    """Drive ``task`` (already dispatched) along the main line up to and including ``last``."""
    base = d.task(task).origin
    if d.task(task).worktree != work:
        d.env(EnvKind.EDIT, task, content=work)
    review = d.graph.review_required[d.graph.index[task]]
    plan = [
        (K.SUBMIT, A.WORKER, {}),
        (K.QUIESCE, A.WRAPPER, {}),
        (K.SAVE_WORK, A.WRAPPER, {"candidate": work, "base": base}),
        (K.SEAL_CANDIDATE, A.DAEMON, {"candidate": work}),
        (K.VALIDATE, A.VALIDATOR, {"candidate": work, "verdict": Verdict.PASS}),
    ]
    if review:
        plan += [(K.REQUEST_REVIEW, A.DAEMON, {}),
                 (K.ACCEPT, A.EVALUATOR, {"candidate": work, "verdict": Verdict.PASS})]
    else:
        plan += [(K.ACCEPT, A.DAEMON, {"candidate": work, "verdict": Verdict.NOT_REQUIRED})]
    plan += [
        (K.RECORD_DISPOSITION, A.WRAPPER, {"disposition": disposition}),
        (K.PREPARE_EFFECT, A.PROMOTER, {}),
        (K.COMMIT_EFFECT, A.PROMOTER, {"candidate": work, "base": base}),
        (K.PREPARE_CLEANUP, A.CLEANUP, {}),
        (K.COMMIT_CLEANUP, A.CLEANUP, {}),
        (K.SAVE_GRAPH, A.DAEMON, {}),
    ]
    for kind, actor, kw in plan:
        dec = d.send(kind, actor, task, **kw)
        assert dec.label == "applied", f"{kind.label}: {dec.label}"
        if kind == last:
            return dec
    raise AssertionError(f"{last.label} is not on the main line")


def complete(d: Driver, task: str, n: int = 1, work: int = WORK):
    dispatch(d, task, n)
    return to_phase(d, task, K.SAVE_GRAPH, work=work)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """The longest test files first (``slow_first``): no long file ends the run alone."""
    order(items)


@pytest.fixture
def one() -> Driver:
    return chain("a")


@pytest.fixture
def two() -> Driver:
    return chain("a", "b")
