"""The model's mutants kept one by one: a change re-runs only the mutants whose kill read it.

The gate's cache (``gate_cache``) keeps each mutant's check (one part of the mutants
section) under a static key and the rule-file functions its kill could have run, checked
like the functions a traced part recorded (``GateCache.lookup``). A mutant's verdict is
``first_kill``'s (``conformance/z3/kills.py``): the proof of the property it names, frame by
frame (its changed kinds first, then every kind in the catalogue's order) up to the first
that fails, then its incident traces replayed on the mutated model, then, when no trace
detects it, an exploration of its instance. Every one of those is a function of:

- the mutant's definition and every file of ``wgk.model`` and ``wgk.conformance`` but the
  rule files (``model/rules_*.py``), whole: the properties, the lemmas, the kernel's checks,
  the environment, the z3 encoding, the explorer, the replay, the catalogue of mutants
  (``gate_frames._fixed``), and the names of the rule files;
- the prover's set-up under the mutant's semantics: it runs every kind's rule once on a
  symbolic task to find the evidence the rules record and the kinds that ask who sent the
  request (``discover_universe``, ``actor_sensitive``). Both are unions over the kinds of
  what each kind's rule does, and a kind the mutant does not change (not its rule, not
  reaching a function it patches, no reducer of its own) does under the mutant exactly
  what it does under the model. So the set-up is keyed by *value* for those kinds (each
  one's evidence and whether it asks who, found under the model once per gate run:
  ``kind_setup``) and by the code the others can run (their ``Reach``, below);
- the text of the rule files outside any function's body (in every key: a constant, a
  decorator, a rule's declared kind) and the body of every rule-file function the kill can
  have run, found from its check when it ran (``dependencies``):

  * the functions named outside the rule files by the modules the kill runs (the
    kernel, the properties, the encoding, the mutants' own code: ``Reach.shared``) and
    those a property runs through the kernel's reducer (``ready-iff-dispatch-admitted``
    runs the dispatch rule): recorded once while the model's prover is set up and kept
    while their bodies are the same (``set_up_functions``), each closed over the names
    its body uses;
  * for the named proof, the ``Reach`` of every kind whose frames were consulted: the
    mutant's changed kinds up to the one that failed, or all of them and every kind
    before the failing one in the catalogue's order (the order of ``Kind``, then the
    environment's steps), as ``_first_failure`` walks them;
  * for each incident trace replayed (all of the mutant's, as ``trace_verdicts`` runs
    them), the ``Reach`` of every kind its steps send; the traces' paths and contents
    are in the static key;
  * for an exploration, the ``Reach`` of every kind whose rule it ran, noted through the
    model's table of rules while it runs (``explored_kinds``); for a mutant not killed
    (then every means ran), every function of every rule file.

Reusing a kill under that key is sound because each frame consulted, each replay and the
exploration is a function of exactly those inputs: what ``gate_frames`` rests on for a
frame (``Reach`` over-approximates the rule-file functions a kind's frames run, tested on
every transition in ``tests/test_gate_frames.py``), with the mutant's code in the static
key and the set-up taken apart by kind. A kind whose frames were not consulted because an
earlier one failed cannot change the verdict line while that earlier failure stays. A
change to any function in the dependencies runs the mutant again, which finds its
dependencies again.
"""
from __future__ import annotations

import ast
import contextlib
import functools
import json
import re
import sys
from pathlib import Path

from wgk.conformance.reports import gate_cache, gate_frames
from wgk.conformance.reports.gate_cache import _digest

#: The modules a mutant's kill runs, from which what they name of the rule files is found.
STARTS = ("conformance/z3/kills.py", "conformance/z3/mutants.py",
          "conformance/oracle/mutant_traces.py", "conformance/reports/gate_model.py")

#: The catalogue of mutants: it names rule modules whole only to patch one of their functions.
CATALOGUE = "conformance/z3/mutants.py"

_PROOF = re.compile(r"(?:lemma-)?proof:[^@]+@(.+)")


class Context:
    """What every mutant's key reads, found once per gate run: the rule files, their
    ``Reach``, the other files whole, the functions the prover's set-up runs."""

    def __init__(self, cache_dir: Path):
        files = gate_cache.source_files()
        index = cache_dir / "frames" / "scans.json"      # shared with ``gate_frames``
        known: dict = {}
        with contextlib.suppress(Exception):  # noqa: BLE001 -- scanned again
            known = {str(k): dict(v) for k, v in json.loads(index.read_text(encoding="utf-8")).items()}
            gate_frames.SCANS.update({k: v for k, v in known.items() if k not in gate_frames.SCANS})
        self.rules = [(n, p) for n, p in files if gate_frames.RULE_FILES.fullmatch(n)]
        others: dict[str, Path] = {}
        for start in STARTS:
            others.update({n: p for n, p in gate_frames.imported(files, start)
                           if not gate_frames.RULE_FILES.fullmatch(n)})
        catalogue = others.pop(CATALOGUE, None)
        self.reach = gate_frames.Reach(self.rules, sorted(others.items()))
        if catalogue is not None:
            used, whole = _catalogue_uses(catalogue)
            self.reach.shared |= set(self.reach.uses) if whole else self.reach.closure(
                {k for n in used for k in self.reach.by_name.get(n, ())})
        if set(gate_frames.SCANS) - set(known):
            with contextlib.suppress(OSError, TypeError, ValueError):
                gate_cache._write_atomic(index, json.dumps(gate_frames.SCANS))
        self.fixed = _digest(gate_frames._fixed(files), json.dumps([n for n, _ in self.rules]))
        self.cache_dir = cache_dir
        self._kind_setup: dict[int, dict] = {}
        self._model_set_up: dict[int, tuple] = {}
        self._set_up: set[tuple[str, str]] | None = None
        self._incidents: dict | None = None
        self._kind_digest: dict[str | None, str] = {}
        #: damaged records of walks, one line each (reported through the gate's cache)
        self.warnings: list[str] = []

    def incident_traces(self, m) -> list[Path]:
        """The traces ``trace_verdicts`` replays for the mutant (those of its incidents in the
        corpus; a file that cannot be read is taken for every mutant), read once."""
        if self._incidents is None:
            from wgk.conformance.oracle.mutant_traces import corpus
            from wgk.conformance.traces.format import trace_files
            self._incidents = {}
            for path in trace_files([corpus()]):
                if "counterexamples" in path.parts:
                    continue
                try:
                    incident = (json.loads(path.read_text(encoding="utf-8")).get("source")
                                or {}).get("incident")
                except Exception:     # noqa: BLE001 -- then every mutant's
                    incident = "?"
                self._incidents.setdefault(repr(incident), []).append(path)
        return sorted({p for i in ["?", *map(repr, m.incidents)]
                       for p in self._incidents.get(i, ())})

    def set_up(self) -> set[tuple[str, str]]:
        """``(file, function)`` of the rule-file functions the model's prover runs while set
        up (the assumptions made: a property may run a rule), closed over ``Reach``."""
        if self._set_up is None:
            ran = set_up_functions(self.cache_dir, self.reach, self.fixed)
            start = {(f, q) for f, quals in ran.items() for q in quals
                     if (f, q) in self.reach.uses}
            self._set_up = self.reach.closure(start)
        return self._set_up

    def kinds_functions(self, kinds) -> dict[str, set[str]]:
        """Per rule file, the functions the frames of ``kinds`` (member names) can run, with
        the shared ones and the set-up's."""
        keys = set(self.reach.shared) | self.set_up()
        for kind in kinds:
            keys |= self.reach.closure(self.reach.kinds.get(kind, set()))
        out: dict[str, set[str]] = {name: set() for name, _ in self.rules}
        for key in keys:
            out[key[0]] |= {key[1], *self.reach.nested[key]}
        return out

    def kind_digest(self, kind: str | None) -> str:
        """The rule files as the frames of ``kind`` (a member name; None: an environment step)
        and its part of the prover's set-up read them: the functions ``kinds_functions``
        gives (the kind's ``Reach``, the shared ones, the set-up's), each file's text outside
        them."""
        if kind not in self._kind_digest:
            quals = self.kinds_functions([kind] if kind is not None else [])
            self._kind_digest[kind] = _digest(*(
                x for name, path in self.rules
                for x in (name, gate_cache.file_digest(path, frozenset(quals[name])))))
        return self._kind_digest[kind]

    def every_function(self) -> dict[str, set[str]]:
        out = {}
        for name, path in self.rules:
            parsed = gate_cache._functions(path)
            out[name] = {q for q, _, _ in parsed[1]} if parsed else {"<unparsed>"}
        return out

    def affected(self, m) -> set[str] | None:
        """The member names of the kinds whose code the mutant changes (None: every kind: a
        reducer of its own, or a patch of a function outside the rule files)."""
        if m.decide is not None:
            return None
        out = {k.name for k in m.rules}
        for obj, name, _new in m.patches:
            where = gate_cache.relative(getattr(obj, "__file__", "") or "")
            if where is None or not gate_frames.RULE_FILES.fullmatch(where):
                return None
            hit = (where, name)
            if hit not in self.reach.uses:
                return None
            if hit in self.reach.shared or hit in self.set_up():
                return None
            out |= {k for k, start in self.reach.kinds.items()
                    if hit in self.reach.closure(start)}
        return out

    def kind_setup(self, tasks: int) -> dict[str, list]:
        """``kind_setup(tasks)``, made from the model's set-up kept kind by kind
        (``model_set_up``): each kind's evidence and whether it asks who."""
        if tasks not in self._kind_setup:
            who, logs, templated = self.model_set_up(tasks)
            self._kind_setup[tasks] = {
                k: [k in who, sorted([repr(a), repr(b)] for a, b in logs[k])]
                for k in logs if k in who or k in templated}
        return self._kind_setup[tasks]

    def model_set_up(self, tasks: int) -> tuple[set[str], dict[str, set], set[str]]:
        """The set-up of the model's prover on the proof instance of ``tasks`` tasks, kind by
        kind (``set_up_by_kind``: each kind's part kept in the cache under the files of the
        model and of the suite but the rule files, whole, and the kind's digest, found again
        only for the kinds whose digest changed); the model's by-actor value and evidence
        universe are set to it for this process (what ``actor_sensitive`` and
        ``discover_universe`` find, every kind at once)."""
        if tasks not in self._model_set_up:
            from wgk.conformance.z3 import transition as tr
            from wgk.conformance.z3.prove import chain_deps
            from wgk.conformance.z3.symbolic import symbolic_graph
            from wgk.model.actions import Instance
            from wgk.model.vocab import Kind
            inst = Instance.proof(tasks=tasks)
            graph = symbolic_graph(inst.task_names(), chain_deps(inst.tasks))
            ids = inst.ids()
            where = self.cache_dir / "mutants" / f"model-set-up-{_digest(self.fixed, str(tasks))}.json"
            try:
                old = json.loads(where.read_text(encoding="utf-8"))
                if not isinstance(old, dict) or old.get("format") != WALK_FORMAT:
                    raise ValueError(f"not {WALK_FORMAT}")
                old = _checked_kinds(old["kinds"])
            except OSError:
                old = {}
            except Exception as e:    # noqa: BLE001 -- found again (a damaged file too)
                why = str(e).splitlines()[0][:80] if str(e) else type(e).__name__
                self.warnings.append(f"cache entry {where} (the model's set-up) ignored: {why}")
                old = {}
            reach = {k: self.kind_digest(k) for k in Kind.__members__}
            who, logs, templated = set_up_by_kind(tr.MODEL, graph, ids, reach, old)
            universe = tr.universe_of(logs, ids)
            tr._cached(tr.MODEL, ("universe", ids), lambda: universe)
            if any(k not in old or old[k]["reach"] != reach[k] for k in reach):
                with contextlib.suppress(OSError, TypeError, ValueError):
                    gate_cache._write_atomic(where, json.dumps({
                        "format": WALK_FORMAT, "kinds": _kinds_json(reach, who, logs, templated)},
                        sort_keys=True))
            self._model_set_up[tasks] = who, logs, templated
        return self._model_set_up[tasks]

    def static(self, m) -> str:
        """What the mutant's key holds beside the gate's options and the skeleton: the other
        files whole, the mutant's traces, the set-up's value for the kinds it leaves alone."""
        from wgk.model.vocab import Kind
        affected = self.affected(m)
        setup = self.kind_setup(m.instance.tasks) if affected is not None else {}
        values = {k: v for k, v in setup.items() if k not in (affected or set())}
        traces = [[str(p), _digest(p.read_bytes())] for p in self.incident_traces(m)]
        return _digest(self.fixed, m.name, json.dumps(traces),
                       json.dumps(sorted(affected) if affected is not None else None),
                       json.dumps(values, sort_keys=True),
                       json.dumps([k.name for k in Kind]))

    def dependencies(self, m, checks, explored_kinds: set[str] | None = None
                     ) -> dict[str, set[str]]:
        """Per rule file, the functions the mutant's kill can have run, from its check and
        (when it was explored) the kinds whose rule its exploration ran (``explored``; None:
        not noted, then every function)."""
        from wgk.model.vocab import Kind
        [check] = checks
        by = list(check.data.get("by") or [])
        explored = any(b.startswith("explore:") for b in by)
        proof = next((_PROOF.fullmatch(b).group(1) for b in by if _PROOF.fullmatch(b)), None)
        if check.verdict != "pass" or (explored and explored_kinds is None) or proof is None:
            return self.every_function()
        changed = [k.name for k in m.rules]
        failed = gate_frames.kind_name(proof)
        if failed in changed:
            consulted = set(changed[:changed.index(failed) + 1])
        else:
            order = [k.name for k in Kind]
            consulted = set(changed) | set(order if failed is None else
                                           order[:order.index(failed) + 1])
        affected = self.affected(m)
        consulted |= set(Kind.__members__) if affected is None else affected
        for path in self.incident_traces(m):
            consulted |= trace_kinds(path)
        if explored:
            consulted |= explored_kinds
        return self.kinds_functions(consulted)


@contextlib.contextmanager
def kinds_run(into: set[str]):
    """Notes in ``into`` the member name of every kind whose rule runs while inside, through
    the model's table of rules (``RULES``: the kernel's reducer, the explorer, the compiled
    model and a property asking the reducer look a rule up there; a rule-file function
    named elsewhere is ``Reach.shared``). Each rule is wrapped for the while and restored;
    the compiled model, made per identity of the model's functions, is made again."""
    from wgk.model.ruleset import RULES
    saved = dict(RULES)

    def noted(kind, fn):
        @functools.wraps(fn)
        def rule(*args, **kw):
            into.add(kind.name)
            return fn(*args, **kw)
        return rule
    try:
        RULES.update({kind: noted(kind, fn) for kind, fn in saved.items()})
        yield into
    finally:
        RULES.update(saved)


@contextlib.contextmanager
def explored_kinds():
    """Notes the kinds whose rule a mutant's exploration runs (``kinds_run`` around
    ``kills.explore_mutant``, not around the rest of the kill: the prover's set-up runs every
    rule, and is keyed by value)."""
    from wgk.conformance.z3 import kills
    kinds: set[str] = set()
    real = kills.explore_mutant

    def noted(*args, **kw):
        with kinds_run(kinds):
            return real(*args, **kw)
    kills.explore_mutant = noted
    try:
        yield kinds
    finally:
        kills.explore_mutant = real


WALK_FORMAT = "wgk-mutant-walk/1"


def walks_kept(m) -> bool:
    """Whether the mutant's proof walk is kept kind by kind (``kept_refute``): a mutant that
    replaces no rule (it patches a function or brings a reducer of its own) walks the kinds
    in the catalogue's order from the first; one that replaces rules is walked on its own
    kinds first and killed there (its key reads those)."""
    return not m.rules


@contextlib.contextmanager
def walk_kept(ctx: Context, m):
    """While inside, the staged ``kills.refute`` of ``m`` (as ``first_kill`` asks it) is
    ``kept_refute``: its walk's frames kept kind by kind in the gate's cache."""
    from wgk.conformance.z3 import kills
    real = kills.refute
    if not walks_kept(m):
        yield
        return

    def refute(mutant, inst=None, prover=None, staged=True):
        if mutant is not m or inst is not None or prover is not None or not staged:
            return real(mutant, inst, prover, staged)
        return kept_refute(ctx, m)
    kills.refute = refute
    try:
        yield
    finally:
        kills.refute = real


def kept_refute(ctx: Context, m):
    """``kills.refute(m)``: the first failing frame of the property the mutant names, the
    transitions walked in the prover's order, each transition's verdict (no counterexample,
    or the counterexample's frame) kept in the cache under a key of what it read, and
    checked again only when that key changed.

    A frame of transition ``t`` on the mutant's prover is a function of the files in the
    mutant's static key (the mutant's code, the properties, the lemmas, the kernel, the
    encoding), the rule-file functions ``t``'s kind can run (``Context.kind_digest``:
    its ``Reach`` with the shared ones and the set-up's) and the prover's set-up: the kinds
    asking who sent a request and the evidence universe. The set-up is a union over the
    kinds of what each kind's rule does under the mutant (``_actor_sensitive``,
    ``_logs_by_kind``: a template runs its own kind's rule through the mutant's reducer
    and patches), so each kind's part is kept under that kind's digest and found again
    under the mutant only for the kinds whose digest changed; the set-up's value is then in
    every frame's key. The walk stops at the first counterexample, as ``_first_failure``
    does: a transition after it is not consulted while that one still fails, and one
    before it whose key changed is checked again (its new counterexample comes first).
    The frames are checked on the mutant's own prover (its set-up given by kind): a frame
    the staged walk takes from the model's base is the model's and proved, and so is the
    same frame on the mutant's prover."""
    from wgk.conformance.z3 import transition as tr
    from wgk.conformance.z3.proof_report import ProofResult
    from wgk.conformance.z3.prove import Prover, chain_deps
    from wgk.conformance.z3.symbolic import symbolic_graph
    from wgk.model.actions import Instance
    from wgk.model.vocab import Kind
    inst = Instance.proof(tasks=m.instance.tasks)
    graph = symbolic_graph(inst.task_names(), chain_deps(inst.tasks))
    ids = inst.ids()
    where = ctx.cache_dir / "mutants" / "walks" / \
        f"{_digest(WALK_FORMAT, ctx.static(m), m.proof_target)}.json"
    record = _walk_record(where, ctx, m.name)
    reach = {k: ctx.kind_digest(k) for k in Kind.__members__}
    sem = m.semantics()
    who, logs, templated = set_up_by_kind(sem, graph, ids, reach, (record or {}).get("kinds", {}))
    universe = tr.universe_of(logs, ids)
    tr._cached(sem, ("universe", ids), lambda: universe)
    setup = _digest(json.dumps(sorted(who)), json.dumps(universe))
    prover = None

    def own() -> Prover:
        nonlocal prover
        if prover is None:
            prover = Prover(inst, sem, transitions=())
        return prover
    order = record["order"] if record is not None and record.get("setup") == setup \
        else _walk_order(m, own())
    frames = dict((record or {}).get("frames", {}))
    found_now = None
    for t in order:
        kind = gate_frames.kind_name(t)
        key = _digest(reach[kind] if kind is not None else ctx.kind_digest(None), setup, t)
        kept = frames.get(t)
        if kept is None or kept.get("key") != key:
            if prover is None and _walk_order(m, own()) != order:
                return _walk_again(ctx, m, where)
            verdict = None
            own().build([t])
            if t in prover.groups:
                for p in [p for p in prover.properties if p.id == m.proof_target]:
                    r = prover.check(p, t)
                    if r.status == "counterexample":
                        found_now, verdict = r, {"invariant": r.invariant, "transition": t,
                                                 "seconds": r.seconds, "solved": r.solved}
                        break
            kept = frames[t] = {"key": key, "verdict": verdict}
        if kept["verdict"] is not None:
            break
    with contextlib.suppress(OSError, TypeError, ValueError):
        gate_cache._write_atomic(where, json.dumps({
            "format": WALK_FORMAT, "mutant": m.name, "setup": setup, "order": order,
            "kinds": _kinds_json(reach, who, logs, templated), "frames": frames}, sort_keys=True))
    last = frames[t]["verdict"] if order else None
    if last is None:
        return None
    return found_now if found_now is not None else ProofResult(
        last["invariant"], last["transition"], "counterexample", last["seconds"],
        solved=last["solved"])


def set_up_by_kind(sem, graph, ids, reach: dict[str, str], old: dict
                   ) -> tuple[set[str], dict[str, set], set[str]]:
    """The prover's set-up under ``sem`` kind by kind: the kinds asking who sent a request
    (member names; ``sem``'s by-actor value set to them), each kind's evidence pairs, and
    the kinds with templates. A kind whose digest (``reach``) is the one ``old`` holds it
    under keeps its part; the others are found again (every kind, when one of them asks
    who otherwise than before: the templates of every kind are made from who asks)."""
    from wgk.conformance.z3 import transition as tr
    from wgk.model.vocab import Kind
    again = {k for k in reach if k not in old or old[k]["reach"] != reach[k]}
    who = {k for k in reach if k not in again and old[k]["who"]}
    if again:
        found = tr._actor_sensitive(graph, sem, None if len(again) == len(reach) else
                                    frozenset(Kind[k] for k in again))
        who |= {k.name for k in found}
        if any(k in old and old[k]["who"] != (k in who) for k in again):
            again = set(reach)
    by_actor = frozenset(Kind[k] for k in who)
    tr._cached(sem, "by-actor", lambda: by_actor)
    logs = {k: {tuple(p) for p in old[k]["logs"]} for k in reach if k not in again}
    templated = {k for k in reach if k not in again and old[k].get("templated", True)}
    if again:
        logs.update({k: set() for k in again})
        found = tr._logs_by_kind(graph, ids, sem, frozenset(Kind[k] for k in again))
        logs.update({kind.name: pairs for kind, pairs in found.items()})
        templated |= {kind.name for kind in found}
    return who, logs, templated


def _checked_kinds(kinds) -> dict:
    """A kept set-up by kind, checked whole (raises on anything damaged)."""
    for k, v in kinds.items():
        if not (isinstance(v["reach"], str) and isinstance(v["who"], bool)
                and isinstance(v["templated"], bool)
                and all(isinstance(p, list) and all(isinstance(x, str) for x in p)
                        for p in v["logs"])):
            raise ValueError(f"kind {k} damaged")
    return kinds


def _kinds_json(reach: dict, who: set, logs: dict, templated: set) -> dict:
    return {k: {"reach": reach[k], "who": k in who, "logs": sorted(logs.get(k, ())),
                "templated": k in templated} for k in reach}


def _walk_order(m, prover) -> list[str]:
    """The transitions ``kills._first_failure`` walks: the mutant's changed kinds, then the
    prover's in its order."""
    first = [k.label for k in m.changed_kinds]
    return first + [t for t in prover.transitions if t not in first]


def _walk_again(ctx: Context, m, where: Path):
    """The record's order is not the prover's: walked from nothing."""
    with contextlib.suppress(OSError):
        where.unlink()
    return kept_refute(ctx, m)


def _walk_record(where: Path, ctx: Context, name: str) -> dict | None:
    """A mutant's kept walk (None: none; a damaged one with a one-line warning)."""
    try:
        raw = where.read_text(encoding="utf-8")
    except OSError:
        return None
    try:
        record = json.loads(raw)
        if not isinstance(record, dict) or record.get("format") != WALK_FORMAT:
            raise ValueError(f"not {WALK_FORMAT}")
        if record.get("mutant") != name:
            raise ValueError("kept for another mutant")
        _checked_kinds(record["kinds"])
        for t, v in record["frames"].items():
            if not isinstance(v["key"], str) or not (v["verdict"] is None or {
                    "invariant", "transition", "seconds", "solved"} <= set(v["verdict"])):
                raise ValueError(f"frame {t} damaged")
        if not all(isinstance(t, str) for t in record["order"]) or \
                not isinstance(record["setup"], str):
            raise ValueError("its order is damaged")
    except Exception as e:            # noqa: BLE001 -- a damaged record of any kind is ignored
        why = str(e).splitlines()[0][:80] if str(e) else type(e).__name__
        ctx.warnings.append(f"cache entry {where} (mutants {name} walk) ignored: {why}")
        return None
    return record


def _catalogue_uses(path: Path) -> tuple[set[str], bool]:
    """What the catalogue uses of the rule files (``gate_frames._uses_from_outside``), a
    module named as the target of a patch ``(module, "name", new)`` left out: the patch
    replaces that function, so the catalogue does not run it (``affected`` keys the kinds
    that reach it by their code)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, SyntaxError):
        return set(), True
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple) and len(node.elts) == 3 \
                and isinstance(node.elts[0], ast.Name) \
                and isinstance(node.elts[1], ast.Constant) and isinstance(node.elts[1].value, str):
            node.elts[0] = ast.Constant(None)
    return gate_frames._uses_from_outside(tree)


def trace_kinds(path: Path) -> set[str]:
    """The member names of the kinds a trace's steps send (every kind: it cannot be read)."""
    from wgk.model.vocab import Kind
    try:
        steps = json.loads(path.read_text(encoding="utf-8"))["steps"]
        return {Kind.parse(s["request"]["kind"]).name for s in steps if "request" in s}
    except Exception:                 # noqa: BLE001 -- read as sending every kind
        return set(Kind.__members__)


@functools.lru_cache(maxsize=None)
def kind_setup(tasks: int) -> dict[str, list]:
    """For each kind (member name), what the prover's set-up finds of its rule under the
    model on the proof instance of ``tasks`` tasks: whether it asks who sent the request,
    and the evidence pairs it reads or records (``discover_universe`` is their union)."""
    from wgk.conformance.z3.catalogue import Pool
    from wgk.conformance.z3.prove import chain_deps
    from wgk.conformance.z3.symbolic import symbolic_graph
    from wgk.conformance.z3.transition import MODEL, _probe, actor_sensitive, branches
    from wgk.model.actions import Instance
    inst = Instance.proof(tasks=tasks)
    graph = symbolic_graph(inst.task_names(), chain_deps(inst.tasks))
    by_actor = actor_sensitive(graph, MODEL)
    cat, s, log = _probe(graph, inst.ids(), by_actor)
    out: dict[str, list] = {k.name: [k in by_actor, set()] for k in by_actor}
    pool = Pool("probe.r", 1)
    for n, tpl in enumerate(cat.templates):
        log.clear()
        branches(cat, s, pool, MODEL, indices=[n])
        entry = out.setdefault(tpl.kind.name, [tpl.kind in by_actor, set()])
        entry[1] |= set(log)
    return {k: [who, sorted([repr(a), repr(b)] for a, b in pairs)] for k, (who, pairs) in out.items()}


def set_up_functions(cache_dir: Path, reach: gate_frames.Reach, fixed: str
                     ) -> dict[str, frozenset[str]]:
    """The rule-file functions the model's prover runs while it is set up (its assumptions:
    ``ready-iff-dispatch-admitted`` runs the dispatch rule), recorded once and kept in the
    cache while their bodies and every other file are the same."""
    store = gate_frames.FrameStore(cache_dir / "mutants", _digest("set-up", fixed), reach)
    ran = store.load_shared()
    if ran is None:
        from wgk.conformance.z3.prove import FAST, Prover, chain_deps
        from wgk.conformance.z3.symbolic import symbolic_graph
        from wgk.conformance.z3.transition import MODEL, actor_sensitive, discover_universe
        from wgk.model.actions import Instance
        inst = Instance.proof(tasks=1)
        graph = symbolic_graph(inst.task_names(), chain_deps(inst.tasks))
        actor_sensitive(graph, MODEL)            # found by value (``kind_setup``)
        discover_universe(graph, inst.ids(), MODEL)
        with gate_cache.recording() as recorded:
            Prover(inst, MODEL, transitions=(), params=FAST)
        ran = {name: frozenset(recorded.get(name, ())) for name, _ in reach.files}
        with contextlib.suppress(OSError):
            store.save_shared(ran)
    return ran


gate_cache.READS = sys.modules[__name__]
