"""Description lengths of Boolean factorizations (MDL), below both :mod:`banmf.model_selection`
(which chooses k by them) and the estimators' ``score`` (which uses them per cell)."""

from __future__ import annotations

import numpy as np

from ..data.masks import hits_and_cover


def log2_binomial(a, b) -> float:
    """log₂ of the binomial coefficient C(a, b) (0 <= b <= a; arrays elementwise)."""
    from scipy.special import gammaln

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return (gammaln(a + 1) - gammaln(b + 1) - gammaln(a - b + 1)) / np.log(2)


def universal_bits(z: int) -> float:
    """Rissanen's universal code length for an integer z >= 1, in bits: log₂ c₀ plus the sum
    of the positive terms of log₂ z, log₂ log₂ z, ... (c₀ ≈ 2.865064)."""
    bits = np.log2(2.865064)
    x = float(z)
    while x > 1:
        x = np.log2(x)
        if x > 0:
            bits += x
    return float(bits)


def description_bits(data, Wb, Hb) -> tuple[float, float]:
    """(model bits, data bits) of Boolean factors Wb (n, k), Hb (k, m) of ``data`` (a
    :class:`banmf.io.Dataset` of shape (n, m)), trusted inputs: see
    :func:`banmf.model_selection.description_length` for the code."""
    X = data.X
    n, m = X.shape
    k = Wb.shape[1]
    hits, covered = hits_and_cover(X, Wb, Hb, data.unknown)
    cells = data.n_observed
    missed, extra = X.nnz - hits, covered - hits
    w_ones, h_ones = Wb.sum(axis=0), Hb.sum(axis=1)
    model = universal_bits(k + 1) + float(
        np.sum(np.log2(n + 1) + log2_binomial(n, w_ones))
        + np.sum(np.log2(m + 1) + log2_binomial(m, h_ones))
    )
    uncovered = cells - covered
    data = float(
        np.log2(uncovered + 1)
        + log2_binomial(uncovered, missed)
        + np.log2(covered + 1)
        + log2_binomial(covered, extra)
    )
    return model, data
