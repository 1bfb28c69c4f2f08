"""What the kernel promised the demo: every promise checked against git and the kernel, not printed."""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..world.git import GitRepository
from ..front.kernel import Kernel
from .world import TASKS


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str = ""

    def to_json(self) -> dict:
        return {"check": self.name, "ok": self.ok, "detail": self.detail}


class _Checks:
    """The checks made so far (``expect`` adds one)."""

    def __init__(self) -> None:
        self.out: list[Check] = []

    def expect(self, name: str, ok: bool, detail: str = "") -> None:
        self.out.append(Check(name, bool(ok), detail))


def check(k: Kernel, facts: dict) -> list[Check]:
    """Every promise of the story, from the final projection and the recorded ``facts``."""
    c = _Checks()
    _tasks_and_target(c, k, facts)
    _killed_worker(c, k, facts)
    _moved_target(c, k, facts)
    refused = facts.get("refusals", {})
    c.expect("a worker labelling itself validator was refused (role-not-held)",
             refused.get("posed") == {"decision": "rejected", "code": "role-not-held"})
    c.expect("a K-request without the attempt's token was refused (token-mismatch)",
             refused.get("forged") == {"decision": "rejected", "code": "token-mismatch"})
    c.expect("the database and every credential and token file are readable by their owner only",
             all(os.stat(p).st_mode & 0o077 == 0 for p in facts.get("private", [])
                 ) and len(facts.get("private", [])) >= 3, str(facts.get("private")))
    c.expect("the ledger verifies", k.verify_ledger().ok)
    c.expect("every table rebuilds from the ledger", k.rebuild().ok)
    audit = k.audit()
    c.expect("the audit finds nothing", audit.ok, str([f.to_json() for f in audit.findings]))
    return c.out


def _tasks_and_target(c: _Checks, k: Kernel, facts: dict) -> None:
    repo: GitRepository = k.env.repository
    p = facts["final"]
    tasks = p["tasks"]
    for name, _, file, text in TASKS:
        t = tasks[name]
        c.expect(f"{name} is Done by GraphSave", t["status"] == "done" and t["dependency-satisfied"]
                 and t["receipts"].get("graph-save", {}).get("fence") == t["fence"], t["status"])
        c.expect(f"{name} was promoted exactly once", t["promotions"] == 1, str(t["promotions"]))
        c.expect(f"{name}'s worktree was removed", not t["worktree"]["present"]
                 and not os.path.exists(repo.worktree_path(f"{name}/f{t['fence']}")))
        c.expect(f"the target holds {file}",
                 repo.out("show", f"{p['target']}:{file}") + "\n" == text)
    history = repo.out("rev-list", "--first-parent", p["target"]).splitlines()
    c.expect("the target is ui's final candidate", p["target"] == tasks["ui"]["candidate"])
    c.expect("the target's history holds every landing and the foreign change, in order",
             all(x in history for x in (facts["schema"], facts["moved"], facts["base"]))
             and history.index(facts["schema"]) > history.index(facts["moved"]))
    reflog = repo.out("reflog", "show", "--format=%gs", repo.target_ref).splitlines()
    effects = [m for m in reflog if m.startswith("wgk-effect")]
    c.expect("the kernel moved the target only by its three CAS lands", len(effects) == 3
             and sum(1 for m in reflog if m == "moved by someone else") == 1, "; ".join(reflog))


def _killed_worker(c: _Checks, k: Kernel, facts: dict) -> None:
    repo: GitRepository = k.env.repository
    api = k.show("api")
    c.expect("api's killed attempt was declared lost", [a["state"] for a in api["attempts"]]
             == ["lost", "succeeded"])
    c.expect("api's dirty work was retained under an immutable ref",
             repo.resolve(repo.ref("retained/api/f1")) == facts["api-retained"] is not None)
    c.expect("the retained half was imported by the second attempt",
             api["imported"] == facts["api-retained"]
             and api["attempts"][1]["origin"] == facts["api-retained"])
    c.expect("the lost attempt's worktree was never erased",
             os.path.exists(os.path.join(repo.worktree_path("api/f1"), "api.py")))
    probes = [e for e in api["evidence"] if e[0] == "probe-owner"]
    c.expect("the killed owner's death was proven by a probe", probes != [], str(probes))


def _moved_target(c: _Checks, k: Kernel, facts: dict) -> None:
    repo: GitRepository = k.env.repository
    moved = facts["ui-after-move"]
    c.expect("the moved target sent ui to needs-repair with its candidate retained",
             moved["status"] == "needs-repair" and moved["reason"] == "target-moved"
             and moved["candidate"] == facts["ui-v1"] and moved["target"] == facts["moved"])
    ui = k.show("ui")
    c.expect("ui's first candidate stays retained, the revision is version 2",
             ui["retained"] == facts["ui-v1"] and ui["version"] == 2
             and repo.resolve(repo.ref("worksave/ui/f1-v1")) == facts["ui-v1"])
    c.expect("ui's first effect was voided, its second committed",
             [e["state"] for e in ui["effects"]] == ["void", "committed"])
