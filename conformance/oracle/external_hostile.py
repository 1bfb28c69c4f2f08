"""Credentials of every hostile shape, sent over the protocol (``wgk gate --external CMD``).

The protocol's ``apply`` carries the sender's credential beside the request; a credential
the harness never issued must be answered ``rejected/not-authenticated`` and change
nothing (``docs/conformance-protocol.md``). On a closed trace's graph (one that declares
principals), an operator's ``reset`` is sent with credentials of every shape JSON can
carry: lone surrogates in the principal or the secret, NUL, empty parts, no dot, several
dots, a megabyte, and the issued credential with a character added. Each must be answered
as an unknown credential, the projection must not move, and the issued credential must
still be answered afterwards. The shapes JSON cannot carry (bytes, numbers as
credentials) are the in-process tamper section's.
"""
from __future__ import annotations

from wgk.conformance.oracle.external import ProtocolError
from wgk.conformance.oracle.systems import credential_of

NOT_AUTHENTICATED = {"decision": "rejected", "code": "not-authenticated"}


def hostile_credentials(principal: str) -> list[str]:
    """The hostile shapes, around the issued credential of ``principal``."""
    good = credential_of(principal)
    return ["\ud800", f"{principal}.\ud800", "\udcff.x", f"{principal}\ud800.secret", "",
            principal, f"{principal}\x00.x", f"{principal}.\x00", "\x00", ".x", f"{principal}.",
            "a.b.c.d", "x" * 5000 + "." + "y" * 5000, f"{principal}." + "z" * 10 ** 6,
            good + "\ud800", good.replace(".", ".\ud800", 1), good.replace(".", "\x00.", 1)]


def closed_trace(traces: list):
    """The first trace whose graph declares an operator principal (None: no closed trace)."""
    for t in traces:
        for p in t.graph.get("principals", []):
            if "operator" in p.get("roles", []):
                return t, p["name"]
    return None


def bad_credential_problems(system, trace, principal: str) -> list[str]:
    """Each hostile credential answered otherwise than an unknown one, or that moved the
    projection; and the issued credential no longer answered. ``system``: an external
    system started on ``trace`` (nothing applied yet)."""
    task = trace.graph["tasks"][0]["name"]
    reset = {"kind": "reset", "actor": "operator", "task": task, "key": "hostile-credential",
             "expected-generation": 0}
    problems = []
    before = system.project()
    for credential in hostile_credentials(principal):
        shown = repr(credential)[:30]
        try:
            got = system.apply_credential(reset, credential)
        except ProtocolError as e:
            return problems + [f"credential {shown}: {str(e).splitlines()[0][:200]}"]
        if got != NOT_AUTHENTICATED:
            problems.append(f"credential {shown}: answered {str(got)[:120]}, not {NOT_AUTHENTICATED}")
        if system.project() != before:
            problems.append(f"credential {shown}: the projection moved")
            before = system.project()
    got = system.apply_credential(reset, credential_of(principal))
    if got.get("code") == "not-authenticated":
        problems.append(f"the issued credential of {principal} is no longer answered: {got}")
    return problems


__all__ = ["NOT_AUTHENTICATED", "bad_credential_problems", "closed_trace", "hostile_credentials"]
