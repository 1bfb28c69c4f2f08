"""What grants authority or answers for the past, held to the hash chain.

Principals (each one's secret hash, roles and revocation), the journal (each key's digest
and the response a re-sent request is answered with), every attempt's token hash and the
receipts are written by ledger events and nothing else. The chain covers them only while
the tables hold exactly what those events say: ``differences`` folds the events and
compares, and ``verify-ledger`` and ``audit`` report each difference in one line. A table
edited behind the kernel's back is found; a chain rewritten as a whole to match is found
against an anchor kept outside the database (``wgk kernel anchor``).

The principals are checked before anyone is authenticated as well (``principals``): a
closed kernel whose principals were deleted or altered refuses every request.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from .apply import response_text
from ..contract.errors import Tampered
from .ledger import row_hash
from ..contract.vocabulary import RECEIPTS

#: The ledger events that add and revoke a principal (their ``key`` is its name).
PRINCIPAL_EVENTS = ("principal-added", "principal-revoked")
#: Read through the partial index ``ledger_principals`` (``schema``: its order is the index's),
#: so the check before each authentication visits the principal events only, whatever the
#: ledger's length; ``principals_from_ledger`` folds them in ledger order.
PRINCIPAL_ROWS = ("SELECT seq, prev, hash, event, task, key, body, chain FROM ledger "
                  "WHERE event IN ('principal-added', 'principal-revoked') ORDER BY key, seq")


@dataclass(frozen=True)
class PrincipalRow:
    """A principal as its last event made it (or as its table row says)."""

    secret_sha256: str
    roles: frozenset
    revoked: bool
    seq: int


def principal_body(name: str, secret_sha256: str, roles, revoked: bool) -> dict:
    """The body of a principal event: the principal as it stands after the event."""
    return {"name": name, "secret-sha256": secret_sha256, "roles": sorted(roles),
            "revoked": bool(revoked)}


def principals_from_ledger(conn) -> dict[str, PrincipalRow]:
    """Every principal as its last event says. An event whose hash does not match its
    columns, or whose body is not a principal, is ``Tampered`` (a chain not yet sealed on
    PostgreSQL has no hash to match: ``verify-ledger`` seals and walks it)."""
    out: dict[str, PrincipalRow] = {}
    rows = sorted(conn.execute(PRINCIPAL_ROWS).fetchall(), key=lambda row: int(row[0]))
    for seq, prev, digest, event, task, key, body, chain in rows:
        seq = int(seq)
        if digest is not None and row_hash(chain, prev, seq, event, task, key, body) != digest:
            raise Tampered(f"ledger event {seq} ({event} {key!r}): its hash does not match "
                           "its columns")
        try:
            b = json.loads(body)
            row = PrincipalRow(str(b["secret-sha256"]), frozenset(b["roles"]),
                               bool(b["revoked"]), seq)
            named = b["name"] == key
        except (ValueError, KeyError, TypeError):
            named = False
        if not named:
            raise Tampered(f"ledger event {seq} ({event}): not a principal named {key!r}")
        out[key] = row
    return out


def principals_table(conn) -> dict[str, PrincipalRow]:
    return {name: PrincipalRow(sha, frozenset(roles.split(",")) - {""}, bool(revoked), int(seq))
            for name, sha, roles, revoked, seq in conn.execute(
                "SELECT name, secret_sha256, roles, revoked, seq FROM principals")}


def principal_differences(ledger: dict[str, PrincipalRow],
                          table: dict[str, PrincipalRow]) -> list[str]:
    """How the principals table differs from the ledger's principal events (one line each)."""
    out = []
    for name in sorted(set(ledger) | set(table)):
        want, have = ledger.get(name), table.get(name)
        if have is None:
            out.append(f"principal {name!r} (event {want.seq}) is missing from the principals "
                       "table")
        elif want is None:
            out.append(f"principal {name!r} in the principals table was added by no ledger "
                       "event")
        elif have != want:
            what = [f for f, a, b in (("secret hash", have.secret_sha256, want.secret_sha256),
                                      ("roles", have.roles, want.roles),
                                      ("revoked", have.revoked, want.revoked),
                                      ("seq", have.seq, want.seq)) if a != b]
            out.append(f"principal {name!r}: {', '.join(what)} differ from its event {want.seq}")
    return out


# --- the whole fold ----------------------------------------------------------------------------


def differences(conn) -> list[str]:
    """Every way the authority tables differ from the ledger's events, one line each (the
    first few of each table): principals, journal, token hashes, receipts. Events that do
    not read back (a corrupt body) are a difference too, never an exception."""
    try:
        ledger = principals_from_ledger(conn)
    except Tampered as e:
        return [str(e)]
    out = principal_differences(ledger, principals_table(conn))
    journal, tokens, receipts = {}, {}, {}
    current: dict[str, list] = {}            # task -> [fence, token hash]
    for seq, event, task, key, body in conn.execute(
            "SELECT seq, event, task, key, body FROM ledger "
            "WHERE event IN ('request', 'seed') ORDER BY seq"):
        try:
            b = json.loads(body)
            if event == "request":
                journal[key] = (b["digest"], response_text(b["response"]), int(seq))
            else:
                task = b["task"]
            changes = b.get("changes")
            if changes:
                _fold_changes(task, changes, current, tokens, receipts)
        except (ValueError, KeyError, TypeError, IndexError) as e:
            return out + [f"ledger event {seq} ({event}) does not read back: "
                          f"{type(e).__name__}: {e}"]
    out += _compare("journal", journal, {
        k: (d, r, int(s)) for k, d, r, s in conn.execute(
            "SELECT key, digest, response, seq FROM journal")})
    out += _compare("token hash", tokens, {
        (t, int(f)): h for t, f, h in conn.execute(
            "SELECT t.name, a.fence, a.token_hash FROM attempts a JOIN tasks t ON t.id = a.task")})
    out += _compare("receipt", receipts, {
        (t, k): (int(f), c, b) for t, k, f, c, b in conn.execute(
            "SELECT t.name, r.kind, r.fence, r.candidate, r.base FROM receipts r "
            "JOIN tasks t ON t.id = r.task")})
    return out


def _fold_changes(task: str, changes: dict, current: dict, tokens: dict, receipts: dict) -> None:
    """One event's record changes: the attempt row a new fence opens carries the record's
    token hash; a changed token hash is the current attempt's; the receipts are the record's."""
    fence, token = current.setdefault(task, [0, None])
    new_fence = changes.get("fence", fence)
    token = changes.get("token_hash", token)
    if new_fence and (new_fence != fence or "token_hash" in changes):
        tokens[(task, new_fence)] = token
    current[task] = [new_fence, token]
    if "receipts" in changes:
        for name, b in zip(RECEIPTS, changes["receipts"]):
            if b[0]:
                receipts[(task, name)] = (int(b[0]), b[1], b[2])
            else:
                receipts.pop((task, name), None)


def _compare(what: str, want: dict, have: dict, most: int = 3) -> list[str]:
    out = []
    for k in sorted(set(want) | set(have), key=repr):
        if want.get(k) != have.get(k):
            if k not in have:
                out.append(f"{what} {_name(k)}: written by the ledger, missing from its table")
            elif k not in want:
                out.append(f"{what} {_name(k)}: in its table, written by no ledger event")
            else:
                out.append(f"{what} {_name(k)}: differs from its ledger event")
            if len(out) == most:
                break
    return out


def _name(k) -> str:
    return repr(k) if not isinstance(k, tuple) else "/".join(str(x) for x in k)
