"""Which family a fixture file is, and what importing each file gave (imported, skipped, error)."""
from __future__ import annotations

from wgk.conformance.traces.tokens import with_tokens

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wgk.conformance.traces.format import Trace
from wgk.conformance.traces.wg.common import Src, Unmapped, WgImportError, as_names
from wgk.conformance.traces.wg.daemon import daemon_translator
from wgk.conformance.traces.wg.deletion_map import DeletionMap
from wgk.conformance.traces.wg.planner_runtime import PlannerRuntime
from wgk.conformance.traces.wg.runtime import Runtime
from wgk.conformance.traces.wg.simple_land import SimpleLand
from wgk.conformance.traces.wg.v1 import V1
from wgk.conformance.traces.wg.v2 import V2

#: The families whose translator gives one trace per file.
TRANSLATORS = {"v1": V1, "v2": V2, "deletion-map": DeletionMap}
#: The families whose translator gives ``(traces, unmapped)``: cases it maps, and the ones it reports.
CASE_TRANSLATORS = {"daemon/v1": daemon_translator(1), "daemon/v2": daemon_translator(2),
                    "daemon/v3": daemon_translator(3), "runtime/v1": Runtime, "simple-land/v1": SimpleLand,
                    "planner-runtime": PlannerRuntime}
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
    trace = doc.get("trace")
    if isinstance(trace, dict) and trace.get("trace_schema_version") in (1, 2, 3) and "name" in doc:
        return f"daemon/v{trace['trace_schema_version']}"
    if doc.get("reducer_version") == 1 and "cases" in doc:
        return "runtime/v1"
    if doc.get("schema_version") == 1 and "cases" in doc:
        return "simple-land/v1"
    if doc.get("schema_version") == 1 and ("goals" in doc or ("tasks" in doc and "effects" in doc)):
        return "planner-runtime"
    return None


@dataclass(frozen=True)
class Imported:
    """One translated source file: its family and the trace."""

    source: Path
    family: str
    trace: Trace
    stem: str | None = None          # a file of several cases: one trace per case

    def out_path(self, out_dir: Path) -> Path:
        return out_dir / self.family / ((self.stem or self.source.stem) + ".json")


@dataclass(frozen=True)
class FileResult:
    """What importing one source file gave: ``imported``, ``skipped`` (with the reason) or ``error``."""

    source: Path
    status: str
    imported: Imported | None = None
    reason: str | None = None
    family: str | None = None          # "index" for a deletion-map index (checked, not imported)
    #: every trace of the file (a file of several cases), and the cases it cannot map
    items: tuple[Imported, ...] = ()
    unmapped: tuple[Unmapped, ...] = ()

    @property
    def traces(self) -> tuple[Imported, ...]:
        return self.items or ((self.imported,) if self.imported is not None else ())

    def to_json(self) -> dict:
        out: dict[str, Any] = {"source": str(self.source), "status": self.status}
        if self.family is not None:
            out["family"] = self.family
        if self.imported is not None:
            out.update(family=self.imported.family, trace=self.imported.trace.id,
                       steps=len(self.imported.trace.steps))
        if self.items:
            out["traces"] = [{"trace": i.trace.id, "steps": len(i.trace.steps)} for i in self.items]
        if self.unmapped:
            out["unmapped"] = [u.to_json() for u in self.unmapped]
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


def _named(trace: Trace, p: Path) -> Trace:
    # WG's fixtures predate capability tokens: their honest senders hold them (``with_tokens``)
    return Trace.from_json(with_tokens(as_names(trace.to_json(), str(p))), trace.path)


def import_cases(path: str | Path) -> tuple[list[Imported], list[Unmapped]] | None:
    """Translate one fixture file into every trace it maps and every case it reports (None
    for a deletion-map index, which is only checked)."""
    p = Path(path)
    doc = read_json(p)
    family = family_of(doc)
    if family is None:
        raise NotAFixture(str(p), "", "not a WG fixture: no wire_version 1, schema_version 2, "
                                      "deletion-map trace_schema, daemon trace, reducer_version 1, "
                                      "scenario cases or planner state")
    if family == "index":
        check_index(p, doc)
        return None
    if family in TRANSLATORS:
        return [Imported(p, family, _named(TRANSLATORS[family](doc, str(p)).run(), p))], []
    traces, unmapped = CASE_TRANSLATORS[family](doc, str(p)).run()
    many = len(traces) > 1 or family in ("runtime/v1", "simple-land/v1")
    return [Imported(p, family, _named(t, p), stem if many else None) for stem, t in traces], list(unmapped)


def import_file(path: str | Path) -> Imported | None:
    """Translate one fixture file of one trace (None for a deletion-map index, which is only
    checked; for a file of several cases, its first trace: ``import_cases`` gives them all)."""
    got = import_cases(path)
    if got is None:
        return None
    traces, unmapped = got
    if not traces:
        u = unmapped[0]
        raise WgImportError(u.file, "/" + u.field, f"case {u.case} cannot be mapped: {u.reason}")
    return traces[0]


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
        got = import_cases(path)
    except NotAFixture as e:
        return FileResult(path, "skipped", reason=str(e))
    except WgImportError as e:
        return FileResult(path, "error", reason=str(e))
    if got is None:
        return FileResult(path, "skipped", reason=f"{path}: {INDEX_CHECKED}", family="index")
    traces, unmapped = got
    status = "imported" if not unmapped else ("partial" if traces else "unmapped")
    if len(traces) == 1 and traces[0].stem is None:
        return FileResult(path, status, traces[0], unmapped=tuple(unmapped))
    return FileResult(path, status, items=tuple(traces), unmapped=tuple(unmapped),
                      family=(traces[0].family if traces else None))


def import_results(paths: list[str | Path]) -> list[FileResult]:
    """One result per ``*.json`` file under ``paths`` (files, or directories searched)."""
    return [import_one(f) for f in source_files(paths)]


def import_paths(paths: list[str | Path]) -> list[Imported]:
    """Translate every fixture under ``paths``; files of no known family are skipped, the first error raises."""
    out = []
    for f in source_files(paths):
        try:
            got = import_cases(f)
        except NotAFixture:
            continue
        if got is not None:
            out += got[0]
    return out
