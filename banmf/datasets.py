"""Synthetic Boolean data (ALGORITHMS.md §6)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ._validation import _csr_from_parts, check_n_components, check_random_state, support_mask
from .booleanize import boolean_product

__all__ = ["make_boolean", "make_sparse_uniform", "planted_probability"]


def planted_probability(density: float, k: int) -> float:
    """Bernoulli parameter p of the factors so that P(X_ij = 1) = 1 − (1 − p²)^k = density."""
    return float(np.sqrt(1.0 - (1.0 - density) ** (1.0 / k)))


def make_boolean(
    n: int,
    m: int,
    k: int,
    density: float,
    noise: float = 0.0,
    *,
    noise_kind: str = "iid",
    random_state=None,
) -> tuple[sp.csr_array, np.ndarray, np.ndarray]:
    """The paper's planted generator: X = W⊗H with iid Bernoulli(p) factors, plus flip noise.

    Parameters
    ----------
    n, m : int
        Shape of X.
    k : int
        Planted rank (the Boolean rank of the noiseless X is at most k).
    density : float in (0, 1)
        Expected density of the noiseless X; p = sqrt(1 − (1 − density)^(1/k)).
    noise : float in [0, 1), default 0
        Flip probability ("iid") or fraction of the n·m entries flipped ("count").
    noise_kind : {"iid", "count"}
        iid flips, or exactly ``int(noise·n·m)`` flips at distinct positions (as T-ELF does).
    random_state : None, int or Generator

    Returns
    -------
    X : csr_array of shape (n, m), bool
    W : ndarray of shape (n, k), bool
    H : ndarray of shape (k, m), bool

    Examples
    --------
    >>> X, W, H = make_boolean(50, 50, 5, density=0.5, random_state=0)
    >>> X.shape, W.shape, H.shape
    ((50, 50), (50, 5), (5, 50))
    """
    for name, v in (("n", n), ("m", m)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    k = check_n_components(k, (max(n, k), max(m, k)))
    if not 0.0 < density < 1.0:
        raise ValueError(f"density must be in (0, 1), got {density!r}")
    if not 0.0 <= noise < 1.0:
        raise ValueError(f"noise must be in [0, 1), got {noise!r}")
    if noise_kind not in ("iid", "count"):
        raise ValueError(f"noise_kind must be 'iid' or 'count', got {noise_kind!r}")
    rng = check_random_state(random_state)
    p = planted_probability(density, k)
    W = rng.random((n, k)) < p
    H = rng.random((k, m)) < p
    X = boolean_product(W, H)
    if noise > 0:
        if noise_kind == "iid":
            flips = np.flatnonzero(rng.random(n * m) < noise)
        else:
            flips = rng.choice(n * m, size=int(noise * n * m), replace=False)
        rows, cols = X.nonzero()
        clean = rows.astype(np.int64) * m + cols
        noisy = np.setxor1d(clean, flips)
        X = support_mask(noisy // m, noisy % m, (n, m))
    return X, W, H


def make_sparse_uniform(n: int, m: int, nnz: int, *, random_state=None) -> sp.csr_array:
    """A uniformly random support mask with about ``nnz`` nonzeros, built without a dense array.

    Every row draws ``nnz / n`` column indices (the remainder spread over the first rows);
    repeats within a row are dropped, so the result has slightly fewer than ``nnz`` nonzeros
    when rows are dense. Memory is O(nnz).

    Examples
    --------
    >>> X = make_sparse_uniform(1000, 200, 5000, random_state=0)
    >>> X.shape, 4900 < X.nnz <= 5000
    ((1000, 200), True)
    """
    for name, v in (("n", n), ("m", m), ("nnz", nnz)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{name} must be a nonnegative integer, got {v!r}")
    if n < 1 or m < 1:
        raise ValueError(f"n and m must be positive, got {n} and {m}")
    if nnz > n * m:
        raise ValueError(f"nnz={nnz} exceeds n*m={n * m}")
    rng = check_random_state(random_state)
    per_row = np.full(n, nnz // n, dtype=np.int64)
    per_row[: nnz % n] += 1
    # One sort of row-major keys orders rows and columns at once (cheaper than a lexsort).
    keys = np.repeat(np.arange(n, dtype=np.int64) * m, per_row)
    keys += rng.integers(0, m, size=nnz, dtype=np.int64)
    keys.sort()
    keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))] if nnz else keys
    idx_dtype = np.int32 if max(n, m, nnz) < np.iinfo(np.int32).max else np.int64
    indptr = np.zeros(n + 1, dtype=idx_dtype)
    np.cumsum(np.bincount(keys // m, minlength=n), out=indptr[1:])
    return _csr_from_parts(indptr, (keys % m).astype(idx_dtype), (n, m))
