"""impl/README.md's walk of an embedding orchestrator runs as written."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "impl" / "README.md"


@pytest.mark.raw_tokens          # the client does the token bookkeeping itself
def test_the_client_walk_runs_as_written(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    walk = next(b for b in blocks if "Client(" in b and "MemoryWorld" in b)
    monkeypatch.chdir(tmp_path)
    exec(compile(walk, str(README), "exec"), {})          # its asserts are the test
    assert (tmp_path / "kernel.db").exists()


def test_the_orchestrator_loop_on_real_git_and_processes_runs_as_written(tmp_path):
    import subprocess
    import sys
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    worker = next(b for b in blocks if b.startswith("# worker.py"))
    orchestrator = next(b for b in blocks if b.startswith("# orchestrator.py"))
    (tmp_path / "worker.py").write_text(worker)
    (tmp_path / "orchestrator.py").write_text(orchestrator)
    proc = subprocess.run([sys.executable, "orchestrator.py"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]     # its asserts are the test
    main = subprocess.run(["git", "-C", str(tmp_path / "repo"), "log", "--format=%s", "main"],
                          capture_output=True, text=True, check=True).stdout.split("\n")
    assert {"schema", "api"} <= set(main)                # both workers' commits landed
