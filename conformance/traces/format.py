"""The trace format ``wgk-trace/1``: load, validate, build and write traces.

A trace is a JSON document (schema: ``traces/schema/wgk-trace-1.schema.json``)
with an id, a title, its source and provenance, a description, the task graph,
optional seeded ``initial`` facts, ordered ``steps`` (a wire request with its
idempotency key, or an environment step), the expected decision per step where
known, optional per-step expected facts and the expected final facts.

Expected facts use the keys of the observable projection (docs/vocabulary.md)
and are matched by the keys they list, recursively through objects: a fact
that is not listed is not checked, a listed ``null`` also matches an absent
key, arrays and scalars compare by equality. Two matchers exist for arrays:
``{"$contains": [...]}`` (every listed element is present) and
``{"$kinds": [...], "$exactly": [...]}`` (the ``[kind, id]`` entries whose kind
is listed are exactly these, in any order).

The written form is canonical so that files diff readably in review: stable
key order, 2-space indent, a container kept on one line when it fits in 120
columns, a trailing newline. ``load_trace`` reports a malformed file in one
line naming the path and a JSON pointer (``TraceError``): invalid UTF-8 or
JSON, values no store can hold and names outside the grammar included
(``inputs``); the CLI maps it to exit code 2.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from wgk.conformance.traces import inputs

FORMAT = "wgk-trace/1"


def _schema_path() -> Path:
    """The schema shipped in the package data ``wgk.traces`` (the checkout's in an editable
    install; the checkout's too in an editable install made before it was packaged)."""
    import importlib.resources
    try:
        root = Path(str(importlib.resources.files("wgk.traces")))
    except ModuleNotFoundError:
        root = Path(__file__).resolve().parents[2] / "traces"
    return root / "schema" / "wgk-trace-1.schema.json"


SCHEMA_PATH = _schema_path()
SOURCE_KINDS = ("incident", "peer-fixture", "counterexample", "recorded-run")
LINE_WIDTH = 120
NOT_TRACES = (".schema.json", ".itf.json")


class TraceError(ValueError):
    """A malformed trace file: one line, ``path: /pointer: message``."""

    def __init__(self, path: str, pointer: str, message: str):
        where = f"{path}: {pointer}: " if pointer else f"{path}: "
        super().__init__(where + message)
        self.path = path
        self.pointer = pointer
        self.message = message


@dataclass
class Trace:
    """One ``wgk-trace/1`` document. Steps, graph and facts keep their wire (JSON) shape."""

    id: str
    title: str
    source: dict[str, Any]
    description: str
    graph: dict[str, Any]
    steps: list[dict[str, Any]] = field(default_factory=list)
    initial: dict[str, Any] = field(default_factory=dict)
    expect: dict[str, Any] = field(default_factory=dict)
    #: the named historical planner's expectation (``wgk replay --planner historical``)
    historical: dict[str, Any] = field(default_factory=dict)
    path: str | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format": FORMAT, "id": self.id, "title": self.title, "source": self.source,
            "description": self.description, "graph": self.graph,
        }
        if self.initial:
            out["initial"] = self.initial
        out["steps"] = self.steps
        if self.expect:
            out["expect"] = self.expect
        if self.historical:
            out["historical"] = self.historical
        return canonical(out)

    @staticmethod
    def from_json(doc: dict[str, Any], path: str | None = None) -> "Trace":
        return Trace(
            id=doc["id"], title=doc["title"], source=doc["source"],
            description=doc["description"], graph=doc["graph"], steps=list(doc["steps"]),
            initial=doc.get("initial", {}), expect=doc.get("expect", {}),
            historical=doc.get("historical", {}), path=path,
        )

    @property
    def task_names(self) -> list[str]:
        return [t["name"] for t in self.graph.get("tasks", [])]


# --- validation ----------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


@functools.lru_cache(maxsize=1)
def _validator():
    import jsonschema
    cls = jsonschema.validators.validator_for(schema())
    cls.check_schema(schema())
    return cls(schema())


def pointer(parts: Iterable[Any]) -> str:
    """A JSON pointer (RFC 6901) for a path of keys and indexes."""
    out = ""
    for p in parts:
        out += "/" + str(p).replace("~", "~0").replace("/", "~1")
    return out or "/"


def _one_line(message: str) -> str:
    return " ".join(message.split())


def schema_errors(doc: Any) -> list[tuple[str, str]]:
    """``(pointer, message)`` for every schema violation, the most relevant first."""
    import jsonschema
    errors = list(_validator().iter_errors(doc))
    if not errors:
        return []
    best = jsonschema.exceptions.best_match(errors)
    ordered = [best] + [e for e in errors if e is not best]
    return [(inputs.short(pointer(e.absolute_path), 120), inputs.short(_one_line(e.message), 160))
            for e in ordered]


#: Digests of trace texts found to satisfy the schema (``schema_digest``), kept between runs
#: by the gate's cache (``gate_cache``); None: none kept, every text is checked.
SCHEMA_PASSED: set[str] | None = None


@functools.lru_cache(maxsize=1)
def _schema_basis() -> bytes:
    import importlib.metadata
    try:
        version = importlib.metadata.version("jsonschema")
    except importlib.metadata.PackageNotFoundError:
        version = "?"
    return hashlib.sha256(b"\0".join([SCHEMA_PATH.read_bytes(), version.encode(),
                                       Path(__file__).read_bytes()])).digest()


def schema_digest(raw: bytes) -> str:
    """What the schema's verdict on a trace text is a function of: the text, the schema, the
    validator's version and this module (which builds the validator)."""
    return hashlib.sha256(_schema_basis() + raw).hexdigest()


def validate(doc: Any, path: str = "<trace>", raw: bytes | None = None) -> None:
    """Raise ``TraceError`` for the first problem of a parsed document: a value no store
    holds, then the schema, the names (``inputs``), the graph and its references (``raw``:
    the text it was parsed from, whose schema verdict may be kept in ``SCHEMA_PASSED``)."""
    bad = inputs.value_problem(doc)
    if bad is not None:
        raise TraceError(path, inputs.short(pointer(bad[0]), 120), bad[1])
    known = None if SCHEMA_PASSED is None or raw is None else schema_digest(raw)
    ahead = AHEAD.pop(hashlib.sha256(raw).digest(), None) if AHEAD and raw is not None else None
    if known is not None and known in SCHEMA_PASSED:
        errs = []
    else:                              # a verdict checked ahead is kept as one checked here
        errs = ahead if ahead is not None else schema_errors(doc)
        if not errs and known is not None:
            SCHEMA_PASSED.add(known)
    if not errs:
        errs = [(pointer(at), message) for at, message in inputs.name_problems(doc)]
    if not errs:
        errs = inputs.semantic_errors(doc)
    if errs:
        where, message = errs[0]
        raise TraceError(path, where, message)


def parse_trace(text: str | bytes, path: str = "<trace>") -> Trace:
    """Parse and validate trace text (``TraceError`` on invalid UTF-8 or JSON, JSON nested
    too deeply, or an invalid trace)."""
    doc, problem = inputs.decode(text if isinstance(text, bytes) else text.encode("utf-8",
                                                                                  "surrogatepass"))
    if problem is not None:
        raise TraceError(path, "", problem)
    validate(doc, path, text if isinstance(text, bytes) else None)
    return Trace.from_json(doc, path)


def load_trace(path: str | Path) -> Trace:
    """Load one trace file (``TraceError`` naming the path and a JSON pointer)."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise TraceError(str(path), "", "no such file") from None
    except OSError as e:
        raise TraceError(str(path), "", f"cannot read: {e.strerror}") from None
    return parse_trace(raw, str(path))


def trace_files(paths: Iterable[str | Path]) -> list[Path]:
    """The trace files named by ``paths``: files as given, directories searched recursively
    for ``*.json`` (JSON Schemas ``*.schema.json`` and ITF files ``*.itf.json`` are skipped).
    Sorted, deduplicated."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out += sorted(f for f in p.rglob("*.json") if not f.name.endswith(NOT_TRACES))
        elif p.exists():
            out.append(p)
        else:
            raise TraceError(str(raw), "", "no such file or directory")
    seen: set[Path] = set()
    unique = []
    for f in out:
        if f.resolve() not in seen:
            seen.add(f.resolve())
            unique.append(f)
    return unique


def load_traces(paths: Iterable[str | Path], workers: int = 1) -> list[Trace]:
    """The traces of ``paths`` (``trace_files``), in order; the first problem raises
    ``TraceError``. ``workers`` > 1: for many files, their texts are checked against the schema
    on that many processes first (the schema's verdict is a function of the text alone), then
    each file is validated in turn as with one, taking that verdict (a text whose pass is kept
    in ``SCHEMA_PASSED`` is not checked ahead; a pass checked ahead is kept there too)."""
    files = trace_files(paths)
    pending = [f for f in files if not _passed_before(f)] if workers > 1 else files
    if workers > 1 and len(pending) >= AHEAD_FROM:
        _schemas_ahead(pending, workers)
    try:
        return [load_trace(f) for f in files]
    finally:
        AHEAD.clear()


#: The schema's verdicts on trace texts checked ahead (``load_traces``), by the text's sha256.
AHEAD: dict[bytes, list[tuple[str, str]]] = {}
#: The fewest files whose schema verdicts are worth checking on several processes.
AHEAD_FROM = 32


def _passed_before(f: Path) -> bool:
    """Whether the schema's verdict on the file's text is a pass kept in ``SCHEMA_PASSED``
    (an unreadable file is not: ``validate`` reports it)."""
    if not SCHEMA_PASSED:
        return False
    try:
        return schema_digest(f.read_bytes()) in SCHEMA_PASSED
    except OSError:
        return False


def _schema_share(files: list[Path]) -> dict[bytes, list[tuple[str, str]]]:
    """The schema's verdicts on those of ``files`` that ``validate`` would check against it
    (readable, decoded, every value storable, no verdict kept); any other is left out."""
    out = {}
    for f in files:
        try:
            raw = f.read_bytes()
            doc, problem = inputs.decode(raw)
            if problem is not None or inputs.value_problem(doc) is not None:
                continue
            if SCHEMA_PASSED is not None and schema_digest(raw) in SCHEMA_PASSED:
                continue
            out[hashlib.sha256(raw).digest()] = schema_errors(doc)
        except Exception:              # noqa: BLE001 -- left to ``validate``, which reports it
            continue
    return out


def _schemas_ahead(files: list[Path], workers: int) -> None:
    """``AHEAD`` for ``files``: every ``workers``-th one checked here, the others on forked
    processes meanwhile (a share whose process cannot start or fails is checked in turn). The
    validator is made (its schema checked, ``jsonschema`` imported) before the fork: each
    process takes it made instead of making its own (one that cannot be made is left to
    ``validate``, which reports it)."""
    try:
        _validator()
    except Exception:                  # noqa: BLE001 -- reported by ``validate``
        pass
    children = []
    for share in [files[n::workers] for n in range(1, workers)]:
        try:
            r, w = os.pipe()
            pid = os.fork()
        except OSError:
            break
        if pid == 0:                   # the child: its share's verdicts down the pipe, then out
            code = 1
            try:
                os.close(r)
                with os.fdopen(w, "wb") as out:
                    out.write(pickle.dumps(_schema_share(share)))
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        children.append((pid, r))
    AHEAD.update(_schema_share(files[0::workers]))
    for pid, r in children:
        with os.fdopen(r, "rb") as got:
            data = got.read()
        _, status = os.waitpid(pid, 0)
        if status == 0:
            try:
                AHEAD.update(pickle.loads(data))
            except Exception:          # noqa: BLE001 -- what is missing is checked in turn
                pass


# --- canonical form ----------------------------------------------------------------

#: Key order per object kind; keys not listed follow in sorted order.
TOP_ORDER = ("format", "id", "title", "source", "description", "graph", "initial", "steps", "expect",
             "historical")
SOURCE_ORDER = ("kind", "incident", "provenance", "file")
GRAPH_ORDER = ("id", "target", "protected-paths", "tasks")
TASK_ORDER = ("name", "deps", "review-required", "requires-assignment", "retry-budget")
STEP_ORDER = ("request", "env", "task", "principal", "content", "onto", "paths", "birth", "amount",
              "expect", "expect-facts", "from", "note")
REQUEST_ORDER = ("kind", "actor", "task", "key", "cap", "token", "expected-phase",
                 "expected-revision", "expected-attempt", "expected-generation", "owner", "mint",
                 "imports", "candidate", "base", "verdict", "disposition", "reason", "failure",
                 "correlation", "route", "evidence", "deadline")
CAP_ORDER = ("graph", "task", "generation", "attempt", "fence", "lease-epoch")
OWNER_ORDER = ("pid", "birth", "session", "wrapper-epoch", "child-epoch")
DECISION_ORDER = ("decision", "code", "original")
FACTS_ORDER = ("target", "now", "tasks", "journal")
SEED_ORDER = ("attempt",)
ATTEMPT_ORDER = ("generation", "attempt", "fence", "lease-epoch", "state", "token", "owner", "alive",
                 "owner-seen", "leases", "worktree", "origin")
TASK_FACT_ORDER = (
    "status", "dependency-satisfied", "plan", "generation", "attempt", "fence", "lease-epoch",
    "attempt-state", "owner-seen", "owner", "leases", "phase", "exit", "reason", "revision",
    "candidate", "base", "version", "disposition", "receipts", "worktree", "saved-work",
    "retained", "imported", "promotions", "effect-done", "deadline", "recovery-rank", "counters",
    "evidence", "failure", "retries", "waiting-on", "wait-deadline", "wait-expired", "assigned", "legacy-done", "reconstructed", "abandoned",
)
PLAN_ORDER = ("task", "way", "action", "reason", "deadline")
RECEIPT_ORDER = ("work-save", "candidate", "validation", "review", "disposition", "effect",
                 "cleanup", "graph-save")
BINDING_ORDER = ("fence", "candidate", "base")
LEASE_ORDER = ("worktree", "session", "finish")
WORKTREE_ORDER = ("present", "content", "origin")
COUNTER_ORDER = ("compactions", "continuations", "acks", "provider-failures", "messages", "logs")
FROM_ORDER = ("pointer", "event", "decision")


def _ordered(d: dict, order: tuple[str, ...]) -> dict:
    out = {k: d[k] for k in order if k in d}
    for k in sorted(d):
        if k not in out:
            out[k] = d[k]
    return out


def _facts(f: dict) -> dict:
    out = _ordered(f, FACTS_ORDER)
    if isinstance(out.get("tasks"), dict):
        out["tasks"] = {name: _task_facts(tf) for name, tf in out["tasks"].items()}
    if isinstance(out.get("journal"), dict):
        out["journal"] = {k: _decision(v) for k, v in out["journal"].items()}
    return out


def _decision(d: Any) -> Any:
    if not isinstance(d, dict):
        return d
    out = _ordered(d, DECISION_ORDER)
    if isinstance(out.get("original"), dict):
        out["original"] = _ordered(out["original"], DECISION_ORDER)
    return out


def _task_facts(tf: Any) -> Any:
    if not isinstance(tf, dict):
        return tf
    out = _ordered(tf, TASK_FACT_ORDER)
    subs = {"plan": PLAN_ORDER, "owner": OWNER_ORDER, "leases": LEASE_ORDER,
            "worktree": WORKTREE_ORDER, "counters": COUNTER_ORDER}
    for key, order in subs.items():
        if isinstance(out.get(key), dict):
            out[key] = _ordered(out[key], order)
    if isinstance(out.get("receipts"), dict):
        out["receipts"] = {k: (_ordered(v, BINDING_ORDER) if isinstance(v, dict) else v)
                           for k, v in _ordered(out["receipts"], RECEIPT_ORDER).items()}
    return out


def _seed(seed: dict) -> dict:
    out = _ordered(seed, SEED_ORDER)
    a = out.get("attempt")
    if isinstance(a, dict):
        a = _ordered(a, ATTEMPT_ORDER)
        if isinstance(a.get("owner"), dict):
            a["owner"] = _ordered(a["owner"], OWNER_ORDER)
        if isinstance(a.get("leases"), dict):
            a["leases"] = _ordered(a["leases"], LEASE_ORDER)
        out["attempt"] = a
    if isinstance(out.get("counters"), dict):
        out["counters"] = _ordered(out["counters"], COUNTER_ORDER)
    return out


def canonical_request(r: dict) -> dict:
    out = _ordered(r, REQUEST_ORDER)
    if isinstance(out.get("cap"), dict):
        out["cap"] = _ordered(out["cap"], CAP_ORDER)
    if isinstance(out.get("owner"), dict):
        out["owner"] = _ordered(out["owner"], OWNER_ORDER)
    return out


def canonical_step(step: dict) -> dict:
    out = _ordered(step, STEP_ORDER)
    if isinstance(out.get("request"), dict):
        out["request"] = canonical_request(out["request"])
    if "expect" in out:
        out["expect"] = _decision(out["expect"])
    if isinstance(out.get("expect-facts"), dict):
        out["expect-facts"] = _facts(out["expect-facts"])
    if isinstance(out.get("from"), dict):
        out["from"] = _ordered(out["from"], FROM_ORDER)
    return out


def canonical(doc: dict) -> dict:
    """The document with every object's keys in the canonical order."""
    out = _ordered(doc, TOP_ORDER)
    out["source"] = _ordered(out["source"], SOURCE_ORDER)
    g = _ordered(out["graph"], GRAPH_ORDER)
    g["tasks"] = [_ordered(t, TASK_ORDER) for t in g.get("tasks", [])]
    out["graph"] = g
    if "initial" in out:
        out["initial"] = {name: _seed(s) for name, s in out["initial"].items()}
    out["steps"] = [canonical_step(s) for s in out["steps"]]
    if "expect" in out:
        out["expect"] = _facts(out["expect"])
    if isinstance(out.get("historical"), dict) and isinstance(out["historical"].get("expect"), dict):
        out["historical"] = {**out["historical"], "expect": _facts(out["historical"]["expect"])}
    return out


def render(value: Any, indent: int = 0, width: int = LINE_WIDTH, lead: int = 0) -> str:
    """JSON with 2-space indent; a container stays on one line when it fits in ``width``
    (``lead`` is the width of what precedes the value on its line, e.g. its key)."""
    flat = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    if not isinstance(value, (dict, list)) or not value or indent + lead + len(flat) <= width:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, dict):
        items = []
        for k, v in value.items():
            key = json.dumps(k, ensure_ascii=False) + ": "
            items.append(pad + key + render(v, indent + 2, width, len(key)))
        return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"
    inner = ",\n".join(pad + render(v, indent + 2, width) for v in value)
    return "[\n" + inner + "\n" + " " * indent + "]"


def dump_trace(trace: Trace) -> str:
    """The canonical, review-friendly text of a trace (trailing newline included)."""
    return dumps_json(trace.to_json())


def dumps_json(doc: Any) -> str:
    return render(doc) + "\n"


def write_trace(trace: Trace, path: str | Path) -> Path:
    """Validate and write ``trace`` in canonical form; parent directories are created."""
    doc = trace.to_json()
    validate(doc, str(path))
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(dumps_json(doc), encoding="utf-8")
    return p


def iter_requests(trace: Trace) -> Iterator[tuple[int, dict]]:
    for n, step in enumerate(trace.steps):
        if "request" in step:
            yield n, step["request"]
