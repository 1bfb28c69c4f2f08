"""``wgk kernel`` credentials: the first operator credential made by ``init``, the global
``--credential FILE`` every request is sent with, and ``principal add/list/revoke``.

A credential file holds one line, ``<principal>.<secret>``, and is created mode
0600 (never overwritten); the database is created 0600 too. A missing,
unreadable or wrong credential is one line and exit 2.
"""
from __future__ import annotations

import os

from ..kernel import Kernel
from ..pg import is_dsn
from ..principals import DENIED, PrincipalError
from .output import UsageError, emit

#: The roles of the credential ``init`` writes: the operator, who also runs the daemon's
#: commands (dispatch, converge) and imports legacy graphs.
FIRST_ROLES = ("operator", "daemon", "legacy-import")


def create_private(path: str, text: str | None = None) -> None:
    """Create ``path`` readable by its owner only (refusing to overwrite anything)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror}") from None
    with os.fdopen(fd, "w") as f:
        if text is not None:
            f.write(text + "\n")


def read_credential(args) -> str | None:
    """The credential of ``--credential FILE`` (or ``$WGK_CREDENTIAL_FILE``), if any."""
    path = getattr(args, "credential", None) or os.environ.get("WGK_CREDENTIAL_FILE")
    if not path:
        return None
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError as e:
        raise UsageError(f"{path}: credential unreadable: {e.strerror}") from None
    if "." not in text:
        raise UsageError(f"{path}: not a credential (expected one line '<principal>.<secret>')")
    return text


def require_operator(k: Kernel, credential: str | None) -> None:
    """Principals are managed by an operator once the kernel is closed."""
    who = k.principals.authenticate(credential)
    if who is DENIED:
        raise UsageError("not-authenticated: send an operator credential with --credential FILE")
    if who is not None and "operator" not in who.roles:
        raise UsageError(f"role-not-held: principal {who.name} is not an operator")


def first_credential(k: Kernel, args) -> str:
    """``init``: the operator principal and its credential file (mode 0600)."""
    if not args.credential_out and is_dsn(args.db):
        raise UsageError("init on a PostgreSQL database needs --credential-out FILE "
                         "(where the first operator credential is written)")
    path = args.credential_out or f"{args.db}.credential"
    credential = k.principals.add(args.operator, FIRST_ROLES)
    create_private(path, credential)
    return path


def do_principal(k: Kernel, args) -> int:
    credential = read_credential(args)
    try:
        if args.principal_action == "list":
            rows = k.principals.list()
            return emit(args, [p.to_json() for p in rows], "\n".join(
                f"{p.name}: {', '.join(sorted(p.roles)) or '-'}" + (" (revoked)" if p.revoked else "")
                for p in rows) or "no principals (the kernel is open)")
        require_operator(k, credential)
        if args.principal_action == "revoke":
            k.principals.revoke(args.name)
            return emit(args, {"revoked": args.name}, f"revoked {args.name}")
        secret = k.principals.add(args.name, args.role)
    except PrincipalError as e:
        raise UsageError(str(e)) from None
    create_private(args.out, secret)
    return emit(args, {"added": args.name, "roles": sorted(args.role), "credential-file": args.out},
                f"added {args.name} ({', '.join(sorted(args.role))}); credential in {args.out}")
