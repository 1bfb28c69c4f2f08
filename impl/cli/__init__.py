"""The implementation's command line: ``wgk kernel`` (the operator's CLI) and ``wgk demo``.

Each command module (``kernel``, ``demo``) defines ``HELP``, ``EXAMPLES``,
``add_arguments(parser)`` and ``run(args) -> int``; bad input raises
``output.UsageError`` (one line, exit code 2). Nothing here imports the harness.
"""
