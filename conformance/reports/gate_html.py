"""One self-contained HTML report per failing trace or counterexample of a gate run.

For every failing replay or crash-cut check the report is the stepper (``wgk view``'s
page, ``conformance.view.static``) on the trace that failed, with the model's and
the implementation's decision at every step; for a failing generated run, on the
minimised counterexample it wrote. Checks of the same trace in the same section share
one report. Each failing check records its report's path (``data["report"]``), which
the JUnit file then names in the failure's text.
"""
from __future__ import annotations

import re
from pathlib import Path

from wgk.conformance.traces.format import TraceError, load_trace
from wgk.conformance.view.enumerate import Instance
from wgk.conformance.view.impl import impl_decisions
from wgk.conformance.view.session import Session, SessionError
from wgk.conformance.view.static import write_report

from wgk.conformance.reports.gate_report import GateResult

#: Sections whose failures are paths through a trace.
TRACE_SECTIONS = ("replay", "crash-cuts", "fuzz")

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def report_name(section: str, trace_id: str) -> str:
    return f"{section}-{_UNSAFE.sub('_', trace_id)}.html"


def _session(path: str) -> Session:
    trace = load_trace(path)
    inst = Instance(tasks=len(trace.graph["tasks"]))
    return Session.from_trace(trace, inst)


def write_failure_reports(result: GateResult, directory: str | Path) -> list[Path]:
    """Write the reports into ``directory``; returns the files written. A trace the model
    cannot walk gets no report, and its checks say why (``data["report-error"]``)."""
    directory = Path(directory)
    written: dict[tuple[str, str], Path | str] = {}
    for c in result.checks:
        path = c.data.get("trace")
        if c.verdict != "fail" or c.section not in TRACE_SECTIONS or not path:
            continue
        key = (c.section, str(path))
        if key not in written:
            try:
                session = _session(str(path))
                impl = impl_decisions(session)
                out = directory / report_name(c.section, session.id)
                written[key] = write_report(session, out, impl)
            except (TraceError, SessionError, OSError) as e:
                written[key] = f"no report: {str(e).splitlines()[0]}"
        if isinstance(written[key], Path):
            c.data["report"] = str(written[key])
        else:
            c.data["report-error"] = written[key]
    return [p for p in written.values() if isinstance(p, Path)]
