"""The demo: the kernel end to end on a real git repository with real worker processes.

A three-task chain (schema -> api -> ui). This process is the dispatcher, the
daemon (convergence) and the validator; each worker is a separate process
(``python -m wgk.impl.demo.worker ...``) that finds its attempt in
the shared database, edits and commits in its own worktree, heartbeats and
submits. Along the way:

- schema goes through the whole completion transaction to Done; the target
  moves by a real compare-and-swap;
- api's first worker is killed (SIGKILL) mid-task: convergence proves the exact
  owner's death by its birth time, declares the attempt lost with its dirty
  work retained under an immutable ref, and a second attempt imports that work
  and finishes it;
- ui's target branch is moved by someone else between the effect's write-ahead
  intent and its CAS: the land is refused, the transaction goes to needs-repair
  with the candidate retained (no rebase, no force); the worker rebases its own
  work, revises, and the new candidate lands.

``world`` holds the tasks and small helpers, ``worker`` the worker process,
``story`` the dispatcher's story and ``checks`` the promises checked at the
end; the command is ``wgk.impl.cli.demo``. The demo exits 0 only if the end state is exactly what the kernel promised;
every promise is checked, not printed.
"""
