"""The environment contract's durability: every connection the kernel opens to its
database commits durably, not only the one a library caller sees.

One child process (so nothing is patched in the gate's own) wraps ``sqlite3.connect`` so
that each connection the kernel opens records, at each of its ``COMMIT``s, the database
it is on and the settings it commits with (``PRAGMA synchronous`` and
``journal_mode``), and once more when it is closed (or at the end). It then uses the kernel as its users do: the command line (``init``,
``principal add``, ``task add``, ``dispatch``, ``status``, ``converge``, ``audit``,
``verify-ledger``, ``anchor``) on a fresh git repository, and the library (``Kernel``) as
an embedding program. Every connection to the kernel's own database files, whether it
commits or only reads, must run in WAL mode with ``synchronous`` FULL or stronger; scratch databases (a rebuild's copy in a
temporary folder or in memory) are thrown away and are not held to it.

It reads SQLite's settings inside the kernel's process: it does not apply to PostgreSQL
(there each connection sets ``synchronous_commit``) nor over the external protocol.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile

_CHILD = r'''
import contextlib, io, json, os, sqlite3, subprocess, sys
root = sys.argv[1]
LOG, OPENED = [], []
_connect = sqlite3.connect

class Recording(sqlite3.Connection):
    def settings(self, when):
        sync = sqlite3.Connection.execute(self, "PRAGMA synchronous").fetchone()[0]
        mode = sqlite3.Connection.execute(self, "PRAGMA journal_mode").fetchone()[0]
        LOG.append({"db": self.where, "connection": self.number, "via": self.via, "when": when,
                    "synchronous": sync, "journal": str(mode).lower()})

    def execute(self, sql, *args):
        if isinstance(sql, str) and sql.strip().upper() in ("COMMIT", "END"):
            self.settings("commit")
        return sqlite3.Connection.execute(self, sql, *args)

    def close(self):
        if not self.done:
            self.done = True
            self.settings("close")
        return sqlite3.Connection.close(self)

def connect(database, *args, **kw):
    kw.setdefault("factory", Recording)
    conn = _connect(database, *args, **kw)
    if isinstance(conn, Recording):
        conn.where, conn.number, conn.via, conn.done = str(database), len(OPENED), STEP[0], False
        OPENED.append(conn)
    return conn

sqlite3.connect = connect
STEP = ["setup"]
dsn = sys.argv[2] or None
if dsn:                                   # PostgreSQL: each connection's synchronous_commit
    import psycopg
    _close = psycopg.Connection.close

    def close(self):
        if getattr(self, "wgk_number", None) is not None and not self.closed:
            value = self.execute("SHOW synchronous_commit").fetchone()[0]
            LOG.append({"db": "postgresql", "connection": self.wgk_number, "via": self.wgk_via,
                        "when": "close", "synchronous_commit": value})
            self.wgk_number = None
        return _close(self)

    _pg_connect = psycopg.Connection.connect.__func__

    def pg_connect(cls, *args, **kw):
        conn = _pg_connect(cls, *args, **kw)
        conn.wgk_number, conn.wgk_via = len(OPENED), STEP[0]
        OPENED.append(conn)
        return conn
    psycopg.Connection.close = close
    psycopg.Connection.connect = classmethod(pg_connect)
    psycopg.connect = psycopg.Connection.connect
from wgk.conformance.cli.main import main
env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
           GIT_COMMITTER_EMAIL="t@t")
for cmd in (["init", "-q", "-b", "main", "repo"], ["-C", "repo", "commit", "-q", "--allow-empty", "-m", "start"]):
    subprocess.run(["git", *cmd], check=True, env=env, capture_output=True, cwd=root)
db = dsn or os.path.join(root, "k.db")
cred = os.path.join(root, "k.db.credential")
codes = {}
steps = [["init", "--graph", "g", "--repo", os.path.join(root, "repo"), "--target", "refs/heads/main"]
         + (["--credential-out", cred] if dsn else []),
         ["principal", "add", "w", "--role", "worker", "--out", os.path.join(root, "w.credential")],
         ["task", "add", "a"], ["task", "add", "b", "--after", "a"],
         ["dispatch", "a", "--pid", str(os.getpid()), "--session", "s1", "--token-file",
          os.path.join(root, "a.token")],
         ["status"], ["converge"], ["audit"], ["verify-ledger"], ["anchor", os.path.join(root, "k.anchors")]]
for argv in steps:
    STEP[0] = "wgk kernel " + argv[0] + (" " + argv[1] if argv[0] in ("task", "principal") else "")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            codes[STEP[0]] = main(["kernel", "--db", db, "--credential", cred, *argv])
        except SystemExit as e:
            codes[STEP[0]] = e.code
STEP[0] = "the library (Kernel)"
from wgk.impl import Kernel, MemoryWorld, TaskPolicy
k = Kernel(os.path.join(root, "lib.db"), MemoryWorld.create(target="main-0").environment())
try:
    k.create_graph("g" if not dsn else "g2", [TaskPolicy("a")])
    k.handle({"kind": "reset", "actor": "operator", "task": "a", "key": "r1", "expected-generation": 0})
finally:
    k.close()
for conn in OPENED:                       # still open at the end: read them now
    if isinstance(conn, Recording):
        if not conn.done:
            conn.done = True
            conn.settings("end")
    elif conn.wgk_number is not None and not conn.closed:
        conn.close()
print(json.dumps({"codes": codes, "settings": LOG,
                  "opened": [(getattr(c, "where", "postgresql"), getattr(c, "via", None) or
                              getattr(c, "wgk_via", None)) for c in OPENED]}))
'''

#: The kernel's own database files (anything else it opens is a scratch copy).
OWN = ("k.db", "lib.db")


def durability(root: str | None = None, dsn: str | None = None) -> dict:
    """{"codes": step -> exit code, "settings": one row per COMMIT of every connection and
    one at its close (or at the end, if it is still open), "opened": (database, step) per
    connection}; {"error": ...} when the child fails."""
    with tempfile.TemporaryDirectory(prefix="wgk-durability-") as tmp:
        p = subprocess.run([sys.executable, "-c", _CHILD, root or tmp, dsn or ""],
                           capture_output=True, text=True, timeout=300)
    if p.returncode != 0 or not p.stdout.strip():
        last = (p.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"the child exited {p.returncode}: {last}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def durability_problems(dsn: str | None = None) -> list[str]:
    """One line per connection to the kernel's own database whose settings are not durable
    at a commit or at its end (or per step that failed); empty when every connection runs
    in WAL mode with synchronous FULL or stronger. ``dsn``: the command line runs on that
    PostgreSQL database (a fresh schema), whose every connection must commit with
    ``synchronous_commit`` on."""
    import os
    if dsn is not None:
        from wgk.conformance.oracle.races import fresh_database
        with fresh_database(dsn) as where:
            got = durability(dsn=where)
    else:
        got = durability()
    if "error" in got:
        return [got["error"]]
    out = [f"{step}: exit {code}" for step, code in got["codes"].items() if code]
    pg_rows = [c for c in got["settings"] if c["db"] == "postgresql"]
    if dsn is not None:
        if len({c["connection"] for c in pg_rows}) < len(got["codes"]):
            out.append(f"only {len({c['connection'] for c in pg_rows})} PostgreSQL connections "
                       f"in {len(got['codes'])} commands: its connections were not observed")
        out += [f"{c['via']}: a PostgreSQL connection runs with synchronous_commit "
                f"{c['synchronous_commit']} (on wanted): a commit is acknowledged before it "
                "reaches the disk" for c in pg_rows if c["synchronous_commit"] not in
                ("on", "remote_apply", "remote_write")]
    own = [c for c in got["settings"] if os.path.basename(c["db"]) in OWN]
    uses = len(got["codes"]) + 1 if dsn is None else 1     # (on PostgreSQL: the library's)
    connections = {c["connection"] for c in own}
    if len(connections) < uses:
        out.append(f"only {len(connections)} connections to the kernel's databases in {uses} "
                   "uses of the kernel: its connections were not observed")
    bad = {}
    for c in own:
        if c["journal"] != "wal" or int(c["synchronous"]) < 2:
            bad.setdefault(c["connection"], c)
    for c in bad.values():
        out.append(f"{c['via']}: a connection to {os.path.basename(c['db'])} runs with journal "
                   f"mode {c['journal']} and synchronous {c['synchronous']} at its {c['when']} "
                   "(WAL and FULL, 2, wanted): a commit is acknowledged before it reaches the disk")
    return out


__all__ = ["durability", "durability_problems"]
