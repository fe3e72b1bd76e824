"""The one-machine backend of :mod:`banmf.engine.protocol`: X whole in this process (one block),
each start's record holding its W, random starts side by side on threads when they pay."""

from __future__ import annotations

import contextlib
import itertools

import numpy as np

from ..runtime.progress import inside_a_start
from ..runtime.signals import Interruptions
from ..runtime.threads import current_threads
from .booleanize import threshold_factors
from .columns import column_factors
from .iterations import MUSolver
from .nndsvd import nndsvda
from .polish import polish_factors
from .pool import combine, grecond_pays
from .protocol import StartRecord
from .refine import refine_factor_thresholds
from .settings import RunSettings
from .starts import start_cost
from .swaps import swap_steps

__all__ = ["PARALLEL_STARTS_MIN_COST", "LocalBackend", "LocalStart", "predictor_factors"]

#: Starts run side by side only when one costs at least this (:func:`start_cost`): below it a
#: start is mostly Python, which holds the GIL, and threads only add contention
#: (docs/decisions.md, "Starts side by side").
PARALLEL_STARTS_MIN_COST = 5e7


class LocalStart:
    """A start on one machine: the MU solver over all of X (one block)."""

    def __init__(self, backend: LocalBackend | None, solver: MUSolver, update_h: bool = True):
        self.backend, self.solver, self.update_h = backend, solver, update_h

    def chunk(self, every: int, callback: bool) -> int:
        # Without a callback, a small problem runs up to ``every`` iterations a kernel call.
        return every if not callback and self.solver.small else 1

    def iterate(self, lams: np.ndarray) -> np.ndarray:
        return self.solver.iterate(lams, self.update_h)

    def threshold(self) -> dict:
        b, solver = self.backend, self.solver
        res = threshold_factors(
            b.data,
            solver.W.astype(np.float64),
            solver.Ht.T.astype(np.float64),
            b.p.n_thresholds,
            b.model.normalize,
            "pruned",
        )
        k = res.W.shape[1]
        return {
            "W_continuous": res.W_scaled,
            "H_continuous": res.H_scaled,
            "grid_thresholds": (res.threshold_w, res.threshold_h),
            "thresholds": (np.full(k, res.threshold_w), np.full(k, res.threshold_h)),
            "W": res.W,
            "H": res.H,
            "error": res.error,
        }


class LocalBackend:
    """X whole in this process.

    Parameters
    ----------
    model : banmf.BANMF
        The estimator: its parameters, and how it draws a start (``_initial_factors``).
    data : banmf.Dataset
        The data, validated.
    p : RunSettings
        The run's settings (``BANMF._check_params``).
    rng : numpy.random.Generator
        The random starts' generator.
    W, H : array-like, optional
        The starting factors of ``init="custom"``.
    """

    whole_columns = True  # Xᵀ's rows are X's columns whole: the exact polish, GreConD
    deferred = False  # Ctrl-C raises KeyboardInterrupt where it lands

    def __init__(self, model, data, p: RunSettings, rng, W=None, H=None):
        self.model, self.data, self.p = model, data, p
        self.interrupts = Interruptions()
        unknown = data.unknown
        self.unknown = None if unknown is None else "observed" if unknown.observed else "missing"
        self.sizes = (data.shape[1], data.nnz, data.n_observed)
        X = data.X
        # The starting factors are drawn in start order from one generator, whichever thread
        # then runs the start: the same starts as one after the other. The NMF start begins
        # where the first start does if NNDSVD cannot run (a copy: the solver updates its
        # factors in place).
        k, dtype = p.k, p.dtype
        first = model._initial_factors(X.shape, k, dtype, rng, W, H)
        self.first = (first[0].copy(), first[1].copy()) if "nmf" in p.extra_starts else None
        self.starts = itertools.chain(
            [first],
            (model._initial_factors(X.shape, k, dtype, rng, W, H) for _ in range(p.n_init - 1)),
        )

    def side_by_side(self, n_starts: int) -> int:
        # One thread for cheap starts (:data:`PARALLEL_STARTS_MIN_COST`).
        p = self.p
        (n, m), k = p.shape, p.k
        cheap = start_cost(n, m, p.nnz, k, p.max_iter) < PARALLEL_STARTS_MIN_COST
        return 1 if cheap else min(current_threads(), n_starts)

    def random_starts(self):
        return self.starts

    def begin(self, key, init, project: bool) -> LocalStart:
        W0, Ht0 = init
        model = self.model
        solver = MUSolver(
            self.data,
            W0,
            Ht0,
            project=project,
            lower=model.lower,
            upper=self.p.upper,
            eps=model.eps,
        )
        return LocalStart(self, solver)

    def nmf_init(self):
        svd = nndsvda(self.data, self.p.k)
        if svd is None:
            return self.first
        floor = np.finfo(self.p.dtype).eps
        return tuple(np.maximum(f, floor).astype(self.p.dtype, order="C") for f in svd)

    def greedy(self, name: str, k: int):
        if name == "grecond":
            W, H = grecond_factors(self.data, k)
        else:
            W, H = column_factors(self.data.T.X, k)
        return W, H, self.data.error(W, H)

    def refine_thresholds(self, run: StartRecord) -> dict:
        # Refined in place: on copies, so that a Ctrl-C inside leaves the grid's as they were.
        tw, th = (t.copy() for t in run.thresholds)
        ref = refine_factor_thresholds(self.data, run.W_continuous, run.H_continuous, tw, th)
        return {"W": ref.W, "H": ref.H, "error": ref.error, "thresholds": (tw, th)}

    def polish(self, run: StartRecord, method: str) -> dict:
        pol = polish_factors(self.data, run.W, run.H, method)
        return {"W": pol.W, "H": pol.H, "error": pol.error, "polish_rounds": pol.rounds}

    def swaps(self, run: StartRecord, method: str, most: int):
        for step in swap_steps(self.data, run.W, run.H, method, most):
            yield {
                "W": step.W,
                "H": step.H,
                "error": step.error,
                "swap": (step.factor, step.column),
            }

    def attempt(self, work):
        return work()

    def combine(self, runs: list, k: int, again=None):
        # Every record holds its W: nothing runs again here.
        more = []
        if all(run.start != "grecond" for run in runs) and self._grecond_pays(runs, k):
            W, H, error = self.greedy("grecond", k)
            more.append(((W, H), error))
        W, H, error, info = combine(self.data, runs, k, more)
        return W, H, error, info["new"]

    def _grecond_pays(self, runs: list, k: int) -> bool:
        from ..models.grecond import grecond_work

        data = self.data
        observed = data.unknown is not None and data.unknown.observed
        return grecond_pays(grecond_work(data.X, k), observed, data.shape, data.nnz, k, runs)

    def keep(self, best) -> None:
        """Every record holds its own W: nothing to drop."""

    def rows(self, best: StartRecord, again) -> tuple[np.ndarray, np.ndarray]:
        return best.W_continuous, best.W

    def fitted(self) -> dict:
        return {}

    def start_factors(self, outcome, observed: bool, again=None) -> dict:
        return predictor_factors(
            [run.W for _, run in outcome.kept],
            [run.H for _, run in outcome.kept],
            outcome.extra.get("nmf"),
            None if "nmf" not in outcome.extra else outcome.extra["nmf"].W_continuous,
            observed,
        )

    def dataset(self):
        return self.data

    def inner_fits(self):
        return contextlib.nullcontext()


def grecond_factors(data, k: int) -> tuple[np.ndarray, np.ndarray]:
    """GreConD's first ``k`` factors of ``data`` (no polish, one thread): the "grecond" start
    and the combination's extra candidates, on any backend."""
    from ..models.grecond import GreConD

    with inside_a_start():
        model = GreConD(k, polish=False, n_jobs=1).fit(data)
    return model.W_, model.components_


def predictor_factors(Ws: list, Hs: list, nmf, nmf_w, observed: bool) -> dict:
    """The factors of each kind of predictor a fit's starts give (:class:`banmf.Predictor`),
    from every start's Boolean ``Ws`` and ``Hs`` (ranked), the NMF start's record ``nmf`` and
    its balanced W ``nmf_w``: "product" always; "vote" with two starts or more; "nmf" when the
    NMF start ran and the unknown cells were given as ``missing=`` (with ``observed=`` the
    predicted ones off the observed cells are listed, which a continuous product, nonzero
    almost everywhere, cannot do sparsely)."""
    kinds: dict = {"product": ()}
    if len(Ws) > 1:
        kinds["vote"] = (
            np.stack([np.asarray(W, dtype=bool) for W in Ws]),
            np.stack([np.asarray(H, dtype=bool) for H in Hs]),
        )
    if nmf is not None and not observed:
        kinds["nmf"] = (
            np.asarray(nmf_w, dtype=np.float64),
            np.asarray(nmf.H_continuous, dtype=np.float64),
        )
    return kinds
