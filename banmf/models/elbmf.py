"""ELBMF (Dalleiger & Vreeken, NeurIPS 2022): iPALM with an elastic Boolean regularizer, sparse
over the support of X."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Integral, Real
from typing import ClassVar

import numpy as np

from .._kernels.elbmf import PARTS, Prox, observed_sums, prox_step, support_gradient
from .._kernels.mu import cross_gram
from .._kernels.sparse import Sparse
from ..data.dataset import Dataset
from ..data.params import FLOAT_DTYPE, NONE, Interval
from ..data.validation import check_dtype, check_random_state
from ..runtime.progress import StartProgress
from ..runtime.signals import Interruptions, deferred_interrupts
from ..runtime.threads import cancelled, pick
from ._base import COMMON_CONSTRAINTS, COMMON_DEFAULTS, BaseFactorization, budgeted, declared_init

__all__ = ["ELBMF", "ipalm"]

#: The regularization rate's factor ``rate**t`` is capped here: far past the point where the
#: proximal operator sets every entry to exactly 0 or 1 in either precision, and short of
#: float64's overflow on long runs.
TAU_MAX = 1e100

#: The Lipschitz estimate ``‖OᵀO‖_F`` is floored here (the reference code's 1e-4), so that a
#: factor of zeros still takes a finite step.
LIPSCHITZ_FLOOR = 1e-4


class ELBMF(BaseFactorization):
    """Elastic Boolean matrix factorization (ELBMF): proximal gradient descent to Boolean factors.

    Minimizes ``½‖X − UV‖²`` over the observed cells plus an elastic regularizer that pulls
    every entry of U (n×k) and V (k×m) towards the nearer of 0 and 1, by iPALM (inertial
    proximal alternating linearized minimization): each iteration extrapolates U by ``beta``,
    takes a gradient step of size ``η ≈ 1/‖VVᵀ‖_F`` and applies the proximal operator of the
    regularizer with weights ``η·l1`` and ``η·l2·rate^t`` (t the iteration, from 0); then the
    same for V against the new U. The growing l2 weight drives the factors to 0/1; they are
    rounded at ½ at the end. It stops when the loss ``‖X − UV‖²`` on the observed cells moves
    by less than ``tol`` between two iterations, or after ``max_iter`` iterations.

    Sparse throughout: the gradient ``U(VVᵀ) − XVᵀ`` needs ``XVᵀ`` over the ones of X only,
    and the loss is ``nnz − 2Σ_ones (UV)_ij + tr(UᵀU·VVᵀ)``, so an iteration costs
    O(nnz·k + (n + m)·k²) and memory is O(nnz + (n + m)·k); X is never densified. With
    ``missing=`` the unknown cells, whose values UV must not be fitted to, are taken out of
    both sums exactly (O(k) per unknown cell per iteration: fine for a sparse set of unknown
    cells, as ``missing=`` is meant for); with ``observed=`` the loss and the gradient run over
    the observed cells alone, O(k) per observed cell.

    The iterates are those of the authors' PyTorch code (sdall/elbmf-python) but for the
    inertia: its extrapolation ``U + β(U − U_prev)`` keeps the starting point as ``U_prev``
    for good (a local rebinding); here ``U_prev`` is the previous iterate, as in iPALM. With
    the default ``beta=1e-4`` the two differ in the last digits.

    Parameters
    ----------
    n_components : int, default 10
        Number of factors k.
    l1 : float, default 0.01
        Weight of the regularizer's l1 part (``l1reg`` of the reference code).
    l2 : float, default 0.02
        Weight of its l2 part (``l2reg``), multiplied by ``regularization_rate**t`` at
        iteration t.
    regularization_rate : float, default 1.02
        The growth of the l2 weight per iteration (the reference's ``lambda t: 1.02**t``).
        Faster growth rounds sooner, with less fitting; a rate of 1 keeps it constant.
    max_iter : int, default 3000
        Iterations at most.
    tol : float or None, default 1e-8
        Stop once the loss ``‖X − UV‖²`` on the observed cells changes by less than this
        (absolute, as the reference code); None or 0 runs ``max_iter`` iterations. The
        factors are rounded either way, and reaching ``max_iter`` does not warn
        (``converged_`` says whether the loss settled): once the l2 weight has made the factors
        Boolean, the iteration may cycle between two roundings, which no tolerance ends
        (docs/decisions.md, "ELBMF does not warn at max_iter").
    beta : float, default 1e-4
        The inertia of iPALM, in [0, 1): 0 is PALM (step ``1 / (1.1 L)``), else the step is
        ``2(1 − β) / ((1 + 2β) L)``, L = ``‖VVᵀ‖_F``.
    dtype : float64 or float32, default float64
        Precision of the factors and of the sparse passes (the k×k Gram matrices and the loss
        are summed in float64). float32 halves the factors' memory.
    polish : bool or {"auto", "exact", "flip"}, default False
        Polish the rounded factors with :func:`banmf.polish` (off by default so that this is the
        published method; ``unpolished_err_`` keeps its own error).
    n_jobs : int or None, default None
        Thread budget, as for :class:`BANMF`. Rows are updated independently and sums run over
        fixed blocks, so the result does not depend on it.
    random_state : None, int or numpy Generator, default None
        U and V start uniform in [0, 1), U drawn first (as the reference code).
    verbose : int, default 0
        1: the result on stderr; 2: the loss every 0.2 s too.

    Attributes
    ----------
    W_ : ndarray of shape (n, k), bool
        ``W_continuous_ > ½`` (then polished, with ``polish=``).
    components_ : ndarray of shape (k, m), bool
        ``H_continuous_ > ½`` (then polished, with ``polish=``).
    W_continuous_ : ndarray of shape (n, k)
        U at the last iteration, in ``dtype``.
    H_continuous_ : ndarray of shape (k, m)
        V at the last iteration, in ``dtype``.
    loss_curve_ : ndarray of shape (``n_iter_``,)
        The loss ``‖X − UV‖²`` on the observed cells after each iteration (float64; the
        regularizer is not included).
    converged_ : bool
        Whether the loss settled to ``tol`` before ``max_iter``.
    reconstruction_err_, relative_error_, n_iter_, interrupted_, fit_seconds_
        As for every method; the error is that of ``W_ ⊗ components_``. The first Ctrl-C (or
        SIGTERM) ends the iterations and rounds the factors of the last iteration done
        (``interrupted_`` True, then ``KeyboardInterrupt`` is raised again).

    References
    ----------
    Dalleiger, Vreeken, "Efficiently Factorizing Boolean Matrices using Proximal Gradient
    Descent", NeurIPS 2022 (reference code: github sdall/elbmf-python).

    Examples
    --------
    >>> import banmf
    >>> X, _, _ = banmf.make_boolean(40, 30, 3, 0.3, random_state=0)
    >>> est = ELBMF(3, random_state=0).fit(X)
    >>> est.W_.shape, est.components_.shape, est.converged_
    ((40, 3), (3, 30), True)
    """

    _parameter_constraints: ClassVar[dict] = {
        **COMMON_CONSTRAINTS,
        "l1": [Interval(Real, 0, None)],
        "l2": [Interval(Real, 0, None)],
        "regularization_rate": [Interval(Real, 0, None, closed="neither")],
        "max_iter": [Interval(Integral, 1, None)],
        "tol": [NONE, Interval(Real, 0, None)],
        "beta": [Interval(Real, 0, 1, closed="left")],
        "dtype": [FLOAT_DTYPE],
    }

    __init__ = declared_init(
        {
            "n_components": 10,
            "l1": 0.01,
            "l2": 0.02,
            "regularization_rate": 1.02,
            "max_iter": 3000,
            "tol": 1e-8,
            "beta": 1e-4,
            "dtype": np.float64,
            **COMMON_DEFAULTS,
        }
    )

    @budgeted
    def fit(self, X, y=None, *, missing=None, observed=None) -> ELBMF:
        """Fit to the 0/1 matrix X (dense or sparse, (n, m)); ``missing`` / ``observed`` mark
        unknown cells as in :meth:`BANMF.fit`: the loss counts the observed cells only."""
        data, k, start = self._begin(X, missing, observed)
        polish = self._polish_method(k)
        dtype = check_dtype(self.dtype)
        rng = check_random_state(self.random_state)
        n, m = data.shape
        U = rng.random((n, k)).astype(dtype)
        Vt = np.ascontiguousarray(rng.random((k, m)).T, dtype=dtype)
        progress = StartProgress(1, 1, self.max_iter)
        run = ipalm(
            data,
            U,
            Vt,
            l1=self.l1,
            l2=self.l2,
            regularization_rate=self.regularization_rate,
            max_iter=self.max_iter,
            tol=self.tol,
            beta=self.beta,
            progress=progress,
        )
        self.W_continuous_ = run.U
        self.H_continuous_ = np.ascontiguousarray(run.Vt.T)
        self.loss_curve_ = np.asarray(run.losses, dtype=np.float64)
        self.converged_ = run.converged
        W, H = run.U > 0.5, np.ascontiguousarray((run.Vt > 0.5).T)
        err = data.error(W, H)
        found = (W, H, err, len(run.losses))
        self._conclude(data, found, start, polish, progress, run.interrupted, run.cancelled)
        return self

    def _fit_bytes(self, data: Dataset, k: int) -> int:
        """U and V with their previous iterates and gradients (three copies each), the
        transposed support and unknown cells, and the Boolean factors."""
        n, m = data.shape
        item = check_dtype(self.dtype).itemsize
        cells = 0 if data.unknown is None else data.unknown.cells.nnz
        return (3 * item + 2) * (n + m) * k + 8 * (data.nnz + cells) + 8 * (n + m)


@dataclass
class Run:
    """What :func:`ipalm` leaves: the last iterates U (n, k) and Vᵀ (m, k), the loss after each
    iteration, and how it ended."""

    U: np.ndarray
    Vt: np.ndarray
    losses: list = field(default_factory=list)
    converged: bool = False
    interrupted: bool = False
    cancelled: bool = False


class _Side:
    """One side of the alternation: the rows of X (for U) or of Xᵀ (for Vᵀ), with the listed
    cells of each row, and the factor's current and previous iterates and gradient buffer."""

    def __init__(self, data: Dataset, F: np.ndarray):
        X, unknown = data.X, data.unknown
        self.X = Sparse(X.indptr, X.indices)
        self.nnz = int(X.nnz)
        # listed: the cells are the observed zeros (observed=), so the loss has no Gram term.
        self.listed = unknown is not None and unknown.observed
        cells = None if unknown is None else unknown.cells
        self.cells = (
            None if cells is None or cells.nnz == 0 else Sparse(cells.indptr, cells.indices)
        )
        self.n_cells = 0 if self.cells is None else int(cells.nnz)
        self.F = F
        self.prev = F.copy()
        self.P = np.empty_like(F)
        self._extrapolated = False
        self._blocks = np.empty((min(4, max(1, F.shape[0])), F.shape[1], F.shape[1]))

    def gram(self) -> np.ndarray:
        """FᵀF (k, k) in float64, over fixed blocks of rows (the same on any threads)."""
        F = self.F
        k = F.shape[1]
        return pick(cross_gram, F.size * k)(F, F, k, self._blocks)

    def step(self, Ot: np.ndarray, G: np.ndarray, beta: float, l1: float, l2: float) -> None:
        """One iPALM half-step of F against the other factor (``Ot``: its transpose, with
        ``G = OᵀO``), in place."""
        F = self.F
        k = F.shape[1]
        lipschitz = max(float(np.linalg.norm(G)), LIPSCHITZ_FLOOR)
        if beta:
            # F̂ = F + β(F − F_prev) in the previous iterate's buffer; F becomes the previous.
            np.subtract(F, self.prev, out=self.prev)
            self.prev *= beta
            self.prev += F
            self.F, self.prev = self.prev, F
            self._extrapolated = True
            eta = 2.0 * (1.0 - beta) / (1.0 + 2.0 * beta) / lipschitz
        else:
            eta = 1.0 / (1.1 * lipschitz)
        F = self.F
        work = (self.nnz * (2 if self.listed else 1) + 2 * self.n_cells) * k
        pick(support_gradient, work)(self.X, self.cells, F, Ot, self.listed, self.P)
        prox = Prox(eta, float(l1), float(l2), not self.listed)
        pick(prox_step, F.size * (k + 1))(F, self.P, G, prox)
        self._extrapolated = False

    def restore(self) -> None:
        """After an interruption inside :meth:`step`: back to the last iterate if F holds the
        extrapolated point (a finished step is kept)."""
        if self._extrapolated:
            self.F, self.prev = self.prev, self.F
            self._extrapolated = False

    def sums(self, Ot: np.ndarray) -> np.ndarray:
        """(Σ_ones s, Σ_ones s², Σ_cells s²) of ``s = F Oᵀ`` (:func:`observed_sums`)."""
        out = np.empty((PARTS, 3))
        work = (self.nnz + self.n_cells) * self.F.shape[1]
        pick(observed_sums, work)(self.X, self.cells, self.F, Ot, out)
        return out.sum(axis=0)


def ipalm(
    data: Dataset,
    U: np.ndarray,
    Vt: np.ndarray,
    *,
    l1: float = 0.01,
    l2: float = 0.02,
    regularization_rate: float = 1.02,
    max_iter: int = 3000,
    tol: float | None = 1e-8,
    beta: float = 1e-4,
    progress: StartProgress | None = None,
) -> Run:
    """ELBMF's iterations (:class:`ELBMF`) from the factors U (n, k) and Vᵀ (m, k), trusted:
    C-contiguous, of one float dtype, on trusted ``data``. The arrays given may be overwritten;
    the result holds the last iterates. The first Ctrl-C (or SIGTERM) is deferred to the end
    of the iteration under way, whose iterates the result keeps (``interrupted``); a second
    one raises at once."""
    rows, cols = _Side(data, U), _Side(data.T, Vt)
    nnz = float(data.nnz)
    out = Run(U, Vt)
    interrupts = Interruptions()
    G_v = cols.gram()
    loss = math.inf
    with deferred_interrupts(interrupts):
        for t in range(max_iter):
            if interrupts.count:
                out.interrupted = True
                break
            if cancelled():
                out.cancelled = True
                break
            tau = _tau(regularization_rate, t)
            try:
                rows.step(cols.F, G_v, beta, l1, l2 * tau)
                G_u = rows.gram()
                cols.step(rows.F, G_u, beta, l1, l2 * tau)
                G_v = cols.gram()
                previous, loss = loss, _loss(rows, cols, G_u, G_v, nnz)
            except KeyboardInterrupt:  # not deferred (another thread): keep the last iterates
                if not interrupts.first():
                    raise
                rows.restore(), cols.restore()
                out.interrupted = True
                break
            out.losses.append(loss)
            if progress is not None:
                progress.iteration(t + 1, loss)
            if tol and abs(loss - previous) < tol:
                out.converged = True
                break
    out.U, out.Vt = rows.F, cols.F
    return out


def _tau(rate: float, t: int) -> float:
    """The l2 weight's factor at iteration t: ``rate**t``, at most :data:`TAU_MAX`."""
    try:
        return min(rate**t, TAU_MAX)
    except OverflowError:
        return TAU_MAX


def _loss(rows: _Side, cols: _Side, G_u: np.ndarray, G_v: np.ndarray, nnz: float) -> float:
    """``‖X − UV‖²`` on the observed cells, after both half-steps, without forming UV."""
    if rows.listed:  # the observed cells are the ones and the listed zeros
        s1, s2, c2 = rows.sums(cols.F)
        return nnz - 2.0 * s1 + s2 + c2
    quadratic = float(np.sum(G_u * G_v))  # tr(UᵀU·VVᵀ), both symmetric
    if rows.cells is None:
        # The V step's sparse part is −XᵀU exactly: Σ_ones (UV)_ij = −⟨that, Vᵀ⟩.
        ones = -float(np.dot(cols.P.ravel().astype(np.float64), cols.F.ravel().astype(np.float64)))
        return nnz - 2.0 * ones + quadratic
    s1, _, c2 = rows.sums(cols.F)
    return nnz - 2.0 * s1 + quadratic - c2
