"""The kernel served over the conformance protocol (``python -m wgk.impl.serve``), a trace's wire setup and the test world's steps."""
