"""Kernels for the greedy cover methods (ASSO, GreConD) on bit-packed rows and columns."""

import numpy as np
from numba import njit, prange

from .boolean import popcount64

_ONE = np.uint64(1)


@njit(cache=True, nogil=True, inline="always")
def _has(bits, i, j):
    return (bits[i, j >> 6] >> np.uint64(j & 63)) & _ONE


@njit(parallel=True, cache=True, nogil=True)
def asso_scores(cand_ptr, cand_cols, colptr, colrows, xbits, cbits, w_pos, w_neg, n_blocks, scores):
    """ASSO's score of every candidate basis vector against the current cover.

    Candidate c (columns ``cand_cols[cand_ptr[c]:cand_ptr[c+1]]``) used in row i gains
    ``w_pos·#{j ∈ c : X_ij = 1, C_ij = 0} − w_neg·#{j ∈ c : X_ij = 0, C_ij = 0}``; its score is
    the sum of the positive gains. Only rows with a one in some column of c can gain, so they
    are found through X's columns (``colptr``, ``colrows``). ``xbits``/``cbits`` (n, words) are
    the packed rows of X and of the current cover C.
    """
    n_cand = len(cand_ptr) - 1
    n = xbits.shape[0]
    for b in prange(n_blocks):
        seen = np.full(n, -1, dtype=np.int64)
        for c in range(b * n_cand // n_blocks, (b + 1) * n_cand // n_blocks):
            total = 0.0
            for q in range(cand_ptr[c], cand_ptr[c + 1]):
                for r in range(colptr[cand_cols[q]], colptr[cand_cols[q] + 1]):
                    i = colrows[r]
                    if seen[i] == c:
                        continue
                    seen[i] = c
                    gain = 0.0
                    for q2 in range(cand_ptr[c], cand_ptr[c + 1]):
                        j = cand_cols[q2]
                        if not _has(cbits, i, j):
                            gain += w_pos if _has(xbits, i, j) else -w_neg
                    if gain > 0:
                        total += gain
            scores[c] = total


@njit(cache=True, nogil=True)
def asso_apply(cols, colptr, colrows, xbits, cbits, w_pos, w_neg, usage):
    """Use the basis vector ``cols`` in every row where it gains; update the cover in place."""
    for q in range(len(cols)):
        for r in range(colptr[cols[q]], colptr[cols[q] + 1]):
            i = colrows[r]
            if usage[i]:
                continue
            gain = 0.0
            for q2 in range(len(cols)):
                j = cols[q2]
                if not _has(cbits, i, j):
                    gain += w_pos if _has(xbits, i, j) else -w_neg
            if gain > 0:
                usage[i] = True
    for i in range(len(usage)):
        if usage[i]:
            for q in range(len(cols)):
                j = cols[q]
                cbits[i, j >> 6] |= _ONE << np.uint64(j & 63)


@njit(cache=True, nogil=True)
def intent_of(extent, colbits, out):
    """``out[j] = True`` iff every row in ``extent`` (packed rows) has a one in column j."""
    m, words = colbits.shape
    for j in range(m):
        ok = True
        for w in range(words):
            if extent[w] & ~colbits[j, w]:
                ok = False
                break
        out[j] = ok


@njit(parallel=True, cache=True, nogil=True)
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
            inside = True
            for w in range(words):
                if ext[w] & ~colbits[j2, w]:
                    inside = False
                    break
            if inside:
                for w in range(words):
                    total += popcount64(ext[w] & ubits[j2, w])
        values[j] = total
