"""Model and implementation side by side, for the implementation's differential tests.

``Pair`` sends every wire request to ``wgk.model`` (through a small wire
translator) and to ``wgk.impl`` (a kernel on SQLite with the in-memory
environment), and compares decisions and the observable projections.
``RandomClient`` generates request sequences that mostly make sense (current
K, expected phase and revision, the next edge) with deliberate mistakes, key
replays and environment steps mixed in.
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from typing import Any

from wgk.conformance.oracle.impl_system import initial_of
from wgk.conformance.oracle.systems import initial_model_state
from wgk.impl import EnvError as ImplEnvError, Kernel, MemoryWorld, Pragmas, TaskPolicy
from wgk.conformance.check.driver import Driver
from wgk.model.env import EnvError as ModelEnvError, EnvKind
from wgk.model.observe import Names, observe
from wgk.model.requests import Capability, Owner, Request
from wgk.model.vocab import (
    Actor, AUTHORITY, Disposition, Exit, Kind, Phase, Reason, Verdict, TRANSACTION_KINDS,
)
from wgk.impl.protocol.world_steps import apply_env
from wgk.conformance.oracle.systems import bind_tokens

FAST = Pragmas(synchronous="OFF")


def to_model(wire: dict, names: Names) -> Request:
    """Translate a wire request into the model's Request (content ids interned)."""
    cap = wire.get("cap")
    owner = wire.get("owner")
    phase = wire.get("expected-phase")
    if phase is not None:
        try:
            phase = Phase.parse(phase)
        except ValueError:
            phase = Exit.parse(phase)
    return Request(
        kind=Kind.parse(wire["kind"]), actor=Actor.parse(wire["actor"]), task=wire["task"],
        key=wire["key"],
        cap=None if cap is None else Capability(cap["graph"], cap["task"], cap["generation"],
                                                cap["attempt"], cap["fence"], cap["lease-epoch"]),
        expected_phase=phase,
        expected_revision=wire.get("expected-revision"),
        expected_attempt=wire.get("expected-attempt"),
        expected_generation=wire.get("expected-generation"),
        owner=None if owner is None else Owner(owner["pid"], owner["birth"],
                                                names.sid(owner.get("session")),
                                                owner.get("wrapper-epoch", 1),
                                                owner.get("child-epoch", 1)),
        imports=names.cid(wire.get("imports")),
        candidate=names.cid(wire.get("candidate")),
        base=names.cid(wire.get("base")),
        verdict=Verdict.parse(wire["verdict"]) if "verdict" in wire else None,
        disposition=Disposition.parse(wire["disposition"]) if "disposition" in wire else None,
        evidence=wire.get("evidence", ""),
        deadline=wire.get("deadline", 0),
        reason=Reason.parse(wire.get("reason", "none")),
        token=names.tid(wire.get("token")),
        mint=names.tid(wire.get("mint")),
    )


@dataclass
class Pair:
    """One graph, decided by the model and by the implementation in lockstep."""

    specs: list[TaskPolicy]
    path: str
    target: str = "main-0"
    names: Names = field(default_factory=Names)

    initial: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        spec = {"id": "g", "target": self.target, "tasks": [
            {"name": s.name, "deps": list(s.deps), "review-required": s.review_required,
             "requires-assignment": s.requires_assignment} for s in self.specs]}
        state = initial_model_state(spec, self.initial, self.names)
        self.model = Driver(state.graph, state)
        self.world = MemoryWorld.create(target=self.target)
        self.impl = Kernel(self.path, self.world.environment(), pragmas=FAST)
        self.impl.create_graph("g", self.specs)
        for name, seed in self.initial.items():
            self.impl.seed(name, initial_of(seed, self.target))
        self.history: list[Any] = []
        #: task -> the symbolic token of its current attempt (as an honest opener keeps it)
        self.tokens: dict[str, str] = {
            name: seed["attempt"]["token"] for name, seed in self.initial.items()
            if isinstance(seed.get("attempt"), dict) and "token" in seed["attempt"]}

    def send(self, wire: dict) -> tuple[dict, dict]:
        """(model decision, impl decision) for one wire request; tokens are symbolic names,
        bound to secrets for the implementation (``bind_tokens``)."""
        self.history.append(wire)
        md = self.model.apply(to_model(wire, self.names)).to_json()
        idec = self.impl.handle(bind_tokens(wire))
        if "mint" in wire and idec.get("decision") == "applied":
            self.tokens[wire["task"]] = wire["mint"]
        return md, idec

    def env(self, step: dict) -> bool:
        """Apply an environment step to both when the model allows it."""
        kind = EnvKind.parse(step["env"])
        kw: dict[str, Any] = {}
        if "content" in step:
            kw["content"] = self.names.cid(step["content"])
        if "birth" in step:
            kw["birth"] = step["birth"]
        if "amount" in step:
            kw["amount"] = step["amount"]
        try:
            self.model.env(kind, step.get("task", ""), **kw)
        except ModelEnvError:
            try:                                   # what the model's world cannot do, nor can ours
                apply_env(self.impl, step)
            except ImplEnvError:
                return False
            raise AssertionError(f"the implementation took a step the model refuses: {step}")
        self.history.append(step)
        apply_env(self.impl, step)
        return True

    def restart(self) -> None:
        """The implementation crashes and restarts from its database (env survives)."""
        self.impl.close()
        self.impl = Kernel(self.path, self.world.environment(), pragmas=FAST)

    def projections(self) -> tuple[dict, dict]:
        return observe(self.model.state, self.names), self.impl.project()

    def close(self) -> None:
        self.impl.close()


def diff(a: Any, b: Any, path: str = "") -> list[str]:
    """Field-by-field differences between two JSON values."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                out.append(f"{path}/{k}: {'missing' if k not in a else a[k]!r} != "
                           f"{'missing' if k not in b else b[k]!r}")
            else:
                out += diff(a[k], b[k], f"{path}/{k}")
        return out
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


# --- a client that mostly makes sense ------------------------------------------------------

CONTENTS = ("c1", "c2", "c3", "main-0", "t1")
EVIDENCE = ("e1", "e2", "e3")
SESSIONS = ("s1", "s2")
NEXT_EDGE = {
    "absent": "submit", "prepared": "quiesce", "quiescing": "save-work",
    "work-saved": "seal-candidate", "candidate-sealed": "validate", "validated": "accept",
    "awaiting-acceptance": "accept", "accepted": "record-disposition",
    "disposition-recorded": "prepare-effect", "effect-prepared": "commit-effect",
    "effect-committed": "prepare-cleanup", "cleanup-prepared": "commit-cleanup",
    "cleanup-committed": "save-graph",
}
IDLE_KINDS = {"dispatch": 12, "retry": 2, "assign": 2, "legacy-done": 1, "reconstruct": 1,
              "reconcile": 1, "reset": 1, "abandon": 0.1, "message": 1, "fail": 0.5,
              "deliver": 1, "expire-wait": 0.5}
RUNNING_KINDS = {"heartbeat": 1, "heartbeat-timeout": 1, "observe-eof": 1, "probe-owner": 2,
                 "compaction": 1, "ack-continuation": 1, "provider-failure": 1, "log": 1,
                 "fail": 1, "declare-lost": 1, "resume": 1, "retry": 0.5, "reset": 0.5,
                 "message": 0.5, "ownership-contention": 0.3, "mark-repair": 0.5, "revise": 0.5,
                 "block-upgrade": 0.3, "reconcile": 0.5, "abandon": 0.1, "submit": 2, "park": 0.7}


def weighted(rng: random.Random, table: dict[str, float]) -> str:
    kinds = list(table)
    return rng.choices(kinds, weights=[table[k] for k in kinds])[0]


def next_edge(t, review_required: bool, rng: random.Random) -> str | None:
    """The kind a well-behaved actor sends next on the main line (None when off it)."""
    if t.exit == "needs-repair":
        return "revise"
    if t.exit != "none":
        return "reconcile"
    if t.owner_seen == "dead" and not t.reserved:
        return rng.choice(["declare-lost", "resume"])
    if t.phase == "validated" and review_required:
        return "request-review"
    return NEXT_EDGE.get(t.phase)


class RandomClient:
    """Generates wire requests and environment steps from the current (impl) state."""

    def __init__(self, pair: Pair, rng: random.Random):
        self.pair = pair
        self.rng = rng
        self.sent: list[dict] = []
        self.n = 0
        self.pid = 5000

    def record(self, task: str):
        return self.pair.impl.record(task)

    def cap(self, task: str) -> dict:
        t = self.record(task)
        cap = {"graph": "g", "task": task, "generation": t.generation, "attempt": t.attempt,
               "fence": t.fence, "lease-epoch": t.lease_epoch}
        if self.rng.random() < 0.1:
            field_ = self.rng.choice(["generation", "attempt", "fence", "lease-epoch"])
            cap[field_] += self.rng.choice([-1, 1])
        if self.rng.random() < 0.02:
            cap["graph"] = "other"
        return cap

    def owner(self, task: str, resume: bool = False) -> dict:
        self.pid += 1
        t = self.record(task)
        if resume:
            session = t.session if self.rng.random() < 0.8 else self.rng.choice(SESSIONS)
            bump = 1 if self.rng.random() < 0.8 else 0
            return {"pid": self.pid, "birth": self.rng.randint(1, 99), "session": session,
                    "wrapper-epoch": t.wrapper_epoch + bump, "child-epoch": t.child_epoch + bump}
        return {"pid": self.pid, "birth": self.rng.randint(1, 99),
                "session": self.rng.choice(SESSIONS)}

    def content(self, preferred: str | None) -> str | None:
        if preferred is not None and self.rng.random() < 0.85:
            return preferred
        return self.rng.choice(CONTENTS)

    def request(self) -> dict:
        rng = self.rng
        if self.sent and rng.random() < 0.08:
            return dict(rng.choice(self.sent))                      # exact replay
        tasks = [s.name for s in self.pair.specs]
        task = rng.choice(tasks) if rng.random() > 0.02 else "zz"
        t = self.record(task) if task != "zz" else None
        review = task != "zz" and self.pair.impl.policy(task).review_required
        edge = next_edge(t, review, rng) if t is not None and t.running else None
        if t is None or rng.random() < 0.06:
            kind = rng.choice([k.label for k in Kind])
        elif edge is not None and rng.random() < 0.65:
            kind = edge
        elif t.running:
            kind = weighted(rng, RUNNING_KINDS)
        else:
            kind = weighted(rng, IDLE_KINDS)
        allowed = sorted(a.label for a in AUTHORITY[Kind.parse(kind)])
        if kind == "accept" and review:
            allowed = ["evaluator"]
        elif kind == "accept":
            allowed = ["daemon"]
        actor = rng.choice(allowed) if rng.random() < 0.95 else rng.choice([a.label for a in Actor])
        self.n += 1
        wire: dict[str, Any] = {"kind": kind, "actor": actor, "task": task, "key": f"k{self.n}"}
        if self.sent and rng.random() < 0.04:
            wire["key"] = rng.choice(self.sent)["key"]              # conflict (usually)
        self.fill(wire, t)
        self.sent.append(wire)
        return wire

    def fill(self, wire: dict, t) -> None:
        rng, kind, task = self.rng, wire["kind"], wire["task"]
        k = Kind.parse(kind)
        if t is None:
            if k in TRANSACTION_KINDS:
                wire["expected-phase"], wire["expected-revision"] = "absent", 0
            if kind in ("dispatch", "retry", "resume"):
                wire["owner"] = {"pid": 1, "birth": 1, "session": "s1"}
                wire["mint"] = f"tok-{self.n}"
            if kind in ("park", "deliver"):
                wire["correlation"] = "q1"
            return
        if kind in ("resume", "heartbeat", "heartbeat-timeout", "observe-eof", "probe-owner",
                    "compaction", "ack-continuation", "provider-failure", "log", "fail",
                    "declare-lost", "park") or k in TRANSACTION_KINDS:
            if rng.random() > 0.03:
                wire["cap"] = self.cap(task)
        if k in TRANSACTION_KINDS:
            wire["expected-phase"] = t.visible_phase if rng.random() < 0.9 else \
                rng.choice(["absent", "prepared", "needs-repair", "validated"])
            wire["expected-revision"] = t.revision if rng.random() < 0.9 else t.revision + 1
        if kind in ("dispatch", "retry"):
            wire["expected-attempt"] = t.attempt if rng.random() < 0.9 else t.attempt + 1
            wire["owner"] = self.owner(task)
            if t.retained is not None and rng.random() < 0.5:
                wire["imports"] = t.retained if rng.random() < 0.9 else "c3"
            elif rng.random() < 0.05:
                wire["imports"] = "c2"
        if kind == "resume":
            wire["owner"] = self.owner(task, resume=True)
        self.tokens(wire)
        if kind == "reset":
            wire["expected-generation"] = t.generation if rng.random() < 0.9 else t.generation + 1
        view = self.pair.world.repository.observe_worktree(t.worktree_id) if t.worktree_id else None
        current = view.content if view is not None and view.present else None
        if kind in ("save-work", "revise"):
            wire["candidate"] = self.content(current)
            wire["base"] = self.content(t.origin if kind == "save-work"
                                        else self.pair.world.repository.target())
        if kind in ("seal-candidate", "validate", "accept", "commit-effect"):
            wire["candidate"] = self.content(t.candidate)
        if kind == "commit-effect":
            wire["base"] = self.content(t.base)
        if kind == "reconstruct":
            wire["candidate"] = self.content(self.pair.world.repository.target())
            wire["base"] = "main-0"
        if kind == "validate":
            wire["verdict"] = rng.choice(["pass"] * 6 + ["fail", "not-required"])
        if kind == "accept":
            if self.pair.impl.policy(task).review_required:
                wire["verdict"] = rng.choice(["pass"] * 5 + ["fail", "not-required"])
            else:
                wire["verdict"] = rng.choice(["not-required"] * 6 + ["pass", "fail"])
            if rng.random() < 0.03:
                del wire["verdict"]
        if kind == "record-disposition":
            wire["disposition"] = rng.choice(["land"] * 6 + ["deliver", "report", "none"])
        if kind in ("heartbeat", "heartbeat-timeout", "observe-eof", "probe-owner", "compaction",
                    "ack-continuation", "provider-failure", "message", "ownership-contention",
                    "fail", "legacy-done"):
            wire["evidence"] = rng.choice(EVIDENCE)
        if kind == "park":
            wire["correlation"] = rng.choice(("q1", "q2"))
            if rng.random() < 0.5:
                wire["deadline"] = self.pair.world.clock.now() + rng.randint(0, 3)
        if kind == "deliver":
            wire["evidence"] = rng.choice(EVIDENCE)
            wire["correlation"] = t.waiting_on if t.waiting_on and rng.random() < 0.6 else \
                rng.choice(("q1", "q2"))
        if kind == "ack-continuation" and rng.random() < 0.8:
            seen = self.pair.impl.project()["tasks"][task]["evidence"]
            occurrences = [i for k, i in seen if k == "continuation"]
            if occurrences:
                wire["evidence"] = rng.choice(occurrences)
        if kind in ("submit", "request-review", "accept", "record-disposition") and rng.random() < 0.2:
            wire["deadline"] = rng.randint(1, 4)
        if kind == "block-upgrade" and rng.random() < 0.5:
            wire["reason"] = "version-skew"

    def tokens(self, wire: dict) -> None:
        """Openers mint a fresh name; the attempt's own process presents the current
        attempt's token, now and then none or another one (a forger's)."""
        rng = self.rng
        if wire["kind"] in ("dispatch", "retry", "resume"):
            wire["mint"] = f"tok-{self.n}"
        presents = wire["kind"] == "resume" or (
            "cap" in wire and wire["actor"] in ("worker", "wrapper", "broker"))
        held = self.pair.tokens.get(wire["task"])
        if presents and rng.random() < 0.9 and held is not None:
            wire["token"] = held
        elif presents and rng.random() < 0.5:
            wire["token"] = rng.choice(["tok-forged", f"tok-{rng.randint(1, self.n)}"])

    def env_step(self) -> dict:
        rng = self.rng
        task = rng.choice([s.name for s in self.pair.specs])
        choice = rng.random()
        if choice < 0.4:
            return {"env": "edit", "task": task, "content": rng.choice(CONTENTS[:3])}
        if choice < 0.6:
            return {"env": "owner-dies", "task": task}
        if choice < 0.7:
            return {"env": "pid-reuse", "task": task, "birth": rng.randint(100, 200)}
        if choice < 0.85:
            return {"env": "move-target", "content": rng.choice(("t1", "c1", "c2", "main-0"))}
        return {"env": "tick", "amount": rng.randint(1, 2)}


def random_specs(rng: random.Random) -> list[TaskPolicy]:
    n = rng.randint(1, 3)
    names = ["a", "b", "c"][:n]
    specs = []
    for i, name in enumerate(names):
        deps = tuple(d for d in names[:i] if rng.random() < 0.6)
        specs.append(TaskPolicy(name, deps, review_required=rng.random() < 0.3,
                                requires_assignment=rng.random() < 0.2))
    return specs


def temp_db(tmp_path, name: str = "kernel.db") -> str:
    return os.fspath(tmp_path / name)


# --- the pairing itself ------------------------------------------------------------------


def test_translator_interns_content_ids_and_fills_owner_epochs():
    names = Names()
    r = to_model({"kind": "dispatch", "actor": "daemon", "task": "a", "key": "k",
                  "expected-attempt": 0, "imports": "c1",
                  "owner": {"pid": 1, "birth": 2, "session": "s1"}}, names)
    assert r.imports == names.cid("c1") != 0
    assert (r.owner.wrapper_epoch, r.owner.child_epoch) == (1, 1)
    assert r.owner.session == names.sid("s1")


def test_diff_names_every_differing_field():
    assert diff({"a": 1, "b": {"c": 2}}, {"a": 1, "b": {"c": 3}, "d": 4}) == \
        ["/b/c: 2 != 3", "/d: 'missing' != 4"]
