"""Translate the peer's golden vectors (graphwork/wg fixtures) into ``wgk-trace/1``.

Families (``../shared/fixtures/wg/``): finish wire **v1** (15 files),
SaveTransaction schema **v2** (5), the single-kernel **deletion map** (8), the
daemon planner's **daemon/v1-v3** (14), the runtime reducer's **runtime/v1** (7
cases), the review kernel's **simple-land/v1** (6 cases: each event one request of
the review valve, after the dispatch of the source worker's attempt) and the persisted
**planner-runtime** state (2 files). The daemon, runtime and planner-state families
describe situations, not requests: their importers write the steps that bring a task
there (``scenario``) and expect WG's way forward as the plan; a case the model cannot
express exactly is returned as ``Unmapped`` (file, case, field, why) and
reported, never dropped (``docs/peer-wg.md`` lists them).
Every expected decision and every expected final fact is kept, translated into
our vocabulary; the source file and a JSON pointer per step are kept in the
trace (``source.file``, ``steps[].from``). A field or event the importer cannot
map is an error naming the file, the JSON pointer and the field: every field of
every source object is either translated, or checked against what the trace
already says (and then named in the family's table); nothing is dropped.

Identifiers: the peer's graph ids and content ids (``graph:v2:golden``,
``base:b3:main-0``) are not names in our grammar (``wgk.model.names``: no
``:``); each becomes the name with ``:`` as ``.`` (``graph.v2.golden``), the
same everywhere in the trace (``common.as_names``).

Idempotency keys: a v1 event has none, so each gets a stable key derived from
its content, ``wg:<type>:<sha256 of the canonical event, 12 hex>/<our kind>``:
an identical re-delivered event is a duplicate. v2 and deletion-map requests
keep their keys (``<key>/<our kind>`` when one request becomes several).

One source event may become several of our steps; the CAS fields
(expected phase and revision) are those a well-behaved client knows from the
responses it was given, i.e. from the fixture's own expected decisions.

Modules: ``common`` (source objects read field by field, the client's transaction
state), one module per family with its mapping table (``v1`` and
``v1_records``, ``v2``, ``deletion_map``, ``daemon``, ``runtime``,
``simple_land``, ``planner_runtime``), ``scenario``, and ``files`` (which family a file
is, and the result of importing each file). A file of no known family is
skipped with its reason, never fatal to the directory it lies in.
"""
from __future__ import annotations

from wgk.conformance.traces.wg.common import FAMILIES, Unmapped, WgImportError
from wgk.conformance.traces.wg.files import (
    FileResult, Imported, NotAFixture, family_of, import_cases, import_file, import_paths, import_results,
    source_files,
)

__all__ = ["FAMILIES", "FileResult", "Imported", "NotAFixture", "Unmapped", "WgImportError", "family_of",
           "import_cases", "import_file", "import_paths", "import_results", "source_files"]
