"""A static report: the stepper with one path's answers embedded, one self-contained file."""
from __future__ import annotations

from pathlib import Path

from wgk.conformance.view.api import enabled_json, export_json, session_json, state_json
from wgk.conformance.view.page import page
from wgk.conformance.view.session import Session


def report_data(session: Session, impl: list | None = None) -> dict:
    """Every answer the stepper asks for along the path, opened at the first break (if any)."""
    last = len(session.entries)
    first = session.first_break()
    return {"session": session_json(session, impl),
            "states": [state_json(session, k) for k in range(last + 1)],
            "enabled": [enabled_json(session, k) for k in range(last + 1)],
            "export": export_json(session),
            "start": first["state"] if first else 0}


def report_html(session: Session, impl: list | None = None) -> str:
    return page(report_data(session, impl), title=f"wgk view: {session.title}")


def write_report(session: Session, path: str | Path, impl: list | None = None) -> Path:
    p = Path(path)
    if p.parent and not p.parent.exists():
        p.parent.mkdir(parents=True)
    p.write_text(report_html(session, impl), encoding="utf-8")
    return p
