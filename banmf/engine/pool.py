"""Combining the starts: a pool of rank-one Boolean factors, and k of them chosen for the error.

Every start of a fit ends with k Boolean factors, and only the best start's are kept: the others
are thrown away although some of their factors may fit parts of the data better than the kept
start's. The combination pools the factors of every start (duplicates merged), chooses k of them
to minimise the exact Hamming error (greedy by the largest fall in error, then a local search
that replaces one chosen factor by a pool factor while that lowers the error), and hands the
choice to the polish and the swaps as one more start. The driver keeps it only if it ends lower
than every start, so it is never worse than the best one.

The error of adding a candidate to a selection is a sum over rows (each cell of the candidate's
rectangle that the selection leaves uncovered counts -1 if a one, +1 if an observed zero): a
:class:`PoolRows` computes it for all candidates at once on its rows, and blocks of rows add up.
The search itself (:func:`select`) sees only these sums, so it is written once for every
backend. Ties go to the earlier pool factor, and the pool's order is the starts' rank: the same
seed gives the same choice, whatever the thread count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .._boolean import words
from .._kernels.pool import pool_gains
from .._threads import pick

__all__ = ["Pool", "PoolRows", "WholePool", "select"]

#: The selection's work, in cells of candidate rectangles visited (about one comparison and a
#: short binary search each), may be at most this many times nnz·k plus a floor: the pool is cut
#: to the candidates that fall first in standalone error until it fits
#: (:meth:`Pool.within`).
WORK_PER_NNZ_K = 20
WORK_FLOOR = 10**7
#: Local search sweeps over the chosen factors, at most (each replaces factors while the error
#: falls; on the evaluation's data the second sweep rarely moves one).
MAX_SWEEPS = 3


@dataclass(frozen=True)
class Pool:
    """Candidate factors: rectangles of rows by columns, as compressed lists.

    Attributes
    ----------
    row_ptr, row_idx : ndarray of int64
        Candidate f's rows are ``row_idx[row_ptr[f]:row_ptr[f + 1]]`` (sorted).
    col_ptr, col_idx : ndarray of int64
        Its columns, the same way.
    """

    row_ptr: np.ndarray
    row_idx: np.ndarray
    col_ptr: np.ndarray
    col_idx: np.ndarray

    @classmethod
    def of(cls, factors) -> Pool:
        """The pool of the factors of ``factors``, an iterable of Boolean ``(W, H)`` pairs
        (n × k, k × m; k may differ), in order: empty factors dropped, and of equal ones the
        first kept."""
        rows, cols, seen = [], [], set()
        for W, H in factors:
            for l in range(W.shape[1]):
                r, c = np.flatnonzero(W[:, l]), np.flatnonzero(H[l])
                key = (r.tobytes(), c.tobytes())
                if len(r) and len(c) and key not in seen:
                    seen.add(key)
                    rows.append(r)
                    cols.append(c)
        return cls(*_compressed(rows), *_compressed(cols))

    def __len__(self) -> int:
        return len(self.row_ptr) - 1

    @property
    def areas(self) -> np.ndarray:
        """Each candidate's cells (rows × columns)."""
        return np.diff(self.row_ptr) * np.diff(self.col_ptr)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.row_ptr, self.row_idx, self.col_ptr, self.col_idx))

    def take(self, keep: np.ndarray) -> Pool:
        """The candidates ``keep`` (indices, in that order)."""
        rows = [self.row_idx[self.row_ptr[f] : self.row_ptr[f + 1]] for f in keep]
        cols = [self.col_idx[self.col_ptr[f] : self.col_ptr[f + 1]] for f in keep]
        return Pool(*_compressed(rows), *_compressed(cols))

    def factors(self, chosen, n: int, m: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Boolean W (n, k), H (k, m) with factor s the candidate ``chosen[s]`` (-1: empty)."""
        W = np.zeros((n, k), dtype=bool)
        H = np.zeros((k, m), dtype=bool)
        for s, f in enumerate(chosen):
            if f >= 0:
                W[self.row_idx[self.row_ptr[f] : self.row_ptr[f + 1]], s] = True
                H[s, self.col_idx[self.col_ptr[f] : self.col_ptr[f + 1]]] = True
        return W, H


def _compressed(parts: list) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in parts], out=ptr[1:])
    idx = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)
    return ptr, idx


class PoolRows(Protocol):
    """The data's rows as the selection sees them, with the pool's rows among them and each
    row's chosen slots."""

    def gains(self, col_codes: np.ndarray, skip: np.ndarray) -> np.ndarray:
        """Summed over the rows: per candidate, the change in error from adding it to the
        selection whose column codes are ``col_codes`` (m × words), slots ``skip`` left out."""

    def assign(self, slot: int, f: int, on: bool) -> None:
        """Candidate f's rows take (``on``) or leave slot ``slot``."""


class WholePool:
    """:class:`PoolRows` with the data whole in this process."""

    def __init__(self, data, pool: Pool, k: int):
        self.data, self.pool = data, pool
        self.codes = np.zeros((data.shape[0], words(k)), dtype=np.uint64)

    def gains(self, col_codes, skip):
        X, unknown, pool = self.data.X, self.data.unknown, self.pool
        if unknown is None:
            cells, mode = X, 0  # never read
        else:
            cells, mode = unknown.cells, 2 if unknown.observed else 1
        out = np.empty(len(pool), dtype=np.int64)
        work = int(pool.areas.sum()) * 4
        pick(pool_gains, work)(
            X.indptr,
            X.indices,
            cells.indptr,
            cells.indices,
            mode,
            pool.row_ptr,
            pool.row_idx,
            pool.col_ptr,
            pool.col_idx,
            self.codes,
            col_codes,
            skip,
            out,
        )
        return out

    def assign(self, slot, f, on):
        pool = self.pool
        _set_bit(self.codes, pool.row_idx[pool.row_ptr[f] : pool.row_ptr[f + 1]], slot, on)


def _set_bit(codes: np.ndarray, where: np.ndarray, slot: int, on: bool) -> None:
    word, bit = slot >> 6, np.uint64(1) << np.uint64(slot & 63)
    if on:
        codes[where, word] |= bit
    else:
        codes[where, word] &= ~bit


@dataclass
class Selection:
    """The chosen candidates (``chosen[s]`` in slot s, -1 for none) and the change in error
    they make from covering nothing (``change``, negative)."""

    chosen: list
    change: int
    sweeps: int


def select(rows: PoolRows, pool: Pool, m: int, k: int) -> Selection:
    """Choose at most k candidates of ``pool`` for the lowest error: greedily, each the one
    whose addition lowers the error most (ties: the earlier), while one does; then sweeps of a
    local search, replacing the factor of each slot in turn by the candidate that lowers the
    error most in its place, while one does (at most :data:`MAX_SWEEPS`). Exact: every change
    is the error's."""
    width = words(k)
    col_codes = np.zeros((m, width), dtype=np.uint64)
    none = np.zeros(width, dtype=np.uint64)
    chosen = [-1] * k
    change = 0

    def put(s: int, f: int, on: bool) -> None:
        rows.assign(s, f, on)
        _set_bit(col_codes, pool.col_idx[pool.col_ptr[f] : pool.col_ptr[f + 1]], s, on)

    if not len(pool):
        return Selection(chosen, change, 0)
    for s in range(k):
        gains = rows.gains(col_codes, none)
        f = int(np.argmin(gains))
        if gains[f] >= 0:
            break
        put(s, f, True)
        chosen[s] = f
        change += int(gains[f])
    sweeps = 0
    for sweeps in range(1, MAX_SWEEPS + 1):
        moved = False
        # Empty slots are alike: the first stands for them all.
        slots = [s for s in range(k) if chosen[s] >= 0] + [s for s in range(k) if chosen[s] < 0][:1]
        for s in slots:
            skip = none.copy()
            skip[s >> 6] = np.uint64(1) << np.uint64(s & 63)
            gains = rows.gains(col_codes, skip)
            now = int(gains[chosen[s]]) if chosen[s] >= 0 else 0
            f = int(np.argmin(gains))
            if gains[f] >= 0 and now > 0:
                # No candidate helps in this slot and its factor hurts: the slot is emptied.
                put(s, chosen[s], False)
                chosen[s] = -1
                change -= now
                moved = True
            elif gains[f] < now:
                if chosen[s] >= 0:
                    put(s, chosen[s], False)
                put(s, f, True)
                chosen[s] = f
                change += int(gains[f]) - now
                moved = True
        if not moved:
            break
    return Selection(chosen, change, sweeps)


def useful(pool: Pool, data) -> np.ndarray:
    """The candidates that might lower the error on their own, by a bound that needs no pass
    over their cells: those covering at most as many observed zeros as ones are kept. A
    candidate covers at most as many ones as its columns hold, or its rows (whichever is
    fewer); every other cell of it is a zero, or unknown (at most as many as its columns, or
    its rows, hold). With observed zeros given (``observed=``) every candidate is kept."""
    X, unknown = data.X, data.unknown
    if unknown is not None and unknown.observed:
        return np.arange(len(pool))

    def most(col_counts: np.ndarray, row_counts: np.ndarray) -> np.ndarray:
        by_cols = np.add.reduceat(col_counts[pool.col_idx], pool.col_ptr[:-1])
        by_rows = np.add.reduceat(row_counts[pool.row_idx], pool.row_ptr[:-1])
        return np.minimum(by_cols, by_rows)

    ones = most(np.diff(data.T.X.indptr), np.diff(X.indptr))
    hidden = (
        0
        if unknown is None
        else most(np.diff(unknown.T.cells.indptr), np.diff(unknown.cells.indptr))
    )
    return np.flatnonzero(pool.areas - hidden < 2 * ones)


def combine(data, factors, k: int) -> tuple[np.ndarray, np.ndarray, int, dict]:
    """The combination on one machine: the pool of ``factors`` (Boolean ``(W, H)`` pairs, the
    starts' in their rank), the candidates that lower the error on their own, cut to the work
    budget (:data:`WORK_PER_NNZ_K`), and :func:`select`'s choice among them. Returns W, H,
    their error and what it took (``info``: pool sizes, bytes, sweeps)."""
    n, m = data.shape
    pool = Pool.of(factors)
    info = {"pool": len(pool)}
    pool = pool.take(useful(pool, data))
    rows = WholePool(data, pool, k)
    alone = rows.gains(np.zeros((m, words(k)), dtype=np.uint64), np.zeros(words(k), np.uint64))
    # Best first (ties: the earlier), cut where the selection's work would pass the budget; in
    # pool order again, so that the choice's ties go to the earlier start.
    order = np.lexsort((np.arange(len(pool)), alone))
    order = order[alone[order] < 0]
    calls = k * (2 + MAX_SWEEPS)
    budget = (WORK_PER_NNZ_K * data.nnz * k + WORK_FLOOR) / calls
    order = order[np.cumsum(pool.areas[order]) <= budget]
    pool = pool.take(np.sort(order))
    info.update(candidates=len(pool), bytes=pool.nbytes)
    sel = select(WholePool(data, pool, k), pool, m, k)
    W, H = pool.factors(sel.chosen, n, m, k)
    info["sweeps"] = sel.sweeps
    return W, H, data.X.nnz + sel.change, info
