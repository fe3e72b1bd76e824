"""The predictor of unknown cells a fit chooses (docs/missing.md, "The predictor"): a raw
score per cell from the fit's factors, the threshold that turns it into a 0/1 guess, and the
calibration that turns it into a probability, all chosen on observed cells held out from an
inner fit.

A leaf: it knows numpy and the Boolean helpers only, so that the result type can hold one.
"""

from __future__ import annotations

import contextlib
import contextvars
from dataclasses import dataclass, field

import numpy as np

from ..data.masks import product_at

#: The kinds of predictor, in the order a tie on the held-out cells is broken: the kept start's
#: product, the share of the starts whose product is 1, the NMF start's continuous product, and
#: the trivial predictor that reads no factor, the column majority (a tie with it goes to the
#: factors: they predict as well as the data's column shares do).
KINDS = ("product", "vote", "nmf", "majority")
#: The kind that predicts a cell by its column's majority of observed values alone: what a
#: factorization must beat for its factors to say anything about the unknown cells.
MAJORITY = "majority"
#: The kind of predictor of ``n_components="auto"`` with unknown cells: the rank selection's
#: fold fits at the chosen rank, each scored by the kind that scored that rank, their
#: calibrated probabilities averaged (:func:`fold_predictor`).
FOLDS = "folds"
#: Score bins of the calibration (at most; fewer where the score takes fewer values).
CALIBRATION_BINS = 10
#: Reliability bins of the calibration report: equal widths of [0, 1].
REPORT_BINS = 10
#: Cells scored at a time (bounds the n·k temporaries of the continuous product).
_CHUNK = 1 << 18


@dataclass(frozen=True, eq=False)
class Predictor:
    """How a fit predicts unknown cells: ``score(cell) > threshold``.

    Attributes
    ----------
    kind : {"product", "vote", "nmf", "majority", "folds"}
        "product": the Boolean product ``W⊗H`` of the kept start (the score is 0 or 1).
        "vote": the share of the fit's starts whose Boolean product is 1 at the cell.
        "nmf": the NMF start's balanced continuous product ``(W H)[i, j]``.
        "majority": the share of ones among the cell's column's observed cells
        (:func:`column_shares`), thresholded at one half: the column majority, which reads no
        factor.
        "folds" (``n_components="auto"``): the mean of the calibrated probabilities of the
        rank selection's fold fits at the chosen rank, each a predictor of ``member_kind``
        ("vote" or "nmf"); the score is itself a probability.
    threshold : float
        A cell is predicted 1 when its score is above it (strictly).
    edges, probabilities : ndarray
        The calibration: a score in bin ``searchsorted(edges, score, side="right")`` has
        probability ``probabilities[bin]`` of being 1 (nondecreasing in the score). For
        "folds", the calibration of each member's score.
    report : dict
        What the choice saw on the held-out cells (:func:`choose`).
    factors : tuple of ndarray
        What the score needs besides the result's W and H: ``(Ws, Hs)`` stacked Boolean factors
        of the starts ("vote"), ``(W, H)`` continuous factors ("nmf"), ``(shares,)`` the
        columns' shares of ones, of shape (m,) ("majority"), none ("product"); for
        "folds", the members' factors stacked (every member's starts, or one continuous
        pair each).
    member_kind : str
        "folds": the kind of each member ("" otherwise).
    sizes : tuple of int
        "folds": how many of the stacked factors each member holds, in order (every member's
        starts for "vote", 1 each for "nmf"; empty otherwise).
    """

    kind: str
    threshold: float
    edges: np.ndarray
    probabilities: np.ndarray
    report: dict = field(default_factory=dict)
    factors: tuple = ()
    member_kind: str = ""
    sizes: tuple = ()

    def members(self) -> list:
        """A "folds" predictor's members, each a :class:`Predictor` of :attr:`member_kind`
        with this calibration and its own factors."""
        Ws, Hs = self.factors
        at = np.cumsum((0, *self.sizes))
        return [
            Predictor(
                self.member_kind,
                self.threshold,
                self.edges,
                self.probabilities,
                factors=(Ws[a:b], Hs[a:b]) if self.member_kind == "vote" else (Ws[a], Hs[a]),
            )
            for a, b in zip(at[:-1], at[1:])
        ]

    @property
    def votes(self) -> bool:
        """Whether :attr:`factors` are the starts' stacked Boolean factors ("vote", and
        "folds" of votes)."""
        return "vote" in (self.kind, self.member_kind)

    def boolean_factors(self, W, H) -> list:
        """Every pair of Boolean factors a cell needs a one of in its product to score above
        0: each start's (:attr:`votes`), else the result's ``(W, H)``."""
        return list(zip(*self.factors)) if self.votes else [(W, H)]

    def score(self, W, H, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """The raw score at the trusted cells ``(rows[q], cols[q])``; ``W`` and ``H`` are the
        result's Boolean factors (read by "product" only)."""
        if self.kind == FOLDS:
            members = self.members()
            total = np.zeros(len(rows), dtype=np.float64)
            for member in members:
                total += member.predict_proba(W, H, rows, cols)
            return total / len(members)
        if self.kind == "product":
            return product_at(W, H, rows, cols).astype(np.float64)
        if self.kind == MAJORITY:
            return np.asarray(self.factors[0], dtype=np.float64)[cols]
        if self.kind == "vote":
            Ws, Hs = self.factors
            votes = np.zeros(len(rows), dtype=np.float64)
            for Wi, Hi in zip(Ws, Hs):
                votes += product_at(Wi, Hi, rows, cols)
            return votes / len(Ws)
        Wc, Hc = self.factors
        out = np.empty(len(rows), dtype=np.float64)
        for s in range(0, len(rows), _CHUNK):
            r, c = rows[s : s + _CHUNK], cols[s : s + _CHUNK]
            out[s : s + _CHUNK] = np.einsum("qk,kq->q", Wc[r], Hc[:, c])
        return out

    def predict(self, W, H, rows, cols) -> np.ndarray:
        """The 0/1 guess (bool) at the trusted cells."""
        return self.score(W, H, rows, cols) > self.threshold

    def predict_proba(self, W, H, rows, cols) -> np.ndarray:
        """The calibrated probability of a one at the trusted cells."""
        return self.calibrated(self.score(W, H, rows, cols))

    def calibrated(self, scores: np.ndarray) -> np.ndarray:
        """The calibrated probability of raw ``scores`` (a "folds" score is one already)."""
        if self.kind == FOLDS:
            return np.asarray(scores, dtype=np.float64)
        return self.probabilities[np.searchsorted(self.edges, scores, side="right")]

    def chosen_on(self) -> str:
        """Where its :attr:`report` was measured, in words."""
        cells = self.report["held_out_cells"]
        if self.report.get("source") == "rank selection":
            return (
                f"the {cells} observed cells of the rank selection's folds, where no rank "
                "predicted better than the column majority"
            )
        if self.kind == FOLDS:
            return (
                f"the {cells} observed cells of the rank selection's folds, each scored by the "
                f"one of the {self.report['members']} fold fits ({self.member_kind}) that left "
                "it out"
            )
        return f"{cells} observed cells left out of an inner fit"

    def to_json(self) -> dict:
        """Everything but the factors, as JSON (a result file's metadata)."""
        out = {
            "kind": self.kind,
            "threshold": float(self.threshold),
            "edges": [float(e) for e in self.edges],
            "probabilities": [float(p) for p in self.probabilities],
            "report": self.report,
        }
        if self.kind == FOLDS:
            out.update(member_kind=self.member_kind, sizes=[int(s) for s in self.sizes])
        return out

    def __repr__(self) -> str:
        return f"Predictor({self.kind}, threshold={self.threshold:g})"


def best_threshold(
    scores: np.ndarray, truth: np.ndarray, zero_weight: float = 1.0
) -> tuple[float, float]:
    """``(threshold, errors)``: the threshold with the fewest errors of ``scores > threshold``
    against the 0/1 ``truth`` (ties: the one nearest 0.5), midway between two scores seen;
    a wrong zero counts ``zero_weight`` errors (the zeros are a sample, each standing for that
    many)."""
    order = np.argsort(scores, kind="stable")
    s, y = scores[order], truth[order].astype(np.int64)
    last = np.flatnonzero(np.append(s[1:] != s[:-1], True))  # the last cell of each value
    ones_below = np.cumsum(y)[last]  # ones at or below each value: predicted 0, wrong
    zeros_above = (len(y) - y.sum()) - (last + 1 - ones_below)  # zeros above: predicted 1
    errors = np.concatenate(
        [[zero_weight * (len(y) - y.sum())], ones_below + zero_weight * zeros_above]
    )
    values = s[last]
    cuts = np.concatenate([[values[0] - 1.0], (values[:-1] + values[1:]) / 2, [values[-1] + 1.0]])
    fewest = errors.min()
    tied = np.flatnonzero(errors == fewest)
    pick = tied[np.argmin(np.abs(cuts[tied] - 0.5))]
    return float(cuts[pick]), float(fewest)


def calibrate(
    scores: np.ndarray, truth: np.ndarray, zero_weight: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """``(edges, probabilities)``: histogram binning of ``scores`` (each distinct value, or
    up to :data:`CALIBRATION_BINS` quantile bins) made nondecreasing by pooling adjacent
    violators, the frequency of ones per bin, each zero counting ``zero_weight`` cells (a bin
    no cell fell in takes its left neighbour's, the first nonempty one's at the start)."""
    values = np.unique(scores)
    if len(values) <= CALIBRATION_BINS:
        edges = (values[:-1] + values[1:]) / 2
    else:
        inner = np.linspace(0, 1, CALIBRATION_BINS + 1)[1:-1]
        edges = np.unique(np.quantile(scores, inner))
    bins = np.searchsorted(edges, scores, side="right")
    y = truth.astype(np.float64)
    cells = np.bincount(bins, weights=cell_weights(truth, zero_weight), minlength=len(edges) + 1)
    ones = np.bincount(bins, weights=y, minlength=len(edges) + 1)
    seen = np.flatnonzero(cells)
    pooled = _pool_adjacent_violators(ones[seen] / cells[seen], cells[seen])
    probabilities = np.empty(len(cells))
    probabilities[seen] = pooled
    # An empty bin takes the nearest nonempty one on its left (the first one's at the start).
    fill = np.maximum.accumulate(np.where(cells > 0, np.arange(len(cells)), -1))
    probabilities = probabilities[np.where(fill < 0, seen[0], fill)]
    return edges, probabilities


def _pool_adjacent_violators(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The nondecreasing sequence nearest ``values`` in weighted least squares."""
    blocks: list[list[float]] = []  # [mean, weight, length]
    for v, w in zip(values, weights):
        blocks.append([v, w, 1])
        while len(blocks) > 1 and blocks[-2][0] > blocks[-1][0]:
            v2, w2, n2 = blocks.pop()
            v1, w1, n1 = blocks[-1]
            blocks[-1] = [(v1 * w1 + v2 * w2) / (w1 + w2), w1 + w2, n1 + n2]
    return np.concatenate([np.full(int(n), v) for v, _, n in blocks])


def zero_sample(zeros: int, most: int) -> tuple[int, float]:
    """``(drawn, zero_weight)``: how many of ``zeros`` observed zeros to hold out when at most
    ``most`` are (on large sparse data all the zeros, or a share of them, are a share of n·m
    cells), and how many of them each one drawn stands for (1.0 when all are drawn): the
    inner fit's held-out cells and a rank selection's folds score their zeros so."""
    drawn = min(zeros, most)
    return drawn, zeros / drawn if drawn < zeros else 1.0


def cell_weights(truth: np.ndarray, zero_weight: float) -> np.ndarray:
    """Each held-out cell's weight: 1 for a one, ``zero_weight`` for a zero."""
    return np.where(truth, 1.0, zero_weight)


def error_rate(guess: np.ndarray, truth: np.ndarray, zero_weight: float = 1.0) -> float:
    """The share of the cells whose 0/1 ``guess`` is not their ``truth``, each zero counting
    ``zero_weight`` cells (the plain error rate with 1)."""
    wrong = guess != truth
    ones = int(np.count_nonzero(truth))
    missed = int(np.count_nonzero(wrong & truth))
    false = int(np.count_nonzero(wrong)) - missed
    return (missed + zero_weight * false) / (ones + zero_weight * (len(truth) - ones))


def reliability(probabilities: np.ndarray, truth: np.ndarray, zero_weight: float = 1.0) -> dict:
    """The calibration report of ``probabilities`` against the 0/1 ``truth``, each zero
    counting ``zero_weight`` cells: the Brier score and, per nonempty bin of
    :data:`REPORT_BINS` equal widths, its cells (as drawn), mean probability and frequency of
    ones."""
    y = truth.astype(np.float64)
    weights = cell_weights(truth, zero_weight)
    bins = np.minimum((probabilities * REPORT_BINS).astype(np.int64), REPORT_BINS - 1)
    rows = []
    for b in np.unique(bins):
        inside = bins == b
        rows.append(
            {
                "bin": [b / REPORT_BINS, (b + 1) / REPORT_BINS],
                "cells": int(inside.sum()),
                "mean_probability": float(
                    np.average(probabilities[inside], weights=weights[inside])
                ),
                "frequency": float(np.average(y[inside], weights=weights[inside])),
            }
        )
    brier = float(np.average((probabilities - y) ** 2, weights=weights))
    return {"brier": brier, "bins": rows}


def kind_threshold(
    kind: str, scores: np.ndarray, truth: np.ndarray, zero_weight: float = 1.0
) -> tuple[float, float]:
    """``(threshold, errors)`` of a kind of predictor on held-out cells, a wrong zero counting
    ``zero_weight`` errors: "product" and "majority" keep 0.5 (W⊗H itself, the column
    majority), the others take :func:`best_threshold`."""
    if kind in ("product", MAJORITY):
        wrong = (scores > 0.5) != truth
        return 0.5, float(np.sum(cell_weights(truth, zero_weight)[wrong]))
    return best_threshold(scores, truth, zero_weight)


def column_shares(X, unknown) -> np.ndarray:
    """Each column's share of ones among its observed cells, of shape (m,) (0 for a column
    with no observed cell): the score of the "majority" kind. ``X`` is a canonical support
    mask of the observed ones, ``unknown`` its :class:`banmf.data.masks.Unknown` or None."""
    n, m = X.shape
    ones = np.bincount(X.indices, minlength=m).astype(np.float64)
    if unknown is None:
        cells = np.full(m, float(n))
    elif unknown.observed:  # the observed zeros are listed
        cells = ones + np.bincount(unknown.cells.indices, minlength=m)
    else:
        cells = n - np.bincount(unknown.cells.indices, minlength=m).astype(np.float64)
    return np.divide(ones, cells, out=np.zeros(m), where=cells > 0)


def majority_predictor(X, unknown, report: dict | None = None) -> Predictor:
    """The "majority" predictor of the data's observed ones ``X`` and unknown cells
    ``unknown`` (:func:`column_shares`): a column's unknown cells are 1 where most of its
    observed cells are. Its calibration is the score itself (a column's share of ones is the
    frequency of ones among its observed cells)."""
    shares = column_shares(X, unknown)
    values = np.unique(shares)
    edges = (values[:-1] + values[1:]) / 2
    return Predictor(MAJORITY, 0.5, edges, values, report or {}, (shares,))


def candidate_scores(starts: dict, W, H, rows: np.ndarray, cols: np.ndarray) -> dict:
    """kind → the raw scores at the cells ``(rows[q], cols[q])`` of every kind of predictor a
    fit's ``starts`` give (kind → its :attr:`Predictor.factors`); ``W`` and ``H`` are the
    fit's Boolean factors."""
    return {
        kind: Predictor(kind, 0.5, np.zeros(0), np.zeros(1), factors=factors).score(
            W, H, rows, cols
        )
        for kind, factors in starts.items()
    }


def choose(
    candidates: dict, truth: np.ndarray, order: np.ndarray, zero_weight: float = 1.0
) -> tuple:
    """``(kind, threshold, edges, probabilities, report)``: the kind of predictor, its
    threshold, its calibration (:func:`calibrate`) and the report, from the raw ``candidates``
    (kind → scores on the held-out cells) and the held-out cells' 0/1 ``truth``, where each
    zero stands for ``zero_weight`` zeros (a sample of them, on large sparse data).

    The kind with the fewest held-out errors wins (ties: in :data:`KINDS` order; "product"
    keeps the threshold 0.5, W⊗H itself). The report's reliability is out of sample: the
    calibration is fitted on one half of the cells (``order``, a permutation of them, splits
    them) and scored on the other, both ways round; the predictor's own calibration is then
    fitted on them all.
    """
    thresholds, errors = {}, {}
    for kind in KINDS:
        if kind in candidates:
            thresholds[kind], errors[kind] = kind_threshold(
                kind, candidates[kind], truth, zero_weight
            )
    kind = min(errors, key=lambda name: (errors[name], KINDS.index(name)))
    scores = candidates[kind]
    out_of_sample = np.empty(len(scores))
    halves = np.array_split(order, 2)
    for fit, score in (halves, halves[::-1]) if len(order) > 1 else ((order, order),):
        edges, probs = calibrate(scores[fit], truth[fit], zero_weight)
        out_of_sample[score] = probs[np.searchsorted(edges, scores[score], side="right")]
    ones = int(np.count_nonzero(truth))
    weighted = ones + zero_weight * (len(truth) - ones)
    report = {
        "held_out_cells": len(truth),
        "zero_weight": zero_weight,
        "error_rates": {name: errors[name] / weighted for name in errors},
        **reliability(out_of_sample, truth, zero_weight),
    }
    return kind, thresholds[kind], *calibrate(scores, truth, zero_weight), report


def choose_over_folds(candidates: list, truths: list, zero_weight: float = 1.0) -> tuple[str, list]:
    """``(kind, rates)``: the kind of predictor that scores a rank's fold fits in a rank
    selection for completion (:func:`banmf.model_selection.select_rank_of`), and each fold's
    held-out error rate by it. ``candidates`` holds each fold fit's raw scores (kind → its
    scores on the fold's held-out cells, :func:`candidate_scores`), ``truths`` those cells'
    0/1 values; each zero among them stands for ``zero_weight`` zeros (a sample of them, on
    large sparse data: a wrong zero counts that many errors, in the threshold and the rates).

    Each kind that every fold fit gives is scored with one threshold over the cells of all
    the folds (:func:`kind_threshold` on them pooled), and the kind with the lowest mean error
    rate over the folds wins (ties: in :data:`KINDS` order). One kind and one threshold per
    rank, chosen on every held-out cell: the optimism of choosing them on the cells they are
    scored on is small, and alike at every rank, where a threshold per fold would fit each
    fold's few cells.
    """
    truth = np.concatenate(truths)
    rates = {}
    for kind in KINDS:
        if not all(kind in scores for scores in candidates):
            continue
        threshold, _ = kind_threshold(
            kind, np.concatenate([scores[kind] for scores in candidates]), truth, zero_weight
        )
        rates[kind] = [
            error_rate(scores[kind] > threshold, fold, zero_weight)
            for scores, fold in zip(candidates, truths)
        ]
    kind = min(rates, key=lambda name: (float(np.mean(rates[name])), KINDS.index(name)))
    return kind, rates[kind]


def fold_predictor(
    kind: str,
    members: list,
    candidates: list,
    truths: list,
    zero_weight: float,
    order: np.ndarray,
) -> Predictor:
    """The "folds" predictor of a rank selection's fold fits at one rank (:data:`FOLDS`).
    ``members`` holds each fold fit's factors of ``kind`` ("vote" or "nmf";
    :attr:`Predictor.factors`), ``candidates`` each one's raw scores on its own fold's held-out
    cells (kind → scores, :func:`candidate_scores`), ``truths`` those cells' 0/1 values (each
    zero standing for ``zero_weight`` zeros) and ``order`` a permutation of them all.

    The members share one calibration, fitted on every fold's cells, each scored by the member
    that never saw them; the predictor averages the members' calibrated probabilities and
    predicts 1 above one half, where a calibrated probability says a one is likelier. Why:
    each fold fit lands in its own local optimum, and at neighbouring ranks those differ on the
    unknown cells by more than the folds can tell apart; their mean varies less than any one
    fit (docs/missing.md). The report is :func:`choose`'s for ``kind`` (a member's held-out
    error rate at its best threshold; the reliability of the members' calibrated
    probabilities, out of sample) with the number of ``members``.
    """
    scores = np.concatenate([c[kind] for c in candidates])
    _, _, edges, probabilities, report = choose(
        {kind: scores}, np.concatenate(truths), order, zero_weight
    )
    if kind == "vote":  # every member's starts, one after another
        sizes = tuple(len(f[0]) for f in members)
        stacked = tuple(np.concatenate([f[i] for f in members]) for i in (0, 1))
    else:
        sizes = (1,) * len(members)
        stacked = tuple(np.stack([f[i] for f in members]) for i in (0, 1))
    report = {**report, "members": len(members)}
    return Predictor(FOLDS, 0.5, edges, probabilities, report, stacked, kind, sizes)


_choosing: contextvars.ContextVar[bool] = contextvars.ContextVar("banmf_predictor", default=True)


def choosing() -> bool:
    """Whether a fit with unknown cells chooses its predictor here (not inside
    :func:`without_choice`)."""
    return _choosing.get()


@contextlib.contextmanager
def without_choice():
    """Fits in this scope keep W⊗H as their predictor and choose none: fits scored by their
    factors alone (a rank selection's), and those of :func:`keeping_starts`."""
    token = _choosing.set(False)
    try:
        yield
    finally:
        _choosing.reset(token)


_kept: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "banmf_predictor_starts", default=None
)


@contextlib.contextmanager
def keeping_starts():
    """Fits in this scope choose no predictor (as in :func:`without_choice`), and a fit with
    unknown cells leaves in the dict this yields, under its estimator, the factors of each kind
    of predictor its starts give (kind → :attr:`Predictor.factors`, :func:`hand_over`): the
    inner fit of the choice, and the fold fits of a rank selection scored by their predictor.
    Nothing is kept on the estimators; the fits' threads share the dict (they run in a copy
    of this context)."""
    kept: dict = {}
    token = _kept.set(kept)
    try:
        with without_choice():
            yield kept
    finally:
        _kept.reset(token)


def hand_over(estimator, starts: dict) -> None:
    """Give a fit's ``starts`` to the :func:`keeping_starts` scope it runs in, if any."""
    kept = _kept.get()
    if kept is not None:
        kept[estimator] = starts
