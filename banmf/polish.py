"""Boolean refinements after thresholding: per-factor thresholds, the Boolean polish and
factor swaps.

The first two are coordinate descents on the Hamming error of W⊗H with one factor held fixed,
where every row of the other factor is an independent problem:

* :func:`refine_thresholds` moves one threshold per column of W and per row of H (cyclic
  coordinate descent, each step an exact 1-D search over the factor's distinct values);
* :func:`polish` gives every row of W the best pattern (exactly over all 2^k, or by single-bit
  flips for any k), then every column of H, until nothing changes.

Both are local: a factor that covers little (or nothing) stays where it is. :func:`swap_factors`
moves whole factors: it replaces the factor whose removal costs least by the single column with
the most uncovered ones, when that lowers the error, and polishes again.

Neither densifies X: a row's error change from switching bit l is counted on the row's
support (ones that only bit l covers) plus, over all columns, the ones of bit l that nothing
else in the row's pattern covers, from subset-sum tables of the fixed factor's column codes
(k ≤ 16) or from its bitsets per distinct pattern (any k).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ._boolean import (
    csr_from_parts,
    decode_codes,
    pack_rows,
    row_codes,
    unique_rows,
)
from ._changes import Fixed as _Fixed
from ._changes import factor_costs
from ._changes import fixed_changes as _bit_changes
from ._kernels.polish import (
    best_flips,
    best_row_codes,
    changed_bits,
    cut_sums,
    descending_keys,
    drift_bounds,
    lone_bit_lines,
    order_ties,
    rank_buckets,
    subset_sums,
    support_uncovered,
    uncovered_by_codes,
    unpack_keys,
)
from ._kernels.sparse import Sparse
from ._threads import blocks_for, pick, threads_for, variant
from ._validation import check_boolean_factors
from .dataset import Dataset
from .exceptions import InputError, InvalidParameterError
from .result import Factorization

__all__ = ["polish", "refine_thresholds", "swap_factors"]

#: Largest k for the exact polish (it enumerates 2^k patterns per row).
EXACT_MAX_K = 16
#: ``polish="auto"`` takes the exact update while its table work per half-step, (n+m)·k·2^k,
#: is at most this or ten times the flips' nnz·k (:func:`resolve_polish`). Measured with the
#: default fit against 10⁷ (medians of 3, a busy 2-core machine): votes 232×16 k = 12, 13, 14
#: error 82 → 81, 75 → 63, 50 → 46 at 1.2×, 1.0×, 1.3× the time; Zoo k = 13, 14 errors equal at
#: 1.5×, 2.4× (under a second); LUCAP0 2000×143 k = 10, 11 (two starts) 68111 → 67649,
#: 66454 → 65964 at 0.95×, 1.1×. At 10⁷ the flips took over from k = 12 on such data.
EXACT_MIN_BUDGET = 10**8
POLISH_METHODS = ("auto", "exact", "flip")
#: A one read from the fixed factor's lines (:func:`lone_ones`: its free row at random) costs
#: about this many ones read row by row (:func:`banmf._changes.fixed_changes`). Measured on
#: power-law 10⁶ and 10⁷ nonzeros, k = 10 and 32, one thread (minima of 7, load average 12):
#: 0.4-2.6×, the lines dearer from W's side (n free rows at random), cheaper from H's.
LINE_COST = 2
#: The distinct codes of the fixed rows with a bit (:func:`lone_uncovered`) serve every free
#: row while there are at most this many per log2 of the free rows (against sorting them):
#: measured at 10⁶ nonzeros, k = 32, the crossover fell at 1.7-3 (one thread, load 12).
CODES_PER_SORT = 2


@dataclass(frozen=True)
class _Polished:
    """The polish's result (:func:`polish` returns it as a Factorization).

    Attributes
    ----------
    W : ndarray of shape (n, k), bool
    H : ndarray of shape (k, m), bool
    error : int
        Hamming error of the polished factors.
    history : list of int
        Error after every round; ``history[0]`` is the starting error.
    rounds : int
    method : {"exact", "flip"}
        The row update used (``method="auto"`` resolved).
    """

    W: np.ndarray
    H: np.ndarray
    error: int
    history: list
    rounds: int
    method: str


@dataclass(frozen=True)
class _Thresholds:
    """The threshold descent's result (:func:`refine_thresholds` returns it as a Factorization).

    Attributes
    ----------
    W : ndarray of shape (n, k), bool
        ``W_continuous > threshold_w`` (column by column).
    H : ndarray of shape (k, m), bool
        ``H_continuous > threshold_h[:, None]``.
    threshold_w, threshold_h : ndarray of shape (k,)
    error : int
    history : list of int
        Error after every sweep; ``history[0]`` is the starting error.
    """

    W: np.ndarray
    H: np.ndarray
    threshold_w: np.ndarray
    threshold_h: np.ndarray
    error: int
    history: list


def _flip_rows(
    data, free: np.ndarray, fixed_bool: np.ndarray, slack: np.ndarray | None = None
) -> tuple[int, int]:
    """Apply each row's best single-bit flip until no flip lowers its error; returns the flips
    and the change in error, as :func:`flip_rows` (``slack``: as there). The fixed factor's
    forms are built only if a row is counted."""
    fixed = None

    def changes(A, rows):
        nonlocal fixed
        if fixed is None:
            fixed = _Fixed(fixed_bool, free.shape[0])
        return _bit_changes(data, A, fixed, rows)

    return flip_rows(free, changes, slack)


def flip_rows(free: np.ndarray, changes, slack: np.ndarray | None = None) -> tuple[int, int]:
    """:func:`_flip_rows` with the rows' bit changes from ``changes(A, rows)`` (A: ``free``
    packed, :func:`banmf._boolean.pack_rows`; the result as :func:`_bit_changes`'s): sums
    over row blocks of X elsewhere serve as well as X here. Returns the flips made and the
    change in error they made (the sum of their changes: exact, rows being independent).

    ``slack`` (the shape of ``free``, in place), when given: a lower bound on each row's
    change in error from flipping each bit (:func:`drifted`). Only rows with a negative bound
    are counted (a row flips only on a negative change, so the others would not move); every
    row counted leaves its changes there.
    """
    if slack is None:
        rows = np.arange(free.shape[0])
    else:
        # Lowered by nothing, the bounds only tell which rows have one below zero.
        negative = np.empty(free.shape[0], dtype=bool)
        pick(drift_bounds, slack.size)(slack, np.zeros(slack.shape[1], np.int64), negative)
        rows = np.flatnonzero(negative)
    if not len(rows):
        return 0, 0
    A = pack_rows(free)
    bounds = np.empty((0, free.shape[1]), dtype=np.int16) if slack is None else slack
    flips = total = 0
    while len(rows):
        d = changes(A, rows)
        moved = np.empty(len(rows), dtype=bool)
        total += int(pick(best_flips, d.size)(d, rows, free, A, bounds, slack is not None, moved))
        rows = rows[moved]
        flips += len(rows)
    return flips, total


def drifted(slack: np.ndarray | None, shape: tuple[int, int], moved) -> np.ndarray:
    """:func:`flip_rows`'s ``slack`` for free rows of ``shape`` after the fixed factor moved:
    ``moved[l]`` at least the fixed rows that changed and hold bit l before or after. New
    bounds (-1: unknown) if there were none, else lowered in place, a negative one kept as
    -1 (it only says that the flip may lower the error). Such a fixed row adds to a free
    row's change from flipping bit l the one cell they share (covered by bit l alone or
    not), so it moves that change by at most one; a fixed row without bit l adds nothing
    to it."""
    if slack is None:
        return np.full(shape, -1, dtype=np.int16)
    negative = np.empty(shape[0], dtype=bool)
    pick(drift_bounds, slack.size)(slack, np.asarray(moved, dtype=np.int64), negative)
    return slack


def moved_bits(before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """Per bit l: the rows that changed between the Boolean ``before`` and ``after`` and hold
    bit l in either (:func:`drifted`'s ``moved``)."""
    threads = threads_for(before.size)
    out = np.empty((blocks_for(threads, before.shape[0]), before.shape[1]), dtype=np.int64)
    variant(changed_bits, threads)(before, after, len(out), out)
    return out.sum(axis=0)


def _exact_rows(data, free: np.ndarray, fixed_bool: np.ndarray) -> int:
    """Give every row its best pattern among all 2^k (strict gains only); returns rows changed."""
    X, unknown = data.X, data.unknown
    k = free.shape[1]
    a, b = row_codes(free), row_codes(fixed_bool)
    F = np.bincount(b, minlength=1 << k).astype(np.int64)
    subset_sums(F, k)
    # Every row scans all 2^k patterns. Integer counts: the blocks may follow the threads.
    C = _no_cells(X) if unknown is None else unknown.cells
    threads = threads_for(X.shape[0] * (1 << k) + X.nnz + C.nnz)
    n_blocks = blocks_for(threads, X.shape[0])
    observed = unknown is not None and unknown.observed
    changed = variant(best_row_codes, threads)(
        Sparse(X.indptr, X.indices),
        Sparse(C.indptr, C.indices),
        observed,
        b,
        F,
        k,
        X.shape[1],
        a,
        n_blocks,
    )
    free[:] = decode_codes(a, k)
    return int(changed)


def _no_cells(X):
    """An empty mask of X's shape and index type: no unknown cells."""
    n, m = X.shape
    return csr_from_parts(np.zeros(n + 1, X.indptr.dtype), np.zeros(0, X.indices.dtype), (n, m))


def polish_rows(data, free: np.ndarray, fixed_bool: np.ndarray, method: str) -> int:
    """One half-step of the polish: every row of ``free`` (in place) against ``fixed_bool``
    (one row per column of the data), by the resolved ``method``, counting the observed cells
    of ``data`` (a :class:`banmf.io.Dataset`, or its transpose for the columns); returns how
    many moves were made."""
    if method == "exact":
        return _exact_rows(data, free, fixed_bool)
    return _flip_rows(data, free, fixed_bool)[0]


def resolve_polish(method: str, shape: tuple[int, int], nnz: int, k: int) -> str:
    """ "auto" for data of ``shape`` with ``nnz`` ones: the exact update while its
    (n+m)·k·2^k table work stays within :data:`EXACT_MIN_BUDGET` or near the flips' O(nnz·k)."""
    if method != "auto":
        return method
    n, m = shape
    exact_cost = (n + m) * k * (1 << k) if k <= EXACT_MAX_K else np.inf
    return "exact" if exact_cost <= max(EXACT_MIN_BUDGET, 10 * nnz * k) else "flip"


def _check_rounds(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise InvalidParameterError(f"{name} must be a nonnegative integer, got {value!r}")
    return int(value)


def polish(
    X, W, H, *, method: str = "auto", max_rounds: int = 100, missing=None, observed=None
) -> Factorization:
    """Improve Boolean factors by alternating exact Boolean row and column updates.

    With H fixed, every row of W is changed to a pattern with a lower row error; then every
    column of H with W fixed; repeated until a round changes nothing (or ``max_rounds``). A row
    or column changes only on a strict improvement, so the error never rises.

    Parameters
    ----------
    X : array-like or sparse of shape (n, m)
    W : array-like of shape (n, k), Boolean
    H : array-like of shape (k, m), Boolean
    method : {"auto", "exact", "flip"}, default "auto"
        "exact": each row takes the best of all 2^k patterns (subset-sum transform over the
        column codes, O(nnz + n·k·2^k) per half-step; k ≤ 16). "flip": each row applies its best
        single-bit flip until none helps (O(nnz·k) per pass; any k) — a local optimum per row
        rather than the global one. "auto" takes "exact" while its (n+m)·k·2^k table work
        stays within 10⁸ or ten times the flips' (small data up to k ≈ 14), else "flip".
    max_rounds : int, default 100
    missing, observed : array-like or sparse of shape (n, m), optional
        Unknown cells, as in :meth:`banmf.BANMF.fit`: the errors count observed cells only.

    Returns
    -------
    Factorization
        ``method="polish"``, ``n_iter`` the rounds run; its ``info`` holds ``history`` (the
        error after every round; ``history[0]`` is the starting error) and ``method`` (the row
        update used: "exact" or "flip").

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]])
    >>> polish(X, [[1, 0], [0, 0], [0, 1]], [[1, 1, 0], [0, 0, 1]]).error
    0
    """
    data = Dataset.of(X, missing, observed)
    X = data.X
    Wb, Hb = check_boolean_factors(W, H, X.shape)
    k = Wb.shape[1]
    if method not in POLISH_METHODS:
        raise InvalidParameterError(f"method must be one of {POLISH_METHODS}, got {method!r}")
    if method == "exact" and k > EXACT_MAX_K:
        raise InvalidParameterError(
            f"the exact polish enumerates 2^k patterns per row: k={k} exceeds {EXACT_MAX_K}; "
            "use method='flip'"
        )
    res = polish_factors(data, Wb, Hb, method, _check_rounds(max_rounds, "max_rounds"))
    return Factorization.from_factors(
        data,
        res.W,
        res.H,
        error=res.error,
        method="polish",
        n_iter=res.rounds,
        params={"method": method, "max_rounds": max_rounds},
        info={"history": res.history, "method": res.method},
    )


def polish_factors(
    data, Wb: np.ndarray, Hb: np.ndarray, method: str = "auto", max_rounds: int = 100
) -> _Polished:
    """:func:`polish` on a :class:`banmf.io.Dataset` and Boolean factors (trusted)."""
    method = resolve_polish(method, data.shape, data.nnz, Wb.shape[1])
    rows = WholeRows(data, Wb.copy())  # copies: the caller's factors stay as they are
    Ht = np.array(Hb.T, order="C")
    history = [rows.error(Ht.T)]
    rounds = polish_over(rows, Ht, method, max_rounds, history)
    return _Polished(rows.W, np.ascontiguousarray(Ht.T), history[-1], history, rounds, method)


def refine_thresholds(
    X, W, H, threshold_w, threshold_h, *, max_sweeps: int = 100, missing=None, observed=None
) -> Factorization:
    """Per-factor thresholds by cyclic coordinate descent, from given (e.g. global) ones.

    Starting from ``W > threshold_w`` and ``H > threshold_h``, each column l of W in turn gets the
    threshold (over all cuts between its distinct values) with the lowest Hamming error, all
    else fixed; then each row of H; sweeps repeat until one changes nothing. A threshold moves
    only on a strict improvement, so the result is never worse than the start (in particular
    than the global grid optimum of :func:`banmf.booleanize`).

    Parameters
    ----------
    X : array-like or sparse of shape (n, m)
    W : array-like of shape (n, k)
        Nonnegative factor (e.g. ``booleanize(X, W, H).info["W_scaled"]``).
    H : array-like of shape (k, m)
    threshold_w, threshold_h : float or array-like of shape (k,)
        Starting thresholds (strict ``>``).
    max_sweeps : int, default 100
    missing, observed : array-like or sparse of shape (n, m), optional
        Unknown cells, as in :meth:`banmf.BANMF.fit`: the errors count observed cells only.

    Returns
    -------
    Factorization
        ``method="refine_thresholds"``; its ``info`` holds ``threshold_w`` and ``threshold_h``
        (arrays of shape (k,): ``W`` is ``W_continuous > threshold_w``, column by column, and
        ``H`` is ``H_continuous > threshold_h[:, None]``) and ``history`` (the error after every
        sweep; ``history[0]`` is the starting error).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]])
    >>> W = [[0.9, 0.0], [0.6, 0.1], [0.0, 0.3]]
    >>> H = [[1.0, 0.8, 0.1], [0.0, 0.1, 0.9]]
    >>> res = refine_thresholds(X, W, H, 0.5, 0.5)
    >>> res.error, res.info["threshold_w"].tolist()
    (0, [0.5, 0.1])
    """
    data = Dataset.of(X, missing, observed)
    X = data.X
    Wf = np.asarray(W, dtype=np.float64)
    Hf = np.asarray(H, dtype=np.float64)
    if (
        Wf.ndim != 2
        or Hf.ndim != 2
        or Wf.shape[1] != Hf.shape[0]
        or (Wf.shape[0], Hf.shape[1]) != X.shape
    ):
        raise InputError(
            f"shapes do not fit: X {X.shape}, W {Wf.shape}, H {Hf.shape}; need W (n, k), H (k, m)"
        )
    if not (np.isfinite(Wf).all() and np.isfinite(Hf).all()):
        raise InputError("W and H must be finite")
    k = Wf.shape[1]
    tw = np.broadcast_to(np.asarray(threshold_w, dtype=np.float64), (k,)).copy()
    th = np.broadcast_to(np.asarray(threshold_h, dtype=np.float64), (k,)).copy()
    res = refine_factor_thresholds(data, Wf, Hf, tw, th, _check_rounds(max_sweeps, "max_sweeps"))
    return Factorization.from_factors(
        data,
        res.W,
        res.H,
        error=res.error,
        method="refine_thresholds",
        n_iter=len(res.history) - 1,
        params={"max_sweeps": max_sweeps},
        info={
            "threshold_w": res.threshold_w,
            "threshold_h": res.threshold_h,
            "history": res.history,
        },
    )


def refine_factor_thresholds(data, W, H, tw, th, max_sweeps: int = 100) -> _Thresholds:
    """:func:`refine_thresholds` on trusted inputs (``data`` a :class:`banmf.io.Dataset`);
    ``tw``, ``th`` (k,) are updated in place."""
    rows = WholeRows(data, W > tw, W)
    Ht = np.ascontiguousarray(H.T)
    history = [rows.error((Ht > th).T)]
    Htb = thresholds_over(rows, Ht, tw, th, max_sweeps, history)
    return _Thresholds(rows.W, np.ascontiguousarray(Htb.T), tw, th, history[-1], history)


# -- the steps over W's rows, wherever they live -------------------------------------------
#
# The per-factor thresholds, the polish and the swaps, written once. W's rows are independent
# given H, so each step asks its ``rows`` (all here: :class:`WholeRows`; in row blocks on
# workers: banmf.distributed's) for per-row work and for sums over rows, and decides the rest
# here. Integer counts throughout: where the rows live never changes a result.


def flip_half_step(data, W: np.ndarray, Ht: np.ndarray, slack: np.ndarray | None, moved):
    """The flip row half-step on the rows ``W`` (in place) of ``data`` against H (``Ht``,
    m × k) with :func:`flip_rows`' bounds: ``slack``, those the last half-step left (None:
    none), lowered first by ``moved``, H's rows that changed since per bit
    (:func:`moved_bits`). Returns ``(bounds, flips, moved, gain)``: the bounds for the next
    half-step, the flips made, W's rows that they changed per bit and the change in error
    they made. Rows being independent, a row block's rows serve as well as all of them."""
    slack = drifted(slack, W.shape, moved)
    before = W.copy()
    flips, gain = _flip_rows(data, W, Ht, slack)
    return slack, flips, moved_bits(before, W), gain


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


class WholeRows:
    """:class:`Rows` with W and the data whole in this process (``scaled``: W's values, for
    the thresholds)."""

    def __init__(self, data, W: np.ndarray, scaled: np.ndarray | None = None):
        self.data, self.W, self.scaled = data, W, scaled
        self._against_w = None  # W as the fixed side of the column changes, until W moves
        self._against_h = None
        self._h_lines = None  # per factor, the columns of the fixed H that hold it
        self._packed = None  # W packed, kept in step by set_threshold
        # The flips' bounds on each row's change per bit (:func:`flip_rows`) and H as they
        # were counted against: kept from one row half-step to the next while W moves
        # only by the flips.
        self._slack = self._counted = None
        self.moved = None  # per bit, W's rows that the last flips changed (:func:`moved_bits`)
        self.gain = None  # and the change in error they made

    def polish_rows(self, Ht, method):
        self._against_w = self._packed = None
        if method != "flip":
            return polish_rows(self.data, self.W, Ht, method)
        moved = None if self._slack is None else moved_bits(self._counted, Ht)
        self._counted = Ht.copy()
        self._slack, flips, self.moved, self.gain = flip_half_step(
            self.data, self.W, Ht, self._slack, moved
        )
        return flips

    def exact_columns(self, Ht):
        return _exact_rows(self.data.T, Ht, self.W)

    def column_changes(self, A, columns, only=-1):
        if self._against_w is None:
            self._against_w = _Fixed(self.W, self.data.shape[1])
        if only >= 0 and len(columns) == self.data.shape[1]:
            # One factor over every column (the thresholds): from W's rows with the bit.
            lines = np.flatnonzero(self.W[:, only])
            d = lone_changes(self.data.T, self.data, A, self._against_w, lines, only)
            return d[columns, None]
        return _bit_changes(self.data.T, A, self._against_w, columns, only)

    def fix(self, Htb):
        self._against_h = _Fixed(Htb, self.W.shape[0])
        self._h_lines = [np.flatnonzero(column) for column in Htb.T]

    def factor_changes(self, l):
        if self._packed is None:
            self._packed = pack_rows(self.W)
        d = lone_changes(self.data, self.data.T, self._packed, self._against_h, self._h_lines[l], l)
        return self.scaled[:, l], d

    def set_threshold(self, l, t):
        self.W[:, l] = self.scaled[:, l] > t
        if self._packed is not None:
            set_bits(self._packed, l, self.W[:, l])
        self._against_w = self._slack = None

    def swap_costs(self, Ht):
        return factor_costs(self.data, self.W, Ht)

    def swap_in(self, Ht, l, j):
        rows = swap_rows(self.data.T.X, self.W, Ht, l, j)
        self.W[:, l] = False
        self.W[rows, l] = True
        self._against_w = self._packed = self._slack = None

    def error(self, H):
        return self.data.error(self.W, H)

    def stopped(self):
        return False


def set_bits(A: np.ndarray, l: int, column: np.ndarray) -> None:
    """Bit l of the packed rows ``A`` (:func:`banmf._boolean.pack_rows`) becomes ``column``
    (one bool per row), in place: a factor's move without packing the others again."""
    w, shift = l >> 6, np.uint64(l & 63)
    A[:, w] &= ~(np.uint64(1) << shift)
    A[:, w] |= column.astype(np.uint64) << shift


def lone_ones(M, Mt, A: np.ndarray, fixed: _Fixed, lines: np.ndarray, l: int) -> np.ndarray:
    """Per free row (packed ``A``): the cells of the mask ``M`` (one row per free row) that bit
    l alone covers or would cover, other bits as in A. Read from the lines of ``Mt`` (the
    mask seen from the fixed side: one row per row of the fixed factor) that ``lines`` names,
    the fixed rows with bit l; or, when those hold over 1 / :data:`LINE_COST` of the cells,
    from every row of M, in order. Integer counts, as
    :func:`banmf._changes.fixed_changes`'s for one bit."""
    total = int((Mt.indptr[lines + 1] - Mt.indptr[lines]).sum())
    words = fixed.codes.shape[1]
    if LINE_COST * total >= M.nnz and M.nnz:
        out = np.empty((A.shape[0], 1), dtype=np.int64)
        rows = np.arange(A.shape[0])
        work = M.nnz * words * 4  # as fixed_changes counts a row pass
        pick(support_uncovered, work)(M.indptr, M.indices, A, fixed.codes, rows, l, out)
        return out[:, 0]
    threads = threads_for(total * words)
    # One block of free rows per thread: each line is bisected once per block.
    n = A.shape[0]
    cuts = n * np.arange(threads + 1, dtype=np.int64) // threads
    out = np.empty(n, dtype=np.int64)
    variant(lone_bit_lines, threads)(Mt.indptr, Mt.indices, lines, cuts, A, fixed.codes, l, out)
    return out


def lone_uncovered(A: np.ndarray, fixed: _Fixed, lines: np.ndarray, l: int) -> np.ndarray:
    """Per free row (packed ``A``): the columns with bit l that no other bit of its pattern
    covers, ``fixed.uncovered(A, l)[:, 0]``. Without the fixed factor's tables, from the
    distinct codes of its rows with bit l (``lines``) when they are few against the sort of
    A's rows that the bitsets need (:data:`CODES_PER_SORT`)."""
    if fixed.tables is None:
        codes = fixed.codes[lines]
        codes[:, l >> 6] &= ~(np.uint64(1) << np.uint64(l & 63))
        distinct, _, counts = unique_rows(codes)
        if distinct.size <= CODES_PER_SORT * np.log2(A.shape[0] + 1):
            out = np.empty(A.shape[0], dtype=np.int64)
            pick(uncovered_by_codes, A.shape[0] * distinct.size)(A, distinct, counts, out)
            return out
    return fixed.uncovered(A, l)[:, 0]


def lone_changes(data, other, A, fixed: _Fixed, lines: np.ndarray, l: int) -> np.ndarray:
    """``d[i]`` of :func:`banmf._changes.fixed_changes` for bit l and every free row (packed
    ``A``, the rows of ``data``), the same integers, with ``other`` (``data`` seen from the
    fixed side: its transpose) and the fixed rows with bit l (``lines``): a factor's share of
    the ones (:func:`lone_ones`) and of the fixed rows (:func:`lone_uncovered`) instead of all
    of them."""
    unknown = data.unknown
    sup = lone_ones(data.X, other.X, A, fixed, lines, l)
    if unknown is None and fixed.tables is not None:
        # In place from the ones, the tables read as the flips read them: at 10⁸ nonzeros an
        # n-long count of the columns and two passes of numpy over it, per factor, took
        # 8 of the 60 s (W's 10⁷ rows, k = 10).
        return fixed.changes(A, None, l, sup[:, None])[:, 0]
    if unknown is None:
        d = lone_uncovered(A, fixed, lines, l)
    else:
        cells = lone_ones(unknown.cells, other.unknown.cells, A, fixed, lines, l)
        every = None if unknown.observed else lone_uncovered(A, fixed, lines, l)
        d = unknown.covered(every, sup, cells)
    # In place (d is new): two n-long temporaries a factor cost more than the kernels'
    # counts at 10⁷ rows (their pages faulted in at every call).
    d -= sup
    d -= sup
    return d


def polish_over(
    rows: Rows, Ht: np.ndarray, method: str, max_rounds: int = 100, history: list | None = None
) -> int:
    """The Boolean polish (:func:`polish`) of W (``rows``) and H (``Ht``, m × k, in place):
    rounds of the row half-step and the column half-step until a round changes nothing, at
    most ``max_rounds`` (and after the round under way on Ctrl-C). Appends each round's error
    to ``history`` (the flips' from its last entry, the starting error, and their changes);
    returns the rounds run."""
    rounds = 0
    slack = None  # the columns' bounds for the flips (:func:`flip_rows`), kept over rounds
    for rounds in range(1, max_rounds + 1):
        changed = rows.polish_rows(Ht, method)
        gain = None
        if method == "exact":
            changed += rows.exact_columns(Ht)
        else:
            # The flips of W say what they changed: the rows per bit, and the error.
            slack = drifted(slack, Ht.shape, rows.moved)
            flips, column_gain = flip_rows(Ht, rows.column_changes, slack)
            changed += flips
            gain = rows.gain + column_gain
        if history is not None:
            # Counted whole unless the flips' changes, exact, add up to it from the last.
            history.append(rows.error(Ht.T) if gain is None or not history else history[-1] + gain)
        if changed == 0 or rows.stopped():
            break
    return rounds


def thresholds_over(
    rows: Rows,
    Ht: np.ndarray,
    tw: np.ndarray,
    th: np.ndarray,
    max_sweeps: int = 100,
    history: list | None = None,
) -> np.ndarray:
    """Per-factor thresholds (:func:`refine_thresholds`) by cyclic coordinate descent: each
    column l of W (``rows``, from their values) and each row of H (``Ht``, H's values m × k)
    gets the exact best cut with all else fixed; sweeps until none moves, at most
    ``max_sweeps`` (and after the sweep under way on Ctrl-C). ``tw``, ``th`` (k,) are updated
    in place; each sweep's error is appended to ``history`` (its last entry, the starting
    error, plus the moves' changes; counted if it is empty). Returns the Boolean Hᵀ."""
    m, k = Ht.shape
    Htb = Ht > th
    columns = np.arange(m)
    # H's rows in decreasing order of value per factor, sorted once (the order within ties is
    # irrelevant: cuts fall only where the value drops), with their values in that order.
    h_sorted, h_layout = zip(*(sorted_cuts(Ht[:, l]) for l in range(k)))
    # W's, on the first sweep: its values are the same at every sweep.
    w_sorted: list = [None] * k
    # The cuts' scratch, one per side, kept over the sweeps: at 10⁸ nonzeros the first cut of
    # W after H's took 0.15-0.3 s against 0.05 for the others, its fresh pages faulted in.
    h_scratch, w_scratch = np.empty((2, m), dtype=np.int64), None
    for _ in range(max_sweeps):
        moved = gain = 0
        rows.fix(Htb)
        for l in range(k):
            vals, d = rows.factor_changes(l)
            if w_sorted[l] is None:
                w_sorted[l] = sorted_cuts(vals)
            if w_scratch is None:
                w_scratch = np.empty((2, len(vals)), dtype=np.int64)
            better = best_cut(*w_sorted[l], d, tw[l], w_scratch)
            if better is not None:
                tw[l], change = better
                rows.set_threshold(l, float(tw[l]))
                moved, gain = moved + 1, gain + change
        A = pack_rows(Htb)
        for l in range(k):
            d = rows.column_changes(A, columns, l)[:, 0]
            better = best_cut(h_sorted[l], h_layout[l], d, th[l], h_scratch)
            if better is not None:
                th[l], change = better
                Htb[:, l] = Ht[:, l] > th[l]
                set_bits(A, l, Htb[:, l])
                moved, gain = moved + 1, gain + change
        if history is not None:
            # Each move's change is exact with all else fixed: their sum is the sweep's, with no
            # count of the error over X.
            history.append(history[-1] + gain if history else rows.error(Htb.T))
        if moved == 0 or rows.stopped():
            break
    return Htb


def swaps_over(rows: Rows, Ht: np.ndarray, method: str, most: int):
    """The swaps of :func:`swap_factors` on W (``rows``) and H (``Ht``, in place): the best
    swap (:func:`choose_swap`) and the polish after it, while that lowers the error, at most
    ``most`` times (none more after a Ctrl-C). Yields ``(factor, column, error)`` after each."""
    for _ in range(most):
        if rows.stopped():
            return
        change, l, j = choose_swap(*rows.swap_costs(Ht))
        if change >= 0:
            return
        rows.swap_in(Ht, l, j)
        Ht[:, l] = False
        Ht[j, l] = True
        history = []
        polish_over(rows, Ht, method, history=history)
        # The polish never raises the error, so each swap lowers it strictly: this ends.
        yield l, j, history[-1]


def descending(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``values`` in decreasing order (ties in a fixed order, whatever the threads: all that
    :func:`best_cut` needs) and their positions: each value packed with its position in one word
    (:func:`~banmf._kernels.polish.descending_keys`), the words sorted by numpy's vectorised
    sort, and the rare runs whose values share the words' top bits put in order
    (:func:`~banmf._kernels.polish.order_ties`). At 10⁸ nonzeros an argsort of W's values per
    factor was the per-factor thresholds' serial step: 1.0-1.3 s for 10⁷ values against
    0.33-0.5 s so (load 3.8); sorting parts on threads and merging them had taken 1.4-2.1 s."""
    n = len(values)
    shift = np.uint64(max(n - 1, 0).bit_length())
    keys = np.empty(n, dtype=np.uint64)
    pick(descending_keys, n)(values.astype(np.float64, copy=False).view(np.uint64), shift, keys)
    keys.sort()
    vals, order = np.empty(n, dtype=values.dtype), np.empty(n, dtype=np.intp)
    pick(unpack_keys, n)(keys, shift, values, vals, order)
    order_ties(keys, shift, vals, order)
    return vals, order


#: :func:`cut_layout` cuts the ranks into at most this many buckets.
CUT_BUCKETS = 1024


def cut_layout(order: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """How :func:`banmf._kernels.polish.cut_sums` takes a factor's changes into the order
    ``order`` (its rows by decreasing value): ``(pos, low, shift)`` of
    :func:`~banmf._kernels.polish.rank_buckets`, with at most :data:`CUT_BUCKETS` buckets of
    ranks (2^shift each: 2^14 at 10⁷ rows, whose part of the scratch stays in cache)."""
    n = len(order)
    shift = max(0, max(n - 1, 0).bit_length() - CUT_BUCKETS.bit_length() + 1)
    index = np.int32 if n < 2**31 else np.int64
    pos, low = np.empty(n, dtype=index), np.empty(n, dtype=np.int32)
    rank_buckets(order, shift, pos, low)
    return pos, low, shift


def sorted_cuts(values: np.ndarray) -> tuple[np.ndarray, tuple]:
    """``values`` in decreasing order and the :func:`cut_layout` of their order: what
    :func:`best_cut` takes, made once per factor."""
    vals, order = descending(values)
    return vals, cut_layout(order)


def best_cut(
    vals: np.ndarray, layout: tuple, d: np.ndarray, t: float, scratch: np.ndarray
) -> tuple[float, int] | None:
    """One factor's best threshold, exactly, and the change in error it makes (< 0), or None
    if none beats ``t``: ``vals`` its values in decreasing order (over all rows; ties in any
    order), ``layout`` the :func:`cut_layout` of the rows in that order, ``d`` each row's
    change in error from having the bit on, ``scratch`` (2, n) int64. The error past a cut is
    a prefix sum of ``d`` in that order (ties: the highest threshold), found in one parallel
    kernel (:func:`banmf._kernels.polish.cut_sums`) that takes d into the order as it sums."""
    n = len(vals)
    pos, low, shift = layout
    current = n - int(np.searchsorted(vals[::-1], t, side="right"))  # the rows above t
    threads = threads_for(n)
    sums = np.empty(((n - 1) >> shift) + 1 if n else 0, dtype=np.int64)
    out = np.empty(3, dtype=np.int64)
    variant(cut_sums, threads)(vals, d, pos, low, shift, current, scratch[0], scratch[1], sums, out)
    best, least, now = (int(v) for v in out)
    if least >= now:
        return None
    return (vals[best] if best < n else np.nextafter(vals[-1], -np.inf)), least - now


def column_factors(Xt, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Boolean W (n, k), H (k, m) whose factor l is the column of X with the l-th most ones
    (ties: the lower index) with all its rows; factors past the m-th stay empty. ``Xt`` is the
    support mask of Xᵀ (trusted)."""
    return columns_as_factors(Xt, top_columns(np.diff(Xt.indptr), k), k)


def top_columns(counts: np.ndarray, k: int) -> np.ndarray:
    """The (at most) k columns with the most ones, most first (ties: the lower index)."""
    return np.argsort(-counts, kind="stable")[: min(k, len(counts))]


def columns_as_factors(Xt, top: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Boolean W (n, k), H (k, m) whose factor l is column ``top[l]`` of X with all its rows
    (``Xt``: the mask of Xᵀ, or of a row block's transpose for the block's rows of W)."""
    m, n = Xt.shape
    W = np.zeros((n, k), dtype=bool)
    H = np.zeros((k, m), dtype=bool)
    for l, j in enumerate(top):
        W[Xt.indices[Xt.indptr[j] : Xt.indptr[j + 1]], l] = True
        H[l, j] = True
    return W, H


@dataclass(frozen=True)
class _Swap:
    """One accepted factor swap and the polish after it (:func:`swap_steps` yields these).

    Attributes
    ----------
    W : ndarray of shape (n, k), bool
    H : ndarray of shape (k, m), bool
    error : int
        Hamming error after the swap and the polish.
    factor, column : int
        Factor ``factor`` was replaced by column ``column`` of X (with its uncovered ones).
    """

    W: np.ndarray
    H: np.ndarray
    error: int
    factor: int
    column: int


def choose_swap(removal: np.ndarray, cover: np.ndarray) -> tuple[int, int, int]:
    """The swap that lowers the error most, ``(change, factor, column)``, from
    :func:`factor_costs`' results (sums over rows, so row blocks' results added serve as well);
    ``change >= 0`` means no swap helps.

    Removing factor l changes the error by the sum over its rows of the error with bit l off
    minus with it on (rows are independent given H); column j then gains, as a factor of its
    own over the rows where its ones are left uncovered, exactly those ones. So the best swap
    over every (l, j) costs one pass over the rows and one over the columns: O(nnz·k), not a
    trial fit per pair. The new factor covers ones only, so unknown cells change the removal
    costs alone."""
    k = len(removal)
    # gain[j, l]: the ones of column j that nothing covers once factor l is gone.
    gain = cover[:, :k] + cover[:, k:]
    best_column = gain.argmax(axis=0) if len(gain) else np.zeros(k, dtype=np.intp)
    change = removal - (gain[best_column, np.arange(k)] if len(gain) else 0)
    l = int(np.argmin(change))
    return int(change[l]), l, int(best_column[l])


def swap_rows(Xt, W: np.ndarray, Ht: np.ndarray, l: int, j: int) -> np.ndarray:
    """The rows of factor l after swapping in column j: those whose one in column j no other
    factor covers (rows are independent: a row block answers for its own rows)."""
    ones = Xt.indices[Xt.indptr[j] : Xt.indptr[j + 1]]
    others = Ht[j].copy()
    others[l] = False
    return ones[~(W[ones] & others).any(axis=1)]


def swap_steps(data, Wb: np.ndarray, Hb: np.ndarray, method: str, max_swaps: int):
    """Apply the best swap (:func:`best_swap`) and polish, while that lowers the error, at
    most ``max_swaps`` times; yields a :class:`_Swap` after each (a caller that stops early
    keeps the last). Trusted inputs (``data`` a :class:`banmf.io.Dataset`); the caller's
    factors are not changed."""
    method = resolve_polish(method, data.shape, data.nnz, Wb.shape[1])
    rows = WholeRows(data, Wb.copy())
    Ht = np.array(Hb.T, order="C")
    for l, j, error in swaps_over(rows, Ht, method, max_swaps):
        # Copies: the caller keeps each step's factors while the next one changes these.
        yield _Swap(rows.W.copy(), np.ascontiguousarray(Ht.T), error, l, j)


def swap_factors(
    X,
    W,
    H,
    *,
    max_swaps: int | None = None,
    method: str = "auto",
    missing=None,
    observed=None,
) -> Factorization:
    """Replace weak factors by strong columns: a search over whole factors after the polish.

    Each step finds, over every factor l and column j, the swap that lowers the Hamming error
    most: drop factor l and put in its place column j alone, over the rows whose ones in
    column j are then uncovered. If it lowers the error, it is made and the factors are
    polished (:func:`polish`) so that the new factor grows to the rows and columns it fits;
    steps repeat until no swap helps (or ``max_swaps``). The error falls strictly at every
    step.

    Why: the polish moves single entries, so a factor that covers little — an empty one, or one
    of several that share the same heavy column, common after a relaxed fit of very sparse
    data — stays. On sparse data the factors that matter most are often single frequent
    columns, and a swap puts them in.

    Parameters
    ----------
    X : array-like or sparse of shape (n, m)
    W : array-like of shape (n, k), Boolean
    H : array-like of shape (k, m), Boolean
    max_swaps : int or None, default None
        None: until no swap lowers the error.
    method : {"auto", "exact", "flip"}, default "auto"
        The polish after each swap (see :func:`polish`).
    missing, observed : array-like or sparse of shape (n, m), optional
        Unknown cells, as in :meth:`banmf.BANMF.fit`: the errors count observed cells only.

    Returns
    -------
    Factorization
        ``method="swap_factors"``, ``n_iter`` the swaps made; its ``info`` holds ``history``
        (the error before the first swap and after each swap and polish) and ``swaps`` (the
        ``(factor, column)`` of each).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]])
    >>> res = swap_factors(X, [[1, 1], [1, 1], [0, 0]], [[1, 1, 0], [1, 1, 0]])
    >>> res.error, res.info["swaps"]
    (0, [(0, 2)])
    """
    data = Dataset.of(X, missing, observed)
    Wb, Hb = check_boolean_factors(W, H, data.shape)
    if method not in POLISH_METHODS:
        raise InvalidParameterError(f"method must be one of {POLISH_METHODS}, got {method!r}")
    if method == "exact" and Wb.shape[1] > EXACT_MAX_K:
        raise InvalidParameterError(
            f"the exact polish enumerates 2^k patterns per row: k={Wb.shape[1]} exceeds "
            f"{EXACT_MAX_K}; use method='flip'"
        )
    limit = np.iinfo(np.int64).max if max_swaps is None else _check_rounds(max_swaps, "max_swaps")
    history, swaps = [data.error(Wb, Hb)], []
    W, H = Wb, Hb
    if Wb.shape[1]:
        for step in swap_steps(data, Wb, Hb, method, limit):
            W, H = step.W, step.H
            history.append(step.error)
            swaps.append((step.factor, step.column))
    return Factorization.from_factors(
        data,
        W,
        H,
        error=history[-1],
        method="swap_factors",
        n_iter=len(swaps),
        params={"max_swaps": max_swaps, "method": method},
        info={"history": history, "swaps": swaps},
    )
