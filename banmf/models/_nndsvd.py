"""NNDSVD starting factors (Boutsidis & Gallopoulos 2008) from a sparse truncated SVD."""

from __future__ import annotations

import numpy as np
from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, svds


def nndsvda(X, k: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Nonnegative starting factors W (n, k), Ht (m, k) from the k leading singular triplets
    of the support mask X, with zeros (to rounding) set to the mean of X ("NNDSVDa"), or None when the SVD
    cannot be computed (fewer than two rows or columns, no nonzeros, ARPACK fails).

    Each singular pair (u, v) is split into its positive and negative parts; the pair of parts
    with the larger product of norms, scaled by the square root of σ times that product, is
    one factor (the leading pair, nonnegative up to sign, is used whole). It is the
    nonnegative rank-one term closest to σ·u·vᵀ. Multiplicative updates never move an exact
    zero, hence the fill. Factors past ``min(n, m) - 1`` (the most ARPACK computes) are the
    fill alone. The SVD works on X as a sparse operator: O(nnz·k) per ARPACK step; its start
    vector is fixed, so the factors depend on X and k only.
    """
    n, m = X.shape
    r = min(k, min(n, m) - 1)
    if r < 1 or X.nnz == 0:
        return None
    try:
        U, S, Vt = svds(
            X.astype(np.float64),
            k=r,
            v0=np.full(min(n, m), 1.0 / np.sqrt(min(n, m))),
            solver="arpack",
        )
    except (ArpackError, ArpackNoConvergence):
        return None
    order = np.argsort(-S, kind="stable")
    W = np.zeros((n, k))
    Ht = np.zeros((m, k))
    for l, j in enumerate(order):
        x, y = U[:, j], Vt[j]
        xp, xn, yp, yn = np.maximum(x, 0), np.maximum(-x, 0), np.maximum(y, 0), np.maximum(-y, 0)
        norms = [np.linalg.norm(a) for a in (xp, yp, xn, yn)]
        positive, negative = norms[0] * norms[1], norms[2] * norms[3]
        if positive >= negative:
            a, b, na, nb, sigma = xp, yp, norms[0], norms[1], positive
        else:
            a, b, na, nb, sigma = xn, yn, norms[2], norms[3], negative
        if sigma > 0:
            scale = np.sqrt(max(S[j], 0.0) * sigma)
            W[:, l] = scale * a / na
            Ht[:, l] = scale * b / nb
    # Entries at rounding level count as zero: the SVD leaves them where a part is exactly 0.
    fill = X.nnz / (n * m)
    W[W <= 1e-12 * max(W.max(), 1.0)] = fill
    Ht[Ht <= 1e-12 * max(Ht.max(), 1.0)] = fill
    return W, Ht
