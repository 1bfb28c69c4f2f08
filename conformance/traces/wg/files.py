"""Which family a fixture file is, and what importing each file gave (imported, skipped, error)."""
from __future__ import annotations

from wgk.conformance.traces.tokens import with_tokens

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wgk.conformance.traces.format import Trace
from wgk.conformance.traces.wg.common import Src, WgImportError, as_names
from wgk.conformance.traces.wg.deletion_map import DeletionMap
from wgk.conformance.traces.wg.v1 import V1
from wgk.conformance.traces.wg.v2 import V2

TRANSLATORS = {"v1": V1, "v2": V2, "deletion-map": DeletionMap}
DM_SCHEMA = "wg-single-attempt-deletion-audit/v1"
INDEX_CHECKED = "a deletion-map index: every listed trace exists"


class NotAFixture(WgImportError):
    """A JSON file of no family the importer knows: skipped when found in a directory."""


def family_of(doc: Any) -> str | None:
    if not isinstance(doc, dict):
        return None
    if doc.get("wire_version") == 1:
        return "v1"
    if doc.get("schema_version") == 2:
        return "v2"
    if doc.get("trace_schema") == DM_SCHEMA:
        return "index" if "single_kernel_replay" not in doc and "traces" in doc else "deletion-map"
    return None


@dataclass(frozen=True)
class Imported:
    """One translated source file: its family and the trace."""

    source: Path
    family: str
    trace: Trace

    def out_path(self, out_dir: Path) -> Path:
        return out_dir / self.family / (self.source.stem + ".json")


@dataclass(frozen=True)
class FileResult:
    """What importing one source file gave: ``imported``, ``skipped`` (with the reason) or ``error``."""

    source: Path
    status: str
    imported: Imported | None = None
    reason: str | None = None
    family: str | None = None          # "index" for a deletion-map index (checked, not imported)

    def to_json(self) -> dict:
        out: dict[str, Any] = {"source": str(self.source), "status": self.status}
        if self.family is not None:
            out["family"] = self.family
        if self.imported is not None:
            out.update(family=self.imported.family, trace=self.imported.trace.id,
                       steps=len(self.imported.trace.steps))
        if self.reason is not None:
            out["reason"] = self.reason
        return out


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise WgImportError(str(path), "", f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except OSError as e:
        raise WgImportError(str(path), "", f"cannot read: {e.strerror}") from None


def check_index(path: Path, doc: dict) -> None:
    """A deletion-map ``index.json`` lists the trace files: each must exist beside it."""
    s = Src(doc, "", str(path))
    s.const("trace_schema", DM_SCHEMA)
    s.req("source_revision", str)
    s.req("credential_free", bool)
    names = s.req("traces", list)
    if s.req("incident_count", int) != len(names):
        raise s.error("incident_count is not the number of traces", "incident_count")
    s.finish()
    for i, name in enumerate(names):
        if not (path.parent / name).is_file():
            raise WgImportError(str(path), f"/traces/{i}", f"listed trace {name!r} does not exist")


def import_file(path: str | Path) -> Imported | None:
    """Translate one fixture file (None for a deletion-map index, which is only checked)."""
    p = Path(path)
    doc = read_json(p)
    family = family_of(doc)
    if family is None:
        raise NotAFixture(str(p), "", "not a WG fixture: no wire_version 1, schema_version 2 or "
                                      "deletion-map trace_schema")
    if family == "index":
        check_index(p, doc)
        return None
    trace = TRANSLATORS[family](doc, str(p)).run()
    # WG's fixtures predate capability tokens: their honest senders hold them (``with_tokens``)
    named = Trace.from_json(with_tokens(as_names(trace.to_json(), str(p))), trace.path)
    return Imported(p, family, named)


def source_files(paths: list[str | Path]) -> list[Path]:
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out += sorted(p.rglob("*.json"))
        elif p.is_file():
            out.append(p)
        else:
            raise WgImportError(str(raw), "", "no such file or directory")
    return out


def import_one(path: Path) -> FileResult:
    """The result of one file; only a path that cannot be listed at all raises."""
    try:
        imported = import_file(path)
    except NotAFixture as e:
        return FileResult(path, "skipped", reason=str(e))
    except WgImportError as e:
        return FileResult(path, "error", reason=str(e))
    if imported is None:
        return FileResult(path, "skipped", reason=f"{path}: {INDEX_CHECKED}", family="index")
    return FileResult(path, "imported", imported)


def import_results(paths: list[str | Path]) -> list[FileResult]:
    """One result per ``*.json`` file under ``paths`` (files, or directories searched)."""
    return [import_one(f) for f in source_files(paths)]


def import_paths(paths: list[str | Path]) -> list[Imported]:
    """Translate every fixture under ``paths``; files of no known family are skipped, the first error raises."""
    out = []
    for f in source_files(paths):
        try:
            imported = import_file(f)
        except NotAFixture:
            continue
        if imported is not None:
            out.append(imported)
    return out
