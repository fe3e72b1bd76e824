"""Kernels for PaNDa+ (Lucchese, Orlando, Perego, TKDE 2014): residual counts, the growth of a
noise-free core (FIND-CORE) and its extension within the noise tolerances (EXTEND-CORE).

The patterns accepted so far, Π, are kept as bit codes: ``wcode[i]`` holds the patterns that
contain row i and ``hcode[j]`` those that contain column j (bit l of word l // 64), so a cell
(i, j) is covered iff ``wcode[i] & hcode[j]`` is not zero. The residual data D_R are the ones
of X that no pattern covers.

Unknown cells come as a second sparse pattern, :class:`Cells` (its CSR and CSC forms): with
``observed`` False they are the unknown cells (every other non-one is an observed zero), with
``observed`` True they are the observed zeros (every other non-one is unknown). Unknown cells
are never noise and never count in the cost; the noise of a pattern is its observed zeros.

The cost is PaNDa+'s J_P^ρ: ``J = ρ·Σ_P (|P_T| + |P_I|) + (false negatives + false positives)``
over observed cells. A candidate pattern P lowers J by ``U − Z − ρ·(|P_T| + |P_I|)``, U the
uncovered ones and Z the uncovered observed zeros inside P (cells already covered by Π are
already paid for). Every comparison is done on integer counts against ρ times an integer, so a
dense oracle doing the same arithmetic gets the same answer.
"""

from collections import namedtuple
from typing import NamedTuple

import numpy as np
from numba import njit

from .boolean import popcount64
from .sparse import Sparse


class Cells(NamedTuple):
    """The listed cells: X's unknown cells or its observed zeros.

    Attributes
    ----------
    csr, csc : Sparse
        Their CSR and CSC forms.
    observed : bool
        False: they are the unknown cells (every other non-one of X is an observed zero);
        True: they are the observed zeros (every other non-one is unknown).
    """

    csr: Sparse
    csc: Sparse
    observed: bool


class Codes(NamedTuple):
    """The patterns accepted so far, as bit codes (bit l of word l // 64: pattern l).

    Attributes
    ----------
    wcode : uint64 array (n, words)
        The patterns that contain each row.
    hcode : uint64 array (m, words)
        The patterns that contain each column.
    row_pat, col_pat : int64 arrays (n,) and (m,)
        :func:`single_patterns` of ``wcode`` and ``hcode``.
    """

    wcode: np.ndarray
    hcode: np.ndarray
    row_pat: np.ndarray
    col_pat: np.ndarray


class Tolerances(NamedTuple):
    """PaNDa+'s noise tolerances and ρ.

    Attributes
    ----------
    eps_row, eps_col : float
        Every row of a pattern holds at most ``eps_row·|I|`` noisy cells in its items, every
        item at most ``eps_col·|T|`` in its rows.
    rho : float
        The weight of a pattern's size in the cost J.
    """

    eps_row: float
    eps_col: float
    rho: float


class Core(NamedTuple):
    """FIND-CORE's outputs (see :func:`find_core`).

    Attributes
    ----------
    in_rows : bool array (n,)
        The core's rows, as a mask.
    rows : int64 array (n,)
        The core's rows, first t.
    cols : int64 array (m,)
        Its items in the order they joined, first c.
    ext : int64 array (m,)
        The extension list, first e.
    """

    in_rows: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    ext: np.ndarray


@njit(cache=True, nogil=True, inline="always")
def _covered(wcode, hcode, i, j):
    for w in range(wcode.shape[1]):
        if wcode[i, w] & hcode[j, w]:
            return True
    return False


@njit(cache=True, nogil=True, inline="always")
def _zeros(size, ones, cells, observed):
    """Observed zeros among ``size`` cells holding ``ones`` ones and ``cells`` listed cells."""
    return cells if observed else size - ones - cells


@njit(cache=True, nogil=True)
def residual_counts(indptr, indices, wcode, hcode, out):
    """``out[j]`` = the ones of column j that no pattern covers (the item frequencies in D_R)."""
    out[:] = 0
    for i in range(len(indptr) - 1):
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            if not _covered(wcode, hcode, i, j):
                out[j] += 1


@njit(cache=True, nogil=True)
def single_patterns(codes, out):
    """``out[r]`` = the one pattern that row r of ``codes`` holds, -1 if it holds several and
    -2 if none (the counts of covered cells then take a per-pattern total)."""
    for r in range(codes.shape[0]):
        total = 0
        for w in range(codes.shape[1]):
            total += popcount64(codes[r, w])
        if total == 0:
            out[r] = -2
        elif total > 1:
            out[r] = -1
        else:
            for w in range(codes.shape[1]):
                x = codes[r, w]
                if x:
                    b = 0
                    while (x >> np.uint64(b)) & np.uint64(1) == 0:
                        b += 1
                    out[r] = 64 * w + b


@njit(cache=True, nogil=True)
def find_core(Xt, codes, order, rho, core):
    """FIND-CORE (TKDE 2014, Algorithm 2) on the residual data.

    The core starts as the item ``order[0]`` with its residual rows; each further item of
    ``order`` joins it (its rows shrink to those that hold the item in D_R) iff J does not rise,
    i.e. ``t'·(c+1) − t·c ≥ ρ·(t' + 1 − t)`` for t rows, c items and t' rows left; otherwise
    the item goes to the extension list.

    Parameters
    ----------
    Xt : Sparse
        X's CSC form.
    codes : Codes
        The patterns so far (``wcode`` and ``hcode``).
    order : int64 array
        The items in the order they are tried.
    rho : float
        ρ.
    core : Core
        Outputs: ``in_rows`` set to the core's rows, and ``rows``, ``cols``, ``ext``.

    Returns
    -------
    t, c, e : int
        The core's rows ``rows[:t]``, items ``cols[:c]`` (in the order they joined) and the
        extension list ``ext[:e]`` (in ``order``). t = 0 when ``order[0]`` has no residual one
        (then c = e = 0).
    """
    cindptr, cindices = Xt
    wcode, hcode = codes.wcode, codes.hcode
    in_rows, rows, cols, ext = core
    n = in_rows.shape[0]
    in_rows[:] = False
    first = order[0]
    t = 0
    for p in range(cindptr[first], cindptr[first + 1]):
        i = cindices[p]
        if not _covered(wcode, hcode, i, first):
            in_rows[i] = True
            rows[t] = i
            t += 1
    if t == 0:
        return 0, 0, 0
    cols[0] = first
    c = 1
    e = 0
    mark = np.zeros(n, dtype=np.bool_)
    for h in range(1, order.shape[0]):
        s = order[h]
        kept = 0
        for p in range(cindptr[s], cindptr[s + 1]):
            i = cindices[p]
            if in_rows[i] and not _covered(wcode, hcode, i, s):
                kept += 1
        if kept * (c + 1) - t * c >= rho * (kept + 1 - t):
            for p in range(cindptr[s], cindptr[s + 1]):
                i = cindices[p]
                if in_rows[i] and not _covered(wcode, hcode, i, s):
                    mark[i] = True
            left = 0
            for q in range(t):
                i = rows[q]
                if mark[i]:
                    mark[i] = False
                    rows[left] = i
                    left += 1
                else:
                    in_rows[i] = False
            t = left
            cols[c] = s
            c += 1
        else:
            ext[e] = s
            e += 1
    return t, c, e


#: One side of the data for EXTEND-CORE, its rows or its items: ``ptr, ind`` its lines' ones and
#: ``cptr, cind`` their listed cells (CSR for rows, CSC for items), ``code`` their bit codes,
#: ``pat`` their :func:`single_patterns` and ``eps`` their noise tolerance; ``member`` (mask),
#: ``lines`` (the first ``count``, passed beside) and ``noise`` (per line) the pattern's lines
#: of this side. EXTEND-CORE's row pass and item pass are one pass on the two sides swapped.
_Side = namedtuple("_Side", "ptr ind cptr cind code pat eps member lines noise")


@njit(cache=True, nogil=True, inline="always")
def _tighten(lines, count, noise, bound, tight):
    """Mark in ``tight`` the lines ``lines[:count]`` that one more noisy cell would take over
    ``bound``; returns how many there are."""
    n_tight = 0
    for q in range(count):
        j = lines[q]
        tight[j] = noise[j] + 1 > bound
        n_tight += tight[j]
    return n_tight


@njit(cache=True, nogil=True, inline="always")
def _count(s, ptr, ind, code, in_other, other_code, tight):
    """Of the cells ``ind[ptr[s]:ptr[s + 1]]`` of line s (``code``: its side's bit codes): how
    many lie in the other side's lines ``in_other``, how many of those in ``tight`` lines and
    how many of those no pattern covers."""
    inside = 0
    hit = 0
    free = 0
    for p in range(ptr[s], ptr[s + 1]):
        j = ind[p]
        if in_other[j]:
            inside += 1
            hit += tight[j]
            if not _covered(code, other_code, s, j):
                free += 1
    return inside, hit, free


@njit(cache=True, nogil=True)
def _extend_side(side, count, other, n_other, ext, head, tight, mark, inter, observed, rho):
    """One pass of EXTEND-CORE (see :func:`extend_core`) over the lines of ``side``, the
    pattern being ``side.lines[:count]`` × ``other.lines[:n_other]``. With ``ext`` None, every
    line not in the pattern, in index order, joins it if its noise stays within the tolerances
    and J does not rise (the row pass); else the lines ``ext[head:]`` are tried in order until
    one joins (the item pass). ``tight``, ``mark`` (left False) and ``inter`` are scratch.

    Returns ``(head, count, Σ (u − z))``: where the next item pass starts in ``ext``, the new
    count of the side's lines and the u − z of the lines added.
    """
    # Scoring and adding a candidate are written out here: as helpers taking a side's dozen
    # arrays (inlined or not) they made mushroom fits 1.3-2 times slower. For the same reason
    # the scratch arrays come as arguments of their own, not as a group: the passes run slower
    # on arrays taken from a tuple argument.
    ptr, ind, cptr, cind, code, pat, eps, member, lines, noise_of = side
    other_code, other_pat, other_eps = other.code, other.pat, other.eps
    in_other, others, other_noise = other.member, other.lines, other.noise
    # Per pattern l, how many of the other side's lines it holds: the covered cells of a
    # candidate that lies in l alone.
    inter[:] = 0
    for q in range(n_other):
        l = other_pat[others[q]]
        if l >= 0:
            inter[l] += 1
        elif l == -1:
            for w in range(other_code.shape[1]):
                x = other_code[others[q], w]
                b = 0
                while x:
                    if x & np.uint64(1):
                        inter[64 * w + b] += 1
                    x >>= np.uint64(1)
                    b += 1
    n_tight = _tighten(others, n_other, other_noise, other_eps * (count + 1), tight)
    uz = 0
    # The row pass goes through the lines without an index array: reading one cost mushroom
    # fits 5-10%. numba compiles this function once for each kind of ``ext``.
    stop = member.shape[0] if ext is None else ext.shape[0]
    for h in range(head, stop):
        s = h if ext is None else ext[h]
        if member[s]:
            continue
        ones, hit_ones, u = _count(s, ptr, ind, code, in_other, other_code, tight)
        if u == 0 and rho > 0:
            continue  # it cannot pay for itself
        cells, hit_cells, cells_free = _count(s, cptr, cind, code, in_other, other_code, tight)
        noise = _zeros(n_other, ones, cells, observed)
        if noise > eps * n_other:
            continue
        noisy_tight = hit_cells if observed else n_tight - hit_ones - hit_cells
        if noisy_tight > 0:
            continue
        if observed:
            z = cells_free
        else:
            l = pat[s]
            if l == -2:
                cov = 0
            elif l >= 0:
                cov = inter[l]
            else:
                cov = 0
                for q in range(n_other):
                    cov += _covered(code, other_code, s, others[q])
            z = n_other - cov - u - cells_free
        if u - z >= rho:
            member[s] = True
            lines[count] = s
            count += 1
            noise_of[s] = noise
            uz += u - z
            # The other side's lines where this line is noisy gain a noisy cell.
            if observed:
                for p in range(cptr[s], cptr[s + 1]):
                    if in_other[cind[p]]:
                        other_noise[cind[p]] += 1
            else:
                for p in range(ptr[s], ptr[s + 1]):
                    mark[ind[p]] = True
                for p in range(cptr[s], cptr[s + 1]):
                    mark[cind[p]] = True
                for q in range(n_other):
                    if not mark[others[q]]:
                        other_noise[others[q]] += 1
                for p in range(ptr[s], ptr[s + 1]):
                    mark[ind[p]] = False
                for p in range(cptr[s], cptr[s + 1]):
                    mark[cind[p]] = False
            if ext is not None:
                stop = h + 1
                break
            n_tight = _tighten(others, n_other, other_noise, other_eps * (count + 1), tight)
    for q in range(n_other):
        tight[others[q]] = False
    return stop, count, uz


@njit(cache=True, nogil=True)
def extend_core(X, Xt, cells, codes, tol, in_rows, in_cols, ext):
    """EXTEND-CORE (TKDE 2014, Algorithm 3): grow the pattern ``in_rows`` × ``in_cols`` on the
    whole data.

    Repeat: (A) every row not in the pattern, in index order, joins it if its noise stays
    within the tolerances and J does not rise (``u − z ≥ ρ``: u uncovered ones, z uncovered
    observed zeros it adds); then (B) the items of ``ext`` are taken from the head, one at a
    time and each at most once, until one joins under the same rule; stop when (B) adds none.
    Tolerances (noise = observed zeros): every row of the pattern has at most ``eps_row·|I|``
    noisy cells in the pattern's items, every item at most ``eps_col·|T|`` in its rows.

    Parameters
    ----------
    X, Xt : Sparse
        X's CSR and CSC forms.
    cells : Cells
        The listed cells (unknown cells or observed zeros).
    codes : Codes
        The patterns so far.
    tol : Tolerances
        ``eps_row``, ``eps_col`` and ρ.
    in_rows, in_cols : bool arrays (n,) and (m,)
        The pattern's rows and items, updated in place.
    ext : int64 array
        The extension list (the items that (B) tries, in order).

    Returns
    -------
    int
        Σ (u − z) over the rows and items added: the extended pattern's U − Z (uncovered ones
        less uncovered observed zeros) is the starting pattern's plus this (for a core, t·c
        plus this), and its decrease of J is its U − Z less ρ·(|T| + |I|).
    """
    indptr, indices = X
    cindptr, cindices = Xt
    cptr, cind = cells.csr
    ccptr, ccind = cells.csc
    observed = cells.observed
    wcode, hcode, row_pat, col_pat = codes
    eps_row, eps_col, rho = tol
    n = in_rows.shape[0]
    m = in_cols.shape[0]
    n_pat = 64 * wcode.shape[1]
    rows = np.empty(n, dtype=np.int64)
    cols = np.empty(m, dtype=np.int64)
    t = 0
    for i in range(n):
        if in_rows[i]:
            rows[t] = i
            t += 1
    c = 0
    for j in range(m):
        if in_cols[j]:
            cols[c] = j
            c += 1
    # Noise (observed zeros) per row of the pattern and per item of it.
    zr = np.zeros(n, dtype=np.int64)
    zc = np.zeros(m, dtype=np.int64)
    ones_c = np.zeros(m, dtype=np.int64)
    cells_c = np.zeros(m, dtype=np.int64)
    uz = 0  # Σ (u − z) of the additions
    for q in range(t):
        i = rows[q]
        ones = 0
        cells = 0
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            if in_cols[j]:
                ones += 1
                ones_c[j] += 1
        for p in range(cptr[i], cptr[i + 1]):
            j = cind[p]
            if in_cols[j]:
                cells += 1
                cells_c[j] += 1
        zr[i] = _zeros(c, ones, cells, observed)
    for q in range(c):
        j = cols[q]
        zc[j] = _zeros(t, ones_c[j], cells_c[j], observed)

    by_row = _Side(indptr, indices, cptr, cind, wcode, row_pat, eps_row, in_rows, rows, zr)
    by_col = _Side(cindptr, cindices, ccptr, ccind, hcode, col_pat, eps_col, in_cols, cols, zc)
    tight = np.zeros(max(n, m), dtype=np.bool_)
    mark = np.zeros(max(n, m), dtype=np.bool_)
    inter = np.zeros(n_pat, dtype=np.int64)
    head = 0
    while True:
        # (A) every row not in the pattern, in index order.
        _, t, gain = _extend_side(by_row, t, by_col, c, None, 0, tight, mark, inter, observed, rho)
        uz += gain
        # (B) the items of the extension list from the head, until one joins.
        head, joined, gain = _extend_side(
            by_col, c, by_row, t, ext, head, tight, mark, inter, observed, rho
        )
        uz += gain
        if joined == c:
            return uz
        c = joined
