"""wgk.impl: a durable attempt-control kernel on SQLite, git and /proc.

An independent implementation of the kernel specified by the model and
docs/vocabulary.md: nothing here imports ``wgk.model`` or ``wgk.conformance``.

    from wgk.impl import Kernel, MemoryWorld, TaskPolicy
    world = MemoryWorld.create(target="main-0")
    k = Kernel("kernel.db", world.environment())
    k.create_graph("g", [TaskPolicy("a"), TaskPolicy("b", deps=("a",))])
    k.handle({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "d1",
              "expected-attempt": 0, "owner": {"pid": 4001, "birth": 911, "session": "s1"}})
    k.project()
"""
from .env import (
    Environment, EnvError, ManualClock, MemoryProcesses, MemoryRepository, MemoryWorld, WallClock,
    WorktreeView,
)
from .errors import BadRequest, EffectError, GraphError, LegacyError, SeedError, StoreError
from .hooks import Boundary, Crash, CrashAt, Recorder, no_hook
from .client import Client
from .kernel import Kernel
from .records import TaskPolicy, TaskRecord
from .seeding import Initial
from .store import Pragmas

__all__ = [
    "BadRequest", "Boundary", "Client", "Crash", "CrashAt", "EffectError", "EnvError", "Environment",
    "GraphError", "Initial", "Kernel", "LegacyError", "ManualClock", "MemoryProcesses", "MemoryRepository",
    "MemoryWorld", "Pragmas", "Recorder", "SeedError", "StoreError", "TaskPolicy", "TaskRecord",
    "WallClock", "WorktreeView", "no_hook",
]
