"""The ``wgk`` command line.

Each subcommand lives in its own module ``wgk.conformance.cmd_<name>`` that
defines ``HELP`` (one line), ``EXAMPLES`` (shown by ``--help``),
``add_arguments(parser)`` and ``run(args) -> int``. Exit codes everywhere:
0 all hold, 1 a violation or divergence, 2 bad usage or input.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import Sequence

from wgk.conformance.cli.errors import UsageError
from wgk.impl.cli.output import UsageError as ImplUsageError

#: name -> module; listed here so ``wgk --help`` can show every command.
COMMANDS: dict[str, str] = {
    "gate": "wgk.conformance.cli.cmd_gate",
    "explore": "wgk.conformance.cli.cmd_explore",
    "simulate": "wgk.conformance.cli.cmd_simulate",
    "prove": "wgk.conformance.cli.cmd_prove",
    "check": "wgk.conformance.cli.cmd_check",
    "mutants": "wgk.conformance.cli.cmd_mutants",
    "replay": "wgk.conformance.cli.cmd_replay",
    "fuzz": "wgk.conformance.cli.cmd_fuzz",
    "import-wg": "wgk.conformance.cli.cmd_import_wg",
    "record": "wgk.conformance.cli.cmd_record",
    "export-itf": "wgk.conformance.cli.cmd_export_itf",
    "trace-matrix": "wgk.conformance.cli.cmd_trace_matrix",
    "coverage": "wgk.conformance.cli.cmd_coverage",
    "kernel": "wgk.impl.cli.kernel",
    "demo": "wgk.impl.cli.demo",
    "complexity": "wgk.conformance.cli.cmd_complexity",
    "docs": "wgk.conformance.cli.cmd_docs",
    "view": "wgk.conformance.cli.cmd_view",
}


#: the commands of the kernel itself: they run from a plain ``pip install wgk``, which
#: installs none of the verification suite's extras (no solver, no test framework)
KERNEL_COMMANDS = ("kernel", "demo")
#: what ``pip install 'wgk[gate]'`` adds; a command that needs one of them says so
GATE_EXTRAS = frozenset({"z3", "hypothesis", "networkx", "jsonschema"})
GATE_HINT = "pip install 'wgk[gate]'"


class NeedsGateExtras:
    """Stands for a command whose module needs the gate's extras, which are not installed."""

    def __init__(self, name: str, missing: str) -> None:
        self.name, self.missing = name, missing
        self.HELP = f"(not installed: needs {missing}; {GATE_HINT})"
        self.EXAMPLES = f"  {GATE_HINT}\n  wgk {name} --help\n"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        pass

    def run(self, args) -> int:
        raise UsageError(f"needs the verification suite's extras ({self.missing} is not "
                         f"installed): {GATE_HINT}")


def _load(name: str):
    try:
        return importlib.import_module(COMMANDS[name])
    except ModuleNotFoundError as e:
        if e.name == COMMANDS[name]:
            return None
        if e.name and e.name.split(".")[0] in GATE_EXTRAS and name not in KERNEL_COMMANDS:
            return NeedsGateExtras(name, e.name.split(".")[0])
        raise


def build_parser(only: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of the commands in ``only`` (a command is parsed
    without importing the others: a kernel command without the verification suite)."""
    parser = argparse.ArgumentParser(
        prog="wgk",
        description="Formal-model-first verification of the attempt-control kernel: "
                    "model, proofs, implementation and the conformance gate.",
        epilog="Exit codes: 0 all hold, 1 violation or divergence, 2 bad usage or input.\n"
               "Run 'wgk COMMAND --help' for examples.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in (COMMANDS if only is None else only):
        mod = _load(name)
        if mod is None:
            continue
        p = sub.add_parser(name, help=mod.HELP, description=mod.HELP,
                           epilog="examples:\n" + mod.EXAMPLES,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        mod.add_arguments(p)
        p.set_defaults(_module=mod)
    return parser



def deepest(parser: argparse.ArgumentParser, argv: Sequence[str]) -> argparse.ArgumentParser:
    """The (sub)command parser that ``argv`` names: ``wgk kernel task add`` -> that of ``task add``."""
    for token in argv:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if subs and token in subs[0].choices:
            parser = subs[0].choices[token]
    return parser


def _named_command(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names (its first word that is not an option), if any."""
    return next((a for a in argv if not a.startswith("-")), None)


def _trace_error() -> type[Exception]:
    """The error of a malformed trace, when its module was imported: only then can it have been
    raised (a command that read no trace, ``wgk kernel``'s, does not import it to say so)."""
    fmt = sys.modules.get("wgk.conformance.traces.format")
    return UsageError if fmt is None else fmt.TraceError


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    named = _named_command(argv)
    # only the named command's module is imported (``wgk replay`` does not import the gate's);
    # every command's parser is built for ``wgk``, ``wgk --help ...`` and a name that is no command
    alone = named in KERNEL_COMMANDS or (named in COMMANDS and argv[0] == named)
    parser = build_parser(only=[named] if alone else None)
    # argparse exits with 2 on bad usage, which is our code for bad usage too; an unknown
    # flag is reported with the usage of the subcommand it was given to, not the top level's.
    args, extras = parser.parse_known_args(argv)
    if isinstance(getattr(args, "_module", None), NeedsGateExtras):
        extras = []                      # its options are unknown here: say what it needs
    if extras:
        deepest(parser, argv).error(f"unrecognized arguments: {' '.join(extras)}")
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    try:
        return int(args._module.run(args))
    except (UsageError, ImplUsageError, _trace_error()) as e:
        # a malformed trace met anywhere (a corpus a report reads, too) is bad input
        print(f"wgk {args.command}: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"wgk {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
