"""A test of the conformance protocol leaves no process of its own running.

The harness starts kernels as child processes (``wgk.impl.serve``, a fake kernel, Node.js);
every path out of a run, a kernel refused at ``start`` included, must stop and reap them.
This fixture (autouse for the protocol's test files, see ``conftest``) lists the children of
the test process that run after the test and did not before it, gives them a moment to
exit, and fails the test naming them: a leak shows in the test that caused it.
"""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

#: The test files whose tests start kernels over the protocol.
PROTOCOL_FILES = ("test_external_", "test_protocol_", "test_conformance_core",
                  "test_impl_mutants_first", "test_no_leaked_children")
GRACE = 3.0


def running_children(pid: int | None = None) -> dict[int, str]:
    """The children of ``pid`` (this process) that still run (not zombies): pid -> command."""
    pid = os.getpid() if pid is None else pid
    out: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid and fields[0] != "Z":
            out[int(entry.name)] = cmd.strip()
    return out


def leaked(before: set[int], grace: float = GRACE) -> dict[int, str]:
    """The running children not in ``before``, once they had ``grace`` seconds to exit."""
    deadline = time.monotonic() + grace
    while True:
        left = {p: c for p, c in running_children().items() if p not in before}
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


@pytest.fixture(autouse=True)
def no_leaked_children(request):
    if not request.node.fspath.basename.startswith(PROTOCOL_FILES):
        yield
        return
    before = set(running_children())
    yield
    left = leaked(before)
    if left:
        for p in left:                       # stop them, so the next test starts clean
            try:
                os.kill(p, 9)
                os.waitpid(p, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        pytest.fail(f"the test left {len(left)} child process(es) running: "
                    + "; ".join(f"{p}: {c[:120]}" for p, c in sorted(left.items())),
                    pytrace=False)
