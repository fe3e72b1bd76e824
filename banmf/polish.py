"""Exact Boolean polish: alternating Boolean block coordinate descent on W and H."""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from ._kernels.polish import best_row_codes, subset_sums
from ._validation import check_binary_matrix, check_boolean_factors
from .booleanize import _error

__all__ = ["Polished", "polish"]


@dataclass(frozen=True)
class Polished:
    """Result of :func:`polish`: Boolean W (n, k), H (k, m), the final error, the error after
    every round (``history[0]`` is the starting error) and the number of rounds run."""

    W: np.ndarray
    H: np.ndarray
    error: int
    history: list
    rounds: int


def _codes(B: np.ndarray) -> np.ndarray:
    """Rows of a bool matrix (r, k) as k-bit integers."""
    return (B.astype(np.int64) << np.arange(B.shape[1], dtype=np.int64)).sum(axis=1)


def _decode(codes: np.ndarray, k: int) -> np.ndarray:
    return ((codes[:, None] >> np.arange(k, dtype=np.int64)) & 1).astype(bool)


def polish(X, W, H, *, max_rounds: int = 100, max_k: int = 16) -> Polished:
    """Improve Boolean factors by exact alternating row and column updates.

    With H fixed, every row of W independently takes the k-bit pattern with the lowest row
    error (over all 2^k patterns, counted on the support of X with a subset-sum transform of the
    columns' codes); then every column of H likewise with W fixed. A row or column changes only
    on a strict improvement, so the error never rises and the loop ends; it stops when a round
    changes nothing or after ``max_rounds``. Cost per round O(nnz + (n + m)·k·2^k).

    Parameters
    ----------
    X : array-like or sparse of shape (n, m)
    W : array-like of shape (n, k), Boolean
    H : array-like of shape (k, m), Boolean
    max_rounds : int, default 100
    max_k : int, default 16
        Refuse larger k (the 2^k patterns per row would dominate).

    Returns
    -------
    Polished

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]])
    >>> polish(X, [[1, 0], [0, 0], [0, 1]], [[1, 1, 0], [0, 0, 1]]).error
    0
    """
    X = check_binary_matrix(X)
    Wb, Hb = check_boolean_factors(W, H, X.shape)
    k = Wb.shape[1]
    if k > max_k:
        raise ValueError(f"exact polish enumerates 2^k patterns per row: k={k} exceeds max_k={max_k}")
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, (int, np.integer)) or max_rounds < 0:
        raise ValueError(f"max_rounds must be a nonnegative integer, got {max_rounds!r}")
    return _polish(X, Wb, Hb, int(max_rounds))


def _polish(X, Wb: np.ndarray, Hb: np.ndarray, max_rounds: int = 100) -> Polished:
    """:func:`polish` on a canonical support mask and Boolean factors (trusted)."""
    n, m = X.shape
    k = Wb.shape[1]
    Xt = check_binary_matrix(X.T)
    a, b = _codes(Wb), _codes(Hb.T)
    blocks_rows = max(1, min(4 * numba.get_num_threads(), n))
    blocks_cols = max(1, min(4 * numba.get_num_threads(), m))
    history = [_error(X, Wb, Hb)]
    rounds = 0
    for rounds in range(1, max_rounds + 1):
        F = np.bincount(b, minlength=1 << k).astype(np.int64)
        subset_sums(F, k)
        changed = best_row_codes(X.indptr, X.indices, b, F, k, m, a, blocks_rows)
        F = np.bincount(a, minlength=1 << k).astype(np.int64)
        subset_sums(F, k)
        changed += best_row_codes(Xt.indptr, Xt.indices, a, F, k, n, b, blocks_cols)
        history.append(_error(X, _decode(a, k), np.ascontiguousarray(_decode(b, k).T)))
        if changed == 0:
            break
    W_out, H_out = _decode(a, k), np.ascontiguousarray(_decode(b, k).T)
    return Polished(W_out, H_out, history[-1], history, rounds)
