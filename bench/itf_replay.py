"""Replay Quint's ``--mbt`` ITF traces of bench/peers/wgk_slice.qnt through the model.

Each ITF state names the action that reached it (``mbt::actionTaken``) and
the task it picked (``mbt::nondetPicks``). The replay finds the one request
instance (or environment step) the explorer would send for that action and
task, decides it with the model, and compares the state reached with Quint's,
field by field: the step must be accepted, and every field of every task and
the target must be equal. Fields the slice leaves out must still hold their
initial value in the model. ITF is read by ``wgk.conformance.traces.itf``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wgk.conformance.traces import itf
from wgk.model.env import EnvKind, EnvStep
from wgk.conformance.check.interning import successor
from wgk.model.actions import Instance, global_steps, task_steps
from wgk.model.requests import Request
from wgk.model.rules import RULES
from wgk.model.state import State, TaskState
from wgk.model.vocab import (
    AttemptState, Disposition, Exit, Kind, OwnerSeen, Reason, Receipt, Verdict, DecisionKind,
)


class ItfError(ValueError):
    """An ITF file that cannot be read as a trace of the slice."""


def native(v: Any) -> Any:
    """Decoded ITF as comparable Python values: maps -> dicts, sets -> frozensets."""
    if isinstance(v, itf.ItfMap):
        return {native(k): native(x) for k, x in v.pairs}
    if isinstance(v, itf.ItfSet):
        return frozenset(native(x) for x in v.items)
    if isinstance(v, tuple):
        return tuple(native(x) for x in v)
    if isinstance(v, dict):
        return {k: native(x) for k, x in v.items()}
    return v


@dataclass(frozen=True)
class ItfTrace:
    path: str
    states: list[dict]          # variables per state, names without module prefixes
    actions: list[str]          # mbt::actionTaken per state ("init" first)
    picks: list[int | None]     # the task picked per state (1-based), None when none


def read_itf(path: Path | str) -> ItfTrace:
    p = Path(path)
    try:
        doc = itf.loads(p.read_text())
    except (OSError, itf.ItfError) as e:
        raise ItfError(f"{p}: {e}") from e
    out, picks = [], []
    for n, st in enumerate(doc.states):
        if "mbt::actionTaken" not in st:
            raise ItfError(f"{p}: state {n} has no mbt::actionTaken (run quint with --mbt)")
        pick = st.get("mbt::nondetPicks", {}).get("i")
        picks.append(pick.value if isinstance(pick, itf.Variant) and pick.tag == "Some" else None)
        out.append({name.rsplit("::", 1)[-1]: native(v) for name, v in st.items()
                    if not name.startswith("mbt::")})
    return ItfTrace(str(p), out, [str(a) for a in doc.actions], picks)


# --- the model's state in the spec's shape -----------------------------------------

FIELDS = {   # spec field -> (TaskState field, how to show it)
    "attempt": ("attempt", int), "fence": ("fence", int), "leaseEpoch": ("lease_epoch", int),
    "attemptState": ("attempt_state", lambda x: AttemptState(x).label), "token": ("token", int),
    "ownerPid": ("owner_pid", int), "ownerBirth": ("owner_birth", int), "session": ("session", int),
    "wrapperEpoch": ("wrapper_epoch", int), "childEpoch": ("child_epoch", int),
    "ownerSeen": ("owner_seen", lambda x: OwnerSeen(x).label), "procBirth": ("proc_birth", int),
    "worktreeLease": ("worktree_lease", bool), "sessionLease": ("session_lease", bool),
    "finishLease": ("finish_lease", bool), "worktree": ("worktree", int),
    "worktreePresent": ("worktree_present", bool), "origin": ("origin", int),
    "worktreeBase": ("worktree_base", int),
    "savedWork": ("saved_work", int), "retained": ("retained", int), "phase": ("phase", int),
    "exit": ("exit", lambda x: Exit(x).label), "reason": ("reason", lambda x: Reason(x).label),
    "revision": ("revision", int), "candidate": ("candidate", int), "base": ("base", int),
    "version": ("version", int), "disposition": ("disposition", lambda x: Disposition(x).label),
    "deadline": ("deadline", int), "promotions": ("promotions", int),
    "effectDone": ("effect_done", bool),
}
#: TaskState fields the slice leaves out: they keep their initial value.
CONSTANT = ("generation", "imported", "compactions", "continuations", "acks", "provider_failures",
            "logs", "messages", "assigned", "legacy_done", "reconstructed", "abandoned", "failure",
            "retries")


def task_view(t: TaskState) -> dict:
    out = {name: show(getattr(t, attr)) for name, (attr, show) in FIELDS.items()}
    out["receipts"] = {Receipt(k).label: {"fence": int(b.fence), "candidate": int(b.candidate),
                                          "base": int(b.base)} for k, b in enumerate(t.receipts)}
    out["evidence"] = frozenset(tuple(e) for e in t.evidence)
    return out


def constant_fields(t: TaskState) -> list[str]:
    """Left-out fields whose value is not the initial one (should be none)."""
    initial = TaskState()
    return [f for f in CONSTANT if getattr(t, f) != getattr(initial, f)]


# --- actions -> the explorer's step instances ------------------------------------------

REQUESTS = {
    "dispatch": (Kind.DISPATCH, None), "resume": (Kind.RESUME, None),
    "probeOwner": (Kind.PROBE_OWNER, None), "failReport": (Kind.FAIL, None),
    "declareLost": (Kind.DECLARE_LOST, None), "submit": (Kind.SUBMIT, None),
    "quiesce": (Kind.QUIESCE, None), "saveWork": (Kind.SAVE_WORK, None),
    "sealCandidate": (Kind.SEAL_CANDIDATE, None),
    "validatePass": (Kind.VALIDATE, Verdict.PASS), "validateFail": (Kind.VALIDATE, Verdict.FAIL),
    "accept": (Kind.ACCEPT, None), "recordDisposition": (Kind.RECORD_DISPOSITION, None),
    "prepareEffect": (Kind.PREPARE_EFFECT, None), "commitEffect": (Kind.COMMIT_EFFECT, None),
    "markRepair": (Kind.MARK_REPAIR, None), "prepareCleanup": (Kind.PREPARE_CLEANUP, None),
    "commitCleanup": (Kind.COMMIT_CLEANUP, None), "saveGraph": (Kind.SAVE_GRAPH, None),
}
ENV_STEPS = {"edit": EnvKind.EDIT, "ownerDies": EnvKind.OWNER_DIES, "pidReuse": EnvKind.PID_REUSE,
             "moveTarget": EnvKind.MOVE_TARGET}


def step_for(inst: Instance, s: State, action: str, task: int | None) -> Request | EnvStep:
    """The one step instance the explorer sends for ``action`` on ``task`` (1-based)."""
    if action == "moveTarget":
        pool = list(global_steps(inst, s))
    else:
        if task is None or not 1 <= task <= len(s.tasks):
            raise ItfError(f"action {action} picked no valid task ({task})")
        pool = list(task_steps(inst, s, task - 1))
    if action in REQUESTS:
        kind, verdict = REQUESTS[action]
        found = [r for r in pool if isinstance(r, Request) and r.kind == kind
                 and (verdict is None or r.verdict == verdict)
                 and not r.imports and r.evidence != "stale"]
    elif action in ENV_STEPS:
        found = [e for e in pool if isinstance(e, EnvStep) and e.kind == ENV_STEPS[action]]
    else:
        raise ItfError(f"unknown action {action!r}")
    if len(found) != 1:
        raise ItfError(f"action {action} on task {task}: {len(found)} matching step instances")
    return found[0]


# --- replay ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Divergence:
    trace: str
    step: int              # index of the ITF state that differs
    action: str
    detail: str


@dataclass
class ReplayResult:
    traces: int = 0
    steps: int = 0
    divergences: list[Divergence] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.traces > 0 and not self.divergences


def compare(s: State, itf: dict) -> str | None:
    """The first difference between the model's state and Quint's, or None."""
    if int(s.target) != itf["target"]:
        return f"target: model {s.target}, quint {itf['target']}"
    tk = itf["tk"]
    if sorted(tk) != list(range(1, len(s.tasks) + 1)):
        return f"tasks: quint has {sorted(tk)}"
    for i, t in enumerate(s.tasks, 1):
        ours, theirs = task_view(t), tk[i]
        for name in sorted(set(ours) | set(theirs)):
            if ours.get(name) != theirs.get(name):
                return f"task {i} {name}: model {ours.get(name)!r}, quint {theirs.get(name)!r}"
        moved = constant_fields(t)
        if moved:
            return f"task {i}: fields outside the slice changed: {', '.join(moved)}"
    return None


def replay(inst: Instance, trace: ItfTrace, result: ReplayResult) -> None:
    """Replay one trace step for step; the first divergence ends it."""
    s = inst.initial()
    result.traces += 1
    for n, (action, task, itf) in enumerate(zip(trace.actions, trace.picks, trace.states)):
        if n > 0:
            try:
                step = step_for(inst, s, action, task)
            except ItfError as e:
                result.divergences.append(Divergence(trace.path, n, action, str(e)))
                return
            d, s2, _ = successor(inst, s, step, RULES)
            if s2 is None or (d is not None and d.kind == DecisionKind.REJECTED):
                why = "not enabled" if s2 is None else d.label
                result.divergences.append(Divergence(trace.path, n, action,
                                                     f"the model does not accept it: {why}"))
                return
            s = s2
            result.steps += 1
        diff = compare(s, itf)
        if diff:
            result.divergences.append(Divergence(trace.path, n, action, diff))
            return


def replay_dir(inst: Instance, folder: Path) -> ReplayResult:
    result = ReplayResult()
    for path in sorted(folder.glob("*.itf.json")):
        replay(inst, read_itf(path), result)
    return result
