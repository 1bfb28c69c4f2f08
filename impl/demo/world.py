"""The demo's tasks and the helpers the dispatcher and the workers share."""
from __future__ import annotations

import os
import subprocess

from ..world.env import Environment, WallClock
from ..world.git import GitRepository
from ..front.kernel import Kernel
from ..world.proc import ProcProcessTable

TASKS = [
    # name, deps, file, text
    ("schema", (), "schema.sql", "CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT);\n"),
    ("api", ("schema",), "api.py", "def items(db):\n    return db.execute('SELECT * FROM item')\n"),
    ("ui", ("api",), "ui.html", "<ul id='items'></ul>\n"),
]
WORKER_IDENTITY = {"GIT_AUTHOR_NAME": "worker", "GIT_AUTHOR_EMAIL": "worker@localhost",
                   "GIT_COMMITTER_NAME": "worker", "GIT_COMMITTER_EMAIL": "worker@localhost"}


def open_kernel(db: str, repo: str) -> Kernel:
    env = Environment(ProcProcessTable(), GitRepository(repo, worktrees=repo + "-worktrees"),
                      WallClock())
    return Kernel(db, env)


def cap(k: Kernel, task: str) -> dict:
    t = k.record(task)
    return {"graph": k.graph_id, "task": task, "generation": t.generation, "attempt": t.attempt,
            "fence": t.fence, "lease-epoch": t.lease_epoch}


def tx(k: Kernel, task: str, kind: str, actor: str, key: str, credential: str | None = None,
       **params) -> dict:
    t = k.record(task)
    return k.handle({"kind": kind, "actor": actor, "task": task, "cap": cap(k, task), "key": key,
                     "expected-phase": t.visible_phase, "expected-revision": t.revision, **params},
                    credential)


def git(path: str, *args: str) -> str:
    p = subprocess.run(["git", "-C", path, *args], capture_output=True, check=True,
                       env=dict(os.environ, **WORKER_IDENTITY))
    return p.stdout.decode().strip()
