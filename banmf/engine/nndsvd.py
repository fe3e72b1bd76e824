"""NNDSVD starting factors (Boutsidis & Gallopoulos 2008): the rank-one part of each singular
pair that a factor keeps (:func:`nonnegative_part`, for every backend), and the one-machine
factors from a sparse truncated SVD (:func:`nndsvda`)."""

from __future__ import annotations

import numpy as np
from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, svds


def nonnegative_part(na_p: float, na_n: float, y: np.ndarray, s: float):
    """The factor NNDSVD makes of one singular triplet (x, y, s), from the norms of x's
    positive and negative parts (``na_p``, ``na_n``: summed over row blocks where x lives) and
    y whole: ``(positive, b, na, nb, scale)`` — whether x's positive part is kept, y's part
    ``b`` kept with it, the two parts' norms and the scale, so that the factor is
    ``scale * x_part / na`` and ``scale * b / nb`` — or None when both products are 0.

    The pair of parts with the larger product of norms is kept: the nonnegative rank-one term
    closest to s·x·yᵀ (the leading pair, nonnegative up to sign, is used whole)."""
    yp, yn = np.maximum(y, 0), np.maximum(-y, 0)
    nb_p, nb_n = np.linalg.norm(yp), np.linalg.norm(yn)
    positive, negative = na_p * nb_p, na_n * nb_n
    if positive >= negative:
        side, b, na, nb, sigma = True, yp, na_p, nb_p, positive
    else:
        side, b, na, nb, sigma = False, yn, na_n, nb_n, negative
    if not sigma > 0:
        return None
    return side, b, na, nb, np.sqrt(max(s, 0.0) * sigma)


def nndsvda(X, k: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Nonnegative starting factors W (n, k), Ht (m, k) from the k leading singular triplets
    of the support mask X, with zeros (to rounding) set to the mean of X ("NNDSVDa"), or None when the SVD
    cannot be computed (fewer than two rows or columns, no nonzeros, ARPACK fails).

    Each singular pair is one factor by :func:`nonnegative_part`. Multiplicative updates never move an exact
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
        x = U[:, j]
        xp, xn = np.maximum(x, 0), np.maximum(-x, 0)
        part = nonnegative_part(np.linalg.norm(xp), np.linalg.norm(xn), Vt[j], S[j])
        if part is not None:
            positive, b, na, nb, scale = part
            W[:, l] = scale * (xp if positive else xn) / na
            Ht[:, l] = scale * b / nb
    # Entries at rounding level count as zero: the SVD leaves them where a part is exactly 0.
    fill = X.nnz / (n * m)
    W[W <= 1e-12 * max(W.max(), 1.0)] = fill
    Ht[Ht <= 1e-12 * max(Ht.max(), 1.0)] = fill
    return W, Ht
