"""``external.wait_exit``: a wait for the kernel's process that wakes when it exits."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from wgk.conformance.oracle.external import wait_exit


def _python(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code])


def test_it_returns_the_exit_code_once_the_process_exits():
    p = _python("import time, sys; time.sleep(0.2); sys.exit(3)")
    t0 = time.monotonic()
    assert wait_exit(p, 30) == 3
    assert 0.2 <= time.monotonic() - t0 < 30
    assert p.returncode == 3                              # reaped: no zombie left
    assert wait_exit(p, 1) == 3                           # and again: the code it had


def test_a_process_still_running_at_the_timeout_is_a_timeout():
    p = _python("import time; time.sleep(30)")
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            wait_exit(p, 0.2)
        assert p.poll() is None
    finally:
        p.kill()
        p.wait()
