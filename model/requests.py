"""Requests: one canonical, provider-neutral vocabulary for every actor.

A request is plain data. Its ``digest`` covers every field but the idempotency
key, so "same key, same bytes" and "same key, different bytes" are decided by
comparing digests.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, fields
from typing import Any

from .vocab import (
    Actor, Disposition, Exit, Failure, Kind, Labelled, Phase, Reason, Verdict,
    AUTHORITY, MINTING_KINDS, NEEDS_CAPABILITY, TOKEN_BEARERS, TRANSACTION_KINDS,
)


@dataclass(frozen=True, slots=True)
class Capability:
    """K = (graph, task, generation, attempt, fence, worktree lease epoch)."""

    graph: str
    task: str
    generation: int
    attempt: int
    fence: int
    lease_epoch: int


@dataclass(frozen=True, slots=True)
class Owner:
    """The exact owner process: pid plus birth time, its session and epochs."""

    pid: int
    birth: int
    session: int
    wrapper_epoch: int = 1
    child_epoch: int = 1


#: Phase codes of the side exits start here (a main-line phase's code is the phase itself).
EXIT_CODE_BASE = 100


def phase_code(p: Phase | Exit | Any) -> Any:
    """One integer for a visible phase: main-line phase, or ``EXIT_CODE_BASE`` + side exit.

    Anything else is taken to be a code already (a solver term in proofs)."""
    if isinstance(p, Phase):
        return int(p)
    if isinstance(p, Exit):
        return EXIT_CODE_BASE + int(p)
    return p


@dataclass(frozen=True, slots=True)
class Request:
    """One input to the kernel. Fields a kind does not use stay at their default."""

    kind: Kind
    actor: Actor
    task: str
    key: str | None = None
    cap: Capability | None = None
    expected_phase: Phase | Exit | None = None
    expected_revision: int | None = None
    expected_attempt: int | None = None      # dispatch/retry: CAS on attempt count
    expected_generation: int | None = None   # reset: CAS on generation
    owner: Owner | None = None               # dispatch, retry, resume
    imports: int = 0                         # dispatch, retry: retained work imported
    candidate: int = 0
    base: int = 0
    verdict: Verdict | None = None
    disposition: Disposition | None = None
    evidence: str = ""                       # evidence / occurrence / event id
    deadline: int = 0
    reason: Reason = Reason.NONE
    failure: Failure = Failure.NONE          # fail: why the attempt failed
    principal: str | None = None             # who the kernel authenticated; None: the role label
    token: Any = 0                           # the attempt's capability token, as presented (0: none)
    mint: Any = 0                            # dispatch, retry, resume: the token the opened attempt gets
    correlation: Any = 0                     # park, deliver: what an external wait waits for (0: none)
    # the review valve (the manifest's id is ``candidate``, the main a Land manifest integrated
    # or a publication observed is ``base``, a failed valve's code is ``failure``)
    requirements: Any = 0                    # submit-manifest, record-flip, record-eval
    output: Any = 0                          # submit-manifest: the output digest
    validation: Any = 0                      # submit-manifest: the validation digest
    contract: Any = 0                        # submit-manifest: land, report or explore
    review: Any = 0                          # record-flip, record-eval: the verdict
    resolvable: Any = 0                      # submit-manifest, complete: the outputs resolve (1)
    protected_free: Any = 0                  # submit-manifest: no protected path (1)
    succeeded: Any = 0                       # publish, probe-route: the publication (the probe) succeeded (1)
    outputs_match: Any = 0                   # publish: the published outputs are the manifest's (1)
    route: Any = 0                           # provider-failure: the provider route it failed on (0: none)

    def __post_init__(self) -> None:
        if self.kind in TRANSACTION_KINDS and (
            self.expected_phase is None or self.expected_revision is None
        ):
            raise ValueError(
                f"{self.kind.label} moves the SaveTransaction and must carry "
                "expected_phase and expected_revision"
            )

    @property
    def authorized(self) -> bool:
        return self.actor in AUTHORITY[self.kind]

    @property
    def journal_key(self) -> Any:
        """The key in its sender's namespace: ``principal/key`` (an unnamed principal's key is
        its own, the namespace of role labels)."""
        if self.principal is None or not isinstance(self.key, str):
            return self.key
        return f"{self.principal}/{self.key}"

    @property
    def needs_capability(self) -> bool:
        return self.kind in NEEDS_CAPABILITY

    @property
    def needs_token(self) -> bool:
        """A continuation always; any other K-request sent for the attempt's own process."""
        return self.kind == Kind.RESUME or (
            self.kind in NEEDS_CAPABILITY and self.actor in TOKEN_BEARERS)

    @property
    def mints(self) -> bool:
        return self.kind in MINTING_KINDS

    def to_json(self) -> dict[str, Any]:
        """The wire form: kebab-case labels, defaults omitted."""
        out: dict[str, Any] = {}
        for name, wire, default, always in _wire_fields(type(self)):
            v = getattr(self, name)
            if v is None or v == default and not always:
                continue
            out[wire] = _wire(v)
        return out

    @property
    def digest(self) -> str:
        """sha256 of the canonical request bytes, idempotency key excluded."""
        body = self.to_json()
        body.pop("key", None)
        raw = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
        return hashlib.sha256(raw).hexdigest()


#: Per request class: (field, its wire name, its default, always on the wire) for each field.
_WIRE_FIELDS: dict[type, tuple[tuple[str, str, Any, bool], ...]] = {}


def _wire_fields(cls: type) -> tuple[tuple[str, str, Any, bool], ...]:
    spec = _WIRE_FIELDS.get(cls)
    if spec is None:
        spec = _WIRE_FIELDS[cls] = tuple(
            (f.name, f.name.replace("_", "-"), f.default, f.name in ("kind", "actor", "task"))
            for f in fields(cls))
    return spec


def _wire(v: Any) -> Any:
    if isinstance(v, Labelled):
        return v.label
    if isinstance(v, (Capability, Owner)):
        return {f.name.replace("_", "-"): getattr(v, f.name) for f in fields(v)}
    return v
