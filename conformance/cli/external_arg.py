"""``--external CMD`` and ``--timeout SECONDS``: the kernel under test as a command speaking
the conformance protocol (docs/conformance-protocol.md, docs/gate-your-kernel.md)."""
from __future__ import annotations

import argparse
import shlex

from wgk.conformance.cli.errors import UsageError
from wgk.conformance.oracle.external import DEFAULT_TIMEOUT
from wgk.conformance.oracle.external_runs import Kernel


def add_external_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--external", metavar="CMD",
                   help="the kernel under test: CMD started as a subprocess speaking "
                        "wgk-conformance/2 on stdin/stdout (default: wgk's own, in process)")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help=f"with --external: seconds one message may take (default {DEFAULT_TIMEOUT:g})")


def external_kernel(args: argparse.Namespace) -> Kernel | None:
    """The external kernel the arguments name (None: wgk's own, in process)."""
    command = getattr(args, "external", None)
    if command is None:
        return None
    try:
        words = shlex.split(command)
    except ValueError as e:
        raise UsageError(f"--external: {e}") from None
    if not words:
        raise UsageError("--external: an empty command")
    if not args.timeout > 0:
        raise UsageError(f"--timeout: must be more than 0 seconds, not {args.timeout:g}")
    if getattr(args, "backend", "sqlite") not in (None, "sqlite"):
        raise UsageError("--backend chooses wgk's own kernel's database; "
                         "an --external kernel keeps its own storage")
    return Kernel(command, args.timeout)
