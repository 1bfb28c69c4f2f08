"""The implementation's decisions along a session's path (``wgk view --system both``)."""
from __future__ import annotations

from wgk.conformance.oracle.systems import StepError
from wgk.conformance.view.session import Session


def impl_decisions(session: Session) -> list[dict | None]:
    """Replay the path through a fresh ``wgk.impl`` kernel; a step it cannot take
    ends the list with ``{"decision": "error", "code": ...}`` for it."""
    from wgk.conformance.oracle.impl_system import ImplSystem
    trace = session.export()
    out: list[dict | None] = []
    try:
        system = ImplSystem(trace)
    except StepError as e:
        return [{"decision": "error", "code": str(e)}] * len(trace.steps)
    try:
        for step in trace.steps:
            try:
                out.append(system.apply(step))
            except StepError as e:
                out.append({"decision": "error", "code": str(e)})
                break
    finally:
        system.close()
    return out
