"""Per-factor thresholds: one threshold per column of W and per row of H by cyclic coordinate
descent from the grid optimum, each step an exact 1-D search over the factor's distinct values
(:func:`refine_thresholds`), written once over W's rows wherever they live
(:class:`~banmf.engine.protocol.Rows`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._kernels.polish import (
    cut_sums,
    descending_keys,
    order_ties,
    rank_buckets,
    unpack_keys,
)
from ..data.dataset import Dataset
from ..data.masks import (
    pack_rows,
)
from ..exceptions import InputError
from ..result import Factorization
from ..runtime.threads import pick, threads_for, variant
from .polish import Rows, WholeRows, check_rounds, set_bits

__all__ = [
    "best_cut",
    "cut_layout",
    "descending",
    "refine_factor_thresholds",
    "refine_thresholds",
    "sorted_cuts",
    "thresholds_over",
]


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
    res = refine_factor_thresholds(data, Wf, Hf, tw, th, check_rounds(max_sweeps, "max_sweeps"))
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


#: Below this many values (rows of W, columns of H) :func:`descending`, :func:`cut_layout` and
#: :func:`best_cut` use numpy's sort and prefix sums instead of the kernels: as fast there,
#: and a small fit then never compiles the five kernels the large path calls
#: (docs/decisions.md, "Sorting for the thresholds").
SMALL_CUTS = 4096


def descending(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``values`` (finite) in decreasing order, ties by row and -0.0 after +0.0 (one order,
    whatever the threads and the path), and their positions. Below :data:`SMALL_CUTS` values,
    numpy's stable sort; above, each value packed with its position in one word
    (:func:`~banmf._kernels.polish.descending_keys`), the words sorted by numpy's vectorised
    sort, and the rare runs whose values share the words' top bits put in order
    (:func:`~banmf._kernels.polish.order_ties`). An argsort of the values per factor, the
    per-factor thresholds' serial step at scale, takes about three times as long
    (docs/decisions.md, "Sorting for the thresholds")."""
    n = len(values)
    if n < SMALL_CUTS:
        # The last key sorts first: decreasing value, then +0.0 before -0.0 (as the kernels'
        # keys order them), then row (the sort is stable).
        order = np.lexsort((np.signbit(values), -values))
        return values[order], order
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


def cut_layout(order: np.ndarray) -> tuple | np.ndarray:
    """How :func:`best_cut` takes a factor's changes into the order ``order`` (its rows by
    decreasing value): below :data:`SMALL_CUTS` rows the order itself, gathered by numpy;
    above, ``(pos, low, shift)`` of :func:`~banmf._kernels.polish.rank_buckets` for
    :func:`~banmf._kernels.polish.cut_sums`, with at most :data:`CUT_BUCKETS` buckets of ranks
    (2^shift each: 2^14 at 10⁷ rows, whose part of the scratch stays in cache)."""
    n = len(order)
    if n < SMALL_CUTS:
        return order
    shift = max(0, max(n - 1, 0).bit_length() - CUT_BUCKETS.bit_length() + 1)
    index = np.int32 if n < 2**31 else np.int64
    pos, low = np.empty(n, dtype=index), np.empty(n, dtype=np.int32)
    rank_buckets(order, shift, pos, low)
    return pos, low, shift


def sorted_cuts(values: np.ndarray) -> tuple[np.ndarray, tuple | np.ndarray]:
    """``values`` in decreasing order and the :func:`cut_layout` of their order: what
    :func:`best_cut` takes, made once per factor."""
    vals, order = descending(values)
    return vals, cut_layout(order)


#: Above any sum of changes: :func:`best_cut`'s small path puts the sums where no cut falls here.
_NO_CUT = np.iinfo(np.int64).max


def best_cut(
    vals: np.ndarray, layout: tuple | np.ndarray, d: np.ndarray, t: float, scratch: np.ndarray
) -> tuple[float, int] | None:
    """One factor's best threshold, exactly, and the change in error it makes (< 0), or None
    if none beats ``t``: ``vals`` its values in decreasing order (over all rows; ties in any
    order), ``layout`` the :func:`cut_layout` of the rows in that order, ``d`` each row's
    change in error from having the bit on, ``scratch`` (2, n) int64 (the kernel's). The
    error past a cut is a prefix sum of ``d`` in that order (ties: the highest threshold):
    numpy's cumulative sum of d gathered into the order for a small layout (the order
    itself), else one parallel kernel (:func:`banmf._kernels.polish.cut_sums`) that takes d
    into the order as it sums."""
    n = len(vals)
    current = n - int(np.searchsorted(vals[::-1], t, side="right"))  # the rows above t
    if isinstance(layout, np.ndarray):
        # The sum after every r rows; those after r where the value does not drop (no cut)
        # put out of reach, the first least is cut_sums' (r = 0 and n are always cuts).
        sums = np.empty(n + 1, dtype=np.int64)
        sums[0] = 0
        np.add.accumulate(d[layout], dtype=np.int64, out=sums[1:])
        now = int(sums[current])
        ties = np.zeros(n + 1, dtype=bool)
        np.greater_equal(vals[1:], vals[:-1], out=ties[1:n])
        sums[ties] = _NO_CUT
        best = int(sums.argmin())
        least = int(sums[best])
    else:
        pos, low, shift = layout
        threads = threads_for(n)
        sums = np.empty(((n - 1) >> shift) + 1 if n else 0, dtype=np.int64)
        out = np.empty(3, dtype=np.int64)
        variant(cut_sums, threads)(
            vals, d, pos, low, shift, current, scratch[0], scratch[1], sums, out
        )
        best, least, now = (int(v) for v in out)
    if least >= now:
        return None
    return (vals[best] if best < n else np.nextafter(vals[-1], -np.inf)), least - now
