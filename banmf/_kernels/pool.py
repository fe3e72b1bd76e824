"""The combination's kernels: what adding each candidate factor of a pool does to the error, and
the grown candidates' majorities."""

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .boolean import lower_bound
from .variants import kernel


class Rectangles(NamedTuple):
    """A pool's candidates as rectangles of cells.

    Attributes
    ----------
    row_ptr, row_idx : int64 arrays
        Candidate f's rows are ``row_idx[row_ptr[f]:row_ptr[f + 1]]`` (sorted; local to this
        block of rows); entry r is candidate f's row ``row_idx[r]``.
    col_ptr, col_idx : int64 arrays
        Its columns ``col_idx[col_ptr[f]:col_ptr[f + 1]]`` (sorted).
    cell_ptr : int64 array (candidates + 1,)
        The bit where its cells begin (row by row; a word of their own).
    """

    row_ptr: np.ndarray
    row_idx: np.ndarray
    col_ptr: np.ndarray
    col_idx: np.ndarray
    cell_ptr: np.ndarray


class Units(NamedTuple):
    """Units of work: unit u is candidate ``f[u]``'s entries ``r[u]:r[u + 1]``, whose bits
    begin on a word of their own."""

    f: np.ndarray
    r: np.ndarray


class CellBits(NamedTuple):
    """The pool's cells as :func:`pool_cells` reads them from X.

    Attributes
    ----------
    base : int64 array (entries,)
        Per entry, the change in Hamming error from covering its cells where nothing covers
        them (-1 a one, +1 an observed zero).
    ones : uint64 array
        A bit per cell, set on the ones of X (empty: not kept).
    zeros : uint64 array
        A bit per cell, set on the observed zeros (empty: not kept, or mode 0).
    """

    base: np.ndarray
    ones: np.ndarray
    zeros: np.ndarray


class Slots(NamedTuple):
    """The factors selected so far, as slots (bits in words).

    Attributes
    ----------
    row_codes : uint64 array (n, words)
        The slots that hold each row.
    col_codes : uint64 array (m, words)
        The slots that hold each column.
    skip : uint64 array (words,)
        The slots left out.
    """

    row_codes: np.ndarray
    col_codes: np.ndarray
    skip: np.ndarray


#: Rows per parallel step of :func:`set_majority` (its counts are allocated once a step).
MAJORITY_ROWS = 4096


@kernel()
def set_majority(indptr, indices, cindptr, cindices, mode, held, set_ptr, set_idx, sizes, out):
    """``out[i, t]``: whether row i holds more ones than observed zeros in the columns of set
    t (``sizes[t]`` columns); the sets holding column j are ``set_idx[set_ptr[j]:set_ptr[j +
    1]]``, so a row's work is its entries plus their sets, not entries × sets. Bit j of
    ``held`` (uint8, little-endian bits) says whether any set holds column j: the sets hold few
    columns, and a bit per column stays in cache where ``set_ptr`` would not.

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
                if (held[j >> 3] >> (j & 7)) & 1:
                    for q in range(set_ptr[j], set_ptr[j + 1]):
                        ones[set_idx[q]] += 1
            if mode != 0:
                cells[:] = 0
                for p in range(cindptr[i], cindptr[i + 1]):
                    j = cindices[p]
                    if (held[j >> 3] >> (j & 7)) & 1:
                        for q in range(set_ptr[j], set_ptr[j + 1]):
                            cells[set_idx[q]] += 1
            for t in range(sets):
                if mode == 0:
                    out[i, t] = 2 * ones[t] > sizes[t]
                elif mode == 1:
                    out[i, t] = 2 * ones[t] + cells[t] > sizes[t]
                else:
                    out[i, t] = ones[t] > cells[t]


@kernel()
def set_counts(indptr, indices, set_ptr, set_rows, out):
    """``out[t, j]``: the entries in column j of the CSR rows ``set_rows[set_ptr[t]:set_ptr[t +
    1]]`` (set t's rows; ``indptr``, ``indices``). Only the sets' rows are read; sets in
    parallel, each writing its own row of ``out`` (integer counts: any thread count, the
    same)."""
    for t in prange(out.shape[0]):
        out[t, :] = 0
        for q in range(set_ptr[t], set_ptr[t + 1]):
            i = set_rows[q]
            for p in range(indptr[i], indptr[i + 1]):
                out[t, indices[p]] += 1


@njit(cache=True, nogil=True, inline="always")
def _cell_value(indices, p, p1, cindices, q, q1, mode, j):
    """Cell (i, j) of a row whose ones are ``indices[p:p1]`` and listed cells ``cindices[q:q1]``
    (sorted, searched from ``p`` and ``q`` on): -1 a one, +1 an observed zero, 0 unknown; with
    the positions reached. ``mode``: 0, every cell not a one is an observed zero; 1, every cell
    but the unknown (listed) ones; 2, only the listed cells (the observed zeros given)."""
    p = lower_bound(indices, p, p1, j)
    if p < p1 and indices[p] == j:
        return -1, p, q
    if mode == 0:
        return 1, p, q
    q = lower_bound(cindices, q, q1, j)
    listed = q < q1 and cindices[q] == j
    return (1 if listed == (mode == 2) else 0), p, q


@kernel()
def pool_cells(X, cells, mode, rects, units, read, out):
    """Each cell of a pool's candidates read from X once. Cost O(area · log(row length)).

    Parameters
    ----------
    X, cells : Sparse
        X's ones and its listed cells, CSR.
    mode : int
        What the listed cells are (:func:`_cell_value`).
    rects : Rectangles
        The candidates.
    units : Units
        The units of work.
    read : CellBits
        Outputs: ``base`` of every entry; with ``ones`` not empty, the bits of the ones of X
        and with ``zeros`` not empty those of the observed zeros (mode 1 or 2).
    out : int64 array (units,)
        Output: each unit's sum of ``base``.
    """
    indptr, indices = X
    cindptr, cindices = cells
    row_ptr, row_idx, col_ptr, col_idx, cell_ptr = rects
    unit_f, unit_r = units
    base, ones, zeros = read
    keep = len(ones) > 0
    for u in prange(len(unit_f)):
        f = unit_f[u]
        c0, c1 = col_ptr[f], col_ptr[f + 1]
        unit = np.int64(0)
        for r in range(unit_r[u], unit_r[u + 1]):
            i = row_idx[r]
            p, p1 = indptr[i], indptr[i + 1]
            q, q1 = cindptr[i], cindptr[i + 1]
            at = cell_ptr[f] + (r - row_ptr[f]) * (c1 - c0)
            total = 0
            for c in range(c0, c1):
                value, p, q = _cell_value(indices, p, p1, cindices, q, q1, mode, col_idx[c])
                total += value
                if keep and value != 0:
                    bit = at + c - c0
                    word = np.uint64(1) << np.uint64(bit & 63)
                    if value < 0:
                        ones[bit >> 6] |= word
                    elif mode != 0:
                        zeros[bit >> 6] |= word
            base[r] = total
            unit += total
        out[u] = unit


@kernel()
def unit_gains(mode, rects, units, read, slots, out):
    """``out[u]``: unit u's share of the change in Hamming error from adding candidate
    ``units.f[u]`` to a selection, from :func:`pool_cells`'s ``read`` (X is not read).

    The selection covers cell (i, j) when ``row_codes[i] & col_codes[j] & ~skip`` is not zero.
    A row that no slot covers counts its ``base`` whole; in another, each cell left uncovered
    counts -1 if a one, +1 if an observed zero (``mode``: as for :func:`pool_cells`). Integer
    counts: units, and blocks of rows, add up to the whole's.

    Parameters
    ----------
    mode : int
        What the listed cells are (:func:`_cell_value`).
    rects : Rectangles
        The candidates.
    units : Units
        The units of work.
    read : CellBits
        What :func:`pool_cells` read, bits included.
    slots : Slots
        The slots selected.
    out : int64 array (units,)
        Output.
    """
    row_ptr, row_idx, col_ptr, col_idx, cell_ptr = rects
    unit_f, unit_r = units
    base, ones, zeros = read
    row_codes, col_codes, skip = slots
    words = row_codes.shape[1]
    for u in prange(len(unit_f)):
        f = unit_f[u]
        c0, c1 = col_ptr[f], col_ptr[f + 1]
        total = np.int64(0)
        for r in range(unit_r[u], unit_r[u + 1]):
            i = row_idx[r]
            selected = False
            for w in range(words):
                if row_codes[i, w] & ~skip[w]:
                    selected = True
            if not selected:
                total += base[r]
                continue
            at = cell_ptr[f] + (r - row_ptr[f]) * (c1 - c0)
            for c in range(c0, c1):
                j = col_idx[c]
                covered = False
                for w in range(words):
                    if row_codes[i, w] & col_codes[j, w] & ~skip[w]:
                        covered = True
                if covered:
                    continue
                bit = at + c - c0
                word, shift = bit >> 6, np.uint64(bit & 63)
                if (ones[word] >> shift) & np.uint64(1):
                    total -= 1
                elif mode == 0 or (zeros[word] >> shift) & np.uint64(1):
                    total += 1
        out[u] = total
