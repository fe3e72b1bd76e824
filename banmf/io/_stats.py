"""What ``banmf info`` says of a support mask, beyond its shape and density."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def matrix_stats(X: sp.csr_array) -> dict:
    """What ``banmf info`` says of a support mask: empty rows and columns, duplicate rows, the
    largest row and column counts.

    Time and memory O(nnz log nnz) beyond X itself: nothing of the shape's size (a header of
    10^9 × 10^9 with two entries answers at once).

    Parameters
    ----------
    X : csr_array of shape (n, m), canonical support mask

    Returns
    -------
    dict
        ``empty_rows``, ``empty_columns``, ``duplicate_rows`` (rows equal to an earlier row,
        empty ones included), ``max_row_nnz``, ``max_column_nnz``.
    """
    n, m = X.shape
    # The row of each entry (a binary search in the row pointers), not a count per row.
    # (in the pointers' own dtype: another would make searchsorted copy them)
    rows = np.searchsorted(X.indptr, np.arange(X.nnz, dtype=X.indptr.dtype), side="right") - 1
    starts = np.flatnonzero(np.concatenate(([True], rows[1:] != rows[:-1]))) if X.nnz else rows
    row_nnz = np.diff(np.append(starts, X.nnz))
    cols, col_nnz = np.unique(X.indices, return_counts=True)
    seen, duplicates = set(), 0
    for start, count in zip(starts.tolist(), row_nnz.tolist()):  # the nonempty rows only
        key = X.indices[start : start + count].tobytes()
        duplicates += key in seen
        seen.add(key)
    empty_rows = n - len(starts)
    return {
        "empty_rows": int(empty_rows),
        "empty_columns": int(m - len(cols)),
        "duplicate_rows": duplicates + max(empty_rows - 1, 0),
        "max_row_nnz": int(row_nnz.max()) if X.nnz else 0,
        "max_column_nnz": int(col_nnz.max()) if X.nnz else 0,
    }
