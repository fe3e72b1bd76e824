"""Kernels of the OrMachine (Rukat et al., ICML 2017): Gibbs sweeps over the rows of one
Boolean factor, the other held fixed, on X's CSR support and the listed unknown or observed
zero cells.

Both factors are held as packed codes: ``codes[i]`` (``ceil(k / 64)`` uint64 words) has bit l
set iff factor l holds row i. The full conditional of ``z_il`` is
``σ(λ · Σ_j x̃_ij · u_lj · ∏_{l'≠l}(1 − z_il' u_l'j))``: a column j counts for factor l iff
``u_lj = 1`` and no *other* active factor of row i covers j. Seen from column j, with
``a = codes_other[j] & codes[i]`` (the active factors of row i that cover j): if ``a`` is
empty, j counts for every factor l of ``codes_other[j]``; if ``a`` is the single bit l0, j
counts for l0 alone; otherwise it counts for none. Columns with the same code count alike, so
a row's listed cells (its ones and its unknown or observed-zero cells) are first tallied by
the *distinct* nonzero code of their column, and the scores of all k factors then cost one
pass over the codes the row touches (with implicit zeros: every distinct code, each
holding ``count`` columns; at most ``min(m, 2^k)`` of them), never over all m columns. The
pass is repeated after each change of the row's factors.

Signed weights make one body serve the three forms of the data:

- every cell observed, or few unknown cells (``implicit = True``): the score is
  ``2·ones − observed`` over the counting columns: every column of a code weighs ``−1`` (the
  code's ``count``), each one of X ``+2`` on top, and each unknown cell listed in ``cells``
  ``+1`` on top (it was never observed);
- few observed cells (``implicit = False``): the listed ``cells`` are the observed zeros
  (weight ``−1``), each one weighs ``+1``, and nothing else is observed.
"""

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .boolean import popcount64
from .variants import kernel

_ONE = np.uint64(1)


class Weights(NamedTuple):
    """The signed weights of the data's form (see the module's description).

    Attributes
    ----------
    one, cell : int
        The weight of a one of X and of a listed cell.
    implicit : bool
        Whether the cells not listed are observed zeros (every column of a code then weighs
        −1 on top).
    """

    one: int
    cell: int
    implicit: bool


class Other(NamedTuple):
    """The factor held fixed, by the distinct nonzero codes of its columns.

    Attributes
    ----------
    code_id : int64 array (m,)
        Each column's code, −1 for none.
    dcodes : uint64 array (D, ceil(k / 64))
        The distinct codes.
    dcounts : int64 array (D,)
        How many columns have each.
    """

    code_id: np.ndarray
    dcodes: np.ndarray
    dcounts: np.ndarray


class _Tally(NamedTuple):
    """A row's tally by code (see :func:`_tally`): ``ones``, ``cells`` and ``touched``, one
    entry per distinct code."""

    ones: np.ndarray
    cells: np.ndarray
    touched: np.ndarray


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
def _tally(i, X, cells_of, code_id, implicit, tally):
    """Row i's cells (``X``'s ones and the listed cells ``cells_of``, CSR) grouped by the
    distinct code of their column, into ``tally``: ``ones[q]`` and ``cells[q]`` count its ones
    and listed cells of code q (columns of code −1, covered by no factor, count for nothing);
    ``touched[:t]`` lists the codes to visit (every code when zeros are implicit, since each
    holds observed zeros). Returns t and the row's ones in columns of no factor (always
    missed). The tally must be zero on entry; :func:`_untally` puts it back."""
    indptr, indices = X
    cptr, cidx = cells_of
    ones, cells, touched = tally
    t = 0
    lost = 0
    if implicit:
        for q in range(ones.shape[0]):
            touched[q] = q
        t = ones.shape[0]
    for p in range(indptr[i], indptr[i + 1]):
        q = code_id[indices[p]]
        if q >= 0:
            if not implicit and ones[q] == 0 and cells[q] == 0:
                touched[t] = q
                t += 1
            ones[q] += 1
        else:
            lost += 1
    for p in range(cptr[i], cptr[i + 1]):
        q = code_id[cidx[p]]
        if q >= 0:
            if not implicit and ones[q] == 0 and cells[q] == 0:
                touched[t] = q
                t += 1
            cells[q] += 1
    return t, lost


@njit(cache=True, nogil=True)
def _untally(t, tally):
    ones, cells, touched = tally
    for s in range(t):
        ones[touched[s]] = 0
        cells[touched[s]] = 0


@njit(cache=True, nogil=True)
def _row_scores(t, tally, weights, other, zrow, scores):
    """``scores[l] = Σ x̃`` over the row's columns that count for factor l, from the tallies."""
    ones, cells, touched = tally
    w_one, w_cell, implicit = weights
    dcodes, dcounts = other.dcodes, other.dcounts
    scores[:] = 0
    for s in range(t):
        q = touched[s]
        weight = w_one * ones[q] + w_cell * cells[q]
        if implicit:
            weight -= dcounts[q]
        if weight != 0:
            _credit(dcodes[q], zrow, weight, scores)


@njit(cache=True, nogil=True)
def _row_errors(t, tally, implicit, other, zrow):
    """Observed cells of the row that the product gets wrong: the ones it misses and the
    observed zeros it covers (implicit zeros: every cell of a covered code, less its ones and
    its unknown cells)."""
    ones, cells, touched = tally
    dcodes, dcounts = other.dcodes, other.dcounts
    wrong = 0
    for s in range(t):
        q = touched[s]
        if _covers(dcodes[q], zrow):
            # covered: the observed zeros are wrong (implicit: all but the ones and unknowns)
            wrong += dcounts[q] - ones[q] - cells[q] if implicit else cells[q]
        else:
            wrong += ones[q]
    return wrong


@kernel()
def gibbs_rows(X, cells, weights, other, n_blocks, lam, uniforms, codes, errors):
    """One Gibbs sweep over the rows of a factor: for each row i and each factor l in order,
    set ``z_il = 1`` iff ``uniforms[i, l] < σ(λ·score)``, the score taken with the row's
    current factors (recounted after each change). Rows are independent given the other
    factor: they run in ``n_blocks`` contiguous blocks (in parallel, each with its own
    scratch), and the uniforms are drawn by the caller, so the result depends on neither the
    blocks nor the threads.

    Parameters
    ----------
    X, cells : Sparse
        X's ones and the listed cells, CSR.
    weights : Weights
        The data's form.
    other : Other
        The other factor.
    n_blocks : int
        Blocks of rows.
    lam : float
        λ.
    uniforms : float64 array (rows, k)
        The uniform draws.
    codes : uint64 array (rows, ceil(k / 64))
        The factor's codes, updated in place.
    errors : int64 array (rows,)
        Output: each row's errors under the new codes.
    """
    implicit = weights.implicit
    code_id, dcodes = other.code_id, other.dcodes
    n = X.indptr.shape[0] - 1
    k = uniforms.shape[1]
    kw = codes.shape[1]
    D = dcodes.shape[0]
    for b in prange(n_blocks):
        tally = _Tally(
            np.zeros(D, dtype=np.int64),  # ones
            np.zeros(D, dtype=np.int64),  # cells
            np.empty(D, dtype=np.int64),  # touched
        )
        scores = np.empty(k, dtype=np.int64)
        zrow = np.empty(kw, dtype=np.uint64)
        for i in range(b * n // n_blocks, (b + 1) * n // n_blocks):
            t, lost = _tally(i, X, cells, code_id, implicit, tally)
            for w in range(kw):
                zrow[w] = codes[i, w]
            stale = True
            for l in range(k):
                if stale:
                    _row_scores(t, tally, weights, other, zrow, scores)
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
            errors[i] = lost + _row_errors(t, tally, implicit, other, zrow)
            _untally(t, tally)


@kernel()
def all_row_scores(X, cells, weights, other, codes, out):
    """``out[i, l]``: the score of factor l in row i, the factors held as they are (for tests
    and diagnostics: the conditional log-odds of ``z_il = 1`` is ``λ·out[i, l]``); the
    arguments as for :func:`gibbs_rows`."""
    n = X.indptr.shape[0] - 1
    D = other.dcodes.shape[0]
    for i in prange(n):
        tally = _Tally(
            np.zeros(D, dtype=np.int64),  # ones
            np.zeros(D, dtype=np.int64),  # cells
            np.empty(D, dtype=np.int64),  # touched
        )
        t, _ = _tally(i, X, cells, other.code_id, weights.implicit, tally)
        _row_scores(t, tally, weights, other, codes[i], out[i])


@kernel()
def accumulate_codes(codes, counts):
    """``counts[i, l] += 1`` for every bit l set in ``codes[i]``: one sample of a factor added
    to the running sums of its posterior mean."""
    n, k = counts.shape
    for i in prange(n):
        for l in range(k):
            if codes[i, l >> 6] & (_ONE << np.uint64(l & 63)):
                counts[i, l] += 1
