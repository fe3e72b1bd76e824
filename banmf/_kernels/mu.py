"""Kernels of the multiplicative-update iteration on the support of X.

An iteration is two passes over the nonzeros in CSR order, both parallel over blocks of rows:
the W pass (update each row of W, then scatter that row's ``y[p] W[i]`` into Wᵀ Y and add
``W[i]ᵀ W[i]`` into WᵀW) and the Y pass (project Y onto [lower, upper] and accumulate Y Hᵀ).
Sums across rows go to one buffer per block, added up afterwards in block order, so the result
does not depend on the number of threads. The k×k Gram products are done inline: no BLAS call
in the loop, whose idle threads would compete with Numba's on a small machine.

Fusing the Y pass into the W pass (each row's Y step, then its W step, one pass over the
nonzeros) was measured and is 10-15 % slower at 10⁶ nonzeros: the gathered rows of H and the
scattered rows of Wᵀ Y then compete for the same L2.
"""

import numpy as np
from numba import njit, prange

from .prefetch import prefetch_ahead, worth_prefetching

# Reassociation and FMA contraction let LLVM vectorize the length-k dot products and updates;
# NaN/inf semantics are kept (no "nnan"/"ninf"), so a bad value still shows instead of being
# optimised away.
_FAST = {"reassoc", "contract"}


# Rows go through the k×k Gram terms four at a time: each row of G (and of the Gram
# accumulator) is then loaded once per four rows instead of once per row (1.4× at k = 32,
# 1.7× at k = 64, close to BLAS).
_R = 4

# Rows per chunk of the Gram product (a multiple of _R): 64 rows of k = 64 floats fit in L1.
_CHUNK = 64


@njit(cache=True, nogil=True, inline="always", fastmath=_FAST)
def _mu_rows(F, i0, c, numer, G, lam, eps, buf, lin):
    """MU step of rows ``i0 .. i0+c-1`` (c ≤ 4) with ``lin = F[rows] @ G`` computed here (G
    symmetric: a Gram matrix); the new rows are left in ``buf`` (4, k), zero-padded past c, and
    written back to F.

    ``F[i] <- F[i] * (numer[i] + 3 lam F[i]^2) / (F[i] @ G + 2 lam F[i]^3 + lam F[i] + eps)``;
    ``lam = 0`` is the plain Lee-Seung step.
    """
    k = F.shape[1]
    for t in range(_R):
        for l in range(k):
            buf[t, l] = F[i0 + t, l] if t < c else 0.0
    # G is a Gram matrix (symmetric): lin[t, l] = buf[t] . G[l], four contiguous dot products
    # sharing each row of G, accumulated in registers (1.5-1.8× over updating lin in memory).
    zero = F.dtype.type(0)
    for l in range(k):
        s0 = s1 = s2 = s3 = zero
        for q in range(k):
            g = G[l, q]
            s0 += buf[0, q] * g
            s1 += buf[1, q] * g
            s2 += buf[2, q] * g
            s3 += buf[3, q] * g
        lin[0, l], lin[1, l], lin[2, l], lin[3, l] = s0, s1, s2, s3
    for t in range(c):
        i = i0 + t
        if lam == 0.0:
            for l in range(k):
                buf[t, l] = buf[t, l] * numer[i, l] / (lin[t, l] + eps)
        else:
            for l in range(k):
                f = buf[t, l]
                buf[t, l] = f * (numer[i, l] + 3.0 * lam * f * f) / (
                    lin[t, l] + 2.0 * lam * f * f * f + lam * f + eps
                )
        for l in range(k):
            F[i, l] = buf[t, l]


@njit(cache=True, nogil=True, inline="always", fastmath=_FAST)
def _gram_flush(gram, Bt, cnt):
    """``gram += Bt[:, :cnt] Bt[:, :cnt]ᵀ`` on and above the diagonal (``gram`` float64).

    Dot products along the chunk's rows, four entries of a row of the Gram at a time sharing
    ``Bt[q]``: each sum is long (up to ``_CHUNK``) and only half the matrix is formed, 1.4-1.8×
    faster than adding each row's outer product.
    """
    k = Bt.shape[0]
    zero = Bt.dtype.type(0)
    for q in range(k):
        l = q
        while l + 3 < k:
            s0 = s1 = s2 = s3 = zero
            for c in range(cnt):
                b = Bt[q, c]
                s0 += b * Bt[l, c]
                s1 += b * Bt[l + 1, c]
                s2 += b * Bt[l + 2, c]
                s3 += b * Bt[l + 3, c]
            gram[q, l] += s0
            gram[q, l + 1] += s1
            gram[q, l + 2] += s2
            gram[q, l + 3] += s3
            l += 4
        while l < k:
            s0 = zero
            for c in range(cnt):
                s0 += Bt[q, c] * Bt[l, c]
            gram[q, l] += s0
            l += 1


@njit(cache=True, nogil=True, inline="always", fastmath=_FAST)
def _gram_push(gram, Bt, cnt, buf, c, last):
    """Append the c new rows in ``buf`` to the transposed chunk ``Bt`` (k, _CHUNK) holding
    ``cnt`` rows; flush the chunk into ``gram`` when it is full or ``last``. Returns the new
    count. After the last push, :func:`_gram_mirror` completes ``gram``.
    """
    for t in range(c):
        for q in range(Bt.shape[0]):
            Bt[q, cnt + t] = buf[t, q]
    cnt += c
    if last or cnt + _R > _CHUNK:
        _gram_flush(gram, Bt, cnt)
        cnt = 0
    return cnt


@njit(cache=True, nogil=True, inline="always")
def _gram_mirror(gram):
    """Copy the upper triangle of ``gram`` to the lower one."""
    for q in range(gram.shape[0]):
        for l in range(q):
            gram[q, l] = gram[l, q]


@njit(parallel=True, cache=True, nogil=True, fastmath=_FAST)
def update_rows(F, numer, G, lam, eps, gram_blocks):
    """In-place MU step of every row of F (r, k) against the symmetric (k, k) G; ``gram_blocks``
    (b, k, k) receives FᵀF by block.

    Row i belongs to block ``i * b // r``.
    """
    r, k = F.shape
    nb = gram_blocks.shape[0]
    for b in prange(nb):
        buf = np.empty((_R, k), dtype=F.dtype)
        lin = np.empty((_R, k), dtype=F.dtype)
        Bt = np.empty((k, _CHUNK), dtype=F.dtype)
        gram = gram_blocks[b]
        gram[:, :] = 0.0
        lo, hi = b * r // nb, (b + 1) * r // nb
        cnt = 0
        for i0 in range(lo, hi, _R):
            c = min(_R, hi - i0)
            _mu_rows(F, i0, c, numer, G, lam, eps, buf, lin)
            cnt = _gram_push(gram, Bt, cnt, buf, c, i0 + c >= hi)
        _gram_mirror(gram)


@njit(parallel=True, cache=True, nogil=True, fastmath=_FAST)
def update_rows_scatter(indptr, indices, y, F, numer, G, lam, eps, gram_blocks, scatter_blocks):
    """:func:`update_rows` for W, plus ``scatter_blocks[b] = (Y_b)ᵀ W_b`` with the new rows.

    ``scatter_blocks`` (b, m, k): the block sums of Wᵀ Y (stored transposed, as (m, k)).
    """
    r, k = F.shape
    nb = gram_blocks.shape[0]
    pf = worth_prefetching(scatter_blocks[0])
    for b in prange(nb):
        buf = np.empty((_R, k), dtype=F.dtype)
        lin = np.empty((_R, k), dtype=F.dtype)
        Bt = np.empty((k, _CHUNK), dtype=F.dtype)
        gram = gram_blocks[b]
        gram[:, :] = 0.0
        out = scatter_blocks[b]
        out[:, :] = 0.0
        lo, hi = b * r // nb, (b + 1) * r // nb
        cnt = 0
        for i0 in range(lo, hi, _R):
            c = min(_R, hi - i0)
            _mu_rows(F, i0, c, numer, G, lam, eps, buf, lin)
            cnt = _gram_push(gram, Bt, cnt, buf, c, i0 + c >= hi)
            for t in range(c):
                # Four nonzeros (distinct columns of one row) at a time: four independent
                # read-modify-write streams into the partial sums (1.3× over one).
                p, end = indptr[i0 + t], indptr[i0 + t + 1]
                while p + 3 < end:
                    if pf:
                        prefetch_ahead(out, indices, p, 4, True)
                    j0, j1, j2, j3 = indices[p], indices[p + 1], indices[p + 2], indices[p + 3]
                    v0, v1, v2, v3 = y[p], y[p + 1], y[p + 2], y[p + 3]
                    for l in range(k):
                        w = buf[t, l]
                        out[j0, l] += v0 * w
                        out[j1, l] += v1 * w
                        out[j2, l] += v2 * w
                        out[j3, l] += v3 * w
                    p += 4
                while p < end:
                    if pf:
                        prefetch_ahead(out, indices, p, 1, True)
                    j, v = indices[p], y[p]
                    for l in range(k):
                        out[j, l] += v * buf[t, l]
                    p += 1
        _gram_mirror(gram)


@njit(parallel=True, cache=True, nogil=True, fastmath=_FAST)
def project_spmm(indptr, indices, W, Ht, lower, upper, project, y, YHt, sq):
    """Fused Y-projection (SDDMM) and ``Y @ Ht`` over the nonzeros, row by row.

    For every stored nonzero p = (i, j): ``s = W[i] . Ht[j]``; if ``project``, ``y[p]`` becomes
    ``min(upper, max(lower, s))`` (otherwise ``y`` is only read). Then ``YHt[i] = sum_p y[p] Ht[j]``
    and ``sq[i] = (sum_p (y[p] - s)^2, sum_p s^2)``, the two support terms of the objective.
    """
    n, k = W.shape
    pf = worth_prefetching(Ht)
    # Sums run in the factors' own type: float32 inputs get float32 arithmetic (twice the
    # vector width); the objective terms stay float64.
    zero = W.dtype.type(0)
    lo, up = W.dtype.type(lower), W.dtype.type(upper)
    for i in prange(n):
        for l in range(k):
            YHt[i, l] = 0.0
        res = 0.0
        s2 = 0.0
        p, hi = indptr[i], indptr[i + 1]
        # Four nonzeros at a time: four independent dot products hide each one's reduction
        # latency, and Y Hᵀ's row is read and written once per four (1.3-1.7× over one).
        while p + 3 < hi:
            if pf:
                prefetch_ahead(Ht, indices, p, 4, False)
            j0, j1, j2, j3 = indices[p], indices[p + 1], indices[p + 2], indices[p + 3]
            s0 = s1 = s2_ = s3 = zero
            for l in range(k):
                w = W[i, l]
                s0 += w * Ht[j0, l]
                s1 += w * Ht[j1, l]
                s2_ += w * Ht[j2, l]
                s3 += w * Ht[j3, l]
            if project:
                v0, v1 = min(up, max(lo, s0)), min(up, max(lo, s1))
                v2, v3 = min(up, max(lo, s2_)), min(up, max(lo, s3))
                y[p], y[p + 1], y[p + 2], y[p + 3] = v0, v1, v2, v3
            else:
                v0, v1, v2, v3 = y[p], y[p + 1], y[p + 2], y[p + 3]
            res += (v0 - s0) ** 2 + (v1 - s1) ** 2 + (v2 - s2_) ** 2 + (v3 - s3) ** 2
            s2 += s0 * s0 + s1 * s1 + s2_ * s2_ + s3 * s3
            for l in range(k):
                YHt[i, l] += v0 * Ht[j0, l] + v1 * Ht[j1, l] + v2 * Ht[j2, l] + v3 * Ht[j3, l]
            p += 4
        while p < hi:
            if pf:
                prefetch_ahead(Ht, indices, p, 1, False)
            j = indices[p]
            s = zero
            for l in range(k):
                s += W[i, l] * Ht[j, l]
            if project:
                v = min(up, max(lo, s))
                y[p] = v
            else:
                v = y[p]
            res += (v - s) * (v - s)
            s2 += s * s
            for l in range(k):
                YHt[i, l] += v * Ht[j, l]
            p += 1
        sq[i, 0] = res
        sq[i, 1] = s2
