"""README's walk of who may say what runs as written, with real git and a real process."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def walk() -> str:
    text = README.read_text()
    start = text.index("**Who may say what.**")
    return re.search(r"```sh\n(.*?)```", text[start:], re.S).group(1)


def test_the_credentials_and_tokens_walk_runs_as_written(tmp_path):
    lines = walk().splitlines()
    expected = [line.split("# -> ", 1)[1].strip() for line in lines if "# -> " in line]
    assert len(expected) >= 6
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    env.pop("WGK_CREDENTIAL_FILE", None)
    run = subprocess.run(["bash", "-c", "\n".join(lines)], cwd=tmp_path, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    out = run.stdout
    at = 0
    for want in expected:                     # each expected line, in order
        found = out.find(want, at)
        assert found >= 0, f"{want!r} not printed after offset {at}:\n{out}"
        at = found + len(want)
    for f in ("k.db", "k.db.credential", "w1.credential", "w2.credential", "a.token"):
        assert (tmp_path / f).stat().st_mode & 0o777 == 0o600, f
