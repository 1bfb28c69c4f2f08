"""The demo's story: this process dispatches, converges and validates; workers do the work."""
from __future__ import annotations

import hashlib
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from ..front import secretfile
from ..front.converge import next_request
from ..world.git import GitRepository, init_repository
from ..front.kernel import Kernel
from ..world.proc import ProcProcessTable
from ..storage.records import TaskPolicy
from .checks import check
from .world import TASKS, cap, open_kernel, tx


@dataclass
class Story:
    workdir: str
    db: str
    repo: str
    lines: list[str] = field(default_factory=list)
    show: bool = True
    daemon: str | None = None       # the credentials of this process's principals
    validator: str | None = None

    def say(self, text: str) -> None:
        self.lines.append(text)
        if self.show:
            print(text, flush=True)


def spawn_worker(story: Story, task: str, mode: str = "finish") -> subprocess.Popen:
    _, _, file, text = next(t for t in TASKS if t[0] == task)
    return subprocess.Popen([sys.executable, "-m", "wgk.impl.demo.worker",
                             "--db", story.db, "--repo", story.repo, "--task", task,
                             "--file", file, "--text", text, "--mode", mode,
                             "--token-file", token_path(story, task),
                             "--credential-file", f"{story.db}.worker.credential"])


def token_path(story: Story, task: str) -> str:
    """Where the dispatcher hands the attempt's capability token to its worker (0600)."""
    return f"{story.db}.{task}.token"


def mint(story: Story, task: str) -> str:
    """A fresh token for the attempt about to open, handed to its worker; its sha256 for the
    dispatch (the kernel keeps only that)."""
    secret = secrets.token_hex(32)
    secretfile.remove_created(token_path(story, task))      # the previous attempt's, if any
    secretfile.create(token_path(story, task), secret, what="token file")
    return hashlib.sha256(secret.encode()).hexdigest()


def dispatch(story: Story, k: Kernel, task: str, worker: subprocess.Popen,
             imports: str | None = None) -> dict:
    pid, birth = ProcProcessTable().owner(worker.pid)
    r = {"kind": "dispatch", "actor": "daemon", "task": task,
         "key": f"dispatch:{task}:{k.record(task).attempt + 1}",
         "expected-attempt": k.record(task).attempt,
         "owner": {"pid": pid, "birth": birth, "session": f"session-{task}-{pid}"},
         "mint": mint(story, task)}
    if imports:
        r["imports"] = imports
    d = k.handle(r, story.daemon)
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
           story.validator, candidate=t.candidate, verdict=verdict)
    story.say(f"validate {task} candidate {t.candidate[:10]}: {verdict} -> {d['decision']}")
    return d


def converge(story: Story, k: Kernel) -> None:
    report = k.converge(credential=story.daemon)
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
        d = k.handle(r, story.daemon)
        story.say(f"  daemon: {r['kind']} {task} -> {d['decision']}")


def wait_for(predicate, what: str, timeout: float = 30.0) -> None:
    end = time.time() + timeout
    while time.time() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise RuntimeError(f"timed out waiting for {what}")


def story_run(story: Story) -> dict:
    """Tell the whole story on a fresh repository; returns the facts the checks compare."""
    base = init_repository(story.repo, files={"README": "a demo project\n"})
    os.close(os.open(story.db, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))  # owner only
    k = open_kernel(story.db, story.repo)
    k.create_graph("demo", [TaskPolicy(n, deps) for n, deps, _, _ in TASKS])
    story.say(f"repository {story.repo} at {base[:10]}; tasks schema -> api -> ui")
    principals(story, k)
    facts: dict = {"base": base}
    schema_to_done(story, k, facts)
    api_worker_killed(story, k, facts)
    ui_target_moved(story, k, facts)
    facts["final"] = k.project()
    facts["private"] = [story.db, f"{story.db}.worker.credential"] + [
        token_path(story, n) for n, *_ in TASKS]
    facts["checks"] = [c.to_json() for c in check(k, facts)]
    k.close()
    return facts


def principals(story: Story, k: Kernel) -> None:
    """Close the kernel: one credential per principal, the workers' handed over in a 0600 file."""
    story.daemon = k.principals.add("daemon-1", ["daemon", "operator"])
    story.validator = k.principals.add("validator-1", ["validator"])
    out = secretfile.reserve(f"{story.db}.worker.credential", what="credential file")
    out.write(k.principals.add("worker-1", ["worker", "wrapper"]))
    story.say("principals daemon-1 (daemon, operator), validator-1 (validator), worker-1 "
              "(worker, wrapper): the kernel keeps only their hashes; each dispatch hands its "
              "worker the attempt's capability token in a 0600 file")


def refusals(story: Story, k: Kernel, facts: dict) -> None:
    """What the worker's credential and a guessed K cannot do."""
    worker = secretfile.read(f"{story.db}.worker.credential", what="credential file")
    t = k.record("schema")
    posed = tx(k, "schema", "validate", "validator", "posed", worker, candidate=t.candidate,
               verdict="pass")
    forged = k.handle({"kind": "fail", "actor": "worker", "task": "schema", "key": "forged",
                       "cap": cap(k, "schema"), "evidence": "forged"}, worker)
    facts["refusals"] = {"posed": posed, "forged": forged}
    story.say(f"the worker labelling itself validator: {posed['decision']} ({posed.get('code')}); "
              f"its K-request without the attempt's token: {forged['decision']} "
              f"({forged.get('code')})")


def schema_to_done(story: Story, k: Kernel, facts: dict) -> None:
    """schema: the whole transaction to Done."""
    repo: GitRepository = k.env.repository
    w = spawn_worker(story, "schema")
    dispatch(story, k, "schema", w)
    assert w.wait(60) == 0, "the schema worker failed"
    k.cache.sync()
    refusals(story, k, facts)
    finish(story, k, "schema")
    facts["schema"] = k.record("schema").candidate
    story.say(f"schema: {k.status('schema')}, target {repo.target()[:10]}")


def api_worker_killed(story: Story, k: Kernel, facts: dict) -> None:
    """api: the first worker is killed mid-task; convergence and a second attempt."""
    repo: GitRepository = k.env.repository
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
              f"its session may resume until {k.record('api').deadline}, then declare-lost")
    wait_for(lambda: k.env.clock.now() >= k.record("api").deadline, "the deadline")
    converge(story, k)
    retained = k.record("api").retained
    facts["api-retained"] = retained
    story.say(f"api attempt 1: {k.record('api').attempt_state}, work retained as "
              f"{(retained or '-')[:10]}")
    w2 = spawn_worker(story, "api")
    dispatch(story, k, "api", w2, imports=retained)
    assert w2.wait(60) == 0, "the second api worker failed"
    k.cache.sync()
    finish(story, k, "api")
    story.say(f"api: {k.status('api')}, target {repo.target()[:10]}")


def ui_target_moved(story: Story, k: Kernel, facts: dict) -> None:
    """ui: the target moves under the finish; the worker rebases and revises."""
    repo: GitRepository = k.env.repository
    w = spawn_worker(story, "ui")
    dispatch(story, k, "ui", w)
    assert w.wait(60) == 0, "the ui worker failed"
    k.cache.sync()
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
    k.cache.sync()
    story.say(f"ui worker rebased its own work onto {moved[:10]} and revised: version "
              f"{k.record('ui').version}")
    finish(story, k, "ui")
    story.say(f"ui: {k.status('ui')}, target {repo.target()[:10]}")
