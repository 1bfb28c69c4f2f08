"""Opening a kernel database on the real environment: git, /proc and the wall clock."""
from __future__ import annotations

import os

from ..world.env import Environment, WallClock
from ..contract.errors import EnvError, StoreError
from ..world.git import GitRepository
from ..front.kernel import Kernel
from ..world.proc import ProcProcessTable
from ..contract import protect
from ..storage.backends import backend_of, open_store
from .kernel_principals import credential_path, first_credential, reserve
from .output import UsageError, emit


def environment(repo: str, target: str, worktrees: str | None) -> Environment:
    return Environment(ProcProcessTable(), GitRepository(repo, target=target, worktrees=worktrees),
                       WallClock())


def open_kernel(path: str) -> Kernel:
    """The kernel of a SQLite file or a ``postgresql://`` database made by ``init``."""
    if backend_of(path).file and not os.path.isfile(path):
        raise UsageError(f"{path}: no kernel database here (create one with 'init')")
    try:
        store = open_store(path)
        repo, target = store.meta("config:repo"), store.meta("config:target")
        worktrees = store.meta("config:worktrees")
        store.close()
        if repo is None or target is None:
            where = backend_of(path).shown(path)
            raise UsageError(f"{where}: the database names no repository (was it made by 'init'?)")
        return Kernel(path, environment(repo, target, worktrees))
    except StoreError as e:
        raise UsageError(str(e)) from None


def _refuse_existing(db: str) -> None:
    if backend_of(db).file:
        if os.path.exists(db):
            raise UsageError(f"{db}: already exists")
        return
    try:
        store = open_store(db)
        graph = store.meta("graph-id")
        store.close()
    except StoreError as e:
        raise UsageError(str(e)) from None
    if graph is not None:
        raise UsageError(f"{backend_of(db).shown(db)}: already holds graph {graph!r}")


def require_task(k: Kernel, name: str) -> None:
    if not k.knows(name):
        raise UsageError(f"unknown task {name!r}")


def init(args) -> int:
    _refuse_existing(args.db)
    for pattern in args.protect:
        bad = protect.problem(pattern)
        if bad is not None:
            raise UsageError(f"--protect {pattern!r}: {bad}")
    repo = os.path.abspath(args.repo)
    probe = GitRepository(repo, target=args.target, worktrees=args.worktrees)
    try:
        probe.out("rev-parse", "--git-dir")
    except EnvError:
        raise UsageError(f"{args.repo}: not a git repository") from None
    if probe.target() is None:
        raise UsageError(f"{args.repo}: the target {args.target} does not exist")
    out = reserve(credential_path(args))      # refused before the database exists
    try:
        if backend_of(args.db).file:
            reserve(args.db, "database").close()   # readable by its owner only
        try:
            k = Kernel(args.db, environment(repo, args.target, args.worktrees))
        except StoreError as e:
            raise UsageError(str(e)) from None
        try:
            k.create_graph(args.graph, config={"repo": repo, "target": args.target,
                                               "worktrees": probe.worktrees},
                           protected_paths=args.protect)
            cred = first_credential(k, args, out)
        finally:
            k.close()
    except BaseException:
        out.discard()
        raise
    db = backend_of(args.db).shown(args.db)
    return emit(args, {"db": db, "graph": args.graph, "repo": repo, "target": args.target,
                       "credential-file": cred},
                f"created graph {args.graph} on {repo} ({args.target}); "
                f"operator credential in {cred}")
