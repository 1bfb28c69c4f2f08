"""Hostile inputs on real files: what a local attacker or a careless caller leaves in the
kernel's way, and what the kernel must do about it.

Each check runs in one child process (the gate's own working directory, umask and
streams are never touched), on a fresh git repository and kernel database made with the
kernel's command line as a user would (``init``, ``task add``):

- ``worktree through a planted symlink``: a symlink planted where the worktree of a
  dispatch goes (``<worktrees>/b/f1`` pointing outside): the dispatch fails in one line,
  nothing is recorded and nothing is made outside (real git, local file system);
- ``token file planted``: a file, and a symlink, already at the ``--token-file`` path of a
  dispatch: exit 2 in one line, the planted file unchanged, nothing decided (local file
  system, the kernel's command line);
- ``credential file planted``: the same at ``principal add --out``: no principal added;
- ``credential file open to others``: a credential file group or others may read is
  refused (exit 2, one line naming its mode) unless ``--insecure-credential-file``;
- ``bad credentials``: credentials with lone surrogates, NUL, bytes, a megabyte, no dot
  are each answered not-authenticated, never raised, and journal nothing (the library, on
  SQLite or on the PostgreSQL backend).

The file checks read and plant files on the local file system: they cannot run over the
external protocol. A check's problems are one line each; none means it holds.
"""
from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile

CHECKS = ("worktree through a planted symlink", "token file planted",
          "credential file planted", "credential file open to others", "bad credentials")
WORLDS = {"worktree through a planted symlink": "real git repository, local file system",
          "token file planted": "local file system, the kernel's command line",
          "credential file planted": "local file system, the kernel's command line",
          "credential file open to others": "local file system, the kernel's command line",
          "bad credentials": "the library, in-memory world"}

_CHILD = r'''
import contextlib, io, json, os, stat, subprocess, sys
from wgk.conformance.cli.main import main
root, dsn = sys.argv[1], (sys.argv[2] or None)
os.chdir(root)
env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
           GIT_COMMITTER_EMAIL="t@t")
for cmd in (["init", "-q", "-b", "main", "repo"], ["-C", "repo", "commit", "-q", "--allow-empty", "-m", "start"]):
    subprocess.run(["git", *cmd], check=True, env=env, capture_output=True)
db = os.path.join(root, "k.db")
cred = db + ".credential"
problems = {}

def cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["kernel", "--db", db, "--credential", cred, *argv])
        except SystemExit as e:
            code = e.code
        except BaseException as e:
            code, err = "raised", io.StringIO(f"{type(e).__name__}: {e}")
    return code, out.getvalue(), err.getvalue()

def state():
    import sqlite3
    c = sqlite3.connect(db)
    try:
        return tuple(c.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                     for t in ("ledger", "journal", "principals", "attempts"))
    finally:
        c.close()

def one_line(name, what, code, err, want):
    bad = problems.setdefault(name, [])
    if code != want:
        bad.append(f"{what}: exit {code}, not {want} ({err.strip()[:160]})")
    elif err.count("\n") != 1:
        bad.append(f"{what}: the error is {err.count(chr(10))} lines, not one ({err.strip()[:160]})")

setup = [cli("init", "--graph", "g", "--repo", "repo", "--target", "refs/heads/main"),
         cli("task", "add", "a"), cli("task", "add", "b")]
if any(c for c, _, _ in setup):
    print(json.dumps({"setup": [e.strip()[:200] for c, _, e in setup if c]}))
    raise SystemExit(0)
pid = str(os.getpid())

# a file and a symlink planted where the token file goes
name = "token file planted"
planted = os.path.join(root, "planted.token")
with open(planted, "w") as f:
    f.write("the planter's token\n")
os.chmod(planted, 0o600)
os.symlink(os.path.join(root, "elsewhere"), os.path.join(root, "dangling.token"))
os.symlink(planted, os.path.join(root, "linked.token"))
before = state()
for path in (planted, os.path.join(root, "dangling.token"), os.path.join(root, "linked.token")):
    code, out, err = cli("dispatch", "a", "--pid", pid, "--session", "s1", "--token-file", path)
    one_line(name, f"dispatch --token-file {os.path.basename(path)}", code, err, 2)
if open(planted).read() != "the planter's token\n":
    problems[name].append("the planted token file was written through")
if os.path.lexists(os.path.join(root, "elsewhere")):
    problems[name].append("a file was made through the planted symlink")
if state() != before:
    problems[name].append(f"the database changed: {before} -> {state()}")

# a file and a symlink planted where a credential file goes
name = "credential file planted"
mine = os.path.join(root, "w.credential")
with open(mine, "w") as f:
    f.write("mine\n")
os.symlink(os.path.join(root, "nowhere"), os.path.join(root, "link.credential"))
before = state()
for path in (mine, os.path.join(root, "link.credential")):
    code, out, err = cli("principal", "add", "w", "--role", "worker", "--out", path)
    one_line(name, f"principal add --out {os.path.basename(path)}", code, err, 2)
if open(mine).read() != "mine\n":
    problems[name].append("the planted credential file was written through")
if os.path.lexists(os.path.join(root, "nowhere")):
    problems[name].append("a file was made through the planted symlink")
if state() != before:
    problems[name].append(f"a principal was added whose credential nobody holds: {before} -> {state()}")

# the operator's credential file opened to others
name = "credential file open to others"
problems[name] = []
for mode in (0o640, 0o604, 0o620, 0o601):
    os.chmod(cred, mode)
    code, out, err = cli("status")
    one_line(name, f"a credential file of mode {mode:04o}", code, err, 2)
    if code == 2 and f"{mode:04o}" not in err:
        problems[name].append(f"mode {mode:04o}: the error does not name the mode ({err.strip()[:120]})")
    code, out, err = cli("--insecure-credential-file", "status")
    if code != 0:
        problems[name].append(f"mode {mode:04o} with --insecure-credential-file: exit {code} ({err.strip()[:120]})")
os.chmod(cred, 0o600)

# a symlink planted where the dispatch's worktree goes
name = "worktree through a planted symlink"
outside = os.path.join(root, "outside")
os.mkdir(outside)
os.makedirs(os.path.join(root, "repo-worktrees", "b"))
os.symlink(outside, os.path.join(root, "repo-worktrees", "b", "f1"))
before = state()
code, out, err = cli("dispatch", "b", "--pid", pid, "--session", "s1", "--token-file",
                     os.path.join(root, "b.token"))
problems[name] = []
if code == 0 or code == "raised":
    problems[name].append(f"dispatch through the symlink: exit {code} ({(out or err).strip()[:160]})")
elif err.count("\n") != 1 or "symlink" not in err:
    problems[name].append(f"dispatch through the symlink: not one line naming the symlink ({err.strip()[:160]})")
if os.listdir(outside):
    problems[name].append(f"made outside the worktrees root: {sorted(os.listdir(outside))[:3]}")
if state()[3] != before[3]:
    problems[name].append("an attempt was recorded on a worktree made through the symlink")

# credentials no principal holds, of every hostile shape
name = "bad credentials"
problems[name] = []
from wgk.impl import Kernel, MemoryWorld, Pragmas, TaskPolicy
k = Kernel(dsn or os.path.join(root, "lib.db"), MemoryWorld.create(target="main-0").environment(),
           pragmas=Pragmas(synchronous="OFF"))
try:
    k.create_graph("g", [TaskPolicy("a")])
    good = k.principals.add("operator", ["operator", "daemon"])
    reset = {"kind": "reset", "actor": "operator", "task": "a", "key": "r1", "expected-generation": 0}
    bad = ["\ud800", "operator.\ud800", "\udcff.x", "operator\ud800.secret", b"operator.x", 7,
           ["operator.x"], "", "operator", "operator\x00.x", "operator.\x00", "\x00", ".x",
           "operator.", "a.b.c.d", "x" * 5000 + "." + "y" * 5000, "operator." + "z" * 10 ** 6,
           good + "\ud800", good.replace(".", ".\ud800", 1), good.replace(".", "\x00.", 1)]
    head = (k.ledger_head(), sorted(k.project(tasks=False)["journal"]))
    for credential in bad:
        shown = repr(credential)[:30]
        try:
            got = [k.handle(reset, credential), k.handle_batch([reset, {**reset, "key": "r2"}], credential)]
        except Exception as e:
            problems[name].append(f"credential {shown}: raised {type(e).__name__}: {str(e)[:80]}")
            continue
        if got != [{"decision": "rejected", "code": "not-authenticated"}, [{"decision": "rejected", "code": "not-authenticated"}] * 2]:
            problems[name].append(f"credential {shown}: answered {str(got)[:120]}")
        if (k.ledger_head(), sorted(k.project(tasks=False)["journal"])) != head:
            problems[name].append(f"credential {shown}: journaled or decided something")
    if k.handle(reset, good).get("decision") != "applied":
        problems[name].append("the good credential is no longer answered")
finally:
    k.close()
print(json.dumps({"problems": problems}))
'''


def hostile_problems(dsn: str | None = None) -> dict[str, list[str]]:
    """Each check of ``CHECKS`` -> its problems (empty: it holds); ``dsn``: the bad
    credentials are sent to a kernel on that PostgreSQL database (a fresh schema)."""
    from wgk.conformance.oracle.races import fresh_database
    with tempfile.TemporaryDirectory(prefix="wgk-hostile-") as root:
        with (fresh_database(dsn) if dsn else contextlib.nullcontext()) as where:
            p = subprocess.run([sys.executable, "-c", _CHILD, root, where or ""],
                               capture_output=True, text=True, timeout=300)
    if p.returncode != 0 or not p.stdout.strip():
        last = (p.stderr.strip().splitlines() or ["no output"])[-1]
        return {c: [f"the child exited {p.returncode}: {last}"] for c in CHECKS}
    got = json.loads(p.stdout.strip().splitlines()[-1])
    if "setup" in got:
        return {c: [f"setting up: {got['setup'][0]}"] for c in CHECKS}
    return {c: got["problems"].get(c, [f"{c}: not run"]) for c in CHECKS}


__all__ = ["CHECKS", "WORLDS", "hostile_problems"]
