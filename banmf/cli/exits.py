"""The command line's exit codes, and the error that says the user's input or options are wrong."""

from __future__ import annotations

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2
#: What a shell reports for a command whose output pipe was closed (128 + SIGPIPE).
EXIT_BROKEN_PIPE = 141


class UsageError(Exception):
    """Bad usage or input: reported in one line with exit code 2."""
