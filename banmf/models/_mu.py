"""The multiplicative-update engine shared by BANMF and NMF (NMF is BANMF with Y frozen at X).

State lives in row-major arrays: ``W`` (n, k), ``Ht`` (m, k) = Hᵀ, and ``y``, one value per
nonzero of X in its CSR order. Each half-step is one method so that tests can check the
objective after every one of them; the Y step of one iteration runs fused with the W step of the
next (see :mod:`banmf._kernels.mu`).
"""

from __future__ import annotations

import numpy as np

from .._kernels.mu import project_rows, project_update_rows, update_rows

# Row blocks of the W pass: each holds an (m, k) partial of Wᵀ Y. The count depends only on the
# problem's shape (never on the thread count), so results are the same on any machine.
_MAX_BLOCKS = 4
_SCATTER_BUDGET_BYTES = 2**28


def n_row_blocks(n: int, m: int, k: int, itemsize: int) -> int:
    """Blocks for the W pass: up to 4, fewer when their Wᵀ Y partials would exceed 256 MB."""
    fit = _SCATTER_BUDGET_BYTES // max(1, m * k * itemsize)
    return int(max(1, min(_MAX_BLOCKS, fit, n)))


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

    An iteration is :meth:`step_w` (the Y step of the previous iteration fused with this W
    step: one pass over the nonzeros), then :meth:`commit_w`, then :meth:`step_h`. Between
    ``step_w`` and ``commit_w`` the state is still the one the Y step saw, so a caller can read
    its objective and stop right there: the factors then are exactly those of the previous
    iteration. :meth:`step_y` is the Y step alone (for the start and the end of a fit).

    Parameters
    ----------
    X : canonical CSR support mask (n, m)
    W : ndarray (n, k), C-contiguous: the starting W, then one of the solver's two work arrays
        (read the result from the ``W`` attribute)
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
        # W and its successor: the W step writes the new rows to the spare array.
        self.W, self._W_next = W, np.empty_like(W)
        self.Ht = Ht
        dtype = W.dtype
        self.y = np.ones(X.nnz, dtype=dtype) if y is None else np.ascontiguousarray(y, dtype=dtype)
        self.project = bool(project)
        self.lower, self.upper, self.eps = float(lower), float(upper), float(eps)
        n, k = W.shape
        m = Ht.shape[0]
        nb = n_row_blocks(n, m, k, dtype.itemsize)
        self.WtY_blocks = np.empty((nb, m, k), dtype)
        self.WtW_blocks = np.empty((nb, k, k), np.float64)
        self.HHt_blocks = np.empty((min(_MAX_BLOCKS, max(1, m)), k, k), np.float64)
        self.sq = np.empty((n, 3), np.float64)
        self.HHt = Ht.T.astype(np.float64) @ Ht
        self.WtW = W.T.astype(np.float64) @ W
        # The Gram matrices in the factors' type, as the row updates read them.
        self.HHt_t, self.WtW_t = self.HHt.astype(dtype), self.WtW.astype(dtype)
        self.WtY = np.zeros((m, k), dtype)  # block sums land here: no allocation per iteration
        # The objective's support terms for the starting Y, without projecting it.
        self.step_y(project=False)

    def step_w(self, lam: float, *, project_y: bool = False, scatter: bool = True) -> None:
        """W step into the spare array, after (if ``project_y`` and the solver projects) the Y
        step against the current W and H; forms the new WᵀW and (unless ``scatter=False``)
        Wᵀ Y for the H step. Without ``project_y`` the W step uses Y as it stands.
        """
        project_update_rows(self.indptr, self.indices, self.y, self.W, self._W_next, self.Ht,
                            self.HHt_t, self.lower, self.upper, self.project and project_y, lam,
                            self.eps, self.sq, self.WtW_blocks, scatter, self.WtY_blocks)
        if scatter:
            np.sum(self.WtY_blocks, axis=0, out=self.WtY)

    def commit_w(self) -> None:
        """Make the W of the last :meth:`step_w` the current one."""
        self.W, self._W_next = self._W_next, self.W
        np.sum(self.WtW_blocks, axis=0, out=self.WtW)
        np.copyto(self.WtW_t, self.WtW)

    def step_h(self, lam: float) -> None:
        update_rows(self.Ht, self.WtY, self.WtW_t, lam, self.eps, self.HHt_blocks)
        np.sum(self.HHt_blocks, axis=0, out=self.HHt)
        np.copyto(self.HHt_t, self.HHt)

    def step_y(self, project: bool = True) -> None:
        """The Y step alone: project Y (if the solver projects) against the current W and H
        and refresh the objective's support terms."""
        project_rows(self.indptr, self.indices, self.W, self.Ht, self.lower, self.upper,
                     self.project and project, self.y, self.sq)

    def objective(self, lam: float = 0.0) -> float:
        """``½‖Y − WH‖² + (λ/2)(‖W²−W‖² + ‖H²−H‖²)`` for the W and H the last Y step saw.

        Valid after :meth:`step_y`, or after :meth:`step_w` and before :meth:`commit_w`. The
        off-support part ``‖WH‖² − Σ_Ω s²`` is clamped at 0 against cancellation.
        """
        # Column by column: numpy's axis-0 sum of an (n, 3) array is ~20× slower.
        res, s2 = self.sq[:, 0].sum(), self.sq[:, 1].sum()
        whf = float(np.sum(self.WtW * self.HHt))
        f = 0.5 * (res + max(0.0, whf - s2))
        if lam:
            Ht = self.Ht
            f += 0.5 * lam * (float(self.sq[:, 2].sum()) + float(np.sum((Ht * Ht - Ht) ** 2)))
        return float(f)
