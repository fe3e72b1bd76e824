"""The combination's kernel: what adding each candidate factor of a pool does to the error."""

import numpy as np
from numba import njit, prange

from .variants import kernel


@njit(cache=True, nogil=True, inline="always")
def _lower_bound(indices, lo, hi, j):
    """The first position in ``indices[lo:hi]`` (sorted) holding ``j`` or more."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if indices[mid] < j:
            lo = mid + 1
        else:
            hi = mid
    return lo


@kernel()
def pool_gains(
    indptr,
    indices,
    cindptr,
    cindices,
    mode,
    row_ptr,
    row_idx,
    col_ptr,
    col_idx,
    row_codes,
    col_codes,
    skip,
    out,
):
    """``out[f]``: the change in Hamming error from adding candidate f to a selection.

    Candidate f is the rectangle of rows ``row_idx[row_ptr[f]:row_ptr[f + 1]]`` (local to this
    block of rows) by columns ``col_idx[col_ptr[f]:col_ptr[f + 1]]`` (sorted). The selection
    covers cell (i, j) when ``row_codes[i] & col_codes[j] & ~skip`` is not zero (its slots as
    bits in words; ``skip``: slots left out). Each cell of f that the selection leaves uncovered
    counts -1 if it is a one of X (``indptr``, ``indices``: the block's CSR support, sorted
    rows), else +1 if it is an observed zero: ``mode`` 0, every cell not a one; 1, every cell
    but the unknown ``cindices`` (their CSR in ``cindptr``); 2, only the observed zeros
    ``cindices``. Integer counts over the block's rows: blocks' results add up to the whole's.
    Cost O(area · log(row length)) per candidate, one candidate per parallel step.
    """
    words = row_codes.shape[1]
    for f in prange(len(out)):
        total = np.int64(0)
        c0, c1 = col_ptr[f], col_ptr[f + 1]
        for r in range(row_ptr[f], row_ptr[f + 1]):
            i = row_idx[r]
            selected = False
            for w in range(words):
                if row_codes[i, w] & ~skip[w]:
                    selected = True
            p, p1 = indptr[i], indptr[i + 1]
            q, q1 = cindptr[i], cindptr[i + 1]
            for c in range(c0, c1):
                j = col_idx[c]
                if selected:
                    covered = False
                    for w in range(words):
                        if row_codes[i, w] & col_codes[j, w] & ~skip[w]:
                            covered = True
                    if covered:
                        continue
                p = _lower_bound(indices, p, p1, j)
                if p < p1 and indices[p] == j:
                    total -= 1
                    continue
                if mode == 0:
                    total += 1
                    continue
                q = _lower_bound(cindices, q, q1, j)
                listed = q < q1 and cindices[q] == j
                if listed == (mode == 2):
                    total += 1
        out[f] = total


#: Rows per parallel step of :func:`set_majority` (its counts are allocated once a step).
MAJORITY_ROWS = 4096


@kernel()
def set_majority(indptr, indices, cindptr, cindices, mode, S, sizes, out):
    """``out[i, t]``: whether row i holds more ones than observed zeros in the columns of set
    t (``S[:, t]``, bool m × T; ``sizes[t]`` its columns).

    The rows' ones are the CSR support ``indptr``, ``indices``; ``mode`` says what the cells
    ``cindices`` (their CSR in ``cindptr``) are: 0, none (every other cell an observed zero:
    ``2·ones > size``); 1, the unknown cells (``2·ones + unknown > size``); 2, the observed
    zeros (``ones > zeros``). Integer counts, one pass over the rows for every set at once;
    rows in steps of :data:`MAJORITY_ROWS`, each row on its own (any thread count, the same).
    """
    n, sets = out.shape
    for b in prange((n + MAJORITY_ROWS - 1) // MAJORITY_ROWS):
        ones = np.zeros(sets, dtype=np.int64)
        cells = np.zeros(sets, dtype=np.int64)
        for i in range(b * MAJORITY_ROWS, min(n, (b + 1) * MAJORITY_ROWS)):
            ones[:] = 0
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                for t in range(sets):
                    ones[t] += S[j, t]
            if mode != 0:
                cells[:] = 0
                for q in range(cindptr[i], cindptr[i + 1]):
                    j = cindices[q]
                    for t in range(sets):
                        cells[t] += S[j, t]
            for t in range(sets):
                if mode == 0:
                    out[i, t] = 2 * ones[t] > sizes[t]
                elif mode == 1:
                    out[i, t] = 2 * ones[t] + cells[t] > sizes[t]
                else:
                    out[i, t] = ones[t] > cells[t]


@kernel()
def set_counts(indptr, indices, S, out):
    """``out[i, t]``: the entries of CSR row i (``indptr``, ``indices``) in set t (``S[:, t]``,
    bool); one pass over the rows for every set at once, each row on its own."""
    sets = out.shape[1]
    for i in prange(len(indptr) - 1):
        for t in range(sets):
            out[i, t] = 0
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            for t in range(sets):
                out[i, t] += S[j, t]
