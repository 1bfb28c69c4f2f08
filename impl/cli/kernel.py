"""wgk kernel: the operator's command line for a kernel database.

The subcommands live in ``kernel_requests`` (those that send requests) and
``kernel_reports`` (those that read); their arguments in ``kernel_args``.

The database remembers its repository (``init --repo``); every command opens
the kernel on the real environment: the git repository, ``/proc`` and the wall
clock. Bad input (a missing or corrupt database, an unknown task, a malformed
file) is one line on stderr and exit 2, with the database untouched; a
rejected request, a failed audit or a differing rebuild is exit 1.
"""
from __future__ import annotations

import argparse
import sqlite3
import sys

from ..contract.errors import (
    BadRequest, EffectError, EnvError, GraphError, LegacyError, StoreError, Tampered, one_line,
)
from .kernel_args import add_arguments  # noqa: F401  (the command's interface)
from .kernel_anchor import do_anchor
from .kernel_open import init, open_kernel
from .kernel_reports import (
    do_audit, do_converge, do_import, do_rebuild, do_show, do_status, do_verify,
)
from ..front.principals import DENIED
from .kernel_principals import do_principal, read_credential, require_operator
from .kernel_requests import do_dispatch, do_resume, do_retry, do_send, do_task, operator_request
from .output import UsageError

HELP = "operate a durable kernel database: tasks, dispatch, status, convergence, audit, rebuild"
EXAMPLES = """  wgk kernel --db k.db init --graph g --repo ./repo --target refs/heads/main
                                        (writes the operator credential k.db.credential, 0600)
  export WGK_CREDENTIAL_FILE=k.db.credential
  wgk kernel --db k.db principal add worker-1 --role worker --role wrapper --out w1.credential
  wgk kernel --db k.db task add schema
  wgk kernel --db k.db task add api --after schema --review-required
  wgk kernel --db k.db dispatch schema --pid 4242 --session s1 --token-file schema.token
                                        (the attempt's capability token for its process, 0600)
  wgk kernel --db k.db status --json
  wgk kernel --db k.db show schema
  wgk kernel --db k.db converge
  wgk kernel --db k.db send --lines requests.jsonl       (group commit: one commit for all lines)
  wgk kernel --db k.db retry schema --pid 4343 --fresh
  wgk kernel --db k.db import-legacy graph.jsonl
  wgk kernel --db k.db audit && wgk kernel --db k.db verify-ledger && wgk kernel --db k.db rebuild
  wgk kernel --db k.db anchor /safe/place/k.anchors   (the ledger head, kept outside the database)
  wgk kernel --db k.db verify-ledger --anchor /safe/place/k.anchors
"""


def run(args: argparse.Namespace) -> int:
    if args.action == "init":
        return init(args)
    credential = read_credential(args)         # a bad credential file is refused first
    k = open_kernel(args.db)
    try:
        # a closed kernel answers no command without a valid credential, and graph edits
        # (not requests) only to an operator; the repairs need access to the database only
        if args.action in REPAIRS:
            pass
        elif args.action in GRAPH_EDITS:
            require_operator(k, credential)
        elif k.principals.authenticate(credential) is DENIED:
            raise UsageError("not-authenticated: this kernel needs a valid credential "
                             "(--credential FILE)")
        return ACTIONS[args.action](k, args)
    except Tampered as e:
        print(f"wgk kernel: {args.db}: the kernel refuses every request: {e}", file=sys.stderr)
        return 2
    except (GraphError, LegacyError, BadRequest) as e:
        raise UsageError(str(e)) from None
    except (EnvError, EffectError) as e:
        print(f"wgk kernel: effect failed, nothing recorded: {e}", file=sys.stderr)
        return 1
    except Exception as e:
        if not is_database_error(e):
            raise
        print(f"wgk kernel: the database cannot be read ({one_line(e)}): run audit and "
              "verify-ledger", file=sys.stderr)
        return 1
    finally:
        k.close()


def is_database_error(e: BaseException) -> bool:
    """An error the database raised (SQLite or PostgreSQL): a corrupt or altered database."""
    return isinstance(e, (sqlite3.Error, StoreError)) or type(e).__module__.startswith("psycopg")


GRAPH_EDITS = frozenset({"task", "import-legacy"})
#: What runs on access to the database alone, a credential or not, and on a kernel whose
#: principals were tampered with: they read the ledger and the tables, or (``rebuild
#: --apply``) make the tables what the verified ledger says, which grants nothing new.
REPAIRS = frozenset({"verify-ledger", "audit", "rebuild", "anchor"})

ACTIONS = {
    "task": do_task, "dispatch": do_dispatch, "retry": do_retry, "status": do_status,
    "show": do_show, "converge": do_converge, "audit": do_audit,
    "reconcile": operator_request("reconcile"),
    "reconstruct": operator_request("reconstruct", candidate=None, base=None),
    "abandon": operator_request("abandon"), "reset": operator_request("reset"),
    "deliver": operator_request("deliver", correlation=None, evidence=None),
    "reopen": operator_request("reopen"),
    "pause": operator_request("pause"), "resume": do_resume,
    "import-legacy": do_import, "rebuild": do_rebuild, "verify-ledger": do_verify,
    "send": do_send, "principal": do_principal, "anchor": do_anchor,
}
