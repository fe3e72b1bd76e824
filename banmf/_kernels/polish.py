"""Exact Boolean row updates for the polish (alternating Boolean block coordinate descent)."""

import numpy as np
from numba import njit, prange


@njit(cache=True, nogil=True)
def subset_sums(counts, k):
    """In place: ``counts[s] <- sum of counts[t] over the subsets t of s`` (zeta transform)."""
    size = 1 << k
    for bit in range(k):
        step = 1 << bit
        for s in range(size):
            if s & step:
                counts[s] += counts[s ^ step]


@njit(parallel=True, cache=True, nogil=True)
def best_row_codes(indptr, indices, col_codes, F, k, m, codes, n_blocks):
    """Give every row the k-bit pattern with the lowest Hamming error; change only on strict gain.

    ``col_codes[j]`` is column j of the other factor as k bits and ``F[s]`` the number of columns
    whose code is a subset of s (all m columns). A row with pattern a leaves uncovered exactly
    the columns with code ⊆ ~a, so with S_i its support and F_i the same count over S_i only,
    its error is ``m − |S_i| − F(~a) + 2·F_i(~a)``. ``codes`` (n,) is updated in place; returns
    how many rows changed.
    """
    n = len(indptr) - 1
    size = 1 << k
    full = size - 1
    changed = np.zeros(n_blocks, dtype=np.int64)
    for b in prange(n_blocks):
        Fi = np.zeros(size, dtype=np.int64)
        for i in range(b * n // n_blocks, (b + 1) * n // n_blocks):
            lo, hi = indptr[i], indptr[i + 1]
            Fi[:] = 0
            for p in range(lo, hi):
                Fi[col_codes[indices[p]]] += 1
            subset_sums(Fi, k)
            base = m - (hi - lo)
            current = full & ~codes[i]
            best_s = current
            best = base - F[current] + 2 * Fi[current]
            for s in range(size):
                e = base - F[s] + 2 * Fi[s]
                if e < best:
                    best = e
                    best_s = s
            if best_s != current:
                codes[i] = full & ~best_s
                changed[b] += 1
    return changed.sum()
