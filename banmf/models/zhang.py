"""NMF with Zhang et al.'s thresholding: a sigmoid-smoothed refinement of the thresholds."""

from __future__ import annotations

from numbers import Integral, Real
from typing import ClassVar

import numpy as np

from ..data.params import Interval
from ..data.validation import check_dense_budget
from ..engine.booleanize import threshold_factors
from ._base import (
    COMMON_CONSTRAINTS,
    COMMON_DEFAULTS,
    BaseFactorization,
    budgeted,
    declared_init,
    fit_inner,
)
from .nmf import NMF
from .pnlpf import DENSE_BUDGET

__all__ = ["ZhangThreshold"]


class ZhangThreshold(BaseFactorization):
    """NMF, then thresholds refined by minimising Zhang et al.'s smoothed objective.

    After NMF and balancing, the global thresholds (u, v) minimise
    ``F(u, v) = ½‖X − σ(a(W − u)) σ(a(H − v))‖²`` (ordinary product, σ the logistic function)
    by gradient descent with a backtracking (Armijo) line search, stopping when ``‖∇F‖²`` or
    the decrease of F falls below ``tol``. The refined thresholds are kept only if the Boolean
    error does not rise. Zhang's method starts from a 0.01-step grid of the same smooth
    objective; here it starts from the Boolean-error grid optimum of :func:`banmf.booleanize`
    (100 points over [0, max], about the same step after balancing), which is exact and cheap.

    The smooth objective is dense: inputs with ``n·m > dense_budget`` are refused.

    Parameters
    ----------
    n_components : int, default 10
    slope : float, default 100.0
        The sigmoid's slope ``a``.
    max_iter : int, default 1000
        NMF iterations.
    refine_iter : int, default 100
        Gradient steps at most.
    tol : float, default 1e-4
    n_thresholds : int, default 100
    dense_budget : int, default 50_000_000
    polish : bool or {"auto", "exact", "flip"}, default False
        Polish the Boolean factors with :func:`banmf.polish` after the method (off by default
        so that this stays the published baseline; ``unpolished_err_`` keeps its own error).
    n_jobs, random_state, verbose : as for BANMF (the dense products use numpy's BLAS
        threads, which ``n_jobs`` does not govern).

    Attributes
    ----------
    W_, components_, thresholds_, reconstruction_err_, relative_error_, n_iter_, refined_

    References
    ----------
    Zhang, Li, Ding, Zhang, "Binary matrix factorization with applications", ICDM 2007.
    """

    _parameter_constraints: ClassVar[dict] = {
        **COMMON_CONSTRAINTS,
        "slope": [Interval(Real, 0, np.inf, closed="neither")],
        "max_iter": [Interval(Integral, 1, None)],
        "refine_iter": [Interval(Integral, 1, None)],
        "tol": [Interval(Real, 0, np.inf, closed="neither")],
        "n_thresholds": [Interval(Integral, 1, None)],
        "dense_budget": [Interval(Integral, 1, None)],
    }

    __init__ = declared_init(
        {
            "n_components": 10,
            "slope": 100.0,
            "max_iter": 1000,
            "refine_iter": 100,
            "tol": 1e-4,
            "n_thresholds": 100,
            "dense_budget": DENSE_BUDGET,
            **COMMON_DEFAULTS,
        }
    )

    @budgeted
    def fit(self, X, y=None, *, missing=None, observed=None) -> ZhangThreshold:
        """Fit to the 0/1 matrix X (dense or sparse, (n, m)); ``missing`` / ``observed`` mark
        unknown cells as in :meth:`BANMF.fit`: the NMF, the thresholds and the smooth
        objective count observed cells only."""
        data, k, start = self._begin(X, missing, observed)
        X, unknown = data.X, data.unknown
        polish = self._polish_method(k)
        check_dense_budget(X.shape, self.dense_budget, "Zhang's thresholding (a dense objective)")
        nmf = NMF(k, max_iter=self.max_iter, normalize=None, random_state=self.random_state)
        interrupted = fit_inner(
            nmf, data
        )  # the first Ctrl-C: the grid thresholds stand; a second aborts
        res = threshold_factors(
            data, nmf.W_continuous_, nmf.H_continuous_, self.n_thresholds, "balance", "pruned"
        )
        W, H = res.W_scaled, res.H_scaled
        self.refined_, steps = False, 0
        if not interrupted:
            try:
                weights = 1.0 if unknown is None else unknown.dense_observed(X)
                u, v, steps = self._refine(
                    X.toarray().astype(np.float64),
                    weights,
                    W,
                    H,
                    res.threshold_w,
                    res.threshold_h,
                )
                Wb, Hb = W > u, H > v
                err = data.error(Wb, Hb)
                self.refined_ = err <= res.error
            except KeyboardInterrupt:
                interrupted = True
        if not self.refined_:
            Wb, Hb, u, v, err = res.W, res.H, res.threshold_w, res.threshold_h, res.error
        self.W_continuous_, self.H_continuous_ = W, H
        self.thresholds_ = (float(u), float(v))
        self._finish(data, Wb, Hb, err, nmf.n_iter_ + steps, start, polish, interrupted)
        return self

    def _smooth(self, Xd, weights, W, H, u, v):
        """F(u, v) and its gradient (``weights``: 1 on observed cells, 0 on unknown ones)."""
        a = self.slope
        A = 0.5 * (1.0 + np.tanh(0.5 * a * (W - u)))  # logistic, without exp overflow
        B = 0.5 * (1.0 + np.tanh(0.5 * a * (H - v)))
        R = (A @ B - Xd) * weights
        gu = -a * float(np.sum(R * ((A * (1 - A)) @ B)))
        gv = -a * float(np.sum(R * (A @ (B * (1 - B)))))
        return 0.5 * float(np.sum(R * R)), np.array([gu, gv])

    def _refine(self, Xd, weights, W, H, u, v):
        x = np.array([u, v], dtype=np.float64)
        f, g = self._smooth(Xd, weights, W, H, *x)
        steps = 0
        for steps in range(1, self.refine_iter + 1):
            if g @ g < self.tol:
                break
            step, d = 1.0, -g
            while True:  # Armijo backtracking, sufficient-decrease constant 0.1
                cand = x + step * d
                fc, gc = self._smooth(Xd, weights, W, H, *cand)
                if fc <= f + 0.1 * step * (g @ d) or step < 1e-12:
                    break
                step *= 0.5
            done = abs(f - fc) < self.tol
            x, f, g = cand, fc, gc
            if done:
                break
        return float(x[0]), float(x[1]), steps
