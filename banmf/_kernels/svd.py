"""The sparse products of the randomized SVD (:func:`banmf.engine.nndsvd.randomized_svd`): a 0/1
support mask times a dense block of a few tens of columns.

Both sides of the SVD use the one kernel, :func:`mask_times`: ``X B`` on X's rows and ``Xᵀ B``
on the rows of X's transpose (the CSR of Xᵀ). Each output row is one row's sum in its stored
order, so the result is the same on any number of threads, unlike a scatter into per-thread
partials of Xᵀ B.
"""

import numpy as np
from numba import prange

from .mu import row_parts
from .prefetch import prefetch_ahead, worth_prefetching
from .variants import kernel

# Parts of equal work the rows are split into (as the Y pass: a thread with the heavy rows of a
# power-law matrix would otherwise finish last).
_PARTS = 64


@kernel()
def mask_times(indptr, indices, B, out):
    """``out = X B`` for the 0/1 matrix X in CSR (``indptr``, ``indices``; shape (n, m)), B
    (m, l) and ``out`` (n, l), both C-ordered, each float64 or float32: row i of ``out`` is
    the sum of B's rows at row i's nonzeros, added in float64 in their stored order (and
    rounded once where ``out`` is float32). Plain IEEE arithmetic (no ``fastmath``): the
    columns are independent lanes, so the loop vectorizes across them without reassociating a
    sum.

    Each nonzero's row of B is asked for a few nonzeros ahead (:func:`prefetch_ahead`) where B
    is beyond L2: without it every gathered row is a miss waited for in turn. At 10⁸ nonzeros
    (10⁷×10⁶, power-law, l = 20, float32 B, 2 threads) X B took 0.92-1.01 s against 2.27 s,
    Xᵀ B 1.26-1.29 s against 2.26 s."""
    l = B.shape[1]
    pf = worth_prefetching(B)
    bounds = row_parts(indptr, None, _PARTS)
    for part in prange(len(bounds) - 1):
        acc = np.empty(l, dtype=np.float64)
        for i in range(bounds[part], bounds[part + 1]):
            acc[:] = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                if pf:
                    prefetch_ahead(B, indices, p, 1, False, l)
                j = indices[np.uintp(p)]
                for c in range(l):
                    acc[c] += B[j, c]
            for c in range(l):
                out[i, c] = acc[c]


@kernel()
def rows_times(Y, M, out):
    """``out = Y M`` for Y (n, l) and a small M (l, w): each row of ``out`` from its row of Y
    alone, so serial and parallel agree to the bit. Beside numpy's BLAS: its idle threads spin
    after a call and slowed the parallel passes that followed 20× on a busy machine."""
    n, l = Y.shape
    w = M.shape[1]
    nb = min(n, 64)
    for b in prange(nb):
        acc = np.empty(w, dtype=out.dtype)
        for i in range(b * n // nb, (b + 1) * n // nb):
            acc[:] = 0.0
            for q in range(l):
                y = Y[i, q]
                for c in range(w):
                    acc[c] += y * M[q, c]
            for c in range(w):
                out[i, c] = acc[c]


@kernel()
def signed_parts(U, j, xp, xn):
    """``xp = max(U[:, j], 0)`` and ``xn = max(-U[:, j], 0)`` as numpy's ``np.maximum``
    gives them (NaN kept; a zero may come out with either sign there, here always ``+0.0``,
    which no later step tells apart): the two parts of a singular vector that NNDSVD chooses
    between, into contiguous arrays (numpy's norms read them)."""
    for i in prange(U.shape[0]):
        v = U[i, j]
        w = -v
        xp[i] = v if v > 0.0 or np.isnan(v) else 0.0
        xn[i] = w if w > 0.0 or np.isnan(w) else 0.0


@kernel()
def scaled_column(part, scale, norm, F, l):
    """``F[:, l] = scale * part / norm``, rounded as numpy rounds that expression (the
    product first): an NNDSVD factor from its vector's part."""
    for i in prange(part.shape[0]):
        F[i, l] = scale * part[i] / norm


@kernel()
def fill_at_most(F, cut, fill):
    """``F[F <= cut] = fill``: NNDSVD's zeros (to rounding) set to X's mean, where
    multiplicative updates could not move them."""
    for i in prange(F.shape[0]):
        for l in range(F.shape[1]):
            if F[i, l] <= cut:
                F[i, l] = fill
