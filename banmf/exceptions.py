"""The warnings and errors banmf raises, in one place."""

from __future__ import annotations

__all__ = [
    "ConvergenceWarning",
    "DataWarning",
    "Interrupted",
    "InvalidParameterError",
    "NotFittedError",
    "OutputNotReplaced",
]


class ConvergenceWarning(UserWarning):
    """``max_iter`` was reached before the ``tol`` criterion was met."""


class DataWarning(UserWarning):
    """A data file has something that the reader read past, e.g. duplicate entries (counted
    once). The message is one line naming the file."""


class InvalidParameterError(ValueError, TypeError):
    """An estimator parameter is outside its declared constraints (a ``ValueError`` and a
    ``TypeError``, as in scikit-learn, so that either ``except`` catches it)."""


class NotFittedError(ValueError, AttributeError):
    """Raised when a fitted attribute or method is used before ``fit``."""


class OutputNotReplaced(PermissionError):
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
