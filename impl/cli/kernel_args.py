"""The arguments of ``wgk kernel``: global options and one parser per subcommand."""
from __future__ import annotations

import argparse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", required=True, metavar="PATH|DSN", help="the kernel database: a SQLite file, or "
                   "postgresql://user@host/db (several daemons on several hosts may share it)")
    p.add_argument("--json", action="store_true", help="print results as JSON")
    p.add_argument("--credential", metavar="FILE",
                   help="the credential file requests are sent with (or $WGK_CREDENTIAL_FILE)")
    p.add_argument("--insecure-credential-file", action="store_true",
                   help="use a credential or token file that group or others may access "
                        "(refused by default, as ssh refuses such a private key)")
    sub = p.add_subparsers(dest="action", metavar="SUBCOMMAND", required=True)
    js = argparse.ArgumentParser(add_help=False)
    js.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                    help="print results as JSON")
    key = argparse.ArgumentParser(add_help=False, parents=[js])
    key.add_argument("--key", help="idempotency key (default: a fresh one)")
    _graph_commands(sub, js)
    _attempt_commands(sub, key)
    _reading_commands(sub, js)
    _operator_commands(sub, key)
    _ledger_commands(sub, js)


def _graph_commands(sub, js: argparse.ArgumentParser) -> None:
    s = sub.add_parser("init", parents=[js], help="create the database and its graph")
    s.add_argument("--graph", required=True, help="graph id (part of every capability)")
    s.add_argument("--repo", required=True, help="the git repository holding the target")
    s.add_argument("--target", default="refs/heads/main", help="the target ref")
    s.add_argument("--worktrees", help="where attempt worktrees live (default: REPO-worktrees)")
    s.add_argument("--protect", action="append", default=[], metavar="PATTERN",
                   help="a protected control-plane path pattern, e.g. '.ci/**' (repeatable): a "
                        "candidate changing a matching path is held in needs-repair")
    s.add_argument("--operator", default="operator", help="the first principal (default operator)")
    s.add_argument("--credential-out", metavar="FILE",
                   help="where its credential is written, mode 0600 (default DB.credential)")
    pr = sub.add_parser("principal", help="principals and their role credentials").add_subparsers(
        dest="principal_action", metavar="ACTION", required=True)
    s = pr.add_parser("add", parents=[js], help="add a principal; its credential goes to --out")
    s.add_argument("name")
    s.add_argument("--role", action="append", required=True, help="a role it holds (repeatable)")
    s.add_argument("--out", required=True, metavar="FILE", help="credential file (created 0600)")
    pr.add_parser("list", parents=[js], help="every principal and its roles")
    s = pr.add_parser("revoke", parents=[js], help="revoke a principal's credential")
    s.add_argument("name")

    task = sub.add_parser("task", help="edit the task graph").add_subparsers(
        dest="task_action", metavar="ACTION", required=True)
    s = task.add_parser("add", parents=[js], help="add a task")
    s.add_argument("name")
    s.add_argument("--after", action="append", default=[], metavar="DEP",
                   help="a dependency (repeatable)")
    s.add_argument("--review-required", action="store_true")
    s.add_argument("--requires-assignment", action="store_true")
    s.add_argument("--disposition", default="land", choices=["land", "deliver", "report"])
    s.add_argument("--retry-budget", type=int, default=2, metavar="N",
                   help="automatic retries after failed or lost attempts per generation "
                        "(default 2; then a named hold until an operator retries)")
    s = task.add_parser("dep", parents=[js], help="add a dependency to a task without attempts")
    s.add_argument("name")
    s.add_argument("--after", required=True, metavar="DEP")


def _attempt_commands(sub, key: argparse.ArgumentParser) -> None:
    for name, helptext in (("dispatch", "open an attempt owned by a live process"),
                           ("retry", "close a stuck attempt (work retained) and open a new one")):
        s = sub.add_parser(name, parents=[key], help=helptext)
        s.add_argument("name", metavar="TASK")
        s.add_argument("--pid", type=int, required=True, help="the owner process")
        s.add_argument("--session", help="the owner's session id")
        s.add_argument("--token-file", metavar="FILE",
                       help="write the attempt's capability token to this new file (created "
                            "0600; an existing file is refused, nothing sent; removed again "
                            "when the request is not applied) for its process (default: print it)")
        if name == "dispatch":
            s.add_argument("--imports", help="retained work (a content id) the attempt imports")
        else:
            s.add_argument("--fresh", action="store_true",
                           help="start from the target instead of importing the retained work")


def _reading_commands(sub, js: argparse.ArgumentParser) -> None:
    sub.add_parser("status", parents=[js], help="every task's status and way forward")
    s = sub.add_parser("show", parents=[js], help="every receipt, phase and evidence id of a task")
    s.add_argument("name", metavar="TASK")
    sub.add_parser("converge", parents=[js], help="act on every due way forward")
    s = sub.add_parser("audit", parents=[js], help="check the stored state against the invariants")
    s.add_argument("--anchor", metavar="FILE", help="also check the ledger against these anchors")


def _operator_commands(sub, key: argparse.ArgumentParser) -> None:
    s = sub.add_parser("reconcile", parents=[key], help="resolve a hold (legacy claim, upgrade block)")
    s.add_argument("name", metavar="TASK")
    s = sub.add_parser("reconstruct", parents=[key],
                       help="prove a legacy Done by the target holding its exact candidate")
    s.add_argument("name", metavar="TASK")
    s.add_argument("--candidate", required=True)
    s.add_argument("--base", required=True)
    s = sub.add_parser("abandon", parents=[key], help="give a task up, its work preserved")
    s.add_argument("name", metavar="TASK")
    s = sub.add_parser("reset", parents=[key],
                       help="open a new generation (work retained); over an owner not proven "
                            "exited, only persist the intent: reset again once its exit is proven")
    s.add_argument("name", metavar="TASK")
    s = sub.add_parser("deliver", parents=[key],
                       help="answer an external wait: only the event it names releases it",
                       epilog="example: wgk kernel --db k.db deliver a --correlation question-17 "
                              "--evidence answer-17")
    s.add_argument("name", metavar="TASK")
    s.add_argument("--correlation", required=True, metavar="EVENT",
                   help="the name of the event (what the wait waits for)")
    s.add_argument("--evidence", default="", metavar="ID", help="this delivery's evidence id")
    _reopen_command(sub, key)
    _pause_commands(sub, key)


def _pause_commands(sub, key: argparse.ArgumentParser) -> None:
    s = sub.add_parser("pause", parents=[key],
                       help="pause a task: nothing opens an attempt on it until it is resumed",
                       epilog="example: wgk kernel --db k.db pause a")
    s.add_argument("name", metavar="TASK")
    s = sub.add_parser("resume", parents=[key],
                       help="lift a task's pause; with --not-before, no attempt opens before T",
                       epilog="example: wgk kernel --db k.db resume a --not-before 1700000000")
    s.add_argument("name", metavar="TASK")
    s.add_argument("--not-before", dest="deadline", type=int, metavar="T",
                   help="the time (the kernel's clock, seconds) before which no attempt opens")


def _reopen_command(sub, key: argparse.ArgumentParser) -> None:
    s = sub.add_parser(
        "reopen", parents=[key], formatter_class=argparse.RawDescriptionHelpFormatter,
        help="reopen a Done task into a new generation (its result retained)",
        description="Reopen a Done task: it gets the next generation and no attempt, its result "
                    "is kept as retained work; its dependents lose readiness and one still "
                    "running on the old generation is held (dependency-reopened) until an "
                    "operator resets it. Refused (terminal-already) once a dependent's effect "
                    "is prepared or a dependent is Done: reopen those first.",
        epilog="example:\n  wgk kernel --db k.db reopen schema\n"
               "  wgk kernel --db k.db reset api     (a dependent held by the reopen)")
    s.add_argument("name", metavar="TASK")


def _ledger_commands(sub, js: argparse.ArgumentParser) -> None:
    s = sub.add_parser("import-legacy", parents=[js],
                       help="import a WG graph.jsonl or JSON list, quarantining unproven Done")
    s.add_argument("file")
    s = sub.add_parser("rebuild", parents=[js], help="replay the ledger and compare every table")
    s.add_argument("--apply", action="store_true", help="replace the tables with the rebuilt ones")
    s = sub.add_parser("verify-ledger", parents=[js], help="walk the hash chain (and its anchors)")
    s.add_argument("--anchor", metavar="FILE", help="anchor file (wgk kernel anchor): detects a "
                   "removed tail, a lost write-ahead log or a re-hashed chain")
    s = sub.add_parser("anchor", parents=[js], help="append the ledger's verified head to an "
                       "anchor file kept outside the database")
    s.add_argument("file", metavar="FILE", help="the anchor file (created 0600; one line per anchor)")
    s = sub.add_parser("send", parents=[js], help="send one wire request (JSON argument or stdin), "
                       "or many with one commit (--lines)")
    s.add_argument("request", nargs="?", help="the request as JSON (default: read stdin)")
    s.add_argument("--lines", metavar="FILE",
                   help="send every JSON line of FILE ('-': stdin) with one commit (group commit: "
                        "no answer before it); one answer per line")
