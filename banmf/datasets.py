"""Synthetic Boolean data (docs/algorithms.md, "The planted generator") and the bundled datasets."""

from __future__ import annotations

import hashlib
import os
from importlib import resources
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .data.masks import support_mask_from_keys
from .data.validation import check_n_components, check_random_state
from .engine.booleanize import boolean_product
from .exceptions import InputError, InvalidParameterError
from .io import Dataset, read_dataset
from .runtime.memory import check_matrix_size

__all__ = [
    "Dataset",
    "data_dir",
    "load_lucap0",
    "load_mushroom",
    "load_retail",
    "load_votes",
    "load_zoo",
    "make_boolean",
    "make_sparse_degrees",
    "make_sparse_tiles",
    "make_sparse_uniform",
    "planted_probability",
]


def planted_probability(density: float, k: int) -> float:
    """Bernoulli parameter p of the factors so that P(X_ij = 1) = 1 − (1 − p²)^k = density."""
    return float(np.sqrt(1.0 - (1.0 - density) ** (1.0 / k)))


def make_boolean(
    n: int,
    m: int,
    k: int,
    density: float,
    noise: float = 0.0,
    *,
    noise_kind: str = "iid",
    random_state=None,
) -> tuple[sp.csr_array, np.ndarray, np.ndarray]:
    """The paper's planted generator: X = W⊗H with iid Bernoulli(p) factors, plus flip noise.

    Parameters
    ----------
    n, m : int
        Shape of X.
    k : int
        Planted rank (the Boolean rank of the noiseless X is at most k).
    density : float in (0, 1)
        Expected density of the noiseless X; p = sqrt(1 − (1 − density)^(1/k)).
    noise : float in [0, 1), default 0
        Flip probability ("iid") or fraction of the n·m entries flipped ("count").
        W, H and the noise are drawn without any n×m array: the generator scales to
        10⁶×10⁵ with 10⁸ nonzeros (memory O(nnz + (n+m)k)).
    noise_kind : {"iid", "count"}
        iid flips, or exactly ``int(noise·n·m)`` flips at distinct positions (as T-ELF does).
    random_state : None, int or Generator

    Returns
    -------
    X : csr_array of shape (n, m), bool
    W : ndarray of shape (n, k), bool
    H : ndarray of shape (k, m), bool

    Raises
    ------
    InvalidParameterError
        Bad arguments.
    ValueError
        A matrix whose expected size (density·n·m nonzeros, plus the flips) exceeds the memory
        available (see ``BANMF_MEMORY_LIMIT``): refused before any drawing.

    Examples
    --------
    >>> X, W, H = make_boolean(50, 50, 5, density=0.5, random_state=0)
    >>> X.shape, W.shape, H.shape
    ((50, 50), (50, 5), (5, 50))
    """
    for name, v in (("n", n), ("m", m)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise InvalidParameterError(f"{name} must be a positive integer, got {v!r}")
    k = check_n_components(k, (max(n, k), max(m, k)))
    if not 0.0 < density < 1.0:
        raise InvalidParameterError(f"density must be in (0, 1), got {density!r}")
    if not 0.0 <= noise < 1.0:
        raise InvalidParameterError(f"noise must be in [0, 1), got {noise!r}")
    if noise_kind not in ("iid", "count"):
        raise InvalidParameterError(f"noise_kind must be 'iid' or 'count', got {noise_kind!r}")
    _check_make_boolean_memory(int(n), int(m), k, density, noise, noise_kind)
    rng = check_random_state(random_state)
    p = planted_probability(density, k)
    W = rng.random((n, k)) < p
    H = rng.random((k, m)) < p
    X = boolean_product(W, H)
    if noise > 0:
        # iid flips: a Binomial count of distinct uniform positions has the same law as n·m
        # Bernoulli draws, without an n·m array.
        count = rng.binomial(n * m, noise) if noise_kind == "iid" else int(noise * n * m)
        flips = _distinct_positions(rng, n * m, count)
        keys = np.repeat(np.arange(n, dtype=np.int64) * m, np.diff(X.indptr)) + X.indices
        X = support_mask_from_keys(_sorted_xor(keys, flips), (n, m))
    return X, W, H


def _check_make_boolean_memory(
    n: int, m: int, k: int, density: float, noise: float, kind: str
) -> None:
    """Refuse, before drawing anything, a matrix the memory cannot hold (expected sizes)."""
    nnz = density * n * m
    flips = noise * n * m
    # Factors: float64 draws, bool factors and their int32 CSR copies for the product.
    factors = (n + m) * k * (8 + 1 + 12)
    # The product: int32 (or int64) indices and int32 values, then bool values.
    product = nnz * (8 + 4 + 1)
    # Noise: int64 keys of X and of the flips, sorted, merged into a new array.
    noisy = 8 * 4 * (nnz + flips) if noise > 0 else 0
    check_matrix_size(
        n,
        m,
        int(nnz + flips),
        f"make_boolean({n}, {m}, {k}, density={density:g}"
        + (f", noise={noise:g}" if noise else "")
        + ")",
        extra=int(factors + product + noisy),
    )


def _sorted_xor(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Symmetric difference of two sorted, distinct arrays, sorted; O(len(a) + len(b) log)."""
    pos = np.searchsorted(a, b)
    hit = pos < len(a)
    hit[hit] = a[pos[hit]] == b[hit]
    keep = np.ones(len(a), dtype=bool)
    keep[pos[hit]] = False
    rest = a[keep]
    return np.insert(rest, np.searchsorted(rest, b[~hit]), b[~hit])


def _distinct_positions(rng: np.random.Generator, total: int, count: int) -> np.ndarray:
    """``count`` distinct integers drawn uniformly from [0, total), sorted."""
    if 2 * count > total:  # dense: choose the complement instead
        return np.setdiff1d(np.arange(total), _distinct_positions(rng, total, total - count))
    picked = np.unique(rng.integers(0, total, size=count))
    while len(picked) < count:
        more = rng.integers(0, total, size=count - len(picked))
        picked = np.union1d(picked, more)
    return picked  # each redraw adds at most the shortfall, so exactly `count` values


def make_sparse_uniform(n: int, m: int, nnz: int, *, random_state=None) -> sp.csr_array:
    """A uniformly random support mask with about ``nnz`` nonzeros, built without a dense array.

    Every row draws ``nnz / n`` column indices (the remainder spread over the first rows);
    repeats within a row are dropped, so the result has slightly fewer than ``nnz`` nonzeros
    when rows are dense. Memory is O(nnz). Equal row degrees flatter the kernels (every row
    block does the same work); :func:`make_sparse_degrees` gives exact ``nnz`` and skewed
    (Poisson or power-law) row and column degrees, as real data has.

    Examples
    --------
    >>> X = make_sparse_uniform(1000, 200, 5000, random_state=0)
    >>> X.shape, 4900 < X.nnz <= 5000
    ((1000, 200), True)
    """
    for name, v in (("n", n), ("m", m), ("nnz", nnz)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise InvalidParameterError(f"{name} must be a nonnegative integer, got {v!r}")
    if n < 1 or m < 1:
        raise InvalidParameterError(f"n and m must be positive, got {n} and {m}")
    if nnz > n * m:
        raise InvalidParameterError(f"nnz={nnz} exceeds n*m={n * m}")
    # Row counts, then int64 keys drawn, sorted and deduplicated.
    check_matrix_size(
        int(n),
        int(m),
        int(nnz),
        f"make_sparse_uniform({n}, {m}, {nnz})",
        extra=8 * int(n) + 24 * int(nnz),
    )
    rng = check_random_state(random_state)
    per_row = np.full(n, nnz // n, dtype=np.int64)
    per_row[: nnz % n] += 1
    # One sort of row-major keys orders rows and columns at once (cheaper than a lexsort).
    keys = np.repeat(np.arange(n, dtype=np.int64) * m, per_row)
    keys += rng.integers(0, m, size=nnz, dtype=np.int64)
    keys.sort()
    keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))] if nnz else keys
    return support_mask_from_keys(keys, (n, m))


#: Degree distributions of :func:`make_sparse_degrees`.
DEGREE_KINDS = ("uniform", "poisson", "powerlaw")


def make_sparse_degrees(
    n: int,
    m: int,
    nnz: int,
    *,
    rows: str = "poisson",
    cols: str = "poisson",
    exponent: float = 2.5,
    random_state=None,
) -> sp.csr_array:
    """A random support mask with exactly ``nnz`` nonzeros and skewed row and column degrees.

    Users' data rarely has equal row counts: baskets, documents and users have Poisson-like or
    heavy-tailed numbers of items, and a few items are in a large share of the rows. This
    generator draws a row degree sequence and a column degree sequence of the named kinds, both
    summing to ``nnz``, then matches them at random (a bipartite configuration model) and
    removes repeated entries by re-pairing them with random other entries, which keeps both
    sequences. Nothing of size n·m is formed: time and memory are O(nnz + n + m) (10⁷ nonzeros
    take a few seconds).

    Parameters
    ----------
    n, m : int
        Shape of X.
    nnz : int
        Number of nonzeros, exactly; at most ``n * m``.
    rows, cols : {"uniform", "poisson", "powerlaw"}, default "poisson"
        Degree distribution of the rows and of the columns.

        - ``"uniform"``: every row (column) has ``nnz // n`` (``nnz // m``) nonzeros, the
          remainder spread one each over the first ones.
        - ``"poisson"``: the degrees of uniformly random positions (multinomial with equal
          probabilities: Poisson with mean ``nnz / n`` when the mean is small against m).
        - ``"powerlaw"``: a Poisson mixture over Pareto weights: P(degree ≥ d) falls as
          d^-(exponent − 1). The weights are iid, so heavy rows (columns) sit in random
          positions.

        Degrees above the other side's size (m for a row, n for a column) are capped there and
        the excess goes to the others in proportion to their weights. "poisson" and "powerlaw"
        can leave rows or columns empty when their mean degree is small, as real data can.
    exponent : float > 1, default 2.5
        Exponent of the power-law density (``"powerlaw"`` only); smaller is more skewed. The
        item degrees of the bundled retail data (:func:`load_retail`) have a tail exponent of
        about 2.6, its basket sizes are close to Poisson.
    random_state : None, int or Generator

    Returns
    -------
    X : csr_array of shape (n, m), bool
        Canonical (sorted indices, no duplicates) with ``X.nnz == nnz``. Row degrees always
        follow ``rows`` exactly; column degrees follow ``cols`` exactly unless the two
        sequences cannot be matched without repeats (a nearly full row needs every column),
        in which case the few entries left are moved to columns missing from their row,
        chosen in proportion to the column weights.

    See Also
    --------
    make_sparse_uniform : equal row degrees, uniformly random columns (about ``nnz`` nonzeros).

    Examples
    --------
    >>> X = make_sparse_degrees(1000, 200, 5000, rows="powerlaw", random_state=0)
    >>> X.shape, X.nnz
    ((1000, 200), 5000)
    >>> degrees = np.diff(X.indptr)
    >>> bool(degrees.max() > 5 * degrees.mean())
    True
    """
    for name, v in (("n", n), ("m", m), ("nnz", nnz)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise InvalidParameterError(f"{name} must be a nonnegative integer, got {v!r}")
    if n < 1 or m < 1:
        raise InvalidParameterError(f"n and m must be positive, got {n} and {m}")
    n, m, nnz = int(n), int(m), int(nnz)
    if nnz > n * m:
        raise InvalidParameterError(f"nnz={nnz} exceeds n*m={n * m}")
    # Weights and degrees per row and column; int64 keys, their column permutation and the
    # repair rounds' candidates (a handful of nnz-long arrays).
    check_matrix_size(
        n, m, nnz, f"make_sparse_degrees({n}, {m}, {nnz})", extra=32 * (n + m) + 64 * nnz
    )
    _check_degree_kinds(rows, cols, exponent)
    rng = check_random_state(random_state)
    row_w = _degree_weights(rng, n, rows, exponent)
    col_w = _degree_weights(rng, m, cols, exponent)
    row_deg = _degree_sequence(rng, n, row_w, nnz, m)
    col_deg = _degree_sequence(rng, m, col_w, nnz, n)
    return support_mask_from_keys(_match_degrees(rng, row_deg, col_deg, col_w), (n, m))


def make_sparse_tiles(
    n: int,
    m: int,
    nnz: int,
    k: int,
    *,
    tile_share: float = 0.5,
    tile_cols: tuple[int, int] = (2, 20),
    dropout: float = 0.0,
    overlap: float = 0.0,
    rows: str = "powerlaw",
    cols: str = "powerlaw",
    exponent: float = 2.5,
    random_state=None,
):
    """Sparse data that looks like real data, with known Boolean factors: overlapping planted
    tiles over a skewed background.

    Baskets, logs and annotations are very sparse and skewed, and their patterns (items bought
    together, tags used together) are small sets of columns shared by many rows, the popular
    columns in many patterns at once. This generator plants ``k`` tiles (row set × column set)
    and adds background ones:

    - rows and columns get weights of the kinds ``rows`` and ``cols`` (as
      :func:`make_sparse_degrees`: power-law weights make a few rows and columns heavy);
    - tile l has between ``tile_cols[0]`` and ``tile_cols[1]`` columns (log-uniform) and an area
      in proportion to a Pareto weight (a few large tiles, many small ones), the areas summing
      to about ``tile_share * nnz``; its rows and columns are drawn without replacement in
      proportion to the weights, so heavy columns sit in several tiles and tiles overlap;
    - with ``overlap`` > 0, every tile after the first takes that share of its columns from
      a random earlier tile (genres and their sub-genres in ratings, navigational paths
      through the same pages in click streams), the rest drawn by weight as above;
    - a fraction ``dropout`` of the tiles' cells is cleared (false negatives);
    - the rest of the ``nnz`` ones are background (false positives for the tiles): a random
      bipartite graph with degrees drawn from the same weights.

    Time and memory are O(nnz + (n + m)·k): nothing of size n·m is formed.

    Parameters
    ----------
    n, m : int
        Shape of X.
    nnz : int
        Target number of nonzeros: X has about this many (background ones that fall inside a
        tile count once).
    k : int
        Number of planted tiles.
    tile_share : float in [0, 1], default 0.5
        Share of ``nnz`` planted in tiles (before the dropout).
    tile_cols : (int, int), default (2, 20)
        Least and most columns of a tile (capped at m).
    dropout : float in [0, 1), default 0.0
        Fraction of the tiles' cells cleared.
    overlap : float in [0, 1], default 0.0
        Share of each tile's columns (rounded, at most the earlier tile's width) taken from a
        random earlier tile, drawn in proportion to the column weights: the tiles then nest
        and overlap on purpose, not only through the heavy columns. 0 draws every tile on its
        own (and gives the same matrices as before this parameter existed); 1 makes every
        tile a subset of an earlier one where the widths allow.
    rows, cols : {"uniform", "poisson", "powerlaw"}, default "powerlaw"
    exponent : float > 1, default 2.5
        Exponent of the power laws (weights of rows, columns and tile areas).
    random_state : None, int or Generator

    Returns
    -------
    X : csr_array of shape (n, m), bool
    W : ndarray of shape (n, k), bool
        ``W[:, l]``: the rows of tile l.
    H : ndarray of shape (k, m), bool
        ``H[l]``: the columns of tile l. ``W⊗H`` is the planted truth; its error against X is
        the background outside the tiles plus the dropped cells.

    Examples
    --------
    >>> X, W, H = make_sparse_tiles(2000, 300, 10_000, 5, random_state=0)
    >>> X.shape, W.shape, H.shape
    ((2000, 300), (2000, 5), (5, 300))
    >>> bool(abs(X.nnz - 10_000) < 1_000)
    True

    Ratings-like data (users × items: heavy users and items, wide genres that share items,
    each user rating half of a genre) and click-stream-like data (sessions × pages: about three
    clicks per session, a few pages in a large share of the sessions, short paths that share
    pages):

    >>> ratings, _, _ = make_sparse_tiles(
    ...     5000, 1000, 50_000, 10, tile_cols=(20, 200), dropout=0.5, overlap=0.3,
    ...     random_state=0)
    >>> users = np.diff(ratings.indptr)
    >>> float(np.median(users)), int(users.max())
    (5.0, 497)
    >>> clicks, _, _ = make_sparse_tiles(
    ...     20_000, 500, 60_000, 10, tile_cols=(2, 6), overlap=0.5, rows="poisson",
    ...     exponent=2.0, random_state=0)
    >>> round(clicks.nnz / clicks.shape[0], 1), int(np.diff(clicks.indptr).max())
    (2.9, 14)
    """
    n, m, nnz, k, (lo, hi) = _check_tiles_params(
        n, m, nnz, k, tile_share, tile_cols, dropout, overlap, rows, cols, exponent
    )
    rng = check_random_state(random_state)
    row_w = _degree_weights(rng, n, rows, exponent)
    col_w = _degree_weights(rng, m, cols, exponent)
    W = np.zeros((n, k), dtype=bool)
    H = np.zeros((k, m), dtype=bool)
    keys = np.zeros(0, dtype=np.int64)
    if k:
        widths, heights = _tile_shapes(rng, (n, m), k, (lo, hi), tile_share, nnz, exponent)
        keys = _place_tiles(rng, W, H, widths, heights, overlap, row_w, col_w)
    keys = _add_noise(rng, keys, (n, m), nnz, dropout, row_w, col_w)
    return support_mask_from_keys(keys, (n, m)), W, H


def _check_tiles_params(
    n, m, nnz, k, tile_share, tile_cols, dropout, overlap, rows, cols, exponent
) -> tuple:
    """Check :func:`make_sparse_tiles`'s parameters: ``(n, m, nnz, k, (low, high))`` as ints,
    ``(low, high)`` the bounds of ``tile_cols``; raise InvalidParameterError (or
    :func:`check_matrix_size`'s error) on the first that is wrong."""
    for name, v in (("n", n), ("m", m), ("nnz", nnz), ("k", k)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise InvalidParameterError(f"{name} must be a nonnegative integer, got {v!r}")
    if n < 1 or m < 1:
        raise InvalidParameterError(f"n and m must be positive, got {n} and {m}")
    n, m, nnz, k = int(n), int(m), int(nnz), int(k)
    if nnz > n * m:
        raise InvalidParameterError(f"nnz={nnz} exceeds n*m={n * m}")
    for name, v, closed in (
        ("tile_share", tile_share, True),
        ("dropout", dropout, False),
        ("overlap", overlap, True),
    ):
        ok = isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
        if not ok or not (0 <= v <= 1 if closed else 0 <= v < 1):
            bound = "[0, 1]" if closed else "[0, 1)"
            raise InvalidParameterError(f"{name} must be a number in {bound}, got {v!r}")
    lo, hi = _check_tile_cols(tile_cols)
    _check_degree_kinds(rows, cols, exponent)
    check_matrix_size(
        n,
        m,
        nnz,
        f"make_sparse_tiles({n}, {m}, {nnz}, {k})",
        extra=32 * (n + m) + 96 * nnz + (n + m) * k,
    )
    return n, m, nnz, k, (lo, hi)


def _tile_shapes(
    rng: np.random.Generator, shape, k: int, tile_cols, tile_share, nnz: int, exponent
) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` tiles' ``(widths, heights)``: widths log-uniform between the bounds of
    ``tile_cols`` (capped at m), areas in proportion to Pareto weights summing to about
    ``tile_share * nnz``, heights the areas over the widths (1 to n rows)."""
    (n, m), (lo, hi) = shape, tile_cols
    lo, hi = min(lo, m), min(hi, m)
    widths = np.exp(rng.uniform(np.log(lo), np.log(hi + 1), size=k)).astype(np.int64)
    widths = np.clip(widths, lo, hi)
    areas = _degree_weights(rng, k, "powerlaw", exponent) * tile_share * nnz
    heights = np.clip(np.rint(areas / widths), 1, n).astype(np.int64)
    return widths, heights


def _place_tiles(
    rng: np.random.Generator, W, H, widths, heights, overlap: float, row_w, col_w
) -> np.ndarray:
    """Draw each tile's rows and columns in proportion to the weights (its columns partly from
    a random earlier tile's with ``overlap``), mark them in ``W`` and ``H`` (in place), and
    return the sorted distinct keys (``row * m + col``) of the tiles' cells."""
    n, m = W.shape[0], H.shape[1]
    planted = []
    for l in range(len(widths)):
        r = rng.choice(n, size=heights[l], replace=False, p=row_w)
        if overlap and l:
            c = _overlapping_columns(rng, H[rng.integers(l)], widths[l], overlap, col_w)
        else:
            c = rng.choice(m, size=widths[l], replace=False, p=col_w)
        W[r, l] = True
        H[l, c] = True
        planted.append((r[:, None].astype(np.int64) * m + c[None, :]).ravel())
    return np.unique(np.concatenate(planted))


def _add_noise(
    rng: np.random.Generator, keys: np.ndarray, shape, nnz: int, dropout: float, row_w, col_w
) -> np.ndarray:
    """The tiles' cell ``keys`` less a ``dropout`` share of them (false negatives), with
    background ones up to ``nnz`` (false positives): a random bipartite graph whose degrees
    are drawn from the weights."""
    n, m = shape
    if dropout and len(keys):
        keys = keys[rng.random(len(keys)) >= dropout]
    background = max(0, nnz - len(keys))
    if background:
        row_deg = _degree_sequence(rng, n, row_w, background, m)
        col_deg = _degree_sequence(rng, m, col_w, background, n)
        keys = np.union1d(keys, _match_degrees(rng, row_deg, col_deg, col_w))
    return keys


def _overlapping_columns(
    rng: np.random.Generator, parent: np.ndarray, width: int, overlap: float, col_w
) -> np.ndarray:
    """``width`` distinct columns: ``overlap`` of them from the ``parent`` tile's, the rest
    from all columns; both drawn in proportion to the weights (equal when None)."""
    w = np.ones(len(parent)) if col_w is None else col_w.copy()
    mine = np.flatnonzero(parent)
    shared = min(int(np.rint(overlap * width)), len(mine))
    own = rng.choice(mine, size=shared, replace=False, p=w[mine] / w[mine].sum())
    if shared == width:
        return own
    w[own] = 0.0  # the rest are other columns (some may be the parent's, by weight)
    rest = rng.choice(len(parent), size=width - shared, replace=False, p=w / w.sum())
    return np.concatenate((own, rest))


def _check_degree_kinds(rows, cols, exponent) -> None:
    for name, kind in (("rows", rows), ("cols", cols)):
        if kind not in DEGREE_KINDS:
            raise InvalidParameterError(f"{name} must be one of {DEGREE_KINDS}, got {kind!r}")
    if (
        isinstance(exponent, bool)
        or not isinstance(exponent, (int, float, np.number))
        or not exponent > 1
    ):
        raise InvalidParameterError(f"exponent must be a number > 1, got {exponent!r}")


def _check_tile_cols(tile_cols) -> tuple[int, int]:
    try:
        lo, hi = (int(v) for v in tile_cols)
        ok = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in tile_cols)
    except (TypeError, ValueError):
        ok = False
    if not ok or not 1 <= lo <= hi:
        raise InvalidParameterError(
            f"tile_cols must be two integers 1 <= low <= high, got {tile_cols!r}"
        )
    return lo, hi


def _degree_weights(rng: np.random.Generator, size: int, kind: str, exponent: float):
    """Relative expected degrees (summing to 1), or None for exactly equal degrees."""
    if kind == "uniform":
        return None
    if kind == "poisson":
        return np.full(size, 1.0 / size)
    # Pareto on [1, ∞) by inversion: P(w ≥ x) = x^-(exponent − 1).
    w = (1.0 - rng.random(size)) ** (-1.0 / (exponent - 1.0))
    return w / w.sum()


def _degree_sequence(
    rng: np.random.Generator, size: int, weights, total: int, cap: int
) -> np.ndarray:
    """``size`` degrees summing to ``total``, each ≤ ``cap`` (``total ≤ size·cap``): equal
    (``weights`` None) or multinomial over ``weights``."""
    if weights is None:
        deg = np.full(size, total // size, dtype=np.int64)
        deg[: total % size] += 1
        return deg
    deg = rng.multinomial(total, weights).astype(np.int64)
    # Move the excess over the cap to the degrees below it, in proportion to their weights.
    # Each round either places all of the excess or fills at least one more degree to the cap.
    while (over := deg > cap).any():
        excess = int((deg[over] - cap).sum())
        deg[over] = cap
        room = np.where(deg < cap, weights, 0.0)
        deg += rng.multinomial(excess, room / room.sum())
    return deg


def _match_degrees(
    rng: np.random.Generator,
    row_deg: np.ndarray,
    col_deg: np.ndarray,
    col_weights,
    candidates: int = 8,
) -> np.ndarray:
    """Sorted distinct keys ``i * m + j`` of a random bipartite graph with these degrees.

    The row slots (row i owns ``row_deg[i]`` consecutive slots) get a random permutation of
    the column slots. A slot that repeats a column of its row then swaps columns with a random
    other slot where neither row has the other's column (the first of ``candidates`` random
    tries that fits), which keeps both degree sequences; only the rows swaps touch are checked
    again. Once a round clears less than a tenth of the repeats (twice), the rest move to
    columns missing from their row: these are repeats of columns that nearly every row already
    has, or in rows that have nearly every column, where a fitting swap is rare.
    """
    n, m = len(row_deg), len(col_deg)
    nnz = int(row_deg.sum())
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(row_deg, out=indptr[1:])
    keys = np.repeat(np.arange(n, dtype=np.int64) * m, row_deg)
    keys += rng.permutation(np.repeat(np.arange(m, dtype=np.int64), col_deg))
    # Rows are contiguous and in order, so a sort only reorders columns within each row: every
    # slot stays in its row, and a repeat sits right after its twin. Keys stay sorted: each
    # round re-sorts the rows it changed.
    keys.sort()
    pending = np.flatnonzero(keys[1:] == keys[:-1]) + 1
    stalled = 0
    while len(pending) and stalled < 2:
        row_s = np.searchsorted(indptr, pending, side="right") - 1
        col_s = keys[pending] - row_s * m
        t = rng.integers(0, nnz, size=(len(pending), candidates))
        row_t = np.searchsorted(indptr, t, side="right") - 1
        col_t = keys[t] - row_t * m
        fits = (row_t != row_s[:, None]) & (col_t != col_s[:, None])
        fits &= ~_isin_sorted(keys, row_t * m + col_s[:, None])
        fits &= ~_isin_sorted(keys, (row_s * m)[:, None] + col_t)
        has = fits.any(axis=1)
        pick = fits.argmax(axis=1)[has]
        s, t = pending[has], t[has, pick]
        # One swap per partner slot, and never with a slot that is itself being moved.
        t, first = np.unique(t, return_index=True)
        s = s[first]
        free = ~np.isin(t, pending)
        s, t = s[free], t[free]
        rs = np.searchsorted(indptr, s, side="right") - 1
        rt = np.searchsorted(indptr, t, side="right") - 1
        cs, ct = keys[s] - rs * m, keys[t] - rt * m
        keys[s], keys[t] = rs * m + ct, rt * m + cs
        # Re-sort the touched rows in place (their slots, ascending, keep rows apart) and find
        # their repeats again; swaps into one row at once can make new ones.
        touched = np.unique(np.concatenate((rs, rt)))
        idx = _row_slots(indptr, touched)
        sub = np.sort(keys[idx])
        keys[idx] = sub
        before = len(pending)
        untouched = pending[~np.isin(row_s, touched)]
        pending = np.concatenate((untouched, idx[1:][sub[1:] == sub[:-1]]))
        stalled = stalled + 1 if len(pending) > 0.9 * before else 0
    if len(pending):
        _place_leftovers(rng, keys, indptr, pending, m, col_weights)
    return keys


def _row_slots(indptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """The slots of ``rows`` (ascending), in ascending order."""
    lengths = indptr[rows + 1] - indptr[rows]
    starts = np.repeat(indptr[rows] - np.cumsum(lengths) + lengths, lengths)
    return starts + np.arange(int(lengths.sum()), dtype=np.int64)


def _isin_sorted(a: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``q``'s values that occur in the sorted, nonempty array ``a``."""
    # Sorted queries: numpy's binary search then starts from the previous hit (6× faster on
    # 2·10⁵ random queries into 10⁷ keys).
    flat = q.ravel()
    order = np.argsort(flat)
    pos = np.empty(len(flat), dtype=np.intp)
    pos[order] = np.searchsorted(a, flat[order])
    np.minimum(pos, len(a) - 1, out=pos)
    return (a[pos] == flat).reshape(q.shape)


def _place_leftovers(rng, keys, indptr, pending, m, col_weights, tries: int = 32) -> None:
    """Give each pending slot a column its row does not have, drawn in proportion to the column
    weights (equal for "uniform" columns), and re-sort the rows. Row degrees stay exact."""
    rows = np.searchsorted(indptr, pending, side="right") - 1
    cdf = None if col_weights is None else np.cumsum(col_weights)
    new = np.full(len(pending), -1, dtype=np.int64)
    todo = np.arange(len(pending))
    for _ in range(tries):  # rejection: draw, keep a draw its row lacks (and no other took)
        if not len(todo):
            break
        if cdf is None:
            c = rng.integers(0, m, size=len(todo))
        else:
            c = np.minimum(np.searchsorted(cdf, rng.random(len(todo)) * cdf[-1]), m - 1)
        q = rows[todo] * m + c
        ok = ~_isin_sorted(keys, q)
        taken = np.sort(new[new >= 0])
        if len(taken):
            ok &= ~_isin_sorted(taken, q)
        first = np.zeros(len(q), dtype=bool)
        first[np.unique(q, return_index=True)[1]] = True
        ok &= first
        new[todo[ok]] = q[ok]
        todo = todo[~ok]
    # What rejection did not place (rows with nearly every column): the row's missing columns.
    weights = np.full(m, 1.0 / m) if col_weights is None else col_weights + 1e-12
    for i in np.unique(rows[todo]).tolist():
        mine = todo[rows[todo] == i]
        absent = np.ones(m, dtype=bool)
        absent[keys[indptr[i] : indptr[i + 1]] - i * m] = False
        absent[new[rows == i][new[rows == i] >= 0] - i * m] = False
        cand = np.flatnonzero(absent)
        p = weights[cand] / weights[cand].sum()
        new[mine] = i * m + rng.choice(cand, size=len(mine), replace=False, p=p)
    keys[pending] = new
    idx = _row_slots(indptr, np.unique(rows))
    keys[idx] = np.sort(keys[idx])


# ---------------------------------------------------------------------------------------------
# Bundled real datasets


def data_dir(path=None) -> Path:
    """Folder of the bundled datasets.

    Looked up in order: ``path`` (the loaders' ``data_home=``), the folder named by the
    ``BANMF_DATA`` environment variable, the data installed with the package (``banmf/bundled``
    in a wheel, found with :mod:`importlib.resources`), and the repository's ``data/`` folder
    (a source checkout or an editable install).

    Parameters
    ----------
    path : path, optional
        A folder holding the dataset files (``zoo_101x15.mtx`` and its ``.json`` sidecar, …).

    Returns
    -------
    Path

    Raises
    ------
    FileNotFoundError
        ``path`` or ``BANMF_DATA`` is not a folder, or no bundled data is found.

    Examples
    --------
    >>> (data_dir() / "zoo_101x15.mtx").is_file()
    True
    """
    if path is not None:
        if not Path(path).is_dir():
            raise FileNotFoundError(f"data_home {path}: no such folder")
        return Path(path)
    env = os.environ.get("BANMF_DATA")
    if env:
        if not Path(env).is_dir():
            raise FileNotFoundError(
                f"BANMF_DATA={env}: no such folder; unset it to use the bundled data"
            )
        return Path(env)
    for c in (_installed_data(), _REPO_DATA):
        if c is not None and (c / "zoo_101x15.mtx").is_file():
            return c
    raise FileNotFoundError(
        "bundled data not found: banmf was installed without its data (reinstall from the wheel "
        "or sdist), or run from a checkout without data/; pass data_home=, or set BANMF_DATA to "
        "a folder holding zoo_101x15.mtx etc. (the repository's data/ folder)"
    )


#: The repository's data/ folder, used from a source checkout or an editable install.
_REPO_DATA = Path(__file__).resolve().parent.parent / "data"


def _installed_data() -> Path | None:
    """``banmf/bundled`` as installed from a wheel (pyproject.toml maps data/ there), or None."""
    folder = resources.files("banmf").joinpath("bundled")
    # An installed package lives on the file system; a zipped one (zipimport) has no real
    # folder to hand back, so it is not used (BANMF_DATA or data_home= still work).
    return folder if isinstance(folder, Path) and folder.is_dir() else None


def _load(filename: str, data_home=None) -> Dataset:
    path = data_dir(data_home) / filename
    ds = read_dataset(path)
    want = ds.meta.get("sha256")
    if want:
        got = hashlib.sha256(path.read_bytes()).hexdigest()
        if got != want:
            raise InputError(
                f"{path}: checksum {got} does not match its sidecar ({want}); the file is damaged"
            )
    return ds


_ZOO = {"15": "zoo_101x15.mtx", "16_legs": "zoo_101x16_legs.mtx", "14": "zoo_101x14.mtx"}
_VOTES = {
    "232": "votes_232x16.mtx",
    "435_yes": "votes_435x16_yes.mtx",
    "435_missing_mask": "votes_435x16_missing_mask.mtx",
}


def load_zoo(variant: str = "15", *, data_home=None) -> Dataset:
    """UCI Zoo: 101 animals × Boolean attributes (CC BY 4.0).

    Parameters
    ----------
    variant : {"15", "16_legs", "14"}
        "15": the 15 Boolean attributes (default); "16_legs": plus ``legs>0``; "14": without
        ``catsize``, a guess at the paper's 101×14 (see data/README.md).
    data_home : path, optional

    Returns
    -------
    Dataset
        ``X`` (101, m) with animal names as row labels and attribute names as column labels;
        the class of each animal is in ``meta["row_types"]``.

    Examples
    --------
    >>> load_zoo().X.shape
    (101, 15)
    """
    if variant not in _ZOO:
        raise InvalidParameterError(f"variant must be one of {sorted(_ZOO)}, got {variant!r}")
    return _load(_ZOO[variant], data_home)


def load_votes(variant: str = "232", *, data_home=None) -> Dataset:
    """UCI Congressional Voting Records 1984: members × 16 votes, y = 1 (CC BY 4.0).

    Parameters
    ----------
    variant : {"232", "435", "435_yes", "435_missing_mask"}
        "232": the members with no missing vote (the paper's matrix, default); "435": all
        members, the 392 missing votes as unknown cells (in ``missing``: fit with
        ``missing=ds.missing``); "435_yes": all members, missing votes as 0;
        "435_missing_mask": a 1 at every missing vote.

    Examples
    --------
    >>> load_votes().X.shape
    (232, 16)
    >>> load_votes("435").missing.nnz
    392
    """
    if variant == "435":
        ds = _load(_VOTES["435_yes"], data_home)
        mask = _load(_VOTES["435_missing_mask"], data_home).X
        return ds.replace(missing=mask)
    if variant not in _VOTES:
        raise InvalidParameterError(
            f"variant must be one of {sorted([*_VOTES, '435'])}, got {variant!r}"
        )
    return _load(_VOTES[variant], data_home)


def load_lucap0(*, data_home=None) -> Dataset:
    """LUCAP0 training data (Causality Workbench, Guyon et al. 2008): 2000 × 143, d ≈ 0.52.

    Examples
    --------
    >>> load_lucap0().X.nnz
    147632
    """
    return _load("lucap0_2000x143.mtx.gz", data_home)


def load_mushroom(*, drop_class: bool = True, data_home=None) -> Dataset:
    """FIMI mushroom: 8124 × 119 one-hot UCI Mushroom; ``drop_class`` removes the 2 class columns."""
    ds = _load("mushroom_8124x119.mtx.gz", data_home)
    if not drop_class:
        return ds
    return Dataset(ds.X[:, 2:], ds.row_labels, None, ds.name, ds.meta)


def load_retail(*, data_home=None) -> Dataset:
    """FIMI retail: 88162 baskets × 16470 items, 908,576 nonzeros (Brijs et al. 1999)."""
    return _load("retail_88162x16470.mtx.gz", data_home)
