"""Drive an external implementation over JSON lines (docs/conformance-protocol.md).

The implementation runs as a subprocess: one JSON object per line on its
stdin, one JSON object per line back on its stdout. The harness owns a storage
directory and passes it at ``start``; a crash is a real ``kill -9`` of the
process (or, with the crash hook, the process killing itself right after a
durable boundary) followed by a restart on the same directory and a ``recover``.

Whatever goes wrong with the process (it does not start, answers what is not
JSON or not the reply asked for, takes longer than ``timeout`` seconds for one
message, or dies outside a planned crash) is a ``ProtocolError`` whose message
names the message, the step and the last lines the process wrote on stderr.
"""
from __future__ import annotations

import collections
import json
import os
import selectors
import shlex
import signal
import subprocess
import tempfile
import threading
import time

from wgk.conformance.oracle.coverage import Shadow
from wgk.conformance.oracle.systems import (
    StepError, credential_of, env_part, split_principal, token_hash,
)


PROTOCOL = "wgk-conformance/2"

#: Seconds one message may take before the process counts as hung (``--timeout``).
DEFAULT_TIMEOUT = 30.0

#: What ``start`` must answer with (docs/conformance-protocol.md, "Capabilities").
CAPABILITY_FIELDS = {"kinds": list, "worlds": list, "processes": int, "crash-hook": bool}


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


def wait_exit(proc: subprocess.Popen, timeout: float) -> int:
    """``proc.wait(timeout)`` woken the moment the process exits: ``Popen.wait`` with a
    timeout polls, sleeping up to 50 ms between looks, and a crash cut waits for two exits
    (the planned crash, the stop). Where Linux offers a pidfd the wait is on it; elsewhere
    ``Popen.wait``. ``subprocess.TimeoutExpired`` when it has not exited in ``timeout``."""
    if proc.returncode is None and hasattr(os, "pidfd_open"):
        try:
            fd = os.pidfd_open(proc.pid)
        except OSError:               # already reaped, or no pidfd here: Popen's own wait
            return proc.wait(timeout=timeout)
        try:
            with selectors.DefaultSelector() as sel:
                sel.register(fd, selectors.EVENT_READ)
                if not sel.select(timeout):
                    raise subprocess.TimeoutExpired(proc.args, timeout)
        finally:
            os.close(fd)
    return proc.wait(timeout=timeout)


class ProtocolError(RuntimeError):
    """The external process broke the protocol (bad JSON, wrong reply, hung, died)."""


class Crashed(Exception):
    """The process died during a request sent with ``crash-after`` (a planned crash)."""


def check_capabilities(caps) -> dict:
    """The capabilities a ``start`` reply declares, checked (``ProtocolError`` otherwise)."""
    if not isinstance(caps, dict):
        raise ProtocolError("reply to 'start' has no 'capabilities' object "
                            "(wgk-conformance/2 requires one)")
    for name, kind in CAPABILITY_FIELDS.items():
        if not isinstance(caps.get(name), kind) or (kind is int and isinstance(caps[name], bool)):
            raise ProtocolError(f"capabilities/{name}: expected {kind.__name__}, "
                                f"got {caps.get(name)!r}")
    if not all(isinstance(k, str) for k in caps["kinds"]):
        raise ProtocolError("capabilities/kinds: a list of request kinds")
    if not isinstance(caps.get("reset", False), bool):
        raise ProtocolError(f"capabilities/reset: expected bool, got {caps['reset']!r}")
    return caps


class Spares:
    """Processes of one kernel that declared ``reset`` (docs/conformance-protocol.md,
    "Reset"), each answered ``reset`` and waiting for its next ``start``: a system made with
    these takes one instead of starting the command again, and gives its own back when it
    closes instead of stopping it. A process that crashed is gone: its restart is a new one.
    ``close`` stops the idle ones. Safe to share among threads."""

    def __init__(self) -> None:
        self._idle: list[tuple[subprocess.Popen, collections.deque]] = []
        self._lock = threading.Lock()
        self._closed = False
        self.taken = 0                  # how many systems ran on a process reset for them

    def take(self) -> tuple[subprocess.Popen, collections.deque] | None:
        with self._lock:
            while self._idle:
                proc, lines = self._idle.pop()
                if proc.poll() is None:
                    self.taken += 1
                    lines.clear()           # what it wrote for an earlier system
                    return proc, lines
        return None

    def give(self, proc: subprocess.Popen, lines: collections.deque) -> bool:
        """Keep ``proc`` for the next system (False once closed: its owner stops it)."""
        with self._lock:
            if self._closed:
                return False
            self._idle.append((proc, lines))
            return True

    def close(self) -> None:
        with self._lock:
            idle, self._idle, self._closed = self._idle, [], True
        for proc, _ in idle:
            _stop(proc, DEFAULT_TIMEOUT)


def _stop(proc: subprocess.Popen, timeout: float) -> None:
    """``stop`` sent to an idle process, its exit awaited (killed when it does not exit)."""
    try:
        proc.stdin.write(b'{"op":"stop"}\n')
        proc.stdin.flush()
        proc.stdin.close()
        wait_exit(proc, timeout)
    except (OSError, ValueError, subprocess.TimeoutExpired):
        pass
    if proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


class ExternalSystem:
    """A system under test in another process, in any language."""

    name = "external"

    def __init__(self, command: str | list[str], graph: dict, initial: dict | None = None, *,
                 storage: str | None = None, timeout: float = DEFAULT_TIMEOUT,
                 join: "ExternalSystem | None" = None, world: dict | None = None,
                 spares: Spares | None = None):
        """``join``: another instance of the kernel already started; this one opens its
        storage with ``recover`` (several processes on one storage) instead of ``start``;
        ``world``: the real world the harness made, named in ``start``; ``spares``: where a
        process reset for another system is taken from (else the command is started) and
        where this one's goes when it closes, if the kernel declared ``reset``."""
        self.command = shlex.split(command) if isinstance(command, str) else list(command)
        if hasattr(graph, "graph"):                    # a Trace
            graph, initial = graph.graph, graph.initial
        self.graph, self.initial = graph, initial or {}
        if join is not None:
            storage = join.storage
        self._tmp = None if storage else tempfile.TemporaryDirectory(prefix="wgk-external-")
        self.storage = storage or self._tmp.name
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None
        self.steps = 0                  # the steps applied so far (a divergence names the next)
        self.boundaries: int | None = None   # durable boundaries the last request passed
        self.stderr: collections.deque[str] = collections.deque(maxlen=200)
        self.daemon_credential = None
        #: the model beside the kernel while coverage is recorded: the cells of what it is sent
        self.shadow = Shadow.of(graph, self.initial) if join is None else None
        self.spares = spares
        taken = spares.take() if spares is not None and join is None else None
        if taken is None:
            self._spawn()
        else:
            self.proc, self.stderr = taken
            self._buf = b""
        try:
            self._open(join, world)
        except BaseException:           # refused at start (or recover): stopped, not left behind
            self._kill()
            if self._tmp is not None:
                self._tmp.cleanup()
            raise
        #: the operator's revocation of a principal crosses as the env step ``revoke``, which
        #: a kernel takes only when it lists it (the probes then revoke through it)
        self.revocation_undeclared = "revoke" not in self.capabilities.get("env", ())
        if not self.revocation_undeclared:
            self.revoke = self._revoke

    def _open(self, join: "ExternalSystem | None", world: dict | None) -> None:
        """``start`` (or, joining another instance, ``recover``) and the capabilities."""
        graph = self.graph
        if join is not None:
            self._call({"op": "recover", "protocol": PROTOCOL, "storage": self.storage,
                        "graph": graph}, "recovered")
            self.capabilities = join.capabilities
        else:
            start = {"op": "start", "protocol": PROTOCOL, "storage": self.storage,
                     "graph": graph, "initial": bind_seed_tokens(self.initial),
                     "credentials": {p["name"]: credential_of(p["name"])
                                     for p in graph.get("principals", [])}}
            if world is not None:
                start["world"] = world
            reply = self._call(start, "started")
            self.capabilities = check_capabilities(reply.get("capabilities"))

    def _revoke(self, principal: str) -> None:
        self._call({"op": "env", "step": {"env": "revoke", "principal": principal}}, "ok")

    # --- the process ------------------------------------------------------------------------

    def _spawn(self) -> None:
        try:
            self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, start_new_session=True)
        except OSError as e:
            raise ProtocolError(f"cannot start {self.command[0]!r}: {e.strerror}") from None
        self._buf = b""
        lines = self.stderr
        err = self.proc.stderr

        def drain() -> None:
            for line in err:
                lines.append(line.decode("utf-8", "replace").rstrip("\n"))
        threading.Thread(target=drain, daemon=True).start()

    def last_stderr(self, n: int = 3) -> str:
        """The last ``n`` lines the process wrote on stderr (after a moment for them to
        arrive), or its exit code."""
        time.sleep(0.05)
        lines = [ln for ln in self.stderr if ln.strip()][-n:]
        code = self.proc.poll() if self.proc else None
        tail = " | ".join(lines) if lines else "nothing on stderr"
        return tail + (f" (exit code {code})" if code is not None else "")

    def _fail(self, what: str) -> ProtocolError:
        self._kill()
        return ProtocolError(f"step {self.steps}: {what}; stderr: {self.last_stderr()}")

    def _readline(self, op: str) -> str:
        """One line of stdout within the timeout ('' when the process closed it)."""
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + self.timeout
        while b"\n" not in self._buf:
            sel = selectors.DefaultSelector()
            sel.register(fd, selectors.EVENT_READ)
            try:
                ready = sel.select(max(0.0, deadline - time.monotonic()))
            finally:
                sel.close()
            if not ready:
                raise self._fail(f"no reply to {op!r} within {self.timeout:g}s (hung?)")
            chunk = os.read(fd, 65536)
            if not chunk:
                return ""
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode("utf-8", "replace") + "\n"

    def _call(self, message: dict, expect: str, crash: bool = False) -> dict:
        assert self.proc is not None
        op = message["op"]
        try:
            self.proc.stdin.write((json.dumps(message, separators=(",", ":")) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            if crash:
                raise Crashed() from None
            raise self._fail(f"{self.command[0]} exited before {op!r}") from None
        line = self._readline(op)
        if not line:
            if crash:
                wait_exit(self.proc, self.timeout)
                raise Crashed()
            raise self._fail(f"{self.command[0]} closed its output after {op!r}")
        try:
            reply = json.loads(line)
        except json.JSONDecodeError as e:
            raise self._fail(f"reply to {op!r} is not JSON (column {e.colno}): "
                             f"{line.strip()[:80]!r}") from None
        if not isinstance(reply, dict):
            raise self._fail(f"reply to {op!r} is not a JSON object: {line.strip()[:80]!r}")
        if "error" in reply:
            if reply.get("kind") == "step":
                raise StepError(str(reply["error"]))
            raise self._fail(f"{op}: error {str(reply['error'])[:200]!r}")
        if expect not in reply:
            raise self._fail(f"reply to {op!r} has no {expect!r}: {line.strip()[:80]!r}")
        return reply

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    def _reset(self) -> bool:
        """The process answered ``reset`` and waits among the spares for its next ``start``
        (False: no spares, the kernel did not declare ``reset``, or the process is gone)."""
        if (self.spares is None or self.capabilities.get("reset") is not True
                or self.proc is None or self.proc.poll() is not None):
            return False
        try:
            self._call({"op": "reset"}, "reset")
        except (ProtocolError, StepError):
            return False
        if self._buf or not self.spares.give(self.proc, self.stderr):
            return False                # more than its answer, or no one to hand it on to
        self.proc = None
        return True

    # --- the System interface ---------------------------------------------------------------

    def declares(self, kind: str) -> bool:
        return kind in self.capabilities["kinds"]

    def _apply_message(self, step: dict) -> dict:
        body, credential = split_principal(step["request"])
        msg = {"op": "apply", "request": body}
        if credential is not None:
            msg["credential"] = credential
        return msg

    def apply(self, step: dict) -> dict | None:
        if self.shadow is not None:
            self.shadow.step(step)
        try:
            if "request" in step:
                reply = self._call(self._apply_message(step), "decision")
                self.boundaries = reply.get("boundaries")
                return reply["decision"]
            wire = env_part(step)
            if wire.get("env") == "crash":
                self.crash()
            elif wire.get("env") != "lost-response":
                self._call({"op": "env", "step": wire}, "ok")
            return None
        finally:
            self.steps += 1

    def apply_crashing(self, step: dict, after: int) -> dict | None:
        """Send a request asking the process to die right after its ``after``-th durable
        boundary; restart and recover it. Returns the decision when the request passed fewer
        boundaries (no crash), else None."""
        msg = dict(self._apply_message(step), **{"crash-after": after})
        try:
            reply = self._call(msg, "decision", crash=True)
        except Crashed:
            self.steps += 1
            self.restart()
            return None
        self.steps += 1
        self.boundaries = reply.get("boundaries")
        return reply["decision"]

    def apply_credential(self, request: dict, credential) -> dict:
        """Send ``request`` with exactly ``credential`` (a hostile one: the harness never
        issued it) and return the decision."""
        return self._call({"op": "apply", "request": request, "credential": credential},
                          "decision")["decision"]

    def project(self) -> dict:
        return self._call({"op": "project"}, "projection")["projection"]

    def check(self) -> list[str]:
        return []

    def restart(self) -> None:
        """Start the process again on the same storage and recover it."""
        self._kill()
        self._spawn()
        self._call({"op": "recover", "protocol": PROTOCOL, "storage": self.storage,
                    "graph": self.graph}, "recovered")

    def crash(self) -> None:
        """kill -9, restart on the same storage, recover."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.restart()

    def close(self) -> None:
        try:
            if self._reset():
                return
            if self.proc and self.proc.poll() is None:
                try:
                    self._call({"op": "stop"}, "stopped")
                    wait_exit(self.proc, self.timeout)
                except (ProtocolError, StepError, subprocess.TimeoutExpired):
                    pass
                self._kill()
        finally:
            if self._tmp is not None:
                self._tmp.cleanup()
