"""Synthetic Boolean data (ALGORITHMS.md §6) and the bundled real datasets."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ._validation import (
    check_binary_matrix,
    check_n_components,
    check_random_state,
    support_mask_from_keys,
)
from .booleanize import boolean_product
from .io import Dataset, read_dataset

__all__ = [
    "Dataset",
    "RankGapCase",
    "data_dir",
    "load_lucap0",
    "load_mushroom",
    "load_retail",
    "load_votes",
    "load_zoo",
    "make_boolean",
    "make_sparse_uniform",
    "planted_probability",
    "rank_gap_case",
    "rank_gap_suite",
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

    Examples
    --------
    >>> X, W, H = make_boolean(50, 50, 5, density=0.5, random_state=0)
    >>> X.shape, W.shape, H.shape
    ((50, 50), (50, 5), (5, 50))
    """
    for name, v in (("n", n), ("m", m)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    k = check_n_components(k, (max(n, k), max(m, k)))
    if not 0.0 < density < 1.0:
        raise ValueError(f"density must be in (0, 1), got {density!r}")
    if not 0.0 <= noise < 1.0:
        raise ValueError(f"noise must be in [0, 1), got {noise!r}")
    if noise_kind not in ("iid", "count"):
        raise ValueError(f"noise_kind must be 'iid' or 'count', got {noise_kind!r}")
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
    when rows are dense. Memory is O(nnz).

    Examples
    --------
    >>> X = make_sparse_uniform(1000, 200, 5000, random_state=0)
    >>> X.shape, 4900 < X.nnz <= 5000
    ((1000, 200), True)
    """
    for name, v in (("n", n), ("m", m), ("nnz", nnz)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ValueError(f"{name} must be a nonnegative integer, got {v!r}")
    if n < 1 or m < 1:
        raise ValueError(f"n and m must be positive, got {n} and {m}")
    if nnz > n * m:
        raise ValueError(f"nnz={nnz} exceeds n*m={n * m}")
    rng = check_random_state(random_state)
    per_row = np.full(n, nnz // n, dtype=np.int64)
    per_row[: nnz % n] += 1
    # One sort of row-major keys orders rows and columns at once (cheaper than a lexsort).
    keys = np.repeat(np.arange(n, dtype=np.int64) * m, per_row)
    keys += rng.integers(0, m, size=nnz, dtype=np.int64)
    keys.sort()
    keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))] if nnz else keys
    return support_mask_from_keys(keys, (n, m))


# ---------------------------------------------------------------------------------------------
# Rank-gap suite (paper §5, ALGORITHMS.md §6.3)


@dataclass(frozen=True)
class RankGapCase:
    """One matrix of the rank-gap suite: X planted with rank k and its real-rank gap bound."""

    X: sp.csr_array
    n: int
    m: int
    k: int
    density: float
    repeat: int
    real_rank: int

    @property
    def gap(self) -> int:
        """Lower bound of the Boolean rank gap: ``rank_R(X) − k`` (numpy ``matrix_rank``)."""
        return self.real_rank - self.k


def rank_gap_case(n: int, m: int, k: int, density: float, repeat: int = 0, *,
                  max_redraws: int = 1000, random_state=None) -> RankGapCase:
    """One planted X of the rank-gap suite, redrawn while its real rank is below k (paper §5)."""
    rng = check_random_state(random_state)
    for _ in range(max_redraws):
        X, _, _ = make_boolean(n, m, k, density, random_state=rng)
        rank = int(np.linalg.matrix_rank(X.toarray().astype(np.float64)))
        if rank >= k:
            return RankGapCase(X, n, m, k, density, repeat, rank)
    raise RuntimeError(f"no {n}×{m} matrix of real rank ≥ {k} at d={density} in {max_redraws} draws")


def rank_gap_suite(
    sizes=range(10, 51),
    ranks=range(2, 7),
    densities=(0.25, 0.5, 0.75),
    repeats: int = 5,
    *,
    square_only: bool = False,
    max_redraws: int = 1000,
    random_state=None,
):
    """Yield the rank-gap suite: for every (n, m, k, d, repeat), a planted X with rank_R(X) ≥ k.

    As in the paper, X is redrawn while its real rank is below k (``max_redraws`` bounds the
    loop; a setting that cannot reach rank k raises). The full grid is all (n, m) pairs of
    ``sizes`` (41² · 5 · 3 · 5 = 126,075 matrices); ``square_only`` keeps n = m (3,075).

    Yields
    ------
    RankGapCase
    """
    rng = check_random_state(random_state)
    sizes = list(sizes)
    pairs = [(s, s) for s in sizes] if square_only else [(a, b) for a in sizes for b in sizes]
    for n, m in pairs:
        for k in ranks:
            for d in densities:
                for rep in range(repeats):
                    yield rank_gap_case(n, m, k, d, rep, max_redraws=max_redraws, random_state=rng)


# ---------------------------------------------------------------------------------------------
# Bundled real datasets


def data_dir(path=None) -> Path:
    """Folder of the bundled datasets: ``path``, else $BANMF_DATA, else the repository's data/."""
    if path is not None:
        if not Path(path).is_dir():
            raise FileNotFoundError(f"data_home {path}: no such folder")
        return Path(path)
    candidates = [os.environ.get("BANMF_DATA"), Path(__file__).resolve().parent.parent / "data"]
    for c in candidates:
        if c is not None and Path(c).is_dir():
            return Path(c)
    raise FileNotFoundError(
        "bundled data not found: pass data_home=, or set BANMF_DATA to the folder holding "
        "zoo_101x15.mtx etc. (the repository's data/ folder)"
    )


def _load(filename: str, data_home=None) -> Dataset:
    path = data_dir(data_home) / filename
    ds = read_dataset(path)
    want = ds.meta.get("sha256")
    if want:
        got = hashlib.sha256(path.read_bytes()).hexdigest()
        if got != want:
            raise ValueError(f"{path}: checksum {got} does not match its sidecar ({want}); the file is damaged")
    return ds


_ZOO = {"15": "zoo_101x15.mtx", "16_legs": "zoo_101x16_legs.mtx", "14": "zoo_101x14.mtx"}
_VOTES = {"232": "votes_232x16.mtx", "435_yes": "votes_435x16_yes.mtx",
          "435_missing_mask": "votes_435x16_missing_mask.mtx"}


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
        raise ValueError(f"variant must be one of {sorted(_ZOO)}, got {variant!r}")
    return _load(_ZOO[variant], data_home)


def load_votes(variant: str = "232", *, data_home=None) -> Dataset:
    """UCI Congressional Voting Records 1984: members × 16 votes, y = 1 (CC BY 4.0).

    Parameters
    ----------
    variant : {"232", "435_yes", "435_missing_mask"}
        "232": the members with no missing vote (the paper's matrix, default); "435_yes": all
        members, missing votes as 0; "435_missing_mask": a 1 at every missing vote.

    Examples
    --------
    >>> load_votes().X.shape
    (232, 16)
    """
    if variant not in _VOTES:
        raise ValueError(f"variant must be one of {sorted(_VOTES)}, got {variant!r}")
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
    return Dataset(check_binary_matrix(ds.X[:, 2:]), ds.row_labels, None, ds.name, ds.meta)


def load_retail(*, data_home=None) -> Dataset:
    """FIMI retail: 88162 baskets × 16470 items, 908,576 nonzeros (Brijs et al. 1999)."""
    return _load("retail_88162x16470.mtx.gz", data_home)

