"""A graph, its seeds and its principals as they cross the wire, set up on a kernel.

The wire forms are those of docs/vocabulary.md and docs/conformance-protocol.md:
a graph ``{"id", "target", "tasks": [{"name", "deps", ...}], "principals",
"protected-paths"}``, seeds ``{task: {"attempt": {...}}}`` whose attempt
``token`` is already a sha256 (a kernel never sees a seeded secret), and
credentials ``{principal: "<principal>.<secret>"}``. Both the in-process
harness and the served kernel (``wgk.impl.protocol.serve``) set a kernel up through
``setup``; a seed the kernel cannot take raises ``SetupError`` naming its path.
"""
from __future__ import annotations

from typing import Any

from ..contract.errors import SeedError
from ..front.kernel import Kernel
from ..storage.records import TaskPolicy
from ..decisions.seeding import Initial
from ..contract.vocabulary import DEFAULT_RETRY_BUDGET


class SetupError(ValueError):
    """A graph, seed or principal the kernel cannot set up (the message names its path)."""


def policies(graph: dict) -> list[TaskPolicy]:
    """The tasks of a wire graph as the kernel's policies."""
    return [TaskPolicy(t["name"], deps=tuple(t.get("deps", ())),
                       review_required=bool(t.get("review-required")),
                       requires_assignment=bool(t.get("requires-assignment")),
                       retry_budget=t.get("retry-budget", DEFAULT_RETRY_BUDGET))
            for t in graph.get("tasks", [])]


def initial_of(seed: dict, target: str) -> Initial | None:
    """The kernel's seed for a wire seed's attempt (worktree and origin default to the
    target); its ``token`` is the sha256 the attempt's process will match."""
    a = seed.get("attempt")
    if a is None:
        return None
    owner = a.get("owner") or {}
    return Initial(
        generation=a["generation"], attempt=a["attempt"], fence=a["fence"],
        lease_epoch=a["lease-epoch"], pid=owner.get("pid", 0), birth=owner.get("birth", 0),
        session=owner.get("session"), worktree=a.get("worktree") or target,
        origin=a.get("origin") or target,
        wrapper_epoch=owner.get("wrapper-epoch", 1), child_epoch=owner.get("child-epoch", 1),
        state=a.get("state", "running"), owner_seen=a.get("owner-seen", "unverified"),
        alive=a.get("alive", True), leases=a.get("leases"),
        token_hash=a.get("token") or None,
    )


def secret_of(credential: str) -> str:
    """The secret part of a credential ``<principal>.<secret>``."""
    return credential.partition(".")[2]


def daemon_of(graph: dict) -> str | None:
    """The declared principal that sends the daemon's convergence: the first holding the
    daemon role (``None``: an open graph, or no daemon declared)."""
    for p in graph.get("principals", []):
        if "daemon" in p.get("roles", []):
            return p["name"]
    return None


def setup(kernel: Kernel, graph: dict, initial: dict | None,
          credentials: dict[str, str] | None) -> None:
    """Create the graph, register its declared principals with their credentials, seed the
    initial attempts."""
    credentials = credentials or {}
    kernel.create_graph(graph.get("id", "g"), policies(graph),
                        protected_paths=graph.get("protected-paths", ()))
    for p in graph.get("principals", []):
        if p["name"] not in credentials:
            raise SetupError(f"/graph/principals/{p['name']}: no credential sent for it")
        kernel.principals.add(p["name"], p.get("roles", []), secret=secret_of(credentials[p["name"]]))
    target = graph.get("target", "main-0")
    for name, seed in (initial or {}).items():
        unsupported = sorted(set(seed) - {"attempt"})
        if unsupported:
            raise SetupError(f"/initial/{name}/{unsupported[0]}: not seeded by the implementation")
        init = initial_of(seed, target)
        if init is not None:
            try:
                kernel.seed(name, init)
            except SeedError as e:
                raise SetupError(f"/initial/{name}: {e}") from None


def wire_seeds(initial: dict, hash_token: Any) -> dict:
    """Seeds whose symbolic attempt token is replaced by ``hash_token(name)``."""
    out = {}
    for task, seed in initial.items():
        a = seed.get("attempt") if isinstance(seed, dict) else None
        if isinstance(a, dict) and isinstance(a.get("token"), str):
            seed = dict(seed, attempt=dict(a, token=hash_token(a["token"])))
        out[task] = seed
    return out
