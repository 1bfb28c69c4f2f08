"""One demo worker process: ``python -m wgk.impl.demo.worker --db ... --task ...``.

It waits to be named its attempt's owner, works in its worktree, heartbeats and
submits (or, in ``hang`` mode, writes half its work and waits to be killed; in
``rebase`` mode, rebases its candidate onto the moved target and revises).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from ..front import secretfile
from .world import cap, git, open_kernel, tx


def worker_main(argv: list[str]) -> int:
    """One worker: wait for its attempt, work in its worktree, heartbeat, submit (or hang)."""
    p = argparse.ArgumentParser(prog="wgk demo worker")
    p.add_argument("--db", required=True)
    p.add_argument("--repo", required=True)
    p.add_argument("--task", required=True)
    p.add_argument("--file", required=True)
    p.add_argument("--text", required=True)
    p.add_argument("--mode", choices=["finish", "hang", "rebase"], default="finish")
    p.add_argument("--token-file", required=True, help="the attempt's capability token")
    p.add_argument("--credential-file", required=True, help="this worker's credential")
    args = p.parse_args(argv)
    k = open_kernel(args.db, args.repo)
    me = os.getpid()
    credential = secretfile.read(args.credential_file, what="credential file")
    for _ in range(600):                                  # wait to be named the owner
        k.cache.sync()
        t = k.record(args.task)
        if t.running and t.owner_pid == me or args.mode == "rebase":
            break
        time.sleep(0.05)
    else:
        return 3
    wt = k.env.repository.worktree_path(t.worktree_id)
    token = secretfile.read(args.token_file, what="token file")    # from the dispatcher
    beat = lambda n: k.handle({"kind": "heartbeat", "actor": "worker", "task": args.task,
                               "cap": cap(k, args.task), "key": f"hb:{me}:{n}",
                               "evidence": f"{me}:heartbeat:{n}", "token": token}, credential)
    if args.mode == "rebase":
        # the target moved under this task's finish: the worker rebases its own work
        git(wt, "rebase", "--quiet", k.env.repository.target())
        head = git(wt, "rev-parse", "HEAD")
        d = tx(k, args.task, "revise", "worker", f"revise:{args.task}:{head[:12]}", credential,
               candidate=head, base=k.env.repository.target(), token=token)
        return 0 if d["decision"] == "applied" else 4
    beat(1)
    path = os.path.join(wt, args.file)
    written = open(path).read() if os.path.exists(path) else ""
    if args.mode == "hang":
        with open(path, "w") as f:
            f.write(args.text[: len(args.text) // 2])      # half the work, uncommitted
        beat(2)
        time.sleep(600)                                  # the dispatcher kills us here
        return 5
    if written != args.text:
        with open(path, "w") as f:
            f.write(args.text)
    git(wt, "add", "-A")
    git(wt, "commit", "--quiet", "-m", f"{args.task}: {args.file}")
    beat(2)
    d = tx(k, args.task, "submit", "worker", f"submit:{args.task}:{t.fence}", credential,
           token=token)
    return 0 if d["decision"] == "applied" else 4


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
