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
The search itself (:func:`select`) sees only these sums, and so does everything else the
combination asks of the rows: :func:`choose` is written once over a :class:`PoolSource`, the
rows where they are. On one machine (:class:`WholeSource`) that is the data and the starts'
records; on Dask (``banmf.engine.dask.backend``) it is the row blocks, which keep every
start's Boolean rows until the combination, build each candidate's rows on their own rows
(a candidate's identity across blocks is its row count and a 128-bit hash of its rows, summed
over the blocks, with its columns), and send per-candidate sums. Ties go to the earlier pool
factor, and the pool's order is the starts' rank: the same seed gives the same choice,
whatever the thread count or the number of blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._kernels.pool import (
    CellBits,
    Rectangles,
    Slots,
    Units,
    pool_cells,
    set_counts,
    set_majority,
    unit_gains,
)
from .._kernels.sparse import Sparse
from ..data.masks import words
from ..runtime.threads import pick
from .columns import top_columns
from .protocol import GrowRows, PoolRows, PoolSource
from .starts import start_cost

__all__ = [
    "ASSO_SEEDS_PER_K",
    "ASSO_SHARE",
    "ASSO_TAUS",
    "GrowRows",
    "Pool",
    "PoolRows",
    "PoolSource",
    "WholePool",
    "WholeSource",
    "associate",
    "associated",
    "asso_seeds",
    "bounded",
    "column_work",
    "cell_budget",
    "choose",
    "combine",
    "decide",
    "grow",
    "grown",
    "majority",
    "majority_counts",
    "members",
    "pool_bytes",
    "segment_sums",
    "select",
    "unique",
    "useful",
]

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
#: ASSO's candidates (:func:`associated`) from at most this many times k columns, the columns
#: with the most ones, at each threshold of :data:`ASSO_TAUS`.
ASSO_SEEDS_PER_K = 2
#: The thresholds τ of ASSO's candidates: ASSO's own sweep wins on the benchmark's sparse data
#: at 0.4–0.65 and at 0.85–1 (docs/decisions.md, "ASSO's candidates in the pool").
ASSO_TAUS = (0.5, 0.9)
#: ASSO's candidates join the pool while counting their association rows costs at most this
#: share of the starts' work (:func:`asso_seeds`; docs/decisions.md, "ASSO's candidates in the
#: pool").
ASSO_SHARE = 0.01
#: Cells of a candidate per unit of :class:`WholePool`'s work (whole rows of it: at least 64).
UNIT_CELLS = 1 << 16
#: Dense counts of :func:`grown`'s majorities, sets × columns, at most this many at a time.
MAJORITY_CELLS = 1 << 22


@dataclass(frozen=True)
class Pool:
    """Candidate factors: rectangles of rows by columns, as compressed lists.

    Attributes
    ----------
    row_ptr, row_idx : ndarray of int64
        Candidate f's rows are ``row_idx[row_ptr[f]:row_ptr[f + 1]]`` (sorted). ``row_idx`` is
        None where the rows live elsewhere (a backend's row blocks): ``row_ptr`` still counts
        them.
    col_ptr, col_idx : ndarray of int64
        Its columns, the same way.
    """

    row_ptr: np.ndarray
    row_idx: np.ndarray | None
    col_ptr: np.ndarray
    col_idx: np.ndarray

    @classmethod
    def of(cls, factors) -> tuple[Pool, list]:
        """The pool of the factors of ``factors``, an iterable of Boolean ``(W, H)`` pairs
        (n × k, k × m; k may differ), in order: empty factors dropped, and of equal ones the
        first kept. Also returns, per pair, the candidate of each of its factors (-1: empty)."""
        factors = list(factors)
        picks, where = unique([_row_keys(W) for W, _ in factors], [H for _, H in factors])
        return _picked(factors, picks), where

    @classmethod
    def of_lists(cls, rows: list, cols: list) -> Pool:
        """The pool of candidates with rows ``rows[f]`` and columns ``cols[f]`` (sorted)."""
        return cls(*_compressed(rows), *_compressed(cols))

    @classmethod
    def counted(cls, sizes: np.ndarray, cols: list) -> Pool:
        """The pool of candidates whose rows live elsewhere: ``sizes[f]`` of them, and columns
        ``cols[f]``."""
        row_ptr = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=row_ptr[1:])
        return cls(row_ptr, None, *_compressed(cols))

    def __len__(self) -> int:
        return len(self.row_ptr) - 1

    @property
    def areas(self) -> np.ndarray:
        """Each candidate's cells (rows × columns)."""
        return np.diff(self.row_ptr) * np.diff(self.col_ptr)

    @property
    def nbytes(self) -> int:
        parts = (self.row_ptr, self.row_idx, self.col_ptr, self.col_idx)
        return sum(a.nbytes for a in parts if a is not None)

    def take(self, keep: np.ndarray) -> Pool:
        """The candidates ``keep`` (indices, in that order)."""
        cols = [self.col_idx[self.col_ptr[f] : self.col_ptr[f + 1]] for f in keep]
        if self.row_idx is None:
            return Pool.counted(np.diff(self.row_ptr)[np.asarray(keep, dtype=np.intp)], cols)
        return Pool.of_lists(
            [self.row_idx[self.row_ptr[f] : self.row_ptr[f + 1]] for f in keep], cols
        )

    def factors(self, chosen, n: int, m: int, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Boolean W (n, k), H (k, m) with factor s the candidate ``chosen[s]`` (-1: empty)."""
        return self.w(chosen, n, k), self.h(chosen, m, k)

    def w(self, chosen, n: int, k: int) -> np.ndarray:
        """Boolean W (n, k): column s the rows of candidate ``chosen[s]`` (-1: none)."""
        W = np.zeros((n, k), dtype=bool)
        for s, f in enumerate(chosen):
            if f >= 0:
                W[self.row_idx[self.row_ptr[f] : self.row_ptr[f + 1]], s] = True
        return W

    def h(self, chosen, m: int, k: int) -> np.ndarray:
        """Boolean H (k, m): row s the columns of candidate ``chosen[s]`` (-1: none)."""
        H = np.zeros((k, m), dtype=bool)
        for s, f in enumerate(chosen):
            if f >= 0:
                H[s, self.col_idx[self.col_ptr[f] : self.col_ptr[f + 1]]] = True
        return H


def unique(rows: list, Hs: list) -> tuple[list, list]:
    """The candidates of factor sets, duplicates merged: set s's factor l has rows known by
    ``rows[s] = (keys, counts)`` (a key per factor that equal row sets share, and the row
    count) and columns ``Hs[s][l]``. Returns the candidates ``(s, l)`` in order (of equal ones
    the first; empty ones dropped) and, per set, each factor's candidate (-1: empty)."""
    seen: dict = {}
    picks, where = [], []
    for (keys, counts), H in zip(rows, Hs, strict=True):
        at = []
        for l, (key, count) in enumerate(zip(keys, counts, strict=True)):
            c = np.flatnonzero(H[l])
            if not (count and len(c)):
                at.append(-1)
                continue
            key = (key, c.tobytes())
            if key not in seen:
                seen[key] = len(picks)
                picks.append((len(where), l))
            at.append(seen[key])
        where.append(at)
    return picks, where


def _row_keys(W: np.ndarray) -> tuple[list, list]:
    """Per column of a Boolean W, its rows as bytes and their count (:func:`unique`)."""
    rows = [np.flatnonzero(W[:, l]) for l in range(W.shape[1])]
    return [r.tobytes() for r in rows], [len(r) for r in rows]


def _picked(sets: list, picks: list) -> Pool:
    """The pool of factors ``picks`` (``(set, factor)``) of ``(W, H)`` pairs ``sets``."""
    rows = [np.flatnonzero(sets[s][0][:, l]) for s, l in picks]
    return Pool.of_lists(rows, [np.flatnonzero(sets[s][1][l]) for s, l in picks])


def _compressed(parts: list) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in parts], out=ptr[1:])
    idx = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, dtype=np.int64)
    return ptr, idx


def segment_sums(values: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """Per segment ``ptr[f]:ptr[f + 1]`` of ``values``, its sum (0 when empty)."""
    total = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(values, out=total[1:])
    return total[ptr[1:]] - total[ptr[:-1]]


class WholePool:
    """:class:`PoolRows` with the data whole in this process.

    The first gains asked for with a slot assigned read each cell of the pool once from X
    (:func:`~banmf._kernels.pool.pool_cells`): per entry (a candidate's row) its cells'
    change in error uncovered, and a bit per cell for the ones (and the observed zeros); every
    later call reads those (:func:`~banmf._kernels.pool.unit_gains`), not X's rows. The work
    goes in units of whole rows of one candidate (:data:`UNIT_CELLS` cells or so), whatever
    the thread count.
    """

    def __init__(self, data, pool: Pool, k: int):
        self.data, self.pool = data, pool
        self.codes = np.zeros((data.shape[0], words(k)), dtype=np.uint64)
        self.unit_f, self.unit_r, self.cell_ptr = _units(pool)
        self.base = self.ones = self.zeros = None
        self.assigned = False

    def reset(self) -> None:
        """No slot assigned again; the cells read from X stay (another selection over the
        same pool reads none)."""
        self.codes[:] = 0

    def _rects(self) -> Rectangles:
        pool = self.pool
        return Rectangles(pool.row_ptr, pool.row_idx, pool.col_ptr, pool.col_idx, self.cell_ptr)

    def _mode(self) -> tuple:
        X, unknown = self.data.X, self.data.unknown
        if unknown is None:
            return X, 0  # never read
        return unknown.cells, 2 if unknown.observed else 1

    def _read(self, bits: bool, units: np.ndarray) -> None:
        """The cells from X (:func:`~banmf._kernels.pool.pool_cells`): the entries' changes,
        with ``bits`` the cells' bits, and each unit's changes summed in ``units``."""
        X, pool = self.data.X, self.pool
        cells, mode = self._mode()
        self.base = np.empty(len(pool.row_idx), dtype=np.int64)
        size = (int(self.cell_ptr[-1]) >> 6) if bits else 0
        self.ones = np.zeros(size, dtype=np.uint64)
        self.zeros = np.zeros(size if mode else 0, dtype=np.uint64)
        work = int(pool.areas.sum()) * 4
        pick(pool_cells, work)(
            Sparse(X.indptr, X.indices),
            Sparse(cells.indptr, cells.indices),
            mode,
            self._rects(),
            Units(self.unit_f, self.unit_r),
            CellBits(self.base, self.ones, self.zeros),
            units,
        )
        if not bits:
            self.ones = None

    def gains(self, col_codes, skip):
        pool = self.pool
        units = np.empty(len(self.unit_f), dtype=np.int64)
        if self.ones is None and not self.assigned:
            # Nothing selected yet: the cells as they are, from X (no bits kept for one call).
            self._read(False, units)
        else:
            if self.ones is None:
                self._read(True, units)
            pick(unit_gains, int(pool.areas.sum()))(
                self._mode()[1],
                self._rects(),
                Units(self.unit_f, self.unit_r),
                CellBits(self.base, self.ones, self.zeros),
                Slots(self.codes, col_codes, skip),
                units,
            )
        out = np.zeros(len(pool), dtype=np.int64)
        np.add.at(out, self.unit_f, units)
        return out

    def assign(self, slot, f, on):
        pool = self.pool
        self.assigned = True
        _set_bit(self.codes, pool.row_idx[pool.row_ptr[f] : pool.row_ptr[f + 1]], slot, on)


def _units(pool: Pool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The pool's work units (:class:`WholePool`): each unit's candidate and the bounds of its
    entries (``unit_r[u]:unit_r[u + 1]``), and where each candidate's cell bits begin (a word
    each; the last, their end)."""
    rows, cols = np.diff(pool.row_ptr), np.maximum(np.diff(pool.col_ptr), 1)
    # A multiple of 64 rows a unit: its cells' bits begin on a word of their own.
    step = 64 * np.maximum(1, UNIT_CELLS // (64 * cols))
    count = -(-rows // step)
    unit_f = np.repeat(np.arange(len(pool), dtype=np.int64), count)
    first = np.repeat(np.cumsum(count) - count, count)
    start = pool.row_ptr[unit_f] + (np.arange(len(unit_f)) - first) * step[unit_f]
    unit_r = np.append(start, pool.row_ptr[-1]).astype(np.int64)
    cell_ptr = np.zeros(len(pool) + 1, dtype=np.int64)
    np.cumsum((pool.areas + 63) >> 6 << 6, out=cell_ptr[1:])
    return unit_f, unit_r, cell_ptr


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


def select(
    rows: PoolRows,
    pool: Pool,
    m: int,
    k: int,
    start: tuple | None = None,
    allowed: np.ndarray | None = None,
) -> Selection:
    """Choose at most k candidates of ``pool`` for the lowest error: greedily, each the one
    whose addition lowers the error most (ties: the earlier), while one does, or from ``start``
    (the candidate in each slot, -1 for none, and the change in error they make); then sweeps
    of a local search, replacing the factor of each slot in turn by the candidate that lowers
    the error most in its place, while one does (at most :data:`MAX_SWEEPS`). Exact: every
    change is the error's. ``allowed`` (bool, one per candidate; None: all) limits the
    candidates it may put in a slot."""
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

    def gains_of(skip: np.ndarray) -> np.ndarray:
        gains = rows.gains(col_codes, skip)
        if allowed is not None:
            gains = np.where(allowed, gains, np.iinfo(np.int64).max)
        return gains

    if start is not None:
        chosen, change = list(start[0]), start[1]
        for s, f in enumerate(chosen):
            if f >= 0:
                put(s, f, True)
    for s in range(k if start is None else 0):
        gains = gains_of(none)
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
            gains = gains_of(skip)
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
    ones = (np.diff(data.T.X.indptr), segment_sums(np.diff(X.indptr)[pool.row_idx], pool.row_ptr))
    hidden = None
    if unknown is not None:
        by_rows = np.diff(unknown.cells.indptr)[pool.row_idx]
        hidden = (np.diff(unknown.T.cells.indptr), segment_sums(by_rows, pool.row_ptr))
    return bounded(pool, ones, hidden)


def bounded(pool: Pool, ones: tuple, hidden: tuple | None) -> np.ndarray:
    """:func:`useful`'s bound from the counts: ``ones`` is the ones per column (m,) and per
    candidate over its rows (summed over them), ``hidden`` the same of the unknown cells (None:
    none)."""

    def most(counts: tuple) -> np.ndarray:
        by_cols = segment_sums(counts[0][pool.col_idx], pool.col_ptr)
        return np.minimum(by_cols, counts[1])

    cover = most(ones)
    unseen = 0 if hidden is None else most(hidden)
    return np.flatnonzero(pool.areas - unseen < 2 * cover)


def grow(rows: GrowRows, seeds: np.ndarray, m: int, observed: bool, rounds: int = 3):
    """Candidates grown from the columns ``seeds``: from a column's rows, the columns where
    those rows hold more ones than observed zeros, then the rows that hold more ones than
    observed zeros in those columns, and so on, ``rounds`` times (rank-one alternating
    majorities, as ASSO's association rows grow a column into a pattern). Returns their
    Boolean H (len(seeds), m); their rows stay with ``rows``. ``observed``: the unknown
    cells are given as the observed zeros."""
    count = len(seeds)
    H = np.zeros((count, m), dtype=bool)
    H[np.arange(count), seeds] = True
    rows.grow_rows(H)
    step = max(1, MAJORITY_CELLS // max(1, m))
    for _ in range(rounds):
        for t in range(0, count, step):
            H[t : t + step] = decide(*rows.grow_columns(t, t + step), observed)
        rows.grow_rows(H)
    return H


def associate(ones: np.ndarray, cells, sizes: np.ndarray, observed: bool, tau: float) -> np.ndarray:
    """Whether each column's ones in a set of rows are at least ``tau`` of its observed cells
    there, from :func:`majority_counts` (or their sums over blocks of rows): at ``tau`` = 1/2
    :func:`decide` with ties kept. Over the rows of one column i this is row i of ASSO's
    association matrix, the confidence of i → j, thresholded at ``tau``."""
    if observed:  # the cells are the observed zeros
        seen = ones + cells
    elif cells is None:
        seen = sizes
    else:
        seen = sizes - cells
    return ones >= tau * seen


def associated(rows: GrowRows, seeds: np.ndarray, m: int, observed: bool, taus) -> np.ndarray:
    """ASSO's candidates of the columns ``seeds``: per threshold of ``taus``, then per seed i,
    the columns j whose ones in column i's rows are at least τ of their observed cells there
    (:func:`associate`: row i of the association matrix at τ). The counts run over the seeds'
    rows only, X[:, seeds]ᵀ X as :func:`majority_counts` counts it (sums over blocks of rows),
    never an m × m table. Returns their Boolean H (len(taus)·len(seeds), m); ``rows`` then keeps
    the seeds' rows, and :meth:`GrowRows.grow_rows` gives the candidates theirs (the majority,
    as :func:`grow`'s)."""
    count = len(seeds)
    H = np.zeros((count, m), dtype=bool)
    H[np.arange(count), seeds] = True
    rows.grow_rows(H)
    out = np.zeros((len(taus) * count, m), dtype=bool)
    step = max(1, MAJORITY_CELLS // max(1, m))
    for t in range(0, count, step):
        counts = rows.grow_columns(t, min(count, t + step))
        for a, tau in enumerate(taus):
            out[a * count + t : a * count + min(count, t + step)] = associate(
                *counts, observed, tau
            )
    return out


def column_work(X) -> np.ndarray:
    """Per column of the CSR support ``X``, the ones of the rows that hold a one in it (int64):
    what counting the column's association row reads (:func:`associated`). A sum over rows:
    blocks of rows add up."""
    deg = np.diff(X.indptr)
    weights = np.repeat(deg, deg).astype(np.float64)  # integers: exact in any order
    return np.bincount(X.indices, weights=weights, minlength=X.shape[1]).astype(np.int64)


def asso_seeds(
    ones: np.ndarray, work: np.ndarray, shape: tuple, nnz: int, k: int, runs: list
) -> np.ndarray:
    """The columns whose ASSO candidates (:func:`associated`) join the combination's pool: of
    the :data:`ASSO_SEEDS_PER_K` · k columns with the most ones (``ones``, per column; ties: the
    lower index; none empty), the first while counting them (``work``, :func:`column_work`,
    plus a pass over the m columns a seed and threshold) costs at most :data:`ASSO_SHARE` of
    the starts' work (``runs``' records, :func:`start_cost` at the iterations each ran). Empty
    where the first does not fit. The same decision on every backend: it reads column sums and
    the starts' iterations only."""
    n, m = shape
    starts = sum(start_cost(n, m, nnz, k, run.n_iter) for run in runs)
    top = top_columns(ones, min(m, ASSO_SEEDS_PER_K * k))
    top = top[ones[top] > 0]
    cost = np.cumsum(work[top] + m * (1 + len(ASSO_TAUS)))
    return top[cost <= ASSO_SHARE * starts]


def grown(data, count: int, rounds: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """:func:`grow` on one machine from the ``count`` columns with the most ones (ties: the
    lower index). Boolean W (n, count), H (count, m); a candidate that empties stays empty."""
    source = WholeSource(data)
    seeds = top_columns(source.column_ones(), count)
    H = grow(source, seeds, data.shape[1], source.observed, rounds)
    return source.grown_set(H)


def members(S: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row e of ``S`` (bool, e × T: element e in set t), the sets holding it, in
    ascending order: ``sets[ptr[e]:ptr[e + 1]]``."""
    elements, sets = np.nonzero(S)
    ptr = np.zeros(S.shape[0] + 1, dtype=np.int64)
    np.cumsum(np.bincount(elements, minlength=S.shape[0]), out=ptr[1:])
    return ptr, sets


def majority_counts(data, S: np.ndarray) -> tuple:
    """Per set t of the data's rows (``S[:, t]``, bool n × T) and column j: the column's ones
    in the set's rows, its unknown cells there (None without them; the observed zeros with
    ``observed=``), both T × m, and the sets' sizes (T × 1); int64 counts. Only the sets'
    rows are read."""
    X, unknown = data.X, data.unknown
    ptr, rows = members(S.T)
    work = int(np.diff(X.indptr)[rows].sum()) + len(rows)

    def counts(A):
        out = np.empty((S.shape[1], A.shape[1]), dtype=np.int64)
        pick(set_counts, work)(A.indptr, A.indices, ptr, rows, out)
        return out

    cells = None if unknown is None else counts(unknown.cells)
    return counts(X), cells, np.diff(ptr)[:, None]


def decide(ones: np.ndarray, cells, sizes: np.ndarray, observed: bool) -> np.ndarray:
    """Whether each column holds more ones than observed zeros in a set of rows, from
    :func:`majority_counts` (or their sums over blocks of rows)."""
    if observed:  # the cells are the observed zeros
        return ones > cells
    if cells is None:
        return 2 * ones > sizes
    return 2 * ones + cells > sizes


def majority(data, S: np.ndarray) -> np.ndarray:
    """Per row of ``data`` and set t (the columns ``S[:, t]``, bool m × T): whether the row
    holds more ones than observed zeros in the set's columns, in one pass over the rows
    (:func:`~banmf._kernels.pool.set_majority`: each entry costs the sets holding its column)."""
    X, unknown = data.X, data.unknown
    if unknown is None:
        cells, mode = X, 0  # never read
    else:
        cells, mode = unknown.cells, 2 if unknown.observed else 1
    ptr, sets = members(S)
    held = np.packbits(np.diff(ptr) > 0, bitorder="little")
    out = np.empty((X.shape[0], S.shape[1]), dtype=bool)
    work = X.nnz + cells.nnz * (mode != 0) + X.shape[0] * S.shape[1]
    pick(set_majority, work)(
        X.indptr, X.indices, cells.indptr, cells.indices, mode, held, ptr, sets, S.sum(axis=0), out
    )
    return out


def cell_budget(nnz: int, k: int) -> float:
    """The most cells the chosen candidates' rectangles may hold together (:func:`choose`):
    :data:`WORK_PER_NNZ_K` · nnz · k plus the floor, over the selection's calls for gains."""
    return (WORK_PER_NNZ_K * nnz * k + WORK_FLOOR) / (k * (3 + 2 * MAX_SWEEPS))


def pool_bytes(n: int, m: int, k: int, starts: int, nnz: int) -> int:
    """The most memory :func:`combine` takes for ``starts`` starts at rank k on an n × m
    matrix with ``nnz`` ones: the grown candidates (bool) and their dense counts, the pool's
    row and column lists and each entry's change uncovered (8 bytes each, at most every entry
    of every start's and the grown factors), and :class:`WholePool`'s bits of the ones and
    observed zeros of the candidates' cells (:func:`cell_budget`)."""
    grown_k = (GROWN_PER_K + ASSO_SEEDS_PER_K * len(ASSO_TAUS)) * k
    entries = (starts * k + grown_k) * (n + m)
    bits = 2 * int(cell_budget(nnz, k)) // 8
    return 16 * entries + (n + m) * grown_k + 2 * 8 * MAJORITY_CELLS + bits


class WholeSource:
    """:class:`PoolSource` with the data whole in this process: the starts' records hold W."""

    def __init__(self, data):
        self.data, self.shape, self.nnz = data, data.shape, data.nnz
        self.observed = data.unknown is not None and data.unknown.observed
        self.W = None  # the grown candidates' rows
        self._rows: WholePool | None = None  # the last pool's, shared by the selections

    def column_ones(self):
        return np.diff(self.data.T.X.indptr)

    def column_work(self):
        return column_work(self.data.X)

    def grow_rows(self, H):
        self.W = majority(self.data, H.T)

    def grow_columns(self, t0, t1):
        return majority_counts(self.data, self.W[:, t0:t1])

    def set_of(self, run):
        return run.W, run.H

    def grown_set(self, H):
        return self.W, H

    def row_keys(self, sets):
        return [_row_keys(W) for W, _ in sets]

    def pool(self, sets, picks):
        return _picked(sets, picks)

    def useful(self, pool):
        return useful(pool, self.data)

    def take(self, pool, keep):
        return pool.take(keep)

    def rows(self, pool, k):
        if self._rows is None or self._rows.pool is not pool:
            self._rows = WholePool(self.data, pool, k)
        else:
            self._rows.reset()
        return self._rows

    def w(self, pool, chosen, k):
        return pool.w(chosen, self.shape[0], k)


#: The combination pools GreConD's factors too when its estimated work is at most this share of
#: the starts' (:func:`grecond_pays`). The estimate counts word operations, which cost far more
#: than the iterations' multiply-adds: so narrow data only, where its concepts, which never
#: cover a zero, complement the starts' factors (docs/decisions.md, "GreConD in the pool").
GRECOND_SHARE = 1e-3


def grecond_pays(work: float, observed: bool, shape: tuple, nnz: int, k: int, runs: list) -> bool:
    """Whether GreConD's factors join the combination's pool: where GreConD runs (not with
    observed cells given, ``observed``) and its estimated ``work``
    (:func:`banmf.models.grecond.grecond_work`) is at most :data:`GRECOND_SHARE` of the starts'
    (``runs``' records, :func:`start_cost` at the iterations each ran). The same decision on
    every backend: it reads the problem's size and the starts' iterations only."""
    if observed:
        return False
    n, m = shape
    starts = sum(start_cost(n, m, nnz, k, run.n_iter) for run in runs)
    return work <= GRECOND_SHARE * starts


def combine(data, runs: list, k: int, more=()) -> tuple[np.ndarray, np.ndarray, int, dict]:
    """The combination on one machine: :func:`choose` over :class:`WholeSource`."""
    return choose(WholeSource(data), runs, k, more)


def choose(
    source: PoolSource, runs: list, k: int, more=()
) -> tuple[np.ndarray | None, np.ndarray, int, dict]:
    """The combination: the pool of the starts' Boolean factors (``runs``, the starts'
    records in their rank, each with "H" and "error"), other factor sets of the source with
    their errors (``more``, ``(set, error)`` pairs, such as a greedy method's),
    :func:`grow`'s candidates from the columns with the most ones and ASSO's
    (:func:`associated`) where they pay (:func:`asso_seeds`), the candidates that lower the
    error on their own, cut to the work budget (:data:`WORK_PER_NNZ_K`), and the best of
    :func:`select`'s choices among those other than ASSO's: greedy, from the best start's
    factors, and from the lowest set of ``more`` where it is lower than every start (the
    factors of a set the choice starts from stay in the pool whole); then improved from the
    whole pool. The choice is never higher than a set it starts from. Returns W (None where
    the source keeps it), H, their error and what it took (``info``: pool sizes, bytes,
    sweeps, and ``new``: whether the choice differs from the best start's factors)."""
    n, m = source.shape
    best = min(range(len(runs)), key=lambda r: runs[r].error)
    errors = [run.error for run in runs] + [error for _, error in more]
    # The sets the choice starts from: the best start's, and the lowest other set (ties: the
    # earlier) where it is lower than every start.
    lowest = min(range(len(errors)), key=errors.__getitem__)
    froms = [best] + ([lowest] if errors[lowest] < errors[best] else [])
    ones = source.column_ones()
    sets = [*(source.set_of(run) for run in runs), *(found for found, _ in more)]
    assoc = asso_seeds(ones, source.column_work(), source.shape, source.nnz, k, runs)
    H = associated(source, assoc, m, source.observed, ASSO_TAUS) if len(assoc) else None
    grown_H = grow(source, top_columns(ones, min(m, GROWN_PER_K * k)), m, source.observed)
    n_grown = len(grown_H)
    if H is not None:
        # One set with the grown candidates: their rows by the same majority.
        grown_H = np.concatenate([grown_H, H])
        source.grow_rows(grown_H)
    sets.append(source.grown_set(grown_H))
    picks, where = unique(source.row_keys(sets), [H for _, H in sets])
    pool = source.pool(sets, picks)
    info = {"pool": len(pool), "asso": len(assoc)}
    ours = [f for s in froms for f in where[s] if f >= 0]
    keep = np.union1d(source.useful(pool), ours).astype(np.intp)
    alone = source.rows(source.take(pool, keep), k).gains(
        np.zeros((m, words(k)), dtype=np.uint64), np.zeros(words(k), np.uint64)
    )
    # Best first (ties: the earlier), cut where the selection's work would pass the budget; the
    # factors of the sets the choice starts from stay. ASSO's candidates come after the others:
    # they take what budget the others leave (large ones would crowd out the starts' factors on
    # denser data). In pool order again, so that ties go to the earlier start.
    last = len(sets) - 1
    asso = np.array([s == last and l >= n_grown for s, l in picks], dtype=bool)
    late = asso[keep]
    order = np.lexsort((keep, alone, late))
    order = order[alone[order] < 0]
    budget = cell_budget(source.nnz, k)
    areas = pool.areas[keep]
    order = order[np.cumsum(areas[order]) <= budget]
    keep = np.union1d(keep[order], ours).astype(np.intp)
    pool = source.take(pool, keep)
    renumber = {int(f): i for i, f in enumerate(keep)}
    info.update(candidates=len(pool), bytes=pool.nbytes)
    start = [renumber.get(f, -1) for f in where[best]], runs[best].error - source.nnz
    # The choices among the other candidates, as without ASSO's; then the best one improved by
    # replacements from the whole pool, which only lower its error: a larger pool may lead a
    # greedy choice astray, never this one.
    late = asso[keep]
    others = ~late if late.any() else None
    choices = [select(source.rows(pool, k), pool, m, k, allowed=others)]
    for s in froms:
        # A set of fewer than k factors (a greedy method that covered X) leaves slots empty.
        slots = [renumber.get(f, -1) for f in where[s]] + [-1] * (k - len(where[s]))
        begin = slots, errors[s] - source.nnz
        choices.append(select(source.rows(pool, k), pool, m, k, begin, allowed=others))
    sel = min(choices, key=lambda c: c.change)
    if others is not None:
        sel = min(
            sel,
            select(source.rows(pool, k), pool, m, k, (sel.chosen, sel.change)),
            key=lambda c: c.change,
        )
    W, H = source.w(pool, sel.chosen, k), pool.h(sel.chosen, m, k)
    # The best start's own factors again: polished and swapped already, they would stay.
    info.update(sweeps=sel.sweeps, new=set(sel.chosen) - {-1} != set(start[0]) - {-1})
    return W, H, source.nnz + sel.change, info
