"""Kernels for PaNDa+ (Lucchese, Orlando, Perego, TKDE 2014): residual counts, the growth of a
noise-free core (FIND-CORE) and its extension within the noise tolerances (EXTEND-CORE).

The patterns accepted so far, Π, are kept as bit codes: ``wcode[i]`` holds the patterns that
contain row i and ``hcode[j]`` those that contain column j (bit l of word l // 64), so a cell
(i, j) is covered iff ``wcode[i] & hcode[j]`` is not zero. The residual data D_R are the ones
of X that no pattern covers.

Unknown cells come as a second sparse pattern, ``cells`` (CSR ``cptr, cind`` and its CSC form
``ccptr, ccind``): with ``observed`` False they are the unknown cells (every other non-one is
an observed zero), with ``observed`` True they are the observed zeros (every other non-one is
unknown). Unknown cells are never noise and never count in the cost; the noise of a pattern
is its observed zeros.

The cost is PaNDa+'s J_P^ρ: ``J = ρ·Σ_P (|P_T| + |P_I|) + (false negatives + false positives)``
over observed cells. A candidate pattern P lowers J by ``U − Z − ρ·(|P_T| + |P_I|)``, U the
uncovered ones and Z the uncovered observed zeros inside P (cells already covered by Π are
already paid for). Every comparison is done on integer counts against ρ times an integer, so a
dense oracle doing the same arithmetic gets the same answer.
"""

import numpy as np
from numba import njit

from .boolean import popcount64


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
def find_core(cindptr, cindices, wcode, hcode, order, rho, in_rows, rows, cols, ext):
    """FIND-CORE (TKDE 2014, Algorithm 2) on the residual data.

    The core starts as the item ``order[0]`` with its residual rows; each further item of
    ``order`` joins it (its rows shrink to those that hold the item in D_R) iff J does not rise,
    i.e. ``t'·(c+1) − t·c ≥ ρ·(t' + 1 − t)`` for t rows, c items and t' rows left; otherwise
    the item goes to the extension list. ``in_rows`` (n, bool) is set to the core's rows.
    Returns ``(t, c, e)``: the core's rows ``rows[:t]``, items ``cols[:c]`` (in the order they
    joined) and the extension list ``ext[:e]`` (in ``order``). t = 0 when ``order[0]`` has no
    residual one (then c = e = 0).
    """
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


@njit(cache=True, nogil=True)
def extend_core(
    indptr,
    indices,
    cindptr,
    cindices,
    cptr,
    cind,
    ccptr,
    ccind,
    observed,
    wcode,
    hcode,
    row_pat,
    col_pat,
    in_rows,
    in_cols,
    ext,
    eps_row,
    eps_col,
    rho,
):
    """EXTEND-CORE (TKDE 2014, Algorithm 3): grow the pattern ``in_rows`` × ``in_cols`` (bool
    masks, updated in place) on the whole data.

    Repeat: (A) every row not in the pattern, in index order, joins it if its noise stays
    within the tolerances and J does not rise (``u − z ≥ ρ``: u uncovered ones, z uncovered
    observed zeros it adds); then (B) the items of ``ext`` are taken from the head, one at a
    time and each at most once, until one joins under the same rule; stop when (B) adds none.
    Tolerances (noise = observed zeros): every row of the pattern has at most ``eps_row·|I|``
    noisy cells in the pattern's items, every item at most ``eps_col·|T|`` in its rows.
    ``row_pat``/``col_pat``: :func:`single_patterns` of ``wcode``/``hcode``.

    Returns Σ (u − z) over the rows and items added: the extended pattern's U − Z (uncovered
    ones less uncovered observed zeros) is the starting pattern's plus this (for a core, t·c
    plus this), and its decrease of J is its U − Z less ρ·(|T| + |I|).
    """
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

    tight = np.zeros(max(n, m), dtype=np.bool_)
    mark = np.zeros(max(n, m), dtype=np.bool_)
    inter = np.zeros(n_pat, dtype=np.int64)
    head = 0
    while True:
        # (A) rows. Per pattern l, how many of the items it holds: the covered cells of a row
        # that lies in l alone.
        inter[:] = 0
        for q in range(c):
            l = col_pat[cols[q]]
            if l >= 0:
                inter[l] += 1
            elif l == -1:
                for w in range(hcode.shape[1]):
                    x = hcode[cols[q], w]
                    b = 0
                    while x:
                        if x & np.uint64(1):
                            inter[64 * w + b] += 1
                        x >>= np.uint64(1)
                        b += 1
        n_tight = 0
        for q in range(c):
            j = cols[q]
            tight[j] = zc[j] + 1 > eps_col * (t + 1)
            n_tight += tight[j]
        for i in range(n):
            if in_rows[i]:
                continue
            ones = 0
            u = 0
            hit_ones = 0
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                if in_cols[j]:
                    ones += 1
                    hit_ones += tight[j]
                    if not _covered(wcode, hcode, i, j):
                        u += 1
            if u == 0 and rho > 0:
                continue  # it cannot pay for itself
            cells = 0
            cells_free = 0
            hit_cells = 0
            for p in range(cptr[i], cptr[i + 1]):
                j = cind[p]
                if in_cols[j]:
                    cells += 1
                    hit_cells += tight[j]
                    if not _covered(wcode, hcode, i, j):
                        cells_free += 1
            noise = _zeros(c, ones, cells, observed)
            if noise > eps_row * c:
                continue
            noisy_tight = hit_cells if observed else n_tight - hit_ones - hit_cells
            if noisy_tight > 0:
                continue
            if observed:
                z = cells_free
            else:
                l = row_pat[i]
                if l == -2:
                    cov = 0
                elif l >= 0:
                    cov = inter[l]
                else:
                    cov = 0
                    for q in range(c):
                        cov += _covered(wcode, hcode, i, cols[q])
                z = c - cov - u - cells_free
            if u - z >= rho:
                in_rows[i] = True
                rows[t] = i
                t += 1
                zr[i] = noise
                uz += u - z
                # The items where this row is noisy gain a noisy cell.
                if observed:
                    for p in range(cptr[i], cptr[i + 1]):
                        if in_cols[cind[p]]:
                            zc[cind[p]] += 1
                else:
                    for p in range(indptr[i], indptr[i + 1]):
                        mark[indices[p]] = True
                    for p in range(cptr[i], cptr[i + 1]):
                        mark[cind[p]] = True
                    for q in range(c):
                        if not mark[cols[q]]:
                            zc[cols[q]] += 1
                    for p in range(indptr[i], indptr[i + 1]):
                        mark[indices[p]] = False
                    for p in range(cptr[i], cptr[i + 1]):
                        mark[cind[p]] = False
                n_tight = 0
                for q in range(c):
                    j = cols[q]
                    tight[j] = zc[j] + 1 > eps_col * (t + 1)
                    n_tight += tight[j]
        for q in range(c):
            tight[cols[q]] = False

        # (B) one item from the head of the extension list. Per pattern l, how many of the
        # pattern's rows it holds.
        inter[:] = 0
        for q in range(t):
            l = row_pat[rows[q]]
            if l >= 0:
                inter[l] += 1
            elif l == -1:
                for w in range(wcode.shape[1]):
                    x = wcode[rows[q], w]
                    b = 0
                    while x:
                        if x & np.uint64(1):
                            inter[64 * w + b] += 1
                        x >>= np.uint64(1)
                        b += 1
        n_tight = 0
        for q in range(t):
            i = rows[q]
            tight[i] = zr[i] + 1 > eps_row * (c + 1)
            n_tight += tight[i]
        added = False
        while head < ext.shape[0]:
            s = ext[head]
            head += 1
            if in_cols[s]:
                continue
            ones = 0
            u = 0
            hit_ones = 0
            for p in range(cindptr[s], cindptr[s + 1]):
                i = cindices[p]
                if in_rows[i]:
                    ones += 1
                    hit_ones += tight[i]
                    if not _covered(wcode, hcode, i, s):
                        u += 1
            if u == 0 and rho > 0:
                continue
            cells = 0
            cells_free = 0
            hit_cells = 0
            for p in range(ccptr[s], ccptr[s + 1]):
                i = ccind[p]
                if in_rows[i]:
                    cells += 1
                    hit_cells += tight[i]
                    if not _covered(wcode, hcode, i, s):
                        cells_free += 1
            noise = _zeros(t, ones, cells, observed)
            if noise > eps_col * t:
                continue
            noisy_tight = hit_cells if observed else n_tight - hit_ones - hit_cells
            if noisy_tight > 0:
                continue
            if observed:
                z = cells_free
            else:
                l = col_pat[s]
                if l == -2:
                    cov = 0
                elif l >= 0:
                    cov = inter[l]
                else:
                    cov = 0
                    for q in range(t):
                        cov += _covered(wcode, hcode, rows[q], s)
                z = t - cov - u - cells_free
            if u - z >= rho:
                in_cols[s] = True
                cols[c] = s
                c += 1
                zc[s] = noise
                uz += u - z
                if observed:
                    for p in range(ccptr[s], ccptr[s + 1]):
                        if in_rows[ccind[p]]:
                            zr[ccind[p]] += 1
                else:
                    for p in range(cindptr[s], cindptr[s + 1]):
                        mark[cindices[p]] = True
                    for p in range(ccptr[s], ccptr[s + 1]):
                        mark[ccind[p]] = True
                    for q in range(t):
                        if not mark[rows[q]]:
                            zr[rows[q]] += 1
                    for p in range(cindptr[s], cindptr[s + 1]):
                        mark[cindices[p]] = False
                    for p in range(ccptr[s], ccptr[s + 1]):
                        mark[ccind[p]] = False
                added = True
                break
        for q in range(t):
            tight[rows[q]] = False
        if not added:
            return uz
