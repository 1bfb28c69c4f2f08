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

The names below are imported when first used (``__getattr__``), so importing the package,
or one of its modules such as the served kernel ``wgk.impl.serve``, loads only what is used.
"""
from __future__ import annotations

import importlib

#: Each name of the package's front door, and the module it lives in.
WHERE = {name: module for module, names in {
    "world.env": ("Environment", "ManualClock", "MemoryProcesses", "MemoryRepository",
                  "MemoryWorld", "WallClock", "WorktreeView"),
    "contract.errors": ("BadRequest", "EffectError", "EnvError", "GraphError", "LegacyError",
                        "SeedError", "StoreError"),
    "world.hooks": ("Boundary", "Crash", "CrashAt", "Recorder", "no_hook"),
    "front.client": ("Client",), "front.kernel": ("Kernel",),
    "storage.records": ("TaskPolicy", "TaskRecord"), "decisions.seeding": ("Initial",),
    "storage.store": ("Pragmas",),
}.items() for name in names}

__all__ = sorted(WHERE)


def __getattr__(name: str):
    """A front-door name, imported from its module on first use (then kept here)."""
    if name not in WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = globals()[name] = getattr(importlib.import_module(f"{__name__}.{WHERE[name]}"), name)
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(WHERE))
