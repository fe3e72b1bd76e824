"""Kernels of the OrMachine (Rukat et al., ICML 2017): Gibbs sweeps over the rows of one
Boolean factor, the other held fixed, on X's CSR support and the listed unknown or observed
zero cells.

Both factors are held as packed codes: ``codes[i]`` (``ceil(k / 64)`` uint64 words) has bit l
set iff factor l holds row i. The full conditional of ``z_il`` is
``σ(λ · Σ_j x̃_ij · u_lj · ∏_{l'≠l}(1 − z_il' u_l'j))``: a column j counts for factor l iff
``u_lj = 1`` and no *other* active factor of row i covers j. Seen from column j, with
``a = codes_other[j] & codes[i]`` (the active factors of row i that cover j): if ``a`` is
empty, j counts for every factor l of ``codes_other[j]``; if ``a`` is the single bit l0, j
counts for l0 alone; otherwise it counts for none. So the scores of all k factors of a row
cost one pass over the columns the row lists (its ones and its unknown or observed-zero
cells) plus, when zeros are implicit, one pass over the *distinct* nonzero codes of the other
factor with their multiplicities (at most ``min(columns, 2^k)`` of them), never over all m.

Signed weights make one body serve the three forms of the data:

- every cell observed, or few unknown cells (``implicit = True``): the score is
  ``2·ones − observed`` over the counting columns; the observed ones come from the distinct
  codes (``−count`` each) and the unknown cells listed in ``cells`` give back their ``+1``;
  each one of X weighs ``+2``;
- few observed cells (``implicit = False``): the listed ``cells`` are the observed zeros
  (weight ``−1``), each one weighs ``+1``, and nothing else is observed.
"""

import numpy as np
from numba import njit, prange

from .boolean import popcount64
from .variants import kernel

_ONE = np.uint64(1)


@njit(cache=True, nogil=True, inline="always")
def _single_bit(word):
    """Index of the lowest set bit of a nonzero uint64."""
    b = 0
    while not (word >> np.uint64(b)) & _ONE:
        b += 1
    return b


@njit(cache=True, nogil=True)
def _credit(code, zrow, weight, scores):
    """Add ``weight`` to the score of every factor for which a column of code ``code`` counts,
    given the row's active factors ``zrow``; return whether an active factor covers it."""
    kw = zrow.shape[0]
    active = 0
    last = 0
    for w in range(kw):
        a = code[w] & zrow[w]
        if a:
            active += popcount64(a)
            last = w
    if active == 0:
        for w in range(kw):
            c = code[w]
            base = w << 6
            while c:
                b = _single_bit(c)
                scores[base + b] += weight
                c &= c - _ONE
        return False
    if active == 1:
        scores[(last << 6) + _single_bit(code[last] & zrow[last])] += weight
    return True


@njit(cache=True, nogil=True)
def _covers(code, zrow):
    for w in range(zrow.shape[0]):
        if code[w] & zrow[w]:
            return True
    return False


@njit(cache=True, nogil=True)
def row_scores(
    i, indptr, indices, cptr, cidx, w_one, w_cell, implicit, other, dcodes, dcounts, zrow, scores
):
    """The scores of row i: ``scores[l] = Σ_j x̃_ij`` over the columns j that count for
    factor l, given the row's factors ``zrow`` (packed) and the other factor's codes ``other``
    (one per column; ``dcodes``/``dcounts``: its distinct nonzero codes and how many columns
    have each, read when ``implicit``). The conditional log-odds of ``z_il = 1`` is
    ``λ·scores[l]``."""
    scores[:] = 0
    for p in range(indptr[i], indptr[i + 1]):
        _credit(other[indices[p]], zrow, w_one, scores)
    for p in range(cptr[i], cptr[i + 1]):
        _credit(other[cidx[p]], zrow, w_cell, scores)
    if implicit:
        for q in range(dcodes.shape[0]):
            _credit(dcodes[q], zrow, -dcounts[q], scores)


@njit(cache=True, nogil=True)
def row_errors(i, indptr, indices, cptr, cidx, implicit, other, dcodes, dcounts, zrow):
    """Observed cells of row i that the product gets wrong: the ones it misses and the
    observed zeros it covers."""
    missed = 0
    for p in range(indptr[i], indptr[i + 1]):
        if not _covers(other[indices[p]], zrow):
            missed += 1
    hit = indptr[i + 1] - indptr[i] - missed
    if implicit:
        covered = 0  # observed cells the product covers: all covered, less the unknown ones
        for q in range(dcodes.shape[0]):
            if _covers(dcodes[q], zrow):
                covered += dcounts[q]
        for p in range(cptr[i], cptr[i + 1]):
            if _covers(other[cidx[p]], zrow):
                covered -= 1
        return missed + covered - hit
    wrong = missed
    for p in range(cptr[i], cptr[i + 1]):
        if _covers(other[cidx[p]], zrow):
            wrong += 1
    return wrong


@kernel()
def gibbs_rows(
    indptr,
    indices,
    cptr,
    cidx,
    w_one,
    w_cell,
    implicit,
    other,
    dcodes,
    dcounts,
    lam,
    uniforms,
    codes,
    errors,
):
    """One Gibbs sweep over the rows of a factor: for each row i (in parallel: rows are
    independent given the other factor) and each factor l in order, set ``z_il = 1`` iff
    ``uniforms[i, l] < σ(λ·score)``, the score taken with the row's current factors (recounted
    after each change). ``codes`` (rows, ceil(k/64)) is updated in place; ``errors[i]`` gets row
    i's errors under the new codes. The uniforms are drawn by the caller, so the result does
    not depend on the number of threads."""
    n = indptr.shape[0] - 1
    k = uniforms.shape[1]
    kw = codes.shape[1]
    for i in prange(n):
        zrow = codes[i].copy()
        scores = np.empty(k, dtype=np.int64)
        stale = True
        for l in range(k):
            if stale:
                row_scores(
                    i,
                    indptr,
                    indices,
                    cptr,
                    cidx,
                    w_one,
                    w_cell,
                    implicit,
                    other,
                    dcodes,
                    dcounts,
                    zrow,
                    scores,
                )
                stale = False
            p1 = 1.0 / (1.0 + np.exp(-lam * scores[l]))
            word = l >> 6
            bit = _ONE << np.uint64(l & 63)
            on = uniforms[i, l] < p1
            if on != ((zrow[word] & bit) != 0):
                zrow[word] ^= bit
                stale = True
        for w in range(kw):
            codes[i, w] = zrow[w]
        errors[i] = row_errors(
            i, indptr, indices, cptr, cidx, implicit, other, dcodes, dcounts, zrow
        )


@kernel()
def all_row_scores(
    indptr, indices, cptr, cidx, w_one, w_cell, implicit, other, dcodes, dcounts, codes, out
):
    """``out[i] = row_scores(i, ...)`` for every row, the factors held as they are (for
    tests and diagnostics: the conditional log-odds of every entry is ``λ·out``)."""
    n = indptr.shape[0] - 1
    for i in prange(n):
        row_scores(
            i,
            indptr,
            indices,
            cptr,
            cidx,
            w_one,
            w_cell,
            implicit,
            other,
            dcodes,
            dcounts,
            codes[i],
            out[i],
        )


@kernel()
def accumulate_codes(codes, counts):
    """``counts[i, l] += 1`` for every bit l set in ``codes[i]``: one sample of a factor added
    to the running sums of its posterior mean."""
    n, k = counts.shape
    for i in prange(n):
        for l in range(k):
            if codes[i, l >> 6] & (_ONE << np.uint64(l & 63)):
                counts[i, l] += 1
