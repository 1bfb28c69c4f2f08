"""Legacy import: a WG-style graph (``graph.jsonl``, one task per line) or a plain JSON list.

Every record's original bytes are preserved (a ``legacy-record`` ledger event);
tasks the graph does not know are added with their dependencies; every legacy
``done`` is sent as a ``legacy-done`` request, which quarantines a task without
verifiable evidence as needs-reconciliation: it blocks its dependents and is
never blessed or erased. The report names, for each quarantined task, the
dependents its claim would have unlocked.

The whole file is parsed and checked before anything is written: a malformed
file changes nothing and the error names the path and line.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from ..contract import names
from ..contract.errors import GraphError, LegacyError
from ..storage.records import TaskPolicy

NAME_KEYS = ("id", "name", "task")
DEP_KEYS = ("after", "deps", "depends_on", "dependencies", "blocked_by")


@dataclass(frozen=True)
class LegacyRecord:
    name: str
    status: str
    deps: tuple[str, ...]
    line: int
    original: str


@dataclass
class ImportReport:
    source: str
    added: list[str] = field(default_factory=list)
    existing: list[str] = field(default_factory=list)
    quarantined: list[dict] = field(default_factory=list)
    other: list[dict] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"source": self.source, "added": self.added, "existing": self.existing,
                "quarantined": self.quarantined, "other": self.other, "skipped-lines": self.skipped}


def _status(value, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise LegacyError(f"{where}: 'status' must be a non-empty string")
    if not _is_text(value):
        raise LegacyError(f"{where}: 'status' {names.short(value)} is not Unicode text "
                          "(invalid UTF-8, a lone surrogate or a NUL)")
    return value.strip().lower().replace("_", "-").replace(" ", "-")


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\0" not in value


def _decode(text: str, where: str):
    """One JSON value of the file, or a one-line ``LegacyError`` naming path and line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise LegacyError(f"{where}: {e.msg} (column {e.colno})") from None
    except RecursionError:
        raise LegacyError(f"{where}: JSON nested too deeply") from None
    except ValueError as e:                     # an integer literal too long to convert
        raise LegacyError(f"{where}: {str(e).split(':')[0]}") from None


def _record(obj, line: int, original: str, where: str) -> LegacyRecord | None:
    if not isinstance(obj, dict):
        raise LegacyError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if obj.get("kind", "task") != "task":
        return None
    name = next((obj[k] for k in NAME_KEYS if k in obj), None)
    if not isinstance(name, str) or not name:
        raise LegacyError(f"{where}: a task needs a string 'id' (or 'name')")
    bad = names.describe("task", name)
    if bad is not None:
        raise LegacyError(f"{where}: {bad}")
    deps: list = []
    for k in DEP_KEYS:
        if k in obj:
            deps = obj[k]
            break
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise LegacyError(f"{where}: dependencies must be a list of task ids")
    bad = next((names.describe("dependency", d) for d in deps if not names.is_name(d)), None)
    if bad is not None:
        raise LegacyError(f"{where}: {bad}")
    return LegacyRecord(name, _status(obj.get("status", "open"), where), tuple(deps), line, original)


def _json_list_items(text: str, path: str) -> list[tuple[int, str, object]]:
    """(line, exact source text, value) of each item of a JSON list."""
    dec = json.JSONDecoder()
    i = len(text) - len(text.lstrip())
    if text[i:i + 1] != "[":
        raise LegacyError(f"{path}:1: expected a JSON list")
    i += 1
    items = []
    while True:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        if i >= len(text):
            raise LegacyError(f"{path}:{text.count(chr(10), 0, i) + 1}: unterminated JSON list")
        if text[i] == "]":
            return items
        line = text.count("\n", 0, i) + 1
        try:
            value, end = dec.raw_decode(text, i)
        except json.JSONDecodeError as e:
            raise LegacyError(f"{path}:{text.count(chr(10), 0, e.pos) + 1}: {e.msg}") from None
        except RecursionError:
            raise LegacyError(f"{path}:{line}: JSON nested too deeply") from None
        except ValueError as e:                 # an integer literal too long to convert
            raise LegacyError(f"{path}:{line}: {str(e).split(':')[0]}") from None
        items.append((line, text[i:end], value))
        i = end


def parse_legacy(path: str) -> tuple[list[LegacyRecord], list[int]]:
    """Every task record of the file (and the lines skipped as not tasks)."""
    try:
        raw = open(path, "rb").read()
    except OSError as e:
        raise LegacyError(f"{path}: cannot read ({e.strerror})") from None
    text = raw.decode("utf-8", "surrogateescape")
    if text.lstrip().startswith("["):
        items = _json_list_items(text, path)
    else:
        items = []
        for n, line in enumerate(text.split("\n"), 1):
            if not line.strip():
                continue
            items.append((n, line, _decode(line, f"{path}:{n}")))
    records, skipped, seen = [], [], {}
    for n, original, value in items:
        r = _record(value, n, original, f"{path}:{n}")
        if r is None:
            skipped.append(n)
            continue
        if r.name in seen:
            raise LegacyError(f"{path}:{n}: task {r.name!r} already defined on line {seen[r.name]}")
        seen[r.name] = n
        records.append(r)
    return records, skipped


def import_legacy(kernel, path: str, credential: str | None = None) -> ImportReport:
    """Import a legacy graph into ``kernel`` (see the module docstring)."""
    records, skipped = parse_legacy(path)
    source = os.path.basename(path)
    if not _is_text(source):
        raise LegacyError(f"{names.short(path)}: the file name is not Unicode text")
    report = ImportReport(source, skipped=skipped)
    known = set(kernel.names())
    in_file = {r.name for r in records}
    for r in records:
        for d in r.deps:
            if d not in known and d not in in_file:
                raise LegacyError(f"{path}:{r.line}: task {r.name!r} depends on unknown task {d!r}")
    new = [TaskPolicy(r.name, r.deps) for r in records if r.name not in known]
    try:
        kernel.import_records(new, [{"task": r.name, "source": source, "line": r.line,
                                     "original": r.original, "status": r.status}
                                    for r in records])
    except GraphError as e:
        raise LegacyError(f"{path}: {e}") from None
    report.added = [p.name for p in new]
    report.existing = sorted(n for n in in_file if n in known)
    claimed = {r.name for r in records if r.status == "done"}
    dependents: dict[str, list[str]] = {}
    for other in kernel.names():
        for d in kernel.policy(other).deps:
            dependents.setdefault(d, []).append(other)
    for r in records:
        if r.status != "done":
            report.other.append({"task": r.name, "line": r.line, "legacy-status": r.status,
                                 "now": kernel.status(r.name)})
            continue
        decision = kernel.handle({"kind": "legacy-done", "actor": "legacy-import", "task": r.name,
                                  "key": f"legacy-import:{source}:{r.line}",
                                  "evidence": f"{source}:{r.line}"}, credential)
        report.quarantined.append({
            "task": r.name, "line": r.line, "decision": decision, "status": kernel.status(r.name),
            "would-have-unlocked": would_have_unlocked(kernel, dependents.get(r.name, []),
                                                       claimed)})
    return report


def would_have_unlocked(kernel, dependents: list[str], claimed: set[str]) -> list[str]:
    """Dependents a legacy claim would have made ready: every dependency of theirs was
    Done (by a GraphSave, or by a legacy claim too)."""
    return [other for other in dependents
            if all(d in claimed or kernel.record(d).graph_saved for d in kernel.policy(other).deps)]
