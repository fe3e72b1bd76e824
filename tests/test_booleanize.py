"""Booleanization, Boolean error and Boolean product against dense oracles."""

import numpy as np
import pytest
import reference as ref
from conftest import binary_matrices, run_both
from hypothesis import given, settings
from hypothesis import strategies as st

import banmf.engine.booleanize as bz
from banmf import balance, boolean_error, boolean_product, booleanize
from banmf._kernels.boolean import pair_cover_bound, pair_histograms
from banmf.data.masks import unique_rows


@given(
    binary_matrices(max_n=20, max_m=20),
    st.sampled_from([1, 2, 5, 63, 64, 65, 130]),
    st.floats(0.0, 1.0),
    st.integers(0, 2**31),
)
def test_boolean_error_matches_dense(Xd, k, p, seed):
    rng = np.random.default_rng(seed)
    W = rng.random((Xd.shape[0], k)) < p / 2
    H = rng.random((k, Xd.shape[1])) < p / 2
    assert boolean_error(Xd, W, H) == ref.boolean_error(Xd, W, H)


@given(st.integers(0, 60), st.integers(1, 3), st.integers(1, 4), st.integers(0, 2**31))
def test_unique_rows_matches_numpy(r, words, values, seed):
    A = np.random.default_rng(seed).integers(0, values, size=(r, words)).astype(np.uint64)
    A[:, -1] <<= np.uint64(63)  # high bits too
    uniq, inverse, counts = unique_rows(A)
    np.testing.assert_array_equal(uniq[inverse], A)
    assert counts.sum() == r and np.array_equal(np.bincount(inverse, minlength=len(uniq)), counts)
    if r:
        expected = np.unique(A, axis=0)
        assert len(uniq) == len(expected)
        np.testing.assert_array_equal(np.unique(uniq, axis=0), expected)


@given(
    st.integers(0, 60),
    st.sampled_from([1, 4, 1024, 2**20, 2**62]),
    st.sampled_from([np.uint64, np.int64]),
    st.integers(0, 2**31),
)
def test_unique_rows_of_one_word_is_numpys_unique(r, values, dtype, seed):
    # Small codes are counted, large ones sorted: numpy's result exactly, in its order.
    A = np.random.default_rng(seed).integers(0, values, size=(r, 1)).astype(dtype)
    uniq, inverse, counts = unique_rows(A)
    expected = np.unique(A[:, 0], return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(uniq, expected[0][:, None], strict=True)
    np.testing.assert_array_equal(inverse, expected[1].astype(np.intp))
    np.testing.assert_array_equal(counts, expected[2])


@given(
    st.integers(1, 10), st.integers(1, 10), st.sampled_from([1, 3, 64, 70]), st.integers(0, 2**31)
)
def test_boolean_product_matches_dense(n, m, k, seed):
    rng = np.random.default_rng(seed)
    W, H = rng.random((n, k)) < 0.2, rng.random((k, m)) < 0.2
    P = boolean_product(W, H)
    assert P.shape == (n, m)
    np.testing.assert_array_equal(P.toarray(), ref.boolean_product(W, H))


@given(
    binary_matrices(max_n=10, max_m=10),
    st.sampled_from([1, 2, 3]),
    st.sampled_from([1, 2, 7, 12]),
    st.booleans(),
    st.integers(0, 2**31),
)
def test_booleanize_equals_dense_full_grid(Xd, k, P, normalize, seed):
    rng = np.random.default_rng(seed)
    W = rng.random((Xd.shape[0], k)) * (rng.random((Xd.shape[0], k)) < 0.7)
    H = rng.random((k, Xd.shape[1])) * 3 * (rng.random((k, Xd.shape[1])) < 0.7)
    Wb, Hb, dw, dh, err, grid = ref.booleanize(Xd, W, H, P, normalize)
    evaluated = {}
    for search, small in (("pruned", True), ("pruned", False), ("exhaustive", True)):
        # The pruned search in one kernel (small factors) and in Python (any size).
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(bz, "SMALL_COVER", bz.SMALL_COVER if small else -1)
            res = booleanize(Xd, W, H, P, normalize="balance" if normalize else None, search=search)
        if search == "pruned":
            evaluated[small] = res.info["n_evaluated"]
        assert res.error == err == ref.boolean_error(Xd, res.W, res.H)
        assert (res.info["threshold_w"], res.info["threshold_h"]) == pytest.approx((dw, dh))
        np.testing.assert_array_equal(res.W, Wb)
        np.testing.assert_array_equal(res.H, Hb)
        assert res.W.dtype == bool and res.H.dtype == bool
    np.testing.assert_array_equal(res.info["error_grid"], grid)
    assert evaluated[True] == evaluated[False]  # the two count the same coverages
    # the grid optimum is no worse than any grid point
    assert err == grid.min()


@given(
    binary_matrices(max_n=10, max_m=10),
    st.sampled_from([1, 2, 3]),
    st.sampled_from([1, 2, 7, 12]),
    st.booleans(),
    st.integers(0, 2**31),
)
def test_coordinate_search_is_a_coordinatewise_optimum_of_the_grid(Xd, k, P, normalize, seed):
    rng = np.random.default_rng(seed)
    W = rng.random((Xd.shape[0], k)) * (rng.random((Xd.shape[0], k)) < 0.7)
    H = rng.random((k, Xd.shape[1])) * 3 * (rng.random((k, Xd.shape[1])) < 0.7)
    norm = "balance" if normalize else None
    grid = booleanize(Xd, W, H, P, normalize=norm, search="exhaustive").info["error_grid"]
    res = booleanize(Xd, W, H, P, normalize=norm, search="coordinate")
    assert res.error == ref.boolean_error(Xd, res.W, res.H) >= grid.min()
    s, t = _grid_index(res, W, H, P, norm)
    assert grid[s, t] == res.error
    assert grid[:, t].min() == res.error and grid[s, :].min() == res.error


def _grid_index(res, W, H, P, norm):
    Ws, Hs = balance(W, H) if norm else (W, H)
    s = int(np.argmin(np.abs(np.linspace(0, Ws.max(), P) - res.info["threshold_w"])))
    t = int(np.argmin(np.abs(np.linspace(0, Hs.max(), P) - res.info["threshold_h"])))
    return s, t


def test_pruning_evaluates_few_points():
    rng = np.random.default_rng(0)
    W0, H0 = rng.random((200, 4)) < 0.3, rng.random((4, 150)) < 0.3
    Xd = ref.boolean_product(W0, H0)
    W = W0 * (0.8 + 0.4 * rng.random(W0.shape)) + 0.05 * rng.random(W0.shape)
    H = H0 * (0.8 + 0.4 * rng.random(H0.shape)) + 0.05 * rng.random(H0.shape)
    res = booleanize(Xd, W, H)
    assert res.error == 0
    assert res.info["n_evaluated"] < 100 * 100 // 10


def test_balance_keeps_product_and_equalises_maxima():
    rng = np.random.default_rng(1)
    W, H = rng.random((6, 3)) * [1, 10, 0], rng.random((3, 5)) * [[5], [0.1], [2]]
    Wb, Hb = balance(W, H)
    np.testing.assert_allclose(Wb @ Hb, W @ H)
    np.testing.assert_allclose(Wb.max(axis=0)[:2], Hb.max(axis=1)[:2])
    np.testing.assert_array_equal(Wb[:, 2], W[:, 2])  # a zero factor is left alone


def test_booleanize_all_zero_inputs():
    res = booleanize(np.zeros((4, 3)), np.zeros((4, 2)), np.zeros((2, 3)))
    assert res.error == 0 and not res.W.any() and not res.H.any()
    res = booleanize(np.ones((4, 3)), np.zeros((4, 2)), np.zeros((2, 3)))
    assert res.error == 12


def test_factor_without_zeros_can_be_kept_whole():
    # all-ones X, k = 1, strictly positive factors: only δ below every entry is exact
    rng = np.random.default_rng(0)
    res = booleanize(np.ones((5, 4)), 1 + rng.random((5, 1)), 1 + rng.random((1, 4)))
    assert res.error == 0


def _ranks(rng, n, k, P, dtype=np.uint8):
    """Grid ranks 0..P, a third of them 0 (factors absent from the row), of
    :func:`banmf.engine.booleanize.grid_ranks`' type for a grid of P ≤ 255 points or more."""
    ranks = rng.integers(0, P + 1, size=(n, k)).astype(dtype)
    ranks[rng.random((n, k)) < 1 / 3] = 0
    return ranks


def _histogram_blocks(ranks, P, n_blocks):
    """Zeros for :func:`pair_histograms` to count ``n_blocks`` row blocks into."""
    return np.zeros((n_blocks, P + 1, ranks.shape[1], ranks.shape[1]), dtype=np.int64)


def _scratch(*shape):
    """A kernel's scratch, given by the caller."""
    return np.zeros(shape, dtype=np.int64)


@given(
    st.integers(0, 40),
    st.sampled_from([1, 2, 5, 33]),
    st.integers(1, 9),
    st.integers(0, 2**31),
    st.sampled_from([np.uint8, np.int32]),
)
def test_pair_counts_match_numpy(n, k, P, seed, dtype):
    ranks = _ranks(np.random.default_rng(seed), n, k, P, dtype)
    ranks[: n // 4] = 0  # empty rows
    want = np.array(
        [
            [[np.sum((ranks[:, a] > s) & (ranks[:, b] > s)) for b in range(k)] for a in range(k)]
            for s in range(P)
        ]
    ).reshape(P, k, k)
    np.testing.assert_array_equal(bz.pair_counts(ranks, P), want)
    # Any split into row blocks: the same sums (serial and parallel alike).
    blocks = _histogram_blocks(ranks, P, max(1, min(3, n)))
    run_both(pair_histograms, ranks, blocks, *_scratch(2, len(blocks), k))
    whole = _histogram_blocks(ranks, P, 1)
    pair_histograms.serial(ranks, whole, *_scratch(2, 1, k))
    np.testing.assert_array_equal(blocks.sum(axis=0), whole[0])


@given(
    st.integers(0, 12),
    st.integers(0, 12),
    st.sampled_from([1, 2, 4, 9]),
    st.integers(1, 6),
    st.integers(0, 2**31),
)
def test_pair_cover_bound_is_a_lower_bound_above_the_rectangle_and_bonferroni(n, m, k, P, seed):
    rng = np.random.default_rng(seed)
    u, vt = _ranks(rng, n, k, P), _ranks(rng, m, k, P)
    A, B = bz.pair_counts(u, P), bz.pair_counts(vt, P)
    bound = np.zeros((P, P), dtype=np.int64)
    run_both(pair_cover_bound, A, B, bound, *_scratch(2, P, k))
    np.testing.assert_array_equal(bz.pair_bound(A, B), bound)
    for s in range(P):
        for t in range(P):
            cover = int(ref.boolean_product(u > s, (vt > t).T).sum())
            sizes = np.diag(A[s]) * np.diag(B[t])
            overlaps = np.triu(A[s] * B[t], 1).sum()
            assert max(sizes.max(initial=0), sizes.sum() - overlaps) <= bound[s, t] <= cover


@settings(max_examples=60)
@given(
    binary_matrices(max_n=10, max_m=10),
    st.sampled_from([1, 2, 4]),
    st.sampled_from([1, 2, 7, 12]),
    st.sampled_from([0.0, 0.2, 0.6]),
    st.integers(0, 2**31),
)
def test_pruned_search_with_the_pair_bound_equals_the_exhaustive_search(Xd, k, P, hidden, seed):
    """Any lower bound gives the exhaustive search's point (the first of the lowest error), with
    unknown cells too: the bound holds for the observed coverage."""
    rng = np.random.default_rng(seed)
    n, m = Xd.shape
    W = rng.random((n, k)) * (rng.random((n, k)) < 0.7)
    H = rng.random((k, m)) * 3 * (rng.random((k, m)) < 0.7)
    W[: n // 3], H[:, : m // 3] = 0, 0  # empty rows and columns of the factors
    unknown = rng.random(Xd.shape) < hidden
    Ws, Hs = balance(W, H)
    grid = ref.grid_errors(Xd, Ws, Hs, P, ~unknown)
    s, t = divmod(int(np.argmin(grid)), P)
    for small in (True, False):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(bz, "SMALL_COVER", bz.SMALL_COVER if small else -1)
            res = booleanize(Xd, W, H, P, missing=unknown)
        assert res.error == grid.min() == ref.boolean_error(Xd, res.W, res.H, ~unknown)
        np.testing.assert_array_equal(res.W, Ws > np.linspace(0, Ws.max(), P)[s])
        np.testing.assert_array_equal(res.H, Hs > np.linspace(0, Hs.max(), P)[t])


@pytest.mark.parametrize("n_points", [2, 100, 255, 256, 400])
def test_grid_ranks_fit_their_type(n_points):
    """Ranks 0..n_points: uint8 up to 255 points (the top rank, above every point, too),
    int32 beyond; the same values either way."""
    points = bz.grid_points(1.0, n_points)
    F = np.array([[-0.5, 0.0, 1e-9, 0.5, 1.0, 2.0]])
    ranks = bz.grid_ranks(F, points)
    assert ranks.dtype == (np.uint8 if n_points <= 255 else np.int32)
    np.testing.assert_array_equal(ranks, np.searchsorted(points, F, side="left"))
    assert ranks.max() == n_points


def test_the_search_on_a_grid_of_int32_ranks_equals_the_dense_one():
    """Past 255 points the ranks are int32: the same search, the dense reference's point."""
    rng = np.random.default_rng(7)
    Xd = rng.random((6, 5)) < 0.5
    W, H = rng.random((6, 2)), 3 * rng.random((2, 5))
    Wb, Hb, dw, dh, err, _ = ref.booleanize(Xd, W, H, 300, True)
    res = booleanize(Xd, W, H, 300)
    assert res.error == err
    np.testing.assert_array_equal(res.W, Wb)
    np.testing.assert_array_equal(res.H, Hb)
