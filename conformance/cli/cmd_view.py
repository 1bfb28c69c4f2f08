"""wgk view: a local page where a designer walks the model."""
from __future__ import annotations

import argparse
import signal
import sys
import webbrowser

from wgk.conformance.cli import instance_args
from wgk.conformance.cli.errors import UsageError
from wgk.conformance.cli.instance_args import add_instance_arguments
from wgk.conformance.cli.output import write_text
from wgk.conformance.traces.format import TraceError, load_trace

HELP = "open a trace, a counterexample or a bounded instance in a local page and walk the model"
EXAMPLES = """  wgk view traces/incidents/12-target-moved-needs-repair.json
  wgk check --invariant cas-base-exact --mutant cas-ignores-moved-target --depth 11 --tasks 1 --out cx.json
  wgk view cx.json                      # the counterexample, decided by the mutant it was found on
  wgk view cx.json --mutant model       # the same steps decided by the model
  wgk view --tasks 2 --groups core,env,evidence --no-open
  wgk view cx.json --system both        # the implementation's decision beside the model's
  wgk view cx.json --html cx.html       # one self-contained file, no server
  wgk view --tasks 1 --dot near.dot --radius 2
  wgk view cx.json --dot path.dot       # the path and its alternatives
The page listens on 127.0.0.1 only (a free port unless --port); Ctrl-C stops it.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", nargs="?", metavar="TRACE",
                   help="a wgk-trace/1 file (a trace, a counterexample of wgk check --out or the "
                        "fuzzer); without it, the initial state of the bounded instance")
    add_instance_arguments(p, tasks=1, keys_help="enumerated requests carry idempotency keys "
                                                 "(explores the journal)")
    p.set_defaults(tasks=None)  # a trace's own number of tasks, else 1
    p.add_argument("--mutant", metavar="NAME",
                   help="decide the steps by a named mutant ('model' for the model; default: the "
                        "mutant named in a counterexample's provenance, else the model)")
    p.add_argument("--system", choices=("model", "both"), default="model",
                   help="'both' also shows the implementation's decision for every step")
    p.add_argument("--html", metavar="FILE", help="write a self-contained report and exit")
    p.add_argument("--dot", metavar="FILE", help="write a labelled, bounded Graphviz graph and exit")
    p.add_argument("--around", type=int, metavar="K",
                   help="with --dot: the neighbourhood of state K of the path (default for an "
                        "instance: state 0; for a trace: the path and its alternatives)")
    p.add_argument("--radius", type=int, default=2, help="with --dot --around: steps from it (default 2)")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    p.add_argument("--no-open", action="store_true", help="print the URL, do not open a browser")


def open_session(args: argparse.Namespace):
    """The session the arguments describe (bad input is a UsageError)."""
    from wgk.conformance.view.session import Session, SessionError, mutant_of
    trace = None
    if args.trace is not None:
        try:
            trace = load_trace(args.trace)
        except TraceError as e:
            raise UsageError(str(e)) from None
    if args.tasks is None:
        args.tasks = len(trace.graph["tasks"]) if trace is not None else 1
    most = 8 if trace is None else max(8, len(trace.graph["tasks"]))
    inst = instance_args.instance_from(args, max_tasks=most, too_many="--tasks above 8 is beyond a "
                                                                      "bounded instance")
    try:
        if trace is None:
            mutant = None if args.mutant in (None, "model") else args.mutant
            return Session.from_instance(inst, mutant)
        mutant = args.mutant if args.mutant is not None else mutant_of(trace)
        mutant = None if mutant == "model" else mutant
        return Session.from_trace(trace, inst, mutant)
    except SessionError as e:
        raise UsageError(str(e)) from None


def run(args: argparse.Namespace) -> int:
    if args.radius < 0 or not 0 <= args.port <= 65535:
        raise UsageError("--radius must be at least 0 and --port between 0 and 65535")
    session = open_session(args)
    if args.dot or args.html:
        if args.dot:
            write_text(args.dot, dot_of(session, args))
            print(f"graph written to {args.dot}")
        if args.html:
            from wgk.conformance.view.static import write_report
            write_report(session, args.html, impl_of(session, args.system))
            print(f"report written to {args.html}")
        return 0
    return serve(session, args)


def dot_of(session, args: argparse.Namespace) -> str:
    from wgk.conformance.view.dot import neighbourhood, path_with_alternatives
    from wgk.conformance.view.session import SessionError
    if args.around is None and session.entries:
        return path_with_alternatives(session)
    try:
        return neighbourhood(session, args.around or 0, args.radius)
    except SessionError as e:
        raise UsageError(f"--around: {e}") from None


def impl_of(session, system: str):
    if system != "both":
        return None
    from wgk.conformance.view.impl import impl_decisions
    return impl_decisions(session)


def serve(session, args: argparse.Namespace) -> int:
    from wgk.conformance.view.api import Api
    from wgk.conformance.view.ask import ask
    from wgk.conformance.view.server import serve as make_server, url_of
    try:
        server = make_server(Api(session, system=args.system, ask=ask), args.port)
    except OSError as e:
        raise UsageError(f"--port {args.port}: {e.strerror or e}") from None
    url = url_of(server)
    print(f"wgk view: {session.title}\n  {url}\n  Ctrl-C stops the page", flush=True)
    if not args.no_open:
        webbrowser.open(url)
    # Ctrl-C stops the page even when the shell started it with SIGINT ignored (a background job)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("wgk view: stopped", file=sys.stderr)
    finally:
        server.server_close()
    return 0
