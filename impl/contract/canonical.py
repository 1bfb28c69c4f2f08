"""The canonical JSON text: the text of a request's digest, of the ledger's bodies and of the
journal's responses (sorted keys, no spaces, ASCII)."""
from __future__ import annotations

import json
from json.encoder import c_make_encoder, encode_basestring_ascii
from typing import Any

#: One C encoder made once (``json.dumps`` makes one per call with these arguments).
_SORTED = c_make_encoder and c_make_encoder(
    None, json.JSONEncoder().default, encode_basestring_ascii, None, ":", ",", True, False, True)


def canonical_json(value: Any) -> str:
    """``json.dumps(value, sort_keys=True, separators=(",", ":"))``."""
    return "".join(_SORTED(value, 0)) if _SORTED else json.dumps(
        value, sort_keys=True, separators=(",", ":"))
