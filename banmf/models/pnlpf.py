"""PNL-PF (Miron et al., Signal Processing 2021): post-nonlinear penalty factorization, dense."""

from __future__ import annotations

from numbers import Integral, Real
from typing import ClassVar

import numpy as np

from ..data.params import NONE, Interval
from ..data.validation import check_dense_budget, check_random_state
from ..engine.booleanize import balance, threshold_factors
from ._base import (
    COMMON_CONSTRAINTS,
    COMMON_DEFAULTS,
    BaseFactorization,
    budgeted,
    declared_init,
    fit_inner,
)
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

    _parameter_constraints: ClassVar[dict] = {
        **COMMON_CONSTRAINTS,
        "gamma": [Interval(Real, 0, np.inf, closed="neither")],
        "lam0": [Interval(Real, 0, np.inf, closed="neither")],
        "growth": [Interval(Real, 0, np.inf, closed="neither")],
        "lam_max": [Interval(Real, 0, np.inf, closed="neither")],
        "max_iter": [Interval(Integral, 1, None)],
        "tol": [NONE, Interval(Real, 0, None)],
        "init_iter": [Interval(Integral, 1, None)],
        "eps": [Interval(Real, 0, None)],
        "n_thresholds": [Interval(Integral, 1, None)],
        "dense_budget": [Interval(Integral, 1, None)],
    }

    __init__ = declared_init(
        {
            "n_components": 10,
            "gamma": 10.0,
            "lam0": 2.0,
            "growth": 3.0,
            "lam_max": 1e10,
            "max_iter": 100,
            "tol": 0.01,
            "init_iter": 1000,
            "eps": 1e-12,
            "n_thresholds": 100,
            "dense_budget": DENSE_BUDGET,
            **COMMON_DEFAULTS,
        }
    )

    @budgeted
    def fit(self, X, y=None, *, missing=None, observed=None) -> PNLPF:
        """Fit to the 0/1 matrix X (dense or sparse, (n, m)); ``missing`` / ``observed`` mark
        unknown cells as in :meth:`BANMF.fit`: the objective counts observed cells only."""
        data, k, start = self._begin(X, missing, observed)
        X, unknown = data.X, data.unknown
        polish = self._polish_method(k)
        check_dense_budget(X.shape, self.dense_budget, "PNL-PF (about 48 bytes per entry)")
        rng = check_random_state(self.random_state)
        init = NMF(k, max_iter=self.init_iter, normalize=None, random_state=rng.integers(2**32))
        interrupted = fit_inner(
            init, data
        )  # the first Ctrl-C: booleanize the factors so far; a second aborts
        W, H = balance(init.W_continuous_, init.H_continuous_)
        tiny = np.finfo(np.float64).eps
        W, H = np.maximum(W, tiny), np.maximum(H, tiny)
        Xd = X.toarray().astype(np.float64)  # dense by design, within the budget checked above
        weights = 1.0 if unknown is None else unknown.dense_observed(X)
        losses = []
        try:
            self._iterate(Xd, weights, W, H, losses, 0 if interrupted else self.max_iter)
        except KeyboardInterrupt:
            interrupted = True
        res = threshold_factors(data, W, H, self.n_thresholds, "balance", "pruned")
        self.W_continuous_, self.H_continuous_ = res.W_scaled, res.H_scaled
        self.thresholds_ = (res.threshold_w, res.threshold_h)
        self.loss_curve_ = np.asarray(losses)
        self._finish(data, res.W, res.H, res.error, len(losses), start, polish, interrupted)
        return self

    def _iterate(self, Xd, weights, W, H, losses, max_iter):
        """The penalized updates of W and H in place, appending the objective to ``losses``;
        ``weights`` (1 observed, 0 unknown) keeps unknown cells out of the objective."""
        tiny = np.finfo(np.float64).eps
        g, eps, lam = float(self.gamma), float(self.eps), float(self.lam0)
        for _ in range(max_iter):
            Phi, G = self._link(W @ H, weights)
            H *= (g * (W.T @ (Xd * G)) + 3 * lam * H**2) / (
                g * (W.T @ (Phi * G)) + 2 * lam * H**3 + lam * H + eps
            )
            Phi, G = self._link(W @ H, weights)
            W *= (g * ((Xd * G) @ H.T) + 3 * lam * W**2) / (
                g * ((Phi * G) @ H.T) + 2 * lam * W**3 + lam * W + eps
            )
            np.maximum(W, tiny, out=W)
            np.maximum(H, tiny, out=H)
            Phi, _ = self._link(W @ H, weights)
            penalty = np.linalg.norm(W**2 - W) + np.linalg.norm(H**2 - H)
            losses.append(0.5 * float(np.sum(weights * (Xd - Phi) ** 2)) + 0.5 * lam * penalty**2)
            if self.tol is not None and penalty < self.tol:
                break
            lam = min(lam * self.growth, self.lam_max)

    def _link(self, S, weights):
        """The link Φ(S) and the updates' weights Φ(1 − Φ), zero on unknown cells."""
        Phi = 1.0 / (1.0 + np.exp(-self.gamma * (S - 0.5)))
        return Phi, Phi * (1.0 - Phi) * weights
