"""The gate's cache: a part's checks kept under a key covering everything they depend on.

``wgk gate --cache DIR`` keeps, for every part of a section (``gate_split``: a
trace, a mutant, an instance, a half of the proofs; a section run whole otherwise),
the checks it gave. An entry is found by a *static key*, a digest of

- the cache's format, wgk's version, Python's, z3's, SQLite's and git's;
- the gate's options: the budget's name and its whole value, the backend, the
  counterexamples folder, the section, the part (which traces, mutants, mode);
- the part's inputs: the trace it replays (its path and content), every loaded
  trace for a section that reads them all, what the earlier sections found for a
  late one (the trace matrix, the coverage);
- the *skeleton* of wgk's sources: every file of ``wgk.model``, ``wgk.impl`` and
  ``wgk.conformance`` with the bodies of its functions left out (its imports,
  constants, tables, classes, signatures, decorators and defaults stay), except the
  functions that run when the modules are imported, which stay whole; and every
  data file of those packages (and the trace schema) whole;

and it is reused only when the *recorded dependencies* stored with it still hold:
while the part ran, a trace function (``sys.settrace``, in every thread) noted
each function of wgk's sources that ran; the entry stores, per file, those
functions and a digest of the file's text with every other function's body left
out. A change to a function a part did not run leaves that part's key whole; a
change anywhere else (a function it ran, a constant, a signature, a data file)
re-runs it. The proofs are keyed by the whole text of ``wgk.model`` and
``wgk.conformance`` (the rules, the properties, the lemmas, the encoding) without
recording: tracing would cost them several times their time. Each of the model's
mutants (a part of its own) is keyed by what its kill read (``gate_mutants``): every file
of the model and of the suite but the rule files whole, its incident traces, the
prover's set-up by value kind by kind, and as its dependencies the rule-file functions
the proof frames it consulted, the traces it replayed and its exploration can run, found
from its check and from the kinds whose rule its exploration ran (noted through the
model's table of rules, not traced). An exploration part is keyed the same way: every
file but the rule files whole, and the rule-file functions of the kinds whose rule it
ran. Inside a prove part run again, each proof frame is kept on its own
(``gate_frames``: under a key of the rule-file functions its transition can run), so
a change to one rule re-runs that rule's frames only; the frames reused count among
the checks reused. The sections whose code also runs in child processes they start (the
environment contract's, the races' forked writers, the tamper section's file modes and
hostile inputs) are recorded with their children (``recording_children``): every Python
child loads a recording hook (``gate_record_hook``, as ``sitecustomize``) and every fork
starts it from a fork hook, each writing what it runs as it goes; a child that may not
load it (an environment of its own, ``-I``, ``-E``, ``-S``) or a fork that wrote nothing
makes the part depend on every function of every source file. A section whose children
are killed mid-write by design or run whole gates of their own (the kill-mode crash cuts,
the implementation's mutants, the guards) or that reads the sources as text (the trace
matrix) is keyed *conservatively*: every source file whole, nothing recorded. The coverage
is recorded, with the files it reads as text in its key (``COVERAGE``).

The replays (``OUTPUT_KEYED``: the lockstep replay, the two kernels on one database) read
the model only through its run of their trace: the reference system's decisions, broken
invariants and projections step by step, and the coverage shadow's cells. A rule-file
function such a part ran only inside that run (``recording_model_run``: a method of the
model's run below it on the stack) is kept beside its dependencies with the digest of the
run (``model_run``); when one of those functions changed and nothing else did, the run is
made again (about a fifth of a replay's time, kept under the trace and the model's whole
text), and while it gives the same digest the part is reused and kept again under the new
text: a rule edited without changing anything along the trace re-runs no replay.

Two things a warm run would otherwise do again are kept beside the entries: the schema's
verdict on each trace text (``traces.format.schema_digest``: the text, the schema, the
validator's version and the module building it) and the prover's set-up by kind under the
model (``gate_mutants.Context.kind_setup``: every file of the model and of the suite
whole).

Inside a part of the probes or the fuzzing run again, each system under test the part makes
(a probed trace's implementation, a fuzz example's) is answered call by call from the
record of that part's earlier runs while each call's own functions are unchanged
(``gate_cache_memo``, with why that key is sound): a changed module runs again exactly the
systems whose calls ran it, from a fresh system sent their earlier calls again.

The key is of the sources on disk: a function replaced in memory (a test's
monkeypatch) is not seen, so a gate with such a patch is run without the cache.

Under one static key several entries may be kept, one per set of recorded
dependencies (the newest tried first), so going back to an earlier version of a
function finds its checks again. A part with an error is never stored (an error
may be the machine's). Entries are
written to a temporary file and renamed, so a killed gate or two workers (or two gates
sharing the folder) writing at once never leave a torn entry. An entry that cannot be read (truncated,
garbage, another format) is ignored with a one-line warning, and overwritten.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import importlib.metadata
import io
import json
import os
import pickle
import re
import sqlite3
import subprocess
import sys
import tempfile
import threading
import contextlib
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from wgk.conformance.reports import gate_cache_memo as memo
from wgk.conformance.reports.gate_cache_memo import MEMO_SECTIONS
from wgk.conformance.reports.gate_report import Check

FORMAT = "wgk-gate-cache/1"

#: Sections keyed conservatively (their code runs in child processes or reads sources as text).
CONSERVATIVE = frozenset({"trace-matrix", "impl-mutants", "verify-guards"})
#: The coverage section, keyed by what it read and not by every source file: its two parts
#: (the witnesses replayed against the implementation, ``{"witnesses": True}``, among the
#: other sections' parts; the counting after them, with the cells the measured sections sent
#: and the replays' outcome with whether the witnesses are stale as inputs,
#: ``gate.part_inputs``) are recorded like any traced part, and keyed beside the sources by
#: what they read as files (``coverage_reads``): the bundled traces the witnesses start from
#: and, for the replays' part, whether the model's text is the one the witnesses were
#: searched on (``witnesses.model_digest``). What the model and the suite
#: computed earlier in the process and kept (``functools.lru_cache``: the cells of the
#: decision space, the rules' answers) is forgotten before either part runs (``forget``), so
#: the functions computing it run inside the part and are recorded: a changed rule re-runs
#: the counting when the cells or the proofs read it, a changed implementation module only
#: the replays whose systems ran it (answered call by call, ``gate_cache_memo``).
COVERAGE = "coverage"
#: Sections whose code runs in child processes too, keyed by what they and their children ran
#: (``recording_children``): the environment contract (a child process table), the races
#: (forked writers), the tamper section's file modes and hostile inputs (``python -c``
#: children running wgk's command line). Sound while every Python child loads the recording
#: hook; when one may not, the part depends on every function of every source file.
CHILDREN = frozenset({"contract", "races", "tamper"})
#: Sections whose parts (one trace each) read the model only through its run of the trace:
#: the reference system of the lockstep replay (``ModelSystem``: each step's decision or
#: refusal, the projection and the broken invariants after it, those of the initial state)
#: and the coverage's shadow beside the implementation (``coverage.Shadow``: the cells of
#: the trace's requests). Such a part is kept with the digest of those outputs
#: (``model_run``), and a rule-file function it ran only inside those two is checked
#: through the digest instead of its text (``recording_model_run``): a rule edited so that
#: nothing along the trace answers differently leaves the part reused.
OUTPUT_KEYED = frozenset({"replay", "two-kernels"})
#: Sections that read no trace (their keys leave the loaded traces out).
NO_TRACES = frozenset({"prove", "explore", "fuzz", "races", "contract"})
#: Sections on the model alone, keyed by the whole text of the model and of the conformance
#: suite (the encoding, the lemmas, the explorer): tracing their hot loops would cost them
#: two to four times their time, and they run every rule anyway (a test records one of each
#: to hold that they run nothing of ``wgk.impl``). A part of the mutants section that runs
#: one mutant is keyed by what its kill read instead (``gate_mutants``).
MODEL_SECTIONS = frozenset({"prove", "mutants", "explore"})


#: The packages whose in-process memos (``functools.lru_cache``) a coverage part forgets
#: before it runs (``forget``).
FORGOTTEN = ("wgk.model", "wgk.conformance.oracle", "wgk.conformance.z3")


def forget(prefixes: tuple[str, ...] = FORGOTTEN) -> None:
    """Empty every ``functools.lru_cache`` of the modules under ``prefixes``: a value computed
    before a part runs would otherwise be read in it without the functions computing it
    running there, and be missing from what the part is recorded to have run."""
    for name, module in list(sys.modules.items()):
        if module is not None and name.startswith(prefixes):
            for value in list(vars(module).values()):
                try:
                    clear = getattr(value, "cache_clear", None)
                except Exception:      # noqa: BLE001 -- a value refusing every attribute
                    continue           # (``prove._UNREAD``) is no memo
                if callable(clear) and hasattr(value, "__wrapped__"):
                    clear()


def coverage_reads(counting: bool, text: bool | None = None) -> str:
    """What a part of the coverage reads as files beside the sources (``COVERAGE``): every
    file of the bundled traces (the witnesses start from their states, and whether they are
    stale compares their digests with the witnesses'), and what ``witnesses.stale_reason``
    reads of the model's text: only whether it is the text the witnesses were searched on
    (``witnesses.model_digest`` against the digest the witnesses' file holds, which is a data
    file of the sources, in the static key). That answer is all it takes from the text: the
    same, the witnesses are current without more; else their currency is decided by the
    cells and the proofs of the unreachable ones, computed by functions the part runs and so
    records (a changed rule they read runs it again). The replays' part finds the stale
    reason (``gate_coverage.witness_replays``) and is keyed by that answer; the counting
    (``counting``) is given the stale reason with the replays' outcome (an input of its key)
    and computes it only when not given it, which under the cache it never is (without the
    replays' outcome it is not kept, ``gate.run_section``): it reads nothing of the text.
    The replays are parted (``gate._witness_parts``): the part finding the stale reason reads
    that answer (``text``, the default for a replays' part), the parts replaying one trace's
    witnesses read nothing of the text (``text`` False: the answer left out of their key)."""
    from wgk.conformance.oracle.witnesses import model_digest
    searched = None
    if text is None:
        text = not counting
    if text:
        try:
            doc = json.loads((SOURCES["conformance"] / "oracle" / "witnesses.json")
                             .read_text(encoding="utf-8"))
            searched = doc.get("model-digest") == model_digest(SOURCES["model"])
        except (OSError, ValueError, AttributeError):
            searched = "unread"
    root = Path(_schema_dir()).parent
    files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return _digest(json.dumps(searched), json.dumps(counting),
                   *(x for p in files for x in (p.relative_to(root).as_posix(), p.read_bytes())))


def _roots() -> dict[str, Path]:
    import wgk.conformance
    import wgk.impl
    import wgk.model
    return {name: Path(mod.__file__).resolve().parent
            for name, mod in (("model", wgk.model), ("impl", wgk.impl),
                              ("conformance", wgk.conformance))}


#: Where the code that runs comes from, and where the cache reads the sources it keys by
#: (the same folders; a test points ``SOURCES`` at a changed copy).
ROOTS = _roots()
SOURCES = dict(ROOTS)


def _schema_dir() -> Path:
    from wgk.conformance.reports.gate_budget import bundled_traces
    return Path(bundled_traces()).resolve() / "schema"


def source_files() -> list[tuple[str, Path]]:
    """``(name, path)`` of every file of wgk's packages (sources and data) and the trace
    schema, the name relative to the packages, in order."""
    out = []
    for name, root in list(SOURCES.items()) + [("traces/schema", _schema_dir())]:
        if not root.is_dir():
            continue
        for p in sorted(root.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc":
                out.append((f"{name}/{p.relative_to(root).as_posix()}", p))
    return out


def around_files(tests: bool) -> list[tuple[str, Path]]:
    """What the conservatively keyed sections read beside the sources: the bundled traces
    (the coverage's witnesses start there, the trace matrix lists them), the checkout's
    ``docs`` (the trace matrix's design document) and, with ``tests``, its tests (the
    guards' verification runs some)."""
    out = []
    checkout = ROOTS["conformance"].parent
    for name, root in (("traces", Path(_schema_dir()).parent), ("docs", checkout / "docs"),
                       ("tests", checkout / "tests") if tests else ("", Path("/nonexistent"))):
        if root.is_dir():
            out += [(f"{name}/{p.relative_to(root).as_posix()}", p) for p in sorted(root.rglob("*"))
                    if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
                    and "counterexamples" not in p.parts]
    return out


@functools.lru_cache(maxsize=None)
def relative(filename: str) -> str | None:
    """The name of a source file of wgk's packages, through links (None: not one of them)."""
    filename = os.path.realpath(filename)
    for name, root in ROOTS.items():
        prefix = str(root) + os.sep
        if filename.startswith(prefix):
            return f"{name}/{filename[len(prefix):].replace(os.sep, '/')}"
    return None


def _digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        b = p.encode() if isinstance(p, str) else p
        h.update(len(b).to_bytes(8, "big") + b)
    return h.hexdigest()


# --- a source file's text without the functions that did not run ---------------------------


#: ``(qualname, first line of body, last line)`` of each function of a source text, by the
#: text's digest (kept in the cache folder: parsing every file again costs seconds).
FUNCTIONS: dict[str, tuple[tuple[str, int, int], ...]] = {}
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


@functools.lru_cache(maxsize=None)
def _functions(path: Path) -> tuple[str, tuple[tuple[str, int, int], ...]] | None:
    """The file's text and ``(qualname, first line of body, last line)`` of each function
    whose body starts below its ``def`` (None when it does not parse)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError):
        return None
    digest = _digest(text)
    if digest in FUNCTIONS:
        return text, FUNCTIONS[digest]
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    found = []

    def walk(statements, prefix: str) -> None:
        for child in statements:
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qual = prefix + child.name
                if child.body[0].lineno > child.lineno:
                    found.append((qual, child.body[0].lineno, child.end_lineno))
                walk(child.body, qual + ".<locals>.")
            elif isinstance(child, ast.ClassDef):
                walk(child.body, prefix + child.name + ".")
            else:
                for field in _BODIES:
                    inner = getattr(child, field, None)
                    if isinstance(inner, list):
                        walk(inner, prefix)
    walk(tree.body, "")
    FUNCTIONS[digest] = tuple(found)
    return text, FUNCTIONS[digest]


def kept_text(path: Path, ran: frozenset[str]) -> str:
    """The file's text with the body of every function not in ``ran`` (qualified names)
    left out (the whole text when it does not parse; "" when it does not exist)."""
    parsed = _functions(path)
    if parsed is None:
        try:
            return "raw\0" + path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "missing"
    text, functions = parsed
    lines = text.splitlines(keepends=True)
    drop = [False] * (len(lines) + 2)
    for qual, first, last in functions:
        if qual not in ran:
            for n in range(first, last + 1):
                drop[n] = True
    return "".join(line for n, line in enumerate(lines, 1) if not drop[n])


@functools.lru_cache(maxsize=None)
def _pieces(path: Path) -> tuple[str, dict[str, str]]:
    """The digest of the file's text without any function's body, and of each function's own
    body (its lines but those of the functions inside it), by qualified name."""
    parsed = _functions(path)
    if parsed is None:
        try:
            return _digest("raw", path.read_bytes()), {}
        except OSError:
            return _digest("missing"), {}
    text, functions = parsed
    lines = text.splitlines(keepends=True)
    owner = [None] * (len(lines) + 2)
    for qual, first, last in functions:       # outer functions come before those inside
        for n in range(first, last + 1):
            owner[n] = qual
    rest = "".join(line for n, line in enumerate(lines, 1) if owner[n] is None)
    bodies: dict[str, list[str]] = {}
    for n, line in enumerate(lines, 1):
        if owner[n] is not None:
            bodies.setdefault(owner[n], []).append(line)
    return _digest(rest), {q: _digest("".join(bodies.get(q, []))) for q, _, _ in functions}


@functools.lru_cache(maxsize=65536)
def file_digest(path: Path, ran: frozenset[str]) -> str:
    """The digest of the file's text without the bodies of the functions not in ``ran``:
    its text outside every function's body, and the own body of each function in ``ran``."""
    rest, bodies = _pieces(path)
    return _digest(rest, *(x for q in sorted(ran) if q in bodies for x in (q, bodies[q])))


# --- what runs at import -------------------------------------------------------------------

_IMPORTS_PROGRAM = r"""
import json, os, pkgutil, sys, importlib
roots = json.loads(sys.argv[1])
seen = set()
def tracer(frame, event, arg):
    seen.add((frame.f_code.co_filename, frame.f_code.co_qualname))
sys.settrace(tracer)
for pkg in ("wgk.model", "wgk.impl", "wgk.conformance"):
    mod = importlib.import_module(pkg)
    for info in pkgutil.walk_packages(mod.__path__, pkg + "."):
        try:
            importlib.import_module(info.name)
        except BaseException:
            pass
sys.settrace(None)
found = {(os.path.realpath(f), q) for f, q in seen}
print(json.dumps(sorted([f, q] for f, q in found if any(f.startswith(r) for r in roots))))
"""


class CacheError(Exception):
    """The cache cannot be used (its folder cannot be written, the sources cannot be read)."""


def import_time_functions(cache_dir: Path, files: list[tuple[str, Path]]
                          ) -> tuple[dict[str, frozenset[str]], str]:
    """The functions of wgk's sources that run when its modules are imported, per file, and
    the skeleton digest they give. Found once in a fresh interpreter and kept in the cache
    with that digest; still right while the digest is the same (what runs at import is the
    modules' own code and those functions: when none of them changed, the same ones run)."""
    where = cache_dir / "imports.json"
    try:
        stored = json.loads(where.read_text(encoding="utf-8"))
        imports = {str(k): frozenset(v) for k, v in stored["imports"].items()}
        if skeleton_digest(files, imports) == stored["skeleton"]:
            return imports, stored["skeleton"]
    except Exception:                 # noqa: BLE001 -- found again below
        pass
    roots = [str(r) + os.sep for r in ROOTS.values()]
    try:
        p = subprocess.run([sys.executable, "-c", _IMPORTS_PROGRAM, json.dumps(roots)],
                           capture_output=True, text=True, timeout=600)
        listed = json.loads(p.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
        raise CacheError(f"cannot find what runs when wgk's modules are imported: "
                         f"{str(e).splitlines()[0] if str(e) else type(e).__name__}") from None
    found: dict[str, set[str]] = {}
    for f, q in listed:
        name = relative(f)
        if name:
            found.setdefault(name, set()).add(q)
    imports = {k: frozenset(v) for k, v in found.items()}
    skeleton = skeleton_digest(files, imports)
    with contextlib.suppress(OSError):
        _write_atomic(where, json.dumps({"imports": {k: sorted(v) for k, v in imports.items()},
                                         "skeleton": skeleton}))
    return imports, skeleton


def skeleton_digest(files: list[tuple[str, Path]], imports: dict[str, frozenset[str]]) -> str:
    """Every source file without the bodies of functions not run at import; every data file."""
    return _digest(*(x for name, p in files for x in (
        name, file_digest(p, imports.get(name, frozenset())) if p.suffix == ".py"
        else _digest(p.read_bytes()))))


# --- recording what a part runs ------------------------------------------------------------


#: Where the recording's tracer also notes the code that runs (``gate_cache_memo``: the
#: calls of one system under test, one by one; None: nowhere).
CALL: list[set | None] = [None]

#: Where the recording's tracer also notes the code that runs while a whole run of the model's
#: side is made to be kept (``gate_cache_memo.kept_run``: given again later, the functions it
#: ran are counted as run by the part; None: nowhere).
KEPT: list[set | None] = [None]

#: What the recordings active in this process were told ran without running it here: the
#: functions of the calls a part's systems answered from the cache (``gate_cache_memo``).
_NOTED: list[dict[str, set[str]]] = []


def functions_of(codes: set) -> dict[str, list[str]]:
    """The functions of wgk's sources among ``codes``, by file name."""
    out: dict[str, set[str]] = {}
    for code in codes:
        name = relative(code.co_filename)
        if name is not None:
            out.setdefault(name, set()).add(code.co_qualname)
    return {name: sorted(quals) for name, quals in sorted(out.items())}


def note_ran(functions: dict[str, set[str]]) -> None:
    """Count ``functions`` as run by every recording active in this process."""
    for ran in _NOTED:
        for name, quals in functions.items():
            ran.setdefault(name, set()).update(quals)


@contextmanager
def recording() -> Iterator[dict[str, set[str]]]:
    """Notes every function of wgk's sources that runs (in every thread) while inside, and
    those ``note_ran`` names: ``{file name: {qualified name}}``. Inside another recording,
    what it noted is noted by the outer one too."""
    codes: set = set()

    def tracer(frame, event, arg):
        codes.add(frame.f_code)
        if CALL[0] is not None:             # a call of a system answered call by call
            CALL[0].add(frame.f_code)
        if KEPT[0] is not None:             # a run of the model's side being kept
            KEPT[0].add(frame.f_code)

    before, threads = sys.gettrace(), threading.gettrace()
    threading.settrace(tracer)
    sys.settrace(tracer)
    ran: dict[str, set[str]] = {}
    noted: dict[str, set[str]] = {}
    _NOTED.append(noted)
    try:
        yield ran
    finally:
        sys.settrace(before)
        threading.settrace(threads)
        # by identity: a recording inside another may hold an equal dict (both empty)
        del _NOTED[next(n for n, d in enumerate(_NOTED) if d is noted)]
        for code in codes:
            name = relative(code.co_filename)
            if name is not None:
                ran.setdefault(name, set()).add(code.co_qualname)
        for name, quals in noted.items():
            ran.setdefault(name, set()).update(quals)
        # a recording inside another replaced its tracer while it ran: what ran is the
        # outer one's too
        note_ran(ran)


#: The files of ``wgk.model`` whose functions are keyed one by one: the rules and their
#: helpers (``gate_frames``, ``gate_mutants``). Every other file is keyed whole.
RULE_FILES = re.compile(r"model/rules_[a-z_]+\.py")


@functools.lru_cache(maxsize=None)
def _rule_file(filename: str) -> bool:
    """Whether ``filename`` is one of the model's rule files (``RULE_FILES``)."""
    name = relative(filename)
    return name is not None and RULE_FILES.fullmatch(name) is not None


#: The methods of the model's run of a trace whose results are in its digest (``model_run``):
#: the reference system made from the trace, each step applied, its verdicts and projection
#: asked; the coverage's shadow made and stepped. A rule-file function below one of them
#: and below no ``OFF_TRACE`` method (anywhere up the stack) is one of that run's.
RUN_METHODS = {"ModelSystem": ("__init__", "apply", "check", "project"),
               "Shadow": ("of", "step", "_note")}
#: Methods that apply a step off the trace (``ModelSystem.possible``: a step tried and
#: undone): what runs below them is not in the run's digest.
OFF_TRACE = {"ModelSystem": ("possible",)}


#: The file name of the code the compiled model makes from the rules (``check.compiled``).
COMPILED = "<compiled "


def _model_run_codes() -> tuple[frozenset, frozenset]:
    """The code of the model's run methods (``RUN_METHODS``) and of ``OFF_TRACE``'s."""
    from wgk.conformance.oracle.coverage import Shadow
    from wgk.conformance.oracle.systems import ModelSystem
    classes = {"ModelSystem": ModelSystem, "Shadow": Shadow}

    def codes(methods: dict) -> frozenset:
        return frozenset(getattr(vars(classes[c])[m], "__func__", vars(classes[c])[m]).__code__
                         for c, names in methods.items() for m in names)
    return codes(RUN_METHODS), codes(OFF_TRACE)


@contextmanager
def recording_model_run() -> Iterator[tuple[dict[str, set[str]], dict[str, set[str]]]]:
    """``recording``, the rule-file functions parted: yields ``(ran, via)``, filled on
    leaving. ``via`` holds each rule-file function that ran only with a method of the model's
    run (``RUN_METHODS``) below it on the stack, in the recording thread: what it did
    reached the part only through that run's outputs (``model_run``). ``ran`` holds every
    other function that ran, a rule-file function called from anywhere else (another thread,
    a step tried off the trace: ``OFF_TRACE``) among them; and every rule-file function when
    the compiled model's code (made from the rules' text) ran anywhere else."""
    codes: set = set()
    outside: set = set()
    run_codes, off_trace = _model_run_codes()
    either = run_codes | off_trace      # the whole stack is walked (an off-trace method above a
    #                                     run method makes the call off the trace)

    def tracer(frame, event, arg):
        code = frame.f_code
        codes.add(code)
        if code not in outside and (_rule_file(code.co_filename)
                                    or code.co_filename.startswith(COMPILED)):
            f, inside = frame.f_back, False
            while f is not None:                # below a run method, and below no off-trace one
                if f.f_code in either:
                    if f.f_code in off_trace:
                        inside = False
                        break
                    inside = True
                f = f.f_back
            if not inside:
                outside.add(code)

    def other_thread(frame, event, arg):     # no model run below: every rule call is outside
        codes.add(frame.f_code)
        if _rule_file(frame.f_code.co_filename) or frame.f_code.co_filename.startswith(COMPILED):
            outside.add(frame.f_code)

    before = sys.gettrace()
    threading.settrace(other_thread)
    sys.settrace(tracer)
    ran: dict[str, set[str]] = {}
    via: dict[str, set[str]] = {}
    try:
        yield ran, via
    finally:
        sys.settrace(before)
        threading.settrace(None)
        # the compiled model's code is made from the rules' text: run outside the model's
        # run, it is a rule run there, and which rule it came from is not known
        unsure = any(c.co_filename.startswith(COMPILED) for c in outside)
        for code in codes:
            name = relative(code.co_filename)
            if name is not None:
                into = via if _rule_file(code.co_filename) and code not in outside \
                    and not unsure else ran
                into.setdefault(name, set()).add(code.co_qualname)


def model_run(trace) -> str:
    """The digest of what a replay of ``trace`` reads of the model: the reference system's
    broken invariants and projection in the initial state and, step by step, its decision
    (or the refusal of the step) with the broken invariants and the projection after it;
    and the cells the coverage's shadow gives the trace's requests. Both are runs of
    ``ModelSystem`` from the trace's graph and initial state over its steps in order, as the
    replay makes them (the shadow follows every step the implementation is sent, which in a
    replay are the trace's steps in order)."""
    from wgk.conformance.oracle.coverage import Shadow, recording as cells
    from wgk.conformance.oracle.systems import ModelSystem, StepError
    out: list = []
    try:
        m = ModelSystem(trace)
        out.append(["initial", m.check(), m.project()])
        for step in trace.steps:
            try:
                decision = m.apply(step)
            except StepError as e:
                out.append(["refused", str(e)])
                continue
            out.append([decision, m.check(), m.project()])
    except StepError as e:
        out.append(["cannot set up", str(e)])
    with cells() as found:
        shadow = Shadow.of(trace, getattr(trace, "initial", None) or {})
        for step in trace.steps if shadow is not None else ():
            shadow.step(step)
    return _digest(json.dumps([out, sorted(found, key=repr)], sort_keys=True, default=repr))


#: The output folder of the children's recording in progress in this process (None: none).
_CHILDREN_OUT: str | None = None
_FORKS = [0]


def _forked_child() -> None:
    if _CHILDREN_OUT is not None:
        from wgk.conformance.reports import gate_record_hook
        gate_record_hook.start(_CHILDREN_OUT, [str(r) + os.sep for r in ROOTS.values()])


def _forked_parent() -> None:
    if _CHILDREN_OUT is not None:
        _FORKS[0] += 1


os.register_at_fork(after_in_child=_forked_child, after_in_parent=_forked_parent)


@contextmanager
def recording_children() -> Iterator[dict]:
    """Notes every function of wgk's sources that the child processes started while inside
    run (``gate_record_hook``: Python children load it as ``sitecustomize``, forked ones
    start it from a fork hook; each writes what it runs as it goes, so a child killed by
    ``SIGKILL`` has written what it ran). Yields ``{"ran": {file name: {qualified name}},
    "sure": bool}``, filled on leaving. ``sure`` is False when a child may have run wgk's code
    without the hook: a Python child started through ``subprocess`` with an environment
    without it or with ``-I``, ``-E`` or ``-S`` (the hook, watching ``Popen`` in this process
    and in every child, says so), or a fork that wrote no file (a fork writes its file before
    it returns to any code). A Python child that loads the hook does so before it runs any
    code of its own, so one killed before its file exists ran nothing of wgk."""
    global _CHILDREN_OUT
    from wgk.conformance.reports import gate_record_hook as hook
    found: dict = {"ran": {}, "sure": True}
    with tempfile.TemporaryDirectory(prefix="wgk-gate-record-") as tmp:
        site, out = Path(tmp) / "site", Path(tmp) / "out"
        site.mkdir()
        out.mkdir()
        (site / "sitecustomize.py").write_bytes(Path(hook.__file__).read_bytes())
        names = ("PYTHONPATH", hook.OUT, hook.ROOTS, hook.HOOK)
        saved = {k: os.environ.get(k) for k in names}
        os.environ.update({
            "PYTHONPATH": os.pathsep.join([str(site)] + ([saved["PYTHONPATH"]]
                                                         if saved["PYTHONPATH"] else [])),
            hook.OUT: str(out), hook.ROOTS: json.dumps([str(r) + os.sep for r in ROOTS.values()]),
            hook.HOOK: str(site)})
        hook.watch()
        _FORKS[0], _CHILDREN_OUT = 0, str(out)
        try:
            yield found
        finally:
            _CHILDREN_OUT = None
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            files = sorted(out.glob("*.rec"))
            if (out / "!unsure").exists() or len(files) < _FORKS[0]:
                found["sure"] = False
            for f in files:
                for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
                    filename, _, qual = line.partition("\0")
                    name = relative(filename)
                    if name is not None and qual:
                        found["ran"].setdefault(name, set()).add(qual)


def every_function() -> dict[str, set[str]]:
    """Every function of every source file, by file name: a part that depends on them all
    (any change to a source file runs it again)."""
    out: dict[str, set[str]] = {}
    for name, path in source_files():
        if path.suffix == ".py":
            parsed = _functions(path)
            out[name] = {q for q, _, _ in parsed[1]} if parsed else {"<unparsed>"}
    return out


# --- the store ----------------------------------------------------------------------------


def _write_atomic(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _versions() -> dict:
    try:
        import z3
        z3v = z3.get_version_string()
    except ImportError:
        z3v = None
    try:
        git = subprocess.run(["git", "--version"], capture_output=True, text=True,
                             timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        git = None
    try:
        wgk = importlib.metadata.version("wgk")
    except importlib.metadata.PackageNotFoundError:
        wgk = None
    try:
        hypothesis = importlib.metadata.version("hypothesis")     # the fuzzer's generation
    except importlib.metadata.PackageNotFoundError:
        hypothesis = None
    return {"wgk": wgk, "python": sys.version, "z3": z3v, "sqlite": sqlite3.sqlite_version,
            "git": git, "platform": sys.platform, "hypothesis": hypothesis}


_IDENTITIES: dict[int, tuple[object, list]] = {}


def trace_identity(trace) -> list:
    """What a check reads of a trace: its path and its content (found once per trace object
    of a gate run: every part of a section over all traces reads them all)."""
    kept = _IDENTITIES.get(id(trace))
    if kept is not None and kept[0] is trace:
        return kept[1]
    found = [str(trace.path), _digest(json.dumps(trace.to_json(), sort_keys=True, default=str))]
    _IDENTITIES[id(trace)] = (trace, found)
    return found


class GateCache:
    """The cache in ``directory`` for one gate run with ``options`` (the budget's name and
    value, the backend, the counterexamples folder: anything the checks depend on beyond
    the sources and the part)."""

    def __init__(self, directory: str | os.PathLike, options: dict,
                 sections: frozenset[str] | None = None):
        self.dir = Path(directory)
        #: the sections whose parts are kept and reused (None: every one); the others run as
        #: without a cache, nothing of them recorded (``keeps``)
        self.sections = sections
        self.warnings: list[str] = []
        self.reused = 0
        #: the checks reused, by section (what a warm run's profile prints beside its seconds)
        self.reused_by: dict[str, int] = {}
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            probe = tempfile.NamedTemporaryFile(dir=self.dir, prefix=".tmp-")
            probe.close()
        except OSError as e:
            raise CacheError(f"{self.dir}: cannot be written ({e.strerror or e})") from None
        index = self.dir / "functions.json"
        try:
            known = {str(k): tuple((str(q), int(a), int(b)) for q, a, b in v)
                     for k, v in json.loads(index.read_text(encoding="utf-8")).items()}
            FUNCTIONS.update({k: v for k, v in known.items() if k not in FUNCTIONS})
        except Exception:             # noqa: BLE001 -- parsed again
            known = {}
        files = source_files()
        self.full = _digest(*(x for name, p in files + around_files(False)
                              for x in (name, p.read_bytes())))
        self.full_tests = _digest(self.full, *(x for name, p in around_files(True)
                                               if name.startswith("tests/")
                                               for x in (name, p.read_bytes())))
        self.model = _digest(*(x for name, p in files if not name.startswith("impl/")
                               for x in (name, p.read_bytes())))
        self.imports, self.skeleton = import_time_functions(self.dir, files)
        if set(FUNCTIONS) - set(known):
            with contextlib.suppress(OSError):
                _write_atomic(index, json.dumps(
                    {k: FUNCTIONS[k] for k in {_digest(_functions(p)[0]) for _, p in files
                                               if p.suffix == ".py" and _functions(p)}}))
        self.options = json.dumps(dict(options, format=FORMAT, versions=_versions()),
                                  sort_keys=True, default=repr)
        #: names this gate run's tallies of the proof frames (``gate_frames``)
        self.token = os.urandom(8).hex()
        self._mutants = None
        self._held: dict[tuple[str, frozenset, str], bool] = {}
        self._runs: dict[tuple, str] = {}
        self._coverage: dict[tuple[bool, bool], str] = {}

    def keeps(self, section: str) -> bool:
        """Whether the parts of ``section`` are kept and reused (``sections``)."""
        return self.sections is None or section in self.sections

    # keys

    def key(self, section: str, spec: dict, inputs: list) -> str:
        """The static key of a part: ``spec`` names it, ``inputs`` are what it reads."""
        mutant = _one_mutant(section, spec)
        sources = self.full_tests if section in ("impl-mutants", "verify-guards") else \
            self.full if section in CONSERVATIVE or spec.get("mode") == "kill" else \
            self.skeleton + self.mutants().static(mutant) if mutant is not None else \
            self.skeleton + self.mutants().fixed if _one_instance(section, spec) else \
            self.skeleton + self.model if section in MODEL_SECTIONS else self.skeleton
        if section == COVERAGE:
            counting = not spec.get("witnesses")
            # of the replays' parts, only the one finding whether the witnesses are stale
            # reads the model's text (``gate._witness_parts``)
            text = not counting and spec.get("stale", "traces" not in spec)
            if (counting, text) not in self._coverage:
                self._coverage[(counting, text)] = coverage_reads(counting, text)
            inputs = [inputs, self._coverage[(counting, text)]]
        return _digest(self.options, section, json.dumps(_plain(spec), sort_keys=True),
                       json.dumps(_plain(inputs), sort_keys=True, default=repr), sources)

    def traced(self, section: str, spec: dict) -> bool:
        """Whether the part's key holds the functions it ran (else its key is static)."""
        return _one_mutant(section, spec) is not None or _one_instance(section, spec) or not (
            section in CONSERVATIVE or section in MODEL_SECTIONS or spec.get("mode") == "kill")

    def outputs(self, section: str, spec: dict, loaded: list | None) -> Callable[[], str] | None:
        """For a part of an ``OUTPUT_KEYED`` section that replays one trace, what gives the
        digest of the model's run of that trace (``model_run``, found once per gate run);
        None for any other part."""
        only = spec.get("only")
        if section not in OUTPUT_KEYED or not isinstance(only, (set, frozenset, list, tuple)) \
                or len(only) != 1 or not loaded:
            return None
        n = next(iter(only))
        if not isinstance(n, int) or not 0 <= n < len(loaded):
            return None
        trace = loaded[n]

        def digest() -> str:
            known = tuple(trace_identity(trace))
            if known not in self._runs:
                # kept beside the entries under the trace and every file of the model and of
                # the suite whole (what the run is a function of): found once per change
                where = self.dir / "runs" / _digest(self.options, self.model, *known)
                try:
                    self._runs[known] = found = where.read_text(encoding="ascii")
                    if len(found) != 64 or not all(c in "0123456789abcdef" for c in found):
                        raise ValueError(found)
                except (OSError, ValueError):
                    self._runs[known] = model_run(trace)
                    with contextlib.suppress(OSError):
                        _write_atomic(where, self._runs[known])
            return self._runs[known]
        return digest

    def mutants(self):
        """What the keys of the model's mutants read (``gate_mutants``), found once."""
        if self._mutants is None:
            self._mutants = READS.Context(self.dir)
        return self._mutants

    def _folder(self, key: str) -> Path:
        return self.dir / key[:2] / key

    # reading

    def lookup(self, key: str, label: str, outputs: Callable[[], str] | None = None,
               counted: bool = True) -> list[Check] | None:
        """The checks stored under ``key`` whose recorded dependencies still hold, the
        newest first (None: none; a damaged entry is skipped with a one-line warning).
        An entry kept with the digest of the model's run (``OUTPUT_KEYED``) holds also when
        the rule-file functions it ran inside that run changed, while ``outputs()`` still
        gives that digest: it is then kept again under their new text."""
        try:
            entries = sorted(self._folder(key).glob("*.pickle"),
                             key=lambda p: -p.stat().st_mtime_ns)
        except OSError:
            return None
        for path in entries:
            try:
                raw = path.read_bytes()
                checks, deps, via, digest = _entry(raw, key)
            except FileNotFoundError:
                continue
            except Exception as e:    # noqa: BLE001 -- a damaged entry of any kind is ignored
                why = str(e).splitlines()[0][:80] if str(e) else type(e).__name__
                self.warnings.append(f"cache entry {path} ({label}) ignored: {why}")
                continue
            if not all(self._holds(name, ran, d) for name, (ran, d) in deps.items()):
                continue
            if not all(self._holds(name, ran, d) for name, (ran, d) in via.items()):
                if digest is None or outputs is None or outputs() != digest:
                    continue
                self._keep(path, key, checks, deps, via, digest)   # under the rules as they are
            if counted:               # (not a part whose check only carries data to its section)
                self.reused += len(checks)
                section = label.split(" ", 1)[0]
                self.reused_by[section] = self.reused_by.get(section, 0) + len(checks)
            return checks
        return None

    def _keep(self, path: Path, key: str, checks: list[Check], deps: dict, via: dict,
              outputs: str | None) -> None:
        entry = {"format": FORMAT, "key": key, "checks": checks,
                 "deps": {n: [sorted(r), d] for n, (r, d) in deps.items()},
                 "via": {n: [sorted(r), file_digest(p, frozenset(r))]
                         for n, (r, _) in via.items() if (p := _source_path(n)) is not None},
                 "outputs": outputs}
        with contextlib.suppress(OSError, pickle.PicklingError, TypeError, AttributeError):
            _write_atomic(path, MAGIC + pickle.dumps(entry, protocol=4))

    @contextmanager
    def schema_verdicts(self) -> Iterator[None]:
        """While inside, a trace text the schema passed in an earlier run (kept in the cache
        by ``traces.format.schema_digest``: the text, the schema, the validator) is not
        checked against the schema again; those passed now are kept on leaving."""
        from wgk.conformance.traces import format as trace_format
        where = self.dir / "schema-passed.json"
        try:
            passed = {str(d) for d in json.loads(where.read_text(encoding="utf-8"))}
        except Exception:             # noqa: BLE001 -- a missing or damaged file: none kept
            passed = set()
        before = set(passed)
        trace_format.SCHEMA_PASSED = passed
        try:
            yield
        finally:
            trace_format.SCHEMA_PASSED = None
            if passed != before:
                with contextlib.suppress(OSError):
                    _write_atomic(where, json.dumps(sorted(passed)))

    def _holds(self, name: str, ran: frozenset, digest: str) -> bool:
        """Whether the file's text without the bodies of the functions not in ``ran`` still
        has ``digest`` (each answer kept for the run: many entries share their dependencies)."""
        known = self._held.get((name, ran, digest))
        if known is None:
            p = _source_path(name)
            known = self._held[(name, ran, digest)] = p is not None and file_digest(p, ran) == digest
        return known

    # writing

    def store(self, key: str, checks: list[Check], ran: dict[str, set[str]] | None,
              via: dict[str, set[str]] | None = None, outputs: str | None = None) -> None:
        """Keep ``checks`` under ``key`` with the functions that ran (none for a
        conservative key); with ``outputs``, the digest of the model's run, and ``via``, the
        rule-file functions that ran only inside it; a part with an error is not kept."""
        if any(c.verdict == "error" for c in checks):
            return

        def digests(functions: dict[str, set[str]] | None) -> dict:
            out = {}
            for name, quals in sorted((functions or {}).items()):
                p = _source_path(name)
                if p is not None:
                    frozen = frozenset(quals)
                    out[name] = [sorted(frozen), file_digest(p, frozen)]
            return out
        deps = digests(ran)
        entry = {"format": FORMAT, "key": key, "deps": deps, "checks": checks,
                 "via": digests(via) if outputs is not None else {}, "outputs": outputs}
        variant = _digest(json.dumps(deps, sort_keys=True),
                          *([json.dumps(entry["via"], sort_keys=True), outputs]
                            if outputs is not None else []))[:24]
        try:
            _write_atomic(self._folder(key) / f"{variant}.pickle",
                          MAGIC + pickle.dumps(entry, protocol=4))
        except (OSError, pickle.PicklingError, TypeError, AttributeError):
            pass                      # a check that cannot be kept is run again next time

    def run(self, key: str, section: str, spec: dict, fn: Callable[[], list[Check]],
            outputs: Callable[[], str] | None = None) -> list[Check]:
        """``fn()`` recorded (when the section is keyed by what runs), its checks stored;
        ``outputs``: the part is kept with the digest of the model's run it gives."""
        if outputs is not None:
            with recording_model_run() as (ran, via):
                checks = fn()
            self.store(key, checks, ran, via, outputs())
            return checks
        mutant = _one_mutant(section, spec)
        if mutant is not None:
            # its proof's walk kept transition by transition (``gate_mutants.kept_refute``)
            with READS.explored_kinds() as kinds, READS.walk_kept(self.mutants(), mutant):
                checks = fn()
            self.store(key, checks, self.mutants().dependencies(mutant, checks, kinds))
            warnings, self.mutants().warnings = self.mutants().warnings, []
            self._tally(f"walk-{key[:16]}", 0, warnings)
            return checks
        if _one_instance(section, spec):
            with READS.kinds_run(set()) as kinds:
                checks = fn()
            self.store(key, checks, self.mutants().kinds_functions(kinds))
            return checks
        if not self.traced(section, spec):
            checks = fn()
            self.store(key, checks, None)
            return checks
        if section in CHILDREN:
            with recording() as ran, recording_children() as children:
                checks = fn()
            if not children["sure"]:
                ran = every_function()
            for name, quals in children["ran"].items():
                ran.setdefault(name, set()).update(quals)
            self.store(key, checks, ran)
            return checks
        if section == COVERAGE:
            forget()
        with recording() as ran:
            if section in MEMO_SECTIONS:
                # each system the part makes answered call by call (``gate_cache_memo``)
                with memo.active(self.dir / "memo" / key[:2] / key, self._holds, [],
                                 self.model) as m:
                    checks = fn()
                self._tally(f"memo-{key[:16]}", 0, m.warnings)
            else:
                checks = fn()
        self.store(key, checks, ran)
        return checks

    def _tally(self, name: str, reused: int, warnings: list[str]) -> None:
        """Reused checks and warnings of a worker process, read back by ``summary``."""
        if reused or warnings:
            with contextlib.suppress(OSError):
                _write_atomic(self.dir / "frames" / f".run-{self.token}-{name}.json",
                              json.dumps({"reused": reused, "warnings": warnings}))

    def summary(self, total: int) -> dict:
        """The checks reused (proof frames reused inside a prove part run again included)
        of ``total``, and the warnings."""
        reused, warnings = self.reused, list(self.warnings)
        if self._mutants is not None:         # the model's set-up kept kind by kind
            warnings += self._mutants.warnings
        by = dict(self.reused_by)
        for tally in sorted((self.dir / "frames").glob(f".run-{self.token}-*.json")):
            with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
                data = json.loads(tally.read_text(encoding="utf-8"))
                reused += int(data["reused"])
                warnings += [str(w) for w in data["warnings"]]
                # the proof frames' tallies name no section: they are the prove section's
                section = str(data.get("section", "prove"))
                if int(data["reused"]):
                    by[section] = by.get(section, 0) + int(data["reused"])
            with contextlib.suppress(OSError):
                tally.unlink()
        return {"dir": str(self.dir), "reused": reused, "checks": total, "warnings": warnings,
                "sections": dict(sorted(by.items()))}


memo.CACHE = sys.modules[__name__]      # what the record of a part's calls reads here

#: The cache of the gate running in this process (and its forked workers): the prove
#: section keeps its frames in it (``gate_frames``).
ACTIVE: GateCache | None = None


#: The first bytes of an entry (then a pickle of its format, key, dependencies and checks).
MAGIC = FORMAT.encode() + b"\n"


class _Loader(pickle.Unpickler):
    """Reads only checks and plain values (an entry never makes anything else)."""

    ALLOWED = {("wgk.conformance.reports.gate_report", "Check"), ("builtins", "set"),
               ("builtins", "frozenset")}

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise ValueError(f"holds a {module}.{name}")
        return super().find_class(module, name)


def _entry(raw: bytes, key: str) -> tuple[list[Check], dict[str, tuple[frozenset, str]],
                                         dict[str, tuple[frozenset, str]], str | None]:
    """An entry's checks, recorded dependencies, the rule-file functions it ran inside the
    model's run and that run's digest (raises on anything not a whole entry of this format
    stored under ``key``)."""
    if not raw.startswith(MAGIC):
        head = raw.split(b"\n", 1)[0][:40].decode("utf-8", "replace")
        raise ValueError(f"not {FORMAT} (begins {head!r})")
    entry = _Loader(io.BytesIO(raw[len(MAGIC):])).load()
    if not isinstance(entry, dict) or entry.get("format") != FORMAT:
        raise ValueError(f"not {FORMAT}")
    if entry.get("key") != key:
        raise ValueError("stored under another key")
    checks = list(entry["checks"])
    if not all(isinstance(c, Check) for c in checks):
        raise ValueError("its checks are not checks")
    deps = {str(k): (frozenset(v[0]), str(v[1])) for k, v in entry["deps"].items()}
    via = {str(k): (frozenset(v[0]), str(v[1])) for k, v in (entry.get("via") or {}).items()}
    outputs = entry.get("outputs")
    if outputs is not None and not isinstance(outputs, str):
        raise ValueError("its model run's digest is not one")
    return checks, deps, via, outputs


def _plain(o):
    if isinstance(o, (set, frozenset)):
        return sorted((_plain(x) for x in o), key=repr)
    if isinstance(o, dict):
        return {str(k): _plain(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_plain(x) for x in o]
    return o


#: What keys a mutant or an exploration by what it read: the module ``gate_mutants``, set
#: when it is imported (it reads this one; the gate imports it). Unset, those parts are keyed
#: as the rest of their section.
READS = None


def _one_mutant(section: str, spec: dict):
    """The model's mutant a part of the mutants section runs alone (None: not such a part),
    keyed by what its kill read (``gate_mutants``) and not by the whole model."""
    only = spec.get("only")
    if READS is None or section != "mutants" or not isinstance(only, (set, frozenset, list, tuple)) \
            or len(only) != 1:
        return None
    from wgk.conformance.z3 import mutants
    return mutants.MUTANTS.get(next(iter(only)))


def _one_instance(section: str, spec: dict) -> bool:
    """Whether the part explores instances of the budget alone (``only``: their positions),
    keyed by the rule-file functions the kinds its exploration ran can run
    (``gate_mutants.kinds_run``) and not by the whole model."""
    return READS is not None and section == "explore" and \
        isinstance(spec.get("only"), (set, frozenset, list, tuple))


def _source_path(name: str) -> Path | None:
    head, _, rest = name.partition("/")
    root = SOURCES.get(head)
    return None if root is None else _joined(root, rest)


@functools.lru_cache(maxsize=None)
def _joined(root: Path, rest: str) -> Path:
    return root / rest
