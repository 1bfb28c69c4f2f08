"""The compiled model: a third reading of the rules, for concrete states.

The rules are written once (``wgk.model``), read concretely by running them on a
state of plain values and symbolically by running them on z3 terms. This module
reads them a third time: it runs the same functions on a *traced* state, whose
fields are ``Term`` objects that record what is done with them, through the same
backend hook z3 uses (``wgk.model.logic.use_backend``). What comes out is, per
request, per task of a state property and per step property, an expression graph
over the state's fields; it is written out as straight-line Python source (shared
subterms computed once, the guards in the kernel's order with an early return for
the first that fails) and ``exec``'d. Request parameters, the graph and the
instance are concrete while tracing, so each compiled function is specialized to
one request (or one task index) of one graph.

Tracing cannot go where the model branches on a state value with plain Python (a
``bool()`` of a term, ``int()`` of one, a container that is not the model's): the
term refuses, and that request or property is evaluated by the interpreter, which
``Compiled.fallbacks`` counts. A request with an idempotency key (the journal) is
always interpreted.

For exploration a request is compiled as a *move*: its decision and its step properties
in one function, the step properties traced on the request's own update, so a field the rule
leaves alone is the same term before and after and most of them fold away
(``compile_decide(r, steps=True)``); a task's environment steps are compiled the same way
(``compile_env``), and the steps of a task are enumerated once per values of the fields the
enumeration reads (``steps_of``, ``wgk.conformance.check.reads``).

A request is compiled once it has been decided ``WARM`` times (the few requests met
once or twice cost more to compile than to interpret); the compiled functions are kept
per instance in memory (``compiled_for``), remade when a function of the model was
patched (a mutant) since. Nothing is kept on disk.
"""
from __future__ import annotations

import importlib
import pkgutil
import sys
from contextlib import contextmanager
from dataclasses import fields
from operator import attrgetter
from typing import Any, Callable

from wgk.conformance.check.reads import ByReads, Untraceable  # noqa: F401  (re-exported)
import wgk.model as model_pkg
from wgk.model import logic
from wgk.model import kernel
from wgk.model.env import EnvStep, guard_and_update
from wgk.model.kernel import Decision, Rules
from wgk.model.liveness import one_way
from wgk.model.projections import WAYS
from wgk.model.requests import Request
from wgk.model.rules import RULES
from wgk.model.state import Binding, Evidence, State, TaskState, TASK_FIELDS
from wgk.model.vocab import DecisionKind as D, Exit


# --------------------------------------------------------------------------- terms

class Term:
    """A traced value: a node of the expression graph (``op`` formats its arguments)."""

    __slots__ = ("op", "args", "key", "__weakref__")

    def __init__(self, op: str, args: tuple, key: Any):
        self.op = op
        self.args = args
        self.key = key

    def __bool__(self):
        raise Untraceable("a traced value was tested with plain Python")

    def __index__(self):
        raise Untraceable("a traced value was used as an index")

    def __int__(self):
        raise Untraceable("a traced value was converted with int()")

    def __iter__(self):
        raise Untraceable("a traced value was iterated")

    __hash__ = object.__hash__

    def _bin(self, op, other, swap=False):
        if other is self and op in _SAME:       # a value compared with itself (no NaN here)
            return _SAME[op]
        a, b = (other, self) if swap else (self, other)
        return _tracer.node(op, (a, b))

    def __eq__(self, o): return self._bin("({} == {})", o)
    def __ne__(self, o): return self._bin("({} != {})", o)
    def __lt__(self, o): return self._bin("({} < {})", o)
    def __le__(self, o): return self._bin("({} <= {})", o)
    def __gt__(self, o): return self._bin("({} > {})", o)
    def __ge__(self, o): return self._bin("({} >= {})", o)
    def __add__(self, o): return self._bin("({} + {})", o)
    def __radd__(self, o): return self._bin("({} + {})", o, True)
    def __sub__(self, o): return self._bin("({} - {})", o)
    def __rsub__(self, o): return self._bin("({} - {})", o, True)
    def __mul__(self, o): return self._bin("({} * {})", o)
    def __rmul__(self, o): return self._bin("({} * {})", o, True)
    def __neg__(self): return _tracer.node("(-{})", (self,))

    def __or__(self, o): return self._bin("({} | {})", o)
    def __and__(self, o): return self._bin("({} & {})", o)

    def __contains__(self, item):
        raise Untraceable("membership in a traced value")

    def __getitem__(self, k):
        if isinstance(k, Term) or not isinstance(k, (int, str)):
            raise Untraceable("a traced value indexed by a traced value")
        return _tracer.node("{}[%r]" % (k,), (self,))


_SAME = {"({} == {})": True, "({} != {})": False, "({} <= {})": True, "({} >= {})": True,
         "({} < {})": False, "({} > {})": False}


class TracedEvidence(Term):
    """A task's evidence (a set of ``(kind, id)``), traced: ``has``, ``add`` and ``count``."""

    __slots__ = ()

    def has(self, item):
        return _tracer.node("({} in {})", (item, self))

    def add(self, item):
        return _tracer.node("_add({}, {})", (self, item), cls=TracedEvidence)

    def count(self, pred):
        return _tracer.node("_count({}, {})", (self, pred))


class _Tracer:
    """Hash-consed nodes: the same operation on the same arguments is one node."""

    def __init__(self):
        self.nodes: dict = {}
        #: the leaves, kept across traces (a leaf is the same wherever it is met), and the
        #: traced task states made of them, per name
        self.leaves: dict = {}
        self.tasks: dict = {}

    def reset(self) -> None:
        """Forget every node but the leaves."""
        self.nodes = dict(self.leaves)

    def leaf(self, src: str, cls=Term) -> Term:
        key = ("leaf", src)
        n = self.nodes.get(key)
        if n is None:
            n = self.nodes[key] = self.leaves[key] = cls(src, (), key)
        return n

    def node(self, op: str, args: tuple, cls=Term) -> Term:
        key = (op,) + tuple(_argkey(a) for a in args)
        n = self.nodes.get(key)
        if n is None:
            n = self.nodes[key] = cls(op, args, key)
        return n


def _argkey(a: Any) -> Any:
    if isinstance(a, Term):
        return ("t", id(a))
    if isinstance(a, (bool, int, str)) or a is None:
        return ("c", type(a), a)
    return ("o", id(a))


_tracer = _Tracer()


class _Backend:
    """The four constructors of ``wgk.model.logic``, building traced terms."""

    def ite(self, c, a, b):
        if isinstance(a, TracedEvidence) or isinstance(b, TracedEvidence):
            return _tracer.node("({} if {} else {})", (a, c, b), cls=TracedEvidence)
        return _tracer.node("({} if {} else {})", (a, c, b))

    def and_(self, xs):
        return _tracer.node("(" + " and ".join("{}" for _ in xs) + ")", tuple(xs))

    def or_(self, xs):
        return _tracer.node("(" + " or ".join("{}" for _ in xs) + ")", tuple(xs))

    def not_(self, x):
        return _tracer.node("(not {})", (x,))


_BACKEND = _Backend()


def _traced_task(name: str) -> TaskState:
    """A task state whose every field is a leaf ``name.field`` (receipts: one binding each);
    made once per name, as its leaves are."""
    t = _tracer.tasks.get(name)
    if t is None:
        t = _tracer.tasks[name] = _new_traced_task(name)
    return t


def _new_traced_task(name: str) -> TaskState:
    t = object.__new__(TaskState)
    base = TaskState()
    for f in TASK_FIELDS:
        if f == "receipts":
            v = tuple(Binding(*(_tracer.leaf(f"{name}.receipts[{k}].{g}") for g in
                                ("fence", "candidate", "base")))
                      for k in range(len(base.receipts)))
        elif f == "evidence":
            v = _tracer.leaf(f"{name}.evidence", TracedEvidence)
        else:
            v = _tracer.leaf(f"{name}.{f}")
        object.__setattr__(t, f, v)
    return t


def _traced_state(s: State, prefix: str, var: str) -> State:
    """A traced copy of ``s``, its tasks named ``prefix0``, ``prefix1``... and itself ``var``
    (the graph and the revoked principals stay concrete)."""
    tasks = tuple(_traced_task(f"{prefix}{j}") for j in range(len(s.tasks)))
    st = object.__new__(State)
    for f, v in (("graph", s.graph), ("tasks", tasks), ("target", _tracer.leaf(f"{var}.target")),
                 ("now", _tracer.leaf(f"{var}.now")), ("journal", _tracer.leaf(f"{var}.journal")),
                 ("revoked", s.revoked)):
        object.__setattr__(st, f, v)
    return st


#: the kinds of a step of the enumeration
_ENV, _REQUEST = 0, 1


# --------------------------------------------------------------------------- emitting

class _Emitter:
    """Writes the source of one function: temporaries for shared nodes, constants by name."""

    def __init__(self):
        #: the function's constants, in the order named: an int or an object is a parameter
        #: ``_c0``, ``_c1``... of the code (bound when the function is made), so that the
        #: functions of requests differing only in such values share one compiled code
        self.params: list = []
        self.names: dict = {}           # node -> temporary
        self.lines: list[str] = []
        self.uses: dict = {}

    def count(self, v: Any) -> None:
        """Count the uses of every node reachable from ``v``."""
        stack = [v]
        while stack:
            x = stack.pop()
            if isinstance(x, Term):
                n = self.uses.get(x, 0)
                self.uses[x] = n + 1
                if n == 0:
                    stack.extend(x.args)
            elif isinstance(x, tuple):
                stack.extend(x)
            elif isinstance(x, (Binding, TaskState, Decision)):
                stack.extend(getattr(x, f.name) for f in fields(x))

    def const(self, v: Any) -> str:
        """The source of the constant ``v``: None, a bool or a string as itself, anything else
        as a parameter of its own (each use another: two values that happen to be equal in
        one request do not make its text differ from another's)."""
        if v is None or isinstance(v, bool) or type(v) is str:
            return repr(v)
        name = f"_c{len(self.params)}"
        self.params.append(v)
        return name

    def expr(self, v: Any, indent: str) -> str:
        """The source of ``v``: a temporary for a node used more than once."""
        if isinstance(v, Term):
            if not v.args:
                if self.uses.get(v, 0) > 1:
                    return self._temp(v, v.op, indent)
                return v.op
            name = self.names.get(v)
            if name is not None:
                return name
            src = v.op.format(*[self.expr(a, indent) for a in v.args])
            if self.uses.get(v, 0) > 1:
                return self._temp(v, src, indent)
            return src
        if isinstance(v, tuple) and type(v) is tuple:
            return "(" + "".join(self.expr(x, indent) + ", " for x in v) + ")"
        if isinstance(v, Binding) and any(isinstance(getattr(v, f), Term)
                                          for f in ("fence", "candidate", "base")):
            return "_Binding(%s, %s, %s)" % (self.expr(v.fence, indent),
                                             self.expr(v.candidate, indent),
                                             self.expr(v.base, indent))
        return self.const(v)

    def _temp(self, v: Term, src: str, indent: str) -> str:
        name = self.names.get(v)
        if name is None:
            name = self.names[v] = f"v{len(self.names)}"
            self.lines.append(f"{indent}{name} = {src}")
        return name


def _leaf_binding(b: Any) -> str | None:
    """``b``'s source when it is the traced binding of a state (``t0.receipts[2]``)."""
    if isinstance(b, Binding) and isinstance(b.fence, Term) and not b.fence.args:
        src = b.fence.op
        if src.endswith(".fence") and ".receipts[" in src and b.candidate is _tracer.leaf(src[:-6] + ".candidate") \
                and b.base is _tracer.leaf(src[:-6] + ".base"):
            return src[:-6]
    return None


class _Function:
    """Building the source of one compiled function."""

    def __init__(self, em: _Emitter, name: str, args: str, ntasks: int, prefixes: tuple):
        self.em = em
        self.head = [f"def {name}({args}):"]
        for p in prefixes:
            src = "s" if p == "t" else "s2"
            self.head.append(f"    {p}T = {src}.tasks")
            for j in range(ntasks):
                self.head.append(f"    {p}{j} = {p}T[{j}]")

    def source(self) -> str:
        return "\n".join(self.head + self.em.lines) + "\n"


def _task_src(em: _Emitter, new: TaskState, old: TaskState, oldname: str, indent: str) -> str:
    """The source building ``new`` (a traced task state), or ``oldname`` when it is ``old``:
    ``_task((every field but the receipts, in field order), receipts)``, the receipts
    ``oldname.receipts`` when the rule left them as they were (the same tuple, which an
    interning builder finds by identity)."""
    if new is old:
        return oldname
    vals = []
    receipts = None
    for f in TASK_FIELDS:
        v = getattr(new, f)
        if f == "receipts":
            if v is old.receipts:
                receipts = f"{oldname}.receipts"
            elif isinstance(v, tuple):
                parts = []
                for b in v:
                    leaf = _leaf_binding(b)
                    parts.append(leaf if leaf is not None else em.expr(b, indent))
                receipts = "(" + "".join(p + ", " for p in parts) + ")"
            else:
                receipts = em.expr(v, indent)
        else:
            vals.append(em.expr(v, indent))
    return "_task((" + ", ".join(vals) + ",), " + receipts + ")"


#: where the receipts are among a task state's fields; ``OTHER_FIELDS``: every other field, in
#: field order (a builder takes their values and the receipts apart)
RECEIPTS_AT = TASK_FIELDS.index("receipts")
OTHER_FIELDS: tuple = TASK_FIELDS[:RECEIPTS_AT] + TASK_FIELDS[RECEIPTS_AT + 1:]


def _task_setstate() -> Callable:
    """A function setting every field of a new TaskState from the values of every field but
    the receipts (in field order) and the receipts."""
    lines = ["def setstate(t, w, r):"]
    lines += [f"    _s{k}(t, w[{OTHER_FIELDS.index(f)}])" if f != "receipts" else f"    _s{k}(t, r)"
              for k, f in enumerate(TASK_FIELDS)]
    ns = {f"_s{k}": getattr(TaskState, f).__set__ for k, f in enumerate(TASK_FIELDS)}
    exec("\n".join(lines), ns)
    return ns["setstate"]


_new = object.__new__
_setstate = _task_setstate()


def _make_task_by_setters(w: tuple, r: tuple) -> TaskState:
    t = _new(TaskState)
    _setstate(t, w, r)
    return t


def _task_builder() -> Callable:
    """``make(w, r) -> TaskState`` with the receipts ``r`` and every other field from ``w``, in
    field order (``OTHER_FIELDS``): filled as an object of a plain class of the same slots (a
    plain attribute store each, where the frozen class's slot setters cost a call each, three
    to four times the time), then made a TaskState (the same layout, so Python allows it).
    Where the interpreter refuses that, or the result is not a TaskState equal to one set field
    by field, the setters are used."""
    blank = type("_TaskFields", (), {"__slots__": TaskState.__slots__})
    lines = ["def make(w, r):", "    t = _new(_Blank)"]
    lines += [f"    t.{f} = w[{OTHER_FIELDS.index(f)}]" if f != "receipts" else "    t.receipts = r"
              for f in TASK_FIELDS]
    lines += ["    t.__class__ = _TaskState", "    return t"]
    ns = {"_new": object.__new__, "_Blank": blank, "_TaskState": TaskState}
    try:
        if tuple(TaskState.__slots__) != tuple(TASK_FIELDS):
            return _make_task_by_setters
        exec("\n".join(lines), ns)
        make = ns["make"]
        probe = TaskState()
        made = make(task_values(probe), probe.receipts)
        if type(made) is not TaskState or made != probe or hash(made) != hash(probe):
            return _make_task_by_setters
    except (TypeError, AttributeError):
        return _make_task_by_setters
    return make


#: ``task_values(t)``: the values of every field of ``t`` but the receipts, in field order
task_values = attrgetter(*OTHER_FIELDS)


_make_task = _task_builder()


_TASK_SETTERS = tuple(getattr(TaskState, f).__set__ for f in TASK_FIELDS)
_STATE_SETTERS = tuple(getattr(State, f).__set__ for f in ("graph", "tasks", "target", "now", "journal",
                                                           "revoked"))


def _make_state(graph, tasks, target, now, journal, revoked, _new=object.__new__,
                _g=_STATE_SETTERS[0], _t=_STATE_SETTERS[1], _a=_STATE_SETTERS[2],
                _n=_STATE_SETTERS[3], _j=_STATE_SETTERS[4], _r=_STATE_SETTERS[5]) -> State:
    s = _new(State)
    _g(s, graph)
    _t(s, tasks)
    _a(s, target)
    _n(s, now)
    _j(s, journal)
    _r(s, revoked)
    return s


def _make_decision(kind, code) -> Decision:
    return Decision(kind, code)


#: the counts ``_count`` found and the evidence ``_add`` made, per evidence and argument
#: (many task states share their evidence: it changes only when evidence is recorded)
_COUNTS: dict = {}
_ADDED: dict = {}


def _kept(table: dict, evidence: Any, arg: Any, make: Callable) -> Any:
    """``make()``, a pure function of ``evidence`` and ``arg``, kept in ``table`` per both
    (made each time when either cannot be hashed)."""
    key = (evidence, arg)
    try:
        out = table.get(key)
    except TypeError:
        return make()
    if out is None:
        if len(table) > 100_000:
            table.clear()
        out = table[key] = make()
    return out


def _count(evidence: Any, pred: Callable) -> Any:
    """``evidence.count(pred)``, kept per the evidence's value and the predicate (found
    without making the maker ``_kept`` takes: asked about four times a state)."""
    try:
        out = _COUNTS.get((evidence, pred))
    except TypeError:
        return evidence.count(pred)
    return out if out is not None else _kept(_COUNTS, evidence, pred,
                                             lambda: evidence.count(pred))


def _add(evidence: Any, item: Any) -> Any:
    """``evidence.add(item)``, the evidence made kept per the evidence's value and the item:
    the task states that record the same evidence share it (its hash computed once, equal by
    identity)."""
    try:
        out = _ADDED.get((evidence, item))
    except TypeError:
        return evidence.add(item)
    return out if out is not None else _kept(_ADDED, evidence, item,
                                             lambda: evidence.add(item))


_BASE_NAMESPACE = {"_add": _add, "_count": _count, "_task": _make_task, "_state": _make_state, "_decision": _make_decision,
                   "_Binding": Binding, "_Evidence": Evidence}


# --------------------------------------------------------------------------- compiling

def _traced(fn: Callable) -> Any:
    """Run ``fn`` with the tracing backend installed (restoring whatever was before)."""
    before = logic._backend
    logic.use_backend(_BACKEND)
    try:
        return fn()
    finally:
        logic.use_backend(before)


_TODO = object()      # not compiled yet

#: how many times a request is decided (its step checked) by the interpreter before it is
#: compiled
WARM = 3

#: the code of each function text compiled in this process (its constants as parameters)
_CODES: dict = {}

#: the compiled models made in this process, per instance, rules and properties
_MADE: dict = {}


def _load_model() -> None:
    """Import every module of ``wgk.model`` (once)."""
    if not _LOADED:
        for m in pkgutil.iter_modules(model_pkg.__path__, "wgk.model."):
            importlib.import_module(m.name)
        _LOADED.append(True)


_LOADED: list = []


def model_fingerprint() -> tuple:
    """What the compiled code was traced through: every function of the model's modules and
    every function held in their tables (a mutant patches one of them), by identity. Every
    module of the model is loaded first, so that a module loaded later (by the search itself)
    does not make the same model another fingerprint."""
    _load_model()
    out = []
    for name, mod in sorted(sys.modules.items()):
        if not name.startswith("wgk.model.") or mod is None:
            continue
        for attr, v in sorted(vars(mod).items()):
            if callable(v) and not isinstance(v, type):
                out.append(id(v))
            elif isinstance(v, dict):
                out.append(tuple(id(x) for x in v.values() if callable(x)))
    return tuple(out)


def compiled_for(inst: Any, rules: Rules = RULES, state_props: list = (), goals: list = (),
                 step_props: list = ()) -> "Compiled":
    """The compiled model of ``inst`` (``wgk.model.actions.Instance``), made once per process
    for the same rules, properties and model functions, and kept."""
    props = (tuple(state_props), tuple(goals), tuple(step_props))
    key = (inst, id(rules), tuple(tuple(id(p.pred) for p in ps) for ps in props),
           model_fingerprint())
    c = _MADE.get(key)
    if c is None or c.rules is not rules:
        if len(_MADE) > 64:
            _MADE.clear()
        c = _MADE[key] = Compiled(inst.initial(), rules, state_props, goals, step_props)
    return c


#: the compiled models of graphs (``for_graph``), per graph by value, the initial state's
#: revoked principals, rules, properties and model functions, each with the model functions it
#: was made under (kept alive, so that no identity in its key can be another object's)
_BY_GRAPH: dict = {}


#: the model's modules loaded, found again when a module is loaded or unloaded
_MODULES: list = [-1, ()]


#: the last ``_model_functions``: the modules it read, a copy of each one's namespace and of
#: every mapping in it, and what it found there
_FUNCTIONS: list = [None, (), ()]


def _model_functions() -> tuple:
    """The objects ``model_fingerprint`` names by identity (each module's in the order of its
    namespace, not sorted: a patched attribute keeps its place, so the same functions give the
    same tuple). Found again only when a namespace or a mapping in one differs from the copy
    taken when they were last found (compared in C, each unchanged entry by identity)."""
    if _MODULES[0] != len(sys.modules) or any(sys.modules.get(name) is not mod
                                              for name, mod in _MODULES[1]):
        _MODULES[:] = [len(sys.modules), tuple((name, mod) for name, mod in sorted(sys.modules.items())
                                               if name.startswith("wgk.model.") and mod is not None)]
    modules, copies, found = _FUNCTIONS
    if modules == _MODULES[1] and _unchanged(copies):
        return found
    found = _found_functions()
    _FUNCTIONS[:] = [_MODULES[1], tuple(_copied(vars(mod)) for _, mod in _MODULES[1]), found]
    return found


def _copied(namespace: dict) -> tuple:
    return (namespace, dict(namespace),
            tuple((v, dict(v)) for v in namespace.values() if isinstance(v, dict)))


def _unchanged(copies: tuple) -> bool:
    """Whether every namespace and every mapping in one still equals its copy."""
    try:
        return all(ns == before and all(d == was for d, was in maps)
                   for ns, before, maps in copies)
    except Exception:                  # noqa: BLE001 -- a value that cannot be compared: found again
        return False


def _found_functions() -> tuple:
    out = []
    for _, mod in _MODULES[1]:
        for v in vars(mod).values():
            if isinstance(v, dict):
                out.append(tuple(x for x in v.values() if callable(x)))
            elif callable(v) and not isinstance(v, type):
                out.append(v)
    return tuple(out)


def graph_value(g: Any) -> tuple | None:
    """Every field of the graph ``g`` by value (its mappings as sorted items; the index, made
    from its tasks, left out); None when a field cannot be a key."""
    out = []
    for f in fields(g):
        if f.name == "index":
            continue
        v = getattr(g, f.name)
        if isinstance(v, dict) or (hasattr(v, "items") and not isinstance(v, (str, bytes))):
            try:
                v = ("mapping", tuple(sorted(v.items())))
            except TypeError:
                return None
        out.append(v)
    key = tuple(out)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def for_graph(s0: State, rules: Rules = RULES, state_props: list = (), goals: list = (),
              step_props: list = ()) -> "Compiled":
    """The compiled model of the graph of ``s0``, shared by every run of a graph equal to it in
    every field, with the same revoked principals at the start, rules, properties and model
    functions (a model per trace, per fuzzed run, per probe: the same graph compiled once per
    process, not once per run). The compiled code reads the graph and the revoked principals
    as constants and every other field of a state as a variable, so it is the same code for
    each of them; a graph that cannot be keyed gets a model of its own."""
    g = graph_value(s0.graph)
    if g is None:
        return Compiled(s0, rules, state_props, goals, step_props)
    props = (tuple(state_props), tuple(goals), tuple(step_props))
    functions = _model_functions()
    key = (g, s0.revoked, id(rules), tuple(tuple(id(p.pred) for p in ps) for ps in props),
           tuple(id(v) if not isinstance(v, tuple) else tuple(map(id, v)) for v in functions))
    hit = _BY_GRAPH.get(key)
    if hit is None or hit[0].rules is not rules:
        if len(_BY_GRAPH) > 64:
            _BY_GRAPH.clear()
        c = Compiled(s0, rules, state_props, goals, step_props)
        c.step_warm = REPLAY_STEP_WARM
        hit = _BY_GRAPH[key] = (c, functions, props)
    return hit[0]


def forget_graphs() -> None:
    """Drop the models ``for_graph`` keeps: each part of the gate starts with none, so that
    what its runs evaluate by compiled code is traced, and recorded by the gate's cache as
    what the part ran, within the part."""
    _BY_GRAPH.clear()


#: how many times a run of a graph (``for_graph``) interprets a request's step properties
#: before they are compiled: a request of a trace (its key its own) is sent again only when
#: the same trace is run again, a few times in a gate process, and compiling its step
#: properties costs about as much as interpreting them 25 times
REPLAY_STEP_WARM = 25


class Compiled:
    """The compiled model of one graph: ``decide``, the state verdict of a task and the step
    properties, each compiled on first use and kept."""

    def __init__(self, s0: State, rules: Rules = RULES, state_props: list = (), goals: list = (),
                 step_props: list = (), warm: int | None = None):
        self.graph = s0.graph
        self.warm = WARM if warm is None else warm
        #: how many times a request's step properties are interpreted before they are compiled
        self.step_warm = self.warm
        self.n = len(s0.tasks)
        self.rules = rules
        self.state_props = list(state_props)
        self.goals = list(goals)
        self.step_props = list(step_props)
        self.template = s0
        self.props = (self.state_props, self.goals, self.step_props)
        #: per function compiled: its constants (the values of its parameters ``_c0``...)
        self.constants: dict = {}
        self.namespace: dict = dict(_BASE_NAMESPACE)
        #: per request (an Exit as the expected phase is told from the Phase of the same number,
        #: which a Request compares equal to): [its compiled decide (_TODO: not compiled yet,
        #: None: interpreted), its compiled step properties (None: not compiled yet), its
        #: decisions and step checks by the interpreter so far, its compiled move (as the
        #: decide), its uses before the move is compiled, the revoked principals of the last
        #: state its sender was found authenticated and holding its role in (by identity), and
        #: of the last it was not (rejected there before any rule runs, the state unchanged)]
        self.deciders: dict = {}
        self._last: tuple = (None, None)
        self.verdicts: dict = {}
        self.verdict_uses: dict = {}
        self._count = 0
        self.fallbacks: list[str] = []
        self.sources: dict = {}
        #: per (instance, enumeration function, label): the steps of each task, kept by what
        #: the enumeration read
        self.enumerations: dict = {}
        #: per step label, decision kind and code: the step's label with its decision
        self._dlabels: dict = {}
        #: per environment step of a task: [its compiled function (None: interpreted), its uses]
        self.envs: dict = {}
        #: per task index: the compiled conditions of the ways forward (``compile_ways``)
        self.ways: dict = {}

    @contextmanager
    def building(self, make: Callable):
        """The compiled code builds its new task states with ``make(w, r)`` inside (as
        ``_make_task``: an interning builder returns an equal task state it holds already);
        the builder before is restored on the way out."""
        ns = self.namespace
        before = ns["_task"]
        ns["_task"] = make
        try:
            yield
        finally:
            ns["_task"] = before

    # ---- the pieces

    def _exec(self, em: _Emitter, name: str, src: str, what: str) -> Callable:
        """The function ``name`` of ``src``, its parameters ``_c0``... bound to the emitter's
        constants: the code is compiled once per text (``_CODES``), as a maker taking the
        constants, and each function made by calling it with its own."""
        params = em.params
        text = src.replace(f"def {name}(", "def _f(", 1)
        code = _CODES.get(text)
        if code is None:
            args = "".join(f"_c{k}, " for k in range(len(params)))
            body = "".join("    " + line + "\n" for line in text.splitlines())
            if len(_CODES) > 20_000:
                _CODES.clear()
            code = _CODES[text] = compile(f"def _maker({args}):\n{body}    return _f\n",
                                          f"<compiled {what}>", "exec")
        ns = self.namespace
        exec(code, ns)
        fn = ns.pop("_maker")(*params)
        self.sources[what] = src
        self.constants[what] = tuple(params)
        return fn

    def _name(self, what: str) -> str:
        self._count += 1
        return f"{what}_{self._count}"

    def _new_emitter(self) -> _Emitter:
        return _Emitter()

    def compile_decide(self, r: Request, steps: bool = False) -> Callable | None:
        """``f(s) -> (Decision, State)`` for a fresh request without a key whose sender is
        authenticated and holds its role; None when it cannot be compiled. With ``steps``,
        ``f(s) -> (Decision, State, violated step properties)``: the step properties traced
        on the request's own update (a field the rule leaves alone is the same term before
        and after, so most of them fold away), empty when the state is unchanged."""
        i = self.graph.index.get(r.task)
        _tracer.reset()
        s = _traced_state(self.template, "t", "s")
        if not r.authorized or i is None or (r.needs_capability and (
                r.cap is None or r.cap.graph != s.graph.graph_id or r.cap.task != r.task)):
            return None         # decided before any rule runs: the interpreter is as fast
        t = s.tasks[i]
        try:
            checks, update, kind = _traced(lambda: self._guarded(s, i, t, r))
        except Exception as e:      # noqa: BLE001  (untraceable: left to the interpreter)
            self.fallbacks.append(f"{r.kind.label} {r.task}: {e}")
            return None
        em = self._new_emitter()
        for c, code in checks:
            em.count(c)
            em.count(code)
        try:
            update_state = _traced(update)
        except Exception as e:      # noqa: BLE001  (untraceable: left to the interpreter)
            self.fallbacks.append(f"{r.kind.label} {r.task}: {e}")
            return None
        if not isinstance(update_state, State):
            return None
        em.count(kind)
        em.count(update_state.target)
        em.count(update_state.now)
        em.count(update_state.journal)
        for j, tj in enumerate(update_state.tasks):
            if tj is not s.tasks[j]:
                em.count(tj)
        bad = self._trace_steps(r, kind, s, update_state, em) \
            if steps and update_state is not s else None
        end = ", ()" if steps else ""
        name = self._name("move" if steps else "decide")
        fn = _Function(em, name, "s", self.n, ("t",))
        ind = "    "
        for c, code in checks:
            if c is True:
                continue
            if c is False:
                em.lines.append(f"{ind}return {em.const(Decision(D.REJECTED, code))}, s{end}")
                break
            cs = em.expr(c, ind)
            if isinstance(code, Term):
                back = f"_decision({em.const(D.REJECTED)}, {em.expr(code, ind)}), s{end}"
            else:
                back = f"{em.const(Decision(D.REJECTED, code))}, s{end}"
            em.lines.append(f"{ind}if not {cs}:")
            em.lines.append(f"{ind}    return {back}")
        else:
            if isinstance(kind, Term):
                dsrc = f"_decision({em.expr(kind, ind)}, {em.const(Decision(D.APPLIED).code)})"
            else:
                dsrc = em.const(Decision(kind))
            if update_state is s:
                em.lines.append(f"{ind}return {dsrc}, s{end}")
            else:
                tasks = [_task_src(em, update_state.tasks[j], s.tasks[j], f"t{j}", ind)
                         for j in range(self.n)]
                if all(update_state.tasks[j] is s.tasks[j] for j in range(self.n)):
                    tsrc = "tT"
                else:
                    tsrc = "(" + "".join(x + ", " for x in tasks) + ")"
                new = (f"_state(s.graph, {tsrc}, "
                       f"{em.expr(update_state.target, ind)}, {em.expr(update_state.now, ind)}, "
                       f"{em.expr(update_state.journal, ind)}, "
                       f"{'s.revoked' if update_state.revoked is s.revoked else em.const(update_state.revoked)})")
                if bad is None:
                    em.lines.append(f"{ind}return {dsrc}, {new}")
                else:
                    em.lines.append(f"{ind}s2 = {new}")
                    em.lines.append(f"{ind}d = {dsrc}")
                    self._emit_bad(em, bad, em.const(r), ind)
                    em.lines.append(f"{ind}return d, s2, tuple(bad)")
        return self._exec(em, name, fn.source(), f"{'move' if steps else 'decide'} {r!r}")

    def _trace_steps(self, r: Request, kind: Any, s: State, s2: State, em: "_Emitter") -> list:
        """``(property id, traced verdict or None: interpreted)`` of every step property on
        the step from ``s`` to the traced update ``s2`` with the decision applied as ``kind``."""
        d = object.__new__(Decision)
        for f, v in (("kind", kind), ("code", Decision(D.APPLIED).code), ("original_kind", None),
                     ("original_code", None)):
            object.__setattr__(d, f, v)
        out = []
        for p in self.step_props:
            try:
                v = _traced(lambda: p.pred(s, r, d, s2))
            except Exception as e:      # noqa: BLE001  (untraceable: left to the interpreter)
                self.fallbacks.append(f"{p.id} {r.kind.label} (on its update): {e}")
                v = None
            if isinstance(v, (Decision, State, TaskState)):
                v = None            # not a verdict the emitter can write: interpreted
            out.append((p.id, v))
            em.count(v)
        return out

    def _emit_bad(self, em: "_Emitter", items: list, rsrc: str, ind: str) -> None:
        """Lines collecting in ``bad`` the step properties of ``items`` that do not hold (on
        ``s``, the request ``rsrc``, ``d`` and ``s2``)."""
        em.lines.append(f"{ind}bad = []")
        for pid, v in items:
            if v is True:
                continue
            if v is None:
                pred = em.const(self._prop(pid).pred)
                em.lines.append(f"{ind}if {pred}(s, {rsrc}, d, s2) is not True:")
            elif v is False:
                em.lines.append(f"{ind}bad.append({pid!r})")
                continue
            else:
                em.lines.append(f"{ind}if ({em.expr(v, ind)}) is not True:")
            em.lines.append(f"{ind}    bad.append({pid!r})")

    def compile_env(self, e: EnvStep) -> Callable | None:
        """``f(s) -> State | None`` for an environment step of a task (``None``: not enabled
        in ``s``); None when it cannot be compiled."""
        i = self.graph.index.get(e.task)
        if i is None or not e.task:
            return None
        _tracer.reset()
        s = _traced_state(self.template, "t", "s")
        try:
            ok, update = _traced(lambda: guard_and_update(s, e))
            new = _traced(update) if ok is not False else s
        except Exception as e2:     # noqa: BLE001  (untraceable: left to the interpreter)
            self.fallbacks.append(f"env {e.kind.label} {e.task}: {e2}")
            return None
        if not isinstance(new, State) or new.graph is not s.graph or new.revoked is not s.revoked:
            return None
        em = self._new_emitter()
        em.count(ok)
        for v in (new.target, new.now, new.journal):
            em.count(v)
        for j, tj in enumerate(new.tasks):
            if tj is not s.tasks[j]:
                em.count(tj)
        name = self._name("env")
        fn = _Function(em, name, "s", self.n, ("t",))
        ind = "    "
        if ok is not True:
            if ok is False:
                em.lines.append(f"{ind}return None")
                return self._exec(em, name, fn.source(), f"env {e!r}")
            em.lines.append(f"{ind}if not {em.expr(ok, ind)}:")
            em.lines.append(f"{ind}    return None")
        if new is s:
            em.lines.append(f"{ind}return s")
        else:
            tasks = [_task_src(em, new.tasks[j], s.tasks[j], f"t{j}", ind) for j in range(self.n)]
            em.lines.append(f"{ind}return _state(s.graph, ({''.join(x + ', ' for x in tasks)}), "
                            f"{em.expr(new.target, ind)}, {em.expr(new.now, ind)}, "
                            f"{em.expr(new.journal, ind)}, s.revoked)")
        return self._exec(em, name, fn.source(), f"env {e!r}")

    def env(self, s: State, e: EnvStep, entry: list) -> State | None:
        """The state after the environment step ``e`` of a task (None when it is not enabled):
        interpreted ``WARM`` times, then compiled (``entry``: [its function, its uses])."""
        f = entry[0]
        if f is _TODO:
            entry[1] += 1
            if entry[1] <= self.warm:
                ok, update = guard_and_update(s, e)
                return update() if ok is True else None
            f = entry[0] = self.compile_env(e)
        if f is None:
            ok, update = guard_and_update(s, e)
            return update() if ok is True else None
        return f(s)

    def _guarded(self, s: State, i: int, t: TaskState, r: Request):
        g = self.rules[r.kind](s, i, t, r)
        return kernel.generic_checks(s, i, t, r) + list(g.checks), g.update, g.kind

    def compile_verdict(self, i: int) -> Callable | None:
        """``f(s) -> (violated state properties, sometimes-properties holding)`` for task ``i``."""
        _tracer.reset()
        s = _traced_state(self.template, "t", "s")
        t = s.tasks[i]
        bad: list = []
        good: list = []
        for props, out in ((self.state_props, bad), (self.goals, good)):
            for p in props:
                try:
                    out.append((p.id, _traced(lambda: p.pred(s, i, t))))
                except Exception as e:      # noqa: BLE001  (untraceable: left to the interpreter)
                    self.fallbacks.append(f"{p.id} task {i}: {e}")
                    out.append((p.id, None))
        return self._emit_verdicts(f"verdict_{i}", f"s, _i={i}", ("t",), [("bad", bad), ("good", good)],
                                   f"verdict task {i}")

    def compile_ways(self, i: int) -> Callable:
        """``f(s) -> (enabled, ...)``: per way of ``wgk.model.projections.WAYS``, in order,
        whether its condition holds (``is True``) for task ``i`` of ``s``; a condition that
        cannot be traced is asked of the interpreter."""
        _tracer.reset()
        s = _traced_state(self.template, "t", "s")
        conds = []
        for w in WAYS:
            try:
                v = _traced(lambda: w.enabled(s, i))
            except Exception as e:      # noqa: BLE001  (untraceable: left to the interpreter)
                self.fallbacks.append(f"way {w.name} task {i}: {e}")
                v = None
            conds.append(v)
        em = self._new_emitter()
        for v in conds:
            em.count(v)
        name = f"ways_{i}"
        fn = _Function(em, name, f"s, _i={i}", self.n, ("t",))
        ind = "    "
        parts = []
        for w, v in zip(WAYS, conds):
            if v is None:
                parts.append(f"{em.const(w.enabled)}(s, _i) is True")
            elif v is True or v is False:
                parts.append(repr(v))
            else:
                parts.append(f"({em.expr(v, ind)}) is True")
        em.lines.append(f"{ind}return (" + "".join(p + ", " for p in parts) + ")")
        return self._exec(em, name, fn.source(), f"ways task {i}")

    def the_way(self, s: State, i: int):
        """``wgk.model.liveness.the_way``: the enabled ways found by the compiled conditions."""
        f = self.ways.get(i)
        if f is None:
            f = self.ways[i] = self.compile_ways(i)
        return one_way([w for w, on in zip(WAYS, f(s)) if on])

    def _emit_verdicts(self, name: str, args: str, prefixes: tuple, groups: list,
                       what: str, guard: list = ()) -> Callable:
        em = self._new_emitter()
        for _, items in groups:
            for _, v in items:
                em.count(v)
        fn = _Function(em, name, args, self.n, prefixes)
        em.lines.extend(guard)
        ind = "    "
        outs = []
        for gname, items in groups:
            em.lines.append(f"{ind}{gname} = []")
            for pid, v in items:
                if v is None:       # interpreted
                    p = self._prop(pid)
                    em.lines.append(f"{ind}if {self._interp_call(em, p, gname)}:")
                    em.lines.append(f"{ind}    {gname}.append({pid!r})")
                    continue
                want_true = gname == "good"
                if v is True or v is False:
                    if (v is True) == want_true:
                        em.lines.append(f"{ind}{gname}.append({pid!r})")
                    continue
                src = em.expr(v, ind)
                test = f"({src}) is True" if want_true else f"({src}) is not True"
                em.lines.append(f"{ind}if {test}:")
                em.lines.append(f"{ind}    {gname}.append({pid!r})")
            outs.append(f"tuple({gname})")
        em.lines.append(f"{ind}return " + (outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")"))
        return self._exec(em, name, fn.source(), what)

    def _prop(self, pid: str):
        for p in self.state_props + self.goals + self.step_props:
            if p.id == pid:
                return p
        raise KeyError(pid)

    def _interp_call(self, em: _Emitter, p, gname: str) -> str:
        pred = em.const(p.pred)
        if p.scope == "step":
            return f"{pred}(s, r, d, s2) is not True"
        test = "is True" if gname == "good" else "is not True"
        return f"{pred}(s, _i, s.tasks[_i]) {test}"

    def compile_step(self, r: Request) -> Callable:
        """``f(s, r, d, s2) -> violated step properties`` for the request ``r``."""
        _tracer.reset()
        s = _traced_state(self.template, "t", "s")
        s2 = _traced_state(self.template, "u", "s2")
        i = self.graph.index.get(r.task)
        guard = []
        if i is not None:
            # only task i changes (the explorer and the simulator check it): the other tasks
            # of s2 are s's, and a state where they are not is left to the interpreter
            object.__setattr__(s2, "tasks", tuple(s2.tasks[j] if j == i else s.tasks[j]
                                                  for j in range(self.n)))
            same = " and ".join(f"u{j} is t{j}" for j in range(self.n) if j != i)
            if same:
                guard = [f"    if not ({same}):",
                         f"        return {self._interp_steps_name()}(s, r, d, s2)"]
        d = object.__new__(Decision)
        for f, v in (("kind", _tracer.leaf("d.kind")), ("code", _tracer.leaf("d.code")),
                     ("original_kind", _tracer.leaf("d.original_kind")),
                     ("original_code", _tracer.leaf("d.original_code"))):
            object.__setattr__(d, f, v)
        bad = []
        for p in self.step_props:
            try:
                bad.append((p.id, _traced(lambda: p.pred(s, r, d, s2))))
            except Exception as e:      # noqa: BLE001  (untraceable: left to the interpreter)
                self.fallbacks.append(f"{p.id} {r.kind.label}: {e}")
                bad.append((p.id, None))
        return self._emit_verdicts(self._name("step"), "s, r, d, s2", ("t", "u"),
                                   [("bad", bad)], f"step {r!r}", guard)

    def _interp_steps_name(self) -> str:
        self.namespace["_interp_steps"] = self.interpreted_steps
        return "_interp_steps"

    def interpreted_steps(self, s: State, r: Request, d: Decision, s2: State) -> tuple:
        """The step properties ``r`` violates, by the interpreter."""
        return tuple(p.id for p in self.step_props if p.pred(s, r, d, s2) is not True)

    # ---- the readings callers use

    def decide(self, s: State, r: Request) -> tuple[Decision, State]:
        """``wgk.model.kernel.decide``, compiled where it can be: the journal's part (a request
        with a key) as the kernel does it, the fresh decision compiled."""
        if r.key is not None:
            return kernel.decide(s, r, self.rules, fresh=self.decide_fresh)
        return self.decide_fresh(s, r)

    def decide_fresh(self, s: State, r: Request, rules: Rules | None = None
                     ) -> tuple[Decision, State]:
        """``wgk.model.kernel.decide_fresh``: a request is interpreted until it has been
        decided ``WARM`` times, then compiled (most requests are decided many times over; the
        few met only once or twice are not worth compiling)."""
        if not kernel.authenticated(s, r) or not kernel.role_held(s, r):
            return kernel.decide_fresh(s, r, self.rules)
        key = r if type(r.expected_phase) is not Exit else (r, Exit)
        entry = self.deciders.get(key)
        if entry is None:
            entry = self.deciders[key] = [_TODO, None, 0, 0, _TODO, 0, None, None]
        self._last = (r, entry)
        return self._decide_by(s, r, entry)

    def verdict(self, s: State, i: int) -> tuple:
        """(the state invariants task ``i`` of ``s`` breaks, the sometimes-properties it
        reaches), in the order of the properties given."""
        f = self.verdicts.get(i)
        if f is None:
            uses = self.verdict_uses[i] = self.verdict_uses.get(i, 0) + 1
            if uses <= self.warm:
                return self.interpreted_verdict(s, i)
            f = self.verdicts[i] = self.compile_verdict(i)
        return f(s)

    def interpreted_verdict(self, s: State, i: int) -> tuple:
        """``verdict`` by the interpreter."""
        t = s.tasks[i]
        return (tuple(p.id for p in self.state_props if p.pred(s, i, t) is not True),
                tuple(p.id for p in self.goals if p.pred(s, i, t) is True))

    def step_verdict(self, s: State, r: Request, d: Decision, s2: State) -> tuple:
        """The step properties the step ``(s, r, d, s2)`` violates, in the order given."""
        last = self._last
        if last[0] is r:
            entry = last[1]
        else:
            key = r if type(r.expected_phase) is not Exit else (r, Exit)
            entry = self.deciders.get(key)
            if entry is None:
                entry = self.deciders[key] = [_TODO, None, 0, 0, _TODO, 0, None, None]
        return self.step_entry_verdict(s, r, d, s2, entry)

    # ---- the steps of a task, kept per what the enumeration read

    def _entry(self, r: Request) -> list:
        key = r if type(r.expected_phase) is not Exit else (r, Exit)
        entry = self.deciders.get(key)
        if entry is None:
            entry = self.deciders[key] = [_TODO, None, 0, 0, _TODO, 0, None, None]
        return entry

    def steps_of(self, inst: Any, s: State, i: int, enumerate_steps: Callable,
                 label: Callable) -> list:
        """``enumerate_steps(inst, s, i)`` (``wgk.model.actions.task_steps``) as a list of
        ``(kind, step, its label, its decider entry)``, kept per the values of what the
        enumeration read of task ``i`` (``wgk.conformance.check.reads``)."""
        ek = (inst, enumerate_steps, label)
        kept = self.enumerations.get(ek)
        if kept is None:
            kept = self.enumerations[ek] = ByReads(
                lambda s, i: self._entries(list(enumerate_steps(inst, s, i)), label), local=True)
        return kept(s, i)

    def _entries(self, found: list, label: Callable) -> list:
        return [(_ENV, step, label(step), self._env_entry(step)) if isinstance(step, EnvStep)
                else (_REQUEST, step, label(step), self._entry(step)) for step in found]

    def _env_entry(self, e: EnvStep) -> list:
        entry = self.envs.get(e)
        if entry is None:
            entry = self.envs[e] = [_TODO, 0]
        return entry

    def decide_entry(self, s: State, r: Request, entry: list) -> tuple[Decision, State]:
        """``decide_fresh`` of ``r`` (without a key) whose decider entry is ``entry``."""
        if not kernel.authenticated(s, r) or not kernel.role_held(s, r):
            entry[7] = s.revoked
            return kernel.decide_fresh(s, r, self.rules)
        return self._decide_by(s, r, entry)

    def _decide_by(self, s: State, r: Request, entry: list) -> tuple[Decision, State]:
        """An authenticated ``r`` decided by its entry's compiled decider, compiled once the
        request has been decided ``warm`` times by the interpreter (None: not compilable)."""
        f = entry[0]
        if f is _TODO:
            entry[2] += 1
            if entry[2] <= self.warm:
                return kernel.decide_fresh(s, r, self.rules)
            f = entry[0] = self.compile_decide(r)
        if f is None:
            return kernel.decide_fresh(s, r, self.rules)
        return f(s)

    def move_entry(self, s: State, r: Request, entry: list) -> tuple:
        """``(decision, state, violated step properties)`` of ``r`` (without a key) from
        ``s``, by its compiled move (``compile_decide(r, steps=True)``) once it has been met
        ``WARM`` times; the step properties are asked only of a step that changes the state."""
        if not (kernel.authenticated(s, r) and kernel.role_held(s, r)):
            entry[7] = s.revoked        # rejected, the state unchanged, before any rule runs
        else:
            entry[6] = s.revoked        # the sender is authenticated and holds its role
            f = entry[4]
            if f is _TODO:
                entry[5] += 1
                if entry[5] > self.warm:
                    f = entry[4] = self.compile_move(r)
            if f is not _TODO and f is not None:
                return f(s)
            if f is _TODO:
                d, s2 = kernel.decide_fresh(s, r, self.rules)
                return d, s2, (() if s2 is s else self.interpreted_steps(s, r, d, s2))
        d, s2 = self.decide_entry(s, r, entry)
        return d, s2, (() if s2 is s else self.step_entry_verdict(s, r, d, s2, entry))

    def next_state(self, s: State, r: Request, entry: list) -> State:
        """The state ``r`` (without a key, whose decider entry is ``entry``) leads to from
        ``s``: by its compiled move when the search compiled one (no decision compiled apart
        for it), else as ``decide_entry``."""
        f = entry[4]
        if entry[6] is s.revoked and f is not _TODO and f is not None:
            return f(s)[1]
        return self.decide_entry(s, r, entry)[1]

    def compile_move(self, r: Request) -> Callable | None:
        return self.compile_decide(r, steps=True)

    def step_entry_verdict(self, s: State, r: Request, d: Decision, s2: State,
                           entry: list) -> tuple:
        """``step_verdict`` of ``r`` whose decider entry is ``entry``."""
        f = entry[1]
        if f is None:
            entry[3] += 1
            if entry[3] <= self.step_warm:
                return self.interpreted_steps(s, r, d, s2)
            f = entry[1] = self.compile_step(r)
        return f(s, r, d, s2)

    def task_moves(self, inst: Any, step_props: list, s: State, i: int,
                   enumerate_steps: Callable, label: Callable) -> list:
        """``wgk.conformance.check.workers.task_moves`` for an instance without keys: the
        steps kept per what the enumeration read, each request decided by its compiled code."""
        out = []
        tasks = s.tasks
        n = self.n
        dlabels = self._dlabels
        for kind, step, lab, entry in self.steps_of(inst, s, i, enumerate_steps, label):
            if kind is _ENV:
                s2 = self.env(s, step, entry)
                if s2 is None:
                    continue
                d = r = None
                bad = ()
            else:
                r = step
                if entry[7] is s.revoked and r.key is None:
                    continue    # its sender is not authenticated or lacks its role: rejected
                if r.key is not None:
                    d, s2 = self.decide(s, r)
                    bad = None
                elif step_props:
                    f = entry[4]
                    if entry[6] is s.revoked and f is not _TODO and f is not None:
                        d, s2, bad = f(s)       # move_entry's answer, without its checks
                    else:
                        d, s2, bad = self.move_entry(s, r, entry)
                else:
                    d, s2 = self.decide_entry(s, r, entry)
                    bad = ()
            if s2 is s:
                continue        # no change, and (without keys) no step property is checked
            t2 = s2.tasks
            for j in range(n):
                if j != i and t2[j] is not tasks[j]:
                    raise AssertionError(f"{lab} changed task {s.graph.tasks[j]}: "
                                         "rules must be local to their task")
            if bad is None:
                bad = self.step_verdict(s, r, d, s2) if step_props else ()
            if d is not None:
                lk = (lab, d.kind, d.code)
                full = dlabels.get(lk)
                if full is None:
                    full = dlabels[lk] = f"{lab} -> {d.label}"
                lab = full
            out.append((lab, step, r, d, s2.tasks[i], s2.target, s2.now, s2.journal, bad))
        return out
