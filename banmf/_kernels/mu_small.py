"""Plain-loop kernels of the multiplicative-update iteration, for small problems.

The kernels of :mod:`banmf._kernels.mu` hold rows in vector registers and tile the k×k Gram
products; on a problem of a few thousand nonzeros that buys nothing (the same µs per call) and
costs most of a first run's compile time, where these compile in a fraction of it
(docs/decisions.md, "Plain loops for small problems"). The solver uses these below
:data:`banmf.engine.iterations.SMALL_WORK`, whatever the thread budget, so the choice never depends on the number of threads. Same semantics as their
twins; serial only (small work never pays for threads).
"""

from typing import NamedTuple

import numpy as np
from numba import njit

from .mu import YSums, lifted, subnormal_floor

# As in mu.py: let LLVM vectorize the length-k loops; NaN/inf semantics kept.
_FAST = {"reassoc", "contract"}


class SmallState(NamedTuple):
    """The buffers that :func:`iterate_small` rewrites each iteration (besides the factors and
    Y): ``YHt`` (n, ≥ k) and ``WtY`` (m, ≥ k), the Y pass's objective sums ``sq`` (n, 2), and
    the Gram matrices ``WtW``, ``HHt`` (k, k) float64 with their copies ``WtW_t``, ``HHt_t`` in
    the factors' type, which the row updates read."""

    YHt: np.ndarray
    WtY: np.ndarray
    sq: np.ndarray
    WtW: np.ndarray
    HHt: np.ndarray
    WtW_t: np.ndarray
    HHt_t: np.ndarray


class Settings(NamedTuple):
    """The scalars of :func:`iterate_small`: the rank ``k``, ``eps`` of the row updates, Y's
    box [``lower``, ``upper``], whether Y is projected onto it (``project``; else fixed) and
    whether H is updated (``update_h``)."""

    k: int
    eps: float
    lower: float
    upper: float
    project: bool
    update_h: bool


@njit(cache=True, nogil=True, fastmath=_FAST)
def update_rows_small(F, numer, G, lam, eps, gram):
    """In-place MU step of the first k columns of every row of F (r, ≥ k) against the
    symmetric (k, k) G; ``gram`` (k, k) float64 receives FᵀF of the new rows.

    ``F[i] <- F[i] * (numer[i] + 3 lam F[i]^2) / (F[i] @ G + 2 lam F[i]^3 + lam F[i] + eps)``,
    positive values below :func:`banmf._kernels.mu.subnormal_floor` raised to it.
    """
    r = F.shape[0]
    k = G.shape[0]
    e = F.dtype.type(eps)
    floor = subnormal_floor(F)
    row = np.empty(k, dtype=F.dtype)
    gram[:, :] = 0.0
    for i in range(r):
        for l in range(k):
            s = F.dtype.type(0)
            for q in range(k):
                s += F[i, q] * G[q, l]
            f = F[i, l]
            if lam == 0.0:
                v = f * numer[i, l] / (s + e)
            else:
                v = (
                    f
                    * (numer[i, l] + 3.0 * lam * f * f)
                    / (s + 2.0 * lam * f * f * f + lam * f + eps)
                )
            row[l] = lifted(v, floor)
        for l in range(k):
            F[i, l] = row[l]
        for q in range(k):
            for l in range(q, k):
                gram[q, l] += row[q] * row[l]
    for q in range(k):
        for l in range(q + 1, k):
            gram[l, q] = gram[q, l]


@njit(cache=True, nogil=True, fastmath=_FAST)
def scatter_rows_small(X, y, cells, W, k, out):
    """``out[:, :k] = Yᵀ W[:, :k]``: every nonzero p = (i, j) of X (:class:`~.sparse.Sparse`)
    adds ``y[p] W[i]`` to row j, and every unknown cell c = (i, j) of ``cells``
    (:class:`~.mu.Cells`; None: none) ``cells.y[c] W[i]``."""
    indptr, indices = X
    out[:, :k] = 0.0
    for i in range(len(indptr) - 1):
        for p in range(indptr[i], indptr[i + 1]):
            j, v = indices[p], y[p]
            for l in range(k):
                out[j, l] += v * W[i, l]
        if cells is not None:  # (None: no unknown cells, compiled out)
            cindptr, cindices, cy = cells
            for c in range(cindptr[i], cindptr[i + 1]):
                j, v = cindices[c], cy[c]
                for l in range(k):
                    out[j, l] += v * W[i, l]


@njit(cache=True, nogil=True, fastmath=_FAST)
def project_spmm_small(X, y, factors, out, cells, k, lower, upper, project):
    """The Y pass over the first k columns: for every nonzero p = (i, j) of X
    (:class:`~.sparse.Sparse`), ``s = W[i] . Ht[j]`` (:class:`~.mu.Factors`); if ``project``,
    ``y[p] = min(upper, max(lower, s))``. Of ``out`` (:class:`~.mu.YSums`), ``YHt[i, :k] =
    sum_p y[p] Ht[j]`` and ``sq[i] = (sum_p (y[p] - s)^2, sum_p s^2)``. Every unknown cell c =
    (i, j) of ``cells`` (:class:`~.mu.Cells`; None: none, compiled out) takes ``cells.y[c] =
    s`` (Y is free there) and adds to ``YHt[i]`` and to ``sq[i, 1]`` as a nonzero does."""
    indptr, indices = X
    W, Ht = factors
    YHt, sq = out
    lo, up = W.dtype.type(lower), W.dtype.type(upper)
    for i in range(len(indptr) - 1):
        res = 0.0
        s2 = 0.0
        YHt[i, :k] = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            s = W.dtype.type(0)
            for l in range(k):
                s += W[i, l] * Ht[j, l]
            if project:
                y[p] = min(up, max(lo, s))
            v = y[p]
            res += (v - s) * (v - s)
            s2 += s * s
            for l in range(k):
                YHt[i, l] += v * Ht[j, l]
        if cells is not None:  # (None: no unknown cells, compiled out)
            cindptr, cindices, cy = cells
            for c in range(cindptr[i], cindptr[i + 1]):
                j = cindices[c]
                s = W.dtype.type(0)
                for l in range(k):
                    s += W[i, l] * Ht[j, l]
                cy[c] = s
                s2 += s * s
                for l in range(k):
                    YHt[i, l] += s * Ht[j, l]
        sq[i, 0] = res
        sq[i, 1] = s2


@njit(cache=True, nogil=True, fastmath=_FAST)
def _penalty(F, k):
    """``‖F² − F‖²`` over the first k columns, summed in float64."""
    total = 0.0
    for i in range(F.shape[0]):
        for l in range(k):
            f = np.float64(F[i, l])
            total += (f * f - f) ** 2
    return total


@njit(cache=True, nogil=True, fastmath=_FAST)
def iterate_small(X, y, cells, factors, state, settings, lams, out):
    """One whole iteration per value of ``lams`` (the λ of each), in one call: small problems
    pay more for Python's per-call cost than for the arithmetic, and a start that calls once
    for several iterations keeps the GIL released throughout, so that starts on other threads
    run meanwhile.

    X (:class:`~.sparse.Sparse`) with Y's values ``y``, the :class:`~.mu.Factors`, the
    buffers ``state`` (:class:`SmallState`) and the scalars ``settings`` (:class:`Settings`).
    An iteration: the W step (and WᵀW), then unless ``update_h`` is False the scatter and the
    H step (and HHᵀ), then the Y pass; the unknown cells (``cells``, :class:`~.mu.Cells`, Y
    free there; None: none) enter the scatter and the Y pass. ``out[q]`` receives the
    objective after iteration q, ``½‖Y − WH‖² + (λ/2)(‖W²−W‖² + ‖H²−H‖²)``, its off-support
    part ``‖WH‖² − Σ s²`` (over the nonzeros and the unknown cells) clamped at 0 against
    cancellation.
    """
    W, Ht = factors
    YHt, WtY, sq, WtW, HHt, WtW_t, HHt_t = state
    k, eps, lower, upper, project, update_h = settings
    sums = YSums(YHt, sq)
    for q in range(lams.shape[0]):
        lam = lams[q]
        update_rows_small(W, YHt, HHt_t, lam, eps, WtW)
        for a in range(k):
            for b in range(k):
                WtW_t[a, b] = WtW[a, b]
        if update_h:
            scatter_rows_small(X, y, cells, W, k, WtY)
            update_rows_small(Ht, WtY, WtW_t, lam, eps, HHt)
            for a in range(k):
                for b in range(k):
                    HHt_t[a, b] = HHt[a, b]
        project_spmm_small(X, y, factors, sums, cells, k, lower, upper, project)
        res = 0.0
        s2 = 0.0
        for i in range(sq.shape[0]):
            res += sq[i, 0]
            s2 += sq[i, 1]
        whf = 0.0
        for a in range(k):
            for b in range(k):
                whf += WtW[a, b] * HHt[a, b]
        f = 0.5 * (res + max(0.0, whf - s2))
        if lam != 0.0:
            f += 0.5 * lam * (_penalty(W, k) + _penalty(Ht, k))
        out[q] = f
