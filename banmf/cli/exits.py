"""The command line's exit codes, which errors are the user's, and the error that says the
user's usage or options are wrong."""

from __future__ import annotations

from ..exceptions import BanmfError

EXIT_OK, EXIT_INTERNAL, EXIT_USAGE = 0, 1, 2
#: What a shell reports for a command whose output pipe was closed (128 + SIGPIPE).
EXIT_BROKEN_PIPE = 141


class UsageError(BanmfError):
    """Bad usage or input: reported in one line with exit code 2."""


#: The errors that are the user's, reported in one line with exit code 2: banmf's own errors
#: about the input and options (:class:`banmf.exceptions.BanmfError`, :class:`UsageError`
#: among them) and the file system's about the paths given. Anything else is banmf's bug.
USER_ERRORS = (
    BanmfError,
    FileNotFoundError,
    IsADirectoryError,
    NotADirectoryError,
    PermissionError,
    FileExistsError,
)
