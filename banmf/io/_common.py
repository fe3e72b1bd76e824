"""What the readers share: one-line errors naming the file and the line, DataWarnings pointed
at the caller, a support mask from a file's coordinates."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..data.masks import support_mask_from_keys
from ..data.validation import entries, format_value
from ..exceptions import DataWarning, InputError, warn_user


def fail(path, line_no, problem):
    """Raise the one-line error about a file: ``PATH, line N: problem`` (no line: ``PATH: problem``)."""
    where = f"{path}, line {line_no}" if line_no is not None else str(path)
    raise InputError(f"{where}: {problem}")


def quote(text: str, limit: int = 40) -> str:
    """``repr`` of file content for a message, cut short (a line may be megabytes long)."""
    return repr(text if len(text) <= limit else text[:limit] + "…")


def not_binary(where: str, value, row, col, count: int) -> str:
    """The message for entries other than 0/1 in a file (positions counted from 1; a ``str``
    value is shown as it is)."""
    return (
        f"{where}: value {value if isinstance(value, str) else format_value(value)} at row {row}, "
        f"column {col} is not 0 or 1 "
        f"({entries(count, 'is not 0 or 1')} in the file); binarize the data first"
    )


def warn_data(message: str) -> None:
    """A :class:`DataWarning` pointed at the caller of the reader."""
    warn_user(message, DataWarning)


def warn_duplicates(path, count: int) -> None:
    warn_data(f"{path}: {count} duplicate {'entry' if count == 1 else 'entries'} counted once")


def support_from_coords(
    path, rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int]
) -> sp.csr_array:
    """Support mask of 0-based (row, column) pairs of a file's ones; repeats are counted once
    with a :class:`DataWarning`."""
    keys = rows.astype(np.int64, copy=False) * shape[1] + cols
    unique = np.unique(keys)
    if len(unique) != len(keys):
        warn_duplicates(path, len(keys) - len(unique))
    return support_mask_from_keys(unique, shape)
