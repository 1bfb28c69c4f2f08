"""Crash cuts on a database held in memory: one connection per trace, restored from each
snapshot's pages and opened again by a restarted kernel after each crash. The verdicts are
those of cuts on a database file reopened by a new connection, and what a restarted process
would not find (an open transaction, the connection's own tables) is not found."""
from __future__ import annotations

from pathlib import Path

import pytest

from wgk.conformance.oracle import crashcuts
from wgk.conformance.oracle.crashcuts import crash_cuts, in_memory
from wgk.conformance.oracle.impl_system import HeldDatabase, ImplSystem
from wgk.conformance.traces.format import load_trace
from wgk.impl.front import audit
import wgk.impl.decisions.rules as rules

ROOT = Path(__file__).resolve().parents[1]
INCIDENTS = ROOT / "traces" / "incidents"
TRACES = ["13-crash-at-every-phase.json", "01-false-done-never-satisfies-dependent.json",
          "04-dead-worker-converges.json"]


def _verdicts(result) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(c.name, c.verdict, tuple(d.what for d in c.divergences)) for c in result.cuts]


@pytest.mark.parametrize("name", TRACES)
def test_cuts_on_a_held_database_give_the_verdicts_of_cuts_on_a_file(name):
    trace = load_trace(INCIDENTS / name)
    held, on_disk = crash_cuts(trace), crash_cuts(trace, on_disk=True)
    assert held.cuts and _verdicts(held) == _verdicts(on_disk) and held.passed


def test_a_planted_double_promotion_fails_the_same_cuts_held_or_on_a_file(monkeypatch):
    monkeypatch.setattr(rules.Observe, "effect_happened", lambda self, t: False)
    trace = load_trace(INCIDENTS / "13-crash-at-every-phase.json")
    held, on_disk = crash_cuts(trace), crash_cuts(trace, on_disk=True)
    assert held.failed and any("ref-update" in c.boundary for c in held.failed)
    assert _verdicts(held) == _verdicts(on_disk)


def test_which_cuts_are_held():
    assert in_memory("in-process", "memory")
    assert not in_memory("kill", "memory") and not in_memory("in-process", "real")


def _held_with_a_kernel():
    trace = load_trace(INCIDENTS / "01-false-done-never-satisfies-dependent.json")
    impl = ImplSystem(trace)
    try:
        image, world, head = impl.kernel.conn.serialize(), impl.world, impl.kernel.ledger_head()
    finally:
        impl.kernel.close()
    held = HeldDatabase()
    held.restore(image)
    return held, ImplSystem.reopen(held.path, world, held=held), head


def test_a_restart_on_the_held_connection_rolls_back_what_the_crash_left_open():
    held, impl, head = _held_with_a_kernel()
    try:
        conn = impl.kernel.conn
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO ledger VALUES (?, 'x', 'x', 'x', NULL, NULL, '{}', 2)", (head + 1,))
        impl.crash()                              # the process dies inside its transaction
        assert impl.kernel.ledger_head() == head and not impl.kernel.conn.in_transaction
        assert held.replaced == 0 and impl.kernel.conn is conn
    finally:
        held.close()


@pytest.mark.parametrize("own", ["CREATE TEMP TABLE kept (x)",
                                 "ATTACH DATABASE ':memory:' AS other",
                                 "PRAGMA foreign_keys = ON", "PRAGMA query_only = ON"])
def test_a_connection_holding_state_of_its_own_is_replaced_at_a_restart(own):
    held, impl, head = _held_with_a_kernel()
    try:
        before = impl.kernel.conn
        before.execute(own)
        impl.crash()
        conn = impl.kernel.conn
        assert conn is not before and held.replaced == 1
        assert conn.execute("SELECT count(*) FROM temp.sqlite_master").fetchone()[0] == 0
        assert [r[1] for r in conn.execute("PRAGMA database_list")] in (["main"], ["main", "temp"])
        assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 0
        assert conn.execute("PRAGMA query_only").fetchone()[0] == 0
        assert impl.kernel.ledger_head() == head and impl.kernel.audit().ok
    finally:
        held.close()


def test_a_store_on_a_given_connection_leaves_it_open_and_refuses_one_in_a_transaction():
    held, impl, _ = _held_with_a_kernel()
    try:
        impl.kernel.close()
        assert held.conn.execute("SELECT count(*) FROM ledger").fetchone()[0] > 0
        held.conn.execute("BEGIN")
        from wgk.impl.contract.errors import StoreError
        from wgk.impl.storage.store import Store
        with pytest.raises(StoreError, match="in a transaction"):
            Store(held.path, conn=held.conn)
    finally:
        held.close()


def test_a_scratch_moved_to_a_later_replay_rebuilds_from_it():
    """One scratch connection for a trace's steps: moved to a later replay, a rebuild starts
    from that replay's image (kept on the earlier image, the events between are missing)."""
    trace = load_trace(INCIDENTS / "13-crash-at-every-phase.json")
    impl = ImplSystem(trace)
    scratch = audit.Scratch(None)
    try:
        starts = []
        for step in trace.steps:
            if "request" in step:             # as the cuts' snapshots: before the step
                starts.append(audit.replayed(impl.kernel, starts[-1] if starts else None))
            try:
                impl.apply(step)
            except Exception:         # noqa: BLE001 -- a step the kernel refuses: go on
                pass
        head = impl.kernel.ledger_head()
        first, last = starts[1], next(s for s in reversed(starts) if s.seq < head)
        assert first.seq < last.seq < impl.kernel.ledger_head()
        assert impl.kernel.rebuild(start=first, scratch=scratch.move(first)).ok
        report = impl.kernel.rebuild(start=last, scratch=scratch.move(last))
        assert report.ok and report.events == impl.kernel.ledger_head()
        assert scratch.on is last
    finally:
        scratch.close()
        impl.close()


def test_the_cuts_keep_one_scratch_connection_per_trace(monkeypatch):
    opened = []
    real = audit.Scratch.__init__

    def counting(self, start):
        opened.append(start)
        real(self, start)
    monkeypatch.setattr(audit.Scratch, "__init__", counting)
    result = crash_cuts(load_trace(INCIDENTS / "13-crash-at-every-phase.json"))
    assert result.passed and len(opened) == 1


def _tables(image: bytes) -> dict:
    import sqlite3
    conn = sqlite3.connect(":memory:")
    try:
        conn.deserialize(image)
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {n: sorted(conn.execute(f"SELECT * FROM {n}").fetchall(), key=repr) for n in names}
    finally:
        conn.close()


def test_the_snapshots_replays_on_one_held_connection_equal_replays_on_new_ones():
    """Each replay on the held connection starts from its own image: the rows equal a replay
    on a new connection's, step after step, going on from the first one (older than what the
    connection held last), from the previous one or from none."""
    from wgk.impl.storage.store import held
    trace = load_trace(INCIDENTS / "13-crash-at-every-phase.json")
    impl = ImplSystem(trace)
    conn = held()
    try:
        first = last = None
        for n, step in enumerate(trace.steps):
            if "request" in step:
                start = (first, last, None)[n % 3]
                on_held, alone = (audit.replayed(impl.kernel, start, conn),
                                  audit.replayed(impl.kernel, start))
                assert (on_held.seq, on_held.head) == (alone.seq, alone.head)
                assert _tables(on_held.image) == _tables(alone.image)
                first, last = first or on_held, on_held
            try:
                impl.apply(step)
            except Exception:         # noqa: BLE001 -- a step the kernel refuses: go on
                pass
    finally:
        conn.close()
        impl.close()


def test_the_command_line_runs_the_cuts_on_a_file_when_asked(monkeypatch, capsys):
    from wgk.conformance.cli.main import main
    asked = []
    real = crashcuts.crash_cuts

    def recording(trace, **kw):
        asked.append(kw.get("on_disk"))
        return real(trace, **kw)
    monkeypatch.setattr(crashcuts, "crash_cuts", recording)
    trace = str(INCIDENTS / "01-false-done-never-satisfies-dependent.json")
    for flags in ([], ["--on-disk"]):
        assert main(["replay", trace, "--system", "impl", "--crash-cuts", *flags]) == 0
    assert asked == [False, True]
    capsys.readouterr()


def test_restarts_after_each_planted_state_see_what_a_new_connection_sees():
    from wgk.conformance.oracle.held_restarts import PLANTS, held_restarts
    trace = load_trace(INCIDENTS / "01-false-done-never-satisfies-dependent.json")
    results = held_restarts(trace)
    assert [r.plant for r in results] == list(PLANTS)
    assert all(r.verdict == "pass" and not r.problems for r in results)
    assert all(r.cuts == ["step 0 before commit [dispatch:a:1]", "step 0 after commit [dispatch:a:1]"]
               for r in results)


def test_a_restart_keeping_what_was_planted_on_its_connection_is_reported(monkeypatch):
    """Every planted state is seen by the restarted kernel when its connection is kept as it
    is: none is planted where the restart's view cannot show it."""
    from wgk.conformance.oracle.held_restarts import PLANTS, held_restarts
    monkeypatch.setattr(HeldDatabase, "restarted", lambda self: self.conn)
    trace = load_trace(INCIDENTS / "01-false-done-never-satisfies-dependent.json")
    results = held_restarts(trace)
    assert [r.plant for r in results] == list(PLANTS)
    for r in results:
        assert r.verdict == "fail" and len(r.problems) == 1
        assert r.problems[0].startswith(f"{r.plant} planted before the restart after step 0 "
                                        "before commit [dispatch:a:1]: the restarted kernel")


def test_a_restored_snapshot_is_checked_once_and_what_the_connection_held_is_not_kept(monkeypatch):
    """A cut's restore and the first kernel on it check the held connection once (nothing runs
    on it between the two); a temporary table the connection held before is not kept."""
    held, impl, head = _held_with_a_kernel()
    try:
        image = impl.kernel.conn.serialize()
        impl.kernel.close()
        held.conn.execute("CREATE TEMP TABLE kept (x)")
        calls = []
        real = HeldDatabase.restarted
        monkeypatch.setattr(HeldDatabase, "restarted", lambda self: (calls.append(1), real(self))[1])
        snap = crashcuts._Snapshot("unused", crashcuts._keep_world(impl.world, "unused"), head,
                                   None, None, image=image)
        again = crashcuts._restore(snap, held, crashcuts.no_hook)
        assert len(calls) == 1 and held.replaced == 1 and again.kernel.conn is held.conn
        assert held.conn.execute("SELECT count(*) FROM temp.sqlite_master").fetchone()[0] == 0
        assert again.kernel.ledger_head() == head and again.kernel.audit().ok
        again.crash()                              # a restart checks the connection again
        assert len(calls) == 2
    finally:
        held.close()


def test_a_replay_going_on_from_the_image_its_held_connection_holds_is_not_given_its_pages_again():
    """``audit.replayed`` on a held connection: the next replay starting from the image it
    made goes on in place (no ``deserialize``: SQLite would parse the schema again), with the
    same rows as a replay on a new connection; any other start, and a start after a replay
    that failed half-way, is given its pages."""
    from wgk.impl.storage.store import held
    trace = load_trace(INCIDENTS / "13-crash-at-every-phase.json")
    impl = ImplSystem(trace)
    conn = held()
    given = []
    real = conn.deserialize
    conn.deserialize = lambda image, **kw: (given.append(image), real(image, **kw))[1]
    try:
        requests = [n for n, s in enumerate(trace.steps) if "request" in s]
        last = None
        for n, step in enumerate(trace.steps):
            if n in requests[1:4]:
                given.clear()
                on_held = audit.replayed(impl.kernel, last, conn)
                assert given == ([] if last is not None else [impl.kernel.store.empty()])
                assert conn.image is on_held.image
                assert _tables(on_held.image) == _tables(audit.replayed(impl.kernel, last).image)
                last = on_held
            try:
                impl.apply(step)
            except Exception:         # noqa: BLE001 -- a step the kernel refuses: go on
                pass
        first = audit.replayed(impl.kernel, None, conn)
        given.clear()
        audit.replayed(impl.kernel, last, conn)              # not what it holds: given
        assert given == [last.image]
        broken = []

        def corrupt(*a, **kw):
            broken.append(1)
            raise audit.Corrupt("planted")
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(audit, "_replay_events", corrupt)
            assert audit.replayed(impl.kernel, first, conn) is None and broken
        assert conn.image is None
        given.clear()
        assert _tables(audit.replayed(impl.kernel, first, conn).image) == \
            _tables(audit.replayed(impl.kernel, first).image)
        assert given == [first.image]
    finally:
        conn.close()
        impl.close()
