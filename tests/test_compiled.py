"""The compiled model gives exactly the interpreter's answers.

On every state of the bundled traces (their own requests, keys and journal included) and
on random walks of bounded instances (every request the bounded actors may send, in every
state met), the compiled ``decide``, the verdicts of the state properties per task and the
step properties equal the interpreter's, down to which tasks are the same objects. A
divergence planted in the generated code is caught by the same comparison.
"""
from __future__ import annotations

import random
from pathlib import Path

import pytest

from wgk.conformance.check import compiled as compiled_mod
from wgk.conformance.check.compiled import Compiled
from wgk.conformance.check.explore import _split, explore
from wgk.conformance.check.interning import successor
from wgk.conformance.check.simulate import simulate
from wgk.conformance.oracle.systems import ModelSystem, StepError
from wgk.conformance.traces.format import load_trace
from wgk.model.actions import Instance, task_steps
from wgk.conformance.check.liveness import _task_facts
from wgk.conformance.check.reads import ByReads
from wgk.model.actions import label
from wgk.model.env import EnvStep, guard_and_update
from wgk.model.invariants import REGISTRY
from wgk.model.kernel import decide
from wgk.model.liveness import the_way
from wgk.model.projections import WAYS
from wgk.model.rules import RULES
from wgk.model.state import State

TRACES = sorted(p for d in ("incidents", "recorded")
                for p in (Path(__file__).resolve().parent.parent / "traces" / d).rglob("*.json"))
STATE_PROPS, STEP_PROPS, GOALS = _split(REGISTRY)
EVERY_GROUP = ("core", "evidence", "review", "operator", "legacy", "archive", "waits", "clock",
               "reopen", "pause", "intruder", "env")


def _compiled(s0, cls=Compiled) -> Compiled:
    return cls(s0, RULES, STATE_PROPS, GOALS, STEP_PROPS, warm=0)


def _interpreted_verdict(s, i):
    t = s.tasks[i]
    return (tuple(p.id for p in STATE_PROPS if p.pred(s, i, t) is not True),
            tuple(p.id for p in GOALS if p.pred(s, i, t) is True))


def differences(c: Compiled, s, requests) -> list[str]:
    """Where the compiled model and the interpreter disagree on ``s`` and ``requests``."""
    out = []
    for i in range(len(s.tasks)):
        a, b = _interpreted_verdict(s, i), c.verdict(s, i)
        if a != b:
            out.append(f"verdict of task {i}: interpreted {a}, compiled {b}")
    for r in requests:
        d1, s1 = decide(s, r, RULES)
        d2, s2 = c.decide(s, r)
        if d1 != d2 or s1 != s2 or (s1 is s) != (s2 is s) or any(
                (x is y) != (z is y) for x, z, y in zip(s1.tasks, s2.tasks, s.tasks)):
            out.append(f"decide {r.kind.label} on {r.task}: interpreted {d1.label}, "
                       f"compiled {d2.label}, the same state: {s1 == s2}")
            continue
        e1 = tuple(p.id for p in STEP_PROPS if p.pred(s, r, d1, s1) is not True)
        e2 = c.step_verdict(s, r, d1, s1)
        if e1 != e2:
            out.append(f"step properties of {r.kind.label}: interpreted {e1}, compiled {e2}")
        if r.key is None:       # the move: the decision and the step properties in one
            d3, s3, e3 = c.move_entry(s, r, c._entry(r))
            if (d3, s3, e3) != (d1, s1, () if s1 is s else e1) or (s3 is s) != (s1 is s) or any(
                    (x is y) != (z is y) for x, z, y in zip(s1.tasks, s3.tasks, s.tasks)):
                out.append(f"move {r.kind.label} on {r.task}: interpreted {d1.label} {e1}, "
                           f"compiled {d3.label} {e3}, the same state: {s1 == s3}")
    return out


def step_differences(c: Compiled, inst: Instance, s) -> list[str]:
    """Where the kept enumeration, the compiled environment steps and the kept liveness facts
    disagree with the interpreter on ``s``."""
    out = []
    for i in range(len(s.tasks)):
        steps = list(task_steps(inst, s, i))
        kept = c.steps_of(inst, s, i, task_steps, label)
        if [st for _, st, _, _ in kept] != steps or [lab for _, _, lab, _ in kept] != [
                label(st) for st in steps]:
            out.append(f"the steps of task {i}: enumerated {len(steps)}, kept {len(kept)}")
        for e in steps:
            if not isinstance(e, EnvStep):
                continue
            ok, update = guard_and_update(s, e)
            a = update() if ok is True else None
            b = c.env(s, e, c._env_entry(e))
            if (a is None) != (b is None) or (a is not None and (a != b or any(
                    (x is y) != (z is y) for x, z, y in zip(a.tasks, b.tasks, s.tasks)))):
                out.append(f"{label(e)}: interpreted {a is not None}, compiled {b is not None}")
        facts = _KEPT_FACTS.setdefault(id(c), ByReads(_task_facts))
        if facts(s, i) != _task_facts(s, i):
            out.append(f"the liveness facts of task {i}: {_task_facts(s, i)}, kept {facts(s, i)}")
        if c.the_way(s, i) != the_way(s, i):
            out.append(f"ways: the way of task {i}: interpreted {the_way(s, i)}, "
                       f"compiled {c.the_way(s, i)}")
        f = c.ways[i]
        enabled = tuple(w.enabled(s, i) is True for w in WAYS)
        if f(s) != enabled:
            out.append(f"ways: the ways enabled of task {i}: interpreted {enabled}, "
                       f"compiled {f(s)}")
        kept_compiled = _KEPT_FACTS.setdefault((id(c), "compiled"),
                                               ByReads(lambda s, i: _task_facts(s, i, c.the_way)))
        if kept_compiled(s, i) != _task_facts(s, i):
            out.append(f"the liveness facts of task {i} by the compiled ways: "
                       f"{_task_facts(s, i)}, kept {kept_compiled(s, i)}")
    return out


_KEPT_FACTS: dict = {}


def trace_differences(path: Path, cls=Compiled) -> tuple[int, list[str]]:
    """Replay a trace by the interpreter; compare the compiled model on every state."""
    trace = load_trace(path)
    m = ModelSystem(trace)
    c = _compiled(m.state, cls)
    out, states = [], 0
    for step in trace.steps:
        before = m.state
        try:
            m.apply(step)
        except StepError:
            continue
        states += 1
        r = m.last[1] if m.last is not None and m.last[0] is before else None
        out += differences(c, before, [r] if r is not None else [])
    out += differences(c, m.state, [])
    return states, out


def walk_differences(inst: Instance, walks: int, length: int, seed: int = 7,
                     cls=Compiled) -> tuple[int, list[str]]:
    """Random walks: every request of every task in every state met, compared."""
    rng = random.Random(seed)
    s0 = inst.initial()
    c = _compiled(s0, cls)
    out, n = [], 0
    for _ in range(walks):
        s = s0
        for _ in range(length):
            nxt, requests = [], []
            for i in range(len(s.tasks)):
                for step in task_steps(inst, s, i):
                    if isinstance(step, EnvStep):
                        _, s2, _ = successor(inst, s, step, RULES)
                    else:
                        requests.append(step)
                        s2 = decide(s, step, RULES)[1]
                    if s2 is not None and s2 is not s:
                        nxt.append(s2)
            out += differences(c, s, requests)
            if not inst.keys:
                out += step_differences(c, inst, s)
            n += len(requests)
            if not nxt or out:
                break
            s = rng.choice(nxt)
        if out:
            break
    return n, out


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.stem)
def test_compiled_equals_interpreter_on_every_trace_state(path):
    states, diffs = trace_differences(path)
    assert states > 0
    assert diffs == []


@pytest.mark.parametrize("inst", [
    Instance(tasks=2, attempts=1, generations=1, versions=1, groups=("core", "env")),
    Instance(tasks=1, attempts=2, generations=2, versions=1, groups=EVERY_GROUP),
    Instance(tasks=2, attempts=2, generations=2, versions=1, groups=EVERY_GROUP, keys=1),
], ids=("slice-2", "every-group-1", "every-group-2-keys"))
def test_compiled_equals_interpreter_on_random_walks(inst):
    decided, diffs = walk_differences(inst, walks=25, length=25)
    assert decided > 500
    assert diffs == []


class _Planted(Compiled):
    """A compiled model with one divergence planted in its generated code: a task's
    revision bumped by two instead of one (the constant 1 of the code bound to 2)."""

    def _exec(self, em, name, src, what):
        if " + _c" in src:
            em.params[:] = [2 if type(v) is int and v == 1 else v for v in em.params]
        return super()._exec(em, name, src, what)


def test_a_planted_divergence_is_caught_on_the_traces_and_the_walks():
    caught = [d for p in TRACES[:20] for d in trace_differences(p, _Planted)[1]]
    assert any(d.startswith("decide ") for d in caught)
    _, diffs = walk_differences(Instance(tasks=1, attempts=1, generations=1, versions=1,
                                         groups=("core", "env")), walks=5, length=25,
                                cls=_Planted)
    assert diffs


def test_nothing_falls_back_to_the_interpreter_on_the_full_model():
    inst = Instance(tasks=1, attempts=2, generations=2, versions=1, groups=EVERY_GROUP)
    c = _compiled(inst.initial())
    walk_differences(inst, walks=3, length=30)
    s = inst.initial()
    for i in range(len(s.tasks)):
        c.verdict(s, i)
        c.the_way(s, i)
        for r in task_steps(inst, s, i):
            if not isinstance(r, EnvStep):
                c.decide(s, r)
                c.step_verdict(s, r, *decide(s, r, RULES))
    assert c.sources and c.fallbacks == []


@pytest.mark.parametrize("tasks,groups", [(1, ("core", "env")), (2, ("core", "env")),
                                          (1, ("core", "operator"))])
def test_exploration_compiled_and_interpreted_agree(tasks, groups):
    """(with the operator, a request expecting a side exit is told from one expecting the
    main-line phase of the same number, which compare equal as requests)"""
    inst = Instance(tasks=tasks, attempts=1, generations=1, versions=1, groups=groups)
    a = explore(inst, compiled=True).to_json()
    b = explore(inst, compiled=False).to_json()
    for r in (a, b):
        for k in ("seconds", "states_per_second"):
            r.pop(k)
    assert a == b


def test_exploration_finds_the_violations_of_mutants():
    """A mutant that replaces the reducer (``interning.decide``) is explored by it, not by the
    compiled model of the rules; one that patches a function of the model is compiled through
    the patched function: the violation of each is still found."""
    from wgk.conformance.z3.kills import explore_mutant
    from wgk.conformance.z3.mutants import MUTANTS
    reducer = next(m for m in MUTANTS.values() if m.decide is not None)
    patched = next(m for m in MUTANTS.values()
                   if any(name == "token_presented" for _, name, _ in m.patches))
    for m in (reducer, patched):       # explored until the invariant breaks: the whole search's path
        assert explore_mutant(m, until_violated=True).path is not None, m.name


def test_simulation_compiled_and_interpreted_agree():
    inst = Instance(tasks=3, attempts=1, generations=1, versions=1, groups=("core", "env"))
    a = simulate(inst, 200, 20, 11, compiled=True).to_json()
    b = simulate(inst, 200, 20, 11, compiled=False).to_json()
    for r in (a, b):
        for k in ("seconds", "traces_per_second", "steps_per_second"):
            r.pop(k)
    assert a == b


def test_the_compiled_model_is_kept_per_instance_and_remade_under_a_patch(monkeypatch):
    from wgk.model import kernel
    inst = Instance(tasks=1, attempts=1, generations=1, versions=1, groups=("core", "env"))
    a = compiled_mod.compiled_for(inst, RULES, STATE_PROPS, GOALS, STEP_PROPS)
    assert compiled_mod.compiled_for(inst, RULES, STATE_PROPS, GOALS, STEP_PROPS) is a
    monkeypatch.setattr(kernel, "token_presented", lambda t, r: True)
    assert compiled_mod.compiled_for(inst, RULES, STATE_PROPS, GOALS, STEP_PROPS) is not a


def test_a_result_kept_per_reads_widens_its_key_and_refuses_what_it_cannot_follow():
    """A function reading a field only on one branch is kept exactly (the key widens when the
    other branch reads more); one reading the journal or another task is answered on the real
    state and not kept."""
    from dataclasses import replace
    from wgk.model.vocab import Phase
    s0 = Instance(tasks=2, attempts=1, generations=1, versions=1, groups=("core",)).initial()
    calls = []

    def branchy(s, i):
        calls.append(i)
        t = s.tasks[i]
        return t.revision if t.phase == Phase.PREPARED else -1

    kept = ByReads(branchy)
    a = s0.put(0, replace(s0.tasks[0], phase=Phase.ABSENT, revision=5))
    b = s0.put(0, replace(s0.tasks[0], phase=Phase.PREPARED, revision=5))
    c = s0.put(0, replace(s0.tasks[0], phase=Phase.PREPARED, revision=6))
    assert [kept(x, 0) for x in (a, b, c, a, b, c)] == [-1, 5, 6, -1, 5, 6]
    # a, b (the key widens: what was kept is dropped), c, a again; then b and c are kept
    assert len(calls) == 4
    assert kept.kept[0].reads == {(0, "phase"), (0, "revision")}

    local = ByReads(lambda s, i: s.tasks[1 - i].revision, local=True)
    journal = ByReads(lambda s, i: len(s.journal))
    assert local(b, 1) == 5 and journal(b, 0) == len(b.journal)
    assert local.refused == 1 and journal.refused == 1 and not local.kept[1].table


def test_a_planted_divergence_in_a_move_or_an_environment_step_is_caught():
    """A move whose step properties are read inverted, an environment step compiled to
    change nothing, and a way's condition (the liveness facts' ``the_way``) compiled inverted,
    differ from the interpreter on the walks."""
    inst = Instance(tasks=1, attempts=1, generations=1, versions=1, groups=("core", "env"))

    class NoSteps(Compiled):        # a move's step properties read inverted
        def _exec(self, em, name, src, what):
            if what.startswith("move "):
                src = src.replace(") is not True:", ") is True:")
            return super()._exec(em, name, src, what)

    class StillEnv(Compiled):
        def compile_env(self, e):
            f = super().compile_env(e)
            return None if f is None else (lambda s: None if f(s) is None else s)

    class OneWayOff(Compiled):      # the condition of the first way that can hold, inverted
        def _exec(self, em, name, src, what):
            if what.startswith("ways "):
                src = src.replace("return (False, (", "return (False, not (", 1)
            return super()._exec(em, name, src, what)

    for cls, what in ((NoSteps, "move "), (StillEnv, "env:"), (OneWayOff, "ways: ")):
        _, diffs = walk_differences(inst, walks=5, length=25, cls=cls)
        assert any(d.startswith(what) for d in diffs), cls.__name__


def test_the_kept_graph_is_networkx_graph_of_the_steps_in_the_order_taken():
    """The explorer's graph, filled at once, equals the graph built node by node and edge by
    edge (the states in the order met, the edges in the order taken, every step kept)."""
    import networkx as nx
    inst = Instance(tasks=2, attempts=1, generations=1, versions=1, groups=("core", "env"))
    g = explore(inst, keep_graph=True, max_states=3000).graph
    slow = nx.DiGraph()
    for n, data in g.nodes(data=True):
        slow.add_node(n, **data)
    for u, v, data in g.edges(data=True):
        slow.add_edge(u, v, **data)
    assert nx.utils.graphs_equal(g, slow)
    assert list(g.nodes) == list(range(g.number_of_nodes()))
    assert list(g.predecessors(5)) == [u for u in g.nodes if g.has_edge(u, 5)]
    assert any(d.get("expanded") for _, d in g.nodes(data=True))
    assert all(len(d["steps"]) >= 1 for _, _, d in g.edges(data=True))


def _run(trace, compiled: bool) -> list:
    """Every step of ``trace`` on a fresh model: its decision, broken invariants, projection."""
    m = ModelSystem(trace, compiled=compiled)
    out = [m.check()]
    for step in trace.steps:
        try:
            out.append((m.apply(step), m.check(), m.project()))
        except StepError as e:
            out.append(("step refused", str(e)))
    return out


def test_runs_of_equal_graphs_share_one_compiled_model_and_give_the_interpreters_answers():
    """Every bundled trace replayed twice over, each run's model shared with the runs of an equal
    graph before it (compiled by then): every decision, verdict and projection the
    interpreter's. Graphs that differ in one field, or runs under a patched rule, do not share."""
    traces = [load_trace(p) for p in TRACES]
    compiled_mod._BY_GRAPH.clear()
    # the interpreter shares nothing between runs: its answers are taken once per trace
    interpreted: list = []
    for _ in range(2):
        for n, trace in enumerate(traces):
            if n == len(interpreted):
                interpreted.append(_run(trace, False))
            assert _run(trace, True) == interpreted[n], trace.id
    models = {id(ModelSystem(t).compiled) for t in traces}
    assert 1 < len(models) < len(traces)     # shared, but not one for all
    graph = {"tasks": [{"name": "a"}, {"name": "b", "deps": ["a"]}]}
    a, b = ModelSystem(graph), ModelSystem(dict(graph))
    assert a.compiled is b.compiled and a.graph is not b.graph
    apart = {"tasks": [{"name": "a"}, {"name": "b"}]}
    assert ModelSystem(apart).compiled is not a.compiled
    rules = dict(RULES)
    assert ModelSystem(graph, rules=rules).compiled is not a.compiled
    assert ModelSystem(graph, rules=rules).compiled is ModelSystem(graph, rules=rules).compiled


def test_a_shared_compiled_model_is_remade_under_a_patched_model_function(monkeypatch):
    from wgk.model import kernel
    graph = {"tasks": [{"name": "a"}]}
    before = ModelSystem(graph).compiled
    monkeypatch.setattr(kernel, "token_presented", lambda t, r: True)
    assert ModelSystem(graph).compiled is not before


def test_a_shared_compiled_model_is_remade_under_a_patched_entry_of_a_model_mapping(monkeypatch):
    """The model's functions are found again when an entry of a mapping in a model module is
    patched in place (the module's namespace unchanged), and kept while nothing changed."""
    from wgk.model import projections
    graph = {"tasks": [{"name": "a"}]}
    before = ModelSystem(graph).compiled
    found = compiled_mod._model_functions()
    assert compiled_mod._model_functions() is found and ModelSystem(graph).compiled is before
    kind = next(iter(projections.WAY_CONDITIONS))
    monkeypatch.setitem(projections.WAY_CONDITIONS, kind, lambda *a, **k: False)
    assert compiled_mod._model_functions() is not found
    assert ModelSystem(graph).compiled is not before
    monkeypatch.undo()
    assert ModelSystem(graph).compiled is before


def test_a_graph_differing_in_its_dependencies_gives_its_own_answers():
    """Two graphs of the same tasks, one with an edge, each state with ``b``'s attempt
    succeeded while ``a`` is open: only the chain breaks ``dependency-needs-done``. A model
    shared between them (a key without the edges) would answer the chain as the free graph."""
    from dataclasses import replace
    from wgk.model.vocab import AttemptState
    free = {"tasks": [{"name": "a"}, {"name": "b"}]}
    chain = {"tasks": [{"name": "a"}, {"name": "b", "deps": ["a"]}]}
    compiled_mod._BY_GRAPH.clear()
    from wgk.model.invariants import violations
    for graph, chained in ((free, False), (chain, True), (free, False)):
        m = ModelSystem(graph)
        s = m.state.put(1, replace(m.state.tasks[1], attempt_state=AttemptState.SUCCEEDED))
        assert ("dependency-needs-done" in violations(s)) == chained
        for _ in range(compiled_mod.WARM + 2):    # interpreted, then compiled
            assert m._state_violations(s) == violations(s)
        assert 1 in m.compiled.verdicts
    assert ModelSystem(free).compiled is not ModelSystem(chain).compiled


def test_a_run_restored_to_another_runs_state_of_an_equal_graph_stays_compiled(monkeypatch):
    """A snapshot of one run restored into another of an equal graph (as the batches' re-sent
    requests are decided) is evaluated by the shared compiled model, not the interpreter; a
    snapshot of a graph that differs is left to the interpreter."""
    from wgk.conformance.oracle import systems
    trace = load_trace(TRACES[0])
    first = ModelSystem(trace)
    for step in trace.steps[:3]:
        first.apply(step)
    other = ModelSystem(trace)
    other.restore(first.snapshot())
    interpreted = []
    monkeypatch.setattr(systems, "violations", lambda s: interpreted.append(s) or [])
    assert other._state_violations(other.state) == first.check()
    assert interpreted == []
    apart = ModelSystem({"tasks": [{"name": "x"}]})
    apart.restore(first.snapshot())
    assert apart._state_violations(apart.state) == [] and len(interpreted) == 1


def test_a_task_state_built_from_its_values_is_the_task_state_set_field_by_field():
    """The compiled code builds a new task state as a plain object of the same slots, then
    makes it a TaskState: every field, the type, equality, hash and frozenness are those of one
    set field by field; a builder that stores one field in another's slot is told apart."""
    import dataclasses
    from wgk.model.state import TaskState, TASK_FIELDS
    make, by_setters = compiled_mod._make_task, compiled_mod._make_task_by_setters
    assert make is not by_setters        # the fast builder is the one in use here
    seen = _walked_task_states(seed=3, steps=60)
    assert len({t for t in seen}) > 10

    def same(build) -> bool:
        for t in seen:
            vals = compiled_mod.task_values(t)
            a, b = build(vals, t.receipts), by_setters(vals, t.receipts)
            if type(a) is not TaskState or a != b or hash(a) != hash(b) or a != t or any(
                    getattr(a, f) is not getattr(t, f) for f in TASK_FIELDS):
                return False
            try:
                a.phase = t.phase
                return False        # not frozen
            except dataclasses.FrozenInstanceError:
                pass
        return True

    assert same(make)
    f0, f1 = TASK_FIELDS[0], TASK_FIELDS[1]
    swapped = lambda v, r: make((v[1], v[0]) + v[2:], r)     # noqa: E731  (a planted divergence)
    assert any(getattr(t, f0) != getattr(t, f1) for t in seen)
    assert not same(swapped)


def _walked_task_states(seed: int = 5, steps: int = 80) -> list:
    """The task states of a random walk of one task through every group."""
    inst = Instance(tasks=1, attempts=2, generations=2, versions=1, groups=EVERY_GROUP)
    s, rng, seen = inst.initial(), random.Random(seed), []
    for _ in range(steps):
        seen.append(s.tasks[0])
        nxt = [s2 for r in task_steps(inst, s, 0) if not isinstance(r, EnvStep)
               for s2 in [decide(s, r, RULES)[1]] if s2 is not s]
        if not nxt:
            break
        s = rng.choice(nxt)
    return seen


def test_interned_task_states_are_numbered_as_the_dataclass_tells_them_apart():
    """The interner numbers task states by their values (the receipts by a number of their
    own): two task states get the same number exactly when they are equal as dataclasses,
    whether met as the same object, as a copy, as a copy with its own receipts tuple, or built
    by the interning builder the compiled code uses while exploring (which returns the one task
    state held for those values). An interner that leaves a field out is told apart."""
    from wgk.conformance.check.interning import Interner
    from wgk.model.state import Binding, replace_task
    inst = Instance(tasks=1, attempts=2, generations=2, versions=1, groups=EVERY_GROUP)
    seen = _walked_task_states()
    assert len(set(seen)) > 10 and any(t.receipts != seen[0].receipts for t in seen)

    def copies(t):
        w = compiled_mod.task_values(t)
        fresh = tuple(Binding(b.fence, b.candidate, b.base) for b in t.receipts)
        return [t, compiled_mod._make_task_by_setters(w, t.receipts),
                compiled_mod._make_task_by_setters(w, fresh)]

    def numbering_is_equality(cls) -> bool:
        space = cls(inst, RULES)
        met = [(u, space.intern(u)) for t in seen for u in copies(t)]
        built = [(t, space.build(compiled_mod.task_values(t),
                                 tuple(Binding(b.fence, b.candidate, b.base) for b in t.receipts)))
                 for t in seen]
        if any(b != t or type(b) is not type(t) or space.intern(b) != space.intern(t)
               or b is not space.task_of[space.intern(t)] for t, b in built):
            return False
        return all((a == b) == (m == n) for a, m in met for b, n in met)

    # task states that differ from one met in a single field, or a single receipt
    last = seen[-1]
    seen.append(replace_task(last, logs=last.logs + 1))
    seen.append(replace_task(last, receipts=(Binding(99, 1, 1),) + last.receipts[1:]))
    assert numbering_is_equality(Interner)

    class Blind(Interner):      # a planted divergence: one field left out of the values
        def values(self, t):
            w, k = super().values(t)
            at = compiled_mod.OTHER_FIELDS.index("logs")
            return w[:at] + w[at + 1:], k

        def build(self, w, r):
            return self.task_of[self.intern(compiled_mod._make_task(w, r))]

    class ReceiptsBlind(Interner):  # another: the receipts left out
        def receipts_id(self, r):
            return 0

    assert not numbering_is_equality(Blind)
    assert not numbering_is_equality(ReceiptsBlind)


def _moves_differences(cls=Compiled, seed: int = 11, walks: int = 6, length: int = 30) -> list:
    """Where ``Compiled.task_moves`` (each state's moves asked three times, so that the moves
    are compiled and the fast paths of a sender known authenticated, or known rejected before
    any rule runs, are taken, with evidence added and counted through the kept helpers)
    disagrees with the interpreter's moves, on random walks of one task through every group."""
    from wgk.conformance.check.workers import task_moves
    inst = Instance(tasks=1, attempts=2, generations=2, versions=1, groups=EVERY_GROUP)
    c = _compiled(inst.initial(), cls)
    rng, out = random.Random(seed), []
    from wgk.model.state import Evidence, replace_task
    s0 = inst.initial()
    recorded = replace_task(s0.tasks[0], evidence=Evidence({("compaction", 1), ("continuation", 2)}),
                            compactions=1, continuations=1)
    starts = [State(graph=s0.graph, tasks=(recorded,), target=s0.target, now=s0.now,
                    journal=s0.journal)] + [s0] * walks
    for s in starts:
        for _ in range(length):
            want = task_moves(inst, RULES, STEP_PROPS, s, 0)
            for _ in range(3):
                if c.verdict(s, 0) != _interpreted_verdict(s, 0):
                    return [f"verdict of {s.tasks[0]}: interpreted {_interpreted_verdict(s, 0)}, "
                            f"compiled {c.verdict(s, 0)}"]
                got = c.task_moves(inst, STEP_PROPS, s, 0, task_steps, label)
                if [m[:2] + m[3:] for m in got] != [m[:2] + m[3:] for m in want]:
                    return [f"moves from {s.tasks[0]}: interpreted {[m[0] for m in want]}, "
                            f"compiled {[m[0] for m in got]}"]
            nxt = [m for m in want if m[4] is not s.tasks[0] or m[5:8] != (s.target, s.now,
                                                                         s.journal)]
            if not nxt:
                break
            m = rng.choice(nxt)
            s = State(graph=s.graph, tasks=(m[4],), target=m[5], now=m[6], journal=m[7])
    return out


def test_the_moves_with_their_fast_paths_equal_the_interpreters():
    """The moves of a task found by the compiled model, through its fast paths (a sender known
    rejected before any rule runs is skipped; one known authenticated runs its compiled move
    at once; evidence added and counted is kept per value), are the interpreter's, labels,
    decisions, new task states and step verdicts included; a fast path that skips a sender
    who is authenticated, and an evidence helper that keeps what it made by the evidence
    alone, or a count kept by the evidence alone, are each told apart (the verdicts of the
    states met are compared too)."""
    assert _moves_differences() == []

    class SkipsAll(Compiled):       # planted: every sender taken as rejected before the rules
        def move_entry(self, s, r, entry):
            out = super().move_entry(s, r, entry)
            entry[7] = s.revoked
            return out

    assert _moves_differences(SkipsAll)
    for name, planted in (("_add", lambda ev, item, kept={}: kept.setdefault(ev, ev.add(item))),
                          ("_count", lambda ev, pred, kept={}: kept.setdefault(ev, ev.count(pred)))):
        try:
            compiled_mod._BASE_NAMESPACE[name] = planted
            assert _moves_differences(), name
        finally:
            compiled_mod._BASE_NAMESPACE[name] = getattr(compiled_mod, name)


def test_functions_differing_only_in_constants_share_one_code_each_with_its_own():
    """The constants of a compiled function are parameters of its code, so the functions of
    requests that differ only in such values (tokens, fences, candidates) share one compiled
    code, each made with its own constants: on walks of every group there are several times
    fewer codes than functions, with the interpreter's answers; a function made with the
    constants of the first function of its code is told apart."""
    inst = Instance(tasks=1, attempts=2, generations=2, versions=1, groups=EVERY_GROUP)
    made = []

    class Counting(Compiled):
        def _exec(self, em, name, src, what):
            made.append(src.replace(f"def {name}(", "def _f(", 1))
            return super()._exec(em, name, src, what)

    decided, diffs = walk_differences(inst, walks=6, length=30, cls=Counting)
    assert decided > 200 and diffs == []
    assert len(made) > 3 * len(set(made))

    class FirstConstants(Compiled):     # planted: a shared code bound to its first constants
        first: dict = {}

        def _exec(self, em, name, src, what):
            text = src.replace(f"def {name}(", "def _f(", 1)
            em.params[:] = self.first.setdefault(text, list(em.params))
            return super()._exec(em, name, src, what)

    assert walk_differences(inst, walks=6, length=30, cls=FirstConstants)[1]
