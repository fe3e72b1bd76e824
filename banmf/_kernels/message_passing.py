"""Kernels of max-sum belief propagation for Boolean factorization (Ravanbakhsh, Póczos,
Greiner, ICML 2016), in log-ratio form, over the observed cells ("edges") of X.

The factor graph has a variable ``W[i, l]`` per row and factor, ``H[l, j]`` per factor and
column, an auxiliary ``Z[i, l, j] = W[i, l] ∧ H[l, j]`` per observed cell and factor, one
factor ``p(X[i, j] | OR_l Z[i, l, j])`` per observed cell (a noisy channel) and Bernoulli priors
on W and H. Every message is a log-ratio ``log m(1) − log m(0)``; per observed cell ``p`` (row
i, column j) and factor l the state is two of them, damped from one iteration to the next:

- ``in_x[p, l]``: from the AND factor of ``Z[i, l, j]`` to ``W[i, l]`` (φ in the paper),
- ``in_y[p, l]``: from the AND factor to ``H[l, j]`` (ψ),

and the marginals ``marg_x[i, l] = cx + Σ_j in_x`` (over row i's observed cells) and
``marg_y[j, l] = cy + Σ_i in_y`` (over column j's), with ``cx``, ``cy`` the priors' log-odds.
One iteration (the authors' reference code, mravanba/BooleanFactorization, ``update_min_sum``):

    φ̂ = marg_x[i] − in_x[p]           ψ̂ = marg_y[j] − in_y[p]        (variable → AND factor)
    γ_l = min(φ̂_l + ψ̂_l, φ̂_l, ψ̂_l)                                   (AND factor → Z)
    γ̂_l = min(max(0, −max_{l'≠l} γ_l'), c + Σ_{l'≠l} max(0, γ_l'))     (channel factor → Z)
    φ_new = max(γ̂ + ψ̂, 0) − max(ψ̂, 0)   ψ_new = max(γ̂ + φ̂, 0) − max(φ̂, 0)   (AND → W, H)
    in ← damping · in + (1 − damping) · new

with ``c = log p(1|1)/p(1|0)`` on an observed one and ``log p(0|1)/p(0|0)`` on an observed zero.
γ̂ needs only the largest and second largest γ and the sum of the positive ones, so every
message of a cell costs O(k), and an iteration O(k · observed cells). The first iteration reads
the outgoing messages φ̂, ψ̂ from ``in_x``/``in_y`` (the random start) and treats the previous
incoming messages as 0, as the reference code does.

Each kernel is serial or parallel over blocks of rows (columns); a row's (column's) messages
and sums are computed in the same order either way, so the results are the same to the bit on
any number of threads.
"""

from typing import NamedTuple

import numpy as np
from numba import prange

from .variants import kernel


class Cells(NamedTuple):
    """The observed cells of X (the edges of the factor graph).

    Attributes
    ----------
    indptr, indices : integer arrays (n + 1,) and (cells,)
        Their CSR form.
    ones : bool array (cells,)
        X's value at each.
    """

    indptr: np.ndarray
    indices: np.ndarray
    ones: np.ndarray


class Messages(NamedTuple):
    """The incoming messages of every observed cell and factor.

    Attributes
    ----------
    in_x, in_y : float64 arrays (cells, k)
        To ``W[i, l]`` and to ``H[l, j]`` (on the first iteration they hold the random
        outgoing messages).
    """

    in_x: np.ndarray
    in_y: np.ndarray


class Marginals(NamedTuple):
    """The marginals' log-ratios.

    Attributes
    ----------
    x : float64 array (n, k)
        W's.
    y : float64 array (m, k)
        H's, transposed.
    """

    x: np.ndarray
    y: np.ndarray


class Channel(NamedTuple):
    """The channel's and W's prior log-ratios.

    Attributes
    ----------
    co1, co0 : float
        The channel's log-ratio on an observed one, on an observed zero.
    cx : float
        W's prior log-odds.
    """

    co1: float
    co0: float
    cx: float


@kernel()
def mp_sweep(cells, messages, marginals, channel, damping, first, n_blocks, row_diff):
    """One damped update of every cell's messages, and the new ``marg_x``.

    Parameters
    ----------
    cells : Cells
        The observed cells of X.
    messages : Messages
        ``in_x``, ``in_y``, updated in place.
    marginals : Marginals
        ``x``: read for the outgoing messages, then set to the new marginals; ``y``: read only
        (:func:`mp_column_marginals` sets it afterwards).
    channel : Channel
        The channel's log-ratios and W's prior.
    damping : float
        Share of the previous message kept.
    first : bool
        The first iteration.
    n_blocks : int
        Blocks of rows (one per parallel task).
    row_diff : float64 array (n,)
        Output: the largest |new − previous| message of each row, before damping (the
        convergence test).
    """
    indptr, indices, ones = cells
    in_x, in_y = messages
    marg_x, marg_y = marginals
    co1, co0, cx = channel
    n = indptr.shape[0] - 1
    k = in_x.shape[1]
    fresh = 1.0 - damping
    for b in prange(n_blocks):
        lo = b * n // n_blocks
        hi = (b + 1) * n // n_blocks
        acc = np.empty(k, dtype=np.float64)
        for i in range(lo, hi):
            acc[:] = 0.0
            diff = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                # Pass 1: the sum of the positive γ (plus the channel term), and the largest
                # and second largest γ with the index of the largest (the first, on ties).
                total = co1 if ones[p] else co0
                top1 = -np.inf
                top2 = -np.inf
                arg = -1
                for l in range(k):
                    if first:
                        ox = in_x[p, l]
                        oy = in_y[p, l]
                    else:
                        ox = marg_x[i, l] - in_x[p, l]
                        oy = marg_y[j, l] - in_y[p, l]
                    g = min(ox + oy, min(ox, oy))
                    if g > 0.0:
                        total += g
                    if g > top1:
                        top2 = top1
                        top1 = g
                        arg = l
                    elif g > top2:
                        top2 = g
                # Pass 2: γ̂ and the new messages to W and H (φ̂, ψ̂ and γ recomputed: cheaper
                # than storing them per factor).
                for l in range(k):
                    if first:
                        ox = in_x[p, l]
                        oy = in_y[p, l]
                        old_x = 0.0
                        old_y = 0.0
                    else:
                        old_x = in_x[p, l]
                        old_y = in_y[p, l]
                        ox = marg_x[i, l] - old_x
                        oy = marg_y[j, l] - old_y
                    g = min(ox + oy, min(ox, oy))
                    other = top2 if l == arg else top1
                    off = max(-other, 0.0)  # Z off: another factor (the best) must be on
                    on = total - max(g, 0.0)  # Z on: the channel says one, the rest free
                    gh = min(off, on)
                    nx = max(gh + oy, 0.0) - max(oy, 0.0)
                    ny = max(gh + ox, 0.0) - max(ox, 0.0)
                    diff = max(diff, abs(nx - old_x), abs(ny - old_y))
                    vx = damping * old_x + fresh * nx
                    in_x[p, l] = vx
                    in_y[p, l] = damping * old_y + fresh * ny
                    acc[l] += vx
            # Row i's cells are done, and no other row reads marg_x[i]: its new marginal now.
            for l in range(k):
                marg_x[i, l] = cx + acc[l]
            row_diff[i] = diff


@kernel()
def mp_column_marginals(col_indptr, col_cells, in_y, cy, n_blocks, marg_y):
    """``marg_y[j] = cy + Σ in_y[p]`` over column j's observed cells ``p = col_cells[q]``,
    ``q`` in ``col_indptr[j]:col_indptr[j + 1]`` (the CSC order of the CSR cells)."""
    m = col_indptr.shape[0] - 1
    k = in_y.shape[1]
    for b in prange(n_blocks):
        lo = b * m // n_blocks
        hi = (b + 1) * m // n_blocks
        acc = np.empty(k, dtype=np.float64)
        for j in range(lo, hi):
            acc[:] = 0.0
            for q in range(col_indptr[j], col_indptr[j + 1]):
                p = col_cells[q]
                for l in range(k):
                    acc[l] += in_y[p, l]
            for l in range(k):
                marg_y[j, l] = cy + acc[l]


@kernel()
def mp_decoded_errors(cells, marginals, n_blocks, row_err):
    """Errors of the decoded factors ``W = marginals.x > 0``, ``H = marginals.yᵀ > 0`` on each
    row's observed ``cells`` (:class:`Cells`), into ``row_err`` (n,), in ``n_blocks`` blocks
    of rows."""
    indptr, indices, ones = cells
    marg_x, marg_y = marginals
    n = indptr.shape[0] - 1
    k = marg_x.shape[1]
    for b in prange(n_blocks):
        lo = b * n // n_blocks
        hi = (b + 1) * n // n_blocks
        for i in range(lo, hi):
            err = 0
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                covered = False
                for l in range(k):
                    if marg_x[i, l] > 0.0 and marg_y[j, l] > 0.0:
                        covered = True
                        break
                if covered != ones[p]:
                    err += 1
            row_err[i] = err
