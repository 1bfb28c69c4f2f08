"""wgk's own kernel served over the conformance protocol (docs/conformance-protocol.md).

    python -m wgk.impl.serve

reads one JSON object per line on stdin and answers one per line on stdout,
like any other kernel a harness gates. It is built on the kernel's public API
only: ``Kernel``, the wire graph and seeds set up by ``setup_wire.setup``, the
environment steps of ``world_steps.apply_env``. Everything it must not lose
lives in the ``storage`` directory the harness names:

- ``kernel.db``: the kernel's SQLite database (or, served with ``--postgres DSN``,
  ``database``: the DSN of the PostgreSQL schema made for this storage at ``start``);
- ``world.pickle``: the in-memory world (processes, repository, clock), written
  atomically and fsynced at every durable boundary the kernel passes, after every
  request and after every environment step, so that a ``kill -9`` anywhere
  leaves the world as a real one would be: every effect done stays done;
- ``daemon.credential`` (mode 0600): the credential the daemon converges with,
  in a closed graph that declares a daemon principal (the kernel itself keeps
  only hashes of credentials).

The world: the in-memory one, or the real one the harness made and names in ``start``
(``"world": {"kind": "real", "repository": DIR, "worktrees": DIR}``): its git repository
behind the trace's content names (``named_git``), the processes of ``/proc`` (the harness
starts and kills the owners), a logical clock; it is pickled like the in-memory one (the
content names it learnt are its state).

Several instances on one storage (it declares ``processes``: ``MAX_PROCESSES``): the
first is sent ``start``, the others ``recover`` (they open what is there). Each reads
``world.pickle`` again before a message when another instance replaced it, and writes it
only when its own message changed the world (a rejected request leaves it to the
instance that won): the world file is last-writer-wins, which holds for steps taken in turn and
for races with one winner per round, not for two effects made at once. The database is the
kernel's own concern (SQLite's writer lock, PostgreSQL's row locks). Each instance holds a
shared lock on ``instances.lock`` while it runs; with ``--postgres``, the last one to stop
drops the schema.

``reset`` (declared): the kernel is closed as at ``stop`` and the process waits for the
next ``start`` or ``recover``, so that a harness runs its next case without starting
Python and importing the kernel again.

The crash hook: an ``apply`` with ``"crash-after": k`` kills this process with
SIGKILL right after the k-th durable boundary the request passes (0: as soon as
it is read); every answer to ``apply`` says how many it passed (``boundaries``).
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import pickle
import signal
import sys
from typing import Any

from ..world.env import EnvError, MemoryWorld
from ..front.principals import PrincipalError
from ..contract.errors import BadRequest, GraphError, SeedError, StoreError
from ..world.hooks import Boundary
from ..front.kernel import Kernel
from .setup_wire import SetupError, daemon_of, setup
from ..contract.vocabulary import KINDS
from .world_steps import apply_env
from ..storage.dsn import is_dsn

PROTOCOL = "wgk-conformance/2"

#: The environment steps this kernel takes (``crash`` and ``lost-response`` are the harness's).
ENV_STEPS = ("edit", "owner-dies", "pid-reuse", "move-target", "tick", "converge", "revoke")

#: How many instances may run on one storage at once.
MAX_PROCESSES = 8

CAPABILITIES = {"kinds": list(KINDS), "worlds": ["memory", "real"], "processes": MAX_PROCESSES,
                "crash-hook": True, "env": list(ENV_STEPS), "reset": True}


class Refused(Exception):
    """A message this kernel answers with an error (``step``: a step not possible now)."""

    def __init__(self, message: str, step: bool = False):
        super().__init__(message)
        self.step = step


def _write_atomic(path: str, data: bytes, mode: int = 0o644) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"        # one per instance: several may write at once
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class Served:
    """One kernel on one storage directory, answering protocol messages."""

    def __init__(self, postgres: str | None = None) -> None:
        self.postgres = postgres        # a PostgreSQL server's DSN: the database lives there
        self.kernel: Kernel | None = None
        self.world: MemoryWorld | None = None
        self.storage = ""
        self.daemon_credential: str | None = None
        self.crash_after: int | None = None
        self.passed = 0
        self._saved: tuple[bytes, tuple] | None = None   # the world file as last read or written
        self._lock: int | None = None                    # the shared lock on instances.lock
        self._schema: str | None = None

    # --- durability of the world -----------------------------------------------------------

    def _world_path(self) -> str:
        return os.path.join(self.storage, "world.pickle")

    def _save_world(self) -> None:
        data = pickle.dumps(self.world)
        if self._saved is not None and self._saved[0] == data:
            return                      # unchanged: another instance's write stays
        path = self._world_path()
        _write_atomic(path, data)
        self._saved = (data, _stamp(path))

    def _load_world(self) -> None:
        """The world as the storage holds it (read again only when another instance replaced
        the file since this one last read or wrote it)."""
        path = self._world_path()
        stamp = _stamp(path)
        if self._saved is not None and self._saved[1] == stamp:
            return
        with open(path, "rb") as f:
            data = f.read()
        self.world = pickle.loads(data)
        self._saved = (data, stamp)
        if self.kernel is not None:
            self.kernel.env = self.world.environment()

    def _hook(self, boundary: Boundary) -> None:
        self._save_world()
        if boundary.when != "after":
            return
        self.passed += 1
        if self.crash_after is not None and self.passed >= self.crash_after:
            os.kill(os.getpid(), signal.SIGKILL)

    def _database(self, fresh: bool) -> str:
        """The kernel's database: a SQLite file in the storage, or a PostgreSQL schema named
        after the storage (made afresh at ``start``; its DSN kept in ``database``)."""
        if self.postgres is None:
            return os.path.join(self.storage, "kernel.db")
        from ..storage import pg                 # lazy: only a kernel served with --postgres
        path = os.path.join(self.storage, "database")
        if fresh:
            digest = hashlib.sha256(os.path.realpath(self.storage).encode()).hexdigest()
            self._schema = f"wgk_serve_{digest[:16]}"
            pg.drop_schema(self.postgres, self._schema)
            pg.create_schema(self.postgres, self._schema)
            _write_atomic(path, self._schema.encode())
        else:
            with open(path) as f:
                self._schema = f.read().strip()
        return pg.with_schema(self.postgres, self._schema)

    def _open(self, fresh: bool = False) -> None:
        if self._lock is None:
            self._lock = os.open(os.path.join(self.storage, "instances.lock"),
                                 os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self._lock, fcntl.LOCK_SH)
        self.kernel = Kernel(self._database(fresh), self.world.environment(), hook=self._hook)

    # --- messages ----------------------------------------------------------------------------

    def start(self, msg: dict) -> dict:
        self.storage = _storage(msg)
        graph = _graph(msg)
        self.world = _world(msg.get("world"), graph.get("target", "main-0"))
        self._save_world()
        self._open(fresh=True)
        credentials = msg.get("credentials") or {}
        try:
            setup(self.kernel, graph, msg.get("initial") or {}, credentials)
        except (SetupError, SeedError, GraphError) as e:
            raise Refused(str(e), step=True) from None
        daemon = daemon_of(graph)
        if daemon is not None and daemon in credentials:
            self.daemon_credential = credentials[daemon]
            _write_atomic(os.path.join(self.storage, "daemon.credential"),
                          self.daemon_credential.encode(), 0o600)
        self._save_world()
        return {"started": True, "capabilities": CAPABILITIES}

    def recover(self, msg: dict) -> dict:
        self.storage = _storage(msg)
        try:
            self._load_world()
        except OSError as e:
            raise Refused(f"{self.storage}: nothing to recover ({e.strerror})") from None
        path = os.path.join(self.storage, "daemon.credential")
        if os.path.exists(path):
            with open(path) as f:
                self.daemon_credential = f.read()
        self._open()
        return {"recovered": True}

    def apply(self, msg: dict) -> dict:
        crash = msg.get("crash-after")
        if crash is not None and (not isinstance(crash, int) or crash < 0):
            raise Refused(f"crash-after: a boundary count (0 or more), not {crash!r}")
        self.crash_after, self.passed = crash, 0
        if crash == 0:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            decision = self.kernel.handle(msg["request"], msg.get("credential"))
        except BadRequest as e:
            raise Refused(str(e), step=True) from None
        finally:
            self.crash_after = None
        self._save_world()
        return {"decision": decision, "boundaries": self.passed}

    def env(self, msg: dict) -> dict:
        step = msg["step"]
        kind = step.get("env") if isinstance(step, dict) else None
        if kind in ("crash", "lost-response"):
            return {"ok": True}
        self.passed = 0
        if getattr(self.world, "kind", "memory") == "real" and kind in ("owner-dies", "pid-reuse"):
            raise Refused(f"{kind}: in the real world the harness's own step (it kills the "
                          f"owner it started)", step=True)
        try:
            if kind == "converge":
                self.kernel.converge(credential=self.daemon_credential)
            elif kind == "revoke":             # the operator revokes a principal (a ledger event)
                self.kernel.principals.revoke(step.get("principal"))
            else:
                apply_env(self.kernel, step)
        except (EnvError, PrincipalError) as e:
            raise Refused(str(e), step=True) from None
        self._save_world()
        return {"ok": True}

    def project(self, msg: dict) -> dict:
        return {"projection": dict(self.kernel.project(), ready=sorted(self.kernel.ready()))}

    def handle(self, msg: Any) -> dict:
        if not isinstance(msg, dict):
            raise Refused("a message is a JSON object")
        op = msg.get("op")
        if op in ("start", "recover"):
            if msg.get("protocol") != PROTOCOL:
                raise Refused(f"unsupported protocol {msg.get('protocol')!r} (this is {PROTOCOL})")
            return self.start(msg) if op == "start" else self.recover(msg)
        if op == "stop":
            return {"stopped": True}
        if op == "reset":
            return self.reset()
        if op not in ("apply", "env", "project"):
            raise Refused(f"unknown op {op!r}")
        if self.kernel is None:
            raise Refused("send start or recover first")
        self._load_world()
        return getattr(self, op)(msg)

    def reset(self) -> dict:
        """Closed as at a stop and everything forgotten: the next message is a ``start`` or a
        ``recover``, on any storage, as to a process just started."""
        postgres = self.postgres
        self.close()
        self.__init__(postgres)
        return {"reset": True}

    def close(self) -> None:
        if self.kernel is not None:
            self.kernel.close()
        if self._lock is None:
            return
        fcntl.flock(self._lock, fcntl.LOCK_UN)
        try:                            # the last instance on the storage drops its schema
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return
        finally:
            os.close(self._lock)
            self._lock = None
        if self.postgres is not None and self._schema is not None:
            from ..storage import pg             # lazy: only a kernel served with --postgres
            pg.drop_schema(self.postgres, self._schema)


def _stamp(path: str) -> tuple:
    st = os.stat(path)
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _world(world, target: str):
    """The world a ``start`` names: the in-memory one (absent, or ``{"kind": "memory"}``), or
    the real one the harness made, ``{"kind": "real", "repository": DIR, "worktrees": DIR}``
    (the repository's target commit is the graph's ``target``)."""
    if world is None or world == {"kind": "memory"}:
        return MemoryWorld.create(target=target)
    if not isinstance(world, dict) or world.get("kind") != "real":
        raise Refused(f"world: {{\"kind\": \"memory\"}} or {{\"kind\": \"real\", ...}}, not {world!r}")
    for name in ("repository", "worktrees"):
        if not isinstance(world.get(name), str) or not world[name]:
            raise Refused(f"world/{name}: a directory name")
    from ..world.named_git import NamedRealWorld   # lazy: git and /proc for the real world only
    try:
        return NamedRealWorld(world["repository"], world["worktrees"], target)
    except (EnvError, OSError) as e:
        raise Refused(f"world/repository: {e}") from None


def _storage(msg: dict) -> str:
    storage = msg.get("storage")
    if not isinstance(storage, str) or not storage:
        raise Refused("storage: a directory name")
    os.makedirs(storage, exist_ok=True)
    return storage


def _graph(msg: dict) -> dict:
    graph = msg.get("graph")
    if not isinstance(graph, dict):
        raise Refused("graph: an object")
    return graph


def serve(lines, out, served: Served | None = None) -> int:
    """Answer every message of ``lines`` on ``out`` (``served``: the kernel, default a new one)."""
    served = served or Served()
    try:
        for line in lines:
            if not line.strip():
                continue
            try:
                reply = served.handle(json.loads(line))
            except json.JSONDecodeError as e:
                reply = {"error": f"not JSON (column {e.colno})"}
            except Refused as e:
                reply = {"error": str(e), **({"kind": "step"} if e.step else {})}
            except (KeyError, TypeError, ValueError, StoreError) as e:
                reply = {"error": f"bad message: {type(e).__name__}: {e}"}
            out.write(json.dumps(reply, separators=(",", ":")) + "\n")
            out.flush()
            if reply.get("stopped"):
                break
    finally:
        served.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m wgk.impl.serve",
        description="serve wgk's kernel over the JSON-lines conformance protocol "
                    f"({PROTOCOL}) on stdin and stdout")
    parser.add_argument("--postgres", metavar="DSN",
                        help="keep the database in a schema of this PostgreSQL server "
                             "(postgresql://...) instead of a SQLite file in the storage")
    args = parser.parse_args(argv)
    if args.postgres is not None and not is_dsn(args.postgres):
        parser.error(f"--postgres: not a postgresql:// URL: {args.postgres}")
    return serve(sys.stdin, sys.stdout, Served(args.postgres))


if __name__ == "__main__":
    sys.exit(main())
