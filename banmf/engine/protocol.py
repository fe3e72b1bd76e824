"""The row-block protocol: every operation a backend provides, grouped by step.

X lives with a backend, as one block of rows (one machine) or many (Dask workers; a device
later). The driver (:mod:`banmf.engine.driver`) never sees X: it begins starts on the backend
(:class:`Backend`) and asks each (:class:`Start`) for the steps of a BANMF start. Each step is
written once, over the operations it needs of the rows, which a backend provides per block of
rows and summed over its blocks:

- the grid threshold search (:func:`banmf.engine.booleanize.search_grid`): :class:`GridCounts`;
- the NMF start's NNDSVD (:func:`banmf.engine.nndsvd.subspace_svd`): :class:`Side`;
- the per-factor thresholds, the polish and the swaps (:mod:`banmf.engine.refine`,
  :mod:`banmf.engine.polish`, :mod:`banmf.engine.swaps`): :class:`Rows`;
- the combination of the starts (:func:`banmf.engine.pool.choose`): :class:`PoolSource`,
  :class:`GrowRows`, :class:`PoolRows`.

One machine's are in :mod:`banmf.engine.local` and beside each step (``GridRows``,
``Here``, ``WholeRows``, ``WholeSource``, ``WholePool``); Dask's in
:mod:`banmf.engine.dask.backend`, over the workers' side (:mod:`banmf.engine.dask.worker`).

A start's record (a :class:`StartRecord`) travels between the driver and the backend: the
driver reads only its Boolean H, its error and its bookkeeping; W stays where the backend
keeps it (in the record on one machine, on the blocks on Dask) until :meth:`Backend.rows`.

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
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np

if TYPE_CHECKING:
    from .pool import Pool

__all__ = [
    "Backend",
    "GridCounts",
    "GrowRows",
    "PoolRows",
    "PoolSource",
    "Rows",
    "Side",
    "Start",
    "StartRecord",
]


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
    deferred : bool
        Whether Ctrl-C is deferred to the steps' safe points (counted in :attr:`interrupts`)
        rather than raised where it lands.
    p : RunSettings
        The run's settings.
    interrupts : Interruptions
        The fit's interruptions.
    unknown : {None, "missing", "observed"}
        The form of the data's unknown cells.
    sizes : tuple of int
        ``(columns, observed ones, observed cells)`` of the data.
    """

    whole_columns: ClassVar[bool]
    deferred: ClassVar[bool]
    p: Any
    interrupts: Any
    unknown: str | None
    sizes: tuple

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

    def start_factors(self, outcome, observed: bool, again: Callable) -> dict:
        """The factors of each kind of predictor of unknown cells the fit's starts
        (``outcome``) give (:func:`banmf.engine.local.predictor_factors`): every start's
        Boolean W and H, and the NMF start's balanced factors (unless ``observed``);
        ``again(run, init)`` runs a start again exactly, for a backend that lost its rows."""

    def dataset(self):
        """The data whole in this process (:class:`banmf.io.Dataset`), for the steps that read
        it whole on any backend: the predictor's inner fit and GreConD's candidates."""

    def fitted(self) -> dict:
        """The fitted attributes this backend adds to the estimator's (name → value)."""

    def inner_fits(self):
        """The context the predictor's inner fit runs in (a context manager): a backend that
        lost workers keeps them out of it."""


# -- the operations of each step, per block of rows or summed over them -------------------


# The grid threshold search.


class GridCounts(Protocol):
    """The rows' half of the grid threshold search (:func:`banmf.engine.booleanize.search_grid`):
    the counts it needs from X and the ranks of W's values, over all rows
    (:class:`banmf.engine.booleanize.GridRows`) or summed over row blocks.

    Attributes
    ----------
    batch : int
        Coverages asked for in one call of :meth:`covers`.
    """

    batch: int

    def hit_diffs(self, vt: np.ndarray, P: int) -> tuple[np.ndarray, np.ndarray | None]:
        """The difference arrays of the ones' hits and the unknown cells' (None without), at
        H's ranks ``vt`` (m, k) on a grid of ``P`` points."""

    def active_counts(self, P: int) -> np.ndarray:
        """Per grid point of W, the rows with at least one factor on."""

    def pair_counts(self, P: int) -> np.ndarray:
        """Per grid point of W and pair of factors, the rows holding both."""

    def distinct_ranks(self) -> np.ndarray:
        """The distinct rank values of W."""

    def packed_bytes(self, P: int) -> int:
        """Bytes of one threshold's packed W, for the cache's size."""

    def covers(self, requests: list, cache: int) -> list[list[int]]:
        """For each request ``(s, packed Hs)``: the ones of ``(u > s) ⊗ H`` for each H."""


# The NMF start's NNDSVD.


class Side(Protocol):
    """Where :func:`subspace_svd` keeps the blocks of one side of X (c columns of X's rows' or
    columns' length) and the three things it does with them; a block is whatever the side
    hands out (an array here, a name of rows kept on the Dask workers)."""

    def put(self, Y: np.ndarray):
        """The block of the array ``Y`` (this side's length × c)."""

    def gram(self, Y) -> np.ndarray:
        """YᵀY (c, c)."""

    def times(self, Y, M: np.ndarray):
        """The block Y M for a small M (c, w); Y is not used again."""


# The per-factor thresholds, the polish and the swaps.


class Rows(Protocol):
    """W's rows as the steps below see them, with the data's rows they belong to.

    Attributes
    ----------
    moved : ndarray of shape (k,), int
        After a flip row half-step (:meth:`polish_rows` with "flip"): per bit l, W's rows that
        it changed and that hold bit l before or after (:func:`moved_bits`), which the
        columns' bounds drift by (:func:`drifted`).
    gain : int
        After a flip row half-step: the change in error its flips made (exact: the polish
        adds it up instead of counting the error again).
    """

    moved: np.ndarray
    gain: int

    def polish_rows(self, Ht: np.ndarray, method: str) -> int:
        """The polish's row half-step against H (``Ht``, m × k): every row of W its best
        pattern ("exact") or its best single-bit flips ("flip"), in place; the moves made.
        The flips keep bounds on each row's changes from one call to the next
        (:func:`flip_half_step`) while W moves only by them."""

    def exact_columns(self, Ht: np.ndarray) -> int:
        """The exact column half-step: every row of ``Ht`` its best pattern against W, in
        place; the columns changed. Only where the data's columns are whole (the exact
        polish is refused elsewhere)."""

    def column_changes(self, A: np.ndarray, columns: np.ndarray, only: int = -1) -> np.ndarray:
        """Summed over W's rows: per column in ``columns`` (rows of H packed as ``A``) and
        factor l (``only``: that one), the change in error from switching bit l."""

    def fix(self, Htb: np.ndarray) -> None:
        """The Boolean H (``Htb``, m × k) that :meth:`factor_changes` holds fixed."""

    def factor_changes(self, l: int) -> tuple[np.ndarray, np.ndarray]:
        """W's values in column l (all rows, in order: the same at every call) and each
        row's change in error from having bit l on, against the fixed H."""

    def set_threshold(self, l: int, t: float) -> None:
        """Factor l of W is its values above ``t``."""

    def swap_costs(self, Ht: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:func:`factor_costs` of W against H, summed over the rows."""

    def swap_in(self, Ht: np.ndarray, l: int, j: int) -> None:
        """Factor l of W becomes the rows whose one in column j no other factor covers."""

    def error(self, H: np.ndarray) -> int:
        """The Hamming error of W ⊗ H on the observed cells."""

    def stopped(self) -> bool:
        """Whether a Ctrl-C asks the step under way to end at its next safe point."""


# The combination of the starts.


class PoolRows(Protocol):
    """The data's rows as the selection sees them, with the pool's rows among them and each
    row's chosen slots."""

    def gains(self, col_codes: np.ndarray, skip: np.ndarray) -> np.ndarray:
        """Summed over the rows: per candidate, the change in error from adding it to the
        selection whose column codes are ``col_codes`` (m × words), slots ``skip`` left out."""

    def assign(self, slot: int, f: int, on: bool) -> None:
        """Candidate f's rows take (``on``) or leave slot ``slot``."""


class GrowRows(Protocol):
    """The rows of :func:`grow`'s candidates, where the data's rows are."""

    def grow_rows(self, H: np.ndarray) -> None:
        """Each candidate's rows: those with more ones than observed zeros in the columns of
        its row of ``H`` (:func:`majority`), kept for :meth:`grow_columns`."""

    def grow_columns(self, t0: int, t1: int) -> tuple:
        """Summed over the rows: :func:`majority_counts` for candidates ``t0:t1`` of the rows
        kept (ones and unknown cells per candidate and column, and each candidate's rows)."""


class PoolSource(GrowRows, Protocol):
    """What :func:`choose` asks of the data's rows and the starts' factors: the data whole
    (:class:`WholeSource`), or a backend's row blocks. A factor set is whatever the source
    knows a start's factors by (a pair ``(W, H)``, or a start's key with its H)."""

    shape: tuple[int, int]
    #: Observed ones.
    nnz: int
    #: The unknown cells are given as the observed zeros (``observed=``).
    observed: bool

    def column_ones(self) -> np.ndarray:
        """Ones per column (m,)."""

    def column_work(self) -> np.ndarray:
        """Per column, the ones of the rows holding a one in it (m,;
        :func:`~banmf.engine.pool.column_work`)."""

    def set_of(self, run: StartRecord):
        """The factor set of a start's record."""

    def grown_set(self, H: np.ndarray):
        """The factor set of :func:`grow`'s candidates, their rows as last grown."""

    def row_keys(self, sets: list) -> list[tuple[list, np.ndarray]]:
        """Per set, per factor: a key that equal row sets share, and the row count
        (:func:`unique`)."""

    def pool(self, sets: list, picks: list) -> Pool:
        """The pool of the factors ``picks`` (``(set, factor)``, in order) of ``sets``."""

    def useful(self, pool: Pool) -> np.ndarray:
        """:func:`useful` of the pool."""

    def take(self, pool: Pool, keep: np.ndarray) -> Pool:
        """The candidates ``keep`` of ``pool`` (the pool of :meth:`pool`), in that order."""

    def rows(self, pool: Pool, k: int) -> PoolRows:
        """The :class:`PoolRows` of ``pool`` (the last taken), no slot assigned; asked again
        for the same pool, the same rows with what they read from X."""

    def w(self, pool: Pool, chosen: list, k: int) -> np.ndarray | None:
        """W with factor s the rows of candidate ``chosen[s]`` (-1: none), or None where the
        source keeps W's rows (as the start "combined")."""
