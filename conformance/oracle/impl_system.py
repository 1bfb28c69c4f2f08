"""The implementation as a system: ``wgk.impl.Kernel`` on SQLite in a temp dir, or on
PostgreSQL in a schema of its own (``use_backend(DSN)``; the schema is dropped on close).

The environment is the implementation's in-memory world (process table,
repository, clock), which survives a crash the way the real world would: a
``crash`` step closes the kernel (losing every cache and open transaction) and
opens a new one on the same database file and the same world. The other
environment steps are played on that world by ``wgk.impl.protocol.world_steps.apply_env``;
the graph, seeds and principals are set up by ``wgk.impl.protocol.setup_wire.setup``, the
same translation the served kernel (``wgk.impl.protocol.serve``) uses.

Principals: a trace names them (``graph.principals``) and its requests say who
sent them (``principal``). The oracle registers each declared principal with a
credential and sends every request with its sender's credential; a principal
the trace did not declare sends a credential the kernel never issued. The
secrets are bound here, per run, from a random oracle key (``secrets``): the
trace never holds one, and a reopened kernel is sent the same credentials.
"""
from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
from typing import Any, Iterator

from wgk.impl import BadRequest, EnvError, Kernel, MemoryWorld, no_hook
from wgk.impl.protocol.setup_wire import SetupError, initial_of as wire_initial_of, setup, wire_seeds

from wgk.impl.storage import pg
from wgk.impl.storage.store import Store, held as held_connection
from wgk.impl.front.principals import PrincipalError
from wgk.impl.protocol.world_steps import apply_env
from wgk.conformance.oracle.coverage import Shadow
from wgk.conformance.oracle.real_world import RealWorld
from wgk.conformance.oracle.systems import (
    CONVERGE, REVOKE, StepError, credential_of, daemon_principal, env_part, split_principal,
    token_hash, with_ready,
)

#: The database every ImplSystem opens: None for a SQLite file in its directory, or a
#: PostgreSQL DSN under which each gets a fresh schema (set by ``use_backend``).
_BACKEND: dict[str, str | None] = {"postgres": None}


def use_backend(dsn: str | None) -> None:
    """Run every ImplSystem from now on on SQLite (None) or on the PostgreSQL at ``dsn``."""
    if dsn is not None and not pg.is_dsn(dsn):
        raise ValueError(f"{dsn}: not a postgresql:// DSN")
    _BACKEND["postgres"] = dsn


def backend() -> str | None:
    return _BACKEND["postgres"]


#: The empty database at the current schema, by what makes it (``empty_image``).
_EMPTY: dict = {}


def empty_image() -> bytes:
    """The bytes of an empty SQLite kernel database at the current schema, made by the
    implementation's own store and migrations in memory (``Store.empty``'s way) once per process
    and kept under what makes them: the schema version, every migration's statements and the
    store's functions that open, migrate and seal (a migration or a store patched after it was
    made gets an image of its own). A kernel database starts as these bytes instead of being
    created and migrated statement by statement: the same tables, rows and schema version; its
    store still creates the file with its own mode and checks its schema on open."""
    from wgk.impl.storage import store as st
    cls = st.Store
    key = (st.SCHEMA_VERSION, tuple(sorted(st.MIGRATIONS.items())), cls, cls.__init__,
           cls.migrate, cls.after_migration, cls.schema_version, cls.chain_principals)
    image = _EMPTY.get(key)
    if image is None:
        made = cls(":memory:", pragmas=st.Pragmas(synchronous="OFF"))
        try:
            image = made.conn.serialize()
        finally:
            made.close()
        _EMPTY.clear()
        _EMPTY[key] = image
    return image


#: Bytes 18 and 19 of a SQLite database: its file format's write and read versions (2: WAL).
_FORMAT = slice(18, 20)


class HeldDatabase:
    """A crash cut's kernel database held in memory on one connection, kept for a trace's
    cuts: restored from a snapshot's pages (``restore``) and, after a crash, opened again by a
    restarted kernel on the same connection (``restarted``) instead of a new connection on a
    file. What a restarted process would find: the committed pages (a transaction the crash
    left open is rolled back, as a killed process's is) and nothing of the connection's own
    (no temporary table, no attached database, none of its settings changed: a connection
    holding one is replaced by a new connection on a copy of the committed pages). Only the
    connection is kept; every store, cache and kernel object is new. What it does not show is the file: the cuts that read a
    real file reopened by a new connection are those killed (``kill``), on a real world and on
    PostgreSQL (``crashcuts.in_memory``)."""

    path = ":memory:"

    def __init__(self) -> None:
        self.conn = held_connection(self.path)
        self.settings = _settings(self.conn)     # a new connection's
        self.replaced = 0            # connections replaced because one held its own state

    def restore(self, image: bytes) -> None:
        """The database becomes ``image`` (a file's pages; held in memory, rollback journal)."""
        conn = self.restarted()
        image = bytearray(image)
        image[_FORMAT] = b"\x01\x01"
        conn.deserialize(bytes(image))

    def restarted(self) -> sqlite3.Connection:
        """The connection as a restarted process would open it (see the class)."""
        conn = self.conn
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        own = conn.execute("SELECT count(*) FROM temp.sqlite_master").fetchone()[0] or \
            any(row[1] not in ("main", "temp") for row in conn.execute("PRAGMA database_list")) \
            or _settings(conn) != self.settings
        if own:
            pages = conn.serialize()
            conn.close()
            self.conn = conn = held_connection(self.path)
            conn.deserialize(pages)
            self.replaced += 1
        return conn

    def store(self, hook=no_hook) -> Store:
        return Store(self.path, hook=hook, conn=self.restarted())

    def restored(self, image: bytes, hook=no_hook) -> Store:
        """``restore(image)`` and a store on it, as a process starting on those pages opens
        it: the connection checked once (``restarted``), nothing run on it in between."""
        self.restore(image)
        return Store(self.path, hook=hook, conn=self.conn)

    def close(self) -> None:
        self.conn.close()


#: A connection's own settings a store does not set when it opens (``HeldDatabase.restarted``:
#: one that changed since the connection was new is not what a restarted process finds).
_SETTINGS = ("foreign_keys", "query_only", "recursive_triggers", "defer_foreign_keys",
             "reverse_unordered_selects", "ignore_check_constraints", "automatic_index",
             "cell_size_check", "trusted_schema", "cache_size", "temp_store")


def _settings(conn: sqlite3.Connection) -> tuple:
    return tuple(conn.execute(f"PRAGMA {name}").fetchone()[0] for name in _SETTINGS)


@contextlib.contextmanager
def database(workdir: str) -> Iterator[str]:
    """A fresh kernel database: ``workdir``/kernel.db, or a new PostgreSQL schema."""
    dsn = _BACKEND["postgres"]
    if dsn is None:
        yield os.path.join(workdir, "kernel.db")
        return
    with pg.scratch_schema(dsn, "wgk_impl") as db:
        yield db


def initial_of(seed: dict, target: str):
    """The implementation's seed for a trace's initial attempt (its symbolic token bound)."""
    return wire_initial_of(wire_seeds({"_": seed}, token_hash)["_"], target)


def credentials(graph: dict) -> dict[str, str]:
    """The credential this run binds to each principal a trace declares."""
    return {p["name"]: credential_of(p["name"]) for p in graph.get("principals", [])}


class ImplSystem:
    """wgk.impl behind the System interface (apply, project, check, close)."""

    name = "impl"

    def __init__(self, source: Any, initial: dict | None = None, *, workdir: str | None = None,
                 hook=no_hook, world: Any = "memory", follow: Any = None):
        """``follow``: the lockstep's reference model of the same run, stepped before this
        system on every step: the decision coverage reads the requests' decisions off it
        (``Shadow.following``) instead of a model run of its own."""
        graph = getattr(source, "graph", source)
        initial = getattr(source, "initial", initial) or {}
        self.shadow = (Shadow.of(source, initial) if follow is None  # decision coverage, while
                       else Shadow.following(follow))              # recording
        self._tmp = None if workdir else tempfile.TemporaryDirectory(prefix="wgk-impl-")
        self.workdir = workdir or self._tmp.name
        self._db = database(self.workdir)
        self.path = self._db.__enter__()
        target = graph.get("target", "main-0")
        self.world = (world if isinstance(world, RealWorld) else
                      RealWorld(os.path.join(self.workdir, "world"), target) if world == "real"
                      else MemoryWorld.create(target=target))
        self.hook = hook
        self.held = None
        self.daemon = daemon_principal(graph)
        self.kernel = Kernel(self.path, self.world.environment(), hook=hook,
                             image=None if pg.is_dsn(self.path) or os.path.exists(self.path)
                             else empty_image())
        try:
            setup(self.kernel, graph, wire_seeds(initial, token_hash), credentials(graph))
        except SetupError as e:
            raise StepError(str(e)) from None

    @classmethod
    def reopen(cls, path: str, world: MemoryWorld, *, hook=no_hook,
               daemon: str | None = None, held: HeldDatabase | None = None,
               store: Store | None = None) -> "ImplSystem":
        """An implementation on an existing database file and world (a restored snapshot);
        ``held``: on that database held in memory (``path`` its ":memory:"); ``store``: the
        first kernel's, already opened on it (``HeldDatabase.restored``)."""
        self = cls.__new__(cls)
        self.held = held
        self._tmp = None
        self.shadow = None
        self._db = None
        self.workdir = os.path.dirname(path) if not pg.is_dsn(path) else tempfile.gettempdir()
        self.path = path
        self.world = world
        self.hook = hook
        self.daemon = daemon
        self.kernel = self._open(store)
        return self

    def _open(self, store: Store | None = None) -> Kernel:
        """A kernel as a process starting on this database and world opens it (``store``:
        on that store, opened so already)."""
        held = self.held
        if store is None and held is not None:
            store = held.store(self.hook)
        return Kernel(self.path, self.world.environment(), hook=self.hook, store=store)

    def apply(self, step: dict) -> dict | None:
        if self.shadow is not None:
            self.shadow.step(step)
        if "request" in step:
            try:
                body, credential = split_principal(step["request"])
                return self.kernel.handle(body, credential)
            except BadRequest as e:
                raise StepError(str(e)) from None
        wire = env_part(step)
        if wire.get("env") == "crash":
            self.crash()
        elif wire.get("env") == CONVERGE:
            self.converge()
        elif wire.get("env") == REVOKE:
            self.revoke(wire.get("principal"))
        elif wire.get("env") != "lost-response":
            try:
                apply_env(self.kernel, wire)
            except EnvError as e:
                raise StepError(str(e)) from None
        return None

    def revoke(self, name: Any) -> None:
        """The operator revokes a principal's credential (a ledger event of the kernel)."""
        try:
            self.kernel.principals.revoke(name)
        except PrincipalError as e:
            raise StepError(str(e)) from None

    def converge(self):
        """The daemon converges (with the trace's daemon credential, when it declares one)."""
        return self.kernel.converge(credential=credential_of(self.daemon))

    def crash(self) -> None:
        """Lose everything volatile; reopen from the database file and the same world."""
        try:
            self.kernel.close()
        except Exception:
            pass
        self.kernel = self._open()

    def project(self) -> dict:
        return with_ready(self.kernel.project(), self.kernel.ready())

    def project_without_journal(self) -> dict:
        """``project()`` without its ``journal`` (the stored answers, every one read and parsed
        again at each projection): what the probes compare before and after a refusal, which
        may add its own answer to the journal and nothing else."""
        return _unjournaled(self.kernel)

    def check(self) -> list[str]:
        return []

    def close(self) -> None:
        try:
            self.kernel.close()
            if hasattr(self.world, "close"):
                self.world.close()
        finally:
            if self._db is not None:
                self._db.__exit__(None, None, None)
                self._db = None
            if self._tmp is not None:
                self._tmp.cleanup()


def _unjournaled(kernel: Kernel) -> dict:
    out = with_ready(kernel.project(journal_keys=[]), kernel.ready())
    del out["journal"]
    return out


def factory():
    """For ``wgk fuzz --system impl``: graph spec -> a fresh implementation."""
    return lambda graph: ImplSystem(graph)


class TwoKernels(ImplSystem):
    """Two kernels (two connections) on one database and one world, taking a trace's steps in
    turn; the state is read through a third connection that takes no step, so that it sees
    what both committed (no cache may outlive another connection's commit) and reading the
    state refreshes neither kernel's caches: the kernel taking the next step must find the
    other's commit itself (a principal revoked through the other is refused)."""

    name = "impl"

    def __init__(self, source: Any, initial: dict | None = None, **kw):
        super().__init__(source, initial, **kw)
        self.kernels = [self.kernel, Kernel(self.path, self.world.environment(), hook=self.hook)]
        self.reader = Kernel(self.path, self.world.environment(), hook=self.hook)
        self.turn = 0

    def apply(self, step: dict) -> dict | None:
        self.kernel = self.kernels[self.turn % 2]
        self.turn += 1
        return super().apply(step)

    def project(self) -> dict:
        return with_ready(self.reader.project(), self.reader.ready())

    def project_without_journal(self) -> dict:
        return _unjournaled(self.reader)

    def crash(self) -> None:
        """Both kernels and the reader lose everything volatile and reopen on the same
        database and world."""
        for k in self.kernels + [self.reader]:
            try:
                k.close()
            except Exception:
                pass
        self.kernels = [Kernel(self.path, self.world.environment(), hook=self.hook) for _ in (0, 1)]
        self.reader = Kernel(self.path, self.world.environment(), hook=self.hook)
        self.kernel = self.kernels[(self.turn - 1) % 2]

    def close(self) -> None:
        try:
            for k in (self.kernels[self.turn % 2], self.reader):
                k.close()
        finally:
            super().close()
