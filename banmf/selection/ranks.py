"""The rank selection (:func:`select_rank_of`, :class:`RankSelection`), below the models (whose
``n_components="auto"`` fit chooses its rank here): every rank's fits, their held-out
errors over folds, description length and stability, and the choice. Read the public names
from :mod:`banmf.model_selection`; :func:`banmf.model_selection.select_rank` also takes a
method by its registry name, which this module cannot know without importing the models.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from numbers import Integral

import numpy as np

from ..data.dataset import Dataset
from ..data.masks import cell_keys, in_sorted, support_mask_from_keys
from ..data.validation import (
    check_random_state,
)
from ..engine.booleanize import predict_cells
from ..exceptions import InputError, InvalidParameterError
from ..result import Factorization
from ..runtime.runner import fit_tasks
from .held_out import factor_agreement, fold_keys, tie
from .mdl import description_bits
from .predictor import (
    MAJORITY,
    Predictor,
    candidate_scores,
    choose_over_folds,
    column_shares,
    error_rate,
    fold_predictor,
    keeping_starts,
    reliability,
    without_choice,
)

__all__ = ["RankSelection", "margin_choice", "select_rank_of"]


#: ``criteria`` of :func:`banmf.select_rank`.
CRITERIA = ("mdl", "cv", "stability")
#: ``cv_rule`` of :func:`banmf.select_rank`: how the "cv" criterion picks k from the held-out error.
CV_RULES = ("one-se", "min")
#: The kinds of predictor of unknown cells that grow no worse with k for long: a vote over
#: starts, an NMF product with its threshold chosen on held-out cells (not W⊗H, which fits
#: more noise with every factor). Among near-equal ranks, ``cv_margin`` takes the largest
#: that such a kind scored.
REGULARIZED_KINDS = ("vote", "nmf")
#: A rank is stable when its fits to the folds' training cells agree at least this well: the
#: mean, over pairs of those fits, of :func:`factor_agreement` (their worst-matched factor).
STABLE = 0.8
#: Observed ones each fold of :func:`banmf.select_rank` must hold at least: a fold with fewer scores
#: its fit by a handful of cells, and every fold is one more fit per rank.
MIN_FOLD_ONES = 10
#: Least time from a rank's start, or its last ``"fits"`` progress record, to the next one
#: (:func:`banmf.select_rank`): a rank done sooner says nothing before its result.
FITS_EVERY_SECONDS = 2.0

#: With ``cv_margin`` (``n_components="auto"``), a rank is a candidate only if its fold errors
#: are lower than the better trivial predictor's (all zeros, the column majority) by more than
#: this many standard errors of their differences, paired fold by fold. Two, not the margin's
#: one: a rank's kind of predictor and threshold are chosen on the very cells it is scored on,
#: which favours it over the trivial predictors, which choose nothing; on Bernoulli noise a
#: vote over the starts beat the all-zeros prediction by one standard error.
BASELINE_MARGIN = 2.0

_progress = logging.getLogger("banmf.progress")


@dataclass(frozen=True)
class RankSelection:
    """The evidence for each rank tried, and the rank chosen (:func:`banmf.select_rank`).

    Attributes
    ----------
    ks : list of int
        The ranks fitted, in order (a search that stopped early leaves the rest out).
    training_error : dict
        k → Hamming error of the fit on all observed cells.
    description_length : dict or None
        k → bits of that fit (:func:`description_length`); None without "mdl".
    held_out_error, held_out_se : dict or None
        k → mean held-out error rate over the folds, and its standard error; None without
        "cv". With ``predictor``, the error rates of that predictor of the unknown cells.
    stability : dict or None
        k → mean :func:`factor_agreement` over the pairs of fits to the folds' training
        cells; None without "stability".
    choices : dict
        criterion → the k it points to: the shortest description; the smallest k whose
        held-out error is within one standard error of the lowest (the one-standard-error
        rule), or with ``cv_rule="min"`` the lowest; the largest k whose fits to the folds'
        training cells agree at least :data:`STABLE`.
    best_k : int
        The choice: the k most criteria point to (ties, and no two agreeing: the median of
        their choices).
    reason : str
        Why, in words.
    fits : dict
        k → the :class:`banmf.Factorization` on all observed cells.
    folds : int
        Folds the observed cells were split into (0 with "mdl" alone); ``fold_zeros`` the
        observed zeros they hold (all, or a sample on large data: see :func:`cv_folds`), and
        ``zero_weight`` how many observed zeros each of them stands for: 1.0 when they hold
        all, else (observed zeros) / ``fold_zeros``. A wrong zero counts that many errors in
        the held-out error rates (and in the threshold of their ``predictor``), so that they
        weigh ones and zeros as the data does.
    seconds : float
    interrupted : bool
        Ctrl-C ended the search early: the ranks in ``ks`` are those done.
    edge : str or None
        When ``best_k`` is the largest rank tried (the search ran out of ranks, or was
        interrupted, before the criteria turned), or the smallest one above 1: in words, with
        the ranks to try next; it also ends ``reason``. None otherwise.
    predictor : dict or None
        k → the kind of predictor of unknown cells (:attr:`banmf.BANMF.predictor_`:
        "product", "vote" or "nmf") whose errors ``held_out_error`` holds, when the fold fits
        were scored by the predictor a fit with unknown cells chooses (``n_components="auto"``
        on data with unknown cells, docs/choosing-k.md); None when they were scored by W⊗H.
    cv_margin : dict or None
        How "cv" chose among near-equal ranks, when it did (``n_components="auto"`` on data
        with unknown cells, docs/choosing-k.md; :func:`margin_choice`): ``margin`` (in
        standard errors), ``lowest_k`` (the k of the lowest held-out error), ``k`` (the
        largest rank scored by a vote or NMF predictor whose fold errors exceed the lowest's
        by at most ``margin`` standard errors of their differences, paired fold by fold; or
        ``lowest_k``), and that rank's mean paired ``difference`` and its standard error
        ``se``, and ``near``, the ranks near-tied by that rule (``lowest_k`` and every
        rank within the margin). Selections pickled before the pairing hold ``bound`` (the
        lowest error plus ``margin`` times its standard error) instead of the last three, and
        those pickled before ``near`` was recorded lack it. None otherwise.
    stopped : dict or None
        When the patience stop ended the search (ranks of ``ks`` were left untried):
        ``patience`` and ``from_k``, the rank it counted from (the latest rank a criterion
        chose by the curve so far: its lowest point, or with ``cv_margin`` the rank the
        margin rule took). None when the search ran through the ranks, was interrupted or
        stopped by the callback, or was pickled before this was recorded.
    fold_errors : dict or None
        k → its held-out error rate on each fold, in the folds' order (the same folds for
        every rank; ``held_out_error`` is their mean): what :func:`margin_choice` pairs. None
        without "cv", or when pickled before this was recorded.
    fold_predictor : Predictor or None
        The predictor of unknown cells that ``best_k``'s fold fits give together, when they
        were scored by a vote or NMF predictor (:func:`banmf.selection.predictor.fold_predictor`,
        kind "folds"): the fit at the chosen rank of ``n_components="auto"`` predicts by it
        (docs/missing.md). Only the ranks the rule could still take keep their fold fits'
        factors while the search runs, so it is None where the chosen rank's were let go, and
        when the folds were scored by W⊗H or the selection was pickled before this existed,
        and when no rank generalizes.
    baseline : dict or None
        The trivial predictors' held-out error rates on the same folds (with "cv"): ``errors``
        (kind → mean rate) of "zeros" (every cell 0) and "majority" (each cell its column's
        majority among the fold's training cells); ``kind``, the better of the two, its
        ``error`` (mean) and its ``fold_errors``; ``cells``, the folds' cells, and
        ``reliability``, the majority's column shares as probabilities on them
        (:func:`banmf.selection.predictor.reliability`). None without "cv", or when pickled before this
        was recorded.
    generalizes : bool
        With ``cv_margin`` (``n_components="auto"``) a rank is a candidate only if its fold
        errors are lower than the better trivial predictor's by more than
        :data:`BASELINE_MARGIN` standard errors of their differences, paired fold by fold.
        False when no rank tried is: the data show no structure that a rank predicts held-out
        cells by, ``best_k`` is the smallest rank tried, and a fit with unknown cells at it
        predicts them by the column majority. True otherwise (and without ``cv_margin``,
        where the choice does not look at the trivial predictors).
    """

    ks: list
    training_error: dict
    description_length: dict | None
    held_out_error: dict | None
    held_out_se: dict | None
    stability: dict | None
    choices: dict
    best_k: int
    reason: str
    fits: dict = field(repr=False)
    folds: int = 0
    fold_zeros: int = 0
    zero_weight: float = 1.0
    seconds: float = 0.0
    interrupted: bool = False
    edge: str | None = None
    predictor: dict | None = None
    cv_margin: dict | None = None
    stopped: dict | None = None
    fold_errors: dict | None = None
    fold_predictor: Predictor | None = field(default=None, repr=False, compare=False)
    baseline: dict | None = None
    generalizes: bool = True

    def baseline_report(self) -> dict:
        """The report of the "majority" predictor that a fit at ``best_k`` predicts by when no
        rank generalizes: the trivial predictors' held-out error rates on the folds."""
        baseline = self.baseline or {}
        return {
            "held_out_cells": baseline.get("cells", 0),
            "source": "rank selection",
            "zero_weight": self.zero_weight,
            "error_rates": dict(baseline.get("errors", {})),
            **baseline.get("reliability", {"brier": float("nan"), "bins": []}),
        }

    def to_dict(self) -> dict:
        """Plain values (for JSON): the per-k evidence as rows, the choices and the reason."""
        curves = [
            c or {}
            for c in (
                self.description_length,
                self.held_out_error,
                self.held_out_se,
                self.stability,
                self.predictor,
                self.fold_errors,
            )
        ]
        rows = [_evidence(k, self.training_error, *curves) for k in self.ks]
        return {
            "ks": list(self.ks),
            "per_k": rows,
            "choices": dict(self.choices),
            "best_k": self.best_k,
            "reason": self.reason,
            "folds": self.folds,
            "fold_zeros": self.fold_zeros,
            "zero_weight": self.zero_weight,
            "seconds": self.seconds,
            "interrupted": self.interrupted,
            "edge": self.edge,
            "cv_margin": None if self.cv_margin is None else dict(self.cv_margin),
            "stopped": None if self.stopped is None else dict(self.stopped),
            "baseline": None if self.baseline is None else dict(self.baseline),
            "generalizes": self.generalizes,
        }


def _one_se_choice(means: dict, ses: dict) -> int:
    """The smallest k whose mean is within one standard error of the lowest mean."""
    best = min(means, key=lambda k: (tie(means[k]), k))
    return min(k for k in means if tie(means[k]) <= tie(means[best] + ses[best]))


def margin_choice(fold_errors: dict, kinds: dict, margin: float) -> dict:
    """The "cv" choice among near-equal ranks for a predictor that regularizes: the largest k
    whose held-out errors, paired fold by fold with those of the rank of the lowest mean
    (``fold_errors``: k → its errors on the folds, in fold order), exceed them on average by at
    most ``margin`` standard errors of those differences, among the ranks scored by a kind in
    :data:`REGULARIZED_KINDS` (``kinds``: k → kind); the lowest's own k when none is larger.
    Returns :attr:`RankSelection.cv_margin`: ``margin``, ``lowest_k``, ``k``, the chosen
    rank's mean paired ``difference`` and its standard error ``se``, and ``near``: the ranks
    the rule considered near-tied (``lowest_k`` and every rank within the margin), in order.

    Why: scored by such a predictor the held-out error is flat over a range of ranks, so its
    lowest point is a draw among them, while a vote over more factors predicts no worse; the
    reverse of the one-standard-error rule, which guards W⊗H, whose error rises with k. Why
    paired: every rank is scored on the same folds, whose cells differ in how hard they are
    to predict; that part of a fold's error is common to the ranks and cancels in their
    differences, which vary less than each rank's mean does.
    """
    means = {k: float(np.mean(errors)) for k, errors in fold_errors.items()}
    lowest = min(means, key=lambda k: (tie(means[k]), k))
    base = np.asarray(fold_errors[lowest], dtype=np.float64)
    paired = {}
    for k in fold_errors:
        gaps = np.asarray(fold_errors[k], dtype=np.float64) - base
        paired[k] = (float(gaps.mean()), float(gaps.std(ddof=1) / np.sqrt(len(gaps))))
    near = [
        k
        for k, (difference, se) in paired.items()
        if tie(difference) <= margin * tie(se) and kinds.get(k) in REGULARIZED_KINDS
    ]
    k = max([lowest, *near])
    difference, se = paired[k]
    return {
        "margin": float(margin),
        "lowest_k": lowest,
        "k": k,
        "difference": difference,
        "se": se,
        "near": sorted({lowest, *near}),
    }


def _combined_choice(choices: dict) -> tuple[int, str]:
    """The k most criteria point to; ties and no agreement: the median of the choices."""
    values = sorted(choices.values())
    counts = {k: values.count(k) for k in values}
    top = max(counts.values())
    agreeing = sorted(k for k, c in counts.items() if c == top)
    named = ", ".join(f"{name}: {k}" for name, k in choices.items())
    if len(agreeing) == 1 and (top > 1 or len(values) == 1):
        k = agreeing[0]
        who = [name for name, v in choices.items() if v == k]
        if len(who) == len(choices):
            return k, f"every criterion points to k={k} ({named})"
        return k, f"{' and '.join(who)} point to k={k} ({named})"
    k = values[(len(values) - 1) // 2]
    return k, f"the criteria disagree; k={k} is the median of their choices ({named})"


def select_rank_of(
    X,
    ks,
    estimator,
    *,
    criteria=CRITERIA,
    folds: int = 5,
    cv_rule: str = "one-se",
    patience: int | None = 3,
    missing=None,
    observed=None,
    n_jobs=None,
    random_state=None,
    callback=None,
    by_predictor: bool = False,
    cv_margin: float | None = None,
) -> RankSelection:
    """:func:`banmf.model_selection.select_rank` with the method given as an ``estimator``
    (unfitted): every fit is one of its class with its parameters, but for ``n_components``
    (the rank) and ``random_state`` (a seed of the selection's).

    ``by_predictor``: score the fold fits for "cv" by the predictor of unknown cells their
    starts give (:func:`banmf.selection.predictor.choose_over_folds`: one kind and threshold per rank,
    named in ``RankSelection.predictor``) rather than by W⊗H, as a fit with unknown cells
    predicts them (``n_components="auto"`` on such data). No extra fit: the fold fits hand
    their starts' factors over (:func:`banmf.selection.predictor.keeping_starts`). A method whose fits
    hand none over is scored by W⊗H."""
    start = time.perf_counter()
    settings = _Settings.of(ks, criteria, folds, cv_rule, patience, by_predictor, cv_margin)
    data = _checked_data(X, missing, observed, settings)
    split = _Split.of(data, settings, check_random_state(random_state))
    fits = _RankFits(estimator, data, split, n_jobs)
    curves = _Curves()
    interrupted, stopped = False, None
    for i, k in enumerate(settings.ks, 1):
        try:
            done, kept = fits.run(k, i, settings)
            if any(getattr(est, "interrupted_", False) for est in done):
                interrupted = True  # cancelled from outside (fit_many): as by Ctrl-C
                break
            curves.score(k, done, kept, data, split, settings)
            row = curves.row(k)
            _report_rank(k, row)
        except KeyboardInterrupt:
            # This rank is not all there (its fits, or its scores): the ranks before it stand.
            curves.drop(k)
            if not curves.errors:
                raise
            interrupted = True
            break
        if callback is not None and callback(row):
            break
        stopped = _patience_stop(k, curves, settings, split.against)
        if stopped is not None:
            break
    _progress.debug(
        "chose among k=%s",
        list(curves.errors),
        extra={"banmf": {"event": "selected", "ks": list(curves.errors)}},
    )
    return _selection(curves, settings, split, start, interrupted, stopped)


@dataclass(frozen=True)
class _Settings:
    """What :func:`select_rank_of` tries and how it scores and stops, checked.

    Attributes
    ----------
    ks : list of int
        The ranks, distinct and in order.
    criteria : tuple of str
        Some of :data:`CRITERIA`.
    folds : int
        The folds asked for (>= 2; only "cv" and "stability" split the cells).
    cv_rule : str
        One of :data:`CV_RULES`.
    patience : int or None
    by_predictor : bool
        Score the fold fits by their starts' predictor (only with "cv").
    cv_margin : float or None
    """

    ks: list
    criteria: tuple
    folds: int
    cv_rule: str
    patience: int | None
    by_predictor: bool
    cv_margin: float | None

    @classmethod
    def of(cls, ks, criteria, folds, cv_rule, patience, by_predictor, cv_margin) -> _Settings:
        """The settings from :func:`select_rank_of`'s arguments; InvalidParameterError on the
        first that is wrong."""
        criteria = tuple(criteria)
        bad = [c for c in criteria if c not in CRITERIA]
        if bad or not criteria:
            raise InvalidParameterError(f"criteria must be some of {CRITERIA}, got {criteria!r}")
        if cv_rule not in CV_RULES:
            raise InvalidParameterError(f"cv_rule must be one of {CV_RULES}, got {cv_rule!r}")
        ks = sorted({int(k) for k in ks})
        if not ks or ks[0] < 1:
            raise InvalidParameterError(f"ks must be positive ranks, got {ks!r}")
        if isinstance(folds, bool) or not isinstance(folds, Integral) or folds < 2:
            raise InvalidParameterError(f"folds must be an integer >= 2, got {folds!r}")
        if patience is not None and (
            isinstance(patience, bool) or not isinstance(patience, Integral) or patience < 1
        ):
            raise InvalidParameterError(
                f"patience must be a positive integer or None, got {patience!r}"
            )
        by_predictor = by_predictor and "cv" in criteria
        return cls(ks, criteria, folds, cv_rule, patience, by_predictor, cv_margin)

    @property
    def splits(self) -> bool:
        """Whether a criterion scores fits to folds ("cv", "stability")."""
        return "cv" in self.criteria or "stability" in self.criteria

    @property
    def margin_rule(self) -> bool:
        """Whether "cv" chooses among near-equal ranks (:func:`margin_choice`;
        ``n_components="auto"``)."""
        return self.cv_margin is not None and self.cv_rule == "min"


def _checked_data(X, missing, observed, settings: _Settings) -> Dataset:
    """The data as a Dataset; InputError when no cell is known, or too few ones fill the folds."""
    data = Dataset.of(X, missing, observed)
    if data.n_observed == 0:
        n, m = data.X.shape
        raise InputError(
            f"every cell of X is unknown (all {n}×{m} cells): there is no cell to choose k on",
            command_line=f"every cell of the input is unknown (all {n}×{m} cells): there is no "
            "cell to choose k on",
        )
    if settings.splits:
        _check_folds(int(settings.folds), data.X.nnz, settings.criteria)
    return data


@dataclass(frozen=True)
class _Split:
    """The folds every rank's fits share, and the fits' seeds.

    Attributes
    ----------
    seeds : ndarray
        The fit to all observed cells' seed, then each fold's.
    held : list
        Per fold: (the fold's cells, the data it is fitted to); empty without "cv" and
        "stability".
    zero_weight : float
        The zeros each of the folds' zeros stands for.
    fold_zeros : int
        The observed zeros the folds hold.
    baseline : dict or None
        :attr:`RankSelection.baseline` (with "cv").
    against : dict or None
        The baseline a rank must beat (with the margin rule), else None.
    """

    seeds: np.ndarray
    held: list
    zero_weight: float
    fold_zeros: int
    baseline: dict | None
    against: dict | None

    @classmethod
    def of(cls, data: Dataset, settings: _Settings, rng: np.random.Generator) -> _Split:
        """The seeds, then the folds (drawn with ``rng`` after the seeds)."""
        X = data.X
        seeds = rng.integers(0, 2**31, size=1 + settings.folds)
        held, zero_weight = [], 1.0
        if settings.splits:
            keys, zero_weight = fold_keys(data, int(settings.folds), rng)
            for part in keys:
                cells = support_mask_from_keys(part, X.shape)
                held.append((cells, data.hide(cells)))
        fold_zeros = sum(h[0].nnz for h in held) - (X.nnz if held else 0)
        baseline = _baseline(X, held, zero_weight) if "cv" in settings.criteria else None
        # With cv_margin (n_components="auto"), a rank must beat the trivial predictors too.
        against = baseline if settings.margin_rule else None
        return cls(seeds, held, zero_weight, fold_zeros, baseline, against)


class _RankFits:
    """One rank's fits: to all observed cells, then to each fold's training cells, each one
    of the estimator's class with its parameters at that rank and a seed of the selection's."""

    def __init__(self, estimator, data: Dataset, split: _Split, n_jobs):
        self.cls, self.template = type(estimator), estimator.get_params(deep=False)
        self.data, self.split, self.n_jobs = data, split, n_jobs
        n_held = len(split.held)
        self.labels = ["all observed cells"] + [
            f"fold {f} of {n_held}" for f in range(1, n_held + 1)
        ]

    def estimator(self, k: int, seed):
        """The estimator at rank ``k`` with the seed ``seed``."""
        return self.cls(**{**self.template, "n_components": k, "random_state": int(seed)})

    def run(self, k: int, i: int, settings: _Settings) -> tuple[list, dict]:
        """Fit rank ``k`` (the ``i``-th tried): ``(the fitted estimators, their starts' factors
        kept by :func:`banmf.selection.predictor.keeping_starts`)``."""
        seeds, held = self.split.seeds, self.split.held
        tasks = [(self.estimator(k, seeds[0]), self.data)]
        tasks += [(self.estimator(k, s), fold) for s, (_, fold) in zip(seeds[1:], held)]
        _progress.info(
            "k=%d (rank %d of %d): %d fits",
            k,
            i,
            len(settings.ks),
            len(tasks),
            extra={
                "banmf": {
                    "event": "rank_start",
                    "k": k,
                    "rank": i,
                    "n_ranks": len(settings.ks),
                    "ks": list(settings.ks),
                    "n_fits": len(tasks),
                }
            },
        )
        # No fit chooses a predictor of its unknown cells: scored by their factors, or by
        # the predictors their starts give.
        with keeping_starts() if settings.by_predictor else without_choice() as kept:
            done = fit_tasks(tasks, self.n_jobs, _FitsProgress(k, len(tasks)), self.labels)
        return done, kept


@dataclass
class _Curves:
    """Every rank's evidence so far, each a dict k → value: ``errors`` (training error),
    ``bits`` (description length), ``held_err`` and ``held_se`` (mean held-out error and its
    standard error), ``fold_err`` (the error on each fold, in fold order: the folds are every
    rank's), ``stable`` (stability), ``fits`` (the Factorization on all observed cells),
    ``kinds`` (the predictor that scored the held-out error, by_predictor) and ``bags`` (the
    fold fits' predictor, :func:`banmf.selection.predictor.fold_predictor`)."""

    errors: dict = field(default_factory=dict)
    bits: dict = field(default_factory=dict)
    held_err: dict = field(default_factory=dict)
    held_se: dict = field(default_factory=dict)
    stable: dict = field(default_factory=dict)
    fits: dict = field(default_factory=dict)
    fold_err: dict = field(default_factory=dict)
    kinds: dict = field(default_factory=dict)
    bags: dict[int, Predictor] = field(default_factory=dict)

    def drop(self, k: int) -> None:
        """Forget rank ``k`` in every curve."""
        for curve in (
            self.errors,
            self.bits,
            self.held_err,
            self.held_se,
            self.stable,
            self.fits,
            self.fold_err,
            self.kinds,
            self.bags,
        ):
            curve.pop(k, None)

    def row(self, k: int) -> dict:
        """Rank ``k``'s row of :meth:`RankSelection.to_dict`."""
        return _evidence(
            k,
            self.errors,
            self.bits,
            self.held_err,
            self.held_se,
            self.stable,
            self.kinds,
            self.fold_err,
        )

    def cv_choice(self, settings: _Settings, against) -> dict:
        """:func:`_cv_choice` on the curve so far."""
        return _cv_choice(
            self.held_err,
            self.held_se,
            self.fold_err,
            self.kinds,
            settings.cv_rule,
            settings.cv_margin,
            against,
        )

    def score(self, k: int, done: list, kept, data: Dataset, split: _Split, settings) -> None:
        """Add rank ``k``'s scores from its fits ``done`` (to all observed cells, then to
        each fold) and ``kept`` (their starts' factors)."""
        full, runs, criteria = done[0], done[1:], settings.criteria
        self.fits[k] = Factorization.from_estimator(full, X=data.X)  # named by its class
        self.errors[k] = int(full.reconstruction_err_)
        if "mdl" in criteria:
            self.bits[k] = sum(description_bits(data, full.W_, full.components_))
        if "stability" in criteria:
            pairs = [
                factor_agreement(a.W_, a.components_, b.W_, b.components_)
                for i, a in enumerate(runs)
                for b in runs[i + 1 :]
            ]
            self.stable[k] = float(np.mean(pairs))
        if "cv" in criteria:
            self._score_held_out(k, runs, kept, data.X, split, settings.by_predictor)
        if self.bags:
            # Only the ranks the rule could take on the curve so far keep their fold fits'
            # factors: they are the folds' number of fits at each rank.
            if settings.margin_rule:
                near = self.cv_choice(settings, split.against)["near"]
            else:
                near = [min(self.held_err, key=lambda r: (tie(self.held_err[r]), r))]
            self.bags = {r: bag for r, bag in self.bags.items() if r in near}

    def _score_held_out(self, k, runs, kept, X, split: _Split, by_predictor: bool) -> None:
        """Rank ``k``'s held-out errors: its fold fits ``runs`` each scored on its fold's
        cells, by their starts' predictor (``by_predictor``, when every fit kept its starts)
        or by W⊗H."""
        scored = by_predictor and all(est in kept for est in runs)
        kind, rates, bag = _fold_rates(
            X,
            runs,
            [cells for cells, _ in split.held],
            kept if scored else None,
            split.zero_weight,
            int(split.seeds[0]),
        )
        if scored:
            self.kinds[k] = kind
        if bag is not None:
            self.bags[k] = bag
        self.fold_err[k] = [float(rate) for rate in rates]
        self.held_err[k] = float(np.mean(rates))
        self.held_se[k] = float(np.std(rates, ddof=1) / np.sqrt(len(rates)))


def _report_rank(k: int, row: dict) -> None:
    """The ``"rank"`` progress record of a rank done, with its evidence ``row``."""
    said = "" if "held_out_error" not in row else f", held-out error {row['held_out_error']:.4f}"
    said += f" ({row['predictor']})" if "predictor" in row else ""
    _progress.info(
        "k=%d: error %d%s",
        k,
        row["training_error"],
        said,
        extra={"banmf": {"event": "rank", "row": row}},
    )


def _patience_stop(k: int, curves: _Curves, settings: _Settings, against) -> dict | None:
    """:attr:`RankSelection.stopped` when the patience stop ends the search after rank ``k``
    (``patience`` ranks past the rank it counts from, and ranks left to try), else None."""
    if settings.patience is None:
        return None
    ks = settings.ks
    since = _patience_from(curves, settings, against)
    if since is not None and k != ks[-1] and ks.index(k) - ks.index(since) >= settings.patience:
        return {"patience": int(settings.patience), "from_k": since}
    return None


def _selection(
    curves: _Curves, settings: _Settings, split: _Split, start: float, interrupted, stopped
) -> RankSelection:
    """The RankSelection of the ranks done: each criterion's choice, the combined one and why."""
    criteria = settings.criteria
    choices = {}
    if "mdl" in criteria:
        choices["mdl"] = min(curves.bits, key=lambda k: (curves.bits[k], k))
    margin, generalizes = None, True
    if "cv" in criteria:
        cv = curves.cv_choice(settings, split.against)
        choices["cv"], margin, generalizes = cv["k"], cv["margin"], cv["generalizes"]
    if "stability" in criteria:
        stable = curves.stable
        steady = [k for k in stable if stable[k] >= STABLE]
        choices["stability"] = max(steady) if steady else max(stable, key=lambda k: (stable[k], -k))
    best, reason = _combined_choice(choices)
    reason += _cv_reason(generalizes, margin, split.baseline, curves.held_err)
    tried = list(curves.errors)
    edge = _edge(best, tried)
    if edge is not None:
        reason += f"; {edge}"
    return RankSelection(
        ks=tried,
        training_error=curves.errors,
        description_length=curves.bits if "mdl" in criteria else None,
        held_out_error=curves.held_err if "cv" in criteria else None,
        held_out_se=curves.held_se if "cv" in criteria else None,
        fold_errors=curves.fold_err if "cv" in criteria else None,
        stability=curves.stable if "stability" in criteria else None,
        choices=choices,
        best_k=best,
        reason=reason,
        fits=curves.fits,
        folds=len(split.held),
        fold_zeros=split.fold_zeros,
        zero_weight=split.zero_weight,
        seconds=time.perf_counter() - start,
        interrupted=interrupted,
        edge=edge,
        predictor=curves.kinds or None,
        cv_margin=margin,
        stopped=stopped,
        fold_predictor=curves.bags.get(best) if generalizes else None,
        baseline=split.baseline,
        generalizes=generalizes,
    )


def _cv_reason(generalizes: bool, margin, baseline, held_err: dict) -> str:
    """What the reason adds for the "cv" choice: that no rank generalizes, or that the margin
    rule took a rank past the lowest error; else nothing."""
    if not generalizes:
        return (
            f"; no rank generalizes: none predicts the held-out cells better than the "
            f"{_BASELINE_WORDS[baseline['kind']]} ({baseline['error']:.4f}) by more than "
            f"{BASELINE_MARGIN:g} standard errors of their differences, paired fold by fold, "
            "so the smallest rank tried"
        )
    if margin is not None and margin["k"] != margin["lowest_k"]:
        return (
            f"; the largest k within {margin['margin']:g} standard errors of the lowest "
            f"held-out error (k={margin['lowest_k']}, {held_err[margin['lowest_k']]:.4f}), "
            "paired fold by fold"
        )
    return ""


#: The trivial predictors a rank's held-out error is compared with, in words.
_BASELINE_WORDS = {"zeros": "all-zeros prediction", MAJORITY: "column majority"}


def _baseline(X, held: list, zero_weight: float) -> dict | None:
    """The held-out error rates of the trivial predictors on the folds ``held`` (each a pair
    of its cells and the data fitted without them): "zeros" (every cell 0) and "majority"
    (each cell its column's majority among the fold's training cells,
    :func:`banmf.selection.predictor.column_shares`), each zero counting ``zero_weight`` cells.
    Returns :attr:`RankSelection.baseline`, or None without folds."""
    if not held:
        return None
    ones, m = cell_keys(X), X.shape[1]
    rates: dict = {"zeros": [], MAJORITY: []}
    scores, truths = [], []
    for cells, fitted in held:
        keys = cell_keys(cells)
        truth = in_sorted(keys, ones)
        shares = column_shares(fitted.X, fitted.unknown)[keys % m]
        rates["zeros"].append(error_rate(np.zeros(len(keys), bool), truth, zero_weight))
        rates[MAJORITY].append(error_rate(shares > 0.5, truth, zero_weight))
        scores.append(shares)
        truths.append(truth)
    means = {kind: float(np.mean(r)) for kind, r in rates.items()}
    # The better of the two, the majority on a tie (it is the zeros wherever no column has
    # a majority of ones).
    kind = min((MAJORITY, "zeros"), key=lambda name: tie(means[name]))
    return {
        "kind": kind,
        "error": means[kind],
        "fold_errors": [float(r) for r in rates[kind]],
        "errors": means,
        "cells": int(sum(cells.nnz for cells, _ in held)),
        # The column shares as probabilities, each fold's from its training cells.
        "reliability": reliability(np.concatenate(scores), np.concatenate(truths), zero_weight),
    }


def _beats(errors: list, base: list, margin: float) -> bool:
    """Whether fold errors ``errors`` are lower than ``base``'s by more than ``margin``
    standard errors of their differences, paired fold by fold (a difference of exactly 0,
    as on data without structure, never is)."""
    gaps = np.asarray(errors, dtype=np.float64) - np.asarray(base, dtype=np.float64)
    difference = tie(gaps.mean())
    se = tie(gaps.std(ddof=1) / np.sqrt(len(gaps)))
    return difference < 0 and -difference > margin * se


def _cv_choice(
    held_err: dict, held_se: dict, fold_err: dict, kinds: dict, cv_rule: str, cv_margin, against
) -> dict:
    """The "cv" criterion's choice on the curve so far: ``k``, the :func:`margin_choice`
    record ``margin`` (or None), ``near`` (the ranks the rule considers near-tied) and
    ``generalizes``. With ``against`` (:attr:`RankSelection.baseline`; ``n_components="auto"``)
    only the ranks that beat the better trivial predictor by :data:`BASELINE_MARGIN` standard
    errors of their paired differences (:func:`_beats`) are candidates; when none does, the smallest
    rank is chosen and ``generalizes`` is False."""
    if cv_rule == "one-se":
        k = _one_se_choice(held_err, held_se)
        return {"k": k, "margin": None, "near": [k], "generalizes": True}
    eligible = list(fold_err)
    if against is not None:
        base = against["fold_errors"]
        eligible = [k for k in fold_err if _beats(fold_err[k], base, BASELINE_MARGIN)]
        if not eligible:
            k = min(fold_err)
            return {"k": k, "margin": None, "near": [k], "generalizes": False}
    if cv_margin is not None and kinds:
        margin = margin_choice({k: fold_err[k] for k in eligible}, kinds, cv_margin)
        return {"k": margin["k"], "margin": margin, "near": margin["near"], "generalizes": True}
    k = min(eligible, key=lambda r: (tie(held_err[r]), r))
    return {"k": k, "margin": None, "near": [k], "generalizes": True}


def _fold_rates(
    X, runs: list, held: list, kept: dict | None, zero_weight: float, seed: int
) -> tuple:
    """``(kind, rates, bag)``: the ``(kind, rates)`` of
    :func:`banmf.selection.predictor.choose_over_folds` for the fold fits ``runs``, each scored on its
    fold's cells (``held``, each zero among them standing for ``zero_weight`` zeros) by every
    kind of predictor its starts give (``kept``, from
    :func:`banmf.selection.predictor.keeping_starts`), or by W⊗H alone (``kept`` None: the kind is
    "product"); and where that kind is one of :data:`REGULARIZED_KINDS`, the fold fits'
    predictor (:func:`banmf.selection.predictor.fold_predictor`, its report's halves drawn with
    ``seed``), else None."""
    ones, m = cell_keys(X), X.shape[1]
    candidates, truths = [], []
    for est, cells in zip(runs, held):
        keys = cell_keys(cells)
        rows, cols = keys // m, keys % m
        if kept is None:
            # W⊗H's 0/1 guesses as they are: one byte a cell, every fold's kept at once.
            candidates.append({"product": predict_cells(est.W_, est.components_, rows, cols)})
        else:
            candidates.append(candidate_scores(kept[est], est.W_, est.components_, rows, cols))
        truths.append(in_sorted(keys, ones))
    kind, rates = choose_over_folds(candidates, truths, zero_weight)
    if kept is None or kind not in REGULARIZED_KINDS:
        return kind, rates, None
    order = np.random.default_rng(seed).permutation(sum(len(t) for t in truths))
    members = [kept[est][kind] for est in runs]
    return kind, rates, fold_predictor(kind, members, candidates, truths, zero_weight, order)


def _check_folds(folds: int, ones: int, criteria) -> None:
    """Refuse more folds than X's observed ``ones`` fill with :data:`MIN_FOLD_ONES` each."""
    most = ones // MIN_FOLD_ONES
    if most < 2:
        asked = " and ".join(repr(c) for c in criteria if c in ("cv", "stability"))
        need = f"which need at least 2 folds of {MIN_FOLD_ONES} ones each"
        raise InputError(
            f"X has {ones} observed ones: too few for {asked}, {need}; pass criteria=['mdl']",
            command_line=f"the input has {ones} observed ones: too few for --criteria "
            f"{asked.replace(chr(39), '').replace(' and ', ',')}, {need}; pass --criteria mdl",
        )
    if folds > most:
        need = f"each fold must hold at least {MIN_FOLD_ONES} of its {ones} observed ones"
        raise InvalidParameterError(
            f"folds={folds} is more than X supports: {need}, so at most {most} folds; pass "
            f"folds <= {most}",
            command_line=f"--folds {folds} is more than the input supports: {need}, so at most "
            f"{most} folds; pass --folds {most} or fewer",
        )


class _FitsProgress:
    """Called as each fit of rank k ends: a ``"fit_done"`` record of the ``banmf.progress``
    logger (DEBUG, for a progress line) and a ``"fits"`` one (INFO, at most every
    :data:`FITS_EVERY_SECONDS` and not before), each with ``k``, ``fits_done`` and
    ``n_fits``."""

    def __init__(self, k: int, n_fits: int):
        self.k, self.n_fits, self.done, self.last = k, n_fits, 0, time.monotonic()

    def __call__(self) -> None:  # in the calling thread (banmf.runtime.runner), one fit at a time
        self.done += 1
        fields = {"k": self.k, "fits_done": self.done, "n_fits": self.n_fits}
        if _progress.isEnabledFor(logging.DEBUG):
            _progress.debug(
                "k=%d: fit %d/%d done",
                self.k,
                self.done,
                self.n_fits,
                extra={"banmf": {"event": "fit_done", **fields}},
            )
        now = time.monotonic()
        if now - self.last < FITS_EVERY_SECONDS:
            return
        self.last = now
        if _progress.isEnabledFor(logging.INFO):
            _progress.info(
                "k=%d: %d/%d fits done",
                self.k,
                self.done,
                self.n_fits,
                extra={
                    "banmf": {
                        "event": "fits",
                        "k": self.k,
                        "fits_done": self.done,
                        "n_fits": self.n_fits,
                    }
                },
            )


def _edge(best: int, ks: list) -> str | None:
    """Words for a choice at the edge of the ranks tried (the best may lie beyond), or None."""
    if best == ks[-1]:
        return f"k={best} is the largest rank tried: try larger k"
    if best == ks[0] and best > 1:
        return f"k={best} is the smallest rank tried: try smaller k"
    return None


def _evidence(k, errors, bits, held_err, held_se, stable, kinds, fold_err) -> dict:
    """One k's row of :meth:`RankSelection.to_dict`: the criteria it has (and the predictor
    that scored its held-out error, if one did)."""
    row = {"k": k, "training_error": errors[k]}
    if k in bits:
        row["description_length"] = bits[k]
    if k in held_err:
        row["held_out_error"], row["held_out_se"] = held_err[k], held_se[k]
    if k in fold_err:
        row["fold_errors"] = list(fold_err[k])
    if k in kinds:
        row["predictor"] = kinds[k]
    if k in stable:
        row["stability"] = stable[k]
    return row


def _patience_from(curves: _Curves, settings: _Settings, against) -> int | None:
    """The rank the patience of :func:`select_rank_of` counts from: of the criteria's curves
    so far (``bits``, ``held_err``; the empty ones say nothing), the latest rank one of them
    would choose by its lowest point, or None when no curve has a point. With ``cv_margin``
    the held-out curve's rank is the one :func:`_cv_choice` takes: with ranks scored by a
    predictor (``kinds``) the one :func:`margin_choice` takes, which may lie past its lowest
    point (counting from the lowest, the scan would stop before the farther near-lowest ranks
    that rule could take); with ``against``, the smallest rank while none beats the trivial
    predictors, so that on data without structure the scan stops ``patience`` ranks in."""
    bits, held_err = curves.bits, curves.held_err
    chosen = [min(bits, key=lambda k: (bits[k], k))] if bits else []
    if held_err and settings.margin_rule:
        chosen.append(curves.cv_choice(settings, against)["k"])
    elif held_err:
        chosen.append(min(held_err, key=lambda k: (tie(held_err[k]), k)))
    return max(chosen, default=None)


# Its public home, where the API reference documents it (and where pickles name it): the
# machinery lives here, below the models, only so that n_components="auto" needs no import of
# the method registry.
RankSelection.__module__ = "banmf.model_selection"
