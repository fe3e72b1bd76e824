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
The search itself (:func:`select`) sees only these sums, so a backend of row blocks needs only
its own :class:`PoolRows` (Dask's has none yet: its blocks drop the W of every start but the
best, and :class:`banmf.distributed.BANMF` does not combine). Ties go to the earlier pool factor, and the pool's order is the starts' rank: the same
seed gives the same choice, whatever the thread count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from .._boolean import words
from .._kernels.pool import pool_gains
from .._threads import pick
from ..polish import top_columns

__all__ = ["Pool", "PoolRows", "WholePool", "combine", "grown", "pool_bytes", "select", "useful"]

#: The selection's work, in cells of candidate rectangles visited (about one comparison and a
#: short binary search each), may be at most this many times nnz·k plus a floor: the pool is cut
#: to the candidates that fall first in standalone error until it fits (:func:`combine`).
WORK_PER_NNZ_K = 200
WORK_FLOOR = 10**7
#: Local search sweeps over the chosen factors, at most (each replaces factors while the error
#: falls; on the evaluation's data the second sweep rarely moves one).
MAX_SWEEPS = 3
#: Candidates grown from columns (:func:`grown`): this many times k, from the columns with the
#: most ones.
GROWN_PER_K = 2
#: Dense counts of :func:`grown`'s majorities, rows × sets, at most this many at a time.
MAJORITY_CELLS = 1 << 22


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
    def of(cls, factors) -> tuple[Pool, list]:
        """The pool of the factors of ``factors``, an iterable of Boolean ``(W, H)`` pairs
        (n × k, k × m; k may differ), in order: empty factors dropped, and of equal ones the
        first kept. Also returns, per pair, the candidate of each of its factors (-1: empty)."""
        rows, cols, seen, where = [], [], {}, []
        for W, H in factors:
            at = []
            for l in range(W.shape[1]):
                r, c = np.flatnonzero(W[:, l]), np.flatnonzero(H[l])
                if not (len(r) and len(c)):
                    at.append(-1)
                    continue
                key = (r.tobytes(), c.tobytes())
                if key not in seen:
                    seen[key] = len(rows)
                    rows.append(r)
                    cols.append(c)
                at.append(seen[key])
            where.append(at)
        return cls(*_compressed(rows), *_compressed(cols)), where

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


def select(rows: PoolRows, pool: Pool, m: int, k: int, start: tuple | None = None) -> Selection:
    """Choose at most k candidates of ``pool`` for the lowest error: greedily, each the one
    whose addition lowers the error most (ties: the earlier), while one does, or from ``start``
    (the candidate in each slot, -1 for none, and the change in error they make); then sweeps
    of a local search, replacing the factor of each slot in turn by the candidate that lowers
    the error most in its place, while one does (at most :data:`MAX_SWEEPS`). Exact: every
    change is the error's."""
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
    if start is not None:
        chosen, change = list(start[0]), start[1]
        for s, f in enumerate(chosen):
            if f >= 0:
                put(s, f, True)
    for s in range(k if start is None else 0):
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


def grown(data, count: int, rounds: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Candidates grown from the ``count`` columns with the most ones (ties: the lower index):
    from a column's rows, the columns where those rows hold more ones than observed zeros, then
    the rows that hold more ones than observed zeros in those columns, and so on, ``rounds``
    times (rank-one alternating majorities, as ASSO's association rows grow a column into a
    pattern). Boolean W (n, count), H (count, m); a candidate that empties stays empty."""
    n, m = data.shape
    seeds = top_columns(np.diff(data.T.X.indptr), count)
    W = np.zeros((n, len(seeds)), dtype=bool)
    H = np.zeros((len(seeds), m), dtype=bool)
    H[np.arange(len(seeds)), seeds] = True
    W[:] = _majority(data, H.T)
    for _ in range(rounds):
        H[:] = _majority(data.T, W).T
        W[:] = _majority(data, H.T)
    return W, H


def _majority(data, S: np.ndarray) -> np.ndarray:
    """Per row of ``data`` and set t (the columns ``S[:, t]``, bool m × T): whether the row
    holds more ones than observed zeros in the set's columns."""
    X, unknown = data.X, data.unknown
    out = np.empty((X.shape[0], S.shape[1]), dtype=bool)
    # A few sets at a time: the counts are dense, rows × sets.
    step = max(1, MAJORITY_CELLS // max(1, X.shape[0]))
    for t in range(0, S.shape[1], step):
        part = S[:, t : t + step]
        Sf = part.astype(np.float64)
        ones = X @ Sf
        if unknown is None:
            out[:, t : t + step] = 2 * ones > part.sum(axis=0)
            continue
        cells = unknown.cells @ Sf
        if unknown.observed:  # the cells are the observed zeros
            out[:, t : t + step] = ones > cells
        else:
            out[:, t : t + step] = 2 * ones + cells > part.sum(axis=0)
    return out


def pool_bytes(n: int, m: int, k: int, starts: int) -> int:
    """The most memory :func:`combine` takes for ``starts`` starts at rank k on an n × m
    matrix: the grown candidates (bool) and their dense counts, and the pool's row and column
    lists (8 bytes an entry, at most every entry of every start's and the grown factors)."""
    grown_k = GROWN_PER_K * k
    entries = (starts * k + grown_k) * (n + m)
    return 8 * entries + (n + m) * grown_k + 2 * 8 * MAJORITY_CELLS


def combine(data, runs: list, k: int, more=()) -> tuple[np.ndarray, np.ndarray, int, dict]:
    """The combination on one machine: the pool of the starts' Boolean factors (``runs``, the
    starts' records in their rank, each with "W", "H" and "error"), other Boolean factors
    (``more``, ``(W, H)`` pairs such as a greedy method's) and :func:`grown` candidates, the
    candidates that lower
    the error on their own, cut to the work budget (:data:`WORK_PER_NNZ_K`), and the better of
    two of :func:`select`'s choices among them: greedy, and from the best start's factors.
    Returns W, H, their error and what it took (``info``: pool sizes, bytes, sweeps, and
    ``new``: whether the choice differs from the best start's factors)."""
    n, m = data.shape
    best = min(range(len(runs)), key=lambda r: runs[r]["error"])
    grown_factors = grown(data, min(m, GROWN_PER_K * k))
    pool, where = Pool.of([*((run["W"], run["H"]) for run in runs), *more, grown_factors])
    info = {"pool": len(pool)}
    keep = np.union1d(useful(pool, data), [f for f in where[best] if f >= 0]).astype(np.intp)
    alone = WholePool(data, pool.take(keep), k).gains(
        np.zeros((m, words(k)), dtype=np.uint64), np.zeros(words(k), np.uint64)
    )
    # Best first (ties: the earlier), cut where the selection's work would pass the budget; the
    # best start's factors stay. In pool order again, so that ties go to the earlier start.
    order = np.lexsort((keep, alone))
    order = order[alone[order] < 0]
    calls = k * (3 + 2 * MAX_SWEEPS)
    budget = (WORK_PER_NNZ_K * data.nnz * k + WORK_FLOOR) / calls
    areas = pool.areas[keep]
    order = order[np.cumsum(areas[order]) <= budget]
    keep = np.union1d(keep[order], [f for f in where[best] if f >= 0]).astype(np.intp)
    pool = pool.take(keep)
    renumber = {int(f): i for i, f in enumerate(keep)}
    info.update(candidates=len(pool), bytes=pool.nbytes)
    start = [renumber.get(f, -1) for f in where[best]], runs[best]["error"] - data.X.nnz
    choices = [
        select(WholePool(data, pool, k), pool, m, k),
        select(WholePool(data, pool, k), pool, m, k, start),
    ]
    sel = min(choices, key=lambda c: c.change)
    W, H = pool.factors(sel.chosen, n, m, k)
    # The best start's own factors again: polished and swapped already, they would stay.
    info.update(sweeps=sel.sweeps, new=set(sel.chosen) - {-1} != set(start[0]) - {-1})
    return W, H, data.X.nnz + sel.change, info
