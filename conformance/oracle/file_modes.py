"""The environment contract's file modes: what a kernel writes is readable by its owner only.

Under umask 022 and under umask 077, one child process (so the gate's own umask is never
touched) makes a git repository and runs the kernel's command line as a user would:
``init`` (the database and the operator credential), ``principal add --out`` (a
credential file), ``task add`` and ``dispatch --token-file`` (a capability token file),
``anchor`` (an anchor file); it also opens a database through the library (``Kernel``)
as an embedding program would. Every file the kernel wrote (the database, its write-ahead
log and shared memory, credentials, tokens, anchors) must have mode 0600.

This check reads file modes on the local file system: it cannot run over the external
protocol, and it does not apply to PostgreSQL.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile

UMASKS = (0o022, 0o077)

_CHILD = r'''
import json, os, stat, subprocess, sys
from wgk.conformance.cli.main import main
root, umask = sys.argv[1], int(sys.argv[2], 8)
os.umask(umask)
repo = os.path.join(root, "repo")
env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
           GIT_COMMITTER_EMAIL="t@t")
for cmd in (["init", "-q", "-b", "main", repo], ["-C", repo, "commit", "-q", "--allow-empty", "-m", "start"]):
    subprocess.run(["git", *cmd], check=True, env=env, capture_output=True)
db = os.path.join(root, "k.db")
os.environ["WGK_CREDENTIAL_FILE"] = db + ".credential"
out = open(os.devnull, "w")
sys.stdout = out
steps = [["kernel", "--db", db, "init", "--graph", "g", "--repo", repo, "--target", "refs/heads/main"],
         ["kernel", "--db", db, "principal", "add", "worker-1", "--role", "worker", "--out",
          os.path.join(root, "w1.credential")],
         ["kernel", "--db", db, "task", "add", "a"],
         ["kernel", "--db", db, "dispatch", "a", "--pid", str(os.getpid()), "--session", "s1",
          "--token-file", os.path.join(root, "a.token")],
         ["kernel", "--db", db, "anchor", os.path.join(root, "k.anchors")]]
codes = []
for argv in steps:
    try:
        codes.append(main(argv))
    except SystemExit as e:
        codes.append(e.code)
from wgk.impl import Kernel
from wgk.impl.cli.kernel_open import environment
lib = Kernel(os.path.join(root, "lib.db"), environment(repo, "refs/heads/main", None))
lib.create_graph("g2")
modes = {f: oct(stat.S_IMODE(os.stat(os.path.join(root, f)).st_mode))
         for f in sorted(os.listdir(root)) if os.path.isfile(os.path.join(root, f))}
lib.close()
sys.stdout = sys.__stdout__
print(json.dumps({"codes": codes, "modes": modes}))
'''


def file_modes(umask: int) -> dict:
    """{"codes": the commands' exit codes, "modes": file -> its mode} under ``umask``."""
    with tempfile.TemporaryDirectory(prefix="wgk-modes-") as root:
        p = subprocess.run([sys.executable, "-c", _CHILD, root, oct(umask)], capture_output=True,
                           text=True, timeout=300)
        if p.returncode != 0:
            last = (p.stderr.strip().splitlines() or ["no output"])[-1]
            return {"error": f"the child exited {p.returncode}: {last}"}
        return json.loads(p.stdout.strip().splitlines()[-1])


def mode_problems(umask: int) -> list[str]:
    """Every file the kernel wrote under ``umask`` whose mode is not 0600 (one line each),
    or why the files could not be made; empty when the contract holds."""
    got = file_modes(umask)
    if "error" in got:
        return [f"umask {umask:03o}: {got['error']}"]
    out = [f"umask {umask:03o}: command {n} exited {c}" for n, c in enumerate(got["codes"]) if c]
    wanted = ("k.db", "k.db.credential", "w1.credential", "a.token", "k.anchors", "lib.db")
    out += [f"umask {umask:03o}: {f} was not written" for f in wanted if f not in got["modes"]]
    out += [f"umask {umask:03o}: {f} has mode {m[2:]}, not 600" for f, m in got["modes"].items()
            if m != "0o600" and f != "repo"]
    return out


__all__ = ["UMASKS", "file_modes", "mode_problems"]
