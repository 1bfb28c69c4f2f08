"""Killing a mutant of the model, and how it fared: the verdict of each means that may
catch it (the proofs, bounded model checking, exploration, the incident traces).

A mutant counts as killed only when the proof of the invariant it names fails
and exploration or one of its incident traces detects it too; a proof failure
through a lemma or another invariant is kept apart (``other``), and so is BMC.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from wgk.model.actions import Instance

from wgk.conformance.z3 import model_base
from wgk.conformance.z3.bmc import CheckResult, check, goal_for
from wgk.conformance.z3.lemmas import LEMMAS
from wgk.conformance.z3.mutation import Mutant, patched
from wgk.conformance.z3.prove import ProofResult, Prover


@dataclass
class Explored:
    """The mutant's rules explored on its instance: did the named invariant break?"""

    states: int
    complete: bool
    path: list[str] | None            # the shortest violating path, None when not found

    @property
    def detected(self) -> bool:
        return self.path is not None

    def to_json(self) -> dict:
        return {"detected": self.detected, "states": self.states, "complete": self.complete,
                "path": self.path}


@dataclass
class Kill:
    """How one mutant fared: the proof through the invariant it names, a proof failure
    through anything else (a lemma, another invariant), BMC, exploration, and (filled by
    the oracle wing, which replays traces) its incident traces."""

    mutant: Mutant
    proof: ProofResult | None          # a counterexample for the named invariant
    bmc: CheckResult | None
    seconds: float
    other: ProofResult | None = None   # a counterexample through another property
    explored: Explored | None = None
    traces: list[dict] | None = None   # [{"trace", "detects", "why"}], None: not replayed

    @property
    def killed(self) -> bool:
        """The named invariant's proof fails, and exploration or an incident trace detects it
        (BMC alone when neither was run)."""
        if not self.by_proof:
            return False
        if self.explored is None and self.traces is None:
            return self.by_bmc
        return self.by_explore or self.by_trace

    @property
    def by_proof(self) -> bool:
        return self.proof is not None and self.proof.status == "counterexample"

    @property
    def by_other_proof(self) -> bool:
        return self.other is not None and self.other.status == "counterexample"

    @property
    def by_bmc(self) -> bool:
        return self.bmc is not None and self.bmc.status == "violated"

    @property
    def by_explore(self) -> bool:
        return self.explored is not None and self.explored.detected

    @property
    def by_trace(self) -> bool:
        return bool(self.traces) and any(t["detects"] for t in self.traces)

    @property
    def by(self) -> list[str]:
        out = []
        if self.by_proof:
            kind = "lemma-proof" if self.proof.invariant in LEMMAS else "proof"
            out.append(f"{kind}:{self.proof.invariant}@{self.proof.transition}")
        if self.by_other_proof:
            out.append(f"other-proof:{self.other.invariant}@{self.other.transition}")
        if self.by_bmc:
            out.append(f"bmc:{self.bmc.goal.id}@depth{self.bmc.found_at}")
        if self.by_explore:
            out.append(f"explore:{self.mutant.kills}@depth{len(self.explored.path)}")
        if self.by_trace:
            out += [f"trace:{t['trace']}" for t in self.traces if t["detects"]]
        return out

    def means(self) -> list[str]:
        """The means (of the named proof, exploration, the incident traces) that caught it."""
        return [n for n, ok in (("proof", self.by_proof), ("explore", self.by_explore),
                                ("trace", self.by_trace)) if ok]

    def summary(self) -> str:
        """One line: killed or not, and by which means (a kill by one means only is said)."""
        means = self.means()
        head = "killed" if self.killed else "survived"
        only = [n for n in ("explore", "trace") if n in means]
        both_run = self.explored is not None and self.traces is not None
        note = f" (detected by {only[0]} only)" if len(only) == 1 and self.killed and both_run \
            else ""
        return f"{head} by {', '.join(self.by) or 'nothing'}{note}"

    def to_json(self) -> dict:
        m = self.mutant
        out = {"name": m.name, "incidents": list(m.incidents), "doc": m.doc,
               "killed": self.killed, "by": self.by, "means": self.means(),
               "proof": _proof_json(self.proof, m.proof_target),
               "other_proof": _proof_json(self.other, None),
               "explore": self.explored.to_json() if self.explored else None,
               "traces": self.traces,
               "expected": {"invariant": m.kills, "depth": m.depth,
                            "instance": m.instance.describe(), "proof": m.proof_target},
               "seconds": round(self.seconds, 3)}
        if self.bmc is not None and self.bmc.trace is not None:
            out["trace"] = self.bmc.trace.labels
        return out


def _proof_json(r: ProofResult | None, named: str | None) -> dict:
    if r is None:
        return {"failed": False, "invariant": named}
    kind = "lemma" if r.invariant in LEMMAS else "invariant"
    return {"failed": r.status == "counterexample", "invariant": r.invariant,
            "transition": r.transition, "kind": kind}


# --- killing ---------------------------------------------------------------------------

def refute(m: Mutant, inst: Instance | None = None, prover: Prover | None = None,
           staged: bool = True) -> ProofResult | None:
    """The first failing proof frame of the property the mutant names for its proof: its
    changed kinds first, then every other kind in the catalogue's order.

    Without a ``prover``, one is built as the frames are checked (all at once when ``staged``
    is False): a kind's branches are evaluated when its frames are first checked, so a kill
    on the changed kinds builds no other kind; staged, it shares the set-up and the frames
    the mutant leaves alone with the model's (``model_base``). The frames and their order are
    the whole prover's."""
    if prover is None and staged:
        return model_base.first_failure(m, inst or Instance.proof(tasks=m.instance.tasks),
                                        lambda pid: pid == m.proof_target, _first_failure)
    prover = prover or Prover(inst or Instance.proof(tasks=m.instance.tasks), m.semantics(),
                              transitions=() if staged else None)
    named = [p for p in prover.properties if p.id == m.proof_target]
    return _first_failure(m, prover, named)


def refute_other(m: Mutant, prover: Prover | None = None) -> ProofResult | None:
    """The first failing frame through any other property, on the mutant's changed kinds
    (all kinds for a mutant that patches a function or the reducer). Without a ``prover``,
    staged as ``refute`` is: the frames the mutant shares with the model's base are the
    base's (``model_base``); the frames and their order are the whole prover's."""
    only = bool(m.rules)
    if prover is None:
        def walk(m: Mutant, prover: Prover, props: list, shared=None) -> ProofResult | None:
            return _first_failure(m, prover, props, only_changed=only, shared=shared)
        return model_base.first_failure(m, Instance.proof(tasks=m.instance.tasks),
                                        lambda pid: pid != m.proof_target, walk)
    others = [p for p in prover.properties if p.id != m.proof_target]
    return _first_failure(m, prover, others, only_changed=only)


def _first_failure(m: Mutant, prover: Prover, props: list, only_changed: bool = False,
                   shared: Callable[[object, str], bool] | None = None) -> ProofResult | None:
    """The first failing frame of ``props``, kind by kind (built on the prover when needed;
    ``shared(p, transition)``: that frame is the model's and proved, not asked again)."""
    first = [k.label for k in m.changed_kinds]
    order = first + ([] if only_changed else [t for t in prover.transitions if t not in first])
    for transition in order:
        todo = props if shared is None else [p for p in props if not shared(p, transition)]
        if not todo:
            continue
        prover.build([transition])
        if transition not in prover.groups:
            continue
        for p in todo:
            r = prover.check(p, transition)
            if r.status == "counterexample":
                return r
    return None


#: States an exploration of a mutant may visit before it gives up.
EXPLORE_STATES = 5000


def explore_mutant(m: Mutant, max_states: int = EXPLORE_STATES,
                   until_violated: bool = False) -> Explored:
    """Explore the mutant's instance with the mutant's rules, checking the named invariant
    (``until_violated``: stop once it breaks; the path found is the whole search's, the
    states counted are those met until then)."""
    from contextlib import ExitStack
    from wgk.conformance.check import interning
    from wgk.conformance.check.explore import explore
    from wgk.model.invariants import REGISTRY
    sem = m.semantics()
    with ExitStack() as stack:
        stack.enter_context(sem.active())
        if m.decide is not None:
            stack.enter_context(patched(((interning, "decide", _reducer(m.decide)),)))
        r = explore(m.instance, rules=sem.rules, properties={m.kills: REGISTRY[m.kills]},
                    max_states=max_states, until_violated=until_violated)
    hit = next((v for v in r.violations if v.invariant == m.kills), None)
    return Explored(r.distinct_states, r.complete, list(hit.path) if hit else None)


def _reducer(decide: Callable) -> Callable:
    return lambda s, r, rules: decide(s, r, rules)


def kill(m: Mutant, progress: Callable[[str], None] | None = None,
         explore: bool = True, traces: Callable[[Mutant], list[dict]] | None = None) -> Kill:
    """Run the proofs, the stated BMC check, (unless ``explore`` is False) an exploration,
    and ``traces(m)`` (the incident traces replayed on the mutant, by the oracle wing)."""
    t0 = time.perf_counter()
    proof, other = refute(m), refute_other(m)       # staged on the model's base
    if progress:
        progress(f"{m.name}: proof of {m.proof_target} {'fails' if proof else 'passes'}"
                 + (f"; {other.invariant} fails" if other else ""))
    bmc = check(goal_for(m.kills), m.instance, m.depth, m.semantics())
    if progress:
        progress(f"{m.name}: bmc {bmc.status}"
                 + (f" at depth {bmc.found_at}" if bmc.found_at is not None else ""))
    explored = explore_mutant(m) if explore else None
    if progress and explored is not None:
        progress(f"{m.name}: explore {'detects' if explored.detected else 'misses'} it "
                 f"({explored.states} states)")
    replayed = traces(m) if traces is not None else None
    if progress and replayed is not None:
        progress(f"{m.name}: {sum(t['detects'] for t in replayed)} of {len(replayed)} incident "
                 "traces detect it")
    return Kill(m, proof, bmc, time.perf_counter() - t0, other, explored, replayed)


def first_kill(m: Mutant, traces: Callable[[Mutant], list[dict]] | None = None,
               staged: bool = True) -> Kill:
    """A kill that stops as soon as the mutant counts as killed (``Kill.killed``): the named
    proof, then the incident traces (cheap), then exploration only when no trace detects it;
    BMC and the other properties' proofs, which a kill does not need, are not run. A mutant
    that is not killed so is run through ``kill`` (every means), so a survivor's report says
    all that caught it or not. ``staged``: see ``refute``."""
    t0 = time.perf_counter()
    proof = refute(m, staged=staged)
    if proof is not None:
        k = Kill(m, proof, None, 0.0, traces=traces(m) if traces is not None else None)
        if not k.by_trace:
            k.explored = explore_mutant(m, until_violated=True)
        if k.killed:
            k.seconds = time.perf_counter() - t0
            return k
    return kill(m, traces=traces)
