"""The gate's ``tamper`` section, the kernel's files as stored: a kernel database edited
behind the kernel's back is reported by ``verify-ledger`` or the audit, and a closed kernel
stays closed (``wgk.conformance.oracle.tamper``); every file the kernel writes has mode
0600 under the budget's umasks (``wgk.conformance.oracle.file_modes``); hostile inputs on
real files (a planted symlink, a planted token or credential file, a credential file open
to others, credentials of every bad shape) are refused (``wgk.conformance.oracle.hostile``).

It edits SQLite files directly, so it runs on SQLite only (on PostgreSQL, and over the
external protocol, a kernel's storage is not the gate's to edit): with a backend it has
nothing to check and says so, and the hostile inputs run with the bad credentials sent to
the backend."""
from __future__ import annotations

import re

from wgk.conformance.oracle import impl_system
from wgk.conformance.oracle.probes import closed_copy
from wgk.conformance.oracle.file_modes import mode_problems
from wgk.conformance.oracle.hostile import WORLDS, hostile_problems
from wgk.conformance.oracle.tamper import tamper_trace
from wgk.conformance.reports.gate_budget import BUDGETS, Meter, Progress, count_of
from wgk.conformance.reports.gate_report import Check

#: A hash as the kernel's findings print it (12 digits or the whole of it).
HASH = re.compile(r"\b[0-9a-f]{12,}\b")


def tamper_traces(budget: str, loaded: list) -> list:
    """Every trace, or the budget's number of those sending the most kinds of request."""
    b = BUDGETS[budget]["tamper"]
    if not isinstance(b, dict):
        raise ValueError(f"budget {budget}: tamper must map traces, not {b!r}")
    if b.get("traces") == "all":
        return list(loaded)
    n = count_of(budget, "tamper", b.get("traces"), "traces")
    kinds = lambda t: {s["request"].get("kind") for s in t.steps if "request" in s}
    return sorted(loaded, key=lambda t: (-len(kinds(t)), len(t.steps), t.id))[:n]


def tamper_checks(budget: str, progress: Progress | None, loaded: list) -> list[Check]:
    """One check per tamper of each chosen trace (closed: ``probes.closed_copy``)."""
    if impl_system.backend() is not None:
        return [Check("tamper", "SQLite files", "pass", 0.0,
                      "not run: the backend's storage is not SQLite files the gate may edit",
                      {"skipped": True})] + hostile_checks(impl_system.backend())
    chosen = tamper_traces(budget, loaded)
    meter = Meter("tamper", len(chosen), progress)
    out = []
    for trace in chosen:
        out.extend(trace_checks(trace))
        meter.step(trace.id)
    return out + mode_checks(budget) + hostile_checks(None)


def trace_checks(trace) -> list[Check]:
    """One check per tamper of ``trace`` (closed: ``probes.closed_copy``). What the kernel
    reports is kept with every hash in it written ``<hash>``: the ledger's hashes cover the
    principals' secrets, new in every process, so they differ from one run of the same
    checks to the next (and a hash is cut to 12 digits, where an edit at its end is unseen)."""
    out = []
    r = tamper_trace(closed_copy(trace))
    for p in r.problems:
        out.append(Check("tamper", f"{trace.id}: set up", "fail", r.seconds, p, group=trace.id))
    each = r.seconds / max(len(r.tampers), 1)
    for t in r.tampers:
        if t.problem:
            continue
        if t.ok:
            detail = t.lines[0] if t.lines else ""
        elif not t.reported:
            detail = "not reported: verify-ledger and the audit both say ok"
        elif not t.closed:
            detail = "the closed kernel answered a request without a credential"
        else:
            detail = "a finding spans more than one line"
        data = t.to_json()
        data["lines"] = [_steady(line) for line in data["lines"]]
        out.append(Check("tamper", f"{trace.id}: {t.name}", "pass" if t.ok else "fail", each,
                         _steady(detail), data, group=trace.id))
    if not r.made and not r.problems:
        out.append(Check("tamper", f"{trace.id}: tampers", "fail", r.seconds,
                         "no tamper could be made: nothing was checked", group=trace.id))
    return out


def _steady(text: str) -> str:
    """``text`` with every run of 12 or more hexadecimal digits (a hash) written ``<hash>``."""
    return HASH.sub("<hash>", text)


def hostile_checks(dsn: str | None) -> list[Check]:
    """One check per hostile input (``wgk.conformance.oracle.hostile``), each saying its world."""
    import time
    t0 = time.perf_counter()
    found = hostile_problems(dsn)
    each = (time.perf_counter() - t0) / len(found)
    out = []
    for name, problems in found.items():
        world = WORLDS[name] + (" (PostgreSQL)" if dsn and name == "bad credentials" else
                                " (SQLite)" if name == "bad credentials" else "")
        out.append(Check("tamper", f"hostile input: {name}", "fail" if problems else "pass", each,
                         problems[0] if problems else f"held ({world})",
                         {"world": world, "problems": problems}, group="hostile inputs"))
    return out


def mode_checks(budget: str) -> list[Check]:
    """One check per umask of the budget (``tamper.umasks``, default 022 and 077)."""
    import time
    out = []
    for umask in BUDGETS[budget]["tamper"].get("umasks", (0o022, 0o077)):
        t0 = time.perf_counter()
        problems = mode_problems(umask)
        out.append(Check("tamper", f"file modes under umask {umask:03o}",
                         "fail" if problems else "pass", time.perf_counter() - t0,
                         problems[0] if problems else "every file the kernel wrote is 0600",
                         {"problems": problems}, group="file modes"))
    return out


__all__ = ["tamper_checks", "tamper_traces"]
