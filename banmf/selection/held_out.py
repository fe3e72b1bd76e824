"""Held-out cells and what they score: hiding cells (:func:`mask_entries`, :func:`hold_out`), the
errors on them (:func:`held_out_scores`), folds of the observed cells (:func:`cv_folds`), the
description length of a factorization (:func:`description_length`) and the agreement of two
(:func:`factor_agreement`). Read the public names from :mod:`banmf.model_selection`.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp

from ..data.dataset import Dataset
from ..data.masks import cell_keys, in_sorted, support_mask_from_keys
from ..data.validation import (
    check_binary_matrix,
    check_boolean_factors,
    check_cells,
    check_random_state,
)
from ..engine.booleanize import predict_cells
from ..exceptions import InputError, InvalidParameterError
from ..runtime.memory import check_memory
from .mdl import description_bits
from .predictor import (
    zero_sample,
)

__all__ = [
    "cv_folds",
    "description_length",
    "factor_agreement",
    "held_out_scores",
    "hold_out",
    "mask_entries",
]


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
    if isinstance(fraction, bool) or not isinstance(fraction, Real) or not 0 <= fraction < 1:
        raise InvalidParameterError(f"fraction must be a number in [0, 1), got {fraction!r}")
    if n_zeros is not None and (
        isinstance(n_zeros, bool) or not isinstance(n_zeros, Integral) or n_zeros < 0
    ):
        raise InvalidParameterError(
            f"n_zeros must be a nonnegative integer or None, got {n_zeros!r}"
        )
    rng = check_random_state(random_state)
    data = Dataset.of(X, missing, observed)
    X, unknown = data.X, data.unknown
    n, m = X.shape
    ones = cell_keys(X)
    if unknown is not None and unknown.observed:
        # The observed zeros are listed: draw from them directly.
        zeros = cell_keys(unknown.cells)
        want = round(fraction * len(zeros)) if n_zeros is None else int(n_zeros)
        if want > len(zeros):
            raise InvalidParameterError(
                f"n_zeros={want} exceeds the {len(zeros)} observed zeros of X"
            )
        hide_ones = rng.choice(ones, size=round(fraction * len(ones)), replace=False)
        hide_zeros = rng.choice(zeros, size=want, replace=False)
        return support_mask_from_keys(np.union1d(hide_ones, hide_zeros), X.shape)
    unknown_keys = np.zeros(0, np.int64) if unknown is None else cell_keys(unknown.cells)
    available = n * m - len(ones) - len(unknown_keys)
    want = round(fraction * available) if n_zeros is None else int(n_zeros)
    if want > available:
        raise InvalidParameterError(f"n_zeros={want} exceeds the {available} observed zeros of X")
    hide_ones = rng.choice(ones, size=round(fraction * len(ones)), replace=False)
    taken = np.union1d(ones, unknown_keys)
    hide_zeros = _draw_zeros(rng, n * m, taken, want)
    return support_mask_from_keys(np.union1d(hide_ones, hide_zeros), X.shape)


def hold_out(
    X, fraction: float, *, random_state=None, missing=None, observed=None
) -> tuple[dict, sp.csr_array]:
    """Hide a share of X's observed cells from a fit, to score it on them: the cells of
    :func:`mask_entries` (the same draws), and the unknown cells to fit X with.

    Parameters
    ----------
    X, fraction, random_state, missing, observed
        As in :func:`mask_entries`: the data, the share of its observed ones (and zeros) to
        hide, the seed, and its unknown cells (never hidden).

    Returns
    -------
    fit_masks : dict
        ``missing`` and ``observed`` for the fit (``factorize(X, k, **fit_masks)``): X's
        unknown cells and the hidden ones, in the form X's are given (``missing`` joined with
        the hidden cells, or ``observed`` less them; none given: ``missing`` the hidden cells).
    hidden : scipy.sparse.csr_array of shape (n, m), bool
        The hidden cells, to score the fit on with :func:`held_out_scores`.

    Raises
    ------
    banmf.exceptions.InputError
        ``fraction`` of X's observed cells rounds to no cell at all (a ``ValueError``).

    Examples
    --------
    >>> from banmf import factorize, make_boolean
    >>> X, _, _ = make_boolean(60, 40, 3, density=0.3, random_state=0)
    >>> fit_masks, hidden = hold_out(X, 0.2, random_state=0)
    >>> res = factorize(X, 3, random_state=0, **fit_masks)
    >>> held_out_scores(X, res.W, res.H, hidden)["cells"] == hidden.nnz
    True
    """
    data = Dataset.of(X, missing, observed)
    hidden = mask_entries(data, fraction, random_state=random_state)
    if hidden.nnz == 0:
        raise InputError(
            f"{fraction:g} holds out no cell of the {data.n_observed} observed cells; give a "
            "larger fraction"
        )
    fit = data.hide(hidden)
    return {"missing": fit.missing, "observed": fit.observed}, hidden


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


def held_out_scores(X, W, H, hidden, *, predictor=None) -> dict:
    """How well Boolean factors, or the fit's predictor, predict the cells ``hidden`` from a
    fit: the Hamming error there, and accuracy, precision, recall and F1 of the predicted ones.

    Parameters
    ----------
    X : array-like or sparse of shape (n, m)
        The true 0/1 data, hidden cells included.
    W : array-like of shape (n, k), Boolean
    H : array-like of shape (k, m), Boolean
    hidden : array-like or sparse of shape (n, m)
        The held-out cells (e.g. from :func:`mask_entries`).
    predictor : optional
        How the fit of ``W`` and ``H`` predicts its unknown cells
        (:attr:`banmf.Factorization.predictor`, BANMF's ``predictor_``), as
        :meth:`banmf.Factorization.predict` does. None (default): ``W⊗H``.

    Returns
    -------
    dict
        ``cells`` (held out), ``errors`` (cells predicted wrong), ``error_rate``
        (errors / cells), ``accuracy`` (1 − error_rate), ``ones`` (true ones among them),
        ``predicted_ones``, ``true_positives``, ``precision``, ``recall`` and ``f1`` (of the
        ones). ``precision`` is None when no held-out cell is predicted one, ``recall`` and
        ``f1`` are None when no one is held out: a score of nothing is not a perfect score.
    """
    X = Dataset.of(X).X
    cells = check_binary_matrix(hidden, "hidden")
    if cells.shape != X.shape:
        raise InputError(f"hidden has shape {cells.shape} but X has shape {X.shape}")
    keys = cell_keys(cells)
    truth = in_sorted(keys, cell_keys(X))
    m = X.shape[1]
    rows, cols = keys // m, keys % m
    if predictor is None:
        guess = predict_cells(W, H, rows, cols)
    else:
        Wb, Hb = check_boolean_factors(W, H)
        guess = predictor.predict(Wb, Hb, *check_cells(rows, cols, (len(Wb), Hb.shape[1])))
    total, ones, predicted = len(keys), int(truth.sum()), int(guess.sum())
    tp = int((truth & guess).sum())
    errors = int((truth ^ guess).sum())
    precision = tp / predicted if predicted else None
    recall = tp / ones if ones else None
    if recall is None:
        f1 = None
    else:
        # No one predicted where ones were held out: every one missed, F1 0.
        f1 = 2 * tp / (predicted + ones)
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


#: Observed zeros the cross-validation folds take at most, beside every one: on large sparse
#: data all zeros would be n·m cells.
FOLD_ZEROS = 5_000_000
#: Decimals to which held-out error rates are compared: rates from equal error counts that
#: float sums left a last bit apart (0.30208333333333337 and 0.3020833333333333) are equal.
TIE_DECIMALS = 12


def tie(rate: float) -> float:
    """A held-out error rate (or a difference of them) as compared: :data:`TIE_DECIMALS`."""
    return round(float(rate), TIE_DECIMALS)


def description_length(X, W, H, *, missing=None, observed=None) -> float:
    """Bits to send X as Boolean factors and their errors: the minimum description length of a
    Boolean factorization (after Miettinen & Vreeken's MDL4BMF, typed XOR, data to model).

    ``L = L(k) + Σ_l [L(|W_l|) + log₂ C(n, |W_l|)] + Σ_l [L(|H_l|) + log₂ C(m, |H_l|)]
    + L(|E⁻|) + log₂ C(c₀, |E⁻|) + L(|E⁺|) + log₂ C(c₁, |E⁺|)``:
    k by Rissanen's universal code; each factor's column of W (row of H) as its number of
    ones (log₂(n + 1) bits) and which they are; then the errors typed: the ones missed E⁻,
    among the c₀ observed cells W⊗H leaves 0, and the zeros covered E⁺, among the c₁ observed
    cells it covers, each as a count (log₂(c + 1) bits) and which. Unknown cells are neither
    sent nor counted. Lower is better: a factor pays for itself when the errors it removes
    cost more bits than it does.

    Parameters
    ----------
    X : array-like or sparse of shape (n, m)
    W : array-like of shape (n, k), Boolean
    H : array-like of shape (k, m), Boolean
    missing, observed : array-like or sparse of shape (n, m), optional
        Unknown cells, as in :meth:`banmf.BANMF.fit`.

    Returns
    -------
    float
        Bits.

    References
    ----------
    Miettinen & Vreeken, "MDL4BMF: Minimum Description Length for Boolean Matrix
    Factorization", ACM TKDD 8(4), 2014 (KDD 2011).
    """
    data = Dataset.of(X, missing, observed)
    Wb, Hb = check_boolean_factors(W, H, data.shape)
    return sum(description_bits(data, Wb, Hb))


def cv_folds(X, folds: int = 5, *, random_state=None, missing=None, observed=None) -> list:
    """Split the observed cells of X into ``folds`` parts of as equal size as can be, ones and
    zeros each spread evenly (the held-out sets of a cross-validation).

    Every observed cell is in exactly one part, unless X has more than
    :data:`FOLD_ZEROS` observed zeros: then every one is, and that many zeros drawn at random
    (on large sparse data all zeros would be n·m cells), each standing for (observed zeros) /
    :data:`FOLD_ZEROS` of them: :func:`banmf.select_rank` weighs a wrong zero so
    (``RankSelection.zero_weight``). More folds than observed cells are refused (a part would
    be empty).

    Returns
    -------
    list of scipy.sparse.csr_array, bool
    """
    data = Dataset.of(X, missing, observed)
    if isinstance(folds, bool) or not isinstance(folds, Integral) or folds < 2:
        raise InvalidParameterError(f"folds must be an integer >= 2, got {folds!r}")
    cells = data.n_observed
    if folds > cells:
        fix = f"pass folds <= {cells}" if cells >= 2 else "there is nothing to split"
        raise InvalidParameterError(
            f"folds={folds} is more than the {cells} observed cells of X (a fold would be "
            f"empty); {fix}"
        )
    keys, _ = fold_keys(data, int(folds), check_random_state(random_state))
    return [support_mask_from_keys(part, data.shape) for part in keys]


def fold_keys(data, folds: int, rng) -> tuple[list, float]:
    """The row-major keys of each fold's cells (sorted), for :func:`cv_folds`, and the zeros
    each of their zeros stands for (:func:`banmf.selection.predictor.zero_sample`)."""
    X, unknown = data.X, data.unknown
    n, m = X.shape
    ones = cell_keys(X)
    if unknown is not None and unknown.observed:
        zeros = cell_keys(unknown.cells)
        drawn, zero_weight = zero_sample(len(zeros), FOLD_ZEROS)
        if drawn < len(zeros):
            zeros = rng.choice(zeros, size=drawn, replace=False)
    else:
        taken = ones if unknown is None else np.union1d(ones, cell_keys(unknown.cells))
        drawn, zero_weight = zero_sample(n * m - len(taken), FOLD_ZEROS)
        zeros = _draw_zeros(rng, n * m, taken, drawn)
    parts = []
    for keys in (ones, zeros):
        keys = rng.permutation(keys)
        parts.append([keys[f::folds] for f in range(folds)])
    # Ones and zeros dealt in turn, zeros from the last fold back: fold sizes differ by one.
    keys = [np.sort(np.concatenate([parts[0][f], parts[1][folds - 1 - f]])) for f in range(folds)]
    return keys, zero_weight


def factor_agreement(W1, H1, W2, H2) -> float:
    """How well two Boolean factorizations of one matrix agree, factor for factor: the largest
    t such that their factors pair off one to one with every pair's tiles (as sets of cells)
    at Jaccard similarity t or more.

    1 means the same factors; a factor that one has and the other lacks brings it near 0,
    however well the others match (an empty tile is no pattern: it matches nothing).
    """
    from scipy.sparse import csr_array
    from scipy.sparse.csgraph import maximum_bipartite_matching

    W1, W2 = (np.asarray(W, dtype=np.int64) for W in (W1, W2))
    H1, H2 = (np.asarray(H, dtype=np.int64) for H in (H1, H2))
    k = W1.shape[1]
    if k == 0:
        return 1.0
    inter = (W1.T @ W2) * (H1 @ H2.T)
    size1 = W1.sum(axis=0) * H1.sum(axis=1)
    size2 = W2.sum(axis=0) * H2.sum(axis=1)
    union = size1[:, None] + size2[None, :] - inter
    sim = np.where(union > 0, inter / np.maximum(union, 1), 0.0)

    def pairs_off(t) -> bool:
        match = maximum_bipartite_matching(csr_array(sim >= t), perm_type="column")
        return bool(np.all(match >= 0))

    # The bottleneck matching: binary search over the similarities that occur.
    levels = np.unique(sim)
    low, high = 0, len(levels) - 1  # levels[0] always pairs off (every pair qualifies)
    while low < high:
        mid = (low + high + 1) // 2
        if pairs_off(levels[mid]):
            low = mid
        else:
            high = mid - 1
    return float(levels[low])
