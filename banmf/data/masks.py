"""The Boolean primitives every module shares (the one private module others import from):
packed rows and codes, canonical support masks and their transposes, and the error counts of
trusted Boolean factors against a support mask without an n×m array.

The Hamming error of Boolean factors is ``E = nnz(X) + cover - 2 * hits`` where ``hits`` counts
the ones of X that W⊗H covers (one AND of packed codes per nonzero) and ``cover`` counts the
ones of W⊗H on observed cells: all of them (a union of packed rows per *distinct* row code) less
those on unknown cells, or, when few cells are observed, the hits plus the covered observed
zeros (:class:`Unknown`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .._kernels.boolean import (
    SCRATCH_PAD,
    pack_cols_above,
    pack_rows_above,
    support_hits,
    union_popcounts,
)
from ..runtime.threads import pick

__all__ = [
    "Packed",
    "Unknown",
    "cell_keys",
    "count_unknown",
    "cover_count",
    "csr_from_parts",
    "decode_codes",
    "hits_and_cover",
    "in_sorted",
    "mask_difference",
    "mask_union",
    "mismatches",
    "pack_rows",
    "row_codes",
    "support_mask",
    "support_mask_from_keys",
    "transpose_mask",
    "with_cells",
    "unique_rows",
    "words",
]


# -- packing ---------------------------------------------------------------------------------


def words(bits: int) -> int:
    return max(1, -(-bits // 64))


#: Codes below this (besides 4 per row) are counted by :func:`unique_rows` rather than sorted.
COUNTED_CODES = 1 << 16


def unique_rows(A: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct rows of the 2-D integer array A, with the index of each row's distinct row and
    the counts: ``np.unique(A, axis=0, return_inverse=True, return_counts=True)`` up to the
    order of the distinct rows. numpy's ``axis=0`` sorts a structured view of the rows, 25-30×
    slower than this sort on the words themselves (it was 80 % of a per-factor threshold sweep
    at 10⁵ rows). One word of small codes (k ≤ 16 bits, or up to about 4 per row) is counted
    instead of sorted: the same result in O(rows) (0.06 s at 10⁷ rows, k = 10, where the
    stable sort alone took 1.1 s)."""
    r = A.shape[0]
    if A.shape[1] == 1 and r and 0 <= A.min() and A.max() < 4 * r + COUNTED_CODES:
        codes = A[:, 0].astype(np.intp)
        counts = np.bincount(codes)
        present = np.flatnonzero(counts)
        rank = np.cumsum(counts > 0) - 1
        return present.astype(A.dtype)[:, None], rank[codes], counts[present]
    order = np.lexsort(A.T) if A.shape[1] > 1 else np.argsort(A[:, 0], kind="stable")
    S = A[order]
    first = np.ones(r, dtype=bool)
    if r > 1:
        np.any(S[1:] != S[:-1], axis=1, out=first[1:])
    group = np.cumsum(first) - 1
    inverse = np.empty(r, dtype=np.intp)
    inverse[order] = group
    starts = np.flatnonzero(first)
    return S[starts], inverse, np.diff(np.append(starts, r))


def pack_rows(B: np.ndarray) -> np.ndarray:
    """Rows of a bool matrix (r, c) as uint64 words, shape (r, ceil(c / 64))."""
    out = np.empty((B.shape[0], words(B.shape[1])), dtype=np.uint64)
    pick(pack_rows_above, B.size)(B, 0, out)
    return out


def row_codes(B: np.ndarray) -> np.ndarray:
    """Rows of a bool matrix (r, k ≤ 63) as k-bit integers: the one packed word of each row
    (numpy's shifted sum made n×k int64 temporaries: 1.2 s of a 6-sweep per-factor threshold
    refinement at 10⁶ rows, 11 calls)."""
    return pack_rows(B)[:, 0].view(np.int64)


def decode_codes(codes: np.ndarray, k: int) -> np.ndarray:
    return ((codes[:, None] >> np.arange(k, dtype=np.int64)) & 1).astype(bool)


@dataclass(frozen=True)
class Packed:
    """A Boolean factor of shape (r, k), given as ``R > s``, in the forms the counts need."""

    codes: np.ndarray  # (r, ceil(k/64)): each row's factors as bits
    distinct: np.ndarray  # distinct nonzero rows of `codes`
    counts: np.ndarray  # their multiplicities
    bits: np.ndarray  # (k, ceil(r/64)): each factor's rows as bits

    @classmethod
    def of(cls, R: np.ndarray, s=0) -> Packed:
        r, k = R.shape
        # Packed from a bool array whatever R is: the pack kernels then compile for one input
        # type (they were compiled for int32 ranks and for bool factors, 0.7 s of a first run).
        B = R if R.dtype == np.bool_ and s == 0 else R > s
        codes = np.empty((r, words(k)), dtype=np.uint64)
        pick(pack_rows_above, r * k)(B, 0, codes)
        bits = np.empty((k, words(r)), dtype=np.uint64)
        pick(pack_cols_above, r * k)(B, 0, bits)
        uniq, _, counts = unique_rows(codes)
        nonzero = uniq.any(axis=1)
        return cls(codes, np.ascontiguousarray(uniq[nonzero]), counts[nonzero], bits)

    @property
    def nbytes(self) -> int:
        return self.codes.nbytes + self.distinct.nbytes + self.counts.nbytes + self.bits.nbytes


# -- support masks -------------------------------------------------------------------------


def csr_from_parts(indptr: np.ndarray, indices: np.ndarray, shape: tuple[int, int]) -> sp.csr_array:
    X = sp.csr_array((np.ones(len(indices), dtype=bool), indices, indptr), shape=shape, copy=False)
    X.has_sorted_indices = True
    X.has_canonical_format = True
    return X


def support_mask(rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int]) -> sp.csr_array:
    """Canonical CSR support mask from (distinct) row/column coordinates. Trusts its input."""
    n, m = int(shape[0]), int(shape[1])
    nnz = len(rows)
    idx_dtype = np.int32 if max(n, m, nnz) < np.iinfo(np.int32).max else np.int64
    order = np.lexsort((cols, rows))
    indices = np.asarray(cols, dtype=idx_dtype)[order]
    counts = np.bincount(np.asarray(rows)[order], minlength=n)
    indptr = np.zeros(n + 1, dtype=idx_dtype)
    np.cumsum(counts, out=indptr[1:])
    return csr_from_parts(indptr, indices, (n, m))


def support_mask_from_keys(keys: np.ndarray, shape: tuple[int, int]) -> sp.csr_array:
    """Support mask from sorted, distinct row-major keys ``i * m + j`` (no sort needed)."""
    n, m = int(shape[0]), int(shape[1])
    idx_dtype = np.int32 if max(n, m, len(keys)) < np.iinfo(np.int32).max else np.int64
    # The row pointers are the one array of n's size: the counts go in place, per nonempty
    # row (a bincount over all n rows would add 8 bytes a row, for a few entries in 10^9 rows).
    indptr = np.zeros(n + 1, dtype=idx_dtype)
    rows = keys // m
    if len(rows):
        starts = np.flatnonzero(np.concatenate(([True], rows[1:] != rows[:-1])))
        indptr[rows[starts] + 1] = np.diff(np.append(starts, len(rows)))
    np.cumsum(indptr, out=indptr)
    return csr_from_parts(indptr, (keys % m).astype(idx_dtype), (n, m))


def transpose_mask(X: sp.csr_array) -> sp.csr_array:
    """Canonical support mask of Xᵀ from a canonical one: a linear-time counting sort (the CSC
    form of X, whose row indices come out sorted), not a general re-canonicalisation."""
    C = X.tocsc()
    return csr_from_parts(C.indptr, C.indices, (X.shape[1], X.shape[0]))


def cell_keys(X: sp.csr_array) -> np.ndarray:
    """Row-major keys ``i * m + j`` of a canonical mask's cells, sorted (its CSR order)."""
    rows = np.repeat(np.arange(X.shape[0], dtype=np.int64), np.diff(X.indptr))
    return rows * X.shape[1] + X.indices


def in_sorted(keys: np.ndarray, sorted_keys: np.ndarray) -> np.ndarray:
    """Which of ``keys`` are among ``sorted_keys`` (sorted, distinct): one binary search each."""
    if len(sorted_keys) == 0:
        return np.zeros(len(keys), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return sorted_keys[at] == keys


# -- unknown cells -------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class Unknown:
    """The cells of X whose value is not known, in whichever sparse form is small.

    ``observed=False``: ``cells`` are the unknown cells (few of them: unrecorded votes).
    ``observed=True``: ``cells`` are the observed zeros, and every cell that is neither one of
    them nor a one of X is unknown (few observed cells: user-item logs). Either way ``cells``
    is a canonical support mask of X's shape that never meets X's support, so every count over
    observed cells is a count over X's support and over ``cells``.
    """

    cells: sp.csr_array
    observed: bool

    @functools.cached_property
    def T(self) -> Unknown:
        """The same cells of Xᵀ."""
        return Unknown(transpose_mask(self.cells), self.observed)

    def observed_count(self, nnz: int) -> int:
        """Observed cells of a matrix with ``nnz`` observed ones."""
        n, m = self.cells.shape
        return nnz + self.cells.nnz if self.observed else n * m - self.cells.nnz

    def pass_cells(self, nnz: int) -> int:
        """Cells the multiplicative updates visit beside X's ``nnz`` ones: the unknown cells,
        or every observed cell (see :class:`banmf.engine.iterations.MUSolver`)."""
        return nnz + self.cells.nnz if self.observed else self.cells.nnz

    def dense_observed(self, X: sp.csr_array) -> np.ndarray:
        """The observed cells as a dense float64 array of 1s and 0s, for the dense methods
        (within their ``dense_budget``)."""
        cells = self.cells.toarray()
        return (
            (cells | X.toarray()).astype(np.float64)
            if self.observed
            else (~cells).astype(np.float64)
        )

    def covered(self, cover, hits, cell_hits):
        """Observed cells that W⊗H covers, from all the cells it covers (``cover``; unused
        with ``observed``), the ones it covers (``hits``) and the ``cells`` it covers
        (``cell_hits``). Works elementwise on arrays of counts."""
        return hits + cell_hits if self.observed else cover - cell_hits


def with_cells(X: sp.csr_array, cells: sp.csr_array) -> tuple[sp.csr_array, np.ndarray]:
    """The union of two disjoint masks, and per one of it (CSR order) whether it is one of
    ``cells``: the relation a greedy method sees when unknown cells are "don't care" (allowed
    in a factor, counted neither as a one covered nor as a zero covered)."""
    union = mask_union(X, cells)
    return union, in_sorted(cell_keys(union), cell_keys(cells))


def mask_union(A: sp.csr_array, B: sp.csr_array) -> sp.csr_array:
    """The cells of either of two canonical masks of one shape."""
    return support_mask_from_keys(np.union1d(cell_keys(A), cell_keys(B)), A.shape)


def mask_difference(A: sp.csr_array, B: sp.csr_array) -> sp.csr_array:
    """The cells of the canonical mask A that are not in B (of A's shape)."""
    keys = cell_keys(A)
    return support_mask_from_keys(keys[~in_sorted(keys, cell_keys(B))], A.shape)


def count_unknown(shape: tuple[int, int], missing=None, observed=None) -> int:
    """Unknown cells of a matrix of ``shape`` whose unknown cells are given as ``missing`` or
    ``observed`` (canonical masks; neither: none is unknown)."""
    n, m = shape
    if observed is not None:
        return n * m - observed.nnz
    return 0 if missing is None else missing.nnz


# -- error counts --------------------------------------------------------------------------


def cover_count(pw: Packed, ph: Packed) -> int:
    """Number of ones of W⊗H: per distinct row code of one side, the union of the other side's
    factor bitsets; the side with fewer distinct codes per word of the other is cheaper."""
    n, m = pw.codes.shape[0], ph.codes.shape[0]
    rows, other = (pw, ph) if len(pw.distinct) * m <= len(ph.distinct) * n else (ph, pw)
    sizes = np.empty(len(rows.distinct), dtype=np.int64)
    # One row of scratch per block of codes (the kernel's blocks: at most 64).
    acc = np.empty((min(sizes.size, 64), other.bits.shape[1] + SCRATCH_PAD), dtype=np.uint64)
    pick(union_popcounts, sizes.size * other.bits.size)(rows.distinct, other.bits, sizes, acc)
    return int(np.dot(sizes, rows.counts))


def _hits(X: sp.csr_array, pw: Packed, ph: Packed) -> int:
    hits = np.empty(X.shape[0], dtype=np.int64)
    pick(support_hits, X.nnz * pw.codes.shape[1])(X.indptr, X.indices, pw.codes, ph.codes, hits)
    return int(hits.sum())


def hits_and_cover(
    X: sp.csr_array, Wb: np.ndarray, Hb: np.ndarray, unknown: Unknown | None = None
) -> tuple[int, int]:
    """Ones of X that W⊗H covers, and the observed cells it covers (all its ones when every
    cell is observed), for trusted Boolean factors."""
    pw, ph = Packed.of(Wb), Packed.of(np.ascontiguousarray(Hb.T))
    hits = _hits(X, pw, ph)
    if unknown is None:
        return hits, cover_count(pw, ph)
    cover = None if unknown.observed else cover_count(pw, ph)
    return hits, unknown.covered(cover, hits, _hits(unknown.cells, pw, ph))


def mismatches(
    X: sp.csr_array, Wb: np.ndarray, Hb: np.ndarray, unknown: Unknown | None = None
) -> int:
    """Hamming error, on the observed cells, of trusted Boolean factors against a canonical
    support mask."""
    hits, cover = hits_and_cover(X, Wb, Hb, unknown)
    return X.nnz + cover - 2 * hits


def product_mask(Wb: np.ndarray, Hb: np.ndarray) -> sp.csr_array:
    """The Boolean product of trusted Boolean factors as a canonical support mask
    (:func:`banmf.boolean_product`)."""
    prod = (sp.csr_array(Wb.astype(np.int32)) @ sp.csr_array(Hb.astype(np.int32))).tocsr()
    prod.sort_indices()
    prod.eliminate_zeros()
    return csr_from_parts(prod.indptr, prod.indices, (Wb.shape[0], Hb.shape[1]))


def product_at(Wb: np.ndarray, Hb: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """The Boolean product of trusted Boolean factors at the trusted cells ``(rows[q], cols[q])``
    (:func:`banmf.predict_cells`)."""
    pw, ph = pack_rows(Wb), pack_rows(np.ascontiguousarray(Hb.T))
    return (pw[rows] & ph[cols]).any(axis=1)
