"""The model's one enumeration of actions, imported from one place.

The enumeration (``Instance``, ``steps``, ``task_steps``, ``global_steps``,
``label``) moves from ``wgk.conformance.check.explore`` to
``wgk.model.actions``; the view imports it only through this module, so the
switch is one line.
"""
from __future__ import annotations

try:  # pragma: no cover - whichever home the enumeration has today
    from wgk.model.actions import (  # type: ignore[import-not-found]
        FOREIGN_COMMIT, INITIAL_TARGET, Instance, global_steps, label, steps, task_steps,
    )
except ImportError:
    from wgk.conformance.check.explore import (  # noqa: F401
        FOREIGN_COMMIT, INITIAL_TARGET, Instance, global_steps, label, steps, task_steps,
    )

__all__ = ["FOREIGN_COMMIT", "INITIAL_TARGET", "Instance", "global_steps", "label", "steps",
           "task_steps"]
