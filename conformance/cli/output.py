"""Printing at the edge: verdicts are data until here."""
from __future__ import annotations

import json
import sys
from typing import Any, TextIO


def emit_json(data: Any, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    json.dump(data, out, indent=2, sort_keys=False, default=str)
    out.write("\n")


def progress(message: str, *, enabled: bool = True) -> None:
    """One progress line on stderr (never on stdout, which may carry JSON)."""
    if enabled and sys.stderr.isatty() or enabled == "always":
        print(message, file=sys.stderr, flush=True)


def write_text(path: str, text: str) -> None:
    from pathlib import Path
    p = Path(path)
    if p.parent and not p.parent.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
