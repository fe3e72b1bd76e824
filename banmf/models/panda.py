"""PaNDa+ (Lucchese, Orlando, Perego, SDM 2010 / TKDE 2014): greedy top-k patterns in noisy
0/1 data under the cost J_P^ρ, with noise tolerances and randomised item orders."""

from __future__ import annotations

import functools
from numbers import Integral, Real
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from .._kernels.panda import (
    Cells,
    Codes,
    Core,
    Tolerances,
    extend_core,
    find_core,
    residual_counts,
    single_patterns,
)
from .._kernels.sparse import Sparse
from ..data.masks import transpose_mask, words
from ..data.params import NONE, Interval
from ..data.validation import WORK_BUDGET, check_random_state, check_work
from ..runtime.progress import StartProgress
from ..runtime.runner import run_side_by_side
from ..runtime.signals import Interruptions
from ..runtime.threads import cancelled
from ._base import (
    COMMON_CONSTRAINTS,
    COMMON_DEFAULTS,
    BaseFactorization,
    budgeted,
    declared_init,
)

__all__ = ["PaNDa"]


def _round_work(n: int, m: int, cells: int) -> float:
    """Operations of one round of one pattern, about: FIND-CORE is one pass over the residual
    columns; EXTEND-CORE one pass over the rows (O(nnz + n)) per item it adds, plus one. The
    items a pattern takes grow with m; 1 + √m passes matches the times of real and planted data
    within 3× at :data:`banmf.data.validation.OPS_PER_SECOND` (docs/decisions.md, "The work
    estimates")."""
    return (1.0 + np.sqrt(m)) * (cells + n) + m * np.log2(m + 1)


#: Rounds whose estimated work (operations) is below this run in the calling thread: a thread
#: pool costs more than it saves there.
PARALLEL_ROUNDS_MIN_WORK = 200_000


class PaNDa(BaseFactorization):
    """PaNDa+: greedy top-k approximate patterns (Boolean factors) that lower an MDL-like cost.

    Each pattern is a pair (rows T, items I); W's column and H's row are their indicator
    vectors. Patterns are added one at a time while they lower the cost

    ``J = ρ·Σ_P (|P_T| + |P_I|) + (false negatives + false positives)``,

    PaNDa+'s J_P^ρ (TKDE 2014, Eq. 7 with ``γ_P(P) = |P_T| + |P_I|`` and γ_N(N) = ‖N‖), the
    noise counted over the observed cells. A pattern is found in two steps (TKDE 2014,
    Algorithms 1-3):

    1. *Core* (FIND-CORE): the items are sorted by their frequency in the residual data (the
       ones no pattern covers yet), most frequent first. The core starts as the first item
       and its residual rows; each next item joins (the rows shrink to those holding it in the
       residual data, so the core has no noise) if J does not rise, else it goes to an
       extension list.
    2. *Extension* (EXTEND-CORE): every row not in the pattern, in index order, joins if J
       does not rise and the noise stays within the tolerances; then the extension list is
       taken from its head until one item joins under the same rule, and the rows are tried
       again; this stops when no item joins. Rows and items join without changing the other
       side, so the pattern may cover zeros (false positives).

    A pattern enters the result if it lowers J strictly (the paper keeps one that leaves J
    unchanged; such a pattern changes nothing here but the cost, so it is left out), and the
    search stops at the first pattern that does not (the result is then padded with empty
    factors to ``n_components``). With ``n_restarts`` = R > 1, each pattern is searched R
    times (TKDE 2014 §3.7): round 1 with the frequency order, round r with each item's
    frequency multiplied by ``1 − a_r·u`` (u uniform in [0, 1), drawn from ``random_state``,
    a_r = (r − 1)/(R − 1): more randomness each round), and the pattern with the largest
    decrease of J is taken (ties: the earliest round).

    Noise tolerances (TKDE 2014 §3.2): every row of a pattern has at most ``eps_row·|I|``
    observed zeros in the pattern's items, and every item at most ``eps_col·|T|`` in the
    pattern's rows; 1.0 is no constraint (the original PaNDa, with ρ).

    Unknown cells (``fit(X, missing=M)`` or ``observed=``) are never noise and never count in
    J: a pattern may take them freely; cores are built from observed ones only.

    Cost: per pattern and round, about one pass over the ones of X per item the extension
    adds (O(nnz + n) each) and one over the residual columns; items are taken once each, so
    at worst O(m·(nnz + n)) per pattern (the paper's O(M²N) for dense data).

    Parameters
    ----------
    n_components : int or None, default None
        Maximum number of patterns; None: until no pattern lowers J.
    eps_row : float in [0, 1], default 0.2
        Row noise tolerance ε_r: the largest share of observed zeros a row of a pattern may
        have in the pattern's items. The paper sets no default; 0.2 (with ``eps_col`` 0.2)
        was the best of {0.2, 0.3, 0.5, 1} on planted 50×50 data (k = 5, density 0.2-0.8,
        0-10 % noise, seeds 1000-1011).
    eps_col : float in [0, 1], default 0.2
        Column noise tolerance ε_c: the largest share of observed zeros an item of a pattern
        may have in the pattern's rows.
    rho : float >= 0, default 1.0
        Weight ρ of the patterns' size ``|T| + |I|`` against the noise; 0 is PaNDa+'s J_A (the
        Hamming error alone).
    n_restarts : int >= 1, default 20
        Randomised rounds R per pattern (20, as in the paper's experiments); 1: the frequency
        order alone (no use of ``random_state``).
    work_budget : float or None, default 6e10
        Refuse up front (``ValueError`` with the estimate and what to change) a fit estimated
        at more operations than this (about 5 minutes on 2 cores); None: no limit.
    polish : bool or {"auto", "exact", "flip"}, default False
        Polish the Boolean factors with :func:`banmf.polish` after the method (off by default
        so that this stays the published method; ``unpolished_err_`` keeps its own error).
    n_jobs : int or None, default None
        Thread budget: the rounds of one pattern run side by side on it. The result does not
        depend on it.
    random_state : int, numpy Generator or None, default None
        Seeds the randomised item orders (only used with ``n_restarts`` > 1).
    verbose : int, default 0

    Attributes
    ----------
    W_ : ndarray (n, k'), bool
    components_ : ndarray (k', m), bool
        The patterns' rows and items; with a fixed ``n_components`` padded with empty factors
        to exactly that many.
    cost_ : float
        J_P^ρ of the result: ``rho * (W_.sum() + components_.sum()) + reconstruction_err_``
        (after the polish, if any).
    reconstruction_err_, relative_error_, n_iter_ (patterns found), interrupted_
        As for :class:`GreConD` (Ctrl-C keeps the patterns found so far).

    References
    ----------
    C. Lucchese, S. Orlando, R. Perego, "Mining top-k patterns from binary datasets in presence
    of noise", SDM 2010; "A unifying framework for mining approximate top-k binary patterns",
    IEEE TKDE 26(12), 2014.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.zeros((6, 6), dtype=int)
    >>> X[:3, :3] = 1
    >>> X[3:, 3:] = 1
    >>> model = PaNDa(2).fit(X)
    >>> model.reconstruction_err_, model.cost_
    (0, 12.0)
    """

    _parameter_constraints: ClassVar[dict] = {
        **COMMON_CONSTRAINTS,
        "n_components": [NONE, *COMMON_CONSTRAINTS["n_components"]],
        "eps_row": [Interval(Real, 0, 1)],
        "eps_col": [Interval(Real, 0, 1)],
        "rho": [Interval(Real, 0, np.inf, closed="left")],
        "n_restarts": [Interval(Integral, 1, None)],
        "work_budget": [NONE, Interval(Real, 0, None, closed="neither")],
    }

    __init__ = declared_init(
        {
            "n_components": None,
            "eps_row": 0.2,
            "eps_col": 0.2,
            "rho": 1.0,
            "n_restarts": 20,
            "work_budget": WORK_BUDGET,
            **COMMON_DEFAULTS,
        }
    )

    @budgeted
    def fit(self, X, y=None, *, missing=None, observed=None) -> PaNDa:
        """Fit to the 0/1 matrix X (dense or sparse, (n, m)); ``missing`` (the unknown cells)
        or ``observed`` (the observed zeros; every other non-one unknown) as in
        :meth:`BANMF.fit`."""
        data, limit, start = self._begin(X, missing, observed)
        X = data.X
        n, m = X.shape
        self._polish_method(limit)  # validate before the work
        rng = check_random_state(self.random_state)
        rel = _Data.of(data)
        self._check_work(rel, limit)
        progress = StartProgress(1, 1, limit)
        patterns: list[tuple[np.ndarray, np.ndarray]] = []
        interrupts = Interruptions()
        cancel = False
        try:
            cancel = self._greedy(rel, limit, rng, patterns, progress, interrupts)
        except KeyboardInterrupt:
            if not interrupts.first():
                raise
        # The first Ctrl-C (here or while rounds ran): the patterns found so far are the result.
        interrupted = interrupts.count > 0
        k = len(patterns) if limit is None else limit
        W = np.zeros((n, k), dtype=bool)
        H = np.zeros((k, m), dtype=bool)
        for l, (rows, items) in enumerate(patterns):
            W[rows, l] = True
            H[l, items] = True
        err = data.error(W, H)
        method = None if interrupted or cancel else self._polish_method(W.shape[1])
        try:
            found = (W, H, err, len(patterns))
            self._conclude(data, found, start, method, progress, interrupted, cancel)
        finally:
            if hasattr(self, "W_"):
                self._set_cost()
        return self

    def _set_cost(self) -> None:
        sizes = int(self.W_.sum()) + int(self.components_.sum())
        self.cost_ = float(self.rho) * sizes + self.reconstruction_err_

    def _check_work(self, data: _Data, limit) -> None:
        """Refuse up front a fit estimated over ``work_budget`` (:func:`_round_work` per
        pattern and round; min(n, m) patterns when ``n_components`` is None)."""
        n, m = data.X.shape
        per_round = _round_work(n, m, data.X.nnz + data.cells.nnz)
        patterns = limit or min(n, m)
        what = (
            f"PaNDa on this {n}×{m} X ({data.X.nnz:,} ones) with n_components={limit} and "
            f"n_restarts={self.n_restarts}"
        )
        fix = (
            "set n_components or lower n_restarts"
            if limit is None
            else "lower n_components or n_restarts"
        )
        check_work(patterns * self.n_restarts * per_round, self.work_budget, what, fix)

    def _greedy(
        self, data: _Data, limit, rng, patterns: list, progress, interrupts: Interruptions
    ) -> bool:
        """Append the accepted patterns (rows, items) one by one to ``patterns``, so that
        whatever was found stays there if Ctrl-C stops the loop (the first is counted in
        ``interrupts``). Returns True if :func:`banmf.fit_many` cancelled the fit."""
        n, m = data.X.shape
        R = int(self.n_restarts)
        k_codes = limit or 64
        wcode = np.zeros((n, words(k_codes)), dtype=np.uint64)
        hcode = np.zeros((m, words(k_codes)), dtype=np.uint64)
        freq = np.empty(m, dtype=np.int64)
        row_pat = np.empty(n, dtype=np.int64)
        col_pat = np.empty(m, dtype=np.int64)
        items = np.arange(m)
        cost = float(data.X.nnz)  # J of no pattern: every observed one is missed
        per_round = _round_work(n, m, data.X.nnz + data.cells.nnz)
        workers = R if per_round >= PARALLEL_ROUNDS_MIN_WORK else 1
        while limit is None or len(patterns) < limit:
            if cancelled():
                return True
            l = len(patterns)
            if l == 64 * wcode.shape[1]:  # unlimited: widen the codes
                wcode = np.hstack([wcode, np.zeros_like(wcode[:, :1])])
                hcode = np.hstack([hcode, np.zeros_like(hcode[:, :1])])
            residual_counts(data.X.indptr, data.X.indices, wcode, hcode, freq)
            if not freq.any():
                break
            single_patterns(wcode, row_pat)
            single_patterns(hcode, col_pat)
            orders = [np.lexsort((items, -freq))]
            for r in range(1, R):
                amount = r / (R - 1)
                score = freq * (1.0 - amount * rng.random(m))
                orders.append(np.lexsort((items, -score)))
            state = (data, wcode, hcode, row_pat, col_pat)
            rounds = [functools.partial(self._round, state, order) for order in orders]
            run = run_side_by_side(
                rounds, workers=workers, interrupts=interrupts, name="banmf-round"
            )
            if run.interrupted:  # the rounds are not all there: the patterns so far stand
                return False
            found = run.ordered()
            # The largest decrease of J; the earliest round on ties.
            best = max(range(R), key=lambda r: (found[r][0], -r))
            gain, rows, cols = found[best]
            if not gain > 0:
                break
            bit = np.uint64(1) << np.uint64(l & 63)
            wcode[rows, l >> 6] |= bit
            hcode[cols, l >> 6] |= bit
            patterns.append((rows, cols))
            cost -= gain
            progress.iteration(len(patterns), cost)
        return False

    def _round(self, state, order):
        """One round: the core grown along ``order`` and extended. Returns (decrease of J,
        rows, items) of the pattern."""
        data, wcode, hcode, row_pat, col_pat = state
        n, m = data.X.shape
        X, Xt = Sparse(data.X.indptr, data.X.indices), Sparse(data.Xt.indptr, data.Xt.indices)
        C, Ct = data.cells, data.cells_t
        cells = Cells(Sparse(C.indptr, C.indices), Sparse(Ct.indptr, Ct.indices), data.observed)
        codes = Codes(wcode, hcode, row_pat, col_pat)
        tol = Tolerances(float(self.eps_row), float(self.eps_col), float(self.rho))
        in_rows = np.empty(n, dtype=bool)
        rows = np.empty(n, dtype=np.int64)
        cols = np.empty(m, dtype=np.int64)
        ext = np.empty(m, dtype=np.int64)
        t, c, e = find_core(Xt, codes, order, tol.rho, Core(in_rows, rows, cols, ext))
        in_cols = np.zeros(m, dtype=bool)
        in_cols[cols[:c]] = True
        added = extend_core(X, Xt, cells, codes, tol, in_rows, in_cols, ext[:e])
        rows, cols = np.flatnonzero(in_rows), np.flatnonzero(in_cols)
        gain = (t * c + added) - float(self.rho) * (len(rows) + len(cols))
        return gain, rows, cols


class _Data:
    """X (CSR) and its transpose, the unknown cells (CSR) and theirs, and what the cells are
    (``observed``: the observed zeros; else the unknown cells)."""

    def __init__(self, X, Xt, cells, cells_t, observed: bool):
        self.X, self.Xt, self.cells, self.cells_t, self.observed = X, Xt, cells, cells_t, observed

    @classmethod
    def of(cls, data) -> _Data:
        """The relation of a :class:`banmf.io.Dataset` (no unknown cells: empty masks)."""
        X, unknown = data.X, data.unknown
        if unknown is None:
            cells = sp.csr_array(X.shape, dtype=bool)
            cells.indices = cells.indices.astype(X.indices.dtype)
            cells.indptr = cells.indptr.astype(X.indptr.dtype)
            return cls(X, data.T.X, cells, transpose_mask(cells), False)
        return cls(X, data.T.X, unknown.cells, unknown.T.cells, unknown.observed)
