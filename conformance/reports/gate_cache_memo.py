"""Per-run keys inside a part of the gate's cache: each system a part makes (a fuzz example's
implementation, a probed trace's) answered from what it answered before, call by call.

A part of the ``fuzz`` or ``probes`` section (``MEMO_SECTIONS``) that runs again (a function
it ran changed) makes many systems under test: one fresh implementation per generated run of
the fuzzer, one per probed trace. While the part runs with the cache, ``memoized(make)``
wraps their factory: each system is then a ``MemoSystem`` that keeps, in the cache (under
the part's static key), the calls it was made with and sent (``new`` with its graph and
initial state, each ``apply``, ``project``, ``revoke`` with its arguments) as a tree of call
sequences, each call with its answer (or the ``StepError`` it raised) and the functions of
wgk's sources that ran during it (``sys.settrace`` for the call, chained to the part's
recording) with the digest of their files' text without the other functions' bodies
(``gate_cache.file_digest``).

Why a call's answer may be taken from the tree (the key is sound): a system's answer to
its ``k``-th call is a function of the calls ``0..k`` sent to a fresh system and of the code
that ran for them. The answer is reused only when the same calls in the same order led
there and every function that ran during each of them is unchanged (the part's static key
covers the rest of the sources: everything outside the functions' bodies, every data file,
the versions and the options); then the same code runs on the same inputs, so the same
functions run and give the same answer. At the first call that is not in the tree, or one
of whose functions changed, a real system is made and sent every earlier call again (each
answer checked against the one given: a difference is an error, never a verdict), and the
system runs for real from there on. So a changed module makes run again exactly the
systems (fuzz examples, probed traces) whose calls ran it, from their first such call; the
others are answered without the implementation. The model's side (the fuzzer's and the
probes' model, the coverage shadow beside the system) runs unless a whole result is kept:

A probed trace's whole result is kept too (``kept_run``), and so are a fuzz shape's passing
run and a run of one trace's coverage witnesses: the calls the run sent each system it made
(one per fuzz example, each with its graph) with their answers, the result and the coverage
cells the systems' shadows reached, under the text of every source file but the
implementation's. While that text is the same, the systems are made again in order and sent
their calls again (answered through the record, or for real where their functions changed)
and, when every answer is the one kept, the result is given without running the model's side
(the probes' enumeration and the model's answer to each probe; the fuzzer's generation, the
model's steps and the oracle; the shadow); any other answer and the run is made again.

Three things would let an answer depend on more than its call's functions, and are closed:
the calls after one whose functions changed are never taken from the tree, even when their
own functions did not change (the state they see came from it); a value one system's call
memoized in the process (``functools.lru_cache`` in ``wgk.impl``) is emptied before each real
system is made (``_clear_caches``), so the call that needs it computes it and records it;
a call during which a thread starts or ends depends on every function of every source file
(``_Trace``: the call's tracer sees its own thread only). A kept result given again counts the
functions its run ran (the model's side, noted by the part's recording while it ran) as run by
the part: the part is kept with what the result read, not only with what ran to give it again.
A function replaced in memory is not seen (the gate runs without the cache then).
"""
from __future__ import annotations

import contextlib
import io
import json
import pickle
import sys
import threading
from pathlib import Path
from typing import Any, Callable

#: The module ``gate_cache`` (set by it when it is imported: it imports this one, and a
#: record is only made inside one of its parts).
CACHE: Any = None

#: Sections whose parts' systems are answered call by call (``memoized``).
MEMO_SECTIONS = frozenset({"fuzz", "probes", "coverage"})
FORMAT = "wgk-gate-memo/3"


class MemoError(RuntimeError):
    """A system made again answered a recorded call otherwise (the record is unsound)."""


class Memo:
    """The tree of one part's calls, flat (a deep tree would not pickle): ``nodes[0]`` the
    root, each node ``{call: [answer, deps index, node index of the calls after it]}``;
    ``deps`` a list of ``{file name: (functions, digest)}`` shared by index."""

    def __init__(self, path: Path, holds: Callable[[str, frozenset, str], bool],
                 warnings: list[str]):
        self.path = path
        self.warnings = warnings
        self.holds = holds
        self.nodes: list[dict] = [{}]
        self.deps: list[dict] = []
        #: the digest of every source file but the implementation's, whole (``kept_run``)
        self.model: str | None = None
        #: ``kept_run``'s results by key: ``[calls sent to the system, result]``
        self.transcripts: dict[str, list] = {}
        self.transcripts_used = 0
        self._index: dict[str, int] = {}
        self._valid: dict[int, bool] = {}
        self._ids: dict[int, tuple[dict, int]] = {}
        self.changed = False
        self.replayed = 0
        self.sent = 0
        #: the deps of the calls answered from the record (the part ran their functions)
        self.noted: set[int] = set()
        try:
            raw = path.read_bytes()
        except OSError:
            return
        try:
            doc = _Plain(io.BytesIO(raw)).load()
            if not isinstance(doc, dict) or doc.get("format") != FORMAT:
                raise ValueError(f"not {FORMAT}")
            self.nodes, self.deps = doc["nodes"], doc["deps"]
            self.transcripts = dict(doc.get("transcripts") or {})
            if not isinstance(self.nodes, list) or not self.nodes:
                raise ValueError("no calls")
            self._index = {json.dumps(d, sort_keys=True, default=sorted): n
                           for n, d in enumerate(self.deps)}
        except Exception as e:        # noqa: BLE001 -- a damaged record: the systems run for real
            why = str(e).splitlines()[0][:80] if str(e) else type(e).__name__
            warnings.append(f"cache record {path} ignored: {why}")
            self.nodes, self.deps, self.transcripts = [{}], [], {}

    def valid(self, n: int) -> bool:
        known = self._valid.get(n)
        if known is None:
            known = self._valid[n] = all(self.holds(name, frozenset(q), d)
                                         for name, (q, d) in self.deps[n].items())
        return known

    def intern(self, deps: dict) -> int:
        known = self._ids.get(id(deps))
        if known is not None and known[0] is deps:
            return known[1]
        n = self._intern(deps)
        self._ids[id(deps)] = (deps, n)
        return n

    def _intern(self, deps: dict) -> int:
        text = json.dumps(deps, sort_keys=True, default=sorted)
        n = self._index.get(text)
        if n is None:
            n = self._index[text] = len(self.deps)
            self.deps.append(deps)
            self._valid[n] = True
        return n

    def save(self) -> None:
        if not self.changed:
            return
        _write_atomic = CACHE._write_atomic
        nodes, deps = self._compacted()
        with contextlib.suppress(OSError, pickle.PicklingError, TypeError, AttributeError,
                                 RecursionError):
            _write_atomic(self.path, pickle.dumps({"format": FORMAT, "nodes": nodes,
                                                   "deps": deps,
                                                   "transcripts": self.transcripts},
                                                  protocol=4))

    def _compacted(self) -> tuple[list[dict], list[dict]]:
        """The nodes reachable from the root and the deps they use (a call answered otherwise
        or run with other functions left the calls recorded after it unreachable)."""
        order, where, used = [0], {0: 0}, {}
        for n in order:                   # grows while walked: breadth first
            for _, _, child in self.nodes[n].values():
                if child not in where:
                    where[child] = len(order)
                    order.append(child)
        nodes = []
        for n in order:
            node = {}
            for call, (answer, d, child) in self.nodes[n].items():
                node[call] = [answer, used.setdefault(d, len(used)), where[child]]
            nodes.append(node)
        return nodes, [self.deps[d] for d, _ in sorted(used.items(), key=lambda x: x[1])]


class _Plain(pickle.Unpickler):
    """Reads plain data only (a record holds calls, answers and digests: no class)."""

    def find_class(self, module: str, name: str):
        if (module, name) in (("builtins", "set"), ("builtins", "frozenset")):
            return super().find_class(module, name)
        if module == "wgk.model.vocab":      # the model's enumerations (a probe's situation)
            import enum
            found = super().find_class(module, name)
            if isinstance(found, type) and issubclass(found, enum.Enum):
                return found
        raise ValueError(f"holds a {module}.{name}")


#: The record of the part running in this process (None: systems are made as they are).
ACTIVE: Memo | None = None
#: When a list, every ``MemoSystem`` made is appended to it (what a test looks at).
SEEN: list | None = None


def memoized(make: Callable) -> Callable:
    """``make`` (source -> a system under test) answered call by call from the record of the
    part running with the cache in this process (as it is when none is)."""
    memo = ACTIVE
    if memo is None:
        return make
    return lambda source, *a, **kw: MemoSystem(memo, make, source, a, kw)


def _copy(answer):
    """A copy of an answer the caller may change (answers are plain data)."""
    return answer if answer is None else pickle.loads(pickle.dumps(answer, protocol=4))


def _call(name: str, *args) -> str:
    return json.dumps([name, *args], sort_keys=True, default=repr)


def _source(source: Any) -> Any:
    graph = getattr(source, "graph", source)
    return {"graph": graph, "initial": getattr(source, "initial", None)}


#: ``_Trace.deps`` by the code objects that ran, for the part running (``active``).
_DEPS: dict[tuple, dict] = {}


class _Trace:
    """The functions of wgk's sources that run in this thread while inside (chained to the
    tracer already set: the part's own recording still sees them)."""

    def __enter__(self):
        CALL, _NOTED = CACHE.CALL, CACHE._NOTED
        self.codes: set = set()
        self.threads = threading.active_count()
        self.before = sys.gettrace()
        self.shared = bool(_NOTED) and self.before is not None
        if self.shared:                 # the part's recording notes this call's code too
            self.outer, CALL[0] = CALL[0], self.codes
        else:
            codes = self.codes

            def tracer(frame, event, arg):
                codes.add(frame.f_code)
            sys.settrace(tracer)
        return self

    def __exit__(self, *exc):
        if self.shared:
            CALL = CACHE.CALL
            CALL[0] = self.outer
        else:
            sys.settrace(self.before)

    def deps(self) -> dict:
        """``{file name: (functions, digest)}`` of what ran (one object per set of code
        objects: many calls run the same functions)."""
        key = (frozenset(self.codes), threading.active_count() != self.threads)
        found = _DEPS.get(key)
        if found is None:
            found = _DEPS[key] = self._deps()
        return found

    def _deps(self) -> dict:
        _source_path, every_function, file_digest, relative = (
            CACHE._source_path, CACHE.every_function, CACHE.file_digest, CACHE.relative)
        ran: dict[str, set[str]] = {}
        for code in self.codes:
            name = relative(code.co_filename)
            if name is not None:
                ran.setdefault(name, set()).add(code.co_qualname)
        if threading.active_count() != self.threads:   # a thread came or went: not seen here
            ran = every_function()
        out = {}
        for name, quals in sorted(ran.items()):
            p = _source_path(name)
            if p is not None:
                frozen = frozenset(quals)
                out[name] = (sorted(frozen), file_digest(p, frozen))
        return out


def _clear_caches() -> None:
    """Empty the implementation's memoized functions (``functools.lru_cache``) before a real
    system is made: a value one system's call computed would otherwise answer another's
    without the function running there, and not be in that call's record."""
    for name, module in list(sys.modules.items()):
        if name.startswith("wgk.impl") and module is not None:
            for value in list(vars(module).values()):
                if callable(getattr(value, "cache_clear", None)) and \
                        hasattr(value, "__wrapped__"):
                    value.cache_clear()


class MemoSystem:
    """A system under test answered from the record while its calls are there with their
    functions unchanged; then a real one (``make``), sent the calls so far again."""

    def __init__(self, memo: Memo, make: Callable, source: Any, args: tuple, kw: dict):
        from wgk.conformance.oracle.coverage import Shadow
        self._memo, self._make, self._args = memo, make, (source, args, kw)
        self._calls: list[tuple[str, str, tuple, Any]] = []
        self._real = None
        self._node: int = 0
        #: the call from which this system ran for real (None: every call answered from the
        #: record), and the deps of every call it was sent (``Memo.deps`` indices)
        self.real_from: int | None = None
        self.deps_of_calls: list[int] = []
        #: every call after ``new`` with its answer; None once anything else was read of it
        self.transcript: list | None = []
        if SEEN is not None:
            SEEN.append(self)
        initial = getattr(source, "initial", None) or (args[0] if args else None)
        # the cells, as the real system's shadow records them (``kept_run`` gives them itself)
        self.shadow = None if _QUIET[0] else Shadow.of(source, initial)
        self._do("new", _call("new", _source(source), repr(args), repr(sorted(kw.items()))),
                 None, ())

    # the calls

    def apply(self, step: dict):
        if self.shadow is not None:
            self.shadow.step(step)
        return self._do("apply", _call("apply", step), "apply", (step,))

    def project(self):
        return self._do("project", _call("project"), "project", ())

    def project_without_journal(self):
        return self._do("project_without_journal", _call("project_without_journal"),
                        "project_without_journal", ())

    def revoke(self, who):
        return self._do("revoke", _call("revoke", who), "revoke", (who,))

    def check(self):
        return self._do("check", _call("check"), "check", ())

    def functions(self) -> dict[str, set[str]]:
        """The functions of wgk's sources its calls ran (recorded or now)."""
        out: dict[str, set[str]] = {}
        for n in set(self.deps_of_calls):
            for name, (quals, _) in self._memo.deps[n].items():
                out.setdefault(name, set()).update(quals)
        return out

    def close(self) -> None:
        if self._real is not None:
            self._real.close()

    def __getattr__(self, name: str):
        # anything else the caller reads is the real system's (made now, sent the calls so far)
        if name.startswith("_"):
            raise AttributeError(name)
        self.transcript = None
        return getattr(self._go_real(), name)

    # answering

    def _do(self, label: str, call: str, method: str | None, args: tuple):
        answer = self._answer(call, method, args)     # the record's own object: never changed
        if method is not None and self.transcript is not None:
            self.transcript.append([method, _copy(list(args)), answer])
        if isinstance(answer, tuple) and answer[:1] == ("raise",):
            from wgk.conformance.oracle.systems import StepError
            raise StepError(answer[1])
        return _copy(answer)

    def _answer(self, call: str, method: str | None, args: tuple):
        """The answer to a call (``("raise", message)`` for a ``StepError``): the record's
        object, which is only ever handed out copied (``_do``), so a transcript may hold it."""
        memo = self._memo
        if self._real is None:
            entry = memo.nodes[self._node].get(call)
            if entry is not None and memo.valid(entry[1]):
                answer, n, children = entry
                self._calls.append((call, method, args, answer))
                self._node = children
                memo.replayed += 1
                memo.noted.add(n)
                self.deps_of_calls.append(n)
                return answer
        if method is None:                      # made: not in the record
            answer, deps = self._made()
            self.real_from = len(self._calls)
        else:
            answer, deps = self._run(self._go_real(), method, args)
        return self._keep(call, method, args, answer, deps)

    def _made(self):
        """The real system made (the ``new`` call not in the record)."""
        with _Trace() as t:
            self._real = self._fresh()
        return None, t.deps()

    def _fresh(self):
        source, args, kw = self._args
        _clear_caches()
        real = self._make(source, *args, **kw)
        if hasattr(real, "shadow"):
            real.shadow = None            # the cells are recorded by this one's shadow
        return real

    def _run(self, real, method: str, args: tuple):
        """The real system's answer (its own object: ``_keep`` copies it into the record when
        the record does not hold it already) and the deps of the call."""
        from wgk.conformance.oracle.systems import StepError
        self._memo.sent += 1
        fn = getattr(real, method, None)
        if fn is None and method == "project_without_journal":     # a system without it
            def fn():
                return {k: v for k, v in real.project().items() if k != "journal"}
        with _Trace() as t:
            try:
                answer = fn(*args)
            except StepError as e:
                answer = ("raise", str(e))
        return answer, t.deps()

    def _keep(self, call: str, method: str | None, args: tuple, answer, deps: dict):
        """The call kept in the record with ``answer`` (the real system's, copied when kept
        anew); the record's object of the answer."""
        memo = self._memo
        n = memo.intern(deps)
        node = memo.nodes[self._node]
        entry = node.get(call)
        if entry is not None and entry[0] == answer and memo.valid(entry[1]):
            n = entry[1]            # as recorded (this run may have run fewer functions: a
            #                         module imported, a value cached by an earlier call)
        elif entry is None or entry[0] != answer or entry[1] != n:
            # the calls after it were answered after this one as it ran then: kept only
            # while it ran the same functions (of the same text) and answered the same
            node[call] = [_copy(answer), n, len(memo.nodes)]
            memo.nodes.append({})
            memo.changed = True
        self._node = node[call][2]
        self.deps_of_calls.append(n)
        kept = node[call][0]
        self._calls.append((call, method, args, kept))
        return kept

    def _go_real(self):
        """The real system, made now if it is not yet and sent the calls answered so far
        again (each must be answered as it was)."""
        if self._real is not None:
            return self._real
        calls, self._calls = self._calls, []
        self.real_from, self.deps_of_calls = len(calls), []
        self._node = 0
        for call, method, args, answer in calls:
            if method is None:
                got, deps = self._made()
            else:
                got, deps = self._run(self._real, method, args)
            if got != answer:
                raise MemoError(f"the cache's record of {call[:120]} answered {str(answer)[:120]}"
                                f", the implementation made again {str(got)[:120]}")
            self._keep(call, method, args, got, deps)
        if self._real is None:
            self._made()
        return self._real


def _plain_source(src: Any) -> bool:
    """Whether ``src`` is plain data a record can hold (a fuzz example's graph)."""
    if src is None or isinstance(src, (str, int, float, bool)):
        return True
    if isinstance(src, (list, tuple)):
        return all(_plain_source(x) for x in src)
    if isinstance(src, dict):
        return all(isinstance(k, str) and _plain_source(v) for k, v in src.items())
    return False


def kept_run(label: str, inputs: Any, source: Any, make: Callable,
             run: Callable[[Callable], Any], keep: Callable[[Any], bool] = lambda r: True
             ) -> Any:
    """``run(make)``: a run of the model's side against the systems ``make`` makes (a probed
    trace's one, made from ``source``; a fuzz shape's one per generated example, each from the
    graph it was given), giving plain data. With a record active, a result kept under
    ``label``, ``inputs`` and the text of every source file but the implementation's
    (``Memo.model``, which holds the model, the suite, the fuzzer's generation and the
    probes' enumeration) is given without running ``run`` when the systems, made again in the
    same order from the same sources and each sent the same calls again (answered through
    the record, or for real where their functions changed), answer each call as they did.

    Sound: ``run`` is code of the model and the suite (unchanged: their text is in the key,
    the versions of Python and of the libraries, Hypothesis among them, in the part's static
    key) on ``inputs`` and on the systems' answers (the same, in the same order): it computes
    the same result, makes the same systems from the same sources and sends them the same
    calls. This holds for the fuzzer as for the probes: its generation is Hypothesis's, seeded
    (``seed`` among ``inputs``), with no example database, no deadline and no health check
    (nothing read of the clock), so each example it draws is a function of the seed, the code
    and the answers the earlier ones got; the same determinism every kept part of the gate
    rests on. Any other answer, a system made with other arguments than its source, or one
    read otherwise than through its calls, and ``run`` runs. ``keep``: whether a result may be
    kept (a failing fuzz run writes its counterexample, which a kept result would not)."""
    memo = ACTIVE
    if memo is None or memo.model is None:
        return run(make)
    import hashlib
    key = hashlib.sha256(json.dumps([label, inputs, memo.model], sort_keys=True,
                                    default=repr).encode()).hexdigest()
    from wgk.conformance.oracle import coverage
    kept = memo.transcripts.get(key)
    if kept is not None and len(kept) == 4 and _answered_alike(kept[0], source, make):
        memo.transcripts_used += 1
        if coverage._SINK["cells"] is not None:
            coverage._SINK["cells"].update(kept[2])
        # what ``run`` ran when it was kept (the model's side) is what the result read: the
        # part depends on it as if it had run it now (else the part, kept with what it ran
        # now, would be given again after one of those functions changed)
        CACHE.note_ran({name: set(quals) for name, quals in kept[3].items()})
        return _copy(kept[1])
    made: list = []
    sources: list = []              # each system's source (None: ``source``)
    plain = [True]

    def making(src, *a, **kw):
        made.append(make(src, *a, **kw))
        if a or kw or not (src is source or _plain_source(src)):
            plain[0] = False
        sources.append(None if src is source else _copy(src))
        return made[-1]
    codes: set = set()
    outer, CACHE.KEPT[0] = CACHE.KEPT[0], codes        # what ``run`` runs, noted by the
    try:                                                # part's recording
        with coverage.recording() as cells:
            result = run(making)
    finally:
        CACHE.KEPT[0] = outer
        if outer is not None:
            outer |= codes
    if made and plain[0] and all(isinstance(m, MemoSystem) and m.transcript is not None
                                 for m in made) and keep(result):
        memo.transcripts[key] = [[[src, m.transcript] for src, m in zip(sources, made)],
                                 _copy(result), set(cells), CACHE.functions_of(codes)]
        memo.changed = True
    return result


def _answered_alike(systems: list, source: Any, make: Callable) -> bool:
    """Whether the systems of a kept run, made again one after another from their sources
    (None: ``source``), answer every call kept as they did (each closed after its calls)."""
    from wgk.conformance.oracle.systems import StepError
    for src, calls in systems:
        _QUIET[0] = True                # the cells are the kept run's (the same calls)
        try:
            system = make(source if src is None else src)
        finally:
            _QUIET[0] = False
        try:
            for method, args, answer in calls:
                try:
                    got = getattr(system, method)(*args)
                except StepError as e:
                    got = ("raise", str(e))
                if got != answer:
                    return False
        finally:
            system.close()
    return True


#: True while ``kept_run`` makes a system whose cells it gives itself (no shadow).
_QUIET = [False]


@contextlib.contextmanager
def active(path: Path, holds: Callable[[str, frozenset, str], bool], warnings: list[str],
           model: str | None = None):
    """While inside, ``memoized`` answers from the record at ``path`` (saved on leaving);
    ``model``: the digest ``kept_run`` keys by (None: it always runs)."""
    global ACTIVE
    _DEPS.clear()                     # the files' text is read again for each part
    memo = Memo(path, holds, warnings)
    memo.model = model
    before, ACTIVE = ACTIVE, memo
    try:
        yield memo
    finally:
        ACTIVE = before
        note_ran = CACHE.note_ran
        for n in sorted(memo.noted):
            note_ran({name: set(q) for name, (q, _) in memo.deps[n].items()})
        memo.save()


__all__ = ["MEMO_SECTIONS", "Memo", "MemoError", "MemoSystem", "active", "kept_run",
           "memoized"]
