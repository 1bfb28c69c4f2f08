"""wgk demo: the kernel end to end on a real git repository with real worker processes.

A three-task chain (schema -> api -> ui). This process is the dispatcher, the
daemon (convergence) and the validator; each worker is a separate process
(``python -m wgk.conformance.cli.cmd_demo worker ...``) that finds its attempt in
the shared database, edits and commits in its own worktree, heartbeats and
submits. Along the way:

- schema goes through the whole completion transaction to Done; the target
  moves by a real compare-and-swap;
- api's first worker is killed (SIGKILL) mid-task: convergence proves the exact
  owner's death by its birth time, declares the attempt lost with its dirty
  work retained under an immutable ref, and a second attempt imports that work
  and finishes it;
- ui's target branch is moved by someone else between the effect's write-ahead
  intent and its CAS: the land is refused, the transaction goes to needs-repair
  with the candidate retained (no rebase, no force); the worker rebases its own
  work, revises, and the new candidate lands.

The demo exits 0 only if the end state is exactly what the kernel promised;
every promise is checked, not printed.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

from wgk.conformance.cli.output import emit_json
from wgk.impl import Environment, Kernel, TaskPolicy
from wgk.impl.converge import next_request
from wgk.impl.env import WallClock
from wgk.impl.git import GitRepository, init_repository
from wgk.impl.proc import ProcProcessTable

HELP = "run the kernel end to end: real git, real workers, a killed worker and a moved target"
EXAMPLES = """  wgk demo
  wgk demo --workdir /tmp/wgk-demo
  wgk demo --json
"""

TASKS = [
    # name, deps, file, text
    ("schema", (), "schema.sql", "CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT);\n"),
    ("api", ("schema",), "api.py", "def items(db):\n    return db.execute('SELECT * FROM item')\n"),
    ("ui", ("api",), "ui.html", "<ul id='items'></ul>\n"),
]
WORKER_IDENTITY = {"GIT_AUTHOR_NAME": "worker", "GIT_AUTHOR_EMAIL": "worker@localhost",
                   "GIT_COMMITTER_NAME": "worker", "GIT_COMMITTER_EMAIL": "worker@localhost"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workdir", help="where to create the repository and database "
                                     "(default: a temporary directory, removed afterwards)")
    p.add_argument("--json", action="store_true", help="print the story and the checks as JSON")


# --- the environment and small helpers ----------------------------------------------------


def open_kernel(db: str, repo: str) -> Kernel:
    env = Environment(ProcProcessTable(), GitRepository(repo, worktrees=repo + "-worktrees"),
                      WallClock())
    return Kernel(db, env)


def cap(k: Kernel, task: str) -> dict:
    t = k.record(task)
    return {"graph": k.graph_id, "task": task, "generation": t.generation, "attempt": t.attempt,
            "fence": t.fence, "lease-epoch": t.lease_epoch}


def tx(k: Kernel, task: str, kind: str, actor: str, key: str, **params) -> dict:
    t = k.record(task)
    return k.handle({"kind": kind, "actor": actor, "task": task, "cap": cap(k, task), "key": key,
                     "expected-phase": t.visible_phase, "expected-revision": t.revision, **params})


def git(path: str, *args: str) -> str:
    p = subprocess.run(["git", "-C", path, *args], capture_output=True, check=True,
                       env=dict(os.environ, **WORKER_IDENTITY))
    return p.stdout.decode().strip()


# --- the worker process ----------------------------------------------------------------------


def worker_main(argv: list[str]) -> int:
    """One worker: wait for its attempt, work in its worktree, heartbeat, submit (or hang)."""
    p = argparse.ArgumentParser(prog="wgk demo worker")
    p.add_argument("--db", required=True)
    p.add_argument("--repo", required=True)
    p.add_argument("--task", required=True)
    p.add_argument("--file", required=True)
    p.add_argument("--text", required=True)
    p.add_argument("--mode", choices=["finish", "hang", "rebase"], default="finish")
    args = p.parse_args(argv)
    k = open_kernel(args.db, args.repo)
    me = os.getpid()
    for _ in range(600):                                  # wait to be named the owner
        k._sync()
        t = k.record(args.task)
        if t.running and t.owner_pid == me or args.mode == "rebase":
            break
        time.sleep(0.05)
    else:
        return 3
    wt = k.env.repository.worktree_path(t.worktree_id)
    beat = lambda n: k.handle({"kind": "heartbeat", "actor": "worker", "task": args.task,
                               "cap": cap(k, args.task), "key": f"hb:{me}:{n}",
                               "evidence": f"{me}:heartbeat:{n}"})
    if args.mode == "rebase":
        # the target moved under this task's finish: the worker rebases its own work
        git(wt, "rebase", "--quiet", k.env.repository.target())
        head = git(wt, "rev-parse", "HEAD")
        d = tx(k, args.task, "revise", "worker", f"revise:{args.task}:{head[:12]}",
               candidate=head, base=k.env.repository.target())
        return 0 if d["decision"] == "applied" else 4
    beat(1)
    path = os.path.join(wt, args.file)
    done = open(path).read() if os.path.exists(path) else ""
    if args.mode == "hang":
        with open(path, "w") as f:
            f.write(args.text[: len(args.text) // 2])      # half the work, uncommitted
        beat(2)
        time.sleep(600)                                  # the dispatcher kills us here
        return 5
    if done != args.text:
        with open(path, "w") as f:
            f.write(args.text)
    git(wt, "add", "-A")
    git(wt, "commit", "--quiet", "-m", f"{args.task}: {args.file}")
    beat(2)
    d = tx(k, args.task, "submit", "worker", f"submit:{args.task}:{t.fence}")
    return 0 if d["decision"] == "applied" else 4


# --- the story -----------------------------------------------------------------------------------


@dataclass
class Story:
    workdir: str
    db: str
    repo: str
    lines: list[str] = field(default_factory=list)
    show: bool = True

    def say(self, text: str) -> None:
        self.lines.append(text)
        if self.show:
            print(text, flush=True)


def spawn_worker(story: Story, task: str, mode: str = "finish") -> subprocess.Popen:
    _, _, file, text = next(t for t in TASKS if t[0] == task)
    return subprocess.Popen([sys.executable, "-m", "wgk.conformance.cli.cmd_demo", "worker",
                             "--db", story.db, "--repo", story.repo, "--task", task,
                             "--file", file, "--text", text, "--mode", mode])


def dispatch(story: Story, k: Kernel, task: str, worker: subprocess.Popen,
             imports: str | None = None) -> dict:
    pid, birth = ProcProcessTable().owner(worker.pid)
    r = {"kind": "dispatch", "actor": "daemon", "task": task,
         "key": f"dispatch:{task}:{k.record(task).attempt + 1}",
         "expected-attempt": k.record(task).attempt,
         "owner": {"pid": pid, "birth": birth, "session": f"session-{task}-{pid}"}}
    if imports:
        r["imports"] = imports
    d = k.handle(r)
    story.say(f"dispatch {task} to worker {pid} (birth {birth})"
              + (f", importing {imports[:10]}" if imports else "") + f": {d['decision']}")
    return d


def validate(story: Story, k: Kernel, task: str) -> dict:
    """The validator: the candidate must hold the task's file with exactly its text."""
    t = k.record(task)
    _, _, file, text = next(x for x in TASKS if x[0] == task)
    shown = subprocess.run(["git", "-C", story.repo, "show", f"{t.candidate}:{file}"],
                           capture_output=True).stdout.decode()
    verdict = "pass" if shown == text else "fail"
    d = tx(k, task, "validate", "validator", f"validate:{task}:{t.candidate[:12]}",
           candidate=t.candidate, verdict=verdict)
    story.say(f"validate {task} candidate {t.candidate[:10]}: {verdict} -> {d['decision']}")
    return d


def converge(story: Story, k: Kernel) -> None:
    report = k.converge()
    for s in report.sent:
        r, resp = s.request, s.response
        story.say(f"  converge: {r['kind']} {r['task']} -> {resp['decision']}"
                  + (f" ({resp['code']})" if "code" in resp else ""))


def finish(story: Story, k: Kernel, task: str) -> None:
    """Convergence drives the transaction; the validator answers when asked."""
    for _ in range(4):
        converge(story, k)
        if k.status(task) == "done":
            return
        if k.record(task).phase == "candidate-sealed":
            validate(story, k, task)


def drive_until(story: Story, k: Kernel, task: str, phase: str) -> None:
    """Daemon edges one by one (the same requests convergence sends) up to ``phase``."""
    for _ in range(20):
        t = k.record(task)
        if t.phase == phase:
            return
        if t.phase == "candidate-sealed":
            validate(story, k, task)
            continue
        r = next_request(k, task, k.plan(task), k.env.clock.now(), set())
        r = {key: v for key, v in r.items() if v is not None}
        d = k.handle(r)
        story.say(f"  daemon: {r['kind']} {task} -> {d['decision']}")


def wait_for(predicate, what: str, timeout: float = 30.0) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def story_run(story: Story) -> dict:
    base = init_repository(story.repo, files={"README": "a demo project\n"})
    k = open_kernel(story.db, story.repo)
    repo: GitRepository = k.env.repository
    k.create_graph("demo", [TaskPolicy(n, deps) for n, deps, _, _ in TASKS])
    story.say(f"repository {story.repo} at {base[:10]}; tasks schema -> api -> ui")
    facts: dict = {"base": base}

    # schema: the whole transaction to Done
    w = spawn_worker(story, "schema")
    dispatch(story, k, "schema", w)
    assert w.wait(60) == 0, "the schema worker failed"
    k._sync()
    finish(story, k, "schema")
    facts["schema"] = k.record("schema").candidate
    story.say(f"schema: {k.status('schema')}, target {repo.target()[:10]}")

    # api: the first worker is killed mid-task; convergence and a second attempt
    w1 = spawn_worker(story, "api", "hang")
    dispatch(story, k, "api", w1)
    half = os.path.join(repo.worktree_path("api/f1"), "api.py")
    wait_for(lambda: os.path.exists(half), "the first api worker to write")
    facts["api-worker-1"] = w1.pid
    os.kill(w1.pid, signal.SIGKILL)
    w1.wait()
    story.say(f"killed api worker {w1.pid} (SIGKILL) with half its work uncommitted")
    converge(story, k)
    story.say(f"api: {k.status('api')}, owner seen {k.record('api').owner_seen}, "
              f"declare-lost due at {k.record('api').deadline}")
    wait_for(lambda: k.env.clock.now() >= k.record("api").deadline, "the deadline")
    converge(story, k)
    retained = k.record("api").retained
    facts["api-retained"] = retained
    story.say(f"api attempt 1: {k.record('api').attempt_state}, work retained as "
              f"{(retained or '-')[:10]}")
    w2 = spawn_worker(story, "api")
    dispatch(story, k, "api", w2, imports=retained)
    assert w2.wait(60) == 0, "the second api worker failed"
    k._sync()
    finish(story, k, "api")
    story.say(f"api: {k.status('api')}, target {repo.target()[:10]}")

    # ui: the target moves under the finish
    w = spawn_worker(story, "ui")
    dispatch(story, k, "ui", w)
    assert w.wait(60) == 0, "the ui worker failed"
    k._sync()
    drive_until(story, k, "ui", "effect-prepared")
    facts["ui-v1"] = k.record("ui").candidate
    moved = repo.move_target("someone else's hotfix\n")
    facts["moved"] = moved
    story.say(f"someone else moved {repo.target_ref} to {moved[:10]} during ui's finish")
    converge(story, k)
    t = k.record("ui")
    story.say(f"ui: {k.status('ui')} ({t.reason}), candidate {t.candidate[:10]} retained, "
              f"target still {repo.target()[:10]}")
    facts["ui-after-move"] = {"status": k.status("ui"), "reason": t.reason,
                              "candidate": t.candidate, "target": repo.target()}
    fixer = spawn_worker(story, "ui", "rebase")
    assert fixer.wait(60) == 0, "the ui rebase failed"
    k._sync()
    story.say(f"ui worker rebased its own work onto {moved[:10]} and revised: version "
              f"{k.record('ui').version}")
    finish(story, k, "ui")
    story.say(f"ui: {k.status('ui')}, target {repo.target()[:10]}")
    facts["final"] = k.project()
    facts["checks"] = [c.to_json() for c in check(k, facts)]
    k.close()
    return facts


# --- what the kernel promised ----------------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str = ""

    def to_json(self) -> dict:
        return {"check": self.name, "ok": self.ok, "detail": self.detail}


def check(k: Kernel, facts: dict) -> list[Check]:
    repo: GitRepository = k.env.repository
    p = facts["final"]
    tasks = p["tasks"]
    out = []

    def expect(name: str, ok: bool, detail: str = "") -> None:
        out.append(Check(name, bool(ok), detail))

    for name, _, file, text in TASKS:
        t = tasks[name]
        expect(f"{name} is Done by GraphSave", t["status"] == "done" and t["dependency-satisfied"]
               and t["receipts"].get("graph-save", {}).get("fence") == t["fence"], t["status"])
        expect(f"{name} was promoted exactly once", t["promotions"] == 1, str(t["promotions"]))
        expect(f"{name}'s worktree was removed", not t["worktree"]["present"]
               and not os.path.exists(repo.worktree_path(f"{name}/f{t['fence']}")))
        expect(f"the target holds {file}", repo.out("show", f"{p['target']}:{file}") + "\n" == text)
    history = repo.out("rev-list", "--first-parent", p["target"]).splitlines()
    expect("the target is ui's final candidate", p["target"] == tasks["ui"]["candidate"])
    expect("the target's history holds every landing and the foreign change, in order",
           all(c in history for c in (facts["schema"], facts["moved"], facts["base"]))
           and history.index(facts["schema"]) > history.index(facts["moved"]))
    reflog = repo.out("reflog", "show", "--format=%gs", repo.target_ref).splitlines()
    effects = [m for m in reflog if m.startswith("wgk-effect")]
    expect("the kernel moved the target only by its three CAS lands", len(effects) == 3
           and sum(1 for m in reflog if m == "moved by someone else") == 1, "; ".join(reflog))
    api = k.show("api")
    expect("api's killed attempt was declared lost", [a["state"] for a in api["attempts"]]
           == ["lost", "succeeded"])
    expect("api's dirty work was retained under an immutable ref",
           repo.resolve(repo.ref("retained/api/f1")) == facts["api-retained"] is not None)
    expect("the retained half was imported by the second attempt",
           api["imported"] == facts["api-retained"]
           and api["attempts"][1]["origin"] == facts["api-retained"])
    expect("the lost attempt's worktree was never erased",
           os.path.exists(os.path.join(repo.worktree_path("api/f1"), "api.py")))
    probes = [e for e in api["evidence"] if e[0] == "probe"]
    expect("the killed owner's death was proven by a probe", probes != [], str(probes))
    moved = facts["ui-after-move"]
    expect("the moved target sent ui to needs-repair with its candidate retained",
           moved["status"] == "needs-repair" and moved["reason"] == "target-moved"
           and moved["candidate"] == facts["ui-v1"] and moved["target"] == facts["moved"])
    ui = k.show("ui")
    expect("ui's first candidate stays retained, the revision is version 2",
           ui["retained"] == facts["ui-v1"] and ui["version"] == 2
           and repo.resolve(repo.ref("worksave/ui/f1-v1")) == facts["ui-v1"])
    expect("ui's first effect was voided, its second committed",
           [e["state"] for e in ui["effects"]] == ["void", "committed"])
    expect("the ledger verifies", k.verify_ledger().ok)
    expect("every table rebuilds from the ledger", k.rebuild().ok)
    audit = k.audit()
    expect("the audit finds nothing", audit.ok, str([f.to_json() for f in audit.findings]))
    return out


def run(args: argparse.Namespace) -> int:
    temporary = args.workdir is None
    workdir = args.workdir or tempfile.mkdtemp(prefix="wgk-demo-")
    os.makedirs(workdir, exist_ok=True)
    story = Story(workdir, os.path.join(workdir, "kernel.db"), os.path.join(workdir, "repo"),
                  show=not args.json)
    if os.path.exists(story.db) or os.path.exists(story.repo):
        from wgk.conformance.cli.errors import UsageError
        raise UsageError(f"{workdir}: already holds a demo (choose an empty directory)")
    try:
        facts = story_run(story)
        checks = facts["checks"]
        ok = all(c["ok"] for c in checks)
        if args.json:
            emit_json({"ok": ok, "workdir": workdir, "story": story.lines, "checks": checks,
                       "final": facts["final"]})
        else:
            print_graph(facts["final"])
            for c in checks:
                print(f"{'ok  ' if c['ok'] else 'FAIL'} {c['check']}"
                      + ("" if c["ok"] or not c["detail"] else f": {c['detail']}"))
            print("demo: every promise holds" if ok else "demo: a promise was broken")
        return 0 if ok else 1
    finally:
        if temporary:
            GitRepository(story.repo).remove_all_worktrees() if os.path.isdir(story.repo) else None
            shutil.rmtree(workdir, ignore_errors=True)


def print_graph(p: dict) -> None:
    print("final graph:")
    for name, t in p["tasks"].items():
        print(f"  {name:7} {t['status']:12} generation {t['generation']} attempt {t['attempt']} "
              f"version {t['version']} candidate {(t['candidate'] or '-')[:10]} "
              f"promotions {t['promotions']}")
    print(f"  target {p['target'][:10]}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        sys.exit(worker_main(sys.argv[2:]))
    sys.exit(2)
