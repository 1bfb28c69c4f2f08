"""Crash cuts (BRIEF §5): crash at every durable boundary a trace crosses.

A durable boundary is each committed SQLite transaction and each external
effect (ref update, worktree creation or removal); the implementation calls
one hook just before and just after each. For every such call during a trace:

1. restore the implementation's durable state as it was before that step (a
   snapshot taken in the crash-free run: the SQLite backup and the world), so
   the cost of a cut does not grow with the trace's length;
2. run the step with a hook that crashes at exactly that call (in-process:
   an exception no handler swallows; or ``kill -9`` of a child process);
3. restart the implementation from disk; the recovered state must equal the
   model's state after the acknowledged prefix, or after prefix + 1 when the
   commit landed but the response was lost;
4. the client re-sends the request it never got an answer to, with the same
   idempotency key: the answer is the model's decision (a ``duplicate`` of it
   when the commit had landed), and the state must now equal the model's after
   the step — one effect, never two; no retained work lost;
5. the ledger must verify and rebuild to the live projection, and daemon
   convergence must leave it so and reach its fixpoint: no due action (a
   transaction to drive, a dead owner to declare lost) left undone;
6. optionally (``finish``) the rest of the trace runs and its final projection
   must equal the crash-free model run's.

Each cut is a reported case with its own verdict. The thorough checks of step 5 read the
state after the re-send; a cut that reaches the very state (database pages, world,
projection, rebuild start) of an earlier passing cut of the same trace takes that cut's
verdict for them and is counted as decided by equivalence (``Tails``). Recovery reopens the
kernel from the database and the world alone: a cut of a step whose recovered state (database
pages and world) is an earlier passing cut's of the same step is that cut from there on (the
same re-send on the same state), and a recovered state's projection is computed once.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import pickle
import signal
import tempfile
import time
from dataclasses import dataclass, field
from typing import Callable

from wgk.impl import Crash, CrashAt, Kernel, Recorder, no_hook
from wgk.impl.storage import pg
from wgk.impl.front import audit
from wgk.impl.storage.backends import backend_of, open_store
from wgk.impl.storage.store import held as held_connection

from wgk.conformance.oracle.crash_scope import CHECKS, _Scope, _scope
from wgk.conformance.oracle.daemon import undone
from wgk.conformance.oracle.impl_system import HeldDatabase, ImplSystem, backend, database
from wgk.conformance.oracle.real_world import RealWorld, real_world, restore_world, snapshot_world
from wgk.conformance.oracle.model_runs import model_system
from wgk.conformance.oracle.lockstep import Divergence, Observed, diff_values, is_valid_step
from wgk.conformance.oracle.systems import ModelSystem, StepError
from wgk.conformance.traces.format import Trace
from wgk.model.state import State, replace_task


@dataclass
class Cut:
    """One crash point and its verdict."""

    step: int
    index: int                 # which hook call within the step
    boundary: str              # e.g. "after commit [submit:a:5]"
    divergences: list[Divergence] = field(default_factory=list)
    seconds: float = 0.0
    #: the checks after the re-send were decided by an equivalent earlier cut (``Tails``)
    equivalent: bool = False
    #: of those, the whole cut from its recovered state on (the same step re-sent on the
    #: same recovered state as an earlier passing cut's)
    recovered_equivalent: bool = False

    @property
    def verdict(self) -> str:
        return "pass" if not self.divergences else "fail"

    @property
    def name(self) -> str:
        return f"step {self.step} {self.boundary}"

    def to_json(self) -> dict:
        return {"step": self.step, "boundary": self.boundary, "verdict": self.verdict,
                "seconds": round(self.seconds, 4), "equivalent": self.equivalent,
                "recovered-equivalent": self.recovered_equivalent,
                "divergences": [d.to_json() for d in self.divergences]}


@dataclass
class CrashCutResult:
    trace: str
    path: str | None
    cuts: list[Cut]
    mode: str
    equivalent: int = 0        # cuts whose checks after the re-send were decided by equivalence

    @property
    def passed(self) -> bool:
        return all(c.verdict == "pass" for c in self.cuts)

    @property
    def failed(self) -> list[Cut]:
        return [c for c in self.cuts if c.verdict != "pass"]


@dataclass
class _Snapshot:
    db: str            # where a copy of the database is kept (PostgreSQL: every table's rows)
    world: object      # the world the kernel acts on, copied (``snapshot_world``)
    head: int          # the last ledger event before the step
    daemon: str | None = None   # the trace principal the daemon converges as
    replayed: object = None     # the ledger so far replayed (thorough cuts' rebuilds start there)
    scratch: object = None      # a scratch kernel on ``replayed``, open while the step is cut
    image: bytes = b""          # SQLite: a consistent copy of the database, in memory


def _snapshot(impl: ImplSystem, path: str, replay: bool = False, start=None,
              conn=None) -> _Snapshot:
    """The implementation's durable state before a step; ``replay``: with the ledger so far
    replayed, for the cuts' rebuilds (``start``: as replayed before an earlier step; ``conn``:
    the held connection those replays are made on, ``audit.replay``)."""
    on_file = backend_of(impl.path).file
    if not on_file:
        impl.kernel.store.snapshot(path)         # every table's rows
    image = impl.kernel.conn.serialize() if on_file else b""   # its committed pages
    world = _keep_world(impl.world, path + ".world")
    replayed = audit.replayed(impl.kernel, start, conn) if replay else None
    return _Snapshot(path, world, impl.kernel.ledger_head(), impl.daemon, replayed, image=image)


def _restore(snap: _Snapshot, path: "str | HeldDatabase", hook) -> ImplSystem:
    if isinstance(path, HeldDatabase):            # the snapshot's pages, on the kept connection
        return ImplSystem.reopen(path.path, _world_of(snap.world), hook=hook,
                                 daemon=snap.daemon, held=path,
                                 store=path.restored(snap.image, hook))
    if not backend_of(path).file:                 # the cut's schema, emptied and refilled
        store = open_store(path)
        store.restore(snap.db)
        store.close()
        return ImplSystem.reopen(path, _world_of(snap.world), hook=hook, daemon=snap.daemon)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)
    with open(path, "wb") as f:
        f.write(snap.image)
    return ImplSystem.reopen(path, _world_of(snap.world), hook=hook, daemon=snap.daemon)


@dataclass(frozen=True)
class _Pickled:
    """An in-memory world kept as its pickle (as a killed cut's child keeps it): restored by
    unpickling, a fresh copy each time, at a fraction of a deep copy's cost."""

    data: bytes


def _keep_world(world, path: str):
    """A restorable copy of ``world`` (``_world_of``): a real one on disk, else its pickle."""
    if isinstance(world, RealWorld):
        return snapshot_world(world, path)
    try:
        return _Pickled(pickle.dumps(world, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:                  # noqa: BLE001 -- a world that cannot be pickled: copied
        return snapshot_world(world, path)


def _world_of(saved):
    return pickle.loads(saved.data) if isinstance(saved, _Pickled) else restore_world(saved)


#: The model's task fields that are the world's, not the kernel's: an external effect (ref
#: update, worktree removal) can have happened before the commit recording it. The target
#: is the world's too.
EFFECT_FIELDS = ("promotions", "effect_done", "worktree", "worktree_present", "origin")


def effects_made_durable(before: State, after: State) -> State:
    """``before`` with the world as it is in ``after``: the step's effect done, not yet
    recorded (the target and each task's effect fields as ``after`` has them)."""
    tasks = tuple(replace_task(b, **{f: getattr(a, f) for f in EFFECT_FIELDS})
                  for b, a in zip(before.tasks, after.tasks))
    return dataclasses.replace(before, target=after.target, tasks=tasks)


def with_effects(model: ModelSystem, before: State, after: State) -> dict:
    """The expected state after a cut that made the step's effect durable but not its commit:
    the model's projection of ``before`` with that effect, everything derived from it computed
    again (a task that raced the effect's target plans ``mark-repair``, not its stale plan)."""
    return model.project_state(effects_made_durable(before, after))


def _divergence(trace: Trace, step: int, what: str, request, expected, actual, diffs=(), boundary=None):
    return Divergence(trace.id, step, "impl", what, request, expected, actual, tuple(diffs),
                      boundary=boundary)


def crash_cuts(trace: Trace, *, mode: str = "in-process", finish: bool = False,
               steps: range | None = None, checks: str = "thorough",
               progress: Callable[[str], None] | None = None, world: str = "memory",
               images: bool = True, equivalence: bool = True,
               on_disk: bool = False) -> CrashCutResult:
    """Every crash cut of one trace: ``mode`` "in-process" (fast) or "kill" (a real kill -9);
    ``world`` "memory" or "real" (``real_world``). ``steps`` restricts the cuts to those steps
    (snapshots are taken only there). ``images``: a thorough cut's rebuilds start from the
    ledger as replayed before its step in the crash-free run (False: from an empty database).
    ``equivalence``: a cut whose state after the re-send is an earlier cut's, whose checks
    passed, is decided by that one (``Tails``; False: every cut checks its own).
    On PostgreSQL the cuts' scratch schemas are recycled (``pg.recycling``). ``on_disk``: every
    cut on a database file reopened by a new connection after its crash, as the cuts that need
    a file are anyway (``in_memory``)."""
    with pg.recycling():
        return _crash_cuts(trace, mode, finish, steps, checks, progress, world, images,
                           equivalence, in_memory(mode, world) and not on_disk)


def in_memory(mode: str, world: str) -> bool:
    """Whether a trace's cuts hold their database in memory (``HeldDatabase``): in-process cuts
    on the in-memory world and SQLite. A cut killed by a signal recovers from the file the
    killed process wrote, one on a real world beside the world's files, one on PostgreSQL
    from the server: those are opened anew from where they are, by a new connection."""
    return mode == "in-process" and world == "memory" and backend() is None


def _crash_cuts(trace: Trace, mode: str, finish: bool, steps: range | None, checks: str,
                progress: Callable[[str], None] | None, world: str, images: bool,
                equivalence: bool = True, held: bool = False) -> CrashCutResult:
    wanted = steps if steps is not None else range(len(trace.steps))
    # no cut reads its invariants; the trace's kept run inside ``model_runs.shared()``
    model = model_system(trace, checking=False)
    recorder = Recorder()
    snapdir = tempfile.TemporaryDirectory(prefix="wgk-snap-")
    impl = ImplSystem(trace, hook=recorder, world=real_world(world, trace, snapdir.name))
    replays = held_connection()                   # the snapshots' replays, one after another
    projections = [model.project()]
    states = [model.state]
    decisions: list[dict | None] = []
    snapshots: list[_Snapshot | None] = []
    calls: list[list] = []
    try:
        for n, step in enumerate(trace.steps):
            last = next((s.replayed for s in reversed(snapshots) if s is not None), None)
            snapshots.append(_snapshot(impl, os.path.join(snapdir.name, f"before-{n}.db"),
                                       checks == "thorough" and images, last, replays)
                             if n in wanted and "request" in step else None)
            start = len(recorder.seen)
            try:
                decisions.append(model.apply(step))
            except StepError:
                decisions.append(None)
            impl.apply(step)
            calls.append(recorder.seen[start:])
            projections.append(model.project())
            states.append(model.state)
    finally:
        impl.close()
        replays.close()
    cuts: list[Cut] = []
    tails = Tails() if equivalence else None
    with tempfile.TemporaryDirectory(prefix="wgk-cut-") as tmp, _cut_database(tmp, held) as db, \
            contextlib.closing(audit.Scratch(None)) as scratch:   # the rebuilds', one per trace
        for k, step in enumerate(trace.steps):
            if "request" not in step or snapshots[k] is None:
                continue
            snap = snapshots[k]
            effected = _Lazy(lambda k=k: with_effects(model, states[k], states[k + 1]))
            snap.scratch = scratch.move(snap.replayed) if snap.replayed else None
            for j, boundary in enumerate(calls[k]):
                t0 = time.perf_counter()
                cut = Cut(k, j, boundary.describe())
                cut.divergences = _one_cut(trace, k, j, step, snap, db, decisions[k],
                                           projections, effected, finish, cut.boundary,
                                           mode, _scope(trace, step, checks), tails)
                cut.seconds = time.perf_counter() - t0
                cut.equivalent = tails is not None and tails.last
                cut.recovered_equivalent = tails is not None and tails.last_whole
                cuts.append(cut)
                if progress:
                    progress(f"  cut {len(cuts)}: {cut.name} {cut.verdict}")
    getattr(impl.world, "close", lambda: None)()
    snapdir.cleanup()
    return CrashCutResult(trace.id, trace.path, cuts, mode, tails.reused if tails else 0)


@contextlib.contextmanager
def _cut_database(tmp: str, held: bool):
    """Where a trace's cuts restore their snapshots: one database held in memory, or a file
    (or PostgreSQL schema) each cut reopens."""
    if not held:
        with database(tmp) as db:
            yield db
        return
    db = HeldDatabase()
    try:
        yield db
    finally:
        db.close()


def durable_boundaries(trace: Trace) -> list[tuple[int, str]]:
    """(step, boundary) of every crash cut of ``trace``: the boundaries the
    implementation crosses while running its requests, crash-free."""
    recorder = Recorder()
    impl = ImplSystem(trace, hook=recorder)
    out: list[tuple[int, str]] = []
    try:
        for n, step in enumerate(trace.steps):
            start = len(recorder.seen)
            impl.apply(step)
            if "request" in step:
                out += [(n, b.describe()) for b in recorder.seen[start:]]
    finally:
        impl.close()
    return out


def _crash_in_process(snap: _Snapshot, db: str, j: int, step: dict,
                      plant: Callable | None = None) -> ImplSystem | None:
    """Run ``step`` and crash at hook call ``j`` by an exception; None if never reached.
    ``plant``, given a held database, is run on its connection between the crash and the
    restart (what the crashed kernel's connection holds: ``held_restarts``)."""
    crash = CrashAt(index=j)
    impl = _restore(snap, db, crash)
    try:
        impl.apply(step)
    except Crash:
        pass
    if crash.fired is None:
        impl.close()
        return None
    if plant is not None:
        plant(db.conn)
    impl.hook = no_hook
    impl.crash()                                      # restart from disk, without the crash hook
    return impl


def _crash_by_kill(snap: _Snapshot, db: str, j: int, step: dict) -> ImplSystem | None:
    """Run ``step`` in a forked child that is killed with SIGKILL at hook call ``j``.

    The child persists the in-memory world at every hook call (effects happen only
    between a boundary's before and after), so what survives the kill is exactly
    what a real world would keep: the database file and the world at the crash."""
    world_file = snap.db + ".world.pickle"
    pid = os.fork()
    if pid == 0:                                      # the child
        try:
            crash = CrashAt(index=j, mode="kill")
            impl = _restore(snap, db, no_hook)

            def hook(boundary):
                _save_world(impl.world, world_file)
                crash(boundary)
            impl.hook = hook
            impl.crash()                              # reopen with the persisting hook
            impl.apply(step)
        finally:
            os._exit(3)                               # not killed: the boundary was not reached
    _, status = os.waitpid(pid, 0)
    if not (os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL):
        return None
    with open(world_file, "rb") as f:
        world = pickle.load(f)
    return ImplSystem.reopen(db, world, daemon=snap.daemon)


def _save_world(world, path: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        pickle.dump(world, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _one_cut(trace: Trace, k: int, j: int, step: dict, snap: _Snapshot, db: str,
             decision: dict | None, projections: list[dict], effected: Callable[[], dict],
             finish: bool, where: str, mode: str, scope: _Scope,
             tails: "Tails | None" = None) -> list[Divergence]:
    request = step["request"]
    crash = _crash_by_kill if mode == "kill" else _crash_in_process
    impl = crash(snap, db, j, step)
    if tails is not None:
        tails.last = tails.last_whole = False
    if impl is None:
        return [_divergence(trace, k, "boundary-not-reached", request, where, "no crash",
                            boundary=where)]
    try:
        # the same step re-sent on the same recovered state as an earlier passing cut's
        key = tails.recovery(impl, k) if tails is not None and scope.tasks is None else None
        if finish:                                    # the rest of the trace: run by each cut
            key = None
        if key is not None and tails.recovered_before(key):
            return []
        out = _recovered(trace, k, step, snap, impl, decision, projections, effected,
                         finish, where, scope, tails)
        if key is not None and not out:
            tails.recovered.add(key)
        return out
    finally:
        impl.close()


def _recovered(trace: Trace, k: int, step: dict, snap: _Snapshot, impl: ImplSystem,
               decision: dict | None, projections: list[dict], effected: Callable[[], dict],
               finish: bool, where: str, scope: _Scope,
               tails: "Tails | None") -> list[Divergence]:
    """A cut from its recovered state on: that state, the re-send, then the checks after it."""
    request = step["request"]
    prefix, landed = scope.of_model(projections[k]), scope.of_model(projections[k + 1])
    recovered = tails.projection(impl) if tails is not None and scope.tasks is None \
        else scope.of_impl(impl)                  # a fresh kernel's: once per recovered state
    at_prefix = not diff_values(prefix, recovered)
    at_landed = not diff_values(landed, recovered)
    if not (at_prefix or at_landed or not diff_values(scope.of_model(effected()), recovered)):
        return [_divergence(trace, k, "recovered-state", request,
                            "prefix, prefix + 1, or prefix with the step's external effect",
                            "none of them", diff_values(prefix, recovered), boundary=where)]
    want = _resend_answer(decision, landed=at_landed and not at_prefix)
    answer = impl.apply(step)                     # the client re-sends, same key
    after = scope.of_impl(impl)
    shown = _Shown(impl, after)
    out = is_valid_step(Observed(want, landed), Observed(answer, after),
                        trace=trace.id, step=k, system="impl", request=request, boundary=where,
                        what=("resend-decision", "after-resend")).divergences
    if scope.tasks is not None:                   # scoped: the ledger since the snapshot
        ledger = impl.kernel.verify_ledger(since=snap.head + 1)
        if not ledger.ok:
            out.append(_divergence(trace, k, "ledger", request, "hash links verify",
                                   ledger.to_json(), boundary=where))
        return out
    key = tails.key(impl, after, snap) if tails is not None and not finish else None
    if key is not None and tails.passed(key):
        return out                                # an equivalent cut's checks all passed
    tail = _after_resend(trace, k, request, impl, snap, where, finish and not out, shown)
    if key is not None and not tail:
        tails.add(key)
    return out + tail


def _after_resend(trace: Trace, k: int, request: dict, impl: ImplSystem, snap: _Snapshot,
                  where: str, finish: bool, shown: "_Shown | None" = None) -> list[Divergence]:
    """The thorough checks after the re-send: the ledger, the rebuild and the audit; then
    (``finish``) the rest of the trace, or convergence, the same checks again and its
    fixpoint (``shown``: the kernel's projection after the re-send, which the rebuild
    compares with while nothing was written since)."""
    consistent = _consistent(trace, k, request, impl.kernel, where, snap.replayed, snap.scratch,
                             (lambda: shown.live(impl)) if shown is not None else None)
    out = list(consistent)
    if finish:
        return out + _finish(trace, k, impl, where)
    before = _fingerprint(impl)
    report = impl.converge()
    if before is not None and _fingerprint(impl) == before:
        # convergence changed no row and no part of the world: the checks would read
        # exactly what they just read, so they find exactly what they just found
        out += [dataclasses.replace(d, boundary=where + " + converge") for d in consistent]
    else:
        out += _consistent(trace, k, request, impl.kernel, where + " + converge",
                           snap.replayed, snap.scratch)
    return out + _fixpoint(trace, k, request, impl.kernel, report, where + " + converge")


#: The bytes of a SQLite database's first page that count its writes, not its contents: the
#: file change counter (24-27) and the version-valid-for number and library version (92-99).
_COUNTERS = ((24, 28), (92, 100))


def _content(image: bytes) -> bytes:
    """A serialized SQLite database without its write counters: equal for equal pages."""
    out = bytearray(image)
    for a, b in _COUNTERS:
        out[a:b] = bytes(b - a)
    return bytes(out)


class Tails:
    """The thorough checks after a cut's re-send (``_after_resend``), decided once per state.

    Those checks read the database, the world, the kernel's answers (the projection it
    gives, already compared with the model's by the cut itself) and the replayed ledger
    the step's rebuilds start from. The cuts of one step mostly end in the same state (the
    step applied once, whether the crash came before or after its commit), so a cut whose
    database pages (write counters aside), pickled world, projection and rebuild start are
    byte for byte those of an earlier cut of the same trace whose checks all passed is
    decided by that one: counted in ``reused``. A failing state is never reused (each cut
    reports its own divergences); the equivalence is not used for PostgreSQL or a real
    world (no image), nor with ``finish`` (the rest of the trace depends on the step)."""

    def __init__(self) -> None:
        self.seen: set[bytes] = set()
        self.recovered: set[bytes] = set()
        self.projections: dict[bytes, dict] = {}   # recovered state -> its projection
        self.projected = 0     # recovered projections taken from an earlier cut's
        self.state: bytes | None = None
        self.reused = 0
        self.whole = 0         # of ``reused``: decided from the recovered state on
        self.last = self.last_whole = False

    def recovery(self, impl: ImplSystem, k: int) -> bytes | None:
        """The recovered state of a cut of step ``k``: its database pages (write counters
        aside) and pickled world, with the trace principal the daemon converges as (None:
        not known, for PostgreSQL and a real world). Recovery reopened the kernel from
        exactly these, so the same step re-sent on them answers the same, reaches the same
        state and finds the same there: the same cut from its recovery on. Sets ``state``,
        the key of the recovered state alone (any step's), for ``projection``."""
        self.state = _state_digest(impl, repr(impl.daemon).encode())
        if self.state is None:
            return None
        return hashlib.sha256(self.state + repr(k).encode()).digest()

    def projection(self, impl: ImplSystem) -> dict:
        """The projection of the kernel just reopened from the recovered state (``recovery``):
        computed once per such state; a kernel opened from the same pages and world projects
        the same (it reads nothing else)."""
        if self.state is None:
            return impl.project()
        shown = self.projections.get(self.state)
        if shown is None:
            shown = self.projections[self.state] = impl.project()
        else:
            self.projected += 1
        return shown

    def recovered_before(self, key: bytes) -> bool:
        """Whether an earlier cut of the same step recovered to this state and passed."""
        if key in self.recovered:
            self.reused += 1
            self.whole += 1
            self.last = self.last_whole = True
        return self.last

    def key(self, impl: ImplSystem, projection: dict, snap: _Snapshot) -> bytes | None:
        try:
            shown = json.dumps(projection, sort_keys=True, default=repr)
        except Exception:              # noqa: BLE001 -- a state that cannot be written: no key
            return None
        start = (snap.replayed.seq, snap.replayed.head) if snap.replayed is not None else None
        return _state_digest(impl, shown.encode(),
                             repr((start, snap.head, impl.daemon)).encode())

    def passed(self, key: bytes) -> bool:
        if key in self.seen:
            self.reused += 1
            self.last = True
        return self.last

    def add(self, key: bytes) -> None:
        self.seen.add(key)


class _Shown:
    """The kernel's projection as a cut observed it, with the rows its connection had changed
    then: still the live projection while no row was changed since (``live``)."""

    def __init__(self, impl: ImplSystem, projection: dict):
        self.projection = {k: v for k, v in projection.items() if k != "ready"}
        self.changes = getattr(impl.kernel.conn, "total_changes", None)
        self.world = _world_mark(impl.world)

    def live(self, impl: ImplSystem) -> dict | None:
        if self.changes is None or self.world is None or \
                impl.kernel.conn.total_changes != self.changes or \
                _world_mark(impl.world) != self.world:
            return None
        return self.projection


def _state_digest(impl: ImplSystem, *parts: bytes) -> bytes | None:
    """sha256 of a kernel's database pages (write counters aside), its pickled world and
    ``parts`` (None: not known, for PostgreSQL, a real world or one that cannot be pickled)."""
    world = _world_bytes(impl.world) if backend_of(impl.path).file else None
    if world is None:
        return None
    h = hashlib.sha256(_content(impl.kernel.conn.serialize()))
    for part in (world, *parts):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.digest()


def _world_bytes(world) -> bytes | None:
    if isinstance(world, RealWorld):
        return None
    try:
        return pickle.dumps(world)
    except Exception:                  # noqa: BLE001 -- a world that cannot be pickled: not known
        return None


def _world_mark(world) -> bytes | None:
    """What changes whenever anything of ``world`` a kernel reads may have: the in-memory world
    pickled, a real one's ``mark`` (None: not known, for a world that cannot be pickled)."""
    if isinstance(world, RealWorld):
        return world.mark()
    try:
        return pickle.dumps(world)
    except Exception:                  # noqa: BLE001 -- a world that cannot be pickled: not known
        return None


class _Lazy:
    """A value computed when first asked for (then kept)."""

    def __init__(self, make: Callable[[], object]):
        self.make, self.value, self.done = make, None, False

    def __call__(self):
        if not self.done:
            self.value, self.done = self.make(), True
        return self.value


def _fingerprint(impl: ImplSystem) -> tuple | None:
    """What the consistency checks read, in a form that changes whenever it may have: the
    rows this connection changed so far, the ledger's head and the world (``_world_mark``;
    None: not known, for PostgreSQL or a world that cannot be pickled)."""
    changes = getattr(impl.kernel.conn, "total_changes", None)
    world = _world_mark(impl.world) if changes is not None else None
    if world is None:
        return None
    return changes, impl.kernel.ledger_head(), world


def _resend_answer(decision: dict | None, *, landed: bool) -> dict | None:
    """The model's answer to the re-sent request: its decision, or a duplicate of it when the
    commit had landed (a hold is never journaled, so it is answered again as it was)."""
    if decision is not None and decision.get("decision") == "rejected" and \
            decision.get("code") in ("assignment-required", "dependency-not-done"):
        return decision
    return {"decision": "duplicate", "original": decision} if landed else decision


def _finish(trace: Trace, k: int, impl: ImplSystem, where: str) -> list[Divergence]:
    """The rest of the trace after the cut: the final projection equals the crash-free model's."""
    model = ModelSystem(trace, checking=False)
    for s in trace.steps:
        try:
            model.apply(s)
        except StepError:
            pass
    for s in trace.steps[k + 1:]:
        try:
            impl.apply(s)
        except StepError:
            pass
    return is_valid_step(Observed(None, model.project()), Observed(None, impl.project()),
                         trace=trace.id, step=None, system="impl", request=None, decided=False,
                         boundary=where, what=("final-decision", "final-projection")).divergences


def _fixpoint(trace: Trace, k: int, request: dict, kernel: Kernel, report,
              where: str) -> list[Divergence]:
    """After a crash cut, convergence reaches its fixpoint: no due action is left undone."""
    left = undone(kernel, report)
    if not left:
        return []
    return [_divergence(trace, k, "convergence-fixpoint", request, "no due action left undone",
                        left, boundary=where)]


def _consistent(trace: Trace, k: int, request: dict, kernel: Kernel, where: str,
                start=None, scratch=None,
                live: Callable[[], dict | None] | None = None) -> list[Divergence]:
    """The ledger verifies, rebuilds to the live projection (the replay of the whole ledger:
    from ``start``, the events before the step as replayed in the crash-free run, when the
    verified ledger still holds them; on ``scratch``, a scratch kernel kept open on it for
    the step's cuts), and the audit finds nothing. ``live``: the kernel's projection as the
    cut observed it, when nothing was written since (the rebuild compares with it rather than
    projecting the live kernel again)."""
    out = []
    ledger = kernel.verify_ledger()
    if not ledger.ok:
        out.append(_divergence(trace, k, "ledger", request, "hash links verify", ledger.to_json(),
                               boundary=where))
    rebuilt = kernel.rebuild(start=start, scratch=scratch, live=live() if live else None)
    if not rebuilt.ok:
        out.append(_divergence(trace, k, "rebuild", request, "rebuild equals the live projection",
                               rebuilt.differences[:5], boundary=where))
    report = kernel.audit()
    if not report.ok:
        out.append(_divergence(trace, k, "audit", request, "no finding", report.to_json(),
                               boundary=where))
    return out
