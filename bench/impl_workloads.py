"""The workloads bench/bench_impl.py (and bench/bench_pg.py) measure: a raw SQLite
commit-per-row loop with the kernel's pragmas, and the kernel driven by heartbeats (one per
commit, or grouped), by whole completion transactions, or completing one task of a graph.
"""
from __future__ import annotations

import hashlib
import sqlite3
import time

import wgk.impl
from wgk.impl.protocol.world_steps import apply_env
from wgk.impl import Kernel, MemoryWorld, Pragmas, TaskPolicy

#: What the workloads time with (``impl_against`` measures CPU time with ``time.thread_time``).
CLOCK = {"now": time.perf_counter}
OWNER = {"pid": 4001, "birth": 911, "session": "s1"}
#: The capability token each dispatch mints (its sha256 is sent as ``mint``); the attempt's
#: own process (worker, wrapper) presents it.
TOKEN = "bench-token"
MINT = hashlib.sha256(TOKEN.encode()).hexdigest()
BEARERS = ("worker", "wrapper", "broker")


# --- the raw baseline ------------------------------------------------------------------------


class Raw:
    """One row per committed transaction, with the kernel's pragmas."""

    def __init__(self, path: str, pragmas: Pragmas):
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute(f"PRAGMA busy_timeout = {pragmas.busy_timeout_ms}")
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute(f"PRAGMA synchronous = {pragmas.synchronous}")
        self.conn.execute("CREATE TABLE IF NOT EXISTS row (key TEXT PRIMARY KEY, body TEXT)")
        self.n = 0

    def run(self, count: int) -> float:
        c = self.conn
        start = CLOCK["now"]()
        for _ in range(count):
            self.n += 1
            c.execute("BEGIN IMMEDIATE")
            c.execute("INSERT INTO row VALUES (?, ?)", (f"row-{self.n}", "x" * 200))
            c.execute("COMMIT")
        return CLOCK["now"]() - start


class RawRows(Raw):
    """The rows one request writes, written by hand in one committed transaction each: the
    journal looked up, a hash-linked ledger row, the journal row and, for a heartbeat, its
    evidence row; for a completion step, the record's rows (its transaction with its stamp, a
    receipt). No parsing, no decision: what a request costs beyond it is the kernel's."""

    def __init__(self, path: str, pragmas: Pragmas, shape: str):
        super().__init__(path, pragmas)
        self.shape = shape
        self.conn.executescript(
            "CREATE TABLE IF NOT EXISTS ledger (seq INTEGER PRIMARY KEY, prev TEXT, hash TEXT, "
            "event TEXT, task TEXT, key TEXT, body TEXT);"
            "CREATE TABLE IF NOT EXISTS journal (key TEXT PRIMARY KEY, digest TEXT, response TEXT, "
            "seq INTEGER) WITHOUT ROWID;"
            "CREATE TABLE IF NOT EXISTS evidence (task INTEGER, kind TEXT, ident TEXT, counted "
            "INTEGER, seq INTEGER, PRIMARY KEY (task, kind, ident)) WITHOUT ROWID;"
            "CREATE TABLE IF NOT EXISTS transactions (task INTEGER PRIMARY KEY, phase TEXT, "
            "revision INTEGER, stamp INTEGER);"
            "CREATE TABLE IF NOT EXISTS receipts (task INTEGER, kind TEXT, fence INTEGER, "
            "candidate TEXT, base TEXT, PRIMARY KEY (task, kind)) WITHOUT ROWID;"
            "INSERT OR IGNORE INTO transactions VALUES (1, 'absent', 0, 0);")
        self.prev = "0" * 64

    def run(self, count: int) -> float:
        c, sha = self.conn, hashlib.sha256
        body = '{"request":{"kind":"heartbeat","task":"t1"},"response":{"decision":"evidence-only"}}'
        start = CLOCK["now"]()
        for _ in range(count):
            self.n += 1
            key = f"k{self.n}"
            c.execute("SELECT digest, response FROM journal WHERE key = ?", (key,)).fetchone()
            c.execute("BEGIN IMMEDIATE")
            digest = sha(f"{self.prev}\n{self.n}\nrequest\nt1\n{key}\n{body}".encode()).hexdigest()
            c.execute("INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?, ?)",
                      (self.n, self.prev, digest, "request", "t1", key, body))
            self.prev = digest
            c.execute("INSERT INTO journal VALUES (?, ?, ?, ?)", (key, digest, '{"decision":"applied"}', self.n))
            if self.shape == "heartbeat":
                c.execute("INSERT OR IGNORE INTO evidence VALUES (1, 'heartbeat', ?, 0, ?)",
                          (key, self.n))
            else:
                c.execute("UPDATE transactions SET stamp = stamp + 1 WHERE task = 1 AND stamp = ?",
                          (self.n - 1,))
                c.execute("UPDATE transactions SET phase = ?, revision = ? WHERE task = 1",
                          (f"p{self.n % 13}", self.n))
                c.execute("INSERT OR REPLACE INTO receipts VALUES (1, ?, 1, 'c', 'b')",
                          (f"r{self.n % 5}",))
            c.execute("COMMIT")
        return CLOCK["now"]() - start


# --- kernel workloads ---------------------------------------------------------------------------


def cap(task: str, fence: int = 1) -> dict:
    return {"graph": "g", "task": task, "generation": 0, "attempt": 1, "fence": fence,
            "lease-epoch": fence}


def completion_script(base: str, task: str, disposition: str = "land") -> list:
    """The 13 requests of one completion from ``base`` (and the worktree edit before the
    first edge)."""
    work = f"work-{task}"

    def edge(n, kind, actor, phase, **kw):
        if actor in BEARERS:
            kw["token"] = TOKEN
        return {"kind": kind, "actor": actor, "task": task, "key": f"{kind}:{task}",
                "cap": cap(task), "expected-phase": phase, "expected-revision": n, **kw}
    return [
        {"kind": "dispatch", "actor": "daemon", "task": task, "key": f"dispatch:{task}",
         "expected-attempt": 0, "owner": OWNER, "mint": MINT},
        ("edit", task, work),
        edge(0, "submit", "worker", "absent"),
        edge(1, "quiesce", "wrapper", "prepared"),
        edge(2, "save-work", "wrapper", "quiescing", candidate=work, base=base),
        edge(3, "seal-candidate", "daemon", "work-saved", candidate=work),
        edge(4, "validate", "validator", "candidate-sealed", candidate=work, verdict="pass"),
        edge(5, "accept", "daemon", "validated", candidate=work, verdict="not-required"),
        edge(6, "record-disposition", "wrapper", "accepted", disposition=disposition),
        edge(7, "prepare-effect", "promoter", "disposition-recorded"),
        edge(8, "commit-effect", "promoter", "effect-prepared", candidate=work, base=base),
        edge(9, "prepare-cleanup", "cleanup", "effect-committed"),
        edge(10, "commit-cleanup", "cleanup", "cleanup-prepared"),
        edge(11, "save-graph", "daemon", "cleanup-committed"),
    ]


class Heartbeats:
    """Evidence-only heartbeats with fresh evidence ids on 8 running attempts."""

    name = "heartbeats (evidence-only)"

    def __init__(self, path: str, pragmas: Pragmas, impl=wgk.impl):
        """``impl``: the implementation's package (another revision's: ``impl_against``)."""
        self.world = impl.MemoryWorld.create(target="main-0")
        self.kernel = impl.Kernel(path, self.world.environment(),
                                  pragmas=impl.Pragmas(pragmas.synchronous, pragmas.busy_timeout_ms))
        self.kernel.create_graph("g", [impl.TaskPolicy(f"t{i}") for i in range(8)])
        for i in range(8):
            self.kernel.handle({"kind": "dispatch", "actor": "daemon", "task": f"t{i}",
                                "key": f"d{i}", "expected-attempt": 0, "owner": OWNER, "mint": MINT})
        self.n = 0
        self.sent: list[dict] = []

    def requests(self, count: int) -> list[dict]:
        out = []
        for _ in range(count):
            self.n += 1
            task = f"t{self.n % 8}"
            out.append({"kind": "heartbeat", "actor": "worker", "task": task, "key": f"hb{self.n}",
                        "cap": cap(task), "evidence": f"beat-{self.n}", "token": TOKEN})
        return out

    def run(self, count: int) -> float:
        batch = self.requests(count)
        start = CLOCK["now"]()
        answers = [self.kernel.handle(r) for r in batch]
        elapsed = CLOCK["now"]() - start
        assert all(a["decision"] == "evidence-only" for a in answers), answers[0]
        self.sent += batch
        return elapsed


class GroupedHeartbeats(Heartbeats):
    """The same heartbeats from 8 workers, 16 at a time through ``handle_batch`` (group
    commit: one commit makes a batch durable; no answer leaves before it)."""

    name = "heartbeats, group commit of 16"
    group = 16

    def run(self, count: int) -> float:
        batch = self.requests(count)
        start = CLOCK["now"]()
        answers = []
        for i in range(0, len(batch), self.group):
            answers += self.kernel.handle_batch(batch[i:i + self.group])
        elapsed = CLOCK["now"]() - start
        assert all(a["decision"] == "evidence-only" for a in answers), answers[0]
        self.sent += batch
        return elapsed


class Completions:
    """The whole SaveTransaction: dispatch and 12 edges per task, 13 accepted requests."""

    name = "completion transaction (13 kinds)"

    def __init__(self, path: str, pragmas: Pragmas, impl=wgk.impl):
        self.policy = impl.TaskPolicy
        self.world = impl.MemoryWorld.create(target="main-0")
        self.kernel = impl.Kernel(path, self.world.environment(),
                                  pragmas=impl.Pragmas(pragmas.synchronous, pragmas.busy_timeout_ms))
        self.kernel.create_graph("g", [])
        self.tasks = 0
        self.pending: list[dict] = []

    def _script(self, task: str) -> list:
        return completion_script(self.world.repository.target(), task)

    def run(self, count: int) -> float:
        k, elapsed, done = self.kernel, 0.0, 0
        while done < count:
            if not self.pending:
                self.tasks += 1
                task = f"c{self.tasks}"
                k.add_tasks([self.policy(task)])                # graph edits are not timed
                self.pending = self._script(task)
            step = self.pending.pop(0)
            if isinstance(step, tuple):
                apply_env(k, {"env": "edit", "task": step[1], "content": step[2]})
                continue
            start = CLOCK["now"]()
            d = k.handle(step)
            elapsed += CLOCK["now"]() - start
            assert d["decision"] == "applied", (step, d)
            done += 1
        return elapsed


def complete(k: Kernel, world: MemoryWorld, task: str) -> None:
    c = cap(task)
    base = world.repository.target()
    k.handle({"kind": "dispatch", "actor": "daemon", "task": task, "key": f"d:{task}",
              "expected-attempt": 0, "owner": OWNER, "mint": MINT})
    apply_env(k, {"env": "edit", "task": task, "content": f"w-{task}"})
    for n, (kind, actor, phase, kw) in enumerate([
            ("submit", "worker", "absent", {}), ("quiesce", "wrapper", "prepared", {}),
            ("save-work", "wrapper", "quiescing", {"candidate": f"w-{task}", "base": base}),
            ("seal-candidate", "daemon", "work-saved", {"candidate": f"w-{task}"}),
            ("validate", "validator", "candidate-sealed", {"candidate": f"w-{task}", "verdict": "pass"}),
            ("accept", "daemon", "validated", {"candidate": f"w-{task}", "verdict": "not-required"}),
            ("record-disposition", "wrapper", "accepted", {"disposition": "report"}),
            ("prepare-effect", "promoter", "disposition-recorded", {}),
            ("commit-effect", "promoter", "effect-prepared", {"candidate": f"w-{task}", "base": base}),
            ("prepare-cleanup", "cleanup", "effect-committed", {}),
            ("commit-cleanup", "cleanup", "cleanup-prepared", {}),
            ("save-graph", "daemon", "cleanup-committed", {})]):
        if actor in BEARERS:
            kw = dict(kw, token=TOKEN)
        d = k.handle({"kind": kind, "actor": actor, "task": task, "key": f"{kind}:{task}",
                      "cap": c, "expected-phase": phase, "expected-revision": n, **kw})
        assert d["decision"] == "applied", (task, kind, d)
