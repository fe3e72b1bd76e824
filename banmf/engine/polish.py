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
(k ≤ 16) or from its bitsets per distinct pattern (any k)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._kernels.polish import (
    best_flips,
    best_row_codes,
    changed_bits,
    drift_bounds,
    lone_bit_lines,
    subset_sums,
    support_uncovered,
    uncovered_by_codes,
)
from .._kernels.sparse import Sparse
from ..data.dataset import Dataset
from ..data.masks import (
    csr_from_parts,
    decode_codes,
    pack_rows,
    row_codes,
    unique_rows,
)
from ..data.validation import check_boolean_factors
from ..exceptions import InvalidParameterError
from ..result import Factorization
from ..runtime.threads import blocks_for, pick, threads_for, variant
from .changes import Fixed as _Fixed
from .changes import factor_costs
from .changes import fixed_changes as _bit_changes
from .columns import swap_rows
from .protocol import Rows

__all__ = [
    "Rows",
    "WholeRows",
    "drifted",
    "flip_half_step",
    "flip_rows",
    "lone_changes",
    "lone_ones",
    "lone_uncovered",
    "moved_bits",
    "polish",
    "polish_factors",
    "polish_over",
    "polish_rows",
    "resolve_polish",
    "set_bits",
]


#: Largest k for the exact polish (it enumerates 2^k patterns per row).
EXACT_MAX_K = 16
#: ``polish="auto"`` takes the exact update while its table work per half-step, (n+m)·k·2^k,
#: is at most this or ten times the flips' nnz·k (:func:`resolve_polish`): lower errors at
#: about the flips' time (docs/decisions.md, "The exact polish's budget").
EXACT_MIN_BUDGET = 10**8
POLISH_METHODS = ("auto", "exact", "flip")
#: A one read from the fixed factor's lines (:func:`lone_ones`: its free row at random) costs
#: about this many ones read row by row (:func:`banmf.engine.changes.fixed_changes`)
#: (docs/decisions.md, "Reading a factor's lines").
LINE_COST = 2
#: The distinct codes of the fixed rows with a bit (:func:`lone_uncovered`) serve every free
#: row while there are at most this many per log2 of the free rows, against sorting them
#: (docs/decisions.md, "Reading a factor's lines").
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
    packed, :func:`banmf.data.masks.pack_rows`; the result as :func:`_bit_changes`'s): sums
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


def check_rounds(value, name: str) -> int:
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
    res = polish_factors(data, Wb, Hb, method, check_rounds(max_rounds, "max_rounds"))
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
    """Bit l of the packed rows ``A`` (:func:`banmf.data.masks.pack_rows`) becomes ``column``
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
    :func:`banmf.engine.changes.fixed_changes`'s for one bit."""
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
    """``d[i]`` of :func:`banmf.engine.changes.fixed_changes` for bit l and every free row (packed
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
