"""Booleanization (paper Algorithm 2) and the Boolean error/product without densifying X.

The Hamming error of Boolean factors is ``E = nnz(X) + cover - 2 * hits`` where ``hits`` counts
the ones of X that W⊗H covers (one AND of packed codes per nonzero) and ``cover`` counts all ones
of W⊗H (a union of packed rows per *distinct* row code). Neither needs an n×m array.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._kernels.boolean import (
    SCRATCH_PAD,
    pair_cover_bound,
    pair_histograms,
    pruned_grid_search,
    scaled_ranks,
    staircase_hits,
)
from ..data.dataset import Dataset
from ..data.masks import (
    Packed,
    cover_count,
    hits_and_cover,
    product_at,
    product_mask,
    words,
)
from ..data.validation import check_boolean_factors, check_cells
from ..exceptions import InputError, InvalidParameterError
from ..result import Factorization
from ..runtime.threads import blocks_for, pick, threads_for, variant

__all__ = [
    "balance",
    "boolean_error",
    "boolean_product",
    "booleanize",
    "error_counts",
    "predict_cells",
]


#: Largest ``n·k·⌈m/64⌉ + k·m`` (the operations of one coverage computed directly) for which
#: the pruned grid search runs as one kernel (:func:`pruned_grid_search`): on Zoo at k=5 it takes
#: a start's threshold search from about 10 ms of Python to well under 1 ms.
SMALL_COVER = 100_000


def error_counts(X, W, H, *, missing=None, observed=None) -> tuple[int, int]:
    """``(false negatives, false positives)`` of W⊗H against X: ones missed, zeros covered
    (observed cells only, with ``missing`` / ``observed`` as in :meth:`banmf.BANMF.fit`).

    Examples
    --------
    >>> error_counts([[1, 1, 0], [0, 1, 1]], [[1], [1]], [[0, 1, 1]])
    (1, 1)
    """
    data = Dataset.of(X, missing, observed)
    X, unknown = data.X, data.unknown
    Wb, Hb = check_boolean_factors(W, H, X.shape)
    hits, cover = hits_and_cover(X, Wb, Hb, unknown)
    return X.nnz - hits, cover - hits


def boolean_error(X, W, H, *, missing=None, observed=None) -> int:
    """Hamming error ``|X - W⊗H|`` computed on the support of X, without densifying.

    Parameters
    ----------
    X : array-like or sparse of shape (n, m)
        0/1 data.
    W : array-like of shape (n, k)
        Boolean (or 0/1) factor.
    H : array-like of shape (k, m)
        Boolean (or 0/1) factor.
    missing, observed : array-like or sparse of shape (n, m), optional
        Unknown cells, as in :meth:`banmf.BANMF.fit`: they are not counted.

    Returns
    -------
    int
        Number of observed entries where X and the Boolean product W⊗H differ.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1, 1, 0], [0, 1, 1]])
    >>> boolean_error(X, [[1], [1]], [[0, 1, 0]])
    2
    """
    data = Dataset.of(X, missing, observed)
    X = data.X
    Wb, Hb = check_boolean_factors(W, H, X.shape)
    return data.error(Wb, Hb)


def boolean_product(W, H) -> sp.csr_array:
    """The Boolean product ``W⊗H`` as a CSR support mask.

    Its size is that of the product, which may be close to n·m for dense factors.

    Parameters
    ----------
    W : array-like of shape (n, k)
    H : array-like of shape (k, m)

    Returns
    -------
    scipy.sparse.csr_array of shape (n, m), bool

    Examples
    --------
    >>> boolean_product([[1, 0], [1, 1]], [[1, 0, 0], [0, 0, 1]]).toarray().astype(int)
    array([[1, 0, 0],
           [1, 0, 1]])
    """
    return product_mask(*check_boolean_factors(W, H))


def predict_cells(W, H, rows, cols) -> np.ndarray:
    """The Boolean product ``W⊗H`` at the cells ``(rows[q], cols[q])`` only.

    What a factorization predicts for cells whose value was unknown; O(cells · k/64), never
    the whole product.

    Parameters
    ----------
    W : array-like of shape (n, k), Boolean
    H : array-like of shape (k, m), Boolean
    rows, cols : array-like of int, same length
        The cells, 0-based.

    Returns
    -------
    ndarray of bool, one value per cell

    Examples
    --------
    >>> predict_cells([[1, 0], [0, 1]], [[1, 1, 0], [0, 0, 1]], [0, 1, 1], [1, 1, 2]).astype(int)
    array([1, 0, 1])
    """
    Wb, Hb = check_boolean_factors(W, H)
    (n, _), m = Wb.shape, Hb.shape[1]
    return product_at(Wb, Hb, *check_cells(rows, cols, (n, m)))


def balance(W: np.ndarray, H: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rescale each factor pair so that column l of W and row l of H have equal maxima.

    ``W[:, l] *= sqrt(b_l / a_l)`` and ``H[l] *= sqrt(a_l / b_l)`` with ``a_l = max W[:, l]`` and
    ``b_l = max H[l]``; WH is unchanged. Pairs with ``a_l * b_l == 0`` are left as they are.
    Returns new arrays.
    """
    _, scale, inv = _balancing(W, H)
    return W * scale[None, :], H * inv[:, None]


def _balancing(W: np.ndarray, H: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """W's column maxima and :func:`balance`'s factors for W and H: ``(a, scale, 1 / scale)``."""
    a = W.max(axis=0) if W.shape[0] else np.zeros(W.shape[1], W.dtype)
    b = H.max(axis=1) if H.shape[1] else np.zeros(H.shape[0], H.dtype)
    return (a, *balance_scales(a, b))


def balance_scales(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The factors of :func:`balance` for columns of W and rows of H from their maxima ``a``
    and ``b``: ``(scale, 1 / scale)``."""
    ok = (a * b) > 0
    scale = np.ones_like(a)
    scale[ok] = np.sqrt(b[ok] / a[ok])
    inv = np.ones_like(a)
    inv[ok] = 1.0 / scale[ok]
    return scale, inv


@dataclass(frozen=True)
class _Booleanization:
    """The threshold search's result (:func:`booleanize` returns it as a Factorization).

    Attributes
    ----------
    W : ndarray of shape (n, k), bool
    H : ndarray of shape (k, m), bool
    threshold_w, threshold_h : float
        The thresholds (strict ``>``) applied to ``W_scaled`` and ``H_scaled``.
    error : int
        Hamming error of ``W⊗H`` against X.
    W_scaled : ndarray of shape (n, k)
        The continuous W after normalisation, which the thresholds apply to.
    H_scaled : ndarray of shape (k, m)
    n_evaluated : int
        Distinct (Ŵ, Ĥ) pairs whose error was computed exactly; the other grid points were ruled
        out by a lower bound or give the same factors as an evaluated one.
    error_grid : ndarray of shape (n_thresholds, n_thresholds) or None
        The error at every grid point (``search="exhaustive"`` only).
    """

    W: np.ndarray
    H: np.ndarray
    threshold_w: float
    threshold_h: float
    error: int
    W_scaled: np.ndarray
    H_scaled: np.ndarray
    n_evaluated: int
    error_grid: np.ndarray | None = None


def grid_points(top: float, n_thresholds: int) -> np.ndarray:
    """The grid thresholds over ``[0, top]`` (``top``: the factor's largest entry)."""
    return np.linspace(0.0, top, n_thresholds)


def grid_ranks(F: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Per entry of F, how many of the grid ``points`` lie strictly below it: uint8 for a grid
    of up to 255 points (the default's 100), else int32. The hit counts over the nonzeros read
    H's ranks at random, one row per nonzero: at 10⁸ nonzeros, k = 10, they are 10 MB in
    uint8, which the last-level cache holds, against 40 MB in int32."""
    return _ranks(F, points, np.ones(F.shape[1], dtype=F.dtype))


def rank_dtype(n_thresholds: int) -> type:
    """The type of :func:`grid_ranks` for a grid of ``n_thresholds`` points."""
    return np.uint8 if n_thresholds <= np.iinfo(np.uint8).max else np.int32


def _ranks(F: np.ndarray, points: np.ndarray, scale: np.ndarray, scaled=None) -> np.ndarray:
    """:func:`grid_ranks` of F times ``scale`` per column, written to ``scaled`` too when
    given: one parallel pass (:func:`banmf._kernels.boolean.scaled_ranks`), where numpy's
    product and ``searchsorted`` were serial passes over n × k (3 s at 10⁸ nonzeros)."""
    ranks = np.empty(F.shape, dtype=rank_dtype(len(points)))
    out = np.empty((0, F.shape[1]), dtype=F.dtype) if scaled is None else scaled
    pick(scaled_ranks, F.size)(F, scale, np.asarray(points, dtype=np.float64), out, ranks)
    return ranks


def _grid_ranks(F: np.ndarray, n_thresholds: int) -> tuple[np.ndarray, np.ndarray]:
    """Grid thresholds over [0, max F] and, per entry, how many of them lie strictly below it."""
    points = grid_points(F.max() if F.size else 0.0, n_thresholds)
    return points, grid_ranks(F, points)


def _balanced_ranks(W: np.ndarray, H: np.ndarray, n_thresholds: int) -> tuple:
    """:func:`balance` of W and H and :func:`_grid_ranks` of the balanced W, with W scaled
    and ranked in one pass: ``(W, H, points, ranks)``, the same values as the two."""
    n, k = W.shape
    a, scale, inv = _balancing(W, H)
    # Rounding is monotone: a column's largest scaled entry is its largest entry scaled.
    points = grid_points((a * scale).max() if n * k else 0.0, n_thresholds)
    Ws = np.empty(W.shape, dtype=(W[:0] * scale).dtype)
    ranks = _ranks(W, points, scale, Ws)
    return Ws, H * inv[:, None], points, ranks


def active_counts(ranks: np.ndarray, n_thresholds: int) -> np.ndarray:
    """``out[l, s] = #{rows r : ranks[r, l] > s}``: factor sizes at every grid threshold."""
    out = np.empty((ranks.shape[1], n_thresholds), dtype=np.int64)
    for l in range(ranks.shape[1]):
        hist = np.bincount(ranks[:, l], minlength=n_thresholds + 1)
        out[l] = hist[::-1].cumsum()[::-1][1:]
    return out


def pair_counts(ranks: np.ndarray, n_thresholds: int) -> np.ndarray:
    """``out[s, l, l'] = #{rows r : ranks[r, l] > s and ranks[r, l'] > s}``: the rows two
    factors share at every grid threshold (symmetric; the diagonal is :func:`active_counts`)."""
    n, k = ranks.shape
    threads = threads_for(n * k)
    n_blocks = blocks_for(threads, n)
    blocks = np.zeros((n_blocks, n_thresholds + 1, k, k), dtype=np.int64)
    # The kernel's scratch: a row per block for each of its two arrays (held, rank).
    scratch = np.empty((2, n_blocks, k + SCRATCH_PAD), dtype=np.int64)
    variant(pair_histograms, threads)(ranks, blocks, *scratch)
    hist = blocks.sum(axis=0)
    # Each pair was counted once, one way round: both ways, the diagonal once.
    hist += hist.transpose(0, 2, 1)
    hist[:, np.arange(k), np.arange(k)] //= 2
    # Rows whose minimum rank is above s, for every s: a suffix sum over the ranks.
    return np.ascontiguousarray(hist[::-1].cumsum(axis=0)[::-1][1:])


def booleanize(
    X,
    W,
    H,
    n_thresholds: int = 100,
    *,
    normalize: str | None = "balance",
    search: str = "pruned",
    missing=None,
    observed=None,
) -> Factorization:
    """Threshold nonnegative factors into Boolean ones by a grid search (paper Algorithm 2).

    The thresholds ``(δ_W, δ_H)`` range over ``linspace(0, max, n_thresholds)`` of each
    (normalised) factor; ``Ŵ = W > δ_W`` and ``Ĥ = H > δ_H`` (strict). The pair with the lowest
    Hamming error wins; ties go to the first pair in C order of the grid (lowest δ_W index, then
    lowest δ_H index).

    The paper's grid starts at ``min`` rather than 0. With a strict ``>`` that start can never
    keep a factor's smallest entries, so a factor with no zero entry (say k = 1 on an all-ones
    X) could not be kept whole; starting at 0 fixes this and changes nothing else when, as after
    multiplicative updates, the minimum is already (close to) 0.

    The hit counts of every grid point come from one pass over the nonzeros (each nonzero
    covers a staircase of grid points). ``search="pruned"`` then computes the exact error only
    where a lower bound (misses, plus a floor on coverage from pairs of factors: each
    rectangle, largest first, less its overlaps with the larger ones) does not rule the point
    out; the result is identical to ``search="exhaustive"``, which evaluates
    every point and also returns the error grid. ``search="coordinate"`` alternates exact 1-D
    scans of δ_W and δ_H from the grid point nearest 0.5 (docs/algorithms.md, "Coordinate
    search"): O(P) coverage evaluations per sweep, a coordinate-wise optimum that may miss the
    global one.

    Parameters
    ----------
    X : array-like or sparse of shape (n, m)
        0/1 data.
    W : array-like of shape (n, k)
        Nonnegative factor.
    H : array-like of shape (k, m)
        Nonnegative factor.
    n_thresholds : int, default 100
        Grid points per factor (the paper's ``npoint``).
    normalize : {"balance", None}, default "balance"
        Rescale factor pairs first (see :func:`balance`), so one global threshold suits all.
    search : {"pruned", "exhaustive", "coordinate"}, default "pruned"
    missing, observed : array-like or sparse of shape (n, m), optional
        Unknown cells, as in :meth:`banmf.BANMF.fit`: the errors count observed cells only.

    Returns
    -------
    Factorization
        ``method="booleanize"``; its ``info`` holds ``threshold_w`` and ``threshold_h`` (the
        thresholds, strict ``>``, applied to) ``W_scaled`` and ``H_scaled`` (the factors after
        normalisation), ``n_evaluated`` (the grid points whose error was computed exactly;
        the others were ruled out by a lower bound or give the same factors as an evaluated
        one) and ``error_grid`` (the error at every grid point, ``search="exhaustive"`` only).

    References
    ----------
    Truong, Skau, Desantis, Alexandrov, "Boolean Matrix Factorization via Nonnegative Auxiliary
    Optimization", Algorithm 2.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]])
    >>> res = booleanize(X, [[0.9, 0.0], [1.1, 0.1], [0.0, 1.0]], [[1.0, 0.8, 0.1], [0.0, 0.1, 1.0]])
    >>> res.error
    0
    """
    data = Dataset.of(X, missing, observed)
    X = data.X
    Wf = np.asarray(W, dtype=np.float64)
    Hf = np.asarray(H, dtype=np.float64)
    if Wf.ndim != 2 or Hf.ndim != 2:
        raise InputError(f"W and H must be 2-D, got shapes {Wf.shape} and {Hf.shape}")
    if Wf.shape[0] != X.shape[0] or Hf.shape[1] != X.shape[1] or Wf.shape[1] != Hf.shape[0]:
        raise InputError(
            f"shapes do not fit: X {X.shape}, W {Wf.shape}, H {Hf.shape}; need W (n, k), H (k, m)"
        )
    for name, F in (("W", Wf), ("H", Hf)):
        if not np.isfinite(F).all():
            raise InputError(f"{name} contains NaN or infinite values")
        if (F < 0).any():
            raise InputError(f"{name} has negative entries; booleanize expects nonnegative factors")
    if (
        isinstance(n_thresholds, bool)
        or not isinstance(n_thresholds, (int, np.integer))
        or n_thresholds < 1
    ):
        raise InvalidParameterError(
            f"n_thresholds must be a positive integer, got {n_thresholds!r}"
        )
    if normalize not in ("balance", None):
        raise InvalidParameterError(f"normalize must be 'balance' or None, got {normalize!r}")
    if search not in ("pruned", "exhaustive", "coordinate"):
        raise InvalidParameterError(
            f"search must be 'pruned', 'exhaustive' or 'coordinate', got {search!r}"
        )
    res = threshold_factors(data, Wf, Hf, int(n_thresholds), normalize, search)
    return Factorization.from_factors(
        data,
        res.W,
        res.H,
        error=res.error,
        method="booleanize",
        params={"n_thresholds": int(n_thresholds), "normalize": normalize, "search": search},
        info={
            "threshold_w": res.threshold_w,
            "threshold_h": res.threshold_h,
            "W_scaled": res.W_scaled,
            "H_scaled": res.H_scaled,
            "n_evaluated": res.n_evaluated,
            "error_grid": res.error_grid,
        },
    )


def _coordinate_search(nnz, hits, bound, cover, w_points, h_points, normalize) -> tuple[int, int]:
    """Alternate exact 1-D scans of δ_W (δ_H fixed) and δ_H (δ_W fixed) until neither moves.

    Starts at the grid point nearest 0.5 after balancing (the grid centre otherwise). A scan
    skips points whose lower bound cannot beat the current error, and moves only on a strict
    improvement (ties: the lowest index), so it ends at a coordinate-wise optimum after
    O(P) coverage evaluations per sweep instead of up to P².
    """
    P = hits.shape[0]
    if normalize == "balance":
        s, t = int(np.abs(w_points - 0.5).argmin()), int(np.abs(h_points - 0.5).argmin())
    else:
        s = t = P // 2
    best = int(nnz - 2 * hits[s, t] + cover(s, t))
    moved = True
    while moved:
        moved = False
        for axis in (0, 1):
            for q in range(P):
                cand = (q, t) if axis == 0 else (s, q)
                if bound[cand] >= best:
                    continue
                err = int(nnz - 2 * hits[cand] + cover(*cand))
                if err < best:
                    best, (s, t), moved = err, cand, True
    return best, s * P + t


def grid_hits(M, u: np.ndarray, vt: np.ndarray, P: int) -> np.ndarray:
    """The difference array of the hit counts (:func:`staircase_hits`) of the cells of the mask
    M over the whole grid: ``cumsum(cumsum(d, 0), 1)[:P, :P]`` counts, at ``(s, t)``, the cells
    that ``(u > s) ⊗ (vt > t)ᵀ`` covers. Integer sums: row blocks may add theirs in any order."""
    # One difference array per block; integer sums, so the blocks may follow the threads.
    threads = threads_for(M.nnz * u.shape[1])
    n_blocks, k = blocks_for(threads, M.shape[0]), u.shape[1]
    diff = np.zeros((n_blocks, P + 1, P + 1), dtype=np.int64)
    # The kernel's scratch: a row per block for each of its two arrays (rank, order).
    scratch = np.empty((2, n_blocks, k + SCRATCH_PAD), dtype=np.int64)
    variant(staircase_hits, threads)(M.indptr, M.indices, u, vt, diff, *scratch)
    return diff.sum(axis=0)


def _grid_counts(diff: np.ndarray, P: int) -> np.ndarray:
    """Counts at every grid point from a difference array of :func:`grid_hits`."""
    return diff.cumsum(axis=0).cumsum(axis=1)[:P, :P]


def hit_counts(diff: np.ndarray, cell_diff: np.ndarray | None, P: int) -> tuple:
    """The hits and the unknown cells' hits (zeros without, ``cell_diff`` None) at every grid
    point from their difference arrays (:meth:`GridRows.hit_diffs`)."""
    hits = _grid_counts(diff, P)
    return hits, np.zeros_like(hits) if cell_diff is None else _grid_counts(cell_diff, P)


class GridRows:
    """The rows' half of the threshold search: everything it needs from X and the ranks of W
    (``u``, :func:`grid_ranks`), as sums over rows. :func:`search_grid` asks only this, so
    that the rows may live elsewhere (:mod:`banmf.distributed` sums the same counts over
    row blocks on workers); here they are all in one place.

    Parameters
    ----------
    data : Dataset
        The rows (trusted).
    u : ndarray (n, k) of uint8 or int32, W's grid ranks
    """

    #: Coverages the pruned search asks for at once: one here (each is computed on demand);
    #: where a request costs a round trip to workers, a few ahead.
    batch = 1

    def __init__(self, data, u: np.ndarray):
        self.X, self.u, self.unknown = data.X, u, data.unknown
        self._packed = None

    def __getstate__(self) -> dict:
        # Pickled (a row block spilled to disk): the cache of packed factors is rebuilt on
        # demand, and its function would not pickle.
        return {**self.__dict__, "_packed": None}

    def hit_diffs(self, vt: np.ndarray, P: int) -> tuple[np.ndarray, np.ndarray | None]:
        """The difference arrays of the ones' hits and the unknown ``cells``' (None without)."""
        cells = None if self.unknown is None else grid_hits(self.unknown.cells, self.u, vt, P)
        return grid_hits(self.X, self.u, vt, P), cells

    def active_counts(self, P: int) -> np.ndarray:
        """:func:`active_counts` of the ranks."""
        return active_counts(self.u, P)

    def pair_counts(self, P: int) -> np.ndarray:
        """:func:`pair_counts` of the ranks."""
        return pair_counts(self.u, P)

    def distinct_ranks(self) -> np.ndarray:
        """The distinct rank values of W."""
        return np.unique(self.u)

    def packed_bytes(self, P: int) -> int:
        """Bytes of one threshold's packed W, for the cache's size."""
        return Packed.of(self.u, P).nbytes + 8 * self.u.shape[0]

    def covers(self, requests: list, cache: int) -> list[list[int]]:
        """For each request ``(s, packed Hs)``: the ones of ``(u > s) ⊗ H`` for each H."""
        if self._packed is None:
            self._packed = functools.lru_cache(maxsize=cache)(lambda s: Packed.of(self.u, s))
        return [[cover_count(self._packed(s), ph) for ph in packed_h] for s, packed_h in requests]


def threshold_factors(data, W, H, P, normalize, search) -> _Booleanization:
    """The grid search of :func:`booleanize` on trusted inputs; errors count the observed
    cells of ``data`` (a :class:`banmf.io.Dataset`)."""
    X, unknown = data.X, data.unknown
    if normalize == "balance":
        W, H, w_points, u = _balanced_ranks(W, H, P)
    else:
        w_points, u = _grid_ranks(W, P)
    h_points, vt = _grid_ranks(np.ascontiguousarray(H.T), P)
    rows = GridRows(data, u)
    n, k = u.shape
    small = search == "pruned" and small_search(n, k, vt.shape[0])
    s, t, error, n_evaluated, grid = search_grid(
        rows,
        vt,
        P,
        X.nnz,
        search,
        w_points,
        h_points,
        normalize,
        None if unknown is None else unknown.observed,
        small,
    )
    return _Booleanization(
        W=u > s,
        H=np.ascontiguousarray((vt > t).T),
        threshold_w=float(w_points[s]),
        threshold_h=float(h_points[t]),
        error=int(error),
        W_scaled=W,
        H_scaled=H,
        n_evaluated=int(n_evaluated),
        error_grid=grid,
    )


def small_search(n: int, k: int, m: int) -> bool:
    """Whether the pruned search of n × k and k × m factors runs as one kernel call
    (:func:`banmf._kernels.boolean.pruned_grid_search`), each coverage computed directly: on
    such sizes the search's loop spends its time in Python (:data:`SMALL_COVER`)."""
    return n * k * words(m) + k * m <= SMALL_COVER


def search_grid(
    rows,
    vt,
    P,
    nnz,
    search,
    w_points,
    h_points,
    normalize,
    observed=None,
    small=False,
) -> tuple[int, int, int, int, np.ndarray | None]:
    """The best grid point ``(s, t)`` of the threshold search: ``(s, t, error, n_evaluated,
    error grid or None)``; ``rows``: the rows' counts (:class:`GridRows` or one that sums them
    over row blocks); ``vt``: H's ranks (m, k); ``nnz``: X's observed ones; ``observed``: None
    without unknown cells, else their :attr:`Unknown.observed`; ``small``: run the pruned
    search as one kernel (``rows`` holds all ranks in ``rows.u``). The pruned search bounds the
    coverage from pairs of factors (:func:`pair_cover_bound`, from ``rows.pair_counts``), the
    exhaustive one from the largest single factor (it computes every coverage anyway). Any
    lower bound gives the same point, only the number of coverages computed changes. Ties go
    to the first point in row-major order, whichever way it is searched."""
    hits, cell_hits = hit_counts(*rows.hit_diffs(vt, P), P)
    if observed:
        return _observed_search(hits, cell_hits, nnz, P, search)
    covered = _pair_cover(rows, vt, P) if search == "pruned" else _single_cover(rows, vt, P)
    return search_counts(
        rows, vt, P, nnz, search, w_points, h_points, normalize, hits, cell_hits, covered, small
    )


def search_counts(
    rows, vt, P, nnz, search, w_points, h_points, normalize, hits, cell_hits, covered, small
) -> tuple[int, int, int, int, np.ndarray | None]:
    """:func:`search_grid` from the grid's counts: the hits and the unknown cells' hits at
    every point (:func:`hit_counts`) and a lower bound on the coverage (``covered``)."""
    # Observed coverage is at least the hits, and at least the coverage's lower bound less the
    # unknown cells covered (the covered cells are the observed ones and those).
    floor = np.maximum(hits, covered - cell_hits)
    bound = nnz - 2 * hits + floor
    coverages = _Coverages(rows, vt, P, cell_hits)
    grid = None
    if search == "exhaustive":
        best_err, best_idx, grid = _exhaustive_search(coverages, hits, nnz, P)
    elif search == "coordinate":
        best_err, best_idx = _coordinate_search(
            nnz, hits, bound, coverages.cover, w_points, h_points, normalize
        )
    elif small:
        flat, order = _visit_order(bound)
        mw = words(vt.shape[0])
        scratch = (
            np.zeros((vt.shape[1], mw), dtype=np.uint64),
            np.zeros(mw, dtype=np.uint64),
            np.zeros((P + 2, P + 2), dtype=np.bool_),
        )
        best_err, best_idx, n_small = pruned_grid_search(
            rows.u,
            vt,
            order,
            flat,
            hits,
            cell_hits,
            floor,
            nnz,
            coverages.key_w,
            coverages.key_h,
            *scratch,
        )
        return _grid_point(best_idx, best_err, n_small, P)
    else:
        best_err, best_idx = _pruned_search(coverages, bound, floor, hits, nnz, P)
    return _grid_point(best_idx, best_err, len(coverages.covers), P, grid)


def _grid_point(best_idx, error, n_evaluated, P: int, grid=None) -> tuple:
    """:func:`search_grid`'s result for the flat grid index ``best_idx``: ``(s, t, error,
    n_evaluated, grid)``."""
    s, t = divmod(int(best_idx), P)
    return s, t, int(error), int(n_evaluated), grid


def _observed_search(hits, cell_hits, nnz: int, P: int, search: str) -> tuple:
    """:func:`search_grid` with few observed cells, no coverage computed: the covered observed
    zeros are counted exactly at every point (``cell_hits``, the observed cells covered less
    the hits), so the whole error grid is known; it is returned for ``search="exhaustive"``."""
    grid = nnz - hits + cell_hits
    best_idx = int(np.argmin(grid))
    return _grid_point(
        best_idx, grid.flat[best_idx], 0, P, grid if search == "exhaustive" else None
    )


def _pair_cover(rows, vt, P: int) -> np.ndarray:
    """A lower bound on the coverage at every grid point from pairs of factors
    (:func:`pair_cover_bound`): never below the largest rectangle, and far above it where the
    rectangles overlap little (NMF's factors), so that fewer coverages are computed."""
    return pair_bound(rows.pair_counts(P), pair_counts(vt, P))


def pair_bound(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """:func:`banmf._kernels.boolean.pair_cover_bound` of W's and H's :func:`pair_counts`."""
    P, k = A.shape[0], A.shape[1]
    out = np.empty((P, B.shape[0]), dtype=np.int64)
    # The kernel's scratch: a row per threshold of W for each of its two arrays (size, order).
    scratch = np.empty((2, P, k + SCRATCH_PAD), dtype=np.int64)
    variant(pair_cover_bound, threads_for(P * P * k * k))(A, B, out, *scratch)
    return out


def _single_cover(rows, vt, P: int) -> np.ndarray:
    """A lower bound on the coverage at every grid point: the largest single rectangle."""
    cw = rows.active_counts(P)
    ch = active_counts(vt, P)
    if not cw.shape[0]:
        return np.zeros((P, P), np.int64)
    return (cw[:, :, None] * ch[:, None, :]).max(axis=0)


def _visit_order(bound: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pruned search's order of the grid points, by (static bound, flat index): the flat
    bound and the order."""
    flat = bound.ravel()
    return flat, np.lexsort((np.arange(flat.size), flat))


class _Coverages:
    """The exact coverages the search computes, each distinct pair of Boolean factors once.

    Thresholds with no factor value between them give the same Boolean factors: each
    distinct factor is packed once (near-binary factors make most of the grid tie). Hits are
    known for the whole grid already, so an exact error needs only the coverage.

    Parameters
    ----------
    rows : GridRows or one that sums its counts over row blocks
    vt : ndarray (m, k), H's grid ranks
    P : int, the grid points per factor
    cell_hits : ndarray (P, P), the unknown cells covered at each point
    """

    def __init__(self, rows, vt: np.ndarray, P: int, cell_hits: np.ndarray):
        self.rows, self.cell_hits = rows, cell_hits
        self.key_w = np.searchsorted(rows.distinct_ranks(), np.arange(P), side="right")
        self.key_h = np.searchsorted(np.unique(vt), np.arange(P), side="right")
        # Keep up to ~256 MB of packed factors per side (all of them for moderate n and m).
        self.cache_w = max(8, min(P, 2**28 // rows.packed_bytes(P)))
        self.packed_h = functools.lru_cache(
            maxsize=max(8, min(P, 2**28 // (Packed.of(vt, P).nbytes + 8 * vt.shape[0])))
        )(lambda t: Packed.of(vt, t))
        self.covers: dict[tuple[int, int], int] = {}

    def known(self, s: int, t: int) -> bool:
        """Whether the coverage at (s, t) is computed already."""
        return (int(self.key_w[s]), int(self.key_h[t])) in self.covers

    def fetch(self, points) -> None:
        """The coverages of the grid points ``points`` not yet known, in one request."""
        key_w, key_h, covers = self.key_w, self.key_h, self.covers
        wanted: dict[int, tuple[int, dict[int, int]]] = {}  # W's key → (s, {H's key: t})
        for s, t in points:
            key = (int(key_w[s]), int(key_h[t]))
            if key not in covers:
                wanted.setdefault(key[0], (s, {}))[1][key[1]] = t
        if not wanted:
            return
        requests = [(s, [self.packed_h(t) for t in ts.values()]) for s, ts in wanted.values()]
        counts = self.rows.covers(requests, self.cache_w)
        for (s, ts), row in zip(wanted.values(), counts, strict=True):
            for t, c in zip(ts.values(), row, strict=True):
                covers[(int(key_w[s]), int(key_h[t]))] = c

    def cover(self, s: int, t: int) -> int:
        """Observed cells covered at (s, t); never below the same at a higher point (a cell
        newly covered lower down is either observed or one of the unknown ones counted)."""
        key = (int(self.key_w[s]), int(self.key_h[t]))
        if key not in self.covers:
            self.fetch([(s, t)])
        return self.covers[key] - int(self.cell_hits[s, t])


def _exhaustive_search(coverages: _Coverages, hits, nnz: int, P: int) -> tuple:
    """Every grid point's exact error: ``(best error, best flat index, error grid)``."""
    for s in range(P):  # a row of the grid at a time: the packed H cache bounds memory
        coverages.fetch([(s, t) for t in range(P)])
    cover = coverages.cover
    grid = nnz - 2 * hits + np.array([[cover(s, t) for t in range(P)] for s in range(P)])
    best_idx = int(np.argmin(grid))
    return int(grid.flat[best_idx]), best_idx, grid


def _pruned_search(coverages: _Coverages, bound, floor, hits, nnz: int, P: int) -> tuple:
    """The pruned search in Python: ``(best error, best flat index)``.

    Coverage only shrinks as thresholds rise: an exact coverage C at (s, t) is a floor for
    every point at or below it in both thresholds (``floor`` is raised in place). Points are
    visited by (static ``bound``, index); once one cannot beat or tie-win the best so far,
    none after it can."""
    flat, order = _visit_order(bound)
    batch = coverages.rows.batch
    best_err, best_idx = np.iinfo(np.int64).max, -1

    def hopeless(idx) -> bool | None:
        """True: no point from ``idx`` on can win (stop); False: this one cannot; None:
        it must be evaluated."""
        lb = flat[idx]
        if lb > best_err or (lb == best_err and idx > best_idx):
            return True
        s, t = divmod(int(idx), P)
        dyn = nnz - 2 * hits[s, t] + floor[s, t]
        return False if dyn > best_err or (dyn == best_err and idx > best_idx) else None

    for pos, idx in enumerate(order):
        verdict = hopeless(idx)
        if verdict:
            break
        if verdict is False:
            continue
        s, t = divmod(int(idx), P)
        if batch > 1 and not coverages.known(s, t):
            coverages.fetch(
                _points_ahead(order[pos + 1 : pos + 8 * batch], (s, t), hopeless, P, batch)
            )
        c = coverages.cover(s, t)
        np.maximum(floor[: s + 1, : t + 1], c, out=floor[: s + 1, : t + 1])
        err = int(nnz - 2 * hits[s, t] + c)
        if err < best_err or (err == best_err and idx < best_idx):
            best_err, best_idx = err, int(idx)
    return best_err, best_idx


def _points_ahead(following, first: tuple, hopeless, P: int, batch: int) -> list:
    """``first`` and the next few points of ``following`` (up to ``batch`` in all) that the
    pruned search would evaluate as things stand (a later floor may rule some out: their
    coverage then goes unused), for one request to rows whose requests cost a round trip."""
    ahead = [first]
    for nxt in following:
        verdict = hopeless(nxt)
        if verdict:
            break
        if verdict is None:
            ahead.append(divmod(int(nxt), P))
            if len(ahead) == batch:
                break
    return ahead
