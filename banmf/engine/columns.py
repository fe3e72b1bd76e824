"""The columns of X as factors: the "columns" start (the k columns with the most ones, each
with all its rows: what greedy methods find on very sparse data) and a swap's new factor (a
column's ones that no other factor covers).
"""

from __future__ import annotations

import numpy as np

__all__ = ["column_factors", "columns_as_factors", "swap_rows", "top_columns"]


def column_factors(Xt, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Boolean W (n, k), H (k, m) whose factor l is the column of X with the l-th most ones
    (ties: the lower index) with all its rows; factors past the m-th stay empty. ``Xt`` is the
    support mask of Xᵀ (trusted)."""
    return columns_as_factors(Xt, top_columns(np.diff(Xt.indptr), k), k)


def top_columns(counts: np.ndarray, k: int) -> np.ndarray:
    """The (at most) k columns with the most ones, most first (ties: the lower index)."""
    return np.argsort(-counts, kind="stable")[: min(k, len(counts))]


def columns_as_factors(Xt, top: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Boolean W (n, k), H (k, m) whose factor l is column ``top[l]`` of X with all its rows
    (``Xt``: the mask of Xᵀ, or of a row block's transpose for the block's rows of W)."""
    m, n = Xt.shape
    W = np.zeros((n, k), dtype=bool)
    H = np.zeros((k, m), dtype=bool)
    for l, j in enumerate(top):
        W[Xt.indices[Xt.indptr[j] : Xt.indptr[j + 1]], l] = True
        H[l, j] = True
    return W, H


def swap_rows(Xt, W: np.ndarray, Ht: np.ndarray, l: int, j: int) -> np.ndarray:
    """The rows of factor l after swapping in column j: those whose one in column j no other
    factor covers (rows are independent: a row block answers for its own rows)."""
    ones = Xt.indices[Xt.indptr[j] : Xt.indptr[j + 1]]
    others = Ht[j].copy()
    others[l] = False
    return ones[~(W[ones] & others).any(axis=1)]
