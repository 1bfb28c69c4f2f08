"""``wgk kernel anchor`` and the anchor files ``verify-ledger`` and ``audit`` check.

An anchor is the ledger's head ``(seq, hash)`` written outside the database: one
JSON line ``{"format": "wgk-anchor/1", "graph": ..., "seq": ..., "hash": ...}``
appended to a file the operator keeps (created mode 0600, fsync'd). A later
``verify-ledger --anchor FILE`` finds every anchored seq with its hash, or
reports the removed tail, the lost write-ahead log or the re-hashed chain that
the database alone cannot show. ``anchor`` itself first checks the chain and the
anchors already in the file, so it never anchors a ledger that went backwards.
"""
from __future__ import annotations

import json
import os

from ..front.kernel import Kernel
from ..contract.names import short
from .output import UsageError, emit

FORMAT = "wgk-anchor/1"


def read_anchors(path: str | None, graph: str | None, *, missing_ok: bool = False) -> list:
    """The ``(seq, hash)`` pairs of an anchor file (``UsageError`` naming path and line)."""
    if path is None:
        return []
    try:
        raw = open(path, "rb").read()
    except FileNotFoundError:
        if missing_ok:
            return []
        raise UsageError(f"{path}: no such anchor file") from None
    except OSError as e:
        raise UsageError(f"{path}: {e.strerror}") from None
    out = []
    for n, line in enumerate(raw.split(b"\n"), 1):
        if line.strip():
            out.append(_anchor(line, f"{path}:{n}", graph))
    return out


def _anchor(line: bytes, where: str, graph: str | None) -> tuple[int, str]:
    try:
        a = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise UsageError(f"{where}: not a JSON anchor line") from None
    if not isinstance(a, dict) or a.get("format") != FORMAT:
        raise UsageError(f"{where}: not a {FORMAT} anchor")
    seq, digest = a.get("seq"), a.get("hash")
    if type(seq) is not int or seq < 1 or type(digest) is not str or len(digest) != 64:
        raise UsageError(f"{where}: an anchor needs a positive 'seq' and a 64-hex 'hash'")
    if a.get("graph") != graph:
        raise UsageError(f"{where}: an anchor of graph {short(a.get('graph'))}, this database "
                         f"holds graph {short(graph)}")
    return seq, digest


def do_anchor(k: Kernel, args) -> int:
    anchors = read_anchors(args.file, k.graph_id, missing_ok=True)
    v = k.verify_ledger(anchors=anchors)
    if not v.ok:
        return emit(args, v.to_json(), "\n".join(f"not anchored: {line}" for line in v.lines()), 1)
    line = {"format": FORMAT, "graph": k.graph_id, "seq": v.events, "hash": v.head}
    fd = os.open(args.file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, (json.dumps(line) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return emit(args, line, f"anchored seq {v.events} (hash {v.head[:16]}) in {args.file}")
