"""Held-out evaluation: hide observed cells, fit the rest, score the guesses.

The building blocks for choosing k (or any parameter) by how well a factorization predicts
cells it did not see: :func:`mask_entries` draws the cells to hide, a fit takes them as
``missing=`` (:func:`hold_out` does both: the cells, and the data's unknown cells joined with
them), and :func:`held_out_scores` compares its prediction with the hidden truth.
"""

from __future__ import annotations

from .exceptions import InvalidParameterError
from .models import METHODS
from .selection.held_out import (
    FOLD_ZEROS,
    cv_folds,
    description_length,
    factor_agreement,
    held_out_scores,
    hold_out,
    mask_entries,
)
from .selection.ranks import (
    CRITERIA,
    CV_RULES,
    FITS_EVERY_SECONDS,
    MIN_FOLD_ONES,
    STABLE,
    RankSelection,
    select_rank_of,
)

__all__ = [
    "CRITERIA",
    "CV_RULES",
    "FITS_EVERY_SECONDS",
    "FOLD_ZEROS",
    "MIN_FOLD_ONES",
    "STABLE",
    "RankSelection",
    "cv_folds",
    "description_length",
    "factor_agreement",
    "held_out_scores",
    "hold_out",
    "mask_entries",
    "select_rank",
]


def select_rank(
    X,
    ks=range(1, 21),
    *,
    criteria=CRITERIA,
    method="banmf",
    folds: int = 5,
    cv_rule: str = "one-se",
    patience: int | None = 3,
    missing=None,
    observed=None,
    n_jobs=None,
    random_state=None,
    callback=None,
    **method_params,
) -> RankSelection:
    """Choose the rank k of a Boolean factorization of X, by up to three criteria.

    For every k (in increasing order) it fits ``method`` to all observed cells and, for "cv"
    and "stability", to each fold's training cells: the observed cells split into ``folds``
    parts (:func:`cv_folds`), one part hidden in turn, each fit with its own seed. Then:

    - ``"mdl"``: the description length of that fit (:func:`description_length`): the bits
      to send the factors and their errors; the rank with the fewest bits wins.
    - ``"cv"``: cross-validation: each fold's hidden cells scored by the fit that did not
      see them (:func:`held_out_scores`); the smallest k within one standard error of the
      lowest mean held-out error rate wins (``cv_rule="one-se"``), or the k with the lowest
      mean (``cv_rule="min"``).
    - ``"stability"``: the agreement of the fold fits with each other, pair by pair
      (:func:`factor_agreement`: the worst-matched factor); the largest k at which they agree
      at least :data:`STABLE` (0.8) on average wins, as NMFk takes the largest k whose
      clusters of factors stay tight under perturbed data. Up to the true rank, fits to
      different parts of the data find the same factors; past it, the extra factor is noise
      or a split, different in every fit.

    The chosen k (``best_k``) is the one most criteria point to (see :class:`RankSelection`).
    The fits of one k run side by side on the thread budget, as :func:`banmf.fit_many` runs
    fits.

    Parameters
    ----------
    X : array-like or sparse of shape (n, m)
    ks : iterable of int, default range(1, 21)
        The ranks to try.
    criteria : sequence of {"mdl", "cv", "stability"}
    method : str or estimator, default "banmf"
        A key of :data:`banmf.METHODS` (with ``n_components``), or an estimator whose
        parameters every fit takes, but for ``n_components``, ``random_state`` and those of
        ``**method_params``.
    folds : int, default 5
        Parts of the observed cells, and fits per k besides the one to all of them, for "cv"
        and "stability". Each part must hold at least :data:`MIN_FOLD_ONES` (10) observed
        ones: more folds than that allows are refused up front (``ValueError`` with the
        largest number that is).
    cv_rule : {"one-se", "min"}, default "one-se"
        The "cv" criterion's choice: the smallest k whose mean held-out error is within one
        standard error of the lowest (no more factors than the folds can tell apart), or the
        k with the lowest mean (ties: the smaller k), the better predictor of unknown cells
        (``n_components="auto"`` uses it).
    patience : int or None, default 3
        Stop once "mdl" and "cv" (those asked for) have both had their best k this many ranks
        back: past that they only rise on planted data (the best k of "cv" is its lowest,
        or with ``n_components="auto"`` on data with unknown cells the one its margin rule
        takes: docs/choosing-k.md). None: try every k.
    missing, observed : array-like or sparse of shape (n, m), optional
        Unknown cells, as in :meth:`banmf.BANMF.fit`: never fitted, never held out.
    n_jobs : int or None
        The thread budget shared by the fits.
    random_state : None, int or Generator
        Seeds every fit and the folds: the same value gives the same selection.
    callback : callable, optional
        ``callback(row)`` after each k, with that k's evidence (a row of
        :meth:`RankSelection.to_dict`); a truthy return stops the search there.
    **method_params
        Passed to the method's estimator.

    Returns
    -------
    RankSelection

    Notes
    -----
    Ctrl-C (or :func:`banmf.fit_many`'s cancel) during the search ends it: the ranks done so
    far make the selection (``interrupted`` is then True); before the first rank is done,
    KeyboardInterrupt propagates.

    Within a rank that takes a while, the fits done so far are logged on the
    ``banmf.progress`` logger (level INFO, every :data:`FITS_EVERY_SECONDS` at most), each
    record's ``record.banmf`` ``{"event": "fits", "k", "fits_done", "n_fits"}``, beside the
    records of the fits themselves (:mod:`banmf.runtime.progress`); as each rank is done, a
    ``"rank"`` record (INFO) whose ``record.banmf`` is ``{"event": "rank", "row": ...}`` with
    that rank's evidence (as ``callback`` has it).

    Examples
    --------
    >>> from banmf import make_boolean, select_rank
    >>> X, _, _ = make_boolean(60, 50, 4, density=0.4, random_state=1)
    >>> sel = select_rank(X, range(1, 8), random_state=0, folds=3)
    >>> sel.best_k
    4
    """
    if isinstance(method, str):
        if method not in METHODS:
            raise InvalidParameterError(
                f"unknown method {method!r}; choose one of {', '.join(METHODS)}"
            )
        estimator = METHODS[method](**method_params)
    else:
        estimator = type(method)(**{**method.get_params(deep=False), **method_params})
    return select_rank_of(
        X,
        ks,
        estimator,
        criteria=criteria,
        folds=folds,
        cv_rule=cv_rule,
        patience=patience,
        missing=missing,
        observed=observed,
        n_jobs=n_jobs,
        random_state=random_state,
        callback=callback,
    )
