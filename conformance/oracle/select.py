"""Which systems a trace runs through: the model, the implementation, or both in lockstep."""
from __future__ import annotations

from wgk.conformance.oracle.impl_system import ImplSystem
from wgk.conformance.oracle.model_runs import model_system

#: The values of ``wgk replay --system``.
CHOICES = ("model", "impl", "both")


def systems_for(trace, system: str, world: str = "memory", *, lockstep: bool = False) -> list:
    """The systems a trace runs through; the model first (the reference) when present; the
    implementation on ``world`` ("memory", or "real": ``real_world``). Raises ``StepError``
    when a trace cannot be set up on one of them. ``lockstep``: they are run by ``replay``,
    the model taking each step first, so the implementation's decision coverage reads the
    model's decisions (``ImplSystem(follow=...)``). The model is the trace's kept run, played,
    inside ``model_runs.shared()``."""
    if system not in CHOICES:
        raise ValueError(f"unknown system {system!r} (known: {', '.join(CHOICES)})")
    out = []
    if system in ("model", "both"):
        out.append(model_system(trace))
    if system in ("impl", "both"):
        follow = out[0] if lockstep and out else None
        out.append(ImplSystem(trace, world=world, follow=follow))
    return out
