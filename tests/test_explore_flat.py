"""Task states between the explorer's processes: as their field values (``workers.Wire``),
a worker's own task states told back by id, the calling process's smaller share."""
from __future__ import annotations

import dataclasses
import pickle

import pytest

from wgk.conformance.check import workers
from wgk.conformance.check.compiled import TASK_FIELDS
from wgk.conformance.check.explore import explore
from wgk.model.actions import Instance
from wgk.model.state import Binding, TaskState
from wgk.model.vocab import Exit, Phase, Reason

SMALL = Instance(tasks=2, groups=("core", "env"))


def summary(r) -> tuple:
    return (r.distinct_states, r.transitions, r.complete, r.reached, r.unreached,
            [(v.invariant, v.path) for v in r.violations])


def sent(t: TaskState, there: workers.Wire | None = None) -> TaskState:
    """``t`` encoded, pickled as the pipe does and decoded on the other end."""
    here = workers.Wire()
    there = there or workers.Wire()
    e = here.encode(t)
    values, e = pickle.loads(pickle.dumps((here.taken(), e)))
    there.receive(values)
    return there.decode(e)


def test_a_task_state_arrives_equal_with_every_field_of_its_own_type():
    t = dataclasses.replace(TaskState(), phase=Phase.PREPARED, exit=Exit.NEEDS_REPAIR,
                            reason=Reason.VALIDATION_FAILED, attempt=2,
                            receipts=(Binding(1, 2, 0),) + TaskState().receipts[1:])
    for u in (TaskState(), t):
        v = sent(u)
        assert v == u and hash(v) == hash(u)
        for f in TASK_FIELDS:
            assert type(getattr(v, f)) is type(getattr(u, f)), f
            assert getattr(v, f) == getattr(u, f), f


def test_members_of_several_enumerations_with_one_number_are_told_apart(monkeypatch):
    """The default task state holds Phase.ABSENT, Exit.NONE, Reason.NONE..., all equal to 0:
    a wire that numbered values by their value alone sends them all as the first one met."""
    t = TaskState()
    assert Phase.ABSENT == Exit.NONE == Reason.NONE == 0
    assert type(sent(t).exit) is Exit

    def by_value_alone(self, x):
        n = self.numbers.get(x)
        if n is None:
            n = self.numbers[x] = len(self.numbers)
            self.fresh.append(x)
        return n
    monkeypatch.setattr(workers.Wire, "number", by_value_alone)
    v = sent(t)
    assert v == t       # IntEnums compare as numbers: equality alone cannot see it
    assert [f for f in TASK_FIELDS if type(getattr(v, f)) is not type(getattr(t, f))]


def test_the_receiver_s_receipts_are_taken_once_per_number():
    held = []

    def hold(r):
        held.append(r)
        return r
    there = workers.Wire(hold)
    here = workers.Wire()
    t = TaskState()
    for _ in range(3):
        e = here.encode(t)
        there.receive(here.taken())
        assert there.decode(e) == t
    assert len(held) == 1


def test_the_calling_process_takes_a_smaller_share_and_every_job_is_answered_once():
    pool = workers.Pool.__new__(workers.Pool)
    for n_workers in (2, 3, 5):
        pool.workers = n_workers
        for size in (2, 16, 17, 100, 1001):
            jobs = list(range(size))
            shares = pool.shares(jobs)
            assert [j for s in shares for j in s] == jobs
            assert len(shares) <= n_workers
            if size >= 16:
                assert len(shares[0]) < max(len(s) for s in shares[1:])


@pytest.fixture
def every_job_shared(monkeypatch):
    monkeypatch.setattr(workers, "SMALLEST_SHARE", 2)


@pytest.mark.parametrize("here", [0.0, 0.5, 1.0, 3.0])
def test_any_share_of_the_calling_process_finds_the_same(every_job_shared, monkeypatch, here):
    one = explore(SMALL)
    monkeypatch.setattr(workers, "HERE_SHARE", here)
    assert summary(explore(SMALL, workers=2)) == summary(one)


def test_a_worker_s_own_task_states_are_told_by_id_not_sent_back(every_job_shared, monkeypatch):
    """Counted in this process: every task state a worker is asked about goes to it either
    encoded or told (it made it); a pool that never tells sends every one encoded."""
    counts = {"encoded": 0, "told": 0}
    encode, told = workers.Wire.encode, workers.Pool.told

    def counting_encode(self, t):
        counts["encoded"] += 1
        return encode(self, t)

    def counting_told(self):
        before = sum(len(k) for k in self._known)
        told(self)
        counts["told"] += sum(len(k) for k in self._known) - before
    monkeypatch.setattr(workers.Wire, "encode", counting_encode)
    monkeypatch.setattr(workers.Pool, "told", counting_told)
    one = explore(SMALL)
    two = explore(SMALL, workers=2)
    assert summary(two) == summary(one)
    # (the worker's own encodes run in its process, not counted here)
    assert counts["told"] > 0 and counts["encoded"] > 0
    assert counts["told"] > counts["encoded"] / 4
