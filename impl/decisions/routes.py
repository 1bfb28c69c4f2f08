"""A provider route's breaker: the write a provider failure on a route adds, and the probe.

A provider failure that names the route it failed on (a new occurrence) opens that route's
breaker for the task whose attempt reported it: the task's ``route`` is that name, the route
is unavailable, with its first probe at the request's ``deadline`` (0: at once). While
the breaker is open no attempt opens on the task (``dispatch`` and ``retry`` are refused
``route-unavailable``, ``attempts.ADMISSION``). Once the probe is due the daemon probes the
route and sends what it found (``probe-route``): succeeded, the breaker closes; failed, it
stays open and the next probe is due at the request's deadline, at the earliest one tick
later (docs/vocabulary.md, "Provider routes"). ``probe-route`` is a ``Rule``: its conditions
in the contract's order, then the write.
"""
from __future__ import annotations

from typing import Any

from .decision import Condition as C, Ctx, Outcome, Rule, succeeded
from ..storage.records import evolve as replace


def outage(ctx: Ctx) -> dict[str, Any]:
    """The columns a provider failure on a route writes: its breaker open, the first probe's
    time (nothing for a repeated occurrence, or one that names no route)."""
    r = ctx.request
    if r.route is None or ctx.seen(r.kind, r.evidence):
        return {}
    # guards: route-opens-only-on-its-failure
    return {"route": r.route, "route_unavailable": True, "probe_at": r.deadline}


def breaker_open(ctx: Ctx) -> bool:
    return ctx.record.route_unavailable


def probe_due(ctx: Ctx) -> bool:
    # guards: route-closes-only-on-a-due-succeeded-probe
    return ctx.observe.now() >= ctx.record.probe_at


def _probed(ctx: Ctx) -> Outcome:
    t, r = ctx.record, ctx.request
    # guards: route-closes-only-on-a-due-succeeded-probe
    if r.succeeded:
        return succeeded(ctx, replace(t, route_unavailable=False, probe_at=0))
    now = ctx.observe.now()
    return succeeded(ctx, replace(t, probe_at=r.deadline if r.deadline > now else now + 1))


RULES: dict[str, Rule] = {
    "probe-route": Rule((C(breaker_open, "route-available"), C(probe_due, "probe-not-due")),
                        _probed),
}
