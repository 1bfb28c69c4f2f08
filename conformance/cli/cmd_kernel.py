"""wgk kernel: the operator's command line for a kernel database.

The database remembers its repository (``init --repo``); every command opens
the kernel on the real environment: the git repository, ``/proc`` and the wall
clock. Bad input (a missing or corrupt database, an unknown task, a malformed
file) is one line on stderr and exit 2, with the database untouched; a
rejected request, a failed audit or a differing rebuild is exit 1.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import uuid

from wgk.conformance.cli.errors import UsageError
from wgk.conformance.cli.output import emit_json
from wgk.impl import BadRequest, EnvError, Environment, GraphError, Kernel, StoreError, TaskPolicy
from wgk.impl.env import WallClock
from wgk.impl.git import GitRepository
from wgk.impl import EffectError
from wgk.impl.legacy import LegacyError
from wgk.impl.proc import ProcProcessTable
from wgk.impl.store import Store

HELP = "operate a durable kernel database: tasks, dispatch, status, convergence, audit, rebuild"
EXAMPLES = """  wgk kernel --db k.db init --graph g --repo ./repo --target refs/heads/main
  wgk kernel --db k.db task add schema
  wgk kernel --db k.db task add api --after schema --review-required
  wgk kernel --db k.db dispatch schema --pid 4242 --session s1
  wgk kernel --db k.db status --json
  wgk kernel --db k.db show schema
  wgk kernel --db k.db converge
  wgk kernel --db k.db send --lines requests.jsonl       (group commit: one commit for all lines)
  wgk kernel --db k.db retry schema --pid 4343 --fresh
  wgk kernel --db k.db import-legacy graph.jsonl
  wgk kernel --db k.db audit && wgk kernel --db k.db verify-ledger && wgk kernel --db k.db rebuild
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", required=True, metavar="PATH", help="the kernel database (SQLite)")
    p.add_argument("--json", action="store_true", help="print results as JSON")
    sub = p.add_subparsers(dest="action", metavar="SUBCOMMAND", required=True)
    js = argparse.ArgumentParser(add_help=False)
    js.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                    help="print results as JSON")
    key = argparse.ArgumentParser(add_help=False, parents=[js])
    key.add_argument("--key", help="idempotency key (default: a fresh one)")

    s = sub.add_parser("init", parents=[js], help="create the database and its graph")
    s.add_argument("--graph", required=True, help="graph id (part of every capability)")
    s.add_argument("--repo", required=True, help="the git repository holding the target")
    s.add_argument("--target", default="refs/heads/main", help="the target ref")
    s.add_argument("--worktrees", help="where attempt worktrees live (default: REPO-worktrees)")

    task = sub.add_parser("task", help="edit the task graph").add_subparsers(
        dest="task_action", metavar="ACTION", required=True)
    s = task.add_parser("add", parents=[js], help="add a task")
    s.add_argument("name")
    s.add_argument("--after", action="append", default=[], metavar="DEP",
                   help="a dependency (repeatable)")
    s.add_argument("--review-required", action="store_true")
    s.add_argument("--requires-assignment", action="store_true")
    s.add_argument("--disposition", default="land", choices=["land", "deliver", "report"])
    s = task.add_parser("dep", parents=[js], help="add a dependency to a task without attempts")
    s.add_argument("name")
    s.add_argument("--after", required=True, metavar="DEP")

    for name, helptext in (("dispatch", "open an attempt owned by a live process"),
                           ("retry", "close a stuck attempt (work retained) and open a new one")):
        s = sub.add_parser(name, parents=[key], help=helptext)
        s.add_argument("name", metavar="TASK")
        s.add_argument("--pid", type=int, required=True, help="the owner process")
        s.add_argument("--session", help="the owner's session id")
        if name == "dispatch":
            s.add_argument("--imports", help="retained work (a content id) the attempt imports")
        else:
            s.add_argument("--fresh", action="store_true",
                           help="start from the target instead of importing the retained work")
    sub.add_parser("status", parents=[js], help="every task's status and way forward")
    s = sub.add_parser("show", parents=[js], help="every receipt, phase and evidence id of a task")
    s.add_argument("name", metavar="TASK")
    sub.add_parser("converge", parents=[js], help="act on every due way forward")
    sub.add_parser("audit", parents=[js], help="check the stored state against the invariants")
    s = sub.add_parser("reconcile", parents=[key], help="resolve a hold (legacy claim, upgrade block)")
    s.add_argument("name", metavar="TASK")
    s = sub.add_parser("reconstruct", parents=[key],
                       help="prove a legacy Done by the target holding its exact candidate")
    s.add_argument("name", metavar="TASK")
    s.add_argument("--candidate", required=True)
    s.add_argument("--base", required=True)
    s = sub.add_parser("abandon", parents=[key], help="give a task up, its work preserved")
    s.add_argument("name", metavar="TASK")
    s = sub.add_parser("reset", parents=[key], help="open a new generation (work retained)")
    s.add_argument("name", metavar="TASK")
    s = sub.add_parser("import-legacy", parents=[js],
                       help="import a WG graph.jsonl or JSON list, quarantining unproven Done")
    s.add_argument("file")
    s = sub.add_parser("rebuild", parents=[js], help="replay the ledger and compare every table")
    s.add_argument("--apply", action="store_true", help="replace the tables with the rebuilt ones")
    sub.add_parser("verify-ledger", parents=[js], help="walk the hash chain")
    s = sub.add_parser("send", parents=[js], help="send one wire request (JSON argument or stdin), "
                       "or many with one commit (--lines)")
    s.add_argument("request", nargs="?", help="the request as JSON (default: read stdin)")
    s.add_argument("--lines", metavar="FILE",
                   help="send every JSON line of FILE ('-': stdin) with one commit (group commit: "
                        "no answer before it); one answer per line")


# --- opening the kernel ----------------------------------------------------------------------


def environment(repo: str, target: str, worktrees: str | None) -> Environment:
    return Environment(ProcProcessTable(), GitRepository(repo, target=target, worktrees=worktrees),
                       WallClock())


def open_kernel(path: str) -> Kernel:
    if not os.path.isfile(path):
        raise UsageError(f"{path}: no kernel database here (create one with 'init')")
    try:
        store = Store(path)
        repo, target = store.meta("config:repo"), store.meta("config:target")
        worktrees = store.meta("config:worktrees")
        store.close()
        if repo is None or target is None:
            raise UsageError(f"{path}: the database names no repository (was it made by 'init'?)")
        return Kernel(path, environment(repo, target, worktrees))
    except StoreError as e:
        raise UsageError(str(e)) from None


def require_task(k: Kernel, name: str) -> None:
    if name not in k.names():
        raise UsageError(f"unknown task {name!r}")


# --- the subcommands ---------------------------------------------------------------------------


def run(args: argparse.Namespace) -> int:
    if args.action == "init":
        return init(args)
    k = open_kernel(args.db)
    try:
        return ACTIONS[args.action](k, args)
    except (GraphError, LegacyError, BadRequest) as e:
        raise UsageError(str(e)) from None
    except (EnvError, EffectError) as e:
        print(f"wgk kernel: effect failed, nothing recorded: {e}", file=sys.stderr)
        return 1
    finally:
        k.close()


def init(args) -> int:
    if os.path.exists(args.db):
        raise UsageError(f"{args.db}: already exists")
    repo = os.path.abspath(args.repo)
    probe = GitRepository(repo, target=args.target, worktrees=args.worktrees)
    try:
        probe.out("rev-parse", "--git-dir")
    except EnvError:
        raise UsageError(f"{args.repo}: not a git repository") from None
    if probe.target() is None:
        raise UsageError(f"{args.repo}: the target {args.target} does not exist")
    k = Kernel(args.db, environment(repo, args.target, args.worktrees))
    try:
        k.create_graph(args.graph, config={"repo": repo, "target": args.target,
                                           "worktrees": probe.worktrees})
    finally:
        k.close()
    return emit(args, {"db": args.db, "graph": args.graph, "repo": repo, "target": args.target},
                f"created graph {args.graph} on {repo} ({args.target})")


def emit(args, data, text: str, code: int = 0) -> int:
    if getattr(args, "json", False):
        emit_json(data)
    else:
        print(text)
    return code


def send(k: Kernel, args, request: dict) -> int:
    response = k.handle(request)
    ok = response["decision"] != "rejected" and response.get("original", {}).get("decision") != "rejected"
    text = response["decision"] + (f": {response['code']}" if "code" in response else "")
    if "original" in response:
        o = response["original"]
        text += f" (original: {o['decision']}{': ' + o['code'] if 'code' in o else ''})"
    return emit(args, {"request": request, "response": response}, text, 0 if ok else 1)


def send_lines(k: Kernel, args) -> int:
    """Every JSON line of a file decided with one commit (``Kernel.handle_batch``)."""
    name = "<stdin>" if args.lines == "-" else args.lines
    try:
        text = sys.stdin.read() if args.lines == "-" else open(args.lines).read()
    except OSError as e:
        raise UsageError(f"{name}: {e.strerror}") from None
    requests, lines = [], []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            requests.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise UsageError(f"{name}:{n}: {e.msg} at column {e.colno}") from None
        lines.append(n)
    try:
        responses = k.handle_batch(requests)
    except BadRequest as e:          # "request N: ..." -> the file's line
        message = str(e)
        if message.startswith("request "):
            index, _, rest = message[len("request "):].partition(": ")
            message = f"{name}:{lines[int(index)]}: {rest}"
        raise UsageError(message) from None
    rejected = [r for r in responses if r["decision"] == "rejected"
                or r.get("original", {}).get("decision") == "rejected"]
    text_out = "\n".join(f"{name}:{n}: {r['decision']}" + (f": {r['code']}" if "code" in r else "")
                          for n, r in zip(lines, responses))
    return emit(args, {"responses": responses, "requests": len(requests),
                       "rejected": len(rejected)}, text_out, 1 if rejected else 0)


def fresh_key(args, kind: str, task: str) -> str:
    return args.key or f"cli:{kind}:{task}:{uuid.uuid4().hex[:12]}"


def do_task(k: Kernel, args) -> int:
    if args.task_action == "add":
        k.add_tasks([TaskPolicy(args.name, tuple(args.after), args.review_required,
                                args.requires_assignment, args.disposition)])
        return emit(args, {"added": args.name, "deps": args.after}, f"added {args.name}")
    require_task(k, args.name)
    k.add_dependency(args.name, args.after)
    return emit(args, {"task": args.name, "dep": args.after},
                f"{args.name} now depends on {args.after}")


def owner(args) -> dict:
    birth = ProcProcessTable().birth_of(args.pid)
    if birth is None:
        raise UsageError(f"no live process {args.pid}")
    out = {"pid": args.pid, "birth": birth}
    if args.session:
        out["session"] = args.session
    return out


def do_dispatch(k: Kernel, args) -> int:
    require_task(k, args.name)
    r = {"kind": "dispatch", "actor": "daemon", "task": args.name,
         "key": fresh_key(args, "dispatch", args.name),
         "expected-attempt": k.record(args.name).attempt, "owner": owner(args)}
    if args.imports:
        r["imports"] = args.imports
    return send(k, args, r)


def do_retry(k: Kernel, args) -> int:
    require_task(k, args.name)
    t = k.record(args.name)
    r = {"kind": "retry", "actor": "operator", "task": args.name,
         "key": fresh_key(args, "retry", args.name), "expected-attempt": t.attempt,
         "owner": owner(args)}
    retained = t.retained
    if t.running:        # what closing the attempt will retain: its dirty work, or its saved work
        view = k.env.repository.observe_worktree(t.worktree_id) if t.worktree_id else None
        if view is not None and view.present and view.content != t.origin:
            retained = view.content
        elif t.saved_work is not None:
            retained = t.saved_work
    if retained and not args.fresh:
        r["imports"] = retained
    return send(k, args, r)


def operator_request(kind: str, **params):
    def action(k: Kernel, args) -> int:
        require_task(k, args.name)
        r = {"kind": kind, "actor": "operator", "task": args.name,
             "key": fresh_key(args, kind, args.name)}
        r.update({p: getattr(args, p) for p in params})
        if kind == "reset":
            r["expected-generation"] = k.record(args.name).generation
        return send(k, args, r)
    return action


def do_status(k: Kernel, args) -> int:
    rows = []
    for name in k.names():
        t = k.record(name)
        p = k.plan(name)
        rows.append({"task": name, "status": k.status(name),
                     "way": p.way if p else "-", "action": p.action if p else "-",
                     "reason": p.reason if p else "-", "deadline": p.deadline if p else 0,
                     "generation": t.generation, "attempt": t.attempt, "phase": t.visible_phase,
                     "candidate": t.candidate})
    if getattr(args, "json", False):
        emit_json({"tasks": rows, "ready": k.ready()})
        return 0
    header = ("TASK", "STATUS", "WAY", "ACTION", "REASON", "GEN", "ATT", "PHASE", "CANDIDATE")
    table = [header] + [(r["task"], r["status"], r["way"], r["action"], r["reason"],
                         str(r["generation"]), str(r["attempt"]), r["phase"],
                         (r["candidate"] or "-")[:12]) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    return 0


def do_show(k: Kernel, args) -> int:
    require_task(k, args.name)
    shown = k.show(args.name)
    if getattr(args, "json", False):
        emit_json(shown)
        return 0
    print(f"{shown['task']}: {shown['status']}  (generation {shown['generation']}, attempt "
          f"{shown['attempt']}, fence {shown['fence']}, {shown['attempt-state']})")
    if shown["plan"]:
        pl = shown["plan"]
        print(f"  way forward: {pl['way']} / {pl['action']} ({pl['reason']}, due {pl['deadline']})")
    print(f"  transaction: {shown['phase']} exit {shown['exit']} ({shown['reason']}) "
          f"revision {shown['revision']} candidate {shown['candidate']} base {shown['base']}")
    print("  receipts:")
    for name, b in shown["receipts"].items():
        print(f"    {name:12} fence {b['fence']} candidate {b['candidate']} base {b['base']}")
    print("  phases:")
    for ph in shown["phases"]:
        moved = ", ".join(f"{f} {ph[f]}" for f in ("phase", "exit", "reason") if f in ph)
        print(f"    #{ph['seq']:<5} {ph['kind'] or 'seed':20} {moved}  [{ph['key']}]")
    print("  evidence:")
    for kind, ident, seq in shown["evidence"]:
        print(f"    #{seq:<5} {kind:18} {ident}")
    for section in ("attempts", "pins", "effects", "worktrees", "legacy"):
        if shown[section]:
            print(f"  {section}:")
            for row in shown[section]:
                print("    " + ", ".join(f"{k_}={v}" for k_, v in row.items()))
    return 0


def do_converge(k: Kernel, args) -> int:
    report = k.converge()
    if getattr(args, "json", False):
        emit_json(report.to_json())
        return 0
    for s in report.sent:
        r = s.request
        print(f"sent {r['kind']} for {r['task']}: {s.response['decision']}"
              + (f" ({s.response['code']})" if "code" in s.response else ""))
    for p in report.plans:
        print(f"{p.task}: {p.way} / {p.action} ({p.reason})")
    return 0


def do_audit(k: Kernel, args) -> int:
    report = k.audit()
    lines = [f"{f.check}: {f.task or '-'}: {f.detail}" for f in report.findings]
    text = "\n".join(lines) if lines else f"audit ok: {report.tasks} tasks, {report.events} events"
    return emit(args, report.to_json(), text, 0 if report.ok else 1)


def do_import(k: Kernel, args) -> int:
    report = k.import_legacy(args.file)
    lines = [f"added {len(report.added)} tasks, {len(report.existing)} already known"]
    for q in report.quarantined:
        lines.append(f"quarantined {q['task']} (line {q['line']}): {q['status']}; would have "
                     f"unlocked: {', '.join(q['would-have-unlocked']) or 'nothing'}")
    for o in report.other:
        lines.append(f"{o['task']} (line {o['line']}): legacy {o['legacy-status']}, now {o['now']}")
    return emit(args, report.to_json(), "\n".join(lines))


def do_rebuild(k: Kernel, args) -> int:
    report = k.rebuild(apply=args.apply)
    text = (f"rebuild ok: {report.events} events reproduce every table and the projection"
            if report.ok else "\n".join(report.differences)
            + ("\nthe tables were replaced by the rebuilt ones" if report.applied else ""))
    return emit(args, report.to_json(), text, 0 if report.ok else 1)


def do_verify(k: Kernel, args) -> int:
    v = k.verify_ledger()
    text = (f"ledger ok: {v.events} events, head {v.head[:16]}" if v.ok
            else f"ledger broken at seq {v.broken_at}: {v.problem}")
    return emit(args, v.to_json(), text, 0 if v.ok else 1)


def do_send(k: Kernel, args) -> int:
    if args.lines is not None:
        return send_lines(k, args)
    raw = args.request if args.request is not None else sys.stdin.read()
    try:
        request = json.loads(raw)
    except json.JSONDecodeError as e:
        raise UsageError(f"request: {e.msg} at line {e.lineno} column {e.colno}") from None
    return send(k, args, request)


ACTIONS = {
    "task": do_task, "dispatch": do_dispatch, "retry": do_retry, "status": do_status,
    "show": do_show, "converge": do_converge, "audit": do_audit,
    "reconcile": operator_request("reconcile"),
    "reconstruct": operator_request("reconstruct", candidate=None, base=None),
    "abandon": operator_request("abandon"), "reset": operator_request("reset"),
    "import-legacy": do_import, "rebuild": do_rebuild, "verify-ledger": do_verify,
    "send": do_send,
}
