"""Kernels of ELBMF's iteration (iPALM with the elastic Boolean proximal operator) on the
support of X.

A half-step updates one factor F (rows of length k) against the other, given as ``Ot`` (its
transpose, rows of length k): ``F ← prox(F̂ − η ∇)`` at the extrapolated point ``F̂``, where
``∇ = F̂ G + P``, ``G = OᵀO`` (k×k), and ``P`` is the part of the gradient that lives on the
support of X and on the listed cells (:func:`support_gradient`). :func:`prox_step` applies the
Gram term and the proximal operator row by row. :func:`observed_sums` gives the sums over the
ones and the listed cells that the loss on the observed cells needs. Rows are independent:
every kernel writes disjoint rows, and its sums go to fixed parts of the rows added in order, so
the serial and the parallel variant give the same bits on any number of threads.

Plain IEEE arithmetic (no ``fastmath``): the iterates of a float32 fit are then the same bits
on any x86-64 CPU.
"""

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .mu import row_parts
from .variants import kernel

#: Parts of about equal work that :func:`observed_sums` splits the rows into; its sums are
#: added part by part, in order.
PARTS = 64


class Prox(NamedTuple):
    """A half-step's scalars: step size ``eta``, the l1 weight ``l1`` and the l2 weight
    ``l2`` (already scaled by the regularization rate), and whether the Gram term
    ``F̂ G`` enters the gradient (``gram``: False when only the observed cells are listed)."""

    eta: float
    l1: float
    l2: float
    gram: bool


@njit(cache=True, nogil=True, inline="always")
def prox_elastic(x, kappa, lam):
    """The elastic Boolean proximal operator of the authors' code (``proxelbmfnn``), for one
    entry: with c the nearer of 0 and 1 to ``x`` (ties at ½ go to 0), ``x`` moves by ``kappa``
    towards c (the l1 part), then towards c by the factor ``1 / (1 + lam)`` (the l2 part), and
    is floored at 0."""
    if x <= 0.5:
        y = (x - kappa * np.sign(x)) / (1.0 + lam)
    else:
        y = (x - kappa * np.sign(x - 1.0) + lam) / (1.0 + lam)
    return max(y, 0.0)


@kernel()
def support_gradient(X, cells, F, Ot, listed, out):
    """``out`` (r, k) = the part of ``∇_F ½‖X − F Oᵀ‖²`` (over the observed cells) that lives on
    the ones of X and on the listed ``cells``:

    - ``listed`` False (every cell observed but the ``cells``, None for none): ``out[i] =
      −Σ_{j ∈ X_i} Ot[j] − Σ_{j ∈ cells_i} s_ij Ot[j]`` with ``s_ij = F[i]·Ot[j]``; the full
      gradient is ``F Oᵀ O + out``.
    - ``listed`` True (the ``cells`` are the observed zeros, every other non-one is unknown):
      ``out[i] = Σ_{j ∈ X_i} (s_ij − 1) Ot[j] + Σ_{j ∈ cells_i} s_ij Ot[j]``, the gradient
      itself.

    ``X`` and ``cells`` are :class:`~.sparse.Sparse` groups of the same rows."""
    indptr, indices = X
    r, k = out.shape
    nb = min(r, PARTS)
    zero = F.dtype.type(0)
    for b in prange(nb):
        for i in range(b * r // nb, (b + 1) * r // nb):
            for l in range(k):
                out[i, l] = zero
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                if listed:
                    s = zero
                    for l in range(k):
                        s += F[i, l] * Ot[j, l]
                    c = s - F.dtype.type(1)
                    for l in range(k):
                        out[i, l] += c * Ot[j, l]
                else:
                    for l in range(k):
                        out[i, l] -= Ot[j, l]
            if cells is not None:  # (None: no listed cells, compiled out)
                cindptr, cindices = cells
                for c in range(cindptr[i], cindptr[i + 1]):
                    j = cindices[c]
                    s = zero
                    for l in range(k):
                        s += F[i, l] * Ot[j, l]
                    if not listed:
                        s = -s
                    for l in range(k):
                        out[i, l] += s * Ot[j, l]


@kernel()
def prox_step(F, P, G, prox):
    """In place, row by row: ``F[i] ← prox(F[i] − η (F[i] G + P[i]))`` (:func:`prox_elastic`
    with ``κ = η·l1``, ``λ = η·l2``; without the ``F[i] G`` term when ``prox.gram`` is False).
    ``G`` is (k, k) float64; the gradient is formed in float64 and the result stored in F's
    dtype."""
    eta, l1, l2, gram = prox
    kappa, lam = eta * l1, eta * l2
    r, k = F.shape
    nb = min(r, PARTS)
    for b in prange(nb):
        row = np.empty(k, dtype=np.float64)
        for i in range(b * r // nb, (b + 1) * r // nb):
            for l in range(k):
                row[l] = F[i, l]
            for l in range(k):
                g = np.float64(P[i, l])
                if gram:
                    for q in range(k):
                        g += row[q] * G[q, l]
                F[i, l] = prox_elastic(row[l] - eta * g, kappa, lam)


@kernel()
def observed_sums(X, cells, F, Ot, sums):
    """The sums over the ones of X and the listed ``cells`` (None for none) that the loss on the
    observed cells needs, ``s_ij = F[i]·Ot[j]``: ``sums[part] = (Σ_X s, Σ_X s², Σ_cells s²)``
    in float64, over :data:`PARTS` parts of the rows of about equal ones
    (:func:`~.mu.row_parts`; rows past the parts zero), added up by the caller in order."""
    indptr, indices = X
    k = F.shape[1]
    # Parts of equal ones (listed cells, few with ``missing=``, do not move the bounds).
    bounds = row_parts(indptr, None, PARTS)
    parts = len(bounds) - 1
    sums[parts:, :] = 0.0
    for part in prange(parts):
        s1 = 0.0
        s2 = 0.0
        c2 = 0.0
        for i in range(bounds[part], bounds[part + 1]):
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                s = 0.0
                for l in range(k):
                    s += np.float64(F[i, l]) * Ot[j, l]
                s1 += s
                s2 += s * s
            if cells is not None:  # (None: no listed cells, compiled out)
                cindptr, cindices = cells
                for c in range(cindptr[i], cindptr[i + 1]):
                    j = cindices[c]
                    s = 0.0
                    for l in range(k):
                        s += np.float64(F[i, l]) * Ot[j, l]
                    c2 += s * s
        sums[part, 0] = s1
        sums[part, 1] = s2
        sums[part, 2] = c2
