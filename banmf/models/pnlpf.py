"""PNL-PF (Miron et al., Signal Processing 2021): post-nonlinear penalty factorization, dense."""

from __future__ import annotations

import numbers
import time

import numpy as np

from .._validation import (
    check_binary_matrix,
    check_dense_budget,
    check_n_components,
    check_random_state,
)
from ..booleanize import _booleanize, balance
from ._base import BaseFactorization, budgeted, fit_inner
from .nmf import NMF

__all__ = ["DENSE_BUDGET", "PNLPF"]

#: Largest n·m PNL-PF accepts: it holds about six dense n×m float64 arrays (≈ 2.4 GB here).
DENSE_BUDGET = 50_000_000


class PNLPF(BaseFactorization):
    """PNL-PF: fit ``X ≈ Φ(WH)`` with a sigmoid Φ and a growing binarizing penalty.

    ``Φ(s) = 1 / (1 + exp(−γ(s − ½)))``; the objective is
    ``½‖X − Φ(WH)‖² + (λ/2)(‖W²−W‖² + ‖H²−H‖²)`` with λ multiplied by ``growth`` every
    iteration (up to ``lam_max``), minimized by multiplicative updates (H, then W). It starts
    from an NMF solution, balanced, and ends with the same booleanization as every method.

    Φ(WH) is dense: each iteration costs O(nmk) time and O(nm) memory, so inputs with
    ``n·m > dense_budget`` are refused with a ``ValueError`` rather than exhausting memory.
    Computed in float64.

    Parameters
    ----------
    n_components : int, default 10
    gamma : float, default 10.0
        Slope of Φ.
    lam0, growth, lam_max : float, default 2.0, 3.0, 1e10
        Penalty schedule.
    max_iter : int, default 100
    tol : float, default 0.01
        Stop once ``‖W²−W‖ + ‖H²−H‖`` (Frobenius) falls below it; None runs all iterations.
    init_iter : int, default 1000
        NMF iterations for the starting point.
    eps : float, default 1e-12
    n_thresholds : int, default 100
    dense_budget : int, default 50_000_000
    polish : bool or {"auto", "exact", "flip"}, default False
        Polish the Boolean factors with :func:`banmf.polish` after the method (off by default
        so that this stays the published baseline; ``unpolished_err_`` keeps its own error).
    n_jobs, random_state, verbose : as for BANMF (the dense products use numpy's BLAS
        threads, which ``n_jobs`` does not govern).

    Attributes
    ----------
    W_, components_, W_continuous_, H_continuous_, thresholds_, reconstruction_err_,
    relative_error_, loss_curve_, n_iter_, fit_seconds_

    References
    ----------
    Miron, Diop, Larue, Robin, Brie, "Boolean decomposition of binary matrices using a
    post-nonlinear mixture approach", Signal Processing 178:107809, 2021. The model follows the
    public PyBMF implementation (the article text was not available to check γ and the schedule).
    """

    def __init__(self, n_components=10, *, gamma=10.0, lam0=2.0, growth=3.0, lam_max=1e10,
                 max_iter=100, tol=0.01, init_iter=1000, eps=1e-12, n_thresholds=100,
                 dense_budget=DENSE_BUDGET, polish=False, n_jobs=None, random_state=None,
                 verbose=0):
        self.n_components = n_components
        self.polish = polish
        self.gamma = gamma
        self.lam0 = lam0
        self.growth = growth
        self.lam_max = lam_max
        self.max_iter = max_iter
        self.tol = tol
        self.init_iter = init_iter
        self.eps = eps
        self.n_thresholds = n_thresholds
        self.dense_budget = dense_budget
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    @budgeted
    def fit(self, X, y=None) -> PNLPF:
        """Fit to the 0/1 matrix X (dense or sparse, (n, m))."""
        start = time.perf_counter()
        X = check_binary_matrix(X)
        k = check_n_components(self.n_components, X.shape)
        polish = self._polish_method(k)
        check_dense_budget(X.shape, self.dense_budget, "PNL-PF (about 48 bytes per entry)")
        for name in ("gamma", "lam0", "growth", "lam_max"):
            v = getattr(self, name)
            if not isinstance(v, numbers.Real) or not v > 0:
                raise ValueError(f"{name} must be a positive number, got {v!r}")
        for name in ("max_iter", "init_iter"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if self.tol is not None and (not isinstance(self.tol, numbers.Real) or self.tol < 0):
            raise ValueError(f"tol must be None or a nonnegative number, got {self.tol!r}")
        rng = check_random_state(self.random_state)
        init = NMF(k, max_iter=self.init_iter, normalize=None, random_state=rng.integers(2**32))
        interrupted = fit_inner(init, X)  # the first Ctrl-C: booleanize the factors so far; a second aborts
        W, H = balance(init.W_continuous_, init.H_continuous_)
        tiny = np.finfo(np.float64).eps
        W, H = np.maximum(W, tiny), np.maximum(H, tiny)
        Xd = X.toarray().astype(np.float64)  # dense by design, within the budget checked above
        losses = []
        try:
            self._iterate(Xd, W, H, losses, 0 if interrupted else self.max_iter)
        except KeyboardInterrupt:
            interrupted = True
        res = _booleanize(X, W, H, self.n_thresholds, "balance", "pruned")
        self.W_continuous_, self.H_continuous_ = res.W_scaled, res.H_scaled
        self.thresholds_ = (res.threshold_w, res.threshold_h)
        self.loss_curve_ = np.asarray(losses)
        self._finish(X, res.W, res.H, res.error, len(losses), start, polish, interrupted)
        return self

    def _iterate(self, Xd, W, H, losses, max_iter):
        """The penalized updates of W and H in place, appending the objective to ``losses``."""
        tiny = np.finfo(np.float64).eps
        g, eps, lam = float(self.gamma), float(self.eps), float(self.lam0)
        for t in range(max_iter):
            Phi, G = self._link(W @ H)
            H *= (g * (W.T @ (Xd * G)) + 3 * lam * H**2) / (
                g * (W.T @ (Phi * G)) + 2 * lam * H**3 + lam * H + eps)
            Phi, G = self._link(W @ H)
            W *= (g * ((Xd * G) @ H.T) + 3 * lam * W**2) / (
                g * ((Phi * G) @ H.T) + 2 * lam * W**3 + lam * W + eps)
            np.maximum(W, tiny, out=W)
            np.maximum(H, tiny, out=H)
            Phi, _ = self._link(W @ H)
            penalty = np.linalg.norm(W**2 - W) + np.linalg.norm(H**2 - H)
            losses.append(0.5 * float(np.sum((Xd - Phi) ** 2)) + 0.5 * lam * penalty**2)
            if self.tol is not None and penalty < self.tol:
                break
            lam = min(lam * self.growth, self.lam_max)

    def _link(self, S):
        Phi = 1.0 / (1.0 + np.exp(-self.gamma * (S - 0.5)))
        return Phi, Phi * (1.0 - Phi)
