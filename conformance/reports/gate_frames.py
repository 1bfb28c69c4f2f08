"""The gate's proofs kept frame by frame: a change to one rule re-runs that rule's frames only.

The gate's cache (``gate_cache``) keys the prove section by the whole model: any change to
a rule runs the section again. Inside it, ``prove_kept`` keeps each proof frame (a property
after a transition kind, on the chain of the budget), each transition's enabledness and the
init frames under a key of what the frame is built from:

- the format, the versions and the solver's settings, the instance;
- what the prover's set-up finds by running every rule, by value and not by the rules
  that gave it: the evidence universe and the kinds whose rule asks who sent the request;
- the whole text of every file of ``wgk.model`` and ``wgk.conformance`` but the *rule
  files* (``model/rules_*.py``): the kernel's checks, the state, the environment, the
  properties, the lemmas, the z3 encoding;
- of each rule file: its text outside any function's body (constants, decorators and so
  each rule's kind and ``touches``, signatures) and the body of each function the frame
  can run (``reach``): the rule of the frame's kind, the functions its body names, those
  theirs name, and so on (a name is matched to every rule-file function of that name, and
  each function nested in one is taken with it), and the *shared* ones: every rule-file
  function named anywhere outside a rule-file function's body (a property, the kernel,
  the encoding, a module-level table) and what they name. A body that looks a function up
  by a computed name (``RULES``, ``getattr``, ``globals``...) names them all. And the
  functions the prover's set-up ran, recorded (``set_up``): it evaluates the properties
  assumed, and a property may run a rule through the kernel's ``decide``
  (``ready-iff-dispatch-admitted`` runs the dispatch rule).

So a statement changed in one rule's body, or in a helper only some rules name, re-runs the
frames of those rules' kinds and nothing else (the init frames, which evaluate every state
property on the initial state, read what an environment step's frames read: the shared
functions and the set-up's), unless it changes the assumptions; a change to anything else (a property, a lemma, the encoding, a rule's
declared ``touches``) re-runs every frame. The names are read
from the text on disk (``gate_cache.SOURCES``), like every key of the cache; a test holds
that what the prover runs of the rule files, recorded frame by frame, is within ``reach``.

Only a frame proved (an init frame proved, a transition found enabled) is kept: anything
else is checked again, its counterexample decoded and replayed as without the cache. The
gate's checks are those ``prove`` gives, frame for frame and in the same order.
"""
from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

from wgk.conformance.reports import gate_cache
from wgk.conformance.reports.gate_cache import (
    RULE_FILES, _digest, _write_atomic, file_digest, recording,
)

FORMAT = "wgk-proof-frames/1"
#: Names by which a body reaches functions it does not name.
DYNAMIC = frozenset({"RULES", "getattr", "globals", "vars", "eval", "exec", "__dict__",
                     "import_module", "__import__"})


def _fixed(files: list[tuple[str, Path]]) -> str:
    """Every file of ``wgk.model`` and ``wgk.conformance`` but the rule files, whole."""
    return _digest(*(x for name, p in files
                     if name.split("/", 1)[0] in ("model", "conformance")
                     and not RULE_FILES.fullmatch(name)
                     for x in (name, p.read_bytes())))


def _used(nodes) -> set[str]:
    """The names a piece of code loads and the attributes it reads (its imports left out)."""
    out: set[str] = set()
    for node in nodes:
        for n in ast.walk(node):
            if isinstance(n, ast.Name):
                out.add(n.id)
            elif isinstance(n, ast.Attribute):
                out.add(n.attr)
    return out


_RULE_MODULE = re.compile(r"(wgk\.)?(model\.)?rules(_[a-z_]+)?")


def _uses_from_outside(tree: ast.Module) -> tuple[set[str], bool]:
    """What a module outside the rule files uses of them: the names it imports from a rules
    module (``wgk.model.rules`` or a rule file) and loads, the attributes it reads of such
    a module imported whole; and whether it uses such a module some other way (then every
    function of the rule files counts as used)."""
    names: dict[str, str] = {}          # local alias -> name imported from a rules module
    modules: set[str] = set()           # local aliases of rules modules
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom):
            mod = (n.module or "").lstrip(".")
            if _RULE_MODULE.fullmatch(mod):
                for a in n.names:
                    if a.name == "*":
                        return set(), True
                    names[a.asname or a.name] = a.name
            elif mod in ("", "model", "wgk.model"):
                modules |= {a.asname or a.name for a in n.names if _RULE_MODULE.fullmatch(a.name)}
        elif isinstance(n, ast.Import):
            for a in n.names:
                if _RULE_MODULE.fullmatch(a.name.removeprefix("wgk.model.")) and \
                        a.name.startswith("wgk.model.rules"):
                    if a.asname is None:
                        return set(), True      # reached as wgk.model.rules...: not followed
                    modules.add(a.asname)
    out: set[str] = set()
    bases: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) \
                and n.value.id in modules:
            out.add(n.attr)
            bases.add(id(n.value))
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            if n.id in names:
                out.add(names[n.id])
            elif n.id in modules and id(n) not in bases:
                return out, True
    return out, False


def _outside(tree: ast.Module) -> list[ast.AST]:
    """A module's statements and expressions outside any function's body (its imports,
    and the bodies of its functions, left out; decorators, defaults and annotations in)."""
    out: list[ast.AST] = []

    def walk(statements) -> None:
        for st in statements:
            if isinstance(st, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.extend(st.decorator_list)
                out.extend(d for d in st.args.defaults + st.args.kw_defaults if d is not None)
                continue
            if isinstance(st, ast.ClassDef):
                out.extend(st.decorator_list + st.bases + [k.value for k in st.keywords])
                walk(st.body)
                continue
            out.append(st)
    walk(tree.body)
    return out


def _kind_of(fn: ast.FunctionDef) -> str | None:
    """The member name of the kind a ``@rule(K.NAME, ...)`` decoration registers."""
    for d in fn.decorator_list:
        if isinstance(d, ast.Call) and isinstance(d.func, ast.Name) and d.func.id == "rule" \
                and d.args and isinstance(d.args[0], ast.Attribute):
            return d.args[0].attr
    return None


def _nested(node, prefix: str, into: list[str]) -> None:
    """The qualified names of the functions (and methods) defined inside ``node``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            into.append(prefix + child.name)
            _nested(child, prefix + child.name + ".<locals>.", into)
        elif isinstance(child, ast.ClassDef):
            _nested(child, prefix + child.name + ".", into)
        else:
            _nested(child, prefix, into)


def _scan_rule(tree: ast.Module) -> dict:
    outside = _used(_outside(tree))
    functions = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):        # a method is reached through objects
            outside |= {f.name for f in ast.walk(node)
                        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
            outside.add(node.name)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            nested: list[str] = []
            _nested(node, node.name + ".<locals>.", nested)
            functions.append([node.name, sorted(_used(node.body)), nested, _kind_of(node)])
    return {"outside": sorted(outside), "functions": functions}


def _scan_other(tree: ast.Module) -> dict:
    used, whole = _uses_from_outside(tree)
    imports = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            imports.append([0, None, [a.name for a in n.names]])
        elif isinstance(n, ast.ImportFrom):
            imports.append([n.level, n.module, [a.name for a in n.names]])
    return {"used": sorted(used), "whole": whole, "imports": imports}


#: What ``scan`` found in a text, by its digest and the kind of scan (kept in the cache's
#: folder: parsing every file again costs seconds).
SCANS: dict[str, dict] = {}


def scan(path: Path, how: str) -> dict:
    """A file read as a rule file (``how`` = "rule": what its module-level code uses, and of
    each function what its body uses, its nested functions, the kind it is the rule of) or
    as another (what it uses of the rule files, whether it uses them whole, its imports).
    A file that cannot be read or parsed uses everything."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError):
        text = None
    key = _digest(how, "missing" if text is None else text)
    if key not in SCANS:
        try:
            tree = ast.parse(text)
            SCANS[key] = _scan_rule(tree) if how == "rule" else _scan_other(tree)
        except (SyntaxError, ValueError, TypeError):
            SCANS[key] = {"outside": [], "functions": [["<unreadable>", sorted(DYNAMIC), [], None]]} \
                if how == "rule" else {"used": [], "whole": True, "imports": []}
    return SCANS[key]


class Reach:
    """Which functions of the rule files each transition kind's frames can run."""

    def __init__(self, files: list[tuple[str, Path]], others: list[tuple[str, Path]]):
        self.files = files
        #: (file, qualified name) of each top-level function -> the names its body uses
        self.uses: dict[tuple[str, str], set[str]] = {}
        #: (file, qualified name) of each top-level function -> its nested functions' names
        self.nested: dict[tuple[str, str], list[str]] = {}
        self.by_name: dict[str, set[tuple[str, str]]] = {}
        self.kinds: dict[str, set[tuple[str, str]]] = {}
        outside: set[str] = set()
        every = False
        for name, path in files:
            found = scan(path, "rule")
            outside |= set(found["outside"])
            for fn, uses, nested, kind in found["functions"]:
                key = (name, fn)
                self.uses[key] = set(uses)
                self.nested[key] = nested
                self.by_name.setdefault(fn, set()).add(key)
                if kind is not None:
                    self.kinds.setdefault(kind, set()).add(key)
        for _, path in others:
            found = scan(path, "other")
            outside |= set(found["used"])
            every = every or found["whole"]
        self.shared = set(self.uses) if every else \
            self.closure({k for n in outside for k in self.by_name.get(n, ())})

    def closure(self, start: set[tuple[str, str]]) -> set[tuple[str, str]]:
        seen, todo = set(), list(start)
        while todo:
            key = todo.pop()
            if key in seen:
                continue
            seen.add(key)
            names = self.uses[key]
            if names & DYNAMIC:
                todo += list(self.uses)
            todo += [k for n in names for k in self.by_name.get(n, ())]
        return seen

    def of(self, kind: str | None) -> dict[str, frozenset[str]]:
        """Per rule file, the qualified names of the functions the frames of ``kind`` (the
        member name of a request kind; None: an environment step) can run."""
        keys = self.shared | (self.closure(self.kinds.get(kind, set())) if kind else set())
        out: dict[str, set[str]] = {name: set() for name, _ in self.files}
        for key in keys:
            out[key[0]] |= {key[1], *self.nested[key]}
        return {k: frozenset(v) for k, v in out.items()}

    def digest(self, kind: str | None) -> str:
        """The rule files as the frames of ``kind`` read them."""
        quals = self.of(kind)
        return _digest(*(x for name, p in self.files for x in (name, file_digest(p, quals[name]))))


def current(reach: Reach, deps: dict[str, tuple[frozenset[str], str]]) -> bool:
    """Whether ``deps`` (per rule file, the functions read and their digest) name the rule
    files of ``reach`` as they are now, each one's functions as they were recorded."""
    paths = dict(reach.files)
    return sorted(deps) == sorted(paths) and all(file_digest(paths[n], q) == d
                                                 for n, (q, d) in deps.items())


class FrameStore:
    """The kept frames of one prover in ``directory`` (a folder of the gate's cache)."""

    def __init__(self, directory: Path, static: str, reach: Reach, token: str = ""):
        self.dir = directory / "frames" / static[:2] / static
        self.static = static
        self.reach = reach
        self.reused = 0
        self.ran = 0
        self.warnings: list[str] = []
        self.tally = directory / "frames" / f".run-{token}-{os.getpid()}.json" if token else None

    def done(self) -> None:
        """Leave the counts and warnings for the gate's cache to report (the proofs may run
        in a forked worker): in a file of this gate run, read by ``GateCache.summary``."""
        if self.tally is not None:
            with contextlib.suppress(OSError):
                _write_atomic(self.tally, json.dumps({"reused": self.reused, "ran": self.ran,
                                                      "warnings": self.warnings}))

    def key(self, unit: str, kind: str | None, assumed: str) -> str:
        """The key of a transition kind's frames (``kind``: its member name, None for an
        environment step; ``assumed``: the digest of the assumptions as z3 reads them)."""
        return _digest(self.static, unit, self.reach.digest(kind), assumed)

    def init_key(self, assumed: str) -> str:
        """The key of the init frames: they evaluate every state property on the initial state,
        reading of the rule files what an environment step's frames read (no rule of a kind
        runs: ``reach.of(None)``, the shared functions, those named outside the rule files)
        and what the properties run of them, which the prover's set-up runs too (it evaluates
        the same properties: ``assumed``, the digest of the functions it ran, recorded; a
        property may run a rule, ``ready-iff-dispatch-admitted`` the dispatch rule). A test
        holds that what the init frames run of the rule files, recorded, is within those."""
        return _digest(self.static, "init", self.reach.digest(None), assumed)

    def load_shared(self) -> dict[str, frozenset[str]] | None:
        """The functions of each rule file the prover's set-up ran, while they hold."""
        path = self.dir / "set-up.json"
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            deps = {str(k): (frozenset(v[0]), str(v[1])) for k, v in entry["deps"].items()}
        except OSError:
            return None
        except Exception as e:        # noqa: BLE001 -- a damaged entry of any kind is ignored
            why = str(e).splitlines()[0][:80] if str(e) else type(e).__name__
            self.warnings.append(f"cache entry {path} (prove set-up) ignored: {why}")
            return None
        if not current(self.reach, deps):
            return None
        return {n: q for n, (q, _) in deps.items()}

    def save_shared(self, ran: dict[str, frozenset[str]]) -> None:
        paths = dict(self.reach.files)
        deps = {n: [sorted(q), file_digest(paths[n], q)] for n, q in ran.items()}
        with contextlib.suppress(OSError, TypeError, ValueError):
            _write_atomic(self.dir / "set-up.json", json.dumps({"format": FORMAT, "deps": deps}))

    def _path(self, key: str) -> Path:
        return self.dir / f"{key}.json"

    def load(self, unit: str, key: str) -> dict[str, dict]:
        """``{frame: value}`` kept under ``key`` (a damaged entry: none, with a one-line
        warning)."""
        path = self._path(key)
        try:
            raw = path.read_text(encoding="utf-8")
        except OSError:
            return {}
        try:
            entry = json.loads(raw)
            if not isinstance(entry, dict) or entry.get("format") != FORMAT:
                raise ValueError(f"not {FORMAT}")
            if entry.get("key") != key:
                raise ValueError("stored under another key")
            frames = {str(k): dict(v) for k, v in entry["frames"].items()}
        except Exception as e:        # noqa: BLE001 -- a damaged entry of any kind is ignored
            why = str(e).splitlines()[0][:80] if str(e) else type(e).__name__
            self.warnings.append(f"cache entry {path} (prove {unit}) ignored: {why}")
            return {}
        return frames

    def save(self, key: str, frames: dict[str, dict]) -> None:
        """Keep ``{frame: value}`` under ``key`` (written whole, at once)."""
        entry = {"format": FORMAT, "key": key, "frames": frames}
        with contextlib.suppress(OSError, TypeError, ValueError):
            _write_atomic(self._path(key), json.dumps(entry, sort_keys=True))


def imported(files: list[tuple[str, Path]], start: str = "conformance/z3/prove.py"
             ) -> list[tuple[str, Path]]:
    """The source files ``start`` imports, directly or through others (read from their
    text: ``import`` and ``from ... import`` of wgk's modules, absolute or relative), with
    each package's ``__init__``."""
    by_name = {name: p for name, p in files if p.suffix == ".py"}

    def module_files(dotted: str) -> list[str]:
        parts = dotted.split(".")
        found = []
        for k in range(1, len(parts) + 1):
            base = "/".join(parts[:k])
            found += [n for n in (f"{base}/__init__.py", f"{base}.py") if n in by_name]
        return found

    seen: set[str] = set()
    todo = [start]
    while todo:
        name = todo.pop()
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        package = name.rsplit("/", 1)[0].split("/")
        for level, module, names in scan(by_name[name], "other")["imports"]:
            if module is None and not level:
                mods = names
            else:
                base = package[:len(package) - level + 1] if level else []
                head = ".".join(base + ([module] if module else []))
                mods = [head] + [f"{head}.{a}" for a in names]
            for m in mods:
                todo += module_files(m.removeprefix("wgk."))
    return [(n, by_name[n]) for n in sorted(seen)]


def _store_for(cache, inst, universe, by_actor) -> FrameStore:
    from wgk.conformance.z3.prove import FAST
    files = gate_cache.source_files()
    index = cache.dir / "frames" / "scans.json"
    known: dict = {}
    with contextlib.suppress(Exception):  # noqa: BLE001 -- scanned again
        known = {str(k): dict(v) for k, v in json.loads(index.read_text(encoding="utf-8")).items()}
        SCANS.update({k: v for k, v in known.items() if k not in SCANS})
    rules = [(n, p) for n, p in files if RULE_FILES.fullmatch(n)]
    # what the prover's modules use of the rule files (the others never run in it)
    others = [(n, p) for n, p in imported(files) if not RULE_FILES.fullmatch(n)]
    reach = Reach(rules, others)
    if set(SCANS) - set(known):
        with contextlib.suppress(OSError, TypeError, ValueError):
            _write_atomic(index, json.dumps(SCANS))
    static = _digest(FORMAT, cache.options, repr(inst), json.dumps(FAST, sort_keys=True),
                     repr(universe), repr(sorted(k.label for k in by_actor)),
                     json.dumps([n for n, _ in rules]), _fixed(files))
    return FrameStore(cache.dir, static, reach, cache.token)


def set_up(inst, store: FrameStore):
    """The prover's set-up (the assumptions made, no branch built) and the digest of the rule
    files as it reads them: a property may run a rule (``ready-iff-dispatch-admitted`` runs
    the dispatch rule), so the functions of the rule files the set-up runs are recorded
    (kept with the store while they are the same: the same functions run again)."""
    from wgk.conformance.z3.prove import FAST, Prover
    from wgk.conformance.z3.transition import MODEL
    ran = store.load_shared()
    if ran is None:
        with recording() as recorded:
            prover = Prover(inst, MODEL, transitions=(), params=FAST)
        ran = {name: frozenset(recorded.get(name, ())) for name, _ in store.reach.files}
        store.save_shared(ran)
    else:
        prover = Prover(inst, MODEL, transitions=(), params=FAST)
    return prover, _digest(*(x for name, p in store.reach.files
                             for x in (name, file_digest(p, ran[name]))))


def kind_name(transition: str) -> str | None:
    """The member name of a transition's request kind (None: an environment step)."""
    from wgk.model.vocab import Kind
    return None if transition.startswith("env:") else Kind.parse(transition).name


def prove_kept(inst, cache, progress: Callable[[str], None] | None = None):
    """``prove(inst)``'s report (in this process), each transition kind's frames and the init
    frames taken from ``cache``'s frame store when kept under their key, else checked and
    kept. Returns the report and the store (its counts of frames reused and run)."""
    from wgk.conformance.z3.basecase import Enabledness, InitFrame, init_frames
    from wgk.conformance.z3.proof_report import ProofReport
    from wgk.conformance.z3.prove import FAST, Prover, chain_deps
    from wgk.conformance.z3.symbolic import symbolic_graph
    from wgk.conformance.z3.transition import MODEL, actor_sensitive, discover_universe
    from wgk.model.actions import Instance

    t0 = time.perf_counter()
    graph = symbolic_graph(inst.task_names(), chain_deps(inst.tasks))
    if gate_cache.READS is not None and inst == Instance.proof(tasks=inst.tasks):
        # found kind by kind, each kind's part kept (``gate_mutants.Context.model_set_up``)
        cache.mutants().model_set_up(inst.tasks)
    # what the prover finds by running every rule, keyed by its value
    by_actor = actor_sensitive(graph, MODEL)
    universe = discover_universe(graph, inst.ids(), MODEL)
    store = _store_for(cache, inst, universe, by_actor)
    prover, assumed = set_up(inst, store)
    build = time.perf_counter() - t0
    props = prover.properties
    results: list = []
    enabled: list = []
    for transition in prover.transitions:
        key = store.key(transition, kind_name(transition), assumed)
        kept = store.load(transition, key)
        if all(k in kept for k in [p.id for p in props] + ["enabled"]):
            store.reused += len(props) + 1
            results += [_proved(p.id, transition, kept[p.id]) for p in props]
            enabled.append(Enabledness(transition, "enabled", **kept["enabled"]))
        else:
            frames, new = _transition(prover, store, transition, key)
            results += frames
            enabled.append(new)
        if progress:
            done = sum(r.transition == transition and r.status == "proved" for r in results)
            progress(f"{transition}: {done}/{len(props)} frames proved")
    key = store.init_key(assumed)
    kept = store.load("init", key)
    if all(p.id in kept for p in prover.state_props):
        init = [InitFrame(p.id, "proved", kept[p.id]["seconds"]) for p in prover.state_props]
        store.reused += len(init)
    else:
        init = init_frames(prover)
        store.ran += len(init)
        store.save(key, {f.invariant: {"seconds": f.seconds} for f in init
                         if f.status == "proved"})
    if progress:
        progress(f"base case: {sum(f.status == 'proved' for f in init)}/{len(init)} init frames, "
                 f"{sum(e.status == 'enabled' for e in enabled)}/{len(enabled)} transitions enabled")
    store.done()
    return ProofReport(inst, MODEL.name, results, time.perf_counter() - t0, build,
                       list(prover.lemmas), init, enabled), store


def _proved(invariant: str, transition: str, value: dict):
    from wgk.conformance.z3.proof_report import ProofResult
    return ProofResult(invariant, transition, "proved", value["seconds"], solved=value["solved"])


def _transition(prover, store: FrameStore, transition: str, key: str):
    """The frames of one transition kind checked (its branches built first), the proved
    ones kept under ``key``."""
    from wgk.conformance.z3.basecase import enabledness
    prover.build([transition])
    frames = []
    save = {}
    for p in prover.properties:
        r = prover.check(p, transition)
        store.ran += 1
        frames.append(r)
        if r.status == "proved":
            save[p.id] = {"seconds": r.seconds, "solved": r.solved}
    [e] = enabledness(SimpleNamespace(groups={transition: prover.groups[transition]},
                                      sem=prover.sem, solver=prover.solver))
    store.ran += 1
    if e.status == "enabled":
        save["enabled"] = {"seconds": e.seconds, "branches": e.branches, "witness": e.witness}
    store.save(key, save)
    return frames, e


WITNESS_FORMAT = "wgk-witnesses/1"


def path_kinds(labels: list[str]) -> set[str] | None:
    """The member names of the request kinds a recorded witness path sends (its environment
    steps run no rule; None: a label that names no kind)."""
    from wgk.model.vocab import Kind
    out = set()
    for label in labels:
        if label.startswith("env:"):
            continue
        try:
            out.add(Kind.parse(label.split("(", 1)[0]).name)
        except Exception:             # noqa: BLE001 -- then the witness is not kept
            return None
    return out


def witnesses_kept(goals: list[str], cache, store: FrameStore) -> list[dict]:
    """``witness_reports(goals, recorded=True)``, each goal's report taken from ``cache``
    when kept under its key while the rule-file functions it depends on are the same.

    A witness found along its recorded path (``bmc.follow``) is a function of: every file of
    ``wgk.model`` and ``wgk.conformance`` but the rule files, whole (the property, the
    unrolling, the environment's steps, the executable model it is replayed through, the
    recorded paths); what its unrolling's set-up finds by running every rule, by value (the
    kinds asking who sent a request and the evidence universe of its instance, as
    ``prove_kept`` keys a frame); and of the rule files, their text outside any function's
    body and the body of every function the kinds its path sends can run (``Reach``, the
    unrolling extended by one template per step and the trace replayed step by step),
    with the shared ones and those the assumptions run (``gate_mutants.Context
    .kinds_functions``). A witness searched (its path stale or missing) or not reached is
    not kept: it is found again."""
    from wgk.conformance.z3.transition import MODEL, actor_sensitive, discover_universe
    from wgk.conformance.z3.witnesses import DEFAULT_WITNESS, WITNESSES, recorded_paths, \
        witness_reports
    if gate_cache.READS is None:      # ``gate_mutants`` not imported: nothing to key by
        return witness_reports(goals, recorded=True)
    context = cache.mutants()
    paths = recorded_paths()
    folder = cache.dir / "frames" / "witnesses"
    out = []
    for goal in goals:
        inst, depth = WITNESSES.get(goal, DEFAULT_WITNESS)
        graph = inst.initial().graph
        values = [sorted(k.name for k in actor_sensitive(graph, MODEL)),
                  repr(discover_universe(graph, inst.ids(), MODEL))]
        key = _digest(WITNESS_FORMAT, cache.options, context.fixed, goal, repr(inst), str(depth),
                      json.dumps(values), json.dumps([n for n, _ in context.rules]))
        where = folder / key[:2] / key
        kept = _witness_entry(where, key, store)
        if kept is not None:
            store.reused += 1
            out.append(kept)
            continue
        [w] = witness_reports([goal], recorded=True)
        store.ran += 1
        out.append(w)
        kinds = path_kinds(paths.get(goal, [])) if goal in paths else None
        if w.get("status") != "reached" or w.get("found_by") != "recorded path" or kinds is None:
            continue
        files = dict(context.rules)
        deps = {name: [sorted(q), file_digest(files[name], frozenset(q))]
                for name, q in context.kinds_functions(kinds).items()}
        variant = _digest(json.dumps(deps, sort_keys=True))[:24]     # one per text of its deps
        with contextlib.suppress(OSError, TypeError, ValueError):
            _write_atomic(where / f"{variant}.json", json.dumps(
                {"format": WITNESS_FORMAT, "key": key, "deps": deps, "report": w}, sort_keys=True))
    return out


def _witness_entry(where: Path, key: str, store: FrameStore) -> dict | None:
    """The first report kept in folder ``where`` whose dependencies hold (a damaged entry is
    skipped with a one-line warning)."""
    try:
        entries = sorted(where.glob("*.json"))
    except OSError:
        return None
    for path in entries:
        found = _witness_variant(path, key, store)
        if found is not None:
            return found
    return None


def _witness_variant(where: Path, key: str, store: FrameStore) -> dict | None:
    try:
        raw = where.read_text(encoding="utf-8")
    except OSError:
        return None
    try:
        entry = json.loads(raw)
        if not isinstance(entry, dict) or entry.get("format") != WITNESS_FORMAT:
            raise ValueError(f"not {WITNESS_FORMAT}")
        if entry.get("key") != key:
            raise ValueError("stored under another key")
        deps = {str(n): (frozenset(map(str, v[0])), str(v[1])) for n, v in entry["deps"].items()}
        report = dict(entry["report"])
    except Exception as e:            # noqa: BLE001 -- a damaged entry of any kind is ignored
        why = str(e).splitlines()[0][:80] if str(e) else type(e).__name__
        store.warnings.append(f"cache entry {where} (prove witness) ignored: {why}")
        return None
    return report if current(store.reach, deps) else None


UNREACHABLE_FORMAT = "wgk-unreachable/1"


def _running(fn: Callable):
    """``fn()`` and the functions of wgk's sources it ran (``{file: qualified names}``), noted
    by the recording active in this process (``gate_cache.KEPT``), which counts them as run
    as well."""
    codes: set = set()
    outer, gate_cache.KEPT[0] = gate_cache.KEPT[0], codes
    try:
        out = fn()
    finally:
        gate_cache.KEPT[0] = outer
        if outer is not None:
            outer |= codes
    return out, gate_cache.functions_of(codes)


def unreachable_kept(cells, cache) -> dict[str, str]:
    """``unreachable.prove_unreachable(cells)``, each cell's proof taken from ``cache`` while
    the functions it ran are as they were, else proved and kept.

    A cell's proof reads the prover's set-up (the state space, the invariants and lemmas
    assumed, what the set-up finds by running every rule: the evidence universe, the kinds
    asking who sent a request: found before, kind by kind, and keyed by their value), the
    branches of its kind's rule and the query; each is
    recorded as it runs (the set-up once, each kind's branches on a prover sharing that
    set-up with a memo of its own, each query), and the cell is kept under the text outside
    every function's body (the cache's skeleton) with the functions its set-up, its kind's
    branches and its query ran. So an edit to one rule re-proves the cells whose kind's
    branches or whose set-up ran it, and a kept proof given again counts what it ran as run
    by the part giving it (``gate_cache.note_ran``). Only a cell proved unreachable is kept;
    outside a recording (nothing to key by) every cell is proved as without the cache."""
    from wgk.conformance.reports.gate_report import Check
    from wgk.conformance.z3.prove import Prover, chain_deps
    from wgk.conformance.z3.symbolic import symbolic_graph
    from wgk.conformance.z3.transition import MODEL, actor_sensitive, discover_universe
    from wgk.conformance.z3.unreachable import TASKS, prove_unreachable, prove_cell, refusal
    from wgk.model.actions import Instance
    wanted = [c for c in cells if refusal(c) is not None]
    if not gate_cache._NOTED or not wanted:
        return prove_unreachable(cells)
    inst = Instance.proof(tasks=TASKS)
    if gate_cache.READS is not None:  # found kind by kind, each kind's part kept
        cache.mutants().model_set_up(TASKS)
    # what the set-up finds by running every rule, keyed by its value (as ``prove_kept``)
    graph = symbolic_graph(inst.task_names(), chain_deps(inst.tasks))
    values = json.dumps([sorted(k.name for k in actor_sensitive(graph, MODEL)),
                         repr(discover_universe(graph, inst.ids(), MODEL))])
    keys = {c: _digest(UNREACHABLE_FORMAT, cache.options, cache.skeleton, str(TASKS), values, c)
            for c in wanted}
    warned = len(cache.warnings)
    found: dict[str, str | None] = {}
    for cell in wanted:
        kept = cache.lookup(keys[cell], f"coverage unreachable {cell}", counted=False)
        found[cell] = kept[0].detail if kept else None
        if kept:                     # what its proof ran is what the reason read
            gate_cache.note_ran({n: set(q) for n, q in kept[0].data["ran"].items()})
    todo = [c for c in wanted if found[c] is None]
    if todo:
        gate_cache.forget()          # a memo filled before would hide what the proofs read
        prover, setup = _running(lambda: Prover(inst, MODEL, transitions=()))
        built: dict[str, tuple] = {}
        for cell in todo:
            kind, code = refusal(cell)
            if kind not in built:
                shared = prover.sharing(MODEL)
                built[kind] = (shared, _running(lambda: shared.build([kind]))[1])
            shared, branches = built[kind]
            reason, query = _running(lambda: prove_cell(shared, kind, code, TASKS))
            found[cell] = reason
            if reason is not None:
                ran: dict[str, set[str]] = {}
                for part in (setup, branches, query):
                    for name, quals in part.items():
                        ran.setdefault(name, set()).update(quals)
                cache.store(keys[cell], [Check("coverage", f"unreachable {cell}", "pass", 0.0,
                                               reason, {"ran": {n: sorted(q) for n, q in
                                                                ran.items()}})], ran)
    if len(cache.warnings) > warned:  # reported by the gate from any process, once
        new, cache.warnings[warned:] = cache.warnings[warned:], []
        cache._tally(f"unreachable-{os.getpid()}", 0, new)
    return {c: found[c] for c in wanted if found[c] is not None}
