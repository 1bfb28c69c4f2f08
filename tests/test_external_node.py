"""The Node.js kernel of examples/node-kernel through the protocol: it passes every trace it
declares, with a crash cut at every durable boundary of every step (``wgk replay
--crash-cuts --external``). Its planted bugs are tests/test_external_node_bugs.py."""
from __future__ import annotations

from node_kernel import ALL_KINDS, NODE_KERNEL, NODE_OWN, NODE_TRACES, needs_node, wgk


@needs_node
def test_node_kernel_passes_what_it_declares_with_crash_cuts():
    r = wgk("replay", *NODE_TRACES, "--crash-cuts", "--external", f"node {NODE_KERNEL}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{len(NODE_TRACES) - 1 + len(list(NODE_OWN.glob('*.json')))} passed, 0 failed, 0 skipped (external: implements {ALL_KINDS} of {ALL_KINDS} kinds" in r.stdout
