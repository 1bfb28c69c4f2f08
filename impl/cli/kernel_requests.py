"""``wgk kernel`` subcommands that send requests: task edits, dispatch, retry, operator requests,
and raw wire requests (one, or many with one commit)."""
from __future__ import annotations

import hashlib
import json
import secrets
import sys
import uuid

from ..front import secretfile
from ..contract.errors import BadRequest, EffectError, EnvError, GraphError, Tampered
from ..front.kernel import Kernel
from ..world.proc import ProcProcessTable
from ..storage.records import TaskPolicy
from ..contract.wire import parse, refused_name
from .kernel_open import require_task
from .kernel_principals import read_credential
from .output import UsageError, emit


def authenticated(response: dict) -> dict:
    """A not-authenticated answer is bad usage: one line, exit 2."""
    if response.get("code") == "not-authenticated":
        raise UsageError("not-authenticated: this kernel needs a valid credential "
                         "(--credential FILE)")
    return response


def named(request, where: str = "request") -> None:
    """A request naming something outside the name grammar is bad input: one line, exit 2."""
    try:
        problem = refused_name(parse(request))
    except BadRequest:
        return                      # malformed: the kernel says how
    if problem is not None:
        raise UsageError(f"{where}: {problem}")


def minted(args, request: dict) -> str | None:
    """Give an opener its ``mint``: a fresh 256-bit token, written to ``--token-file`` or,
    without one, returned for the output. The file is created before anything is sent, mode
    0600, exclusively and never through a symlink (``secretfile.create``): an existing file
    is refused and nothing is sent, so no token is ever one someone else planted."""
    path = getattr(args, "token_file", None)
    secret = secrets.token_hex(32)
    if path:
        try:
            secretfile.create(path, secret, what="token file")
        except secretfile.SecretFileError as e:
            raise UsageError(str(e)) from None
    request["mint"] = hashlib.sha256(secret.encode()).hexdigest()
    return None if path else secret


#: Errors raised before the request's transaction commits: the minted token opened nothing.
NOT_APPLIED = (UsageError, BadRequest, GraphError, EnvError, EffectError, Tampered)


def send_minted(k: Kernel, args, request: dict) -> int:
    """Send an opener; its token file stays only if the attempt was opened with its token
    (a rejection, a duplicate or an error before the commit removes the file it made)."""
    token = minted(args, request)
    path = getattr(args, "token_file", None)
    if path is None:
        return send(k, args, request, token)

    def unused(response: dict) -> None:
        if response.get("decision") != "applied":
            secretfile.remove_created(path)
    try:
        return send(k, args, request, token, on_response=unused)
    except NOT_APPLIED:
        secretfile.remove_created(path)
        raise


def send(k: Kernel, args, request: dict, token: str | None = None,
         on_response=lambda response: None) -> int:
    try:
        rc = k.admit(request, read_credential(args))
    except BadRequest as e:
        raise UsageError(f"request: {e}") from None
    if rc is None:
        authenticated({"code": "not-authenticated"})
    if rc.bad_name is not None:
        raise UsageError(f"request: {rc.bad_name}")
    response = k.handle_admitted(rc)
    on_response(response)
    authenticated(response)
    ok = response["decision"] != "rejected" and response.get("original", {}).get("decision") != "rejected"
    text = response["decision"] + (f": {response['code']}" if "code" in response else "")
    if "original" in response:
        o = response["original"]
        text += f" (original: {o['decision']}{': ' + o['code'] if 'code' in o else ''})"
    out = {"request": request, "response": response}
    if token is not None:
        out["token"] = token
        text += f"\ntoken: {token}"
    return emit(args, out, text, 0 if ok else 1)


def send_lines(k: Kernel, args) -> int:
    """Every JSON line of a file decided with one commit (``Kernel.handle_batch``)."""
    name = "<stdin>" if args.lines == "-" else args.lines
    try:
        raw = sys.stdin.buffer.read() if args.lines == "-" else open(args.lines, "rb").read()
    except OSError as e:
        raise UsageError(f"{name}: {e.strerror}") from None
    requests, lines = [], []
    for n, line in enumerate(raw.split(b"\n"), 1):
        if not line.strip():
            continue
        try:                         # each line parsed once: the batch takes the parsed request
            request = parse(decode_json(line, f"{name}:{n}"))
        except BadRequest as e:
            raise UsageError(f"{name}:{n}: {e}") from None
        problem = refused_name(request)
        if problem is not None:
            raise UsageError(f"{name}:{n}: {problem}")
        requests.append(request)
        lines.append(n)
    responses = [authenticated(r) for r in k.handle_batch(requests, read_credential(args))]
    rejected = [r for r in responses if r["decision"] == "rejected"
                or r.get("original", {}).get("decision") == "rejected"]
    text_out = "\n".join(f"{name}:{n}: {r['decision']}" + (f": {r['code']}" if "code" in r else "")
                          for n, r in zip(lines, responses))
    return emit(args, {"responses": responses, "requests": len(requests),
                       "rejected": len(rejected)}, text_out, 1 if rejected else 0)


def decode_json(raw: bytes, where: str):
    """One JSON value from bytes, or a one-line ``UsageError`` naming ``where`` and the
    position: invalid UTF-8, invalid JSON, nesting too deep, an integer literal too long."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{where}: invalid UTF-8 at byte {e.start + 1}: {e.reason}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        at = f"column {e.colno}" if e.lineno == 1 else f"line {e.lineno} column {e.colno}"
        raise UsageError(f"{where}: {e.msg} at {at}") from None
    except RecursionError:
        raise UsageError(f"{where}: JSON nested too deeply") from None
    except ValueError as e:                     # an integer literal too long to convert
        raise UsageError(f"{where}: {str(e).split(':')[0]}") from None


def fresh_key(args, kind: str, task: str) -> str:
    return args.key or f"cli:{kind}:{task}:{uuid.uuid4().hex[:12]}"


def do_task(k: Kernel, args) -> int:
    if args.task_action == "add":
        k.add_tasks([TaskPolicy(args.name, tuple(args.after), args.review_required,
                                args.requires_assignment, args.disposition, args.retry_budget)])
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
    return send_minted(k, args, r)


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
    return send_minted(k, args, r)


def do_resume(k: Kernel, args) -> int:
    """Lift a task's pause (``unpause``), with the time before which no attempt opens."""
    if args.deadline is not None and args.deadline < 0:
        raise UsageError(f"--not-before: expected a time of 0 or more, got {args.deadline}")
    return operator_request("unpause", deadline=None)(k, args)


def operator_request(kind: str, **params):
    def action(k: Kernel, args) -> int:
        require_task(k, args.name)
        r = {"kind": kind, "actor": "operator", "task": args.name,
             "key": fresh_key(args, kind, args.name)}
        r.update({p: getattr(args, p) for p in params if getattr(args, p)})
        if kind == "reset" or kind == "reopen":
            r["expected-generation"] = k.record(args.name).generation
        return send(k, args, r)
    return action


def do_send(k: Kernel, args) -> int:
    if args.lines is not None:
        return send_lines(k, args)
    if args.request is not None:
        raw = args.request.encode("utf-8", "surrogateescape")      # as the shell passed it
    else:
        raw = sys.stdin.buffer.read()
    return send(k, args, decode_json(raw, "request"))
