"""Bugs planted in a copy of the Node.js kernel of examples/node-kernel: each shows, through
the protocol, as a failed replay or crash cut naming its trace and step."""
from __future__ import annotations

from pathlib import Path

import pytest

from node_kernel import NODE_BUG_TRACE, NODE_BUGS, NODE_KERNEL, NODE_TRACES, needs_node, wgk


@needs_node
@pytest.mark.parametrize("bug", sorted(NODE_BUGS))
def test_bugs_planted_in_the_node_kernel_show_with_trace_and_step(tmp_path, bug):
    old, new, where = NODE_BUGS[bug]
    source = NODE_KERNEL.read_text()
    assert source.count(old) == 1
    planted = tmp_path / "kernel.js"
    planted.write_text(source.replace(old, new))
    trace = next(t for t in NODE_TRACES if Path(t).stem == NODE_BUG_TRACE[bug])   # the one that shows it
    r = wgk("replay", trace, "--crash-cuts", "--external", f"node {planted}")
    assert r.returncode == 1, r.stdout + r.stderr
    assert where in r.stdout, r.stdout
