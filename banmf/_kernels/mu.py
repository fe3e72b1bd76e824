"""Kernels of the multiplicative-update iteration on the support of X.

An iteration is two passes over the nonzeros in CSR order, both parallel over blocks of rows:
the W pass (update each row of W, then scatter that row's ``y[p] W[i]`` into Wᵀ Y and add
``W[i]ᵀ W[i]`` into WᵀW) and the Y pass (project Y onto [lower, upper] and accumulate Y Hᵀ).
Sums across rows go to one buffer per block, added up afterwards in block order, so the result
does not depend on the number of threads. The k×k Gram products are done inline per row:
no BLAS call in the loop, whose idle threads would compete with Numba's on a small machine.
"""

import numpy as np
from numba import njit, prange

# Reassociation and FMA contraction let LLVM vectorize the length-k dot products and updates;
# NaN/inf semantics are kept (no "nnan"/"ninf"), so a bad value still shows instead of being
# optimised away.
_FAST = {"reassoc", "contract"}


@njit(cache=True, nogil=True, inline="always", fastmath=_FAST)
def _mu_row(F, i, numer, G, lam, eps, lin):
    """Row i of the (regularized) MU step with the Gram term ``lin = F[i] @ G`` computed here."""
    k = F.shape[1]
    for l in range(k):
        lin[l] = 0.0
    for q in range(k):
        fq = F[i, q]
        for l in range(k):
            lin[l] += fq * G[q, l]
    if lam == 0.0:
        for l in range(k):
            F[i, l] = F[i, l] * numer[i, l] / (lin[l] + eps)
    else:
        for l in range(k):
            f = F[i, l]
            F[i, l] = f * (numer[i, l] + 3.0 * lam * f * f) / (
                lin[l] + 2.0 * lam * f * f * f + lam * f + eps
            )


@njit(cache=True, nogil=True, inline="always", fastmath=_FAST)
def _add_gram_row(F, i, gram, row):
    """``gram += F[i]ᵀ F[i]``, reading the row once into ``row``."""
    k = F.shape[1]
    for l in range(k):
        row[l] = F[i, l]
    for q in range(k):
        fq = row[q]
        for l in range(k):
            gram[q, l] += fq * row[l]


@njit(parallel=True, cache=True, nogil=True, fastmath=_FAST)
def update_rows(F, numer, G, lam, eps, gram_blocks):
    """In-place MU step of every row of F (r, k); ``gram_blocks`` (b, k, k) receives FᵀF by block.

    ``F[i] <- F[i] * (numer[i] + 3 lam F[i]^2) / (F[i] @ G + 2 lam F[i]^3 + lam F[i] + eps)``;
    ``lam = 0`` is the plain Lee-Seung step. Row i belongs to block ``i * b // r``.
    """
    r, k = F.shape
    nb = gram_blocks.shape[0]
    for b in prange(nb):
        lin = np.empty(k, dtype=np.float64)
        row = np.empty(k, dtype=np.float64)
        gram = gram_blocks[b]
        gram[:, :] = 0.0
        for i in range(b * r // nb, (b + 1) * r // nb):
            _mu_row(F, i, numer, G, lam, eps, lin)
            _add_gram_row(F, i, gram, row)


@njit(parallel=True, cache=True, nogil=True, fastmath=_FAST)
def update_rows_scatter(indptr, indices, y, F, numer, G, lam, eps, gram_blocks, scatter_blocks):
    """:func:`update_rows` for W, plus ``scatter_blocks[b] = (Y_b)ᵀ W_b`` with the new rows.

    ``scatter_blocks`` (b, m, k): the block sums of Wᵀ Y (stored transposed, as (m, k)).
    """
    r, k = F.shape
    nb = gram_blocks.shape[0]
    for b in prange(nb):
        lin = np.empty(k, dtype=np.float64)
        row = np.empty(k, dtype=np.float64)
        gram = gram_blocks[b]
        gram[:, :] = 0.0
        out = scatter_blocks[b]
        out[:, :] = 0.0
        for i in range(b * r // nb, (b + 1) * r // nb):
            _mu_row(F, i, numer, G, lam, eps, lin)
            _add_gram_row(F, i, gram, row)
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                v = y[p]
                for l in range(k):
                    out[j, l] += v * row[l]


@njit(parallel=True, cache=True, nogil=True, fastmath=_FAST)
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
