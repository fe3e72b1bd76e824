"""Kernels for the greedy cover methods (ASSO, GreConD) on bit-packed rows and columns."""

import numpy as np
from numba import njit, prange

from .boolean import popcount64
from .variants import kernel

_ONE = np.uint64(1)


@njit(cache=True, nogil=True, inline="always")
def _in_row(indptr, indices, i, j):
    """Is j among the (sorted) column indices of row i? Binary search."""
    lo, hi = indptr[i], indptr[i + 1]
    while lo < hi:
        mid = (lo + hi) >> 1
        if indices[mid] < j:
            lo = mid + 1
        else:
            hi = mid
    return lo < indptr[i + 1] and indices[lo] == j


@njit(cache=True, nogil=True, inline="always")
def _covered(used, fac_mask, i, j):
    """Does a factor used by row i contain column j? (bit l of used[i] / fac_mask[j]: factor l)"""
    for w in range(used.shape[1]):
        if used[i, w] & fac_mask[j, w]:
            return True
    return False


@njit(cache=True, nogil=True, inline="always")
def _asso_gain(indptr, indices, used, fac_mask, i, cand_cols, lo, hi, w_pos, w_neg):
    gain = 0.0
    for q in range(lo, hi):
        j = cand_cols[q]
        if not _covered(used, fac_mask, i, j):
            gain += w_pos if _in_row(indptr, indices, i, j) else -w_neg
    return gain


@njit(cache=True, nogil=True, inline="always")
def _score_rows(rows, start, stop, seen, c, indptr, indices, used, fac_mask, cand_cols, lo, hi, w_pos, w_neg):
    """Positive gains of candidate c over ``rows[start:stop]``, skipping rows already scored."""
    total = 0.0
    for r in range(start, stop):
        i = rows[r]
        if seen[i] == c:
            continue
        seen[i] = c
        gain = _asso_gain(indptr, indices, used, fac_mask, i, cand_cols, lo, hi, w_pos, w_neg)
        if gain > 0:
            total += gain
    return total


@kernel()
def asso_scores(cand_ptr, cand_cols, colptr, colrows, indptr, indices, used, fac_mask,
                fac_ptr, fac_rows, w_pos, w_neg, n_blocks, scores):
    """ASSO's score of every candidate basis vector against the current cover.

    Candidate c (columns ``cand_cols[cand_ptr[c]:cand_ptr[c+1]]``, rarest first) used in row i
    gains ``w_pos·#{j ∈ c : X_ij = 1, C_ij = 0} − w_neg·#{j ∈ c : X_ij = 0, C_ij = 0}``; its
    score is the sum of the positive gains. X_ij is looked up in row i's sorted indices and C_ij
    through the factors row i uses (``used``, bit l = factor l) and those holding column j
    (``fac_mask``), so all reads stay within a row however wide X is.

    Only some rows need a look. A row none of whose factors meets c gains iff it has more than
    ``θ = |c|·w_neg/(w_pos + w_neg)`` of c's columns, hence at least one of the
    ``|c| − ⌊θ⌋`` rarest (pigeonhole); the other rows are those of the factors (``fac_ptr``,
    ``fac_rows``: the rows of each factor) that share a column with c.
    """
    n_cand = len(cand_ptr) - 1
    n = len(indptr) - 1
    words = used.shape[1]
    k = len(fac_ptr) - 1
    for b in prange(n_blocks):
        seen = np.full(n, -1, dtype=np.int64)
        meets = np.zeros(words, dtype=np.uint64)
        for c in range(b * n_cand // n_blocks, (b + 1) * n_cand // n_blocks):
            lo, hi = cand_ptr[c], cand_ptr[c + 1]
            size = hi - lo
            theta = size * w_neg / (w_pos + w_neg)
            n_rare = size - int(np.floor(theta))
            total = 0.0
            for q in range(lo, hi):
                if q - lo >= n_rare:
                    break
                total += _score_rows(colrows, colptr[cand_cols[q]], colptr[cand_cols[q] + 1], seen, c,
                                     indptr, indices, used, fac_mask, cand_cols, lo, hi, w_pos, w_neg)
            for w in range(words):
                meets[w] = 0
            for q in range(lo, hi):
                for w in range(words):
                    meets[w] |= fac_mask[cand_cols[q], w]
            for l in range(k):
                if meets[l >> 6] & (_ONE << np.uint64(l & 63)):
                    total += _score_rows(fac_rows, fac_ptr[l], fac_ptr[l + 1], seen, c,
                                         indptr, indices, used, fac_mask, cand_cols, lo, hi, w_pos, w_neg)
            scores[c] = total


@njit(cache=True, nogil=True)
def asso_usage(cols, colptr, colrows, indptr, indices, used, fac_mask, w_pos, w_neg, usage):
    """``usage[i] = True`` for every row where the basis vector ``cols`` has a positive gain."""
    for q in range(len(cols)):
        for r in range(colptr[cols[q]], colptr[cols[q] + 1]):
            i = colrows[r]
            if not usage[i] and _asso_gain(indptr, indices, used, fac_mask, i, cols, 0, len(cols), w_pos, w_neg) > 0:
                usage[i] = True


@njit(cache=True, nogil=True, inline="always")
def _rows_within(extent, colbits, j):
    """Does column j have a one in every row of ``extent`` (packed rows)?"""
    for w in range(colbits.shape[1]):
        if extent[w] & ~colbits[j, w]:
            return False
    return True


@njit(cache=True, nogil=True)
def intent_of(extent, colbits, out):
    """``out[j] = True`` iff every row in ``extent`` (packed rows) has a one in column j."""
    for j in range(colbits.shape[0]):
        out[j] = _rows_within(extent, colbits, j)


@kernel()
def grecond_gains(extent, in_intent, colbits, ubits, values):
    """GreConD's value of adding each column j not in the current intent D.

    The new concept is C = extent ∩ rows(j) and D' = C↑ (columns shared by all of C); its value
    is the number of still-uncovered ones in C × D'. ``ubits`` (m, words) packs each column's
    uncovered rows. ``values[j] = -1`` for columns already in D.
    """
    m, words = colbits.shape
    for j in prange(m):
        if in_intent[j]:
            values[j] = -1
            continue
        ext = np.empty(words, dtype=np.uint64)
        empty = True
        for w in range(words):
            ext[w] = extent[w] & colbits[j, w]
            if ext[w]:
                empty = False
        if empty:
            values[j] = 0
            continue
        total = 0
        for j2 in range(m):
            if _rows_within(ext, colbits, j2):
                for w in range(words):
                    total += popcount64(ext[w] & ubits[j2, w])
        values[j] = total
