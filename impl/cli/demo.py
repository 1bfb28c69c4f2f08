"""wgk demo: the kernel end to end on a real git repository with real worker processes.

The story and its checks are ``wgk.impl.demo`` (see its docstring); this module
is the command: it makes the working directory, tells the story, prints the
final graph and every check, and exits 0 only if every promise holds.
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile

from ..demo.story import Story, story_run
from ..world.git import GitRepository
from .output import UsageError, emit_json

HELP = "run the kernel end to end: real git, real workers, a killed worker and a moved target"
EXAMPLES = """  wgk demo
  wgk demo --workdir /tmp/wgk-demo
  wgk demo --json
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workdir", help="where to create the repository and database "
                                     "(default: a temporary directory, removed afterwards)")
    p.add_argument("--json", action="store_true", help="print the story and the checks as JSON")


def run(args: argparse.Namespace) -> int:
    temporary = args.workdir is None
    workdir = args.workdir or tempfile.mkdtemp(prefix="wgk-demo-")
    os.makedirs(workdir, exist_ok=True)
    story = Story(workdir, os.path.join(workdir, "kernel.db"), os.path.join(workdir, "repo"),
                  show=not args.json)
    if os.path.exists(story.db) or os.path.exists(story.repo):
        raise UsageError(f"{workdir}: already holds a demo (choose an empty directory)")
    try:
        facts = story_run(story)
        checks = facts["checks"]
        ok = all(c["ok"] for c in checks)
        if args.json:
            emit_json({"ok": ok, "workdir": workdir, "story": story.lines, "checks": checks,
                       "final": facts["final"]})
        else:
            print_graph(facts["final"])
            for c in checks:
                print(f"{'ok  ' if c['ok'] else 'FAIL'} {c['check']}"
                      + ("" if c["ok"] or not c["detail"] else f": {c['detail']}"))
            print("demo: every promise holds" if ok else "demo: a promise was broken")
        return 0 if ok else 1
    finally:
        if temporary:
            GitRepository(story.repo).remove_all_worktrees() if os.path.isdir(story.repo) else None
            shutil.rmtree(workdir, ignore_errors=True)


def print_graph(p: dict) -> None:
    print("final graph:")
    for name, t in p["tasks"].items():
        print(f"  {name:7} {t['status']:12} generation {t['generation']} attempt {t['attempt']} "
              f"version {t['version']} candidate {(t['candidate'] or '-')[:10]} "
              f"promotions {t['promotions']}")
    print(f"  target {p['target'][:10]}")
