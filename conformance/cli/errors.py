"""Errors every command maps to exit code 2 with one line on stderr."""


class UsageError(Exception):
    """Bad usage or bad input: printed as one line, exit code 2."""
