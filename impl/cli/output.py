"""Output helpers and the usage error of the implementation's command line."""
from __future__ import annotations

import json
import sys
from typing import Any, TextIO


class UsageError(Exception):
    """Bad usage or bad input: printed as one line, exit code 2."""


def emit_json(data: Any, out: TextIO | None = None) -> None:
    """``data`` as indented JSON on stdout (or ``out``)."""
    out = out or sys.stdout
    json.dump(data, out, indent=2, sort_keys=False, default=str)
    out.write("\n")


def emit(args, data, text: str, code: int = 0) -> int:
    """``data`` as JSON when ``--json`` was given, else ``text``; returns ``code``."""
    if getattr(args, "json", False):
        emit_json(data)
    else:
        print(text)
    return code
