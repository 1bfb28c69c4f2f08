"""wgk's own kernel served over the conformance protocol (docs/conformance-protocol.md).

    python -m wgk.impl.serve

reads one JSON object per line on stdin and answers one per line on stdout,
like any other kernel a harness gates. It is built on the kernel's public API
only: ``Kernel``, the wire graph and seeds set up by ``setup_wire.setup``, the
environment steps of ``world_steps.apply_env``. Everything it must not lose
lives in the ``storage`` directory the harness names:

- ``kernel.db``: the kernel's SQLite database;
- ``world.pickle``: the in-memory world (processes, repository, clock), written
  atomically and fsynced at every durable boundary the kernel passes, after every
  request and after every environment step, so that a ``kill -9`` anywhere
  leaves the world as a real one would be: every effect done stays done;
- ``daemon.credential`` (mode 0600): the credential the daemon converges with,
  in a closed graph that declares a daemon principal (the kernel itself keeps
  only hashes of credentials).

The crash hook: an ``apply`` with ``"crash-after": k`` kills this process with
SIGKILL right after the k-th durable boundary the request passes (0: as soon as
it is read); every answer to ``apply`` says how many it passed (``boundaries``).
"""
from __future__ import annotations

import argparse
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

PROTOCOL = "wgk-conformance/2"

#: The environment steps this kernel takes (``crash`` and ``lost-response`` are the harness's).
ENV_STEPS = ("edit", "owner-dies", "pid-reuse", "move-target", "tick", "converge", "revoke")

CAPABILITIES = {"kinds": list(KINDS), "worlds": ["memory"], "processes": 1,
                "crash-hook": True, "env": list(ENV_STEPS)}


class Refused(Exception):
    """A message this kernel answers with an error (``step``: a step not possible now)."""

    def __init__(self, message: str, step: bool = False):
        super().__init__(message)
        self.step = step


def _write_atomic(path: str, data: bytes, mode: int = 0o644) -> None:
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class Served:
    """One kernel on one storage directory, answering protocol messages."""

    def __init__(self) -> None:
        self.kernel: Kernel | None = None
        self.world: MemoryWorld | None = None
        self.storage = ""
        self.daemon_credential: str | None = None
        self.crash_after: int | None = None
        self.passed = 0

    # --- durability of the world -----------------------------------------------------------

    def _save_world(self) -> None:
        _write_atomic(os.path.join(self.storage, "world.pickle"), pickle.dumps(self.world))

    def _hook(self, boundary: Boundary) -> None:
        self._save_world()
        if boundary.when != "after":
            return
        self.passed += 1
        if self.crash_after is not None and self.passed >= self.crash_after:
            os.kill(os.getpid(), signal.SIGKILL)

    def _open(self) -> None:
        self.kernel = Kernel(os.path.join(self.storage, "kernel.db"), self.world.environment(),
                             hook=self._hook)

    # --- messages ----------------------------------------------------------------------------

    def start(self, msg: dict) -> dict:
        self.storage = _storage(msg)
        graph = _graph(msg)
        self.world = MemoryWorld.create(target=graph.get("target", "main-0"))
        self._save_world()
        self._open()
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
            with open(os.path.join(self.storage, "world.pickle"), "rb") as f:
                self.world = pickle.load(f)
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
        if op not in ("apply", "env", "project"):
            raise Refused(f"unknown op {op!r}")
        if self.kernel is None:
            raise Refused("send start or recover first")
        return getattr(self, op)(msg)

    def close(self) -> None:
        if self.kernel is not None:
            self.kernel.close()


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
    parser.parse_args(argv)
    return serve(sys.stdin, sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
