"""Every jitted kernel against its dense numpy oracle (tests/reference.py)."""

import numpy as np
import pytest
import reference as ref
from conftest import binary_matrices, examples, per_profile, run_both
from hypothesis import given
from hypothesis import strategies as st
from numba import njit

from banmf._kernels.boolean import (
    pack_cols_above,
    pack_csr_rows,
    pack_rows_above,
    popcount64,
    scaled_ranks,
    staircase_hits,
    support_hits,
    union_popcounts,
)
from banmf._kernels.mu import (
    Y_PARTS,
    Cells,
    Factors,
    Step,
    YSums,
    add_unobserved,
    cross_gram,
    padded_width,
    project_spmm,
    row_parts,
    row_width,
    scatter_rows,
    sum_blocks,
    update_rows,
    update_scatter_rows,
)
from banmf._kernels.mu_small import project_spmm_small, scatter_rows_small, update_rows_small
from banmf._kernels.prefetch import (
    LINE,
    MIN_BYTES,
    prefetch_row,
    prefetch_row_for_write,
    zeros_line_aligned,
)
from banmf._kernels.simd import Width
from banmf._kernels.sparse import Sparse
from banmf.data.masks import row_codes
from banmf.data.validation import check_binary_matrix

pytestmark = pytest.mark.usefixtures("wrapping_integers")


# Every path of the row updates' vector tiles: k below one vector, whole vectors (8 float32 or
# 4 float64 lanes), one or two vectors per tile, with and without zero padding.
ks = st.sampled_from([1, 2, 3, 4, 7, 8, 9, 16, 17, 33, 36])
# The Y pass and the scatter are compiled once per padded width up to four registers (8, 16,
# 24, 32 float32; 4, 8, 12, 16 float64), then once for every wider k: each width drawn costs a
# compilation of each variant, for each dtype and with or without unknown cells. The default
# profile (the README's test command) draws k = 1 (one register: 8 float32, 4 float64), 3 (the
# loops' remainder) and 33 (past four registers: the loops); the "wide" profile (.ci/run's second
# tier) also 9 (several registers: 2 float32, and 3 float64, held as vectors of 8 and 4); any
# other profile ("thorough") every width.
all_width_ks = [1, 3, 8, 9, 16, 17, 33]
width_ks = st.sampled_from(per_profile([1, 3, 33], all_width_ks, wide=[1, 3, 9, 33]))
dtypes = st.sampled_from([np.float64, np.float32])


def _padded(A, kp):
    """A (r, k) as the solver stores it: zero columns up to kp."""
    out = np.zeros((A.shape[0], kp), A.dtype)
    out[:, : A.shape[1]] = A
    return out


def _by_parts(sq_rows, indptr, cindptr):
    """The oracle's per-row objective sums (n, 2) added up over the Y pass's parts of the
    rows, as :func:`project_spmm` stores them (Y_PARTS, 2), parts past the last zero."""
    bounds = row_parts(indptr, cindptr, Y_PARTS)
    out = np.zeros((Y_PARTS, 2))
    for part in range(len(bounds) - 1):
        out[part] = sq_rows[bounds[part] : bounds[part + 1]].sum(axis=0)
    return out


def _layout(k, dtype, loops):
    """Stored width and kernel width: the solver's (padded rows in registers), or unpadded rows
    with Width(0) to test the loops over k on every k."""
    if loops:
        return k, Width(0)
    kp = padded_width(k, dtype)
    return kp, row_width(kp, dtype)


@pytest.mark.parametrize("dtype, lanes", [(np.float32, 8), (np.float64, 4)])
def test_padded_width(dtype, lanes):
    widths = {k: padded_width(k, dtype) for k in range(1, 100)}
    assert all(k <= kp < k + 2 * lanes and kp % lanes == 0 for k, kp in widths.items())
    assert all(kp - k < lanes for k, kp in widths.items())  # whole vectors, none to spare
    assert {kp for kp in widths.values() if row_width(kp, dtype).lanes} == {
        lanes,
        2 * lanes,
        3 * lanes,
        4 * lanes,
    }
    assert row_width(5 * lanes, dtype).lanes == 0


def _cells(rng, Xd, X, share):
    """Random unknown cells off X's support (dense bool, and as the kernels take them: row
    pointers and column indices in X's index type); ``share`` None gives None (no cells, as
    the solver passes them), 0 an empty structure."""
    Cd = (rng.random(Xd.shape) < (share or 0.0)) & ~Xd.astype(bool)
    if share is None:
        return Cd, None, None
    C = check_binary_matrix(Cd)
    return Cd, C.indptr.astype(X.indptr.dtype), C.indices.astype(X.indices.dtype)


def _values(cindices, fill, dtype):
    return None if cindices is None else np.full(len(cindices), fill, dtype)


def _unknown(cindptr, cindices, cy):
    """The unknown cells as the MU kernels take them: a :class:`Cells` group, or None."""
    return None if cindptr is None else Cells(cindptr, cindices, cy)


def _gram(rng, k):
    """A random symmetric positive semidefinite (k, k): the Gram matrices the row updates get."""
    A = rng.random((k + 1, k))
    return A.T @ A


# unknown cells: none (None, the usual case), an empty structure, or some
shares = st.sampled_from([None, 0.0, 0.3])


# Each example compiles its own variants (width, dtype, unknown cells, serial and parallel):
# three under the default profile, the profile's own count in .ci/run's second tier ("wide").
@pytest.mark.widths
@examples(3)
@given(
    binary_matrices(), width_ks, st.booleans(), st.integers(0, 2**31), dtypes, st.booleans(), shares
)
def test_project_spmm(Xd, k, project, seed, dtype, loops, share):
    rng = np.random.default_rng(seed)
    X = check_binary_matrix(Xd)
    n, m = Xd.shape
    kp, width = _layout(k, dtype, loops)
    W = rng.random((n, k)).astype(dtype)
    Ht = rng.random((m, k)).astype(dtype)
    y = (rng.random(X.nnz) * 3).astype(dtype)
    Cd, cindptr, cindices = _cells(rng, Xd, X, share)
    cy = _values(cindices, np.nan, dtype)
    YHt = np.full((n, kp), np.nan, dtype)
    sq = np.full((Y_PARTS, 2), np.nan)
    lower, upper = 1.0, float(k) if seed % 2 else np.inf
    y_ref, cy_ref, YHt_ref, sq_ref = ref.project_spmm(
        Xd, W.astype(float), Ht.astype(float), lower, upper, project, y.astype(float), Cd
    )
    run_both(
        project_spmm(width),
        Sparse(X.indptr, X.indices),
        y,
        Factors(_padded(W, kp), _padded(Ht, kp)),
        YSums(YHt, sq),
        _unknown(cindptr, cindices, cy),
        lower,
        upper,
        project,
        width,
    )
    tol = 1e-12 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(y, y_ref, rtol=tol)
    if cy is not None:
        np.testing.assert_allclose(cy, cy_ref, rtol=tol)
    np.testing.assert_allclose(YHt[:, :k], YHt_ref, rtol=tol, atol=tol)
    assert not YHt[:, k:].any()
    np.testing.assert_allclose(sq, _by_parts(sq_ref, X.indptr, cindptr), rtol=tol, atol=tol)


@given(
    st.lists(st.integers(0, 50), min_size=0, max_size=300),
    st.integers(1, 80),
    st.booleans(),
    st.integers(0, 2**31),
)
def test_row_parts(degrees, parts, cells, seed):
    """Contiguous ranges covering every row once, each of at most an equal share of the work
    (nonzeros, unknown cells, one per row) plus one row's."""
    rng = np.random.default_rng(seed)
    indptr = np.concatenate([[0], np.cumsum(degrees)]).astype(np.int32)
    extra = rng.integers(0, 5, len(degrees)) if cells else np.zeros(len(degrees), int)
    cindptr = np.concatenate([[0], np.cumsum(extra)]).astype(np.int32) if cells else None
    bounds = row_parts(indptr, cindptr, parts)
    n = len(degrees)
    assert len(bounds) == max(1, min(parts, n)) + 1
    assert bounds[0] == 0 and bounds[-1] == n and np.all(np.diff(bounds) >= 0)
    cost = np.asarray(degrees, int) + extra + 1
    per_part = np.add.reduceat(np.append(cost, 0), bounds[:-1])[: len(bounds) - 1]
    per_part[np.diff(bounds) == 0] = 0
    share = cost.sum() / (len(bounds) - 1) if n else 0
    assert np.all(per_part <= share + cost.max(initial=0) + 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [9, 33])
def test_project_spmm_rows_sorted_by_degree(dtype, k):
    """Rows sorted by degree (the heavy ones first) and more rows than the Y pass's parts of
    equal work: every row computed once, the same serial and parallel, as the oracle."""
    rng = np.random.default_rng(k)
    n, m = 400, 60
    degrees = np.sort(np.minimum(m, (rng.pareto(1.5, n) * 3).astype(int)))[::-1]
    Xd = np.zeros((n, m), np.int8)
    for i, d in enumerate(degrees):
        Xd[i, rng.choice(m, d, replace=False)] = 1
    X = check_binary_matrix(Xd)
    kp, width = _layout(k, dtype, False)
    W = rng.random((n, k)).astype(dtype)
    Ht = rng.random((m, k)).astype(dtype)
    y = np.ones(X.nnz, dtype)
    YHt = np.full((n, kp), np.nan, dtype)
    sq = np.full((Y_PARTS, 2), np.nan)
    y_ref, _, YHt_ref, sq_ref = ref.project_spmm(
        Xd, W.astype(float), Ht.astype(float), 1.0, float(k), True, y.astype(float), None
    )
    factors = Factors(_padded(W, kp), _padded(Ht, kp))
    args = (Sparse(X.indptr, X.indices), y, factors, YSums(YHt, sq), None, 1.0, float(k), True)
    run_both(project_spmm(width), *args, width)
    tol = 1e-12 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(y, y_ref, rtol=tol)
    np.testing.assert_allclose(YHt[:, :k], YHt_ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(sq, _by_parts(sq_ref, X.indptr, None), rtol=tol, atol=tol)


# Each example compiles its own variants (width, dtype, unknown cells, serial and parallel):
# two under the default profile, the profile's own count in .ci/run's second tier ("wide").
@examples(2)
@given(
    st.integers(1, 9),
    ks,
    st.integers(1, 4),
    st.sampled_from([0.0, 0.5, 1e4, 1e10]),
    st.integers(0, 2**31),
    dtypes,
    st.integers(0, 9),
)
def test_update_rows(r, k, nb, lam, seed, dtype, pad):
    rng = np.random.default_rng(seed)
    F = rng.random((r, k)).astype(dtype)
    F[0, 0] = 0.0  # zeros are absorbing and must stay finite
    numer, G = rng.random((r, k)).astype(dtype), _gram(rng, k).astype(dtype)
    expected = ref.mu_update(F.astype(float), numer.astype(float), F.astype(float) @ G, lam, 1e-12)
    gram = np.full((min(nb, r), k, k), np.nan)
    Fp = _padded(F, k + pad)  # stored rows may be wider than k (the solver's padding)
    run_both(update_rows, Fp, _padded(numer, k + pad), G, lam, 1e-12, gram, None)
    tol = 1e-12 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(Fp[:, :k], expected, rtol=tol)
    assert not Fp[:, k:].any()
    np.testing.assert_allclose(gram.sum(axis=0), expected.T @ expected, rtol=tol, atol=tol)
    assert np.isfinite(Fp).all()


# Each example compiles its own variants (width, dtype, unknown cells, serial and parallel):
# three under the default profile, the profile's own count in .ci/run's second tier ("wide").
@pytest.mark.widths
@examples(3)
@given(
    binary_matrices(),
    width_ks,
    st.integers(1, 5),
    dtypes,
    st.integers(0, 2**31),
    st.booleans(),
    shares,
)
def test_scatter_rows(Xd, k, nb, dtype, seed, loops, share):
    rng = np.random.default_rng(seed)
    X = check_binary_matrix(Xd)
    n, m = Xd.shape
    kp, width = _layout(k, dtype, loops)
    W = rng.random((n, k)).astype(dtype)
    y = rng.random(X.nnz).astype(dtype)
    Cd, cindptr, cindices = _cells(rng, Xd, X, share)
    cy = _values(cindices, 0.5, dtype)
    scatter, total = np.full((min(nb, n), m, kp), np.nan, dtype), np.full((m, kp), np.nan, dtype)
    run_both(
        scatter_rows(width),
        Sparse(X.indptr, X.indices),
        y,
        _unknown(cindptr, cindices, cy),
        _padded(W, kp),
        scatter,
        total,
        width,
    )
    tol = 1e-12 if dtype == np.float64 else 1e-4
    cy_dense = None if cy is None else cy.astype(float)
    expected = ref.gather_spmm(Xd, y.astype(float), W.astype(float), Cd, cy_dense)
    np.testing.assert_allclose(total[:, :k], expected, rtol=tol, atol=tol)
    assert not total[:, k:].any()
    # The blocks are added in block order: numpy's sum over them, to the last bit.
    np.testing.assert_array_equal(total, scatter.sum(axis=0))


@pytest.mark.parametrize("loops", [False, True])
@pytest.mark.parametrize("k", [1, 10, 33])
def test_project_spmm_prefetching_rows_past_l2(k, loops):
    """Hᵀ larger than L2 (its rows asked for ahead, up to the last nonzero; rows of 0-9
    nonzeros): Y, Y Hᵀ and the sums as numpy's, the same serial and parallel."""
    from banmf._kernels.prefetch import MIN_BYTES

    rng = np.random.default_rng(k)
    kp, width = _layout(k, np.float64, loops)
    n, m = 150, MIN_BYTES // (kp * 8) + 500
    Xd = (rng.random((n, m)) < rng.integers(0, 10, (n, 1)) / m).astype(np.int8)
    X = check_binary_matrix(Xd)
    W, Ht = rng.random((n, k)) * 0.5, rng.random((m, k)) * 0.5
    y = np.full(X.nnz, np.nan)
    YHt, sq = np.full((n, kp), np.nan), np.full((Y_PARTS, 2), np.nan)
    assert _padded(Ht, kp).nbytes > MIN_BYTES
    y_ref, _, YHt_ref, sq_ref = ref.project_spmm(Xd, W, Ht, 1.0, float(k), True, y, None)
    factors = Factors(_padded(W, kp), _padded(Ht, kp))
    args = (Sparse(X.indptr, X.indices), y, factors, YSums(YHt, sq), None, 1.0, float(k), True)
    run_both(project_spmm(width), *args, width)
    np.testing.assert_allclose(y, y_ref, rtol=1e-12)
    np.testing.assert_allclose(YHt[:, :k], YHt_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sq, _by_parts(sq_ref, X.indptr, None), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("k", [1, 10, 17])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_scatter_rows_into_partials_past_the_caches(k, dtype):
    """Partials larger than SCATTER_MIN_BYTES, whose rows the scatter asks for ahead (up to
    the last nonzero; rows of one and of several nonzeros, empty rows): Yᵀ W as numpy's,
    the blocks added in block order, the same serial and parallel."""
    from banmf._kernels.prefetch import SCATTER_MIN_BYTES

    rng = np.random.default_rng(k)
    kp, width = _layout(k, dtype, False)
    n, m = 200, SCATTER_MIN_BYTES // (kp * np.dtype(dtype).itemsize) + 500
    Xd = (rng.random((n, m)) < 3 / m * rng.integers(0, 4, (n, 1))).astype(np.int8)
    X = check_binary_matrix(Xd)
    W = rng.random((n, k)).astype(dtype)
    y = rng.random(X.nnz).astype(dtype)
    scatter, total = np.full((3, m, kp), np.nan, dtype), np.full((m, kp), np.nan, dtype)
    assert scatter[0].nbytes > SCATTER_MIN_BYTES
    args = (Sparse(X.indptr, X.indices), y, None, _padded(W, kp), scatter, total, width)
    run_both(scatter_rows(width), *args)
    tol = 1e-12 if dtype == np.float64 else 1e-4
    expected = ref.gather_spmm(Xd, y.astype(float), W.astype(float))
    np.testing.assert_allclose(total[:, :k], expected, rtol=tol, atol=tol)
    np.testing.assert_array_equal(total, scatter.sum(axis=0))


# Each example compiles eight kernels (the fused one, the two it fuses, the sum; each serial
# and parallel), about a minute: the second tier, one example under the default profile, the
# profile's own count under "wide" (.ci/run).
@pytest.mark.slow
@pytest.mark.widths
@examples(1)
@given(
    binary_matrices(),
    width_ks,
    st.integers(1, 5),
    st.sampled_from([0.0, 0.5]),
    dtypes,
    st.integers(0, 2**31),
    st.booleans(),
    shares,
)
def test_update_scatter_rows_is_the_update_then_the_scatter(
    Xd, k, nb, lam, dtype, seed, loops, share
):
    """The fused W step leaves W, its Gram partials and Wᵀ Y's partials as update_rows then
    scatter_rows do, to the bit; sum_blocks and the H update's own sum add those partials as
    scatter_rows does."""
    rng = np.random.default_rng(seed)
    X = check_binary_matrix(Xd)
    n, m = Xd.shape
    nb = min(nb, n)
    kp, width = _layout(k, dtype, loops)
    W0 = _padded(rng.random((n, k)).astype(dtype), kp)
    numer = _padded(rng.random((n, k)).astype(dtype), kp)
    G = _gram(rng, k).astype(dtype)
    y = rng.random(X.nnz).astype(dtype)
    _, cindptr, cindices = _cells(rng, Xd, X, share)
    cells = (
        Sparse(X.indptr, X.indices),
        y,
        _unknown(cindptr, cindices, _values(cindices, 0.5, dtype)),
    )
    W, gram, parts = W0.copy(), np.full((nb, k, k), np.nan), np.full((nb, m, kp), np.nan, dtype)
    step = Step(W, numer, G, lam, 1e-12)
    run_both(update_scatter_rows(width), step, gram, *cells, parts, width)

    F, gram2 = W0.copy(), np.full((nb, k, k), np.nan)
    run_both(update_rows, F, numer, G, lam, 1e-12, gram2, None)
    np.testing.assert_array_equal(W, F, strict=True)
    np.testing.assert_array_equal(gram, gram2, strict=True)
    expected, total = np.full((nb, m, kp), np.nan, dtype), np.full((m, kp), np.nan, dtype)
    run_both(scatter_rows(width), *cells, F, expected, total, width)
    np.testing.assert_array_equal(parts, expected, strict=True)
    summed = np.full((m, kp), np.nan, dtype)
    run_both(sum_blocks, parts, summed)
    np.testing.assert_array_equal(summed, total, strict=True)
    np.testing.assert_array_equal(summed, parts.sum(axis=0), strict=True)  # numpy, in order

    # The H update summing the partials itself: the sum, then the update.
    Ht, WtW = _padded(rng.random((m, k)).astype(dtype), kp), _gram(rng, k).astype(dtype)
    Ht2, hb = Ht.copy(), min(4, m)
    hgram, hgram2 = np.full((hb, k, k), np.nan), np.full((hb, k, k), np.nan)
    into = np.full((m, kp), np.nan, dtype)
    run_both(update_rows, Ht, into, WtW, lam, 1e-12, hgram, parts)
    np.testing.assert_array_equal(into, total, strict=True)
    run_both(update_rows, Ht2, total, WtW, lam, 1e-12, hgram2, None)
    np.testing.assert_array_equal(Ht, Ht2, strict=True)
    np.testing.assert_array_equal(hgram, hgram2, strict=True)


@given(st.integers(0, 2**64 - 1))
def test_popcount(x):
    assert int(popcount64(np.uint64(x))) == bin(x).count("1")


@given(st.integers(0, 40), st.sampled_from([0, 1, 10, 63]), st.booleans(), st.integers(0, 2**31))
def test_row_codes_are_the_shifted_sum(r, k, transposed, seed):
    B = np.random.default_rng(seed).random((k, r) if transposed else (r, k)) < 0.5
    B = B.T if transposed else B  # the column view of a transpose, as the polish passes H.T
    expected = (B.astype(np.int64) << np.arange(k, dtype=np.int64)).sum(axis=1)
    codes = row_codes(B)
    assert codes.dtype == np.int64
    np.testing.assert_array_equal(codes, expected)


@given(
    st.integers(1, 70),
    st.sampled_from([1, 5, 63, 64, 65, 130]),
    st.integers(-1, 4),
    st.booleans(),
    st.integers(0, 2**31),
)
def test_pack_above(r, c, s, as_bool, seed):
    R = np.random.default_rng(seed).integers(0, 5, size=(r, c)).astype(np.int32)
    if as_bool:
        R, s = R > 2, 0
    rows = np.empty((r, max(1, -(-c // 64))), dtype=np.uint64)
    run_both(pack_rows_above, R, s, rows)
    np.testing.assert_array_equal(rows, ref.pack_bits(R > s))
    cols = np.empty((c, max(1, -(-r // 64))), dtype=np.uint64)
    run_both(pack_cols_above, R, s, cols)
    np.testing.assert_array_equal(cols, ref.pack_bits((R > s).T))


@given(binary_matrices(), st.sampled_from([1, 2, 63, 64, 65]), st.integers(0, 2**31))
def test_support_hits_and_union_popcounts(Xd, k, seed):
    rng = np.random.default_rng(seed)
    n, m = Xd.shape
    X = check_binary_matrix(Xd)
    Wb = rng.random((n, k)) < 0.3
    Hb = rng.random((k, m)) < 0.3
    a, b = ref.pack_bits(Wb), ref.pack_bits(Hb.T)
    hits = np.empty(n, dtype=np.int64)
    run_both(support_hits, X.indptr, X.indices, a, b, hits)
    prod = ref.boolean_product(Wb, Hb)
    np.testing.assert_array_equal(hits, (prod & Xd.astype(bool)).sum(axis=1))
    bits = ref.pack_bits(Hb)
    for n_blocks in {1, min(3, n)}:  # any split into blocks: the same counts
        sizes = np.empty(n, dtype=np.int64)
        run_both(union_popcounts, a, bits, sizes, np.zeros((n_blocks, bits.shape[1]), np.uint64))
        np.testing.assert_array_equal(sizes, prod.sum(axis=1))


@given(
    binary_matrices(max_n=8, max_m=8),
    st.sampled_from([1, 2, 4]),
    st.integers(1, 7),
    st.integers(1, 3),
    st.integers(0, 2**31),
    st.sampled_from([np.uint8, np.int32]),
)
def test_staircase_hits(Xd, k, P, n_blocks, seed, dtype):
    """On the ranks of either width :func:`banmf.engine.booleanize.grid_ranks` gives."""
    rng = np.random.default_rng(seed)
    n, m = Xd.shape
    X = check_binary_matrix(Xd)
    u = rng.integers(0, P + 1, size=(n, k)).astype(dtype)
    vt = rng.integers(0, P + 1, size=(m, k)).astype(dtype)
    blocks = np.zeros((min(n_blocks, n), P + 1, P + 1), dtype=np.int64)
    scratch = np.zeros((2, len(blocks), k), dtype=np.int64)
    run_both(staircase_hits, X.indptr, X.indices, u, vt, blocks, *scratch)
    hits = blocks.sum(axis=0).cumsum(axis=0).cumsum(axis=1)[:P, :P]
    np.testing.assert_array_equal(hits, ref.hits_grid(Xd, u, vt, P))


@given(
    st.integers(0, 30),
    st.integers(1, 4),
    st.integers(1, 12),
    st.sampled_from([np.float64, np.float32]),
    st.booleans(),
    st.integers(0, 2**31),
)
def test_scaled_ranks(n, k, P, dtype, write, seed):
    """numpy's ``F * scale`` and ``searchsorted(points, ·, side="left")``: values on the grid
    points themselves (ties), zeros, above the top point; no rows; k = 1; float32 factors."""
    rng = np.random.default_rng(seed)
    points = np.linspace(0.0, rng.uniform(0.5, 2.0), P)
    F = rng.choice(np.concatenate([points, rng.uniform(0, 3, 8), [0.0]]), size=(n, k))
    F = F.astype(dtype)
    scale = rng.choice([1.0, 0.5, 1.7], size=k).astype(dtype)
    ranks = np.empty((n, k), dtype=np.uint8)
    scaled = np.empty((n if write else 0, k), dtype=dtype)
    run_both(scaled_ranks, F, scale, points, scaled, ranks)
    want = F * scale
    np.testing.assert_array_equal(ranks, np.searchsorted(points, want, side="left"))
    if write:
        np.testing.assert_array_equal(scaled, want, strict=True)


@given(binary_matrices(max_n=9, max_m=140))
def test_pack_csr_rows(Xd):
    X = check_binary_matrix(Xd)
    out = np.empty((Xd.shape[0], max(1, -(-Xd.shape[1] // 64))), dtype=np.uint64)
    run_both(pack_csr_rows, X.indptr, X.indices, out)
    np.testing.assert_array_equal(out, ref.pack_bits(Xd.astype(bool)))


@njit
def _touch_all_rows(A):
    """Prefetch every row, then sum them: the hints must leave the data and the result alone."""
    total = 0.0
    for i in range(A.shape[0]):
        prefetch_row(A, i, A.shape[1])
        prefetch_row_for_write(A, i, A.shape[1])
        for l in range(A.shape[1]):
            total += A[i, l]
    return total


@given(st.integers(1, 9), st.integers(1, 70), st.sampled_from([np.float64, np.float32]))
def test_prefetch_is_only_a_hint(r, k, dtype):
    A = np.random.default_rng(r * 100 + k).random((r, k)).astype(dtype)
    before = A.copy()
    assert np.isclose(_touch_all_rows(A), float(before.astype(np.float64).sum()), rtol=1e-5)
    np.testing.assert_array_equal(A, before)


@given(
    st.lists(st.integers(0, 40), min_size=1, max_size=3),
    st.sampled_from([np.float64, np.float32, np.uint8]),
)
def test_zeros_line_aligned(shape, dtype):
    A = zeros_line_aligned(tuple(shape), dtype)
    assert (
        A.shape == tuple(shape) and A.dtype == dtype and A.flags.c_contiguous and A.flags.writeable
    )
    assert A.size == 0 or A.ctypes.data % LINE == 0  # (numpy may move an empty view's pointer)
    assert not A.any()
    A[...] = 1  # the whole view is usable memory
    assert A.sum() == A.size


@pytest.mark.parametrize("loops", [False, True])
def test_kernels_with_prefetching_on_a_table_larger_than_l2(loops):
    # Only tables over MIN_BYTES are prefetched: check that path against the oracles too.
    rng = np.random.default_rng(0)
    n, m, k = 40, 20_000, 8  # k = 8: whole float32 vectors, no padding
    assert m * k * 4 > MIN_BYTES
    kp, width = _layout(k, np.float32, loops)
    assert kp == k
    Xd = rng.random((n, m)) < 0.002
    X = check_binary_matrix(Xd)
    W, Ht = rng.random((n, k)).astype(np.float32), rng.random((m, k)).astype(np.float32)
    y, YHt, sq = np.ones(X.nnz, np.float32), np.empty((n, k), np.float32), np.empty((Y_PARTS, 2))
    Cd, cindptr, cindices = _cells(rng, Xd, X, 0.001)
    cy = np.empty(len(cindices), np.float32)
    y_ref, cy_ref, YHt_ref, sq_ref = ref.project_spmm(
        Xd, W.astype(float), Ht.astype(float), 1.0, float(k), True, y.astype(float), Cd
    )
    run_both(
        project_spmm(width),
        Sparse(X.indptr, X.indices),
        y,
        Factors(W, Ht),
        YSums(YHt, sq),
        _unknown(cindptr, cindices, cy),
        1.0,
        float(k),
        True,
        width,
    )
    np.testing.assert_allclose(cy, cy_ref, rtol=1e-5)
    np.testing.assert_allclose(y, y_ref, rtol=1e-5)
    np.testing.assert_allclose(YHt, YHt_ref, rtol=1e-4)
    np.testing.assert_allclose(sq, _by_parts(sq_ref, X.indptr, cindptr), rtol=1e-4)
    G = _gram(rng, k).astype(np.float32)
    gram, scatter, total = (
        np.empty((2, k, k)),
        np.empty((2, m, k), np.float32),
        np.empty((m, k), np.float32),
    )
    expected = ref.mu_update(W.astype(float), YHt.astype(float), W.astype(float) @ G, 0.0, 1e-12)
    run_both(update_rows, W, YHt, G, 0.0, 1e-12, gram, None)
    cells = _unknown(cindptr, cindices, cy)
    run_both(scatter_rows(width), Sparse(X.indptr, X.indices), y, cells, W, scatter, total, width)
    np.testing.assert_allclose(W, expected, rtol=1e-4)
    np.testing.assert_allclose(
        total,
        ref.gather_spmm(Xd, y.astype(float), expected, Cd, cy.astype(float)),
        rtol=1e-4,
        atol=1e-4,
    )


@given(
    binary_matrices(),
    st.sampled_from(all_width_ks),  # (k is a run-time value here: every k, one compilation)
    st.booleans(),
    st.integers(0, 2**31),
    dtypes,
    st.integers(0, 9),
    shares,
)
def test_small_kernels(Xd, k, project, seed, dtype, pad, share):
    """The plain-loop kernels of small problems against the same oracles, on padded rows."""
    rng = np.random.default_rng(seed)
    X = check_binary_matrix(Xd)
    n, m = Xd.shape
    W, Ht = rng.random((n, k)).astype(dtype), rng.random((m, k)).astype(dtype)
    y = (rng.random(X.nnz) * 3).astype(dtype)
    Cd, cindptr, cindices = _cells(rng, Xd, X, share)
    cy = _values(cindices, np.nan, dtype)
    tol = 1e-12 if dtype == np.float64 else 1e-4
    YHt, sq = np.full((n, k + pad), np.nan, dtype), np.full((n, 2), np.nan)
    YHt[:, k:] = 0
    lower, upper = 1.0, float(k) if seed % 2 else np.inf
    y_ref, cy_ref, YHt_ref, sq_ref = ref.project_spmm(
        Xd, W.astype(float), Ht.astype(float), lower, upper, project, y.astype(float), Cd
    )
    project_spmm_small(
        Sparse(X.indptr, X.indices),
        y,
        Factors(_padded(W, k + pad), _padded(Ht, k + pad)),
        YSums(YHt, sq),
        _unknown(cindptr, cindices, cy),
        k,
        lower,
        upper,
        project,
    )
    np.testing.assert_allclose(y, y_ref, rtol=tol)
    if cy is not None:
        np.testing.assert_allclose(cy, cy_ref, rtol=tol)
    np.testing.assert_allclose(YHt[:, :k], YHt_ref, rtol=tol, atol=tol)
    np.testing.assert_allclose(sq, sq_ref, rtol=tol, atol=tol)
    out = np.full((m, k + pad), np.nan, dtype)
    out[:, k:] = 0
    cells = _unknown(cindptr, cindices, cy)
    scatter_rows_small(Sparse(X.indptr, X.indices), y, cells, _padded(W, k + pad), k, out)
    cy_dense = None if cy is None else cy.astype(float)
    expected = ref.gather_spmm(Xd, y.astype(float), W.astype(float), Cd, cy_dense)
    np.testing.assert_allclose(out[:, :k], expected, rtol=tol, atol=tol)
    assert not out[:, k:].any()
    lam = [0.0, 0.5, 1e4][seed % 3]
    numer, G = rng.random((n, k)).astype(dtype), _gram(rng, k).astype(dtype)
    expected = ref.mu_update(W.astype(float), numer.astype(float), W.astype(float) @ G, lam, 1e-12)
    gram = np.full((k, k), np.nan)
    Wp = _padded(W, k + pad)
    update_rows_small(Wp, _padded(numer, k + pad), G, lam, 1e-12, gram)
    np.testing.assert_allclose(Wp[:, :k], expected, rtol=tol)
    assert not Wp[:, k:].any()
    np.testing.assert_allclose(gram, expected.T @ expected, rtol=tol, atol=tol)


@given(st.integers(1, 9), ks, dtypes, st.integers(0, 2**31), st.integers(0, 9))
def test_add_unobserved(n, k, dtype, seed, pad):
    rng = np.random.default_rng(seed)
    F, G = rng.random((n, k)).astype(dtype), _gram(rng, k).astype(dtype)
    out = _padded(rng.random((n, k)).astype(dtype), k + pad)
    # observed parts above and below F G: the difference is clamped at 0 (rounding)
    part = _padded((rng.random((n, k)) * 2 * (F.astype(float) @ G)).astype(dtype), k + pad)
    expected = out[:, :k].astype(float) + np.maximum(
        F.astype(float) @ G.astype(float) - part[:, :k], 0
    )
    run_both(add_unobserved, out, part, _padded(F, k + pad), G, k)
    tol = 1e-12 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(out[:, :k], expected, rtol=tol, atol=tol)
    assert not out[:, k:].any()


@given(st.integers(1, 12), ks, st.integers(1, 4), dtypes, st.integers(0, 2**31), st.integers(0, 9))
def test_cross_gram(n, k, nb, dtype, seed, pad):
    rng = np.random.default_rng(seed)
    A, B = rng.random((n, k)).astype(dtype), rng.random((n, k)).astype(dtype)
    blocks = np.full((min(nb, n), k, k), np.nan)
    got = run_both(cross_gram, _padded(A, k + pad), _padded(B, k + pad), k, blocks)
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(got, A.astype(float).T @ B.astype(float), rtol=tol, atol=tol)
    np.testing.assert_allclose(got, blocks.sum(axis=0), rtol=1e-15, atol=0)


@given(
    st.integers(1, 9),
    ks,
    dtypes,
    st.sampled_from([0.0, 0.5, 1e4]),
    st.integers(0, 2**31),
    st.integers(0, 9),
)
def test_update_rows_raises_entries_to_the_subnormal_floor(r, k, dtype, lam, seed, pad):
    """An entry the update takes into (0, √tiny) is raised to √tiny (subnormal arithmetic is
    10-100× slower), in the tiled and the plain kernel alike; zeros stay zero and no subnormal
    number is left."""
    rng = np.random.default_rng(seed)
    floor = float(np.sqrt(np.finfo(dtype).tiny))
    # Entries around the floor, some of which the update takes below it, beside ordinary ones
    # and zeros.
    F = (floor * rng.uniform(0.5, 2e3, (r, k))).astype(dtype)
    F[rng.random((r, k)) < 0.4] = rng.random() + 0.1
    F[rng.random((r, k)) < 0.1] = 0.0
    numer = rng.uniform(1e-3, 1.0, (r, k)).astype(dtype)
    G = _gram(rng, k).astype(dtype)
    expected = ref.mu_update(
        F.astype(float), numer.astype(float), F.astype(float) @ G, lam, 1e-12, floor
    )
    for update in ("tiled", "plain"):
        Fp = _padded(F, k + pad)
        if update == "tiled":
            run_both(
                update_rows, Fp, _padded(numer, k + pad), G, lam, 1e-12, np.empty((1, k, k)), None
            )
        else:
            update_rows_small(Fp, _padded(numer, k + pad), G, lam, 1e-12, np.empty((k, k)))
        got = Fp[:, :k]
        assert not ((got > 0) & (got < floor)).any()
        np.testing.assert_array_equal(got[F == 0], 0.0)
        tol = 1e-12 if dtype == np.float64 else 1e-4
        np.testing.assert_allclose(got, expected, rtol=tol, atol=0)
