"""Drive an external implementation over JSON lines (docs/conformance-protocol.md).

The implementation runs as a subprocess: one JSON object per line on its
stdin, one JSON object per line back on its stdout. The harness owns a storage
directory and passes it at ``start``; a crash is a real ``kill -9`` of the
process followed by a restart on the same directory and a ``recover``.
"""
from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import tempfile

from wgk.conformance.oracle.systems import (
    StepError, credential_of, env_part, split_principal, token_hash,
)


PROTOCOL = "wgk-conformance/1"


def bind_seed_tokens(initial: dict) -> dict:
    """A trace's seeds as an implementation receives them: a seeded attempt's token is the
    sha256 of the secret bound to its symbolic name (what its process will present)."""
    out = {}
    for task, seed in initial.items():
        a = seed.get("attempt") if isinstance(seed, dict) else None
        if isinstance(a, dict) and isinstance(a.get("token"), str):
            seed = dict(seed, attempt=dict(a, token=token_hash(a["token"])))
        out[task] = seed
    return out


class ProtocolError(RuntimeError):
    """The external process broke the protocol (bad JSON, wrong reply, died)."""


class ExternalSystem:
    """A system under test in another process, in any language."""

    name = "external"

    def __init__(self, command: str | list[str], graph: dict, initial: dict | None = None, *,
                 storage: str | None = None, timeout: float = 30.0):
        self.command = shlex.split(command) if isinstance(command, str) else list(command)
        self.graph, self.initial = graph, initial or {}
        self._tmp = None if storage else tempfile.TemporaryDirectory(prefix="wgk-external-")
        self.storage = storage or self._tmp.name
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None
        self._spawn()
        self._call({"op": "start", "protocol": PROTOCOL, "storage": self.storage,
                    "graph": graph, "initial": bind_seed_tokens(self.initial),
                    "credentials": {p["name"]: credential_of(p["name"])
                                    for p in graph.get("principals", [])}}, "started")

    def _spawn(self) -> None:
        try:
            self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True, bufsize=1)
        except OSError as e:
            raise ProtocolError(f"cannot start {self.command[0]!r}: {e.strerror}") from None

    def _call(self, message: dict, expect: str) -> dict:
        assert self.proc is not None
        try:
            self.proc.stdin.write(json.dumps(message, separators=(",", ":")) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise ProtocolError(f"{self.command[0]} exited: {self._stderr()}") from None
        line = self.proc.stdout.readline()
        if not line:
            raise ProtocolError(f"{self.command[0]} closed its output after {message['op']!r}: "
                                f"{self._stderr()}")
        try:
            reply = json.loads(line)
        except json.JSONDecodeError as e:
            raise ProtocolError(f"reply to {message['op']!r} is not JSON (column {e.colno}): "
                                f"{line[:80]!r}") from None
        if "error" in reply:
            if reply.get("kind") == "step":
                raise StepError(str(reply["error"]))
            raise ProtocolError(f"{message['op']}: {reply['error']}")
        if expect not in reply:
            raise ProtocolError(f"reply to {message['op']!r} has no {expect!r}: {line[:80]!r}")
        return reply

    def _stderr(self) -> str:
        if self.proc is None or self.proc.poll() is None:
            return "no reply"
        lines = (self.proc.stderr.read() or "").strip().splitlines()
        return lines[-1] if lines else f"exit code {self.proc.returncode}"

    def apply(self, step: dict) -> dict | None:
        if "request" in step:
            body, credential = split_principal(step["request"])
            msg = {"op": "apply", "request": body}
            if credential is not None:
                msg["credential"] = credential
            return self._call(msg, "decision")["decision"]
        wire = env_part(step)
        if wire.get("env") == "crash":
            self.crash()
        elif wire.get("env") != "lost-response":
            self._call({"op": "env", "step": wire}, "ok")
        return None

    def project(self) -> dict:
        return self._call({"op": "project"}, "projection")["projection"]

    def check(self) -> list[str]:
        return []

    def crash(self) -> None:
        """kill -9, restart on the same storage, recover."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._spawn()
        self._call({"op": "recover", "protocol": PROTOCOL, "storage": self.storage,
                    "graph": self.graph}, "recovered")

    def close(self) -> None:
        if self.proc and self.proc.poll() is None:
            try:
                self._call({"op": "stop"}, "stopped")
            except (ProtocolError, StepError):
                pass
            self.proc.wait(timeout=self.timeout)
        if self._tmp is not None:
            self._tmp.cleanup()
