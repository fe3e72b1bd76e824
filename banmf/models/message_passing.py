"""Message-passing BMF (Ravanbakhsh, Póczos, Greiner, ICML 2016): max-sum belief propagation
on the factor graph of X ≈ W ⊗ H, over the observed cells only."""

from __future__ import annotations

from numbers import Integral, Real
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from .._kernels.message_passing import (
    Cells,
    Channel,
    Marginals,
    Messages,
    mp_column_marginals,
    mp_decoded_errors,
    mp_sweep,
)
from ..data.masks import cell_keys, with_cells
from ..data.params import NONE, Interval
from ..data.validation import WORK_BUDGET, check_random_state, check_work
from ..exceptions import InputError
from ..runtime.memory import check_memory
from ..runtime.progress import StartProgress
from ..runtime.threads import blocks_for, cancelled, threads_for, variant
from ._base import (
    COMMON_CONSTRAINTS,
    COMMON_DEFAULTS,
    BaseFactorization,
    budgeted,
    declared_init,
)

__all__ = ["MessagePassing"]

#: Operations (in the units of :data:`banmf.data.validation.OPS_PER_SECOND`) per observed cell,
#: factor and iteration: the message update, the marginals and the decoded error together
#: (docs/decisions.md, "The work estimates").
OPS_PER_CELL_FACTOR = 2.0
#: Bytes per observed cell besides its 16·k bytes of messages: its column index, value and CSC
#: position, and the temporaries of building them.
BYTES_PER_CELL = 32


class _Cells:
    """The observed cells of X, the edges of the factor graph: CSR (``indptr``, ``indices``)
    with X's value at each (``ones``), and their CSC order (``col_indptr``, ``col_cells``: the
    CSR position of each cell of each column, rows ascending)."""

    def __init__(self, data):
        X, unknown = data.X, data.unknown
        n, m = X.shape
        if unknown is not None and unknown.observed:
            # The ones and the listed zeros: sparse, never an n×m array.
            union, is_zero = with_cells(X, unknown.cells)
            indptr, indices, ones = union.indptr, union.indices, ~is_zero
        else:
            # Every cell but the missing ones (within the budget checked before): X's values
            # as one byte a cell, the missing ones left out.
            dense = X.toarray().ravel()
            if unknown is None:
                idx = np.int32 if n * m < np.iinfo(np.int32).max else np.int64
                indptr = np.arange(n + 1, dtype=np.int64) * m
                indices = np.tile(np.arange(m, dtype=idx), n)
                ones = dense
            else:
                seen = np.ones(n * m, dtype=bool)
                seen[cell_keys(unknown.cells)] = False
                keys = np.flatnonzero(seen)
                del seen
                idx = np.int32 if n * m < np.iinfo(np.int32).max else np.int64
                indptr = np.zeros(n + 1, dtype=np.int64)
                np.cumsum(np.bincount(keys // m, minlength=n), out=indptr[1:])
                indices = (keys % m).astype(idx)
                ones = dense[keys]
                del keys
        # One dtype each, whichever form the cells came in: a kernel's groups (NamedTuples)
        # are then typed alike at every call (Numba before 0.60 mistakes one group's
        # specialization for another's that differs in an array's dtype only).
        idx = np.int32 if n * m < np.iinfo(np.int32).max else np.int64
        self.indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        self.indices = np.ascontiguousarray(indices, dtype=idx)
        self.ones = np.ascontiguousarray(ones, dtype=bool)
        count = len(indices)
        pos = np.int32 if count < np.iinfo(np.int32).max else np.int64
        # A CSC copy whose data is each cell's CSR position: scipy's linear-time transpose.
        C = sp.csr_array(
            (np.arange(count, dtype=pos), indices, indptr), shape=(n, m), copy=False
        ).tocsc()
        self.col_indptr, self.col_cells = C.indptr, C.data
        self.count = count


class MessagePassing(BaseFactorization):
    """Boolean factorization and completion by max-sum belief propagation.

    The model is a factor graph with a variable per entry of W (n×k) and H (k×m), an auxiliary
    ``Z_ilj = W_il ∧ H_lj`` per observed cell (i, j) and factor l, one factor per observed cell
    linking ``OR_l Z_ilj`` to ``X_ij`` through a noisy channel (flip probability ``noise``), and
    Bernoulli priors ``prior_w``, ``prior_h``. Max-sum belief propagation in log-ratio form looks
    for its most probable (W, H); the messages of a cell cost O(k), so an iteration costs
    O(k · observed cells). Messages are damped (``damping``) and start at random
    (``random_state``); W_il = 1 iff its prior log-odds plus its incoming messages are > 0.
    The formulas are those of the authors' code (``mravanba/BooleanFactorization``; see
    :mod:`banmf._kernels.message_passing`).

    Unknown cells have no factor at all: they are never read, and W ⊗ H predicts them. With
    ``observed=`` (the ones and the listed zeros observed, the rest unknown) the fit is linear
    in the observed cells and never touches the others. Without a mask, or with ``missing=``,
    every other cell is observed: n·m cells, each holding 2k float64 messages, so such a fit is
    refused up front (``ValueError``) when its memory exceeds what is available
    (``BANMF_MEMORY_LIMIT`` or the system's) or its estimated work exceeds ``work_budget``.

    Loopy belief propagation need not converge; the decoded factors are scored on the observed
    cells after every iteration, and those of the iteration with the fewest errors are the
    result (the reference code returns the last iteration's).

    Parameters
    ----------
    n_components : int, default 10
    max_iter : int, default 200
        Iterations at most (the reference code: 500).
    tol : float or None, default 1e-4
        Stop once no message changes by more than ``tol`` in an iteration (before damping; the
        reference code's test, on both kinds of messages here). None: ``max_iter`` iterations.
        Not converging is common and does not warn (``converged_`` tells).
    damping : float in [0, 1), default 0.5
        Share of its previous value each message keeps (the reference code's ``learning_rate``
        is ``1 − damping``, 0.2 by default).
    noise : float in (0, 0.5), default 0.01
        The channel's flip probability: ``p(X=1 | OR=0) = p(X=0 | OR=1) = noise`` (the
        reference code's default, p(1|1) = p(0|0) = 0.99). Neither the paper nor the code learns
        it; with uniform priors the most probable factors do not depend on it (each error costs
        the same log-ratio), so only the messages' scale does.
    prior_w, prior_h : float in (0, 1), default 0.5
        Prior probability of a 1 in W and in H; below 0.5 favours sparse factors.
    work_budget : float or None, default 6e10
        Refuse up front (``ValueError`` with the estimate) a fit estimated at more operations
        than this (about 5 minutes on 2 cores at 2·10⁸ operations a second; an iteration costs
        about ``2 · k · observed cells``); None: no limit.
    polish : bool or {"auto", "exact", "flip"}, default False
        Polish the Boolean factors with :func:`banmf.polish` after the method (off by default
        so that this stays the published method; ``unpolished_err_`` keeps its own error).
    n_jobs : int or None, default None
        Thread budget, as for :class:`BANMF`; the result is the same on any number of threads.
    random_state : None, int or numpy Generator
        Seeds the random initial messages.
    verbose : int, default 0

    Attributes
    ----------
    W_ : ndarray (n, k), bool
    components_ : ndarray (k, m), bool
    W_log_odds_ : ndarray (n, k)
        The decoded iteration's marginal log-odds of W (prior plus incoming messages);
        ``W_`` is where they are positive, before any polish (``polish=``).
    H_log_odds_ : ndarray (k, m)
        The same for H.
    reconstruction_err_, relative_error_ : errors on the observed cells
    error_curve_ : ndarray ``(n_iter_,)``
        Observed-cell errors of each iteration's decoded factors.
    n_iter_ : int
        Iterations run.
    best_iter_ : int
        The iteration whose factors are the result (from 1).
    converged_ : bool
        The messages settled to ``tol`` before ``max_iter``.
    n_observed_ : int
        Observed cells (the factor graph's cell factors).
    interrupted_ : bool
        Ctrl-C stopped the fit (the best factors so far are kept; ``KeyboardInterrupt`` is
        raised again once the attributes are set).

    References
    ----------
    Ravanbakhsh, Póczos, Greiner, "Boolean matrix factorization and noisy completion via
    message passing", ICML 2016 (PMLR 48:945-954). Reference code:
    github.com/mravanba/BooleanFactorization.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.kron(np.eye(2, dtype=int), np.ones((3, 4), dtype=int))
    >>> MessagePassing(2, random_state=0).fit(X).reconstruction_err_
    0
    """

    _parameter_constraints: ClassVar[dict] = {
        **COMMON_CONSTRAINTS,
        "max_iter": [Interval(Integral, 1, None)],
        "tol": [NONE, Interval(Real, 0, None)],
        "damping": [Interval(Real, 0, 1, closed="left")],
        "noise": [Interval(Real, 0, 0.5, closed="neither")],
        "prior_w": [Interval(Real, 0, 1, closed="neither")],
        "prior_h": [Interval(Real, 0, 1, closed="neither")],
        "work_budget": [NONE, Interval(Real, 0, None, closed="neither")],
    }

    __init__ = declared_init(
        {
            "n_components": 10,
            "max_iter": 200,
            "tol": 1e-4,
            "damping": 0.5,
            "noise": 0.01,
            "prior_w": 0.5,
            "prior_h": 0.5,
            "work_budget": WORK_BUDGET,
            **COMMON_DEFAULTS,
        }
    )

    @budgeted
    def fit(self, X, y=None, *, missing=None, observed=None) -> MessagePassing:
        """Fit to the 0/1 matrix X (dense or sparse, (n, m)).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n, m), 0/1
        y : ignored
        missing : array-like or sparse of shape (n, m), optional
            1 marks a cell whose value is unknown (no factor in the graph).
        observed : array-like or sparse of shape (n, m), optional
            Its complement for mostly unknown data: the observed cells (X's ones always are);
            every other cell is unknown. The sparse form: the fit is linear in these cells.

        Returns
        -------
        self
        """
        data, k, start = self._begin(X, missing, observed)
        X = data.X
        polish = self._polish_method(k)
        n, m = X.shape
        self._check_budget(data, k)
        rng = check_random_state(self.random_state)
        progress = StartProgress(1, 1, self.max_iter)
        progress.setup("factor graph")
        cells = _Cells(data)
        run = _Run(self, cells, n, m, k, rng)
        interrupted = cancel = False
        try:
            cancel = run.iterate(progress)
        except KeyboardInterrupt:
            if run.best_W is None:
                raise
            interrupted = True  # the first Ctrl-C: the best factors so far are the result
        del cells
        W, H = run.best_W, np.ascontiguousarray(run.best_H.T)
        self.W_log_odds_ = run.best_marg_x
        self.H_log_odds_ = np.ascontiguousarray(run.best_marg_y.T)
        self.error_curve_ = np.asarray(run.errors, dtype=np.int64)
        self.best_iter_ = run.best_iter
        self.converged_ = run.converged
        error = data.error(W, H)
        n_iter = len(run.errors)
        if interrupted or cancel:
            progress.done(error)
            self._finish(data, W, H, error, n_iter, start, None, interrupted)
            self.interrupted_ = True  # cancelled by banmf.fit_many: no exception
            return self
        if polish is not None:
            progress.phase("polish")
        self._finish(data, W, H, error, n_iter, start, polish)
        progress.done(self.reconstruction_err_)
        return self

    def _check_budget(self, data, k: int) -> None:
        """Refuse, before allocating anything, a fit whose messages would not fit in memory or
        whose work exceeds ``work_budget``: with every cell observed, n·m cells."""
        (n, m), count, unknown = data.shape, data.n_observed, data.unknown
        nbytes = count * (16 * k + BYTES_PER_CELL) + 48 * (n + m) * k
        if unknown is None:
            what = f"message passing on every cell of this {n}×{m} X"
            fix = (
                "pass observed= (the ones and the zeros actually observed) to fit those "
                "cells alone, or a smaller n_components"
            )
        elif not unknown.observed:
            what = f"message passing on the {count:,} observed cells of this {n}×{m} X"
            fix = "pass observed= instead of missing= if most cells are unknown, or a smaller n_components"
        else:
            what = f"message passing on the {count:,} observed cells"
            fix = "pass a smaller n_components or max_iter"
        try:
            check_memory(nbytes, f"{what} with n_components={k}")
        except InputError as exc:
            raise InputError(f"{exc}; {fix}") from None
        work = OPS_PER_CELL_FACTOR * self.max_iter * count * k
        check_work(work, self.work_budget, f"{what} with n_components={k}", fix)


class _Run:
    """The messages of one fit and the loop over iterations, keeping the best decoded factors
    (``best_W`` (n, k), ``best_H`` (m, k), their marginals, ``best_iter``; ``errors``: each
    iteration's error)."""

    def __init__(self, est: MessagePassing, cells: _Cells, n: int, m: int, k: int, rng):
        self.cells, self.n, self.m, self.k = cells, n, m, k
        self.max_iter, self.tol = est.max_iter, est.tol
        self.damping = float(est.damping)
        rho = float(est.noise)
        # Channel log-ratios log p(x | OR=1) / p(x | OR=0) for x = 1 and x = 0.
        self.co1 = float(np.log1p(-rho) - np.log(rho))
        self.co0 = -self.co1
        self.cx = float(np.log(est.prior_w) - np.log1p(-est.prior_w))
        self.cy = float(np.log(est.prior_h) - np.log1p(-est.prior_h))
        # The random start: the outgoing messages log U, U ~ U(0, 1] (the reference code's
        # log(rand)), held in the incoming arrays for the first iteration.
        self.in_x = rng.random((cells.count, k))
        np.log1p(-self.in_x, out=self.in_x)
        self.in_y = rng.random((cells.count, k))
        np.log1p(-self.in_y, out=self.in_y)
        self.marg_x = np.zeros((n, k))
        self.marg_y = np.zeros((m, k))
        self.row_diff = np.zeros(n)
        self.row_err = np.zeros(n, dtype=np.int64)
        self.errors: list[int] = []
        self.best_W = self.best_H = self.best_marg_x = self.best_marg_y = None
        self.best_iter = 0
        self.converged = False

    def step(self, first: bool) -> float:
        """One iteration; returns the largest change of a message."""
        c = self.cells
        threads = threads_for(c.count * self.k * 10)
        variant(mp_sweep, threads)(
            Cells(c.indptr, c.indices, c.ones),
            Messages(self.in_x, self.in_y),
            Marginals(self.marg_x, self.marg_y),
            Channel(self.co1, self.co0, self.cx),
            self.damping,
            first,
            blocks_for(threads, self.n),
            self.row_diff,
        )
        threads = threads_for(c.count * self.k)
        variant(mp_column_marginals, threads)(
            c.col_indptr, c.col_cells, self.in_y, self.cy, blocks_for(threads, self.m),
            self.marg_y,
        )  # fmt: skip
        return float(self.row_diff.max()) if self.n else 0.0

    def decoded_error(self) -> int:
        c = self.cells
        threads = threads_for(c.count * 2)
        variant(mp_decoded_errors, threads)(
            Cells(c.indptr, c.indices, c.ones),
            Marginals(self.marg_x, self.marg_y),
            blocks_for(threads, self.n),
            self.row_err,
        )
        return int(self.row_err.sum())

    def iterate(self, progress: StartProgress) -> bool:
        """Run the iterations (until ``tol`` or ``max_iter``); returns True if
        :func:`banmf.fit_many` cancelled the fit."""
        best = None
        for t in range(1, self.max_iter + 1):
            diff = self.step(first=t == 1)
            error = self.decoded_error()
            self.errors.append(error)
            if best is None or error < best:
                best = error
                x, y = self.marg_x.copy(), self.marg_y.copy()
                # One statement: a Ctrl-C cannot leave the decoded factors and their
                # log-odds from different iterations.
                self.best_iter, self.best_marg_x, self.best_marg_y, self.best_W, self.best_H = (
                    t,
                    x,
                    y,
                    x > 0,
                    y > 0,
                )
            progress.iteration(t, error)
            if self.tol is not None and diff <= self.tol:
                self.converged = True
                break
            if cancelled():
                return True
        return False
