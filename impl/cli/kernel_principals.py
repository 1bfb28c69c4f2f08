"""``wgk kernel`` credentials: the first operator credential made by ``init``, the global
``--credential FILE`` every request is sent with, and ``principal add/list/revoke``.

A credential file holds one line, ``<principal>.<secret>``, and is created mode
0600, exclusively and never through a symlink (``secretfile``); the database is
created 0600 too. A credential file is read only when no one but its owner may
access it (``--insecure-credential-file`` overrides). A missing, unreadable,
loose or wrong credential file is one line naming it and exit 2.
"""
from __future__ import annotations

import os

from ..front.kernel import Kernel
from ..storage.backends import backend_of
from ..front import secretfile
from ..front.principals import DENIED, PrincipalError, well_formed
from .output import UsageError, emit

#: The roles of the credential ``init`` writes: the operator, who also runs the daemon's
#: commands (dispatch, converge) and imports legacy graphs.
FIRST_ROLES = ("operator", "daemon", "legacy-import")


def reserve(path: str, what: str = "credential file") -> secretfile.Reserved:
    """Create ``path`` readable by its owner only, before the secret it will hold exists,
    refusing an existing file or a symlink (``secretfile.reserve``)."""
    try:
        return secretfile.reserve(path, what=what)
    except secretfile.SecretFileError as e:
        raise UsageError(str(e)) from None


def read_credential(args) -> str | None:
    """The credential of ``--credential FILE`` (or ``$WGK_CREDENTIAL_FILE``), if any: a
    private regular file holding one line ``<principal>.<secret>`` (``secretfile.read``; a
    file open to group or others only with ``--insecure-credential-file``)."""
    path = getattr(args, "credential", None) or os.environ.get("WGK_CREDENTIAL_FILE")
    if not path:
        return None
    try:
        text = secretfile.read(path, what="credential file",
                               insecure=getattr(args, "insecure_credential_file", False))
    except secretfile.SecretFileError as e:
        raise UsageError(str(e)) from None
    if not well_formed(text):
        raise UsageError(f"{path}: not a credential (expected one line '<principal>.<secret>')")
    return text


def require_operator(k: Kernel, credential: str | None) -> None:
    """Principals are managed by an operator once the kernel is closed."""
    who = k.principals.authenticate(credential)
    if who is DENIED:
        raise UsageError("not-authenticated: send an operator credential with --credential FILE")
    if who is not None and "operator" not in who.roles:
        raise UsageError(f"role-not-held: principal {who.name} is not an operator")


def credential_path(args) -> str:
    """``init``: where the first operator credential goes."""
    if not args.credential_out and not backend_of(args.db).file:
        raise UsageError("init on a PostgreSQL database needs --credential-out FILE "
                         "(where the first operator credential is written)")
    return args.credential_out or f"{args.db}.credential"


def first_credential(k: Kernel, args, out: secretfile.Reserved) -> str:
    """``init``: the operator principal, its credential written to the file ``out`` that was
    created for it before the database was."""
    out.write(k.principals.add(args.operator, FIRST_ROLES))
    return out.path


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
        out = reserve(args.out)             # before the principal exists: never a lost secret
        try:
            out.write(k.principals.add(args.name, args.role))
        except BaseException:
            out.discard()
            raise
    except PrincipalError as e:
        raise UsageError(str(e)) from None
    return emit(args, {"added": args.name, "roles": sorted(args.role), "credential-file": args.out},
                f"added {args.name} ({', '.join(sorted(args.role))}); credential in {args.out}")
