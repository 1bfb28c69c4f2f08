"""Where the atomic-save design document and its implementation plan live, the marker pattern
of a generated block, and the error a malformed document or plan is reported with."""
from __future__ import annotations

import json
import re
from pathlib import Path
ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "design-atomic-graph-work-save.md"
PLAN = ROOT / "docs" / "plans" / "atomic-graph-work-save-dag.json"


def load_plan(path: Path = PLAN) -> dict:
    """The machine-readable implementation plan (``wgk-plan/1``)."""
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise DocError(f"{path}:{e.lineno}: {e.msg}") from None


def block_pattern(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- generated:{re.escape(name)}:begin -->\n)(.*?)(<!-- generated:{re.escape(name)}:end -->)",
                      re.S)


class DocError(ValueError):
    """The document lacks a marker pair or a block it must have."""

