"""Kernels of the multiplicative-update iteration on the support of X."""

import numpy as np
from numba import njit, prange


@njit(parallel=True, cache=True, nogil=True)
def project_spmm(indptr, indices, W, Ht, lower, upper, project, y, YHt, sq):
    """Fused Y-projection (SDDMM) and ``Y @ Ht`` over the nonzeros, row by row.

    For every stored nonzero p = (i, j): ``s = W[i] . Ht[j]``; if ``project``, ``y[p]`` becomes
    ``min(upper, max(lower, s))`` (otherwise ``y`` is only read). Then ``YHt[i] = sum_p y[p] Ht[j]``
    and ``sq[i] = (sum_p (y[p] - s)^2, sum_p s^2)``, the two support terms of the objective.
    """
    n, k = W.shape
    for i in prange(n):
        for l in range(k):
            YHt[i, l] = 0.0
        res = 0.0
        s2 = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            s = 0.0
            for l in range(k):
                s += W[i, l] * Ht[j, l]
            if project:
                v = min(upper, max(lower, s))
                y[p] = v
            else:
                v = y[p]
            res += (v - s) * (v - s)
            s2 += s * s
            for l in range(k):
                YHt[i, l] += v * Ht[j, l]
        sq[i, 0] = res
        sq[i, 1] = s2


@njit(parallel=True, cache=True, nogil=True)
def gather_spmm(indptr_t, indices_t, perm, y, W, out):
    """``out = Y^T @ W`` column by column, reading Y through its transposed pattern.

    ``(indptr_t, indices_t)`` is the CSR pattern of X^T and ``perm[q]`` the position in X's CSR
    order of the q-th nonzero of X^T, so ``y[perm[q]]`` is that nonzero's value.
    """
    m, k = out.shape
    for j in prange(m):
        for l in range(k):
            out[j, l] = 0.0
        for q in range(indptr_t[j], indptr_t[j + 1]):
            i = indices_t[q]
            v = y[perm[q]]
            for l in range(k):
                out[j, l] += v * W[i, l]


@njit(parallel=True, cache=True, nogil=True)
def mu_update(F, numer, linear, lam, eps):
    """In-place (regularized) multiplicative update of a factor F of shape (r, k).

    ``F <- F * (numer + 3 lam F^2) / (linear + 2 lam F^3 + lam F + eps)``, where ``numer`` is the
    data term (Y Hᵀ or Wᵀ Y) and ``linear`` the Gram term (W HHᵀ or Hᵀ WᵀW). ``lam = 0`` gives the
    plain Lee-Seung step.
    """
    r, k = F.shape
    for i in prange(r):
        for l in range(k):
            f = F[i, l]
            if lam == 0.0:
                F[i, l] = f * numer[i, l] / (linear[i, l] + eps)
            else:
                F[i, l] = f * (numer[i, l] + 3.0 * lam * f * f) / (
                    linear[i, l] + 2.0 * lam * f * f * f + lam * f + eps
                )
