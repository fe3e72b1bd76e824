"""What switching one bit of a Boolean factor does to the Hamming error of W⊗H, row by row,
counted on the support: the step that the polish and the factor swaps (:mod:`banmf.engine.polish`, :mod:`banmf.engine.swaps`)
and the patterns (:mod:`banmf.patterns`) share.

A row's change from switching bit l is the ones of X in the row that only bit l covers, plus,
over all columns, the ones of bit l that nothing else in the row's pattern covers: from
subset-sum tables of the fixed factor's column codes (k ≤ 16) or from its bitsets per distinct
pattern (any k). Inputs are trusted.
"""

from __future__ import annotations

import numpy as np

from .._kernels.boolean import pack_cols_above
from .._kernels.polish import (
    single_cover,
    support_uncovered,
    table_changes,
    table_uncovered,
    uncovered_counts,
)
from ..data.masks import pack_rows, unique_rows, words
from ..runtime.threads import pick

#: Largest k for which flips may read subset-sum tables (k·2^k counts) instead of bitsets.
TABLE_MAX_K = 16


#: Tables are built when their k·2^k counts are at most this many times the bitsets' word
#: operations for one pass over the free rows (:func:`use_tables`) (docs/decisions.md,
#: "Subset-sum tables for the flips").
TABLE_WORK_RATIO = 1


def bit_tables(codes: np.ndarray, k: int) -> np.ndarray:
    """``T[l, s] = #{j : bit l of codes[j], codes[j] ⊆ s}`` for every k-bit s (k small).

    A row with pattern a has ``T[l, ~(a minus l)]`` columns that bit l alone covers or would
    cover, over all columns: the off-support half of a flip's change in error. Built as a
    subset-sum (zeta) transform, one pass per bit adding each half without the bit into the
    half with it (in numpy: a kernel here cost 0.8 s of a first run's compile for milliseconds
    of work; k cumulative sums over axes of length 2 took 1.1 s at k = 16, these passes 0.19).
    """
    size = 1 << k
    hist = np.bincount(codes, minlength=size).astype(np.int64)
    has_bit = (np.arange(size)[None, :] >> np.arange(k)[:, None]) & 1
    T = has_bit * hist
    for bit in range(k):
        halves = T.reshape(k, -1, 2, 1 << bit)
        halves[:, :, 1, :] += halves[:, :, 0, :]
    return T


def use_tables(k: int, columns: int, rows: int) -> bool:
    """Whether a fixed factor of ``columns`` rows answers the bit changes of ``rows`` free rows
    from subset-sum tables (k·2^k counts built once, k reads a row) rather than bitsets (no
    build, about k·columns/64 word operations a distinct row): by the work of each."""
    if k > TABLE_MAX_K:
        return False
    return (1 << k) * k <= TABLE_WORK_RATIO * rows * k * words(columns)


class Fixed:
    """The fixed factor of a half-step, (c, k) bool with one row per column of X, in the forms a
    bit's change in row error needs: packed codes, and subset-sum tables or bitsets, whichever
    costs less for the ``rows`` free rows that will ask (:func:`use_tables`)."""

    def __init__(self, B: np.ndarray, rows: int):
        self.k = B.shape[1]
        self.codes = pack_rows(B)
        self.tables = None
        if use_tables(self.k, B.shape[0], rows):
            # The codes just packed (k ≤ 16: one word), not B packed again.
            self.tables = bit_tables(self.codes[:, 0].view(np.int64), self.k)
        else:
            self.bits = np.empty((self.k, words(B.shape[0])), dtype=np.uint64)
            pick(pack_cols_above, B.size)(B, 0, self.bits)

    def uncovered(self, A: np.ndarray, only: int) -> np.ndarray:
        """Per row pattern of ``A`` (packed) and bit l: the columns with bit l that no other bit
        of the pattern covers (all columns). Shape (len(A), k), or (len(A), 1) for ``only``."""
        k = self.k
        if self.tables is not None:
            out = np.empty((len(A), k if only < 0 else 1), dtype=np.int64)
            pick(table_uncovered, out.size)(A, self.tables, only, out)
            return out
        uniq, inverse, _ = unique_rows(A)
        out = np.empty((len(uniq), k if only < 0 else 1), dtype=np.int64)
        pick(uncovered_counts, len(uniq) * self.bits.size)(
            np.ascontiguousarray(uniq), self.bits, only, out
        )
        return out[inverse]

    def changes(self, A: np.ndarray, rows, only: int, alone: np.ndarray) -> np.ndarray:
        """In place: ``alone`` (per row ``rows[r]`` of ``A`` and bit l, the ones of X that bit l
        alone covers or would cover; ``rows`` None: every row of A) becomes the row's change in
        error from bit l, the columns bit l alone covers minus twice those ones. Returns
        ``alone``."""
        if self.tables is not None:
            pick(table_changes, alone.size)(A, rows, self.tables, only, alone)
            return alone
        alone *= -2
        alone += self.uncovered(A if rows is None else A[rows], only)
        return alone


def _alone(X, A: np.ndarray, fixed: Fixed, rows: np.ndarray, only: int) -> np.ndarray:
    """Per row ``rows[r]`` and bit l: the cells of the mask X that bit l alone covers (or
    would cover), other bits as in A."""
    out = np.empty((len(rows), fixed.k if only < 0 else 1), dtype=np.int64)
    work = len(rows) * (X.nnz // max(1, X.shape[0]) + 1) * fixed.codes.shape[1] * 4
    pick(support_uncovered, work)(X.indptr, X.indices, A, fixed.codes, rows, only, out)
    return out


def bit_changes(data, A: np.ndarray, fixed_bool: np.ndarray, rows: np.ndarray, only: int = -1):
    """``d[r, l]`` of :func:`fixed_changes` against the Boolean factor ``fixed_bool`` (one row
    per column of the data): integer counts over the rows of ``fixed_bool``, so the sum of the
    results over row blocks of it (with their columns of the data) is the whole's."""
    return fixed_changes(data, A, Fixed(fixed_bool, len(rows)), rows, only)


def fixed_changes(data, A: np.ndarray, fixed: Fixed, rows: np.ndarray, only: int = -1):
    """``d[r, l]`` = error of row ``rows[r]`` with bit l on minus with it off, other bits as in
    A, over the observed cells of ``data`` (a :class:`banmf.io.Dataset`, or its transpose for
    the columns)."""
    X, unknown = data.X, data.unknown
    sup = _alone(X, A, fixed, rows, only)
    if unknown is None:
        return fixed.changes(A, rows, only, sup)
    cells = _alone(unknown.cells, A, fixed, rows, only)
    every = None if unknown.observed else fixed.uncovered(A[rows], only)
    d = unknown.covered(every, sup, cells)
    d -= sup  # in place: d is new
    d -= sup
    return d


def factor_costs(data, W: np.ndarray, Ht: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What each factor is worth: ``removal[l]``, the rise in Hamming error if factor l were
    dropped (the sum over its rows of the error with bit l off minus with it on: rows are
    independent given H), and ``cover`` (m, k + 1): per column of X, the ones covered by
    factor l alone (``cover[j, l]``) and by none (``cover[j, k]``). O(nnz·k); trusted inputs,
    W (n, k) and Ht (m, k) bool; errors over the observed cells of ``data`` (a
    :class:`banmf.io.Dataset`)."""
    n, k = W.shape
    A = pack_rows(W)
    d = fixed_changes(data, A, Fixed(Ht, n), np.arange(n))
    Xt = data.T.X
    removal = -np.einsum("il,il->l", d, W, dtype=np.int64)
    B = pack_rows(Ht)
    cover = np.empty((Xt.shape[0], k + 1), dtype=np.int64)
    pick(single_cover, Xt.nnz * B.shape[1])(Xt.indptr, Xt.indices, B, A, cover)
    return removal, cover
