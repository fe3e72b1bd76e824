"""GreConD (Belohlavek & Vychodil, JCSS 2010): factors as formal concepts, from below."""

from __future__ import annotations

from numbers import Real
from typing import ClassVar

import numpy as np

from .._kernels.boolean import pack_csr_rows
from .._kernels.cover import Concept, Packed, cover_concept, grecond_values, intent_of
from .._kernels.sparse import Sparse
from ..data.masks import transpose_mask, with_cells
from ..data.params import NONE, Interval
from ..data.validation import WORK_BUDGET, check_work
from ..runtime.memory import format_size
from ..runtime.progress import StartProgress
from ..runtime.threads import blocks_for, cancelled, pick, threads_for, variant
from ._base import (
    COMMON_CONSTRAINTS,
    COMMON_DEFAULTS,
    BaseFactorization,
    budgeted,
    declared_init,
    refuse_observed,
)

#: Calls of the value kernel per factor, at most about; the first, over all rows, costs the
#: most (docs/decisions.md, "The work estimates").
CALLS_PER_FACTOR = 3

__all__ = ["GreConD", "grecond_work", "grecond_work_of"]


def _packed(mask: np.ndarray, words: int) -> np.ndarray:
    """A bool vector as bits, bit i of word i // 64 (little-endian words)."""
    out = np.zeros(words * 8, dtype=np.uint8)
    packed = np.packbits(mask, bitorder="little")
    out[: len(packed)] = packed
    return out.view("<u8")


def grecond_work(X, limit: int | None) -> float:
    """GreConD's estimated work on the relation X (a CSR mask) for ``limit`` factors (None:
    min(n, m)): :func:`grecond_work_of` its shape, ones and the sum of its rows' squared
    degrees."""
    deg = np.diff(X.indptr).astype(np.float64)
    return grecond_work_of(X.shape, X.nnz, float(deg @ deg), limit)


def grecond_work_of(shape: tuple, nnz: int, degree_squares: float, limit: int | None) -> float:
    """GreConD's estimated work on a relation of ``shape`` with ``nnz`` ones whose rows'
    squared degrees sum to ``degree_squares`` (a sum over row blocks too), for ``limit``
    factors (None: min(n, m)). Each factor costs a few calls of :func:`grecond_values`: the
    first, over all rows, Σ deg(i)² + nnz, the others a pass over the columns' rows (on packed
    columns, each call m words and two per one of a row for each column)."""
    n, m = shape
    per_factor = degree_squares + CALLS_PER_FACTOR * (nnz + m)
    words = -(-n // 64)
    if m * words <= nnz:
        per_factor = min(per_factor, CALLS_PER_FACTOR * (m * words + 2.0 * nnz / max(1, n) * m))
    return (limit or min(n, m)) * per_factor


class GreConD(BaseFactorization):
    """Greedy Boolean factorization by formal concepts; never covers a 0 of X.

    Each factor is a formal concept (C, D): the rows C that have every column of D, and D the
    columns shared by every row of C. A factor starts as the concept of all rows (D the columns
    every row has, often none) and grows D one column at a time (closing it each time) while
    the number of still-uncovered ones in C × D rises. Since every factor lies
    inside the ones of X, the error is only missed ones; with ``n_components=None`` it stops
    when everything is covered, an exact factorization.

    Unknown cells (``fit(X, missing=M)``) are "don't care": a concept may contain them (they
    join X's relation), but they count neither as ones to cover nor as errors.

    Trying every column as the next one costs Σ deg(i)² over the rows i of the current extent
    (deg(i): the ones of row i), so about ``Σ_i deg(i)²`` for a factor's first column and less
    after: a few seconds on retail (88162 × 16470, 908,576 ones) for ten factors.

    Parameters
    ----------
    n_components : int or None, default None
        Maximum number of factors; None: until X is covered exactly.
    work_budget : float or None, default 6e10
        Refuse up front (``ValueError`` with the estimate and what to change) a fit estimated,
        from X's rows and k (min(n, m) factors when None), at more operations than this (about
        5 minutes on 2 cores, at 2·10⁸ operations a second); None: no limit.
    polish : bool or {"auto", "exact", "flip"}, default False
        Polish the Boolean factors with :func:`banmf.polish` after the method (off by default
        so that this stays the published baseline; ``unpolished_err_`` keeps its own error).
    n_jobs : int or None, default None
        Thread budget, as for :class:`BANMF`.
    random_state : ignored
        Deterministic (ties go to the lowest column index); kept for the common interface.
    verbose : int, default 0

    Attributes
    ----------
    W_ : ndarray (n, k'), bool
    components_ : ndarray (k', m), bool
        ``k' ≤ n_components`` factors found; with a fixed ``n_components`` the arrays are padded
        with empty factors to exactly that many.
    reconstruction_err_, relative_error_, n_iter_ (factors found)
    interrupted_ : bool
        True if Ctrl-C (KeyboardInterrupt) stopped the fit: the result holds the factors found
        before it (padded with empty ones to ``n_components``), and KeyboardInterrupt is raised
        again once the attributes are set (:func:`banmf.fit_many` cancelling a fit stops it
        the same way, without the exception).

    References
    ----------
    Belohlavek & Vychodil, "Discovery of optimal factors in binary data via a novel method of
    matrix decomposition", JCSS 76(1), 2010.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1, 1, 0], [1, 1, 1], [0, 1, 1]])
    >>> GreConD().fit(X).reconstruction_err_
    0
    """

    _parameter_constraints: ClassVar[dict] = {
        **COMMON_CONSTRAINTS,
        "n_components": [NONE, *COMMON_CONSTRAINTS["n_components"]],
        "work_budget": [NONE, Interval(Real, 0, None, closed="neither")],
    }

    __init__ = declared_init(
        {
            "n_components": None,
            "work_budget": WORK_BUDGET,
            **COMMON_DEFAULTS,
        }
    )

    @budgeted
    def fit(self, X, y=None, *, missing=None, observed=None) -> GreConD:
        """Fit to the 0/1 matrix X (dense or sparse, (n, m)); ``missing`` marks unknown cells
        as in :meth:`BANMF.fit` (``observed`` is refused: with few cells observed, "don't care"
        leaves nothing to find)."""
        data, limit, start = self._begin(X, missing, observed)
        X, unknown = data.X, data.unknown
        n, m = X.shape
        refuse_observed(data, "GreConD")
        self._polish_method(limit)  # validate before the work
        # The relation: X's ones and the unknown cells, which start covered (never counted).
        R, dont_care = (X, None) if unknown is None else with_cells(X, unknown.cells)
        self._check_work(R, limit)
        # Without a limit, X.nnz bounds the number of factors (each covers a new one).
        progress = StartProgress(1, 1, limit)  # None: factors until X is covered, how many unknown
        concepts = []
        interrupted = cancel = False
        try:
            cancel = self._greedy(R, dont_care, limit, concepts, progress)
        except KeyboardInterrupt:
            interrupted = True  # the first Ctrl-C: the factors found so far are the result
        k = len(concepts) if limit is None else limit
        W = np.zeros((n, k), dtype=bool)
        H = np.zeros((k, m), dtype=bool)
        for l, (rows, intent) in enumerate(concepts):
            W[rows, l] = True
            H[l] = intent
        err = data.error(W, H)
        method = None if interrupted or cancel else self._polish_method(W.shape[1])
        found = (W, H, err, len(concepts))
        self._conclude(data, found, start, method, progress, interrupted, cancel)
        return self

    def _check_work(self, X, limit) -> None:
        """Refuse up front a fit estimated over ``work_budget`` (:func:`grecond_work`)."""
        n, m = X.shape
        factors = limit or min(n, m)
        what = f"GreConD on this {n}×{m} X ({X.nnz:,} ones) with n_components={limit}"
        if limit is None:
            what += f" (up to {factors:,} factors: W alone {format_size(n * factors)})"
            fix = "set n_components (each factor costs about the same)"
        else:
            fix = "pass a smaller n_components"
        check_work(grecond_work(X, limit), self.work_budget, what, fix)

    @staticmethod
    def _greedy(X, dont_care, limit, concepts: list, progress: StartProgress) -> bool:
        """Append the concepts (extent rows, intent mask) of the relation X one by one to
        ``concepts``, so that whatever was found stays there if Ctrl-C stops the loop; the
        cells of X marked ``dont_care`` (None: none) are never counted as covered. Returns
        True if :func:`banmf.fit_many` cancelled the fit."""
        n, m = X.shape
        Xt = transpose_mask(X)  # CSC of X: the rows of each column
        # per one of X, in CSR order
        uncov = np.ones(X.nnz, dtype=bool) if dont_care is None else ~dont_care
        n_uncov = int(uncov.sum())
        deg2 = np.diff(X.indptr).astype(np.int64) ** 2
        all_rows = np.arange(n, dtype=X.indices.dtype)
        values = np.empty(m, dtype=np.int64)
        intent = np.zeros(m, dtype=bool)
        in_extent = np.empty(n, dtype=bool)
        words = -(-n // 64)
        if m * words <= X.nnz:
            # Dense enough that packed columns (two words per one of X at most) pay: the kernel
            # takes them for the columns where they are cheaper than counting row by row.
            colbits = np.empty((m, words), dtype=np.uint64)
            pick(pack_csr_rows, Xt.nnz + colbits.size)(Xt.indptr, Xt.indices, colbits)
            ubits = colbits.copy()
            if dont_care is not None:
                rows = np.repeat(np.arange(n), np.diff(X.indptr))[dont_care]
                bit = np.uint64(1) << (rows & 63).astype(np.uint64)
                np.bitwise_and.at(ubits, (X.indices[dont_care], rows >> 6), ~bit)
        else:
            colbits = ubits = np.zeros((0, 0), dtype=np.uint64)
            words = 0
        extent_bits = np.zeros(words, dtype=np.uint64)
        csr, csc = Sparse(X.indptr, X.indices), Sparse(Xt.indptr, Xt.indices)
        concept = Concept(in_extent, intent, extent_bits)
        packed = Packed(colbits, ubits)
        while n_uncov > 0 and (limit is None or len(concepts) < limit):
            if cancelled():
                return True
            rows = all_rows
            in_extent[:] = True
            if words:
                extent_bits[:] = _packed(in_extent, words)
            intent_of(X.indptr, X.indices, rows, extent_bits, colbits, intent)
            # The concept of all rows is a candidate too (the paper's D ⊕ j for a full column
            # j): its columns are already in the intent, so no column added below can offer it.
            best = int(np.count_nonzero(uncov & intent[X.indices]))
            while True:
                # Work: every row of the extent, once per column it holds, against its ones.
                threads = threads_for(int(deg2[rows].sum()) + X.nnz)
                variant(grecond_values, threads)(
                    csr, csc, uncov, concept, packed, blocks_for(threads, m), values
                )
                j = int(np.argmax(values))
                if values[j] <= best:
                    break
                best = int(values[j])
                col = Xt.indices[Xt.indptr[j] : Xt.indptr[j + 1]]
                rows = col[in_extent[col]]
                in_extent[:] = False
                in_extent[rows] = True
                if words:
                    extent_bits[:] = _packed(in_extent, words)
                intent_of(X.indptr, X.indices, rows, extent_bits, colbits, intent)
            if best == 0:
                return False
            n_uncov -= cover_concept(X.indptr, X.indices, rows, intent, uncov, ubits)
            concepts.append((rows.copy(), intent.copy()))
            progress.iteration(len(concepts), n_uncov)
        return False
