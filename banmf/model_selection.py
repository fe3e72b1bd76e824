"""Held-out evaluation: hide observed cells, fit the rest, score the guesses.

The building blocks for choosing k (or any parameter) by how well a factorization predicts
cells it did not see: :func:`mask_entries` draws the cells to hide, a fit takes them as
``missing=``, and :func:`held_out_scores` compares its prediction with the hidden truth.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp

from ._boolean import cell_keys, in_sorted, support_mask_from_keys
from ._memory import check_memory
from ._validation import check_binary_matrix, check_random_state, check_unknown
from .booleanize import predict_cells

__all__ = ["held_out_scores", "mask_entries"]

# Random cells are drawn in batches of this many times the number still needed (zeros are
# drawn by rejection: a cell drawn at random is a zero with the zeros' share of the cells).
_OVERDRAW = 2


def mask_entries(
    X,
    fraction: float,
    *,
    random_state=None,
    missing=None,
    observed=None,
    n_zeros: int | None = None,
) -> sp.csr_array:
    """Choose observed cells of X to hide, as many ones as zeros in proportion.

    ``round(fraction · ones)`` of X's observed ones and ``round(fraction · zeros)`` of its
    observed zeros (or ``n_zeros`` of them), drawn uniformly without replacement. Nothing dense
    is formed: on large sparse data the zeros are drawn by rejection.

    Parameters
    ----------
    X : array-like or sparse of shape (n, m)
        0/1 data.
    fraction : float in [0, 1)
        Share of the observed ones (and zeros) to hide.
    random_state : None, int or Generator
    missing : array-like or sparse of shape (n, m), optional
        Cells already unknown: never chosen.
    observed : array-like or sparse of shape (n, m), optional
        Or the cells observed (all others unknown): only these are chosen.
    n_zeros : int, optional
        Hide this many zeros instead of ``fraction`` of them: on very sparse data a fraction of
        all zeros is n·m cells' worth, far more than the ones.

    Returns
    -------
    scipy.sparse.csr_array of shape (n, m), bool
        The hidden cells; fit with ``missing=`` set to them (joined with ``missing``, if any:
        ``hidden + missing``; or with ``observed=`` less them: ``observed > hidden``) and score
        with :func:`held_out_scores`.

    Examples
    --------
    >>> import numpy as np
    >>> from banmf import factorize, make_boolean
    >>> X, _, _ = make_boolean(60, 40, 3, density=0.3, random_state=0)
    >>> hidden = mask_entries(X, 0.2, random_state=0)
    >>> hidden.nnz == round(0.2 * X.nnz) + round(0.2 * (60 * 40 - X.nnz))
    True
    >>> res = factorize(X, 3, missing=hidden, random_state=0)
    >>> held_out_scores(X, res.W, res.H, hidden)["cells"] == hidden.nnz
    True
    """
    X = check_binary_matrix(X)
    if isinstance(fraction, bool) or not isinstance(fraction, Real) or not 0 <= fraction < 1:
        raise ValueError(f"fraction must be a number in [0, 1), got {fraction!r}")
    if n_zeros is not None and (
        isinstance(n_zeros, bool) or not isinstance(n_zeros, Integral) or n_zeros < 0
    ):
        raise ValueError(f"n_zeros must be a nonnegative integer or None, got {n_zeros!r}")
    rng = check_random_state(random_state)
    X, unknown = check_unknown(X, missing, observed)
    n, m = X.shape
    ones = cell_keys(X)
    if unknown is not None and unknown.observed:
        # The observed zeros are listed: draw from them directly.
        zeros = cell_keys(unknown.cells)
        want = round(fraction * len(zeros)) if n_zeros is None else int(n_zeros)
        if want > len(zeros):
            raise ValueError(f"n_zeros={want} exceeds the {len(zeros)} observed zeros of X")
        hide_ones = rng.choice(ones, size=round(fraction * len(ones)), replace=False)
        hide_zeros = rng.choice(zeros, size=want, replace=False)
        return support_mask_from_keys(np.union1d(hide_ones, hide_zeros), X.shape)
    unknown_keys = np.zeros(0, np.int64) if unknown is None else cell_keys(unknown.cells)
    available = n * m - len(ones) - len(unknown_keys)
    want = round(fraction * available) if n_zeros is None else int(n_zeros)
    if want > available:
        raise ValueError(f"n_zeros={want} exceeds the {available} observed zeros of X")
    hide_ones = rng.choice(ones, size=round(fraction * len(ones)), replace=False)
    taken = np.union1d(ones, unknown_keys)
    hide_zeros = _draw_zeros(rng, n * m, taken, want)
    return support_mask_from_keys(np.union1d(hide_ones, hide_zeros), X.shape)


def _draw_zeros(rng: np.random.Generator, cells: int, taken: np.ndarray, want: int) -> np.ndarray:
    """``want`` distinct cells in [0, cells) outside the sorted ``taken``, uniformly."""
    available = cells - len(taken)
    if want == 0:
        return np.zeros(0, np.int64)
    if 2 * want > available:
        # Most of what is left: list it (drawing by rejection would keep hitting the same).
        check_memory(8 * cells, f"hiding {want:,} of {available:,} zeros")
        free = np.setdiff1d(np.arange(cells, dtype=np.int64), taken, assume_unique=True)
        return rng.choice(free, size=want, replace=False)
    # Rejection: draw, drop the taken and the repeats (keeping the first draw of each, in
    # draw order, so the result depends on the seed alone), until there are enough.
    chosen = np.zeros(0, np.int64)
    while len(chosen) < want:
        share = available / cells
        draw = rng.integers(0, cells, size=int(_OVERDRAW * (want - len(chosen)) / share) + 16)
        draw = draw[~in_sorted(draw, taken)]
        merged = np.concatenate([chosen, draw])
        _, first = np.unique(merged, return_index=True)
        chosen = merged[np.sort(first)]
    return chosen[:want]


def held_out_scores(X, W, H, hidden) -> dict:
    """How well Boolean factors predict the cells ``hidden`` from a fit: their Hamming error
    there, and accuracy, precision, recall and F1 of the predicted ones.

    Parameters
    ----------
    X : array-like or sparse of shape (n, m)
        The true 0/1 data, hidden cells included.
    W : array-like of shape (n, k), Boolean
    H : array-like of shape (k, m), Boolean
    hidden : array-like or sparse of shape (n, m)
        The held-out cells (e.g. from :func:`mask_entries`).

    Returns
    -------
    dict
        ``cells`` (held out), ``errors`` (cells predicted wrong), ``error_rate``
        (errors / cells), ``accuracy`` (1 − error_rate), ``ones`` (true ones among them),
        ``predicted_ones``, ``true_positives``, ``precision``, ``recall`` and ``f1`` (of the
        ones; 0 where undefined, and 1 when there are no ones and none are predicted).
    """
    X = check_binary_matrix(X)
    cells = check_binary_matrix(hidden, "hidden")
    if cells.shape != X.shape:
        raise ValueError(f"hidden has shape {cells.shape} but X has shape {X.shape}")
    keys = cell_keys(cells)
    truth = in_sorted(keys, cell_keys(X))
    m = X.shape[1]
    guess = predict_cells(W, H, keys // m, keys % m)
    total, ones, predicted = len(keys), int(truth.sum()), int(guess.sum())
    tp = int((truth & guess).sum())
    errors = int((truth ^ guess).sum())
    precision = tp / predicted if predicted else float(ones == 0)
    recall = tp / ones if ones else float(predicted == 0)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    rate = errors / total if total else 0.0
    return {
        "cells": total,
        "errors": errors,
        "error_rate": rate,
        "accuracy": 1.0 - rate,
        "ones": ones,
        "predicted_ones": predicted,
        "true_positives": tp,
        "precision": precision,
        "recall": recall,
        "f1": f1,
    }
