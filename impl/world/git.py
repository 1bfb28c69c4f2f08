"""The repository backend on a real git repository, through the ``git`` CLI.

Every call is an argument list (never a shell). The design:

- **Worktrees.** One per attempt, ``git worktree add --detach`` at the start
  commit, under ``<worktrees>/<task>/f<fence>``. Workers edit and commit there.
- **Content ids.** The exact bytes of a worktree are named by a commit oid: the
  worktree's HEAD when the tree is clean (nothing modified, deleted or
  untracked), else a *snapshot commit* whose tree is every tracked,
  modified and untracked file (deletions applied; ``.gitignore``d files are not
  work, see below) and whose parent is HEAD. The snapshot is built in a temporary index
  (``read-tree HEAD``, ``add -A``, ``write-tree``, ``commit-tree``) with a fixed
  identity and date, so the same bytes always give the same oid and observing
  never touches the worker's index or files.
- **WorkSave and retained work** are immutable refs under ``refs/wgk/``,
  created once with ``update-ref <ref> <oid> <zero-oid>``; a clean tree is
  saved too (the ref names its HEAD).
- **Land** is ``git update-ref -m "wgk-effect <id>" <target> <candidate>
  <expected-base>``: a real compare-and-swap, only after ``merge-base
  --is-ancestor <base> <candidate>`` (the target moves only forward). A moved target fails the CAS and
  nothing is rebased or forced. The reflog message makes the effect
  re-observable after a crash between the ref update and the kernel's commit.
- **Deliver / report** publish ``refs/wgk/outputs/<id>`` once.
- **Cleanup** removes exactly the planned worktree (``git worktree remove``)
  and proves it: the directory is gone and git no longer lists it. It never
  removes a directory git does not list as that worktree, one that holds another
  worktree, or ignored files whose bytes no ref keeps.
- **Ignored files** are not work (a content id never names them), but they are
  never deleted unsaved: WorkSave pins every byte of the worktree, ignored files
  included, under ``refs/wgk/ignored/<task>/f<fence>-v<version>`` when there are
  any, and cleanup refuses a worktree whose ignored bytes no ref holds.
- **Names** become refs and paths by ``derived``: the task is one component
  (``safe``-escaped), so refs and worktree paths are injective and disjoint.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile

from .env import EnvError, WorktreeView

SNAPSHOT_IDENTITY = {
    "GIT_AUTHOR_NAME": "wgk", "GIT_AUTHOR_EMAIL": "wgk@localhost",
    "GIT_COMMITTER_NAME": "wgk", "GIT_COMMITTER_EMAIL": "wgk@localhost",
    "GIT_AUTHOR_DATE": "1970-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "1970-01-01T00:00:00Z",
}
#: Whoever moves the target in the environment (``move_target``): a fixed identity, so a
#: machine with no git identity configured moves it too.
OTHER_IDENTITY = {"GIT_AUTHOR_NAME": "someone-else", "GIT_AUTHOR_EMAIL": "someone-else@localhost",
                  "GIT_COMMITTER_NAME": "someone-else",
                  "GIT_COMMITTER_EMAIL": "someone-else@localhost"}
_UNSAFE = re.compile(r"[^A-Za-z0-9_\-]")


def safe(component: str) -> str:
    """A name usable as one ref component and one directory name: every character outside
    ``A-Za-z0-9_-`` (``/``, ``.`` and ``%`` included) becomes ``%`` and the hex of its UTF-8
    bytes (prefix-free, so two different names never give the same component) and no
    component holds a ``/``."""
    return _UNSAFE.sub(lambda m: "%" + "".join(f"{b:02X}" for b in m.group().encode(
        "utf-8", "surrogatepass")), component)


def derived(name: str, *, kind: bool) -> list[str]:
    """The components of a kernel name: ``[kind,] task, leaf``, each made ``safe``.

    The task is always exactly one component, whatever it holds (a database made before
    the name grammar may hold a task ``a/f1``): every worktree is ``<task>/f<fence>``
    directly under the worktrees directory and every ref ``<kind>/<task>/<leaf>`` under
    the namespace, so no worktree lies inside another's and no ref is a prefix of
    another's (names never alias, BRIEF §9)."""
    head, rest = name.partition("/")[::2] if kind else ("", name)
    task, _, leaf = rest.rpartition("/")
    if not task or not leaf or (kind and not head):
        raise GitError(f"{name!r} is not a kernel name ({'<kind>/' if kind else ''}<task>/<leaf>)")
    # guards: retained-work-never-erased
    return ([safe(head)] if kind else []) + [safe(task), safe(leaf)]


class GitError(EnvError):
    pass


class GitRepository:
    def __init__(self, repo: str, *, target: str = "refs/heads/main",
                 worktrees: str | None = None, namespace: str = "refs/wgk"):
        self.repo = os.path.abspath(repo)
        self.target_ref = target
        self.worktrees = os.path.abspath(worktrees or self.repo.rstrip("/") + "-worktrees")
        self.namespace = namespace
        self._zero: str | None = None

    # --- plumbing ----------------------------------------------------------------------------

    def git(self, *args: str, cwd: str | None = None, env: dict | None = None,
            input: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
        full_env = dict(os.environ, GIT_TERMINAL_PROMPT="0", LC_ALL="C")
        full_env.pop("GIT_DIR", None)
        full_env.pop("GIT_INDEX_FILE", None)
        if env:
            full_env.update(env)
        # --no-optional-locks: observing a worktree never rewrites the worker's index
        p = subprocess.run(["git", "--no-optional-locks", "-C", cwd or self.repo, *args],
                           capture_output=True,
                           env=full_env, input=input)
        if check and p.returncode != 0:
            raise GitError(f"git {' '.join(args)}: {p.stderr.decode(errors='replace').strip()}")
        return p

    def out(self, *args: str, **kw) -> str:
        return self.git(*args, **kw).stdout.decode().strip()

    @property
    def zero(self) -> str:
        if self._zero is None:
            fmt = self.out("rev-parse", "--show-object-format")
            self._zero = "0" * (64 if fmt == "sha256" else 40)
        return self._zero

    def ref(self, name: str) -> str:
        """The full ref of a kernel name ``<kind>/<task>/<leaf>`` (``worksave/a/f1-v1``)."""
        return f"{self.namespace}/" + "/".join(derived(name, kind=True))

    def resolve(self, ref: str) -> str | None:
        p = self.git("rev-parse", "--verify", "-q", ref + "^{commit}", check=False)
        return p.stdout.decode().strip() or None if p.returncode == 0 else None

    # --- the Repository contract -----------------------------------------------------------------

    def target(self) -> str | None:
        return self.resolve(self.target_ref)

    def worktree_path(self, wt: str) -> str:
        """The directory of the attempt worktree ``<task>/f<fence>``."""
        return os.path.join(self.worktrees, *derived(wt, kind=False))

    def _registered(self) -> set[str]:
        listing = self.out("worktree", "list", "--porcelain")
        return {os.path.realpath(line[len("worktree "):]) for line in listing.splitlines()
                if line.startswith("worktree ")}

    def contained(self, wt: str) -> str:
        """The worktree's path, once no component of it under the worktrees root is a symlink
        (a symlink planted at ``<worktrees>/<task>`` or at the worktree itself would send the
        kernel's git commands, and a worktree, outside the root): ``GitError`` otherwise."""
        path = self.worktree_path(wt)
        here = self.worktrees
        for part in derived(wt, kind=False):
            here = os.path.join(here, part)
            if os.path.islink(here):
                raise GitError(f"worktree {wt}: {here} is a symlink (refused: worktrees are "
                               f"made and read only under {self.worktrees}, never through a "
                               "symlink)")
        return path

    def create_worktree(self, wt: str, start: str | None, base: str | None = None) -> None:
        """(``base``: the history of ``start`` already says what it is built on.) The task's
        directory is made without following a symlink, and the worktree must then lie under
        the worktrees root (``contained``)."""
        if start is None:
            raise GitError(f"worktree {wt}: no start commit (the target ref does not exist)")
        path = self.contained(wt)
        if os.path.realpath(path) in self._registered():
            return          # created before a crash; the attempt was never recorded until now
        os.makedirs(self.worktrees, exist_ok=True)
        root = os.open(self.worktrees, os.O_RDONLY | os.O_DIRECTORY)
        task = os.path.basename(os.path.dirname(path))
        try:
            try:
                os.mkdir(task, 0o777, dir_fd=root)
            except FileExistsError:
                pass
            # O_NOFOLLOW: a symlink swapped in since ``contained`` is refused here (ELOOP)
            os.close(os.open(task, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=root))
        except OSError as e:
            raise GitError(f"worktree {wt}: {os.path.dirname(path)}: {e.strerror} (refused: "
                           f"not a directory under {self.worktrees})") from None
        finally:
            os.close(root)
        self.contained(wt)
        self.git("worktree", "add", "--detach", path, start)
        if os.path.dirname(os.path.realpath(path)) != os.path.join(
                os.path.realpath(self.worktrees), task):
            raise GitError(f"worktree {wt}: {path} does not lie under {self.worktrees}")

    def observe_worktree(self, wt: str) -> WorktreeView:
        path = self.contained(wt)
        if not os.path.exists(os.path.join(path, ".git")):
            return WorktreeView(False, None)
        return WorktreeView(True, self.snapshot(path))

    def snapshot(self, path: str, *, ignored: bool = False) -> str:
        """The content id of the exact bytes in the worktree at ``path`` (``ignored``: the
        ``.gitignore``d files too, for the capture that keeps them)."""
        head = self.out("rev-parse", "HEAD", cwd=path)
        status = self.git("status", "--porcelain=v1", "-z", "--untracked-files=all",
                          "--ignore-submodules=none", *(["--ignored"] if ignored else []),
                          cwd=path).stdout
        if not status:
            return head
        with tempfile.TemporaryDirectory(prefix="wgk-index-") as tmp:
            env = dict(SNAPSHOT_IDENTITY, GIT_INDEX_FILE=os.path.join(tmp, "index"))
            self.git("read-tree", "HEAD", cwd=path, env=env)
            self.git("add", "-A", *(["--force"] if ignored else []), ".", cwd=path, env=env)
            tree = self.out("write-tree", cwd=path, env=env)
            return self.out("commit-tree", tree, "-p", head, "-m", "wgk: worktree bytes",
                            cwd=path, env=env)

    def ignored_files(self, wt: str) -> list[str]:
        """The ``.gitignore``d files of a worktree (bytes a content id does not name)."""
        path = self.contained(wt)
        if not os.path.exists(os.path.join(path, ".git")):
            return []
        out = self.git("status", "--porcelain=v1", "-z", "--untracked-files=all",
                       "--ignored=traditional", cwd=path).stdout
        return [e[3:].decode(errors="replace") for e in out.split(b"\0") if e.startswith(b"!! ")]

    def keep_ignored(self, wt: str, ref: str) -> str | None:
        """WorkSave's second half: when the worktree holds ignored files, pin every byte of
        it (ignored files included, the saved content as parent) under ``ref``; its oid."""
        # guards: retained-work-never-erased
        if not self.ignored_files(wt):
            return None
        everything = self.snapshot(self.worktree_path(wt), ignored=True)
        self.pin(ref, everything)
        return everything

    def uncaptured(self, wt: str) -> list[str]:
        """What removing the worktree would lose that no ref keeps: a worktree inside it, or
        its ignored files when no kernel ref holds their bytes ([]: nothing)."""
        real = os.path.realpath(self.contained(wt))
        inside = sorted(p for p in self._registered() if p.startswith(real + os.sep))
        if inside:
            return [f"worktree {p}" for p in inside]
        files = self.ignored_files(wt)
        if not files:
            return []
        everything = self.snapshot(self.worktree_path(wt), ignored=True)
        held = self.out("for-each-ref", "--points-at", everything, "--format=%(refname)",
                        self.namespace + "/")
        return [] if held else files

    def pin(self, ref: str, content: str) -> None:
        full = self.ref(ref)
        # guards: retained-work-never-erased
        p = self.git("update-ref", full, content, self.zero, check=False)
        if p.returncode != 0 and self.resolve(full) != content:
            raise GitError(f"immutable ref {full} already holds {self.resolve(full)}, not {content}")

    def remove_worktree(self, wt: str) -> None:
        """Remove exactly the worktree ``wt``: never a directory git does not list as that
        worktree, never one holding another worktree or ignored bytes no ref keeps."""
        path = self.contained(wt)
        real = os.path.realpath(path)
        if real in self._registered():
            # guards: retained-work-never-erased
            lost = self.uncaptured(wt)
            if lost:
                raise GitError(f"worktree {path} holds what no ref keeps "
                               f"({', '.join(lost[:3])}{', ...' if len(lost) > 3 else ''}); not removed")
            self.git("worktree", "remove", "--force", path)
        if real in self._registered() or os.path.exists(path):
            raise GitError(f"worktree {path} is still there after its removal")

    def descends(self, commit: str, ancestor: str) -> bool:
        """Whether ``ancestor`` is in the history of ``commit`` (``merge-base --is-ancestor``)."""
        return self.git("merge-base", "--is-ancestor", ancestor, commit, check=False).returncode == 0

    def built_on(self, wt: str, candidate: str, base: str) -> bool:
        return self.descends(candidate, base)

    def land(self, effect: str, candidate: str, base: str) -> bool:
        # guards: target-history-grows
        if not self.descends(candidate, base):
            raise GitError(f"land {effect}: candidate {candidate[:12]} does not descend from "
                           f"base {base[:12]}; moving the target would drop commits")
        # guards: cas-base-exact
        p = self.git("update-ref", "--create-reflog", "-m", f"wgk-effect {effect}",
                     self.target_ref, candidate, base, check=False)
        if p.returncode == 0:
            return True
        if self.target() != base:
            return False        # the CAS failed: someone moved the target
        raise GitError(f"update-ref {self.target_ref}: {p.stderr.decode(errors='replace').strip()}")

    def output(self, effect: str, candidate: str, disposition: str) -> None:
        full = self.ref(f"outputs/{effect}")
        # guards: promotion-at-most-once
        p = self.git("update-ref", "-m", f"wgk-effect {effect} {disposition}", full, candidate,
                     self.zero, check=False)
        if p.returncode != 0 and self.resolve(full) != candidate:
            raise GitError(f"output ref {full} already holds {self.resolve(full)}")

    def effect_observed(self, effect: str) -> bool:
        if self.resolve(self.ref(f"outputs/{effect}")) is not None:
            return True
        p = self.git("reflog", "show", "--format=%gs", self.target_ref, "--", check=False)
        if p.returncode != 0:
            return False
        return f"wgk-effect {effect}" in p.stdout.decode().splitlines()

    # --- environment steps on a real repository ------------------------------------------------

    def changed_paths(self, base: str, candidate: str) -> list[str]:
        """The paths ``candidate`` changes against ``base``: ``git diff --name-only -z``, with
        no rename detection (a file moved out of a protected directory is its old path too)
        and no relative or external diff; names decoded as the file system's (hostile bytes
        kept, ``os.fsdecode``)."""
        out = self.git("-c", "diff.relative=false", "diff", "--no-renames", "--no-ext-diff",
                       "--no-textconv", "--ignore-submodules=none", "--name-only", "-z",
                       base, candidate, "--").stdout
        return [os.fsdecode(p) for p in out.split(b"\0") if p]

    def write(self, wt: str, content: str, paths: tuple[str, ...] = ()) -> None:
        """The edit step: the owner writes ``content`` into its worktree's file ``work.txt``
        and into each of ``paths`` (relative paths); the files an earlier edit wrote and this
        one does not are removed, so the worktree holds exactly this edit's bytes."""
        path = self.worktree_path(wt)
        if not os.path.isdir(path):
            raise GitError(f"worktree {wt} does not exist")
        record = os.path.join(path, self.out("rev-parse", "--git-path", "wgk-written", cwd=path))
        previous: list[str] = []
        if os.path.exists(record):
            with open(record) as f:
                previous = json.load(f)
        wanted = [p for p in paths if p != "work.txt"]
        for p in wanted:
            if not _inside(p):
                raise GitError(f"edit path {p!r} is not a relative path inside the worktree")
        for p in previous:
            if p not in wanted and os.path.lexists(os.path.join(path, p)):
                os.remove(os.path.join(path, p))
        with open(os.path.join(path, "work.txt"), "w") as f:
            f.write(content)
        for p in wanted:
            full = os.path.join(path, p)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w") as f:
                f.write(content)
        with open(record, "w") as f:
            f.write(json.dumps(wanted))

    def move_target(self, content: str) -> str:
        """Someone else commits ``content`` (as ``moved.txt``) on top of the target."""
        old = self.target()
        blob = self.out("hash-object", "-w", "--stdin", input=content.encode())
        with tempfile.TemporaryDirectory(prefix="wgk-index-") as tmp:
            env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
            if old:
                self.git("read-tree", old, env=env)
            self.git("update-index", "--add", "--cacheinfo", f"100644,{blob},moved.txt", env=env)
            tree = self.out("write-tree", env=env)
        parents = ["-p", old] if old else []
        new = self.out("commit-tree", tree, *parents, "-m", "someone else's change",
                       env=OTHER_IDENTITY)
        self.git("update-ref", "-m", "moved by someone else", self.target_ref, new,
                 old or self.zero)
        return new

    def remove_all_worktrees(self) -> None:
        """Tidy up (tests and the demo): every worktree under the kernel's directory."""
        for path in self._registered():
            if path.startswith(os.path.realpath(self.worktrees) + os.sep):
                self.git("worktree", "remove", "--force", path, check=False)
        shutil.rmtree(self.worktrees, ignore_errors=True)
        self.git("worktree", "prune", check=False)


def _inside(p: str) -> bool:
    """A relative path of components that stay inside a worktree (never into ``.git``)."""
    parts = p.split("/")
    return bool(p) and "\0" not in p and all(
        c not in ("", ".", "..") and c.lower() != ".git" for c in parts)


def init_repository(path: str, *, branch: str = "main", files: dict[str, str] | None = None) -> str:
    """A new repository with one commit on ``branch`` (for tests and the demo); its oid."""
    os.makedirs(path, exist_ok=True)
    run = lambda *a: subprocess.run(["git", "-C", path, *a], check=True, capture_output=True,
                                    env=dict(os.environ, **SNAPSHOT_IDENTITY))
    run("init", "-q", "-b", branch)
    for name, text in (files or {"README": "start\n"}).items():
        os.makedirs(os.path.dirname(os.path.join(path, name)), exist_ok=True)
        with open(os.path.join(path, name), "w") as f:
            f.write(text)
    run("add", "-A")
    run("commit", "-q", "-m", "start")
    return subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], check=True,
                          capture_output=True).stdout.decode().strip()
