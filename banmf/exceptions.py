"""The warnings and errors banmf raises, in one place."""

from __future__ import annotations

import os
import sys
import warnings

__all__ = [
    "BanmfError",
    "ConvergenceWarning",
    "DataWarning",
    "InputError",
    "Interrupted",
    "InvalidParameterError",
    "MissingDependencyError",
    "NotFittedError",
    "OutputNotReplaced",
    "warn_user",
]


class ConvergenceWarning(UserWarning):
    """``max_iter`` was reached before the ``tol`` criterion was met."""


class DataWarning(UserWarning):
    """A data file has something that the reader read past, e.g. duplicate entries (counted
    once). The message is one line naming the file."""


class BanmfError(Exception):
    """The base of the errors that are about the caller's input or options, not banmf's own
    code: the data, a file, a parameter, an unfitted model, an output that cannot be written.

    The command line reports these as the user's mistake (exit 2); anything else that escapes
    is a bug (exit 1). Each subclass also derives from the built-in type that Python code would
    expect (``ValueError``, ``TypeError``, ...), so that ``except ValueError`` keeps working.

    ``command_line``, when given, is the same message in the command line's words (``-k``
    for ``n_components``, ``--criteria mdl`` for ``criteria=['mdl']``): the command line says
    it instead of the library's.
    """

    def __init__(self, *args, command_line: str | None = None):
        super().__init__(*args)
        self.command_line = command_line


class InputError(BanmfError, ValueError, TypeError):
    """The data, a mask, a label list or a file is not something banmf can take; the message
    names the problem and where (the argument, the file and line). A ``ValueError`` and a
    ``TypeError``, so that either ``except`` catches it."""


class InvalidParameterError(BanmfError, ValueError, TypeError):
    """An estimator parameter is outside its declared constraints (a ``ValueError`` and a
    ``TypeError``, as in scikit-learn, so that either ``except`` catches it)."""


class MissingDependencyError(BanmfError, ImportError):
    """An optional dependency that the call needs is not installed (matplotlib for plots,
    anndata for ``.h5ad`` files, Dask for :mod:`banmf.distributed`); the message says what to
    install. An ``ImportError``, so that either ``except`` catches it."""


class NotFittedError(BanmfError, ValueError, AttributeError):
    """Raised when a fitted attribute or method is used before ``fit``."""


class OutputNotReplaced(BanmfError, PermissionError):
    """The finished output could not be renamed over its destination (an immutable file, say):
    it is kept beside it under another name, ``saved`` (a ``PermissionError``, so that the
    command line reports it in one line)."""

    def __init__(self, message: str, saved):
        super().__init__(message)
        self.saved = saved


class Interrupted(KeyboardInterrupt):
    """Ctrl-C ended :func:`banmf.factorize` early: ``result`` is the best factorization it
    had (a ``KeyboardInterrupt``, so that a loop of fits stops all the same)."""

    def __init__(self, result):
        super().__init__("interrupted: the best result so far is in .result")
        self.result = result


# banmf/: a warning points past every frame under it.
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """Warn, pointing at the first caller outside banmf (the code that called banmf), however
    deep in banmf the warning arose."""
    level, frame = 2, sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
