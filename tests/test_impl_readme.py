"""impl/README.md's walk of an embedding orchestrator runs as written."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "impl" / "README.md"


@pytest.mark.raw_tokens          # the client does the token bookkeeping itself
def test_the_client_walk_runs_as_written(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    walk = next(b for b in blocks if "Client(" in b)
    monkeypatch.chdir(tmp_path)
    exec(compile(walk, str(README), "exec"), {})          # its asserts are the test
    assert (tmp_path / "kernel.db").exists()
