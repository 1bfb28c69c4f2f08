"""A reference adapter process for the JSON-lines conformance protocol.

``python -m wgk.conformance.oracle.adapter --system model`` serves the executable
model over the protocol of docs/conformance-protocol.md. It is the worked
example for implementers in other languages, and the harness's own test of the
external path. The model keeps no files, so this adapter makes itself durable
the simplest honest way: every accepted step is appended to a step log in the
storage directory (flushed and fsynced before the reply), and ``recover``
replays the log.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from typing import Any

from wgk.model.vocab import Kind

from wgk.conformance.oracle.systems import ModelSystem, StepError

PROTOCOL = "wgk-conformance/2"

#: What the model declares at ``start``: every request kind, no crash hook (it has no durable
#: boundary of its own: a step is durable when its line is fsynced), one process.
CAPABILITIES = {"kinds": sorted(k.label for k in Kind), "worlds": ["memory"], "processes": 1,
                "crash-hook": False}


def _hash(credential: str) -> str:
    """Credentials are kept only as sha256, as a kernel keeps them."""
    return hashlib.sha256(credential.encode()).hexdigest()


class ModelAdapter:
    def __init__(self) -> None:
        self.system: ModelSystem | None = None
        self.issued: dict[str, str] = {}
        self.log = None

    def _open_log(self, storage: str, mode: str):
        os.makedirs(storage, exist_ok=True)
        self.log = open(os.path.join(storage, "steps.jsonl"), mode)

    def _persist(self, entry: dict) -> None:
        self.log.write(json.dumps(entry, separators=(",", ":")) + "\n")
        self.log.flush()
        os.fsync(self.log.fileno())

    def _authenticated(self, msg: dict) -> dict:
        """The request with the principal its credential proves (the model's ``principal``);
        a credential never issued names a principal the graph does not know. A presented
        token is known by its sha256, the name an opener's ``mint`` gives it."""
        request = msg["request"]
        if isinstance(request, dict) and isinstance(request.get("token"), str):
            request = dict(request, token=_hash(request["token"]))
        if "credential" not in msg:
            return request
        name = self.issued.get(_hash(str(msg["credential"])), "<not-issued>")
        return dict(request, principal=name)

    def handle(self, msg: dict) -> dict:
        op = msg.get("op")
        if op in ("start", "recover"):
            if msg.get("protocol") != PROTOCOL:
                return {"error": f"unsupported protocol {msg.get('protocol')!r}"}
            storage = msg["storage"]
            if op == "start":
                self.issued = {_hash(c): name for name, c in (msg.get("credentials") or {}).items()}
                self.system = ModelSystem(msg["graph"], msg.get("initial"))
                self._open_log(storage, "w")
                self._persist({"graph": msg["graph"], "initial": msg.get("initial"),
                               "issued": self.issued})
                return {"started": True, "capabilities": CAPABILITIES}
            with open(os.path.join(storage, "steps.jsonl")) as f:
                entries = [json.loads(line) for line in f if line.strip()]
            head, steps = entries[0], entries[1:]
            self.issued = head.get("issued", {})
            self.system = ModelSystem(head["graph"], head.get("initial"))
            for e in steps:
                self.system.apply({"request": e["request"]} if "request" in e else e["step"])
            self._open_log(storage, "a")
            return {"recovered": True, "steps": len(steps)}
        if self.system is None:
            return {"error": "send start first"}
        if op == "apply":
            request = self._authenticated(msg)
            decision = self.system.apply({"request": request})
            self._persist({"request": request})
            return {"decision": decision}
        if op == "env":
            step = msg["step"]
            if step.get("env") not in ("crash", "lost-response"):
                self.system.apply(step)
                self._persist({"step": step})
            return {"ok": True}
        if op == "project":
            return {"projection": self.system.project()}
        if op == "stop":
            return {"stopped": True}
        return {"error": f"unknown op {op!r}"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wgk.conformance.oracle.adapter",
                                     description="serve wgk over the JSON-lines conformance protocol")
    parser.add_argument("--system", choices=["model"], default="model")
    parser.parse_args(argv)
    adapter = ModelAdapter()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
            reply: dict[str, Any] = adapter.handle(msg)
        except StepError as e:
            reply = {"error": str(e), "kind": "step"}
        except (KeyError, TypeError, ValueError) as e:
            reply = {"error": f"bad message: {e}"}
        sys.stdout.write(json.dumps(reply, separators=(",", ":")) + "\n")
        sys.stdout.flush()
        if reply.get("stopped"):
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
