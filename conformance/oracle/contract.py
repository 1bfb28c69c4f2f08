"""The environment contract: every real backend held to its in-memory double.

The implementation acts on its environment through two contracts
(``wgk.impl.world.env``): a repository (worktrees, content ids, immutable refs, the
target moved by compare-and-swap, outputs) and a process table (an owner is
``(pid, birth)``; a zombie has exited). The in-memory doubles
(``MemoryRepository``, ``MemoryProcesses``) are what every replayed trace runs on
when a step cannot be staged for real; the real backends (``GitRepository`` on a
fresh git repository, ``ProcProcessTable`` on real child processes) are what an
embedding runs on. Each case below performs the same operations on the double
and on the real backend and states what must hold on both: a real backend that
answers otherwise (a land without its compare-and-swap, a zombie counted as a
live owner) breaks its case, and so does a double that drifted from the contract.
Ancestry (a land never drops a commit) is a case for git alone: the double's
content ids are names without history.
A third, the store, has no double: the kernel's SQLite connection must acknowledge
a commit only once it is on disk (its case reads the settings it runs with, since a
power loss cannot be staged on one machine).

Cases return data (``ContractResult``); nothing here prints.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Callable

from wgk.impl import EnvError, Kernel, MemoryProcesses, MemoryRepository, MemoryWorld
from wgk.impl.world.git import GitRepository, init_repository
from wgk.impl.world.proc import ProcProcessTable


class Breach(AssertionError):
    """What a backend did against its contract."""


@dataclass(frozen=True)
class ContractResult:
    contract: str          # "repository" or "processes"
    case: str
    backend: str           # "memory" or the real backend's name
    world: str             # "memory" or "real"
    ok: bool
    detail: str = ""
    seconds: float = 0.0

    @property
    def name(self) -> str:
        return f"{self.contract}: {self.case} [{self.backend}]"

    def to_json(self) -> dict:
        return {"contract": self.contract, "case": self.case, "backend": self.backend,
                "world": self.world, "ok": self.ok, "detail": self.detail,
                "seconds": round(self.seconds, 4)}


def expect(cond: bool, what: str) -> None:
    if not cond:
        raise Breach(what)


# --- the repository contract -------------------------------------------------------------------


def _worked(repo, wt: str, text: str) -> str:
    """A worktree ``wt`` at the target with ``text`` written into it; its content id."""
    repo.create_worktree(wt, repo.target())
    repo.write(wt, text)
    return repo.observe_worktree(wt).content


def moved_target_refuses_the_land(repo) -> None:
    base = repo.target()
    candidate = _worked(repo, "t/f1", "work-1")
    repo.move_target("moved-1")
    moved = repo.target()
    expect(moved != base, "move-target left the target where it was")
    expect(repo.land("t/land-1", candidate, base) is False,
           "a land from a base the target has left was not refused (no compare-and-swap)")
    expect(repo.target() == moved, "a refused land moved the target")
    expect(not repo.effect_observed("t/land-1"), "a refused land is observed as done")


def land_never_drops_a_commit(repo) -> None:
    old = repo.target()
    candidate = _worked(repo, "t/f1", "work-1")           # built on the old target
    repo.move_target("moved-1")
    moved = repo.target()
    try:
        landed = repo.land("t/land-1", candidate, moved)  # the base is right, the history is not
    except EnvError:
        landed = False
    expect(landed is False, "a candidate that does not descend from its base was landed: "
                            "the moved target's commit is dropped")
    expect(repo.target() == moved, "a refused land moved the target")
    expect(repo.target() != old, "move-target left the target where it was")


def land_from_the_current_target(repo) -> None:
    base = repo.target()
    candidate = _worked(repo, "t/f1", "work-1")
    expect(repo.land("t/land-1", candidate, base) is True, "a land from the current target failed")
    expect(repo.target() == candidate, "the landed target is not the candidate")
    expect(repo.effect_observed("t/land-1"), "a land is not re-observable as its effect")
    expect(not repo.effect_observed("t/land-2"), "an effect never performed is observed")
    expect(repo.land("t/land-3", candidate, base) is False,
           "a second land from the old base was not refused")


def worktree_holds_exactly(repo) -> None:
    start = repo.target()
    repo.create_worktree("t/f1", start)
    view = repo.observe_worktree("t/f1")
    expect(view.present and view.content == start, "a new worktree does not hold its start")
    repo.write("t/f1", "work-1")
    first = repo.observe_worktree("t/f1").content
    expect(first != start, "written bytes are not seen")
    repo.write("t/f1", "work-2")
    expect(repo.observe_worktree("t/f1").content != first, "other bytes have the same id")
    repo.write("t/f1", "work-1")
    expect(repo.observe_worktree("t/f1").content == first, "the same bytes have another id")
    expect(not repo.observe_worktree("t/f2").present, "a worktree never made is present")


def remove_exactly_one_worktree(repo) -> None:
    start = repo.target()
    repo.create_worktree("t/f1", start)
    repo.create_worktree("u/f1", start)
    repo.remove_worktree("t/f1")
    expect(not repo.observe_worktree("t/f1").present, "a removed worktree is still present")
    expect(repo.observe_worktree("u/f1").present, "removing one worktree removed another")
    repo.remove_worktree("t/f1")              # removing what is gone is a no-op


def pins_are_immutable(repo) -> None:
    first = _worked(repo, "t/f1", "work-1")
    repo.write("t/f1", "work-2")
    second = repo.observe_worktree("t/f1").content
    repo.pin("work/t/1", first)
    repo.pin("work/t/1", first)               # the same pin again is a no-op
    try:
        repo.pin("work/t/1", second)
    except EnvError:
        return
    raise Breach("an immutable ref was overwritten")


def output_published_once(repo) -> None:
    candidate = _worked(repo, "t/f1", "work-1")
    target = repo.target()
    repo.output("t/out-1", candidate, "deliver")
    expect(repo.effect_observed("t/out-1"), "a published output is not observed")
    expect(repo.target() == target, "publishing an output moved the target")


REPOSITORY_CASES: dict[str, Callable] = {
    "a moved target refuses the land": moved_target_refuses_the_land,
    "a land from the current target moves it, once": land_from_the_current_target,
    "a worktree holds exactly its bytes": worktree_holds_exactly,
    "removal removes exactly one worktree": remove_exactly_one_worktree,
    "an immutable ref is never overwritten": pins_are_immutable,
    "an output is published without moving the target": output_published_once,
}


#: Cases only a repository with history can answer: the in-memory double's content ids are
#: names without history (the same name may stand for the same bytes on two bases, as the
#: model's abstract content does), so ancestry is held to git alone.
HISTORY_CASES: dict[str, Callable] = {
    "a land never drops a commit of the target": land_never_drops_a_commit,
}


def _memory_repository(tmp: str) -> MemoryRepository:
    return MemoryRepository(initial_target="main-0")


def _git_repository(tmp: str) -> GitRepository:
    path = os.path.join(tmp, "repo")
    init_repository(path)
    return GitRepository(path, worktrees=os.path.join(tmp, "worktrees"))


# --- the process table contract ----------------------------------------------------------------


class Child:
    """A real child process the contract owns (``sleep``-like), reaped on close."""

    def __init__(self, exits: bool = False):
        code = "pass" if exits else "import time; time.sleep(120)"
        self.p = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL)
        self.pid = self.p.pid

    def zombie(self) -> None:
        wait_zombie(self.pid)

    def close(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def wait_zombie(pid: int, timeout: float = 10.0) -> None:
    """Wait until child ``pid`` has exited and is not reaped (state Z in /proc)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc_state(pid) == "Z":
            return
        time.sleep(0.002)
    raise Breach(f"child {pid} never became a zombie")


def proc_state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data[data.rindex(b")") + 2:].split()[0].decode()


class _Staged:
    """The same process operations on a table: a live owner, its death, its zombie."""

    def __init__(self, table, real: bool):
        self.table, self.real, self.children = table, real, []
        self._pid = 4000

    def start(self, exits: bool = False) -> tuple[int, int | None]:
        if not self.real:
            self._pid += 1
            self.table.adopt(self._pid, 100 + self._pid)
            return self._pid, 100 + self._pid
        child = Child(exits)
        self.children.append(child)
        return child.pid, self.table.birth_of(child.pid)

    def exit_unreaped(self, pid: int) -> None:
        if not self.real:
            self.table.kill(pid)                      # the double: an exited owner is gone
            return
        next(c for c in self.children if c.pid == pid).zombie()

    def close(self) -> None:
        for c in self.children:
            c.close()


def live_owner_is_alive(staged: _Staged) -> None:
    pid, birth = staged.start()
    expect(birth is not None, "a live process has no birth")
    expect(staged.table.birth_of(pid) == birth, "a live process's birth changed")
    expect(staged.table.birth_of(pid + 10 ** 7) is None, "a pid nobody holds is alive")


def killed_owner_is_gone(staged: _Staged) -> None:
    pid, birth = staged.start()
    staged.table.kill(pid)
    expect(staged.table.birth_of(pid) is None, "a killed owner is still alive")


def zombie_is_not_alive(staged: _Staged) -> None:
    pid, birth = staged.start(exits=True)
    staged.exit_unreaped(pid)
    expect(staged.table.birth_of(pid) is None, "a zombie (exited, not reaped) counts as a live owner")


PROCESS_CASES: dict[str, Callable] = {
    "a live owner is alive with one birth": live_owner_is_alive,
    "a killed owner is gone": killed_owner_is_gone,
    "a zombie is not alive": zombie_is_not_alive,
}


# --- the store contract ------------------------------------------------------------------------


def commits_reach_the_disk(tmp: str) -> None:
    """A kernel opened with its defaults acknowledges a commit only once the write-ahead log
    is synced (WAL, ``synchronous=FULL`` or stronger): a power loss then keeps every answer
    given. A power loss cannot be staged on one machine, so the contract reads the settings
    the kernel's own connection runs with."""
    kernel = Kernel(os.path.join(tmp, "k.db"), MemoryWorld.create(target="main-0").environment())
    try:
        mode = kernel.conn.execute("PRAGMA journal_mode").fetchone()[0]
        sync = kernel.conn.execute("PRAGMA synchronous").fetchone()[0]
    finally:
        kernel.close()
    expect(str(mode).lower() == "wal", f"the kernel's journal mode is {mode}, not WAL")
    expect(int(sync) >= 2, f"the kernel's synchronous setting is {sync} (FULL is 2): a commit "
                           "is acknowledged before it reaches the disk")


def every_connection_is_durable(tmp: str) -> None:
    """Every connection the kernel opens to its database (the command line's and the
    library's, those that write and those that only read) runs with the durable settings
    (``wgk.conformance.oracle.durability``: read inside a child process, at each commit and
    at each close)."""
    from wgk.conformance.oracle.durability import durability_problems
    problems = durability_problems()
    expect(not problems, problems[0] if problems else "")


STORE_CASES: dict[str, Callable] = {
    "a commit reaches the disk before it is acknowledged": commits_reach_the_disk,
    "every connection the kernel opens commits durably": every_connection_is_durable,
}


# --- running the contract ----------------------------------------------------------------------


def _run(contract: str, case: str, backend: str, world: str, body: Callable[[], None]) -> ContractResult:
    t0 = time.perf_counter()
    try:
        body()
        ok, detail = True, ""
    except Breach as e:
        ok, detail = False, str(e)
    except Exception as e:              # noqa: BLE001 -- a backend that raises breaks its case
        ok, detail = False, f"raised {type(e).__name__}: {e}".splitlines()[0]
    return ContractResult(contract, case, backend, world, ok, detail, time.perf_counter() - t0)


def _repository_case(case: str, fn: Callable, make: Callable, backend: str, world: str):
    def body() -> None:
        with tempfile.TemporaryDirectory(prefix="wgk-contract-") as tmp:
            fn(make(tmp))
    return _run("repository", case, backend, world, body)


def _process_case(case: str, fn: Callable, real: bool) -> ContractResult:
    def body() -> None:
        staged = _Staged(ProcProcessTable() if real else MemoryProcesses(), real)
        try:
            fn(staged)
        finally:
            staged.close()
    return _run("processes", case, "proc" if real else "memory", "real" if real else "memory", body)


def _store_case(case: str, fn: Callable) -> ContractResult:
    def body() -> None:
        with tempfile.TemporaryDirectory(prefix="wgk-contract-") as tmp:
            fn(tmp)
    return _run("store", case, "sqlite", "real", body)


def contract_results(progress: Callable[[str], None] | None = None,
                     dsn: str | None = None) -> list[ContractResult]:
    """Every case on the double and on the real backend: one result each (``dsn``: the
    store's durability on that PostgreSQL database too)."""
    out: list[ContractResult] = []
    for case, fn in REPOSITORY_CASES.items():
        for make, backend, world in ((_memory_repository, "memory", "memory"),
                                     (_git_repository, "git", "real")):
            out.append(_repository_case(case, fn, make, backend, world))
            if progress:
                progress(out[-1].name)
    for case, fn in HISTORY_CASES.items():
        out.append(_repository_case(case, fn, _git_repository, "git", "real"))
        if progress:
            progress(out[-1].name)
    for case, fn in PROCESS_CASES.items():
        for real in (False, True):
            out.append(_process_case(case, fn, real))
            if progress:
                progress(out[-1].name)
    for case, fn in STORE_CASES.items():
        out.append(_store_case(case, fn))
        if progress:
            progress(out[-1].name)
    if dsn is not None:
        out.append(_run("store", "every connection the kernel opens commits durably",
                        "postgresql", "real", lambda: _durable_on(dsn)))
        if progress:
            progress(out[-1].name)
    return out


def _durable_on(dsn: str) -> None:
    from wgk.conformance.oracle.durability import durability_problems
    problems = durability_problems(dsn)
    expect(not problems, problems[0] if problems else "")
