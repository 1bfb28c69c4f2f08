"""Recording what a section's child processes run, for the gate's cache (``gate_cache``).

A section whose code runs in child processes (the environment contract's, the races', the
file modes' and the hostile inputs' children) is keyed by what it ran only if what its
children ran is recorded too. While such a section runs, ``gate_cache.recording_children``
puts a folder holding a copy of this file, named ``sitecustomize.py``, first on
``PYTHONPATH`` and names an output folder in ``WGK_GATE_RECORD``: every Python child then
imports it at start-up (``site`` does), and ``start`` notes each function of wgk's sources
it runs. A forked child is started the same way from an ``os.register_at_fork`` hook.

Each child writes its own file (named by its process id) as it goes, one line per function
the first time it runs, flushed at once: a child killed by ``SIGKILL`` has written all it
ran until then. A child that starts another Python child so that this file is not loaded
(an environment without the folder, ``-I``, ``-E`` or ``-S``) writes a file ``!unsure``:
the parent then keys the section by every source file (``gate_cache``).

Only the standard library is used here: the file is imported before anything else in the
child, by name ``sitecustomize``, outside wgk's packages.
"""
import json
import os
import subprocess
import sys
import threading

#: The environment variable naming the output folder, and the one naming the roots of wgk's
#: sources (a JSON list of folder prefixes: only functions from there are written).
OUT, ROOTS = "WGK_GATE_RECORD", "WGK_GATE_RECORD_ROOTS"
#: The environment variable naming the folder this file lies in as ``sitecustomize.py``.
HOOK = "WGK_GATE_RECORD_HOOK"

_started = False


def start(out: str, roots: list[str]) -> None:
    """Write every function of the sources under ``roots`` that runs from now on (in every
    thread of this process) to a file of its own in ``out``."""
    global _started
    _started = True
    prefixes = tuple(roots)
    f = open(os.path.join(out, f"{os.getpid()}-{os.urandom(4).hex()}.rec"), "a",
             encoding="utf-8")
    seen = set()
    lock = threading.Lock()

    def tracer(frame, event, arg):
        code = frame.f_code
        if code not in seen:
            seen.add(code)
            name = os.path.realpath(code.co_filename)
            if name.startswith(prefixes):
                with lock:
                    f.write(f"{name}\0{code.co_qualname}\n")
                    f.flush()

    sys.settrace(tracer)
    threading.settrace(tracer)


def unsure(out: str, why: str) -> None:
    """Tell the parent a child may have run without this file (then nothing is trusted)."""
    try:
        with open(os.path.join(out, "!unsure"), "a", encoding="utf-8") as f:
            f.write(why.replace("\n", " ") + "\n")
    except OSError:
        pass


def is_python(args, executable, shell) -> bool:
    """Whether a child started with these arguments runs Python (a shell command naming
    Python counts)."""
    if shell:
        text = args if isinstance(args, (str, bytes)) else " ".join(map(str, args))
        return "python" in (text.decode(errors="replace") if isinstance(text, bytes) else text)
    argv = _argv(args)
    program = str(executable) if executable else argv[0]
    return os.path.basename(program).startswith("python") or \
        os.path.realpath(program) == os.path.realpath(sys.executable)


def _argv(args) -> list[str]:
    argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
    return [a.decode(errors="replace") if isinstance(a, bytes) else str(a) for a in argv]


def loses_hook(args, executable, env, shell) -> str | None:
    """Why a Python child started with these arguments may not load this file (None: it
    loads it, or it is not Python)."""
    if not is_python(args, executable, shell):
        return None
    if shell:
        return "a shell command starting Python"
    for a in _argv(args)[1:]:
        if a in ("-c", "-m") or not a.startswith("-") or a.startswith("--"):
            break
        if set(a[1:]) & set("IES"):
            return f"a Python child with {a}"
    if env is not None:
        hook = os.environ.get(HOOK, "")
        if env.get(OUT) != os.environ.get(OUT) or \
                hook not in str(env.get("PYTHONPATH", "")).split(os.pathsep):
            return "a Python child with an environment of its own"
    return None


def watch() -> None:
    """Check every child this process starts through ``subprocess`` (``Popen`` and all that
    uses it): one that may not load this file is written as ``!unsure``."""
    real = subprocess.Popen._execute_child
    if getattr(real, "_wgk_watched", False):
        return
    code = real.__code__
    names = code.co_varnames[1:code.co_argcount]

    def execute_child(self, *a, **kw):
        out = os.environ.get(OUT)
        if out:
            given = dict(zip(names, a), **kw)
            args, executable, shell = given.get("args"), given.get("executable"), \
                given.get("shell")
            why = loses_hook(args, executable, given.get("env"), shell)
            if why is not None:
                unsure(out, why)
        return real(self, *a, **kw)
    execute_child._wgk_watched = True
    subprocess.Popen._execute_child = execute_child


def _forked() -> None:
    out = os.environ.get(OUT)
    if out and _started:
        start(out, json.loads(os.environ.get(ROOTS, "[]")))


def _as_site() -> None:
    out = os.environ.get(OUT)
    if not out:
        return
    start(out, json.loads(os.environ.get(ROOTS, "[]")))
    watch()
    os.register_at_fork(after_in_child=_forked)
    # another sitecustomize further on the path still runs
    here = os.environ.get(HOOK)
    try:
        import importlib.machinery
        import importlib.util
        spec = importlib.machinery.PathFinder.find_spec(
            "sitecustomize", [p for p in sys.path if p and os.path.realpath(p) !=
                              os.path.realpath(here or "")])
        if spec is not None and spec.loader is not None:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
    except Exception as e:            # noqa: BLE001 -- as site reports a broken sitecustomize
        sys.stderr.write(f"Error in sitecustomize: {type(e).__name__}: {e}\n")


if __name__ == "sitecustomize":
    _as_site()
