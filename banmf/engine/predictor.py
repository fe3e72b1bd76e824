"""The predictor of a fit's unknown cells, chosen the same way on every backend: the column
majority where a rank selection found no rank that generalizes, the selection's fold fits
where they predict, else an inner fit on a share of the observed cells left out, which
scores every kind of predictor the fit's starts give (:mod:`banmf.selection.predictor`)."""

from __future__ import annotations

import numpy as np

from ..data.masks import cell_keys, in_sorted
from ..data.validation import check_random_state
from ..runtime.progress import inside_a_start
from ..selection.predictor import (
    MAJORITY,
    Predictor,
    candidate_scores,
    choose,
    column_shares,
    keeping_starts,
    majority_predictor,
    zero_sample,
)

__all__ = ["INNER_HOLD_OUT", "choose_predictor", "inner_fit_predictor", "inner_hold_out"]

#: The share of the observed cells (ones and zeros alike) an inner fit leaves out, to choose
#: the predictor of unknown cells on them (:func:`inner_fit_predictor`).
INNER_HOLD_OUT = 0.2
#: At most this many observed zeros per held-out one, or :data:`INNER_MIN_ZEROS`, whichever is
#: more, leave the inner fit: on large sparse data a share of all zeros is a share of n·m cells
#: (a fifth of 10⁹ cells at 10⁶ nonzeros), which the inner fit would visit in every pass. The
#: zeros left out then stand for that share each (the choice's ``zero_weight``). The floor
#: keeps every zero's share on data up to 10⁶ cells (votes, LUCAP0, mushroom).
INNER_ZEROS_PER_ONE, INNER_MIN_ZEROS = 2, 200_000


def inner_hold_out(ones: int, zeros: int) -> tuple[int, int, float]:
    """``(ones, zeros, zero_weight)`` of the inner fit's held-out cells on data with ``ones``
    observed ones and ``zeros`` observed zeros: :data:`INNER_HOLD_OUT` of the ones, of the
    zeros at most :data:`INNER_ZEROS_PER_ONE` per held-out one or :data:`INNER_MIN_ZEROS`,
    whichever is more, and how many of that share of the zeros each one drawn stands for
    (:func:`banmf.selection.predictor.zero_sample`)."""
    held_ones = round(INNER_HOLD_OUT * ones)
    most = max(INNER_ZEROS_PER_ONE * held_ones, INNER_MIN_ZEROS)
    return held_ones, *zero_sample(round(INNER_HOLD_OUT * zeros), most)


def choose_predictor(model, backend, starts: dict) -> Predictor | None:
    """The predictor of the unknown cells of ``model``'s fit (its ``predictor_``) from the
    factors of each kind the fit's ``starts`` give (``backend.start_factors``), the data read
    whole through ``backend.dataset()`` where a step needs it. None: W⊗H alone predicts (a
    single start, the paper's configuration and NMF's default; custom starting factors)."""
    selection = vars(model).get("rank_selection_")
    if selection is not None and not selection.generalizes:
        # No rank predicted the selection's folds better than the column majority
        # (n_components="auto" on data without that structure): the majority predicts.
        data = backend.dataset()
        return majority_predictor(data.X, data.unknown, selection.baseline_report())
    if model.init != "random" or len(starts) <= 1:
        return None
    # With n_components="auto" the selection's fold fits at this k predict together, with no
    # inner fit (RankSelection.fold_predictor).
    folds = None if selection is None else selection.fold_predictor
    if folds is not None:
        return folds
    with backend.inner_fits():
        return inner_fit_predictor(model, backend.dataset(), model.n_components_, starts)


def inner_fit_predictor(model, data, k: int, starts: dict) -> Predictor | None:
    """Fit ``model``'s estimator again at rank ``k`` with :data:`INNER_HOLD_OUT` of the
    observed cells of ``data`` left out as well (drawn with a seed from its ``random_state``;
    the unknown cells are never drawn, and their values never read; on large sparse data a
    sample of that share of the zeros, :data:`INNER_ZEROS_PER_ONE`), score every kind the
    fit's ``starts`` give on those cells, and the column majority of the inner fit's observed
    cells beside them, and keep the one with the fewest errors, with its threshold and
    calibration, on the factors of the fit (the majority: on the column shares of all observed
    cells). None when too few observed cells can be left out."""
    from ..selection.held_out import mask_entries

    seed = int(check_random_state(model.random_state).integers(2**31 - 1))
    _, drawn, zero_weight = inner_hold_out(data.X.nnz, data.n_observed - data.X.nnz)
    hidden = mask_entries(data, INNER_HOLD_OUT, random_state=seed, n_zeros=drawn)
    if hidden.nnz == 0:  # too few observed cells to leave any out
        return None
    params = model.get_params(deep=False)
    params.update(n_components=k, random_state=seed, verbose=0, callback=None)
    inner = type(model)(**params)
    inner_data = data.hide(hidden)
    try:
        with keeping_starts() as kept, inside_a_start():
            inner.fit(inner_data)
    except KeyboardInterrupt:
        model.interrupted_ = True  # the fit stands, with W⊗H as its predictor
        raise
    keys = cell_keys(hidden)
    m = data.shape[1]
    rows, cols = keys // m, keys % m
    truth = in_sorted(keys, cell_keys(data.X))
    offered = {kind: f for kind, f in kept[inner].items() if kind in starts}
    offered[MAJORITY] = (column_shares(inner_data.X, inner_data.unknown),)
    starts = {**starts, MAJORITY: (column_shares(data.X, data.unknown),)}
    scores = candidate_scores(offered, inner.W_, inner.components_, rows, cols)
    order = np.random.default_rng(seed).permutation(len(keys))
    kind, threshold, edges, probabilities, report = choose(scores, truth, order, zero_weight)
    return Predictor(kind, threshold, edges, probabilities, report, starts[kind])
