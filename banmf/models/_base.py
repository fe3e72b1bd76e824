"""Estimator plumbing shared by every method: declared parameters, the fit's preamble,
fitted attributes, ``transform``/``score``, repr."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import logging
import sys
import time
from collections.abc import Mapping
from numbers import Integral
from typing import ClassVar

import numpy as np

from ..data.dataset import Dataset
from ..data.params import BOOLEAN, N_JOBS, RANDOM_STATE, Interval, Options, validate_params
from ..data.validation import check_n_components
from ..engine.polish import EXACT_MAX_K, polish_factors, polish_rows, resolve_polish
from ..exceptions import InputError, InvalidParameterError, NotFittedError, warn_user
from ..result import relative_error
from ..runtime.memory import check_memory
from ..runtime.threads import serial_blas, thread_budget
from ..selection.mdl import description_bits
from ..selection.ranks import MIN_FOLD_ONES, select_rank_of

#: Bytes per factor entry of :meth:`BaseFactorization._fit_bytes`'s estimate: the Boolean
#: factors, a float copy of them and room for temporaries.
FACTOR_ENTRY_BYTES = 32

_logger = logging.getLogger("banmf")

#: ``n_components="auto"``: the largest rank tried (less when X has fewer rows or columns), and
#: the folds of its cross-validation (fewer when X has too few observed ones for that many).
#: Ten, not five: a fold's fit sees 90 % of the cells the final fit sees, not 80 %, and fewer
#: cells support fewer factors; with five, the k chosen predicted hidden votes and LUCAP0 cells
#: worse than k = 5 did (docs/choosing-k.md).
AUTO_MAX_K, AUTO_FOLDS = 20, 10
#: ``n_components="auto"`` with unknown cells, the folds scored by the predictor: the largest
#: rank whose fold errors exceed the lowest rank's by at most this many standard errors of
#: their differences, paired fold by fold, among those a vote or NMF predictor scored
#: (:func:`banmf.selection.ranks.margin_choice`). One, the mirror of the
#: one-standard-error rule: that rule guards W⊗H, whose error rises with k; a vote over the
#: starts does not, and its curve is flat over a range of ranks whose lowest point is a draw
#: (docs/choosing-k.md).
AUTO_MARGIN = 1.0

#: Constraints of the parameters every method has (:mod:`banmf.data.params`).
COMMON_CONSTRAINTS = {
    "n_components": [Interval(Integral, 1, None), Options("auto")],
    "polish": [BOOLEAN, Options("auto", "exact", "flip")],
    "n_jobs": [N_JOBS],
    "random_state": [RANDOM_STATE],
    "verbose": [BOOLEAN, Interval(Integral, 0, None)],
}

#: The defaults of the parameters most methods share, after their own (:func:`declared_init`):
#: no polish, the environment's thread budget, no seed, silent.
COMMON_DEFAULTS = {"polish": False, "n_jobs": None, "random_state": None, "verbose": 0}


#: Set while ``n_components="auto"`` chooses k (:meth:`BaseFactorization._choose_rank`), in the
#: threads of its fits too (they run in a copy of the context).
_choosing_rank: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "banmf_choosing_rank", default=False
)


def _not_a_selection_fit(record: logging.LogRecord) -> bool:
    """Whether a record is not one of the selection's fits' starts (at ``verbose=1`` the
    selection says its ranks; eleven fits a rank, each with its starts, would bury them)."""
    return not (_choosing_rank.get() and "start" in getattr(record, "banmf", {}))


@contextlib.contextmanager
def _verbosity(verbose):
    """With ``verbose`` > 0, show the ``banmf`` logger's records on stderr for the duration:
    phases and results (1; of ``n_components="auto"``'s fits, only the ranks), and every
    progress record, iterations included (2 and more)."""
    if not verbose:
        yield
        return
    logger = logging.getLogger("banmf")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("banmf: %(message)s"))
    if verbose == 1:
        handler.addFilter(_not_a_selection_fit)
    saved = logger.level
    logger.setLevel(logging.DEBUG if verbose > 1 else logging.INFO)
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved)


def budgeted(method):
    """Run an estimator's method (``fit``, ``transform``) with its parameters checked against
    their declared constraints, within its ``n_jobs`` thread budget
    (:func:`banmf.runtime.threads.thread_budget`), numpy's BLAS on one thread
    (:func:`banmf.runtime.threads.serial_blas`: OpenBLAS splits a long product's sums between its
    threads, so a Gram matrix of 30,000 rows, or the dense baselines' products, would
    otherwise come out with other last bits on another number of BLAS threads) and, with
    ``verbose``, with its progress on stderr."""

    @functools.wraps(method)
    def within_budget(self, *args, **kwargs):
        validate_params(
            self._parameter_constraints, self.get_params(deep=False), type(self).__name__
        )
        with thread_budget(self.n_jobs), serial_blas(), _verbosity(self.verbose):
            return method(self, *args, **kwargs)

    return within_budget


def declared_init(defaults: Mapping, first: str = "n_components"):
    """An ``__init__`` for estimators that share their parameters: it stores its arguments
    as they are, and its signature is the one ``defaults`` (name → default, in order)
    declares, ``first`` positional and the others keyword-only, as scikit-learn's
    ``get_params`` and ``clone`` read it (and ``help`` and the docs show it)."""
    kinds = {first: inspect.Parameter.POSITIONAL_OR_KEYWORD}
    signature = inspect.Signature(
        [
            inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            *(
                inspect.Parameter(
                    name, kinds.get(name, inspect.Parameter.KEYWORD_ONLY), default=default
                )
                for name, default in defaults.items()
            ),
        ]
    )
    names = tuple(defaults)

    def __init__(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        for name in names:
            setattr(self, name, bound.arguments[name])

    __init__.__signature__ = signature
    return __init__


def refuse_observed(data: Dataset, method: str) -> None:
    """Refuse the few-observed-cells form for a greedy method that treats unknown cells as
    "don't care": nearly every cell would then be allowed in a factor."""
    if data.unknown is not None and data.unknown.observed:
        raise InputError(
            f"{method} treats unknown cells as 'don't care'; with observed= (most cells "
            "unknown) a factor could take almost any cell. Give missing= (the unknown cells) "
            "instead, or use banmf or nmf, which fit the observed cells alone"
        )


def fit_inner(estimator, data: Dataset) -> bool:
    """Fit an estimator that a method runs inside its own fit (an NMF start) on its data.
    Returns whether the first Ctrl-C cut it short, leaving its best result so far; a Ctrl-C
    that left no result (or a second one) propagates."""
    try:
        estimator.fit(data)
    except KeyboardInterrupt:
        if not hasattr(estimator, "components_"):
            raise
        return True
    return False


class BaseFactorization:
    """The base of every method, scikit-learn style: ``__init__`` only stores its keyword
    arguments; ``fit`` checks them against ``_parameter_constraints`` (one list of allowed
    kinds per parameter, :mod:`banmf.data.params`) as it begins (:meth:`_begin`).

    Every method takes ``n_components="auto"``: its fit first chooses k, the rank from 1 to
    :data:`AUTO_MAX_K` (20, at most min(n, m)) whose fits predict held-out observed cells
    best (:meth:`_choose_rank`), then fits at that k as with ``n_components=k``; the
    selection is kept as ``rank_selection_`` (a :class:`banmf.RankSelection`) and the k as
    ``n_components_``."""

    _parameter_constraints: ClassVar[dict] = {}

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values() if p.name != "self"]

    def get_params(self, deep: bool = True) -> dict:
        """Parameters of this estimator, as passed to ``__init__`` (with ``deep``, also those
        of parameters that are estimators themselves, as ``name__param``)."""
        out = {}
        for name in self._param_names():
            value = getattr(self, name)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update({f"{name}__{key}": v for key, v in value.get_params().items()})
            out[name] = value
        return out

    def set_params(self, **params) -> BaseFactorization:
        """Set parameters (``name__param`` reaches into a parameter that is an estimator);
        unknown names raise ``ValueError``."""
        valid = set(self._param_names())
        for key, value in params.items():
            name, _, sub = key.partition("__")
            if name not in valid:
                raise InvalidParameterError(
                    f"{type(self).__name__} has no parameter {name!r}; valid: {sorted(valid)}"
                )
            if sub:
                getattr(self, name).set_params(**{sub: value})
            else:
                setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        defaults = {
            p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()
        }
        changed = [
            f"{k}={v!r}"
            for k, v in self.get_params(deep=False).items()
            if not _same(v, defaults.get(k))
        ]
        return f"{type(self).__name__}({', '.join(changed)})"

    def _begin(self, X, missing=None, observed=None):
        """The preamble of every fit (its parameters are checked by :func:`budgeted`): the
        clock, the data built once (:meth:`banmf.io.Dataset.of`: a Dataset passes as it is)
        and the rank (None if the method chooses it; "auto": chosen by :meth:`_choose_rank`;
        else capped at min(n, m) by :func:`check_n_components`; then refused at once if the
        fit's memory, :meth:`_fit_bytes`, exceeds what is available). Returns
        ``(data, k, start)``."""
        start = time.perf_counter()
        data = Dataset.of(X, missing, observed)
        X, unknown = data.X, data.unknown
        if unknown is not None and data.n_observed == 0:
            n, m = X.shape
            how = "missing= marks all" if not unknown.observed else "observed= marks none of the"
            raise InputError(
                f"every cell of X is unknown ({how} {n}×{m} cells): there is nothing to fit",
                command_line=f"every cell of the input is unknown ({_unknown_words(unknown)} "
                f"{n}×{m} cells): there is nothing to fit",
            )
        if data.ones_given and not X.nnz:
            warn_user(
                f"the unknown cells hide all {data.ones_given} ones of X: only zeros are observed"
            )
        if isinstance(self.n_components, str):  # "auto", the one string its constraints allow
            k = self._choose_rank(data)
        else:
            vars(self).pop("rank_selection_", None)  # from an earlier fit with "auto"
            k = (
                None
                if self.n_components is None
                else check_n_components(self.n_components, X.shape)
            )
        if k is not None:
            n, m = X.shape
            check_memory(
                self._fit_bytes(data, k),
                f"{type(self).__name__}(n_components={k}) on a {n}×{m} matrix",
                "choose a smaller n_components",
            )
        return data, k, start

    def _choose_rank(self, data: Dataset) -> int:
        """The rank of ``n_components="auto"``: the k from 1 to :data:`AUTO_MAX_K` (at most
        min(n, m)) with the lowest held-out error rate, cross-validated over
        :data:`AUTO_FOLDS` folds of the observed cells (:func:`banmf.select_rank` with
        ``criteria=("cv",)`` and ``cv_rule="min"``), each fit this estimator with that k.
        On data with unknown cells, which the fit at the chosen k predicts by the predictor
        its starts give (BANMF's :attr:`predictor_`), the fold fits are scored by that
        predictor too (``RankSelection.predictor`` names it per k), not by W⊗H: the
        predictor favours larger k than W⊗H does. The selection is kept as
        ``rank_selection_``. A rank whose fold fits do not beat the trivial predictors (all
        zeros, the column majority) by a margin is no candidate; when none does, k is the
        smallest rank tried (``RankSelection.generalizes`` is False).

        The first Ctrl-C during it keeps the best rank of those done: the model is the
        selection's fit at that rank to all observed cells (its predictor of unknown cells
        W⊗H), with ``interrupted_`` True and ``rank_selection_`` set, and KeyboardInterrupt
        is raised again; before the first rank is done it leaves the model unfitted."""
        n, m = data.shape
        folds = min(AUTO_FOLDS, data.nnz // MIN_FOLD_ONES)
        if folds < 2:
            raise InputError(
                f"n_components='auto' chooses k by the held-out error of at least 2 folds of "
                f"{MIN_FOLD_ONES} observed ones each, and X has {data.nnz} observed ones; give "
                "n_components",
                command_line=f"-k auto chooses k by the held-out error of at least 2 folds of "
                f"{MIN_FOLD_ONES} observed ones each, and the input has {data.nnz} observed "
                "ones; give -k a number",
            )
        # Every fit of the selection is this estimator at a fixed k (so none recurses), on its
        # share of the thread budget in force, silent (the selection reports the ranks).
        params = {**self.get_params(deep=False), "n_jobs": None, "verbose": 0}
        if "callback" in params:
            params["callback"] = None  # the user's callback follows the fit at the chosen k
        top = min(AUTO_MAX_K, n, m)
        _logger.info("n_components='auto': choosing k in 1..%d by held-out error", top)
        choosing = _choosing_rank.set(True)
        try:
            selection = select_rank_of(
                data,
                range(1, top + 1),
                type(self)(**params),
                criteria=("cv",),
                folds=folds,
                cv_rule="min",
                random_state=self.random_state,
                by_predictor=data.unknown is not None,
                cv_margin=AUTO_MARGIN,
            )
        finally:
            _choosing_rank.reset(choosing)
        if selection.interrupted:
            self._keep_selection_fit(selection)
            raise KeyboardInterrupt
        self.rank_selection_, k = selection, selection.best_k
        kind = (selection.predictor or {}).get(k)
        margin = selection.cv_margin
        if not selection.generalizes:
            how = "the smallest: no rank beats the trivial predictors, held-out error"
        elif margin is None or margin["k"] == margin["lowest_k"]:
            how = "the lowest held-out error"
        else:
            how = (
                f"the largest within {margin['margin']:g} SE of the lowest (k={margin['lowest_k']})"
            )
        _logger.info(
            "n_components='auto': k=%d, %s (%.4f%s) of k=1..%d",
            k,
            how,
            selection.held_out_error[k],
            f", by the {kind} predictor" if kind else "",
            selection.ks[-1],
        )
        return k

    def _keep_selection_fit(self, selection) -> None:
        """Become the fit of an interrupted selection at its best rank so far (the fitted
        attributes of its fit to all observed cells), marked interrupted."""
        k = selection.best_k
        fitted = selection.fits[k].estimator
        for name, value in vars(fitted).items():
            if name.endswith("_") and not name.startswith("_"):
                setattr(self, name, value)
        self.rank_selection_ = selection
        self.interrupted_ = True
        _logger.info(
            "n_components='auto' interrupted: keeping k=%d, the best of k=%s done, as the "
            "selection fitted it to all observed cells",
            k,
            ", ".join(map(str, selection.ks)),
        )

    def _fit_bytes(self, data: Dataset, k: int) -> int:
        """Estimated peak memory of a fit with k factors on ``data``, checked before anything
        of that size is allocated. Here the Boolean factors and a few copies of them, packed or
        as floats; a method that needs more says so by overriding this."""
        n, m = data.shape
        return FACTOR_ENTRY_BYTES * (n + m) * k

    def _set_result(
        self,
        data: Dataset,
        W,
        H,
        error: int,
        n_iter: int,
        start: float,
        interrupted: bool = False,
    ) -> None:
        """The fitted attributes every method shares (``start``: ``time.perf_counter()`` at fit;
        ``interrupted``: Ctrl-C cut the fit short and this is the best result so far)."""
        self._store_result(
            W, H, error, n_iter, start, interrupted, data.shape[1], data.nnz, data.n_observed
        )

    def _store_result(
        self,
        W,
        H,
        error: int,
        n_iter: int,
        start: float,
        interrupted: bool,
        n_features: int,
        nnz: int,
        n_observed: int,
    ) -> None:
        """:meth:`_set_result` from what it reads of X: its columns, its observed ones and
        its observed cells (for a fit that never holds X whole)."""
        self.interrupted_ = bool(interrupted)
        self.W_, self.components_ = W, np.ascontiguousarray(H)
        self.reconstruction_err_ = int(error)
        self.relative_error_ = relative_error(int(error), nnz)
        self.n_iter_ = int(n_iter)
        self.n_components_, self.n_features_in_, self.nnz_ = W.shape[1], n_features, nnz
        self.n_observed_ = n_observed
        self.fit_seconds_ = time.perf_counter() - start

    def _polish_method(self, k: int | None) -> str | None:
        """The ``polish`` parameter (checked against its constraints) as a :func:`banmf.polish`
        method, or None (off); ``k`` None: as many factors as the method finds."""
        value = self.polish
        if isinstance(value, (bool, np.bool_)):
            return "auto" if value else None
        if value == "exact" and k is None:
            raise InvalidParameterError(
                f"polish='exact' needs a fixed n_components <= {EXACT_MAX_K} (None may find "
                "more factors); use 'flip' or True"
            )
        if value == "exact" and k > EXACT_MAX_K:
            raise InvalidParameterError(
                f"polish='exact' needs n_components <= {EXACT_MAX_K}, got {k}; use 'flip' or True"
            )
        return value

    def _finish(
        self,
        data: Dataset,
        W,
        H,
        error: int,
        n_iter: int,
        start: float,
        method: str | None,
        interrupted: bool = False,
    ) -> None:
        """Polish (if ``method``) and set the fitted attributes; ``unpolished_err_`` keeps the
        error before the polish. After Ctrl-C (``interrupted``), the polish is left out and
        ``KeyboardInterrupt`` is raised again once the model is set: a loop of fits stops."""
        self.unpolished_err_ = int(error)
        self.polish_rounds_ = 0
        if method is not None and W.shape[1] > 0 and not interrupted:
            try:
                res = polish_factors(data, W, H, method)
                W, H, error, self.polish_rounds_ = res.W, res.H, res.error, res.rounds
            except KeyboardInterrupt:
                interrupted = True  # the first Ctrl-C: the unpolished factors stand
        self._set_result(data, W, H, error, n_iter, start, interrupted)
        if interrupted:
            raise KeyboardInterrupt

    def _conclude(
        self,
        data: Dataset,
        found: tuple,
        start: float,
        method: str | None,
        progress,
        interrupted: bool = False,
        cancelled: bool = False,
    ) -> None:
        """End a fit with the factors it found, ``(W, H, error, n_iter)``: polished (if
        ``method``) and set, its progress closed. After Ctrl-C (``interrupted``: raises
        ``KeyboardInterrupt`` once the model is set) or a cancel by :func:`banmf.fit_many`
        (``cancelled``: no exception) the factors so far stand unpolished and
        ``interrupted_`` is True."""
        W, H, error, n_iter = found
        if interrupted or cancelled:
            progress.done(error)
            self._finish(data, W, H, error, n_iter, start, None, interrupted)
            self.interrupted_ = True
            return
        if method is not None:
            progress.phase("polish")
        self._finish(data, W, H, error, n_iter, start, method)
        progress.done(self.reconstruction_err_)

    def fit_transform(self, X, y=None) -> np.ndarray:
        """Fit to X and return the Boolean W of shape (n, k)."""
        return self.fit(X).W_

    @budgeted
    def transform(self, X, *, missing=None, observed=None) -> np.ndarray:
        """Boolean W of shape (n', k) for rows X (n', m), with the fitted H held fixed: each
        row's factors are those that reconstruct its observed cells best (exactly, by trying
        every pattern, while that work is small: k ≤ 16 and :func:`banmf.polish`'s "auto" budget;
        else by single-factor changes from none). ``missing`` /
        ``observed`` mark unknown cells of X as in :meth:`fit`."""
        self._check_fitted()
        data = self._check_columns(X, missing, observed)
        k = self.components_.shape[0]
        W = np.zeros((data.shape[0], k), dtype=bool)
        if k:
            polish_rows(
                data,
                W,
                np.ascontiguousarray(self.components_.T),
                resolve_polish("auto", data.shape, data.nnz, k),
            )
        return W

    def score(self, X, y=None, *, missing=None, observed=None) -> float:
        """Minus the bits per observed cell to send the rows X by the fitted factors: minus
        ``description_length(X, transform(X), components_) / c``, c the observed cells of X
        (:func:`banmf.model_selection.description_length`: k, H, each row's factors and the
        errors, typed).

        Higher is better. Unlike the error, which more factors always lower, the bits rise
        again once a factor costs more than the errors it removes from rows it was not fitted
        to, so that scikit-learn's ``GridSearchCV`` over ``n_components`` needs no scorer: on
        planted data it finds the rank :func:`banmf.select_rank`'s "mdl" criterion finds. For
        the errors on held-out cells instead, see :func:`banmf.model_selection.held_out_scores`.

        Parameters
        ----------
        X : array-like or sparse of shape (n', m)
            Rows with the fitted model's columns (e.g. a held-out fold).
        y : ignored
        missing, observed : array-like or sparse of shape (n', m), optional
            Unknown cells of X, as in :meth:`fit`: neither sent nor counted.

        Returns
        -------
        float
            Negative: bits per observed cell, with the sign turned for "higher is better".
        """
        self._check_fitted()
        data = self._check_columns(X, missing, observed)
        W = self.transform(data)
        return -sum(description_bits(data, W, self.components_)) / max(data.n_observed, 1)

    def _check_columns(self, X, missing=None, observed=None) -> Dataset:
        """The data X (:meth:`banmf.io.Dataset.of`), with as many columns as the fitted model."""
        data = Dataset.of(X, missing, observed)
        if data.shape[1] != self.n_features_in_:
            raise InputError(
                f"X has {data.shape[1]} columns; the model was fitted with {self.n_features_in_}"
            )
        return data

    def __sklearn_tags__(self):
        """What scikit-learn (1.6 and later) asks of an estimator it handles (``clone``,
        ``GridSearchCV``): an unsupervised transformer that takes sparse 0/1 input. Only
        scikit-learn calls it; banmf does not depend on scikit-learn."""
        from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags

        return Tags(
            estimator_type=None,
            target_tags=TargetTags(required=False),
            transformer_tags=TransformerTags(),
            input_tags=InputTags(sparse=True),
        )

    def _check_fitted(self) -> None:
        if not hasattr(self, "components_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")


def _unknown_words(unknown) -> str:
    """How the command line's options marked every cell unknown, in words."""
    return "the unknown cells cover all" if not unknown.observed else "--observed marks none of the"


def _same(a, b) -> bool:
    try:
        return bool(a == b) if type(a) is type(b) else False
    except Exception:  # arrays and other values without a truth value
        return a is b
