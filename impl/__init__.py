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
from .world.env import (
    Environment, EnvError, ManualClock, MemoryProcesses, MemoryRepository, MemoryWorld, WallClock,
    WorktreeView,
)
from .contract.errors import BadRequest, EffectError, GraphError, LegacyError, SeedError, StoreError
from .world.hooks import Boundary, Crash, CrashAt, Recorder, no_hook
from .front.client import Client
from .front.kernel import Kernel
from .storage.records import TaskPolicy, TaskRecord
from .decisions.seeding import Initial
from .storage.store import Pragmas

__all__ = [
    "BadRequest", "Boundary", "Client", "Crash", "CrashAt", "EffectError", "EnvError", "Environment",
    "GraphError", "Initial", "Kernel", "LegacyError", "ManualClock", "MemoryProcesses", "MemoryRepository",
    "MemoryWorld", "Pragmas", "Recorder", "SeedError", "StoreError", "TaskPolicy", "TaskRecord",
    "WallClock", "WorktreeView", "no_hook",
]
