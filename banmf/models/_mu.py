"""The multiplicative-update engine shared by BANMF and NMF (NMF is BANMF with Y frozen at X).

State lives in row-major arrays: ``W`` (n, k), ``Ht`` (m, k) = Hᵀ, and ``y``, one value per
nonzero of X in its CSR order. Each half-step is one method so that tests can check the
objective after every one of them.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from .._kernels.mu import gather_spmm, mu_update, project_spmm


def transposed_pattern(X: sp.csr_array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR pattern of Xᵀ and, per nonzero of Xᵀ, its position in X's CSR order."""
    pos = sp.csr_array(
        (np.arange(X.nnz, dtype=X.indices.dtype), X.indices, X.indptr), shape=X.shape
    )
    T = pos.T.tocsr()
    T.sort_indices()
    return T.indptr.astype(X.indptr.dtype), T.indices.astype(X.indices.dtype), T.data


def lambda_schedule(regularization, max_iter: int) -> np.ndarray:
    """λ per iteration: zeros (None), a constant (float) or the paper's log-space ramp."""
    if regularization is None:
        return np.zeros(max_iter)
    if isinstance(regularization, str):
        if regularization == "logspace":
            return np.logspace(-4, 10, max_iter)
        raise ValueError(
            f"regularization must be None, a nonnegative float or 'logspace', got {regularization!r}"
        )
    if isinstance(regularization, bool) or not isinstance(regularization, (int, float, np.number)):
        raise TypeError(
            f"regularization must be None, a nonnegative float or 'logspace', got {regularization!r}"
        )
    lam = float(regularization)
    if not np.isfinite(lam) or lam < 0:
        raise ValueError(f"regularization must be a finite nonnegative number, got {regularization!r}")
    return np.full(max_iter, lam)


class MUSolver:
    """Multiplicative updates of W and H against Y, with Y projected onto [lower, upper] on Ω.

    Parameters
    ----------
    X : canonical CSR support mask (n, m)
    W : ndarray (n, k), updated in place
    Ht : ndarray (m, k), updated in place
    project : bool
        True for BANMF (Y is projected every step), False for NMF (Y stays X).
    lower, upper : float
        Box for Y on the support (``upper`` may be ``inf``).
    eps : float
        Added to every denominator.
    y : ndarray (nnz,), optional
        Initial Y values on the support (default: ones, i.e. Y = X).
    """

    def __init__(self, X, W, Ht, *, project, lower, upper, eps, y=None):
        self.indptr, self.indices = X.indptr, X.indices
        self.indptr_t, self.indices_t, self.perm = transposed_pattern(X)
        self.W, self.Ht = W, Ht
        dtype = W.dtype
        self.y = np.ones(X.nnz, dtype=dtype) if y is None else np.ascontiguousarray(y, dtype=dtype)
        self.project = bool(project)
        self.lower, self.upper, self.eps = float(lower), float(upper), float(eps)
        n, k = W.shape
        m = Ht.shape[0]
        self.YHt = np.empty((n, k), dtype)
        self.lin_W = np.empty((n, k), dtype)
        self.WtY = np.empty((m, k), dtype)
        self.lin_H = np.empty((m, k), dtype)
        self.sq = np.empty((n, 2), np.float64)
        self.HHt = Ht.T @ Ht
        self.WtW = W.T @ W
        # Y Hᵀ and the support terms for the starting Y, without projecting it.
        project_spmm(self.indptr, self.indices, W, Ht, self.lower, self.upper, False,
                     self.y, self.YHt, self.sq)

    def step_w(self, lam: float) -> None:
        np.matmul(self.W, self.HHt, out=self.lin_W)
        mu_update(self.W, self.YHt, self.lin_W, lam, self.eps)
        self.WtW = self.W.T @ self.W

    def step_h(self, lam: float) -> None:
        gather_spmm(self.indptr_t, self.indices_t, self.perm, self.y, self.W, self.WtY)
        np.matmul(self.Ht, self.WtW, out=self.lin_H)
        mu_update(self.Ht, self.WtY, self.lin_H, lam, self.eps)
        self.HHt = self.Ht.T @ self.Ht

    def step_y(self) -> None:
        """Project Y (BANMF) and refresh Y Hᵀ and the objective's support terms."""
        project_spmm(self.indptr, self.indices, self.W, self.Ht, self.lower, self.upper,
                     self.project, self.y, self.YHt, self.sq)

    def iterate(self, lam: float) -> None:
        """One W, H, Y cycle (the paper's order)."""
        self.step_w(lam)
        self.step_h(lam)
        self.step_y()

    def objective(self, lam: float = 0.0) -> float:
        """``½‖Y − WH‖² + (λ/2)(‖W²−W‖² + ‖H²−H‖²)`` as of the last :meth:`step_y`.

        The off-support part ``‖WH‖² − Σ_Ω s²`` is clamped at 0 against cancellation.
        """
        res, s2 = self.sq.sum(axis=0)
        whf = float(np.sum(self.WtW.astype(np.float64) * self.HHt.astype(np.float64)))
        f = 0.5 * (res + max(0.0, whf - s2))
        if lam:
            W, Ht = self.W, self.Ht
            f += 0.5 * lam * (float(np.sum((W * W - W) ** 2)) + float(np.sum((Ht * Ht - Ht) ** 2)))
        return float(f)
