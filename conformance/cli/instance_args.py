"""The options that describe a bounded instance of the model, shared by the
commands that explore, simulate or model-check it."""
from __future__ import annotations

import argparse

from wgk.model.actions import GROUPS, KEYS, Instance

from wgk.conformance.cli.errors import UsageError


def add_instance_arguments(p: argparse.ArgumentParser, *, tasks: int, attempts: int = 1,
                           generations: int = 1, versions: int = 1,
                           groups: str = "core,env", keys_help: str) -> None:
    p.add_argument("--tasks", type=int, default=tasks,
                   help=f"tasks in a dependency chain (default {tasks})")
    p.add_argument("--attempts", type=int, default=attempts,
                   help=f"attempts per generation (default {attempts})")
    p.add_argument("--generations", type=int, default=generations,
                   help=f"generations per task (default {generations})")
    p.add_argument("--versions", type=int, default=versions,
                   help=f"candidate versions per attempt (default {versions})")
    shown = "all" if groups == ",".join(GROUPS) else groups
    p.add_argument("--groups", default=groups,
                   help=f"request groups, from {','.join(GROUPS)} (default {shown})")
    p.add_argument("--review", action="store_true", help="tasks require a FLIP review")
    p.add_argument("--keys", action="store_true", help=keys_help)


def instance_from(args: argparse.Namespace, *, max_tasks: int, too_many: str) -> Instance:
    """The instance the options describe; bad values are a UsageError (exit 2)."""
    groups = tuple(g.strip() for g in args.groups.split(",") if g.strip())
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        raise UsageError(f"unknown group {unknown[0]!r} (expected some of: {', '.join(GROUPS)})")
    if not groups:
        raise UsageError("--groups names no group")
    for name in ("tasks", "attempts", "generations", "versions"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1")
    if args.tasks > max_tasks:
        raise UsageError(too_many)
    return Instance(tasks=args.tasks, attempts=args.attempts, generations=args.generations,
                    versions=args.versions, groups=groups, review=args.review,
                    keys=KEYS if args.keys else 0)
