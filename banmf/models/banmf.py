"""BANMF and regularized BANMF (paper Algorithms 1 and 3) on sparse binary data."""

from __future__ import annotations

import warnings
from contextlib import contextmanager
from dataclasses import replace
from numbers import Integral, Real
from types import MappingProxyType
from typing import ClassVar

import numpy as np

from ..data.params import BOOLEAN, CALLABLE, FLOAT_DTYPE, NONE, Interval, Options, subset_of
from ..data.validation import check_dtype, check_random_state
from ..engine import Driver, Outcome, auto_n_init, start_cost
from ..engine.booleanize import boolean_product
from ..engine.iterations import MUSolver, lambda_schedule, solver_bytes
from ..engine.local import LocalBackend, LocalStart
from ..engine.polish import (
    polish_rows,
    resolve_polish,
)
from ..engine.pool import pool_bytes
from ..engine.predictor import choose_predictor, inner_hold_out
from ..engine.protocol import StartRecord
from ..engine.settings import RunSettings
from ..exceptions import InputError, InvalidParameterError
from ..result import relative_error
from ..runtime.memory import check_memory
from ..runtime.threads import current_threads
from ..selection.predictor import (
    choosing,
    hand_over,
)
from ._base import COMMON_CONSTRAINTS, BaseFactorization, budgeted, declared_init

#: ``tol="auto"``: stop a start once its objective moves by less than this (relative to the
#: first value) over ``check_every`` iterations: the errors of all ``max_iter`` iterations at
#: less of the time (docs/decisions.md, "The automatic tolerance").
AUTO_TOL = 1e-4

#: :class:`BANMF`'s parameters and their defaults, declared once: the variants
#: (:mod:`banmf.models.nmf`) and :class:`banmf.distributed.BANMF` change or extend them.
BANMF_DEFAULTS = MappingProxyType(
    {
        "n_components": 10,
        "regularization": None,
        "max_iter": 1000,
        "tol": "auto",
        "check_every": 10,
        "init": "random",
        "init_scale": 1.0,
        "lower": 1.0,
        "upper": "k",
        "eps": 1e-12,
        "n_thresholds": 100,
        "normalize": "balance",
        "thresholds": "per-factor",
        "polish": True,
        "swap": True,
        "extra_starts": ("nmf", "columns"),
        "combine": True,
        "n_init": "auto",
        "dtype": np.float64,
        "n_jobs": None,
        "random_state": None,
        "verbose": 0,
        "callback": None,
    }
)

#: The paper's configuration of :class:`BANMF` (Algorithms 1-3 as published): one random start
#: run for all ``max_iter`` iterations, the global grid thresholds, no Boolean refinements.
#: ``BANMF(k, **PAPER_CONFIG)``; the experiment scripts' "banmf" columns use it.
PAPER_CONFIG = MappingProxyType(
    {
        "n_init": 1,
        "tol": None,
        "thresholds": "global",
        "polish": False,
        "swap": False,
        "extra_starts": (),
        "combine": False,
    }
)

#: The starts ``extra_starts`` may name.
EXTRA_STARTS = ("nmf", "grecond", "columns")


__all__ = ["BANMF", "BANMF_DEFAULTS", "PAPER_CONFIG", "relative_error", "start_cost"]


class BANMF(BaseFactorization):
    """Boolean matrix factorization via nonnegative auxiliary optimization (BANMF).

    Finds Boolean W (n, k) and H (k, m) with X ≈ W⊗H. Multiplicative updates fit nonnegative
    W, H to an auxiliary Y that is 0 off the support of X and projected into [lower, upper] on
    it; the factors are then balanced and thresholded by :func:`banmf.booleanize`. With
    ``regularization`` set, the penalty ``(λ/2)(‖W²−W‖² + ‖H²−H‖²)`` pushes entries to {0, 1}
    (paper Algorithm 3, with the corrected ``λW`` denominator term).

    X is held as a CSR support mask and Y as one value per nonzero: an iteration costs
    O(nnz·k + (n+m)k²) time and O(nnz + (n+m)k) memory; X is never densified.

    Parameters
    ----------
    n_components : int or "auto", default 10
        Rank k of the factorization. "auto": chosen by the lowest held-out error over 10
        folds of the observed cells, k = 1 to 20 (docs/choosing-k.md); the choice is
        ``n_components_``, the selection ``rank_selection_``.
    regularization : None, float or "logspace", default None
        None: plain BANMF. A float: constant λ. "logspace": λ ramps as
        ``np.logspace(-4, 10, max_iter)`` over the iterations.
    max_iter : int, default 1000
        Number of W, H, Y update cycles.
    tol : "auto", float or None, default "auto"
        Stop a start when its objective changes by less than ``tol`` times its first value over
        ``check_every`` iterations. "auto": 1e-4 (:data:`AUTO_TOL`; errors as with all
        ``max_iter`` iterations within start-to-start noise, at 0.4-1× the time), or None
        with ``regularization="logspace"``, whose ramp must run its course. None: always
        ``max_iter`` iterations (the paper). A number warns (``ConvergenceWarning``) if
        ``max_iter`` comes first.
    check_every : int, default 10
    init : {"random", "custom"}, default "random"
        "random": W, H ~ U[0, 1) times ``init_scale``. "custom": pass ``W`` and ``H`` to ``fit``.
    init_scale : float, default 1.0
    lower : float, default 1.0
        Lower bound of Y on the support.
    upper : "k", None or float, default "k"
        Upper bound of Y on the support: the rank k (the paper), None for no cap, or a number.
    eps : float, default 1e-12
        Added to every multiplicative-update denominator (avoids 0/0 on empty rows/columns).
    n_thresholds : int, default 100
        Grid points per factor for booleanization.
    normalize : {"balance", None}, default "balance"
        Factor balancing before thresholding.
    thresholds : {"per-factor", "global"}, default "per-factor"
        "global": the paper's single pair (δ_W, δ_H) from the grid. "per-factor": then one
        threshold per column of W and per row of H by coordinate descent from the grid optimum
        (:func:`banmf.refine_thresholds`; never worse than the grid).
    polish : bool or {"auto", "exact", "flip"}, default True
        After thresholding, improve the Boolean factors with :func:`banmf.polish` (alternating
        Boolean row/column updates; the error never rises). True means "auto": exact updates
        over all 2^k row patterns on small problems, single-bit flips on large ones or k > 16.
    swap : bool, default True
        After the polish, replace weak factors by strong columns while that lowers the error
        (:func:`banmf.swap_factors`: the factor whose removal costs least against the column
        with the most uncovered ones, then the polish again). On very sparse data a relaxed fit
        often spends several factors on the same heavy columns, or leaves one empty, and the
        polish alone cannot move a whole factor. The error never rises.
    extra_starts : tuple of {"nmf", "grecond", "columns"}, default ("nmf", "columns")
        Starts besides the ``n_init`` random ones, each refined as they are (thresholds,
        polish, swaps) and kept when its error is lowest (ties: the earlier start):

        - "nmf": the iterations of Lee-Seung NMF (Y held at X instead of projected) from
          NNDSVDa factors (a sparse truncated SVD of X made nonnegative; the first random
          start's factors if it cannot be computed). On sparse data the projection lets several
          factors pile onto the same heavy columns, and this start often ends lower.
        - "grecond": GreConD's first k factors (cheap on narrow data, slower than an
          iteration run on wide data).
        - "columns": the k columns with the most ones, each with all its rows: what greedy
          methods such as ASSO find on very sparse data. Costs a polish.

        Not counted in ``n_init``. "columns" and "grecond", which have no iterations, run
        before the random starts, and "nmf" after them, one after the other; whichever start
        is exact (error 0) ends the fit, as nothing can beat it, and saves the other starts'
        time.
    combine : bool, default True
        After the starts, combine them (docs/pipeline.md, "Combining the starts"): pool the
        Boolean factors of every start, GreConD's where it costs little beside the starts
        (narrow data), and candidates grown from the columns with the most ones (the rows and
        columns where a column's pattern holds more ones than zeros), and choose k of them for the lowest exact error (greedily, and from the best start's
        factors, each then improved by replacing one factor at a time while the error falls),
        then polish and swap the choice as a start of its own, named "combined". It is kept
        only when its error is lower than every start's, so the result is never worse; on
        sparse data it finds what no single start has (tiles 10⁵×10⁴ at k = 10: 0.6393 →
        0.6296). The pool is cut to a work budget of O(nnz·k). Not after an exact start.
    n_init : int or "auto", default "auto"
        Independent random initialisations; the one with the lowest final Boolean error is kept
        (ties: the earliest; an exact fit, of any start, stops the starts). The first uses the
        same start as ``n_init=1``. "auto": decided by the whole cost of the first start
        (:func:`start_cost` at the iterations it took: its iterations, their fixed cost and the
        refinements after them): 10 starts while a start is cheap (≤ 10⁹ multiply-adds, well
        under a second), 5 up to 10¹⁰ (seconds), else 1. The decision depends on the data
        and the seed only; starts begun beside the first beyond it are dropped. More starts
        recover planted factors more often and lower the error a little on real data
        (docs/decisions.md, "Random starts"). Starts that cost more than a few hundredths of a
        second run side by side on the thread budget (``n_jobs``), each on serial kernels; the
        result is the same as one after the other.
    dtype : float64 or float32, default float64
        Floating type of W, H and Y. float32 saves memory (4 bytes per nonzero for Y and half
        the factors) and the passes over the nonzeros compute in float32, typically 1.1-2.6×
        faster per iteration, most on large sparse data (docs/PERFORMANCE.md, "float32"). Sums
        then carry ~7 digits (the objective and the k×k Gram partials stay float64). float64 is
        the default: it keeps the regularized ramp (λ up to 1e10) and the exactness properties
        (Theorems 1 and 2) at full precision.
    n_jobs : int or None, default None
        Thread budget, with scikit-learn's meaning: None uses what the environment allows
        (usable CPUs, ``NUMBA_NUM_THREADS``, ``OMP_NUM_THREADS``, threadpoolctl limits), -1
        every usable CPU, 1 one thread (see :func:`banmf.effective_n_jobs`). Several starts
        share it, one thread each; one start runs its large kernels on all of it and small ones
        serially. The factors do not depend on it; ``loss_curve_`` agrees to rounding (its
        float64 sums of float32 terms may round differently).
    random_state : None, int or numpy Generator
        Seed for the random initialisation. Same seed, same result, whatever ``n_jobs``.
    verbose : int, default 0
        1: show each start's phases and error on stderr; 2: also its objective as it goes
        (the records of :mod:`banmf.runtime.progress`, through the logger ``"banmf"``). Starts are
        counted in the order they run, random and extra together ("start 1/12 (columns)",
        "start 2/12", …, "start 12/12 (nmf)").
    callback : callable or None
        Called as ``callback(iteration, objective)`` after every iteration (of every
        initialisation); a truthy return value stops the fit early: the factors so far are
        booleanized as usual and no further initialisation starts. Starts that run side by
        side call it from their threads, one call at a time.

    Attributes
    ----------
    components_ : ndarray of shape (k, m), bool
        Boolean H.
    W_ : ndarray of shape (n, k), bool
        Boolean W of the training data.
    W_continuous_, H_continuous_ : ndarray
        The nonnegative factors after balancing, before thresholding.
    thresholds_ : tuple of two ndarrays of shape (k,)
        Per factor ``(delta_W, delta_H)``: the thresholded factors are ``W_continuous_ >
        delta_W`` and ``H_continuous_ > delta_H[:, None]`` (all equal with ``thresholds="global"``;
        ``W_`` differs from them where the polish changed it).
    grid_thresholds_ : tuple of float
        The global grid optimum ``(δ_W, δ_H)``.
    booleanized_err_ : int
        Error at the global grid optimum.
    unpolished_err_ : int
        Error after the thresholds, before the polish.
    refinement_ : dict
        The error after each step that ran in the kept start, in order: ``"grid"``, then
        ``"per-factor thresholds"``, ``"polish"`` and ``"swaps"`` when they are on (and not cut
        short by Ctrl-C). A greedy extra start, and the combination, begin with its name
        (``"columns"``, ``"grecond"``, ``"combined"``) in place of the grid; its ``n_iter_`` is 0 and ``loss_curve_`` empty,
        and ``W_continuous_``, ``H_continuous_`` are its Boolean factors (thresholds 0.5).
    init_errors_ : list of int
        Final error of every random initialisation run (none when an extra start that runs
        before them was exact).
    extra_start_errors_ : dict
        Final error of every extra start run (``extra_starts``), by name, and of the
        combination ("combined", when ``combine`` ran).
    best_start_ : int or str
        The start kept: an index into ``init_errors_``, the name of an extra start, or
        "combined".
    swaps_ : list of (int, int)
        The ``(factor, column)`` swaps made in the kept start (:func:`banmf.swap_factors`).
    predictor_ : Predictor or None
        How the unknown cells are predicted, for a fit with unknown cells (``missing=`` or
        ``observed=``; None otherwise, with ``init="custom"``, and when a single start ran,
        which leaves W⊗H alone to choose): its ``kind``, "product"
        (``W⊗H``), "vote" (the share of the starts whose product is 1), "nmf" (the NMF
        start's continuous product) or "majority" (the column majority, which reads no
        factor: chosen when the factors predict no better), its ``threshold``, its
        calibration and its ``report``, chosen by the fewest errors on a fifth of the observed
        cells left out of an inner fit (docs/missing.md, "The predictor"). With
        ``n_components="auto"`` it is "folds" where the rank selection scored the chosen rank
        by a vote or NMF predictor: the mean of the calibrated probabilities of the
        selection's fold fits at that rank (:attr:`banmf.RankSelection.fold_predictor`), with
        no inner fit; and "majority" when no rank beat the column majority on the selection's
        folds (:attr:`banmf.RankSelection.generalizes` False).
        :attr:`banmf.Factorization.predictor` holds it.
    timings_ : dict
        Where the time went: ``{start: {phase: seconds}}`` for every start that ran (keyed as
        ``best_start_``), its phases among ``"setup"``, ``"iterations"``, ``"threshold
        search"``, ``"per-factor thresholds"``, ``"greedy factors"``, ``"combining"``,
        ``"polish"`` and ``"swaps"``, and ``timings_["fit"]["starts"]``, the wall time of all
        the starts (less than their sum when they ran side by side). The rest of
        ``fit_seconds_`` is checking the data and forming the result.
    n_init_ : int
        The number of initialisations asked for (``n_init`` resolved; "auto" as decided, or
        when an extra start was exact before any random one ran, the most it could decide).
    n_starts_ : int
        The starts that ran, random and extra: ``len(init_errors_) +
        len(extra_start_errors_)``, fewer than asked for when one was exact or Ctrl-C or the
        callback ended the fit.
    reconstruction_err_ : int
        Hamming error ``|X − W⊗H|``.
    relative_error_ : float
        ``reconstruction_err_ / nnz(X)``.
    loss_curve_ : ndarray of shape (``n_iter_``,)
        Relaxed objective ``½‖Y−WH‖² (+ penalties)`` after every iteration.
    n_iter_ : int
    interrupted_ : bool
        True if the fit was stopped by Ctrl-C (KeyboardInterrupt), by the callback raising
        it, or by :func:`banmf.fit_many` cancelling it. The model then holds the best result
        so far: the best finished start, or the factors at that moment booleanized. After
        Ctrl-C, ``fit`` raises ``KeyboardInterrupt`` again once the model is set, so that a
        loop of fits stops; a second Ctrl-C aborts at once and leaves the model unfitted.
    fit_seconds_ : float

    References
    ----------
    Truong, Skau, Desantis, Alexandrov, "Boolean Matrix Factorization via Nonnegative Auxiliary
    Optimization" (LANL), Algorithms 1-3.

    Examples
    --------
    >>> from banmf import BANMF, make_boolean
    >>> X, W0, H0 = make_boolean(30, 20, 3, density=0.3, random_state=0)
    >>> model = BANMF(n_components=3, max_iter=200, random_state=0)
    >>> W = model.fit_transform(X)
    >>> W.shape, model.components_.shape
    ((30, 3), (3, 20))
    """

    __init__ = declared_init(BANMF_DEFAULTS)

    _parameter_constraints: ClassVar[dict] = {
        **COMMON_CONSTRAINTS,
        "regularization": [NONE, Interval(Real, 0, np.inf, closed="left"), Options("logspace")],
        "max_iter": [Interval(Integral, 1, None)],
        "tol": [Options("auto"), NONE, Interval(Real, 0, None)],
        "check_every": [Interval(Integral, 1, None)],
        "init": [Options("random", "custom")],
        "init_scale": [Interval(Real, 0, np.inf, closed="neither")],
        "lower": [Interval(Real, 0, np.inf, closed="left")],
        "upper": [Options("k"), NONE, Interval(Real, None, None)],
        "eps": [Interval(Real, 0, None)],
        "n_thresholds": [Interval(Integral, 1, None)],
        "normalize": [Options("balance"), NONE],
        "thresholds": [Options("per-factor", "global")],
        "swap": [BOOLEAN],
        "extra_starts": [subset_of(*EXTRA_STARTS)],
        "combine": [BOOLEAN],
        "n_init": [Options("auto"), Interval(Integral, 1, None)],
        "dtype": [FLOAT_DTYPE],
        "callback": [NONE, CALLABLE],
    }

    # Subclasses (NMF) freeze Y at X by setting this to False.
    _project_y = True

    def _check_params(self, k: int, shape: tuple[int, int] = (0, 0), nnz: int = 0) -> RunSettings:
        """The run's settings derived from the parameters (already checked against their
        constraints) for rank ``k`` on data of ``shape`` whose passes visit ``nnz`` cells:
        tolerance, cap of Y, polish, starts, λ per iteration."""
        max_iter = int(self.max_iter)
        if self.tol == "auto":
            # The log-space λ ramp must run its whole course: no early stop there.
            tol = None if self.regularization == "logspace" else AUTO_TOL
        else:
            tol = self.tol
        upper = (
            float(k) if self.upper == "k" else np.inf if self.upper is None else float(self.upper)
        )
        if self._project_y and upper < self.lower:
            raise InvalidParameterError(f"upper ({upper}) must be >= lower ({self.lower})")
        # The schedule holds one λ per iteration: an absurd max_iter is refused here, in words.
        check_memory(
            8 * max_iter,
            f"{type(self).__name__}(max_iter={max_iter}): the regularization schedule "
            "(one float64 λ per iteration)",
            "choose a smaller max_iter",
        )
        settings = RunSettings(
            k=k,
            shape=shape,
            nnz=nnz,
            max_iter=max_iter,
            check_every=int(self.check_every),
            n_thresholds=int(self.n_thresholds),
            tol=tol,
            upper=upper,
            polish=self._polish_method(k),
            swap=bool(self.swap),
            extra_starts=tuple(self.extra_starts),
            combine=bool(self.combine),
            # "auto" is decided when the first start has run (banmf.engine.auto_n_init);
            # until then up to the tier of its least possible cost may start (side by side,
            # speculatively), so that a start that must be the only one never shares the
            # threads with one that will be dropped.
            n_init=1 if self.n_init == "auto" else int(self.n_init),
            auto_n_init=self.n_init == "auto" and self.init == "random",
            dtype=check_dtype(self.dtype),
            lams=lambda_schedule(self.regularization, max_iter),
        )
        if settings.auto_n_init:
            # The tolerance is first checked after 2·check_every iterations.
            least = max_iter if tol is None else min(max_iter, 2 * settings.check_every)
            settings = replace(settings, n_init=auto_n_init(settings, least))
        if self.init == "custom" and settings.n_init > 1:
            raise InvalidParameterError(
                "n_init > 1 needs random starts; init='custom' gives one start"
            )
        return settings

    def _fit_bytes(self, data, k: int) -> int:
        """Peak memory of the fit: every start's kept factors (float64 and Boolean, 18 bytes an
        entry), and the larger of what the starts running side by side hold (each its solver,
        :func:`banmf.engine.iterations.solver_bytes`, alive until the start ends; its float64
        starting factors; the threshold search's float64 copies) and the combination's pool
        (:func:`banmf.engine.pool.pool_bytes`), which comes after the last start; with unknown
        cells, the inner fit that chooses the predictor beside this fit's records."""
        X, unknown = data.X, data.unknown
        (n, m), nnz = X.shape, X.nnz
        p = self._check_params(k, (n, m), nnz if unknown is None else nnz + unknown.pass_cells(nnz))
        starts = p.n_init + len(p.extra_starts)
        running = min(p.n_init, current_threads())
        entries = (n + m) * k
        kept = 18 * starts * entries
        cells = 0 if unknown is None else unknown.cells.nnz
        if unknown is not None and starts > 1:
            # The inner fit that chooses the predictor runs with this fit's records, and the
            # vote's stacked Boolean factors, still held, and with more unknown cells: those it
            # leaves out (at most, :func:`banmf.engine.predictor.inner_fit_predictor`).
            kept += (18 + 2) * starts * entries
            if not unknown.observed:
                ones, zeros, _ = inner_hold_out(nnz, data.n_observed - nnz)
                cells += ones + zeros
        observed = unknown is not None and unknown.observed
        start = solver_bytes(n, m, k, p.dtype, nnz, cells, observed) + (2 + 4) * 8 * entries
        pool = pool_bytes(n, m, k, starts, nnz) if p.combine else 0
        return kept + max(running * start, pool)

    def _initial_factors(self, shape, k, dtype, rng, W, H):
        n, m = shape
        if self.init == "custom":
            if W is None or H is None:
                raise InputError("init='custom' needs both W and H passed to fit")
            W = np.array(W, dtype=dtype, order="C")
            Ht = np.array(np.asarray(H).T, dtype=dtype, order="C")
            if W.shape != (n, k) or Ht.shape != (m, k):
                raise InputError(
                    f"custom init: W must have shape {(n, k)} and H {(k, m)}, "
                    f"got {W.shape} and {Ht.shape[::-1]}"
                )
            if (
                not (np.isfinite(W).all() and np.isfinite(Ht).all())
                or (W < 0).any()
                or (Ht < 0).any()
            ):
                raise InputError("custom init: W and H must be finite and nonnegative")
            return W, Ht
        if W is not None or H is not None:
            raise InputError("W and H are only used with init='custom'")
        W = rng.random((n, k)) * self.init_scale
        H = rng.random((k, m)) * self.init_scale
        # Exact zeros never move under multiplicative updates: floor the start (as T-ELF does).
        tiny = np.finfo(dtype).eps
        W = np.maximum(W, tiny).astype(dtype, order="C")
        Ht = np.ascontiguousarray(np.maximum(H, tiny).T, dtype=dtype)
        return W, Ht

    @budgeted
    def fit(self, X, y=None, W=None, H=None, *, missing=None, observed=None) -> BANMF:
        """Fit the model to X.

        Parameters
        ----------
        X : array-like or sparse of shape (n, m)
            0/1 data (dense arrays and every scipy sparse format are accepted).
        y : ignored
        W, H : array-like, optional
            Starting factors, shapes (n, k) and (k, m), for ``init="custom"``.
        missing : array-like or sparse of shape (n, m), optional
            1 (or True) marks a cell whose value is unknown: it counts neither as a one nor as
            a zero anywhere in the fit (the objective, the thresholds, the polish, the error),
            and X's value there is never read. :func:`banmf.predict_cells` (or
            :meth:`Factorization.complete`) fills such cells in.
        observed : array-like or sparse of shape (n, m), optional
            The complement, for data where most cells are unknown (user-item logs): 1 marks an
            observed cell. Give one of the two.

        Returns
        -------
        self
        """
        with self._open(X, missing, observed, W, H) as (backend, start):
            p = backend.p
            names = [name for name in p.extra_starts if name != "nmf" or self._project_y]
            driver = Driver(self, backend, p, backend.interrupts, backend.deferred)
            outcome = driver.fit(names)
            best = self._set_fitted(outcome, p)
            self.W_continuous_, W = driver.rows(best)
            interrupted = outcome.interrupted or any(run.interrupted for _, run in outcome.kept)
            self._store_result(
                W, best.H, best.error, best.n_iter, start, interrupted, *backend.sizes
            )
            for name, value in backend.fitted().items():
                setattr(self, name, value)
            self.predictor_ = None
            signalled = backend.interrupts.count or any(r.signalled for _, r in outcome.kept)
            form = backend.unknown
            if not signalled and form is not None:
                # Gathered while the backend still holds the starts' rows.
                starts = backend.start_factors(outcome, form == "observed", driver.rerun)
        if signalled:
            # The model holds the best result so far; a caller's loop of fits must stop too.
            raise KeyboardInterrupt
        if form is not None:
            hand_over(self, starts)  # to a scope that scores them (keeping_starts), if any
            if choosing() and not interrupted:
                self.predictor_ = choose_predictor(self, backend, starts)
        return self

    @contextmanager
    def _open(self, X, missing, observed, W=None, H=None):
        """The backend of a fit of X, with the clock started: ``(backend, start)``. Here
        the one-machine backend (:class:`banmf.engine.local.LocalBackend`) over the data
        checked once (:meth:`_begin`); :class:`banmf.distributed.BANMF` opens Dask's."""
        data, k, start = self._begin(X, missing, observed)
        X, unknown = data.X, data.unknown
        p = self._check_params(
            k, X.shape, X.nnz if unknown is None else X.nnz + unknown.pass_cells(X.nnz)
        )
        if X.nnz == 0 and unknown is None:  # ones hidden by unknown cells: _begin said so
            warnings.warn(
                "X has no nonzeros: nothing to factorize, the best W⊗H is all zeros",
                UserWarning,
                stacklevel=4,
            )
        yield LocalBackend(self, data, p, check_random_state(self.random_state), W, H), start

    def _set_fitted(self, outcome: Outcome, p: RunSettings) -> StartRecord:
        """The fitted attributes of the starts (all but W's and the shared ones of
        :meth:`_set_result`); returns the kept start's record."""
        self.best_start_, best = outcome.best
        runs = outcome.runs
        self.init_errors_ = [run.error for run in runs]
        self.extra_start_errors_ = {name: run.error for name, run in outcome.extra.items()}
        self.n_starts_ = len(outcome.kept)
        self.n_init_ = outcome.n_init
        self.loss_curve_ = best.losses
        self.H_continuous_ = best.H_continuous
        self.grid_thresholds_, self.thresholds_ = best.grid_thresholds, best.thresholds
        self.booleanized_err_, self.unpolished_err_ = (
            best.booleanized_err,
            best.unpolished_err,
        )
        self.polish_rounds_, self.refinement_ = best.polish_rounds, best.refinement
        self.swaps_ = best.swaps
        self.timings_ = {**outcome.timings, "fit": {"starts": outcome.seconds}}
        return best

    def fit_transform(
        self, X, y=None, W=None, H=None, *, missing=None, observed=None
    ) -> np.ndarray:
        """Fit to X and return the Boolean W of shape (n, k)."""
        return self.fit(X, y, W=W, H=H, missing=missing, observed=observed).W_

    @budgeted
    def transform(self, X, *, missing=None, observed=None) -> np.ndarray:
        """Boolean W for new rows X (n', m), with the fitted H held fixed.

        Runs the W and Y updates against the fitted continuous H for ``max_iter`` iterations,
        thresholds at the fitted ``delta_W`` and, if ``polish`` is on, polishes the rows against
        the fitted Boolean H (rows are independent given H). ``missing`` / ``observed`` mark
        unknown cells of X as in :meth:`fit`.
        """
        self._check_fitted()
        data = self._check_columns(X, missing, observed)
        k = self.n_components_
        p = self._check_params(k)
        rng = check_random_state(self.random_state)
        dtype = p.dtype
        W0 = np.maximum(
            rng.random((data.shape[0], k)) * self.init_scale, np.finfo(dtype).eps
        ).astype(dtype)
        Ht = np.ascontiguousarray(self.H_continuous_.T, dtype=dtype)
        solver = MUSolver(
            data, W0, Ht, project=self._project_y, lower=self.lower, upper=p.upper, eps=self.eps
        )
        Driver(self, None, p, None).iterate(LocalStart(None, solver, update_h=False))
        Wb = solver.W > self.thresholds_[0]
        if p.polish is not None:
            # Rows are independent given H: polish the new rows against the fitted H.
            Ht = np.ascontiguousarray(self.components_.T)
            polish_rows(data, Wb, Ht, resolve_polish(p.polish, data.shape, data.nnz, k))
        return Wb

    def inverse_transform(self, W) -> np.ndarray:
        """The Boolean product ``W⊗H`` (a CSR support mask) for Boolean W of shape (n, k)."""
        self._check_fitted()
        return boolean_product(W, self.components_)
