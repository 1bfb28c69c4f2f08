"""The guard against leaked kernels (``no_leaked_children``) sees a child left running, and a
kernel refused at ``start`` (it speaks an older protocol) is stopped, not left behind."""
from __future__ import annotations

import subprocess
import sys

import pytest

from wgk.conformance.oracle.external import ExternalSystem, ProtocolError
from wgk.conformance.oracle.external_runs import Kernel, Unusable

from no_leaked_children import leaked, running_children

OLD = "import sys\nfor line in sys.stdin:\n    print('{\"started\": true}', flush=True)\n"


def test_the_guard_names_a_child_left_running_and_not_one_that_exited():
    before = set(running_children())
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        left = leaked(before, grace=0.2)
        assert list(left) == [proc.pid] and "time.sleep(60)" in left[proc.pid]
    finally:
        proc.kill()
        proc.wait()
    assert leaked(before, grace=0.2) == {}


def test_a_kernel_refused_at_start_is_stopped(tmp_path):
    old = tmp_path / "old.py"
    old.write_text(OLD)
    before = set(running_children())
    with pytest.raises(ProtocolError, match="capabilities"):
        ExternalSystem(f"{sys.executable} {old}", {"id": "g", "tasks": [{"name": "a", "deps": []}]})
    with pytest.raises(Unusable, match="capabilities"):
        Kernel(f"{sys.executable} {old}").probe()
    assert leaked(before, grace=1.0) == {}
