"""The row-block protocol: what the BANMF driver (:mod:`banmf.engine.driver`) asks of the data.

X lives with a backend, as one block of rows (one machine) or many (Dask workers; a device
later). The driver never sees X: it begins starts on the backend and asks each for the steps of
a BANMF start, which the backend runs as per-block work and sums over its blocks, with the
library's own pieces (:class:`banmf.models.MUSolver` and its kernels, the grid search of
:func:`banmf.engine.booleanize.search_grid`, the bit changes and cuts of :mod:`banmf.polish`). A start's
record (a :class:`StartRecord`) travels between the driver and the backend: the driver reads only its Boolean H,
its error and its bookkeeping; W stays where the backend keeps it (in the record on one machine,
on the blocks on Dask) until :meth:`Backend.rows`.

Initial factors (``init``) are whatever the backend draws and takes back: the driver only
passes them from :meth:`Backend.random_starts` or :meth:`Backend.nmf_init` to
:meth:`Backend.begin`.

A backend declares what it can do beyond per-block work and sums (:attr:`Backend.whole_columns`,
and :meth:`Backend.combine` where it keeps every start's Boolean factors);
the driver refuses, before any work, a fit that needs what its backend lacks
(:func:`banmf.engine.driver.check_backend`), so a backend never checks the parameters itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Protocol

import numpy as np

__all__ = ["Backend", "Start", "StartRecord"]


@dataclass(eq=False)
class StartRecord:
    """One start of a fit as the driver keeps it: its factors after each step and what each
    step did. A step's result (a mapping of some of these names, from the backend) is merged
    in with :meth:`update`.

    Attributes
    ----------
    start : int or str
        The random start's index, or an extra start's name ("nmf", "columns", "grecond",
        "combined").
    H : ndarray of shape (k, m), bool
        The Boolean H after the steps so far.
    error : int
        The Boolean error of the start's factors after the steps so far.
    H_continuous : ndarray of shape (k, m)
        The balanced continuous H (a greedy start's Boolean H).
    grid_thresholds : tuple of float
        The grid search's global ``(δ_W, δ_H)``.
    thresholds : tuple of two ndarrays of shape (k,)
        Per factor ``(δ_W, δ_H)``.
    losses : ndarray
        The relaxed objective after each iteration.
    n_iter : int
        The iterations run.
    stopped : bool
        The callback stopped the fit.
    booleanized_err, unpolished_err : int
        The error at the grid's thresholds, and before the polish.
    polish_rounds : int
    swaps : list of (int, int)
        The ``(factor, column)`` swaps made.
    refinement : dict
        The error after each step that ran, in order.
    interrupted, signalled : bool
        Ctrl-C (or the callback) cut the start short; a signal came during it.
    seconds : dict
        The wall time of each phase (:attr:`banmf.engine.Outcome.timings`).
    W, W_continuous : ndarray or None
        W's Boolean and balanced rows where the backend keeps them in the record (one
        machine); None where they stay with the backend.
    """

    start: Any
    H: np.ndarray
    error: int
    H_continuous: np.ndarray
    grid_thresholds: tuple
    thresholds: tuple
    losses: np.ndarray = field(default_factory=lambda: np.zeros(0))
    n_iter: int = 0
    stopped: bool = False
    booleanized_err: int = 0
    unpolished_err: int = 0
    polish_rounds: int = 0
    swaps: list = field(default_factory=list)
    refinement: dict = field(default_factory=dict)
    interrupted: bool = False
    signalled: bool = False
    seconds: dict = field(default_factory=dict)
    W: np.ndarray | None = None
    W_continuous: np.ndarray | None = None

    def update(self, changes: Mapping = (), **more) -> None:
        """Set the fields named in ``changes`` and ``more`` (a step's result)."""
        for name, value in {**dict(changes), **more}.items():
            if name not in _RECORD_FIELDS:
                raise AttributeError(f"a start's record has no field {name!r}")
            setattr(self, name, value)


_RECORD_FIELDS = frozenset(f.name for f in fields(StartRecord))


class Start(Protocol):
    """One start's multiplicative-update state on the backend (W's rows, Y, the sums)."""

    def chunk(self, every: int, callback: bool) -> int:
        """The most iterations :meth:`iterate` should run in one call.

        Parameters
        ----------
        every : int
            The tolerance's ``check_every``: the driver never asks past one of its checks.
        callback : bool
            Whether the user's callback is called after every call.

        Returns
        -------
        int
            At least 1; the iterations are the same however they are grouped.
        """

    def iterate(self, lams: np.ndarray) -> np.ndarray:
        """One W, H, Y iteration per λ of ``lams``.

        Returns
        -------
        ndarray
            The relaxed objective after each iteration run: fewer than ``len(lams)`` only
            when the backend saw an interruption (a backend that defers Ctrl-C stops at the
            next iteration's end).
        """

    def threshold(self) -> dict:
        """The grid threshold search (:func:`banmf.engine.booleanize.threshold_factors`): the
        start's record with its balanced continuous H ``"H_continuous"``, Boolean ``"H"``,
        ``"grid_thresholds"``, per-factor ``"thresholds"`` (all equal), ``"error"``; W's
        Boolean and balanced rows stay with the backend (in ``"W"`` and ``"W_continuous"`` if
        it keeps them in the record)."""


class Backend(Protocol):
    """Where X is, and the steps of a BANMF fit over its row blocks.

    Every method returns what the driver needs and nothing of n's size, except
    :meth:`rows` at the end (and the record's W where the backend keeps W in it).

    Attributes
    ----------
    whole_columns : bool
        Whether a step may read all the rows of a column of X at once, as the exact polish
        (its half-step on H updates each column of H against X's whole column, through Xᵀ)
        and the GreConD start (over X whole) do; per-block work and sums over the blocks need
        no more than a block. Declared on the class, so that an estimator can ask before it
        builds the backend. Without it the driver refuses ``polish="exact"`` and ``"auto"``,
        ``"grecond"`` in ``extra_starts``, and ``swap`` with ``polish=False`` (whose swaps
        polish with "auto"); ``polish=True``, "auto" with whole columns, then flips bits.
    """

    whole_columns: ClassVar[bool]

    def side_by_side(self, n_starts: int) -> int:
        """How many random starts run at once (threads), 1 for one after the other."""

    def random_starts(self) -> Iterator[Any]:
        """The random starts' initial factors, in start order, drawn as they are asked for."""

    def begin(self, key, init, project: bool) -> Start:
        """Begin start ``key`` (an index or an extra start's name) from ``init``;
        ``project``: Y is projected (BANMF) or held at X (NMF)."""

    def nmf_init(self) -> Any:
        """The "nmf" start's initial factors: NNDSVDa of X, or the first random start's
        factors when the SVD cannot be computed."""

    def greedy(self, name: str, k: int) -> tuple[np.ndarray | None, np.ndarray, int]:
        """A greedy start's Boolean factors (``"columns"``, ``"grecond"``): ``(W or None when
        the backend keeps W's rows, H, error)``."""

    def combine(
        self, runs: list, k: int, again: Callable[[StartRecord, Any], None]
    ) -> tuple[np.ndarray | None, np.ndarray, int, bool] | None:
        """The combination of the starts' records ``runs`` (:mod:`banmf.engine.pool`):
        ``(W or None, H, error, new)``, ``new`` False when the choice is the best start's own
        factors; None when a deferred Ctrl-C stopped it (the starts stand). ``again(run,
        init)`` runs a start again exactly (as in :meth:`rows`), for a backend that lost its
        rows. Optional: without it the driver refuses ``combine=True``
        (:func:`banmf.engine.driver.check_backend`)."""

    def refine_thresholds(self, run: StartRecord) -> dict:
        """Per-factor thresholds from the grid's (:func:`banmf.refine_thresholds`); returns
        the record's new ``"H"``, ``"error"``, ``"thresholds"`` (and ``"W"``)."""

    def polish(self, run: StartRecord, method: str) -> dict:
        """The Boolean polish (:func:`banmf.polish`) of the record's factors; returns its
        new ``"H"``, ``"error"``, ``"polish_rounds"`` (and ``"W"``). ``method`` is "flip"
        unless the backend has :attr:`whole_columns`."""

    def swaps(self, run: StartRecord, method: str, most: int) -> Iterator[dict]:
        """The factor swaps (:func:`banmf.swap_factors`), each followed by the polish
        ``method`` (as in :meth:`polish`), at most ``most``; yields after each the record's new ``"H"``,
        ``"error"``, ``"swap"`` ``(factor, column)`` (and ``"W"``)."""

    def attempt(self, work: Callable[[], Any]) -> Any:
        """``work()``, a whole start; a backend that recovers from lost workers runs it again
        after a repair."""

    def keep(self, best) -> None:
        """The start ``best`` is the best so far: a backend holding W's rows per start may
        drop the others."""

    def rows(
        self, best: StartRecord, again: Callable[[Any], None]
    ) -> tuple[np.ndarray, np.ndarray]:
        """The kept start's W ``(balanced continuous, Boolean)``; ``again(init)`` runs that
        start again exactly from its initial factors (None for an extra start), for a backend
        that lost its rows."""
