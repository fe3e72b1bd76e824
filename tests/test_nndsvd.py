"""The NNDSVD start (banmf.engine.nndsvd): ARPACK's SVD on small data, the randomized one on
large, and the kernel of the randomized SVD's passes, against dense numpy."""

import numpy as np
import pytest
import reference as ref
import threadpoolctl
from conftest import binary_matrices, run_both
from hypothesis import given
from hypothesis import strategies as st

import banmf.engine.nndsvd as nd
from banmf import BANMF
from banmf._kernels.svd import fill_at_most, mask_times, rows_times, scaled_column, signed_parts
from banmf.data.masks import transpose_mask
from banmf.data.validation import check_binary_matrix
from banmf.datasets import make_sparse_degrees
from banmf.io import Dataset
from banmf.runtime.threads import thread_budget


def _data(X) -> Dataset:
    return Dataset.trusted(check_binary_matrix(X))


@given(binary_matrices(), st.integers(1, 5), st.integers(0, 2**32 - 1))
def test_mask_times_equals_the_dense_product(X, l, seed):
    B = np.random.default_rng(seed).standard_normal((X.shape[1], l))
    C = check_binary_matrix(X)
    out = np.full((X.shape[0], l), np.nan)
    run_both(mask_times, C.indptr, C.indices, B, out)
    np.testing.assert_allclose(out, ref.mask_times(X, B), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("b_type", [np.float64, np.float32])
def test_mask_times_prefetching_a_block_past_l2_sums_each_row_in_order(b_type):
    """A block past L2 (rows asked for ahead of their nonzeros, up to the last nonzero, with
    empty rows between): each row the float64 sum of its rows of B in stored order."""
    from banmf._kernels.prefetch import MIN_BYTES

    rng = np.random.default_rng(4)
    X = make_sparse_degrees(300, 9000, 3000, rows="powerlaw", random_state=5).tolil()
    X[np.arange(0, 300, 7)] = 0
    C = check_binary_matrix(X.tocsr())
    assert (np.diff(C.indptr) == 0).sum() >= 43
    B = rng.standard_normal((9000, 20)).astype(b_type)
    assert B.nbytes > MIN_BYTES
    out = np.full((300, 20), np.nan)
    run_both(mask_times, C.indptr, C.indices, B, out)
    want = np.zeros((300, 20))
    for i in range(300):
        for j in C.indices[C.indptr[i] : C.indptr[i + 1]]:
            want[i] += B[j]
    np.testing.assert_array_equal(out, want)


@given(
    binary_matrices(),
    st.integers(1, 5),
    st.integers(0, 2**32 - 1),
    st.sampled_from([(np.float32, np.float32), (np.float32, np.float64)]),
)
def test_mask_times_in_float32(X, l, seed, dtypes):
    """A float32 block read as such and summed in float64: the dense product of its values,
    rounded once where the output is float32 (the power iterations' two products)."""
    b_type, out_type = dtypes
    B = np.random.default_rng(seed).standard_normal((X.shape[1], l)).astype(b_type)
    C = check_binary_matrix(X)
    out = np.full((X.shape[0], l), np.nan, dtype=out_type)
    run_both(mask_times, C.indptr, C.indices, B, out)
    want = ref.mask_times(X, B.astype(np.float64))
    tol = 1e-6 if out_type == np.float32 else 1e-12
    np.testing.assert_allclose(out, want.astype(out_type), rtol=tol, atol=tol)
    # mask_product: "single" rounds B and the product; a float32 B alone is read as such
    np.testing.assert_array_equal(nd.mask_product(C, B, single=out_type == np.float32), out)


@given(st.integers(0, 12), st.integers(1, 6), st.integers(0, 4), st.integers(0, 2**32 - 1))
def test_rows_times_equals_the_dense_product(n, l, w, seed):
    rng = np.random.default_rng(seed)
    Y, M = rng.standard_normal((n, l)), rng.standard_normal((l, w))
    out = np.full((n, w), np.nan)
    run_both(rows_times, Y, M, out)
    np.testing.assert_allclose(out, ref.rows_times(Y, M), rtol=1e-12, atol=1e-12)


def _check_triplets(X, U, S, Vt, r):
    """U S Vt are r singular triplets of X, the largest: σ descending, equal to the dense
    SVD's where above 10⁻³ σ₁ (the basis is built from XᵀX's products: σ⁴ to rounding), and
    for each σ not at rounding level (there the SVD returns 0 on X's longer side) orthonormal
    vectors with X v = σ u and Xᵀ u = σ v."""
    X = X.astype(float)
    dense = np.linalg.svd(X, compute_uv=False)[:r]
    top = max(dense[0], 1.0)
    assert U.shape == (X.shape[0], r) and S.shape == (r,) and Vt.shape == (r, X.shape[1])
    assert (np.diff(S) <= 0).all()
    big = dense > 1e-3 * top
    np.testing.assert_allclose(S[big], dense[big], rtol=1e-9)
    assert (S[~big] <= 1e-3 * top).all()
    kept = S > 1e-6 * top
    np.testing.assert_allclose(Vt[kept] @ Vt[kept].T, np.eye(kept.sum()), atol=1e-8)
    np.testing.assert_allclose(X @ Vt[kept].T, U[:, kept] * S[kept], atol=1e-8 * top)
    np.testing.assert_allclose(X.T @ U[:, kept], Vt[kept].T * S[kept], atol=1e-8 * top)
    np.testing.assert_allclose(U[:, kept].T @ U[:, kept], np.eye(kept.sum()), atol=1e-8)


def _columns(n: int, k: int, seed: int) -> np.ndarray:
    """n × k normal values with exact zeros, negative zeros and NaN among them."""
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((n, k))
    specials = np.array([0.0, -0.0, np.nan, 1e-300, -1e-300])
    where = rng.random((n, k)) < 0.2
    U[where] = rng.choice(specials, size=int(where.sum()))
    return U


@given(st.integers(0, 40), st.integers(1, 4), st.integers(0, 2**32 - 1), st.booleans())
def test_signed_parts_are_numpys(n, k, seed, fortran):
    """Equal values (NaN included; zeros +0.0, where numpy's sign varies with its code path),
    on C- and F-ordered blocks (ARPACK's U is either), for every column."""
    U = _columns(n, k, seed)
    U = np.asfortranarray(U) if fortran else U
    for j in range(k):
        xp, xn = np.full(n, 7.0), np.full(n, 7.0)
        run_both(signed_parts, U, j, xp, xn)
        np.testing.assert_array_equal(xp, np.maximum(U[:, j], 0), strict=True)
        np.testing.assert_array_equal(xn, np.maximum(-U[:, j], 0), strict=True)
        assert not np.signbit(xp[xp == 0]).any() and not np.signbit(xn[xn == 0]).any()


@given(st.integers(0, 40), st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_scaled_column_and_fill_are_numpys(n, k, seed):
    rng = np.random.default_rng(seed)
    part = np.abs(_columns(n, 1, seed)[:, 0])
    scale, norm = rng.random() * 10, rng.random() + 0.1
    F = rng.random((n, k))
    l = int(rng.integers(k))
    want = F.copy()
    want[:, l] = scale * part / norm
    run_both(scaled_column, part, scale, norm, F, l)
    np.testing.assert_array_equal(F, want, strict=True)
    cut, fill = float(rng.random()), 0.125  # (F may hold NaN: they stay)
    want[want <= cut] = fill
    run_both(fill_at_most, F, cut, fill)
    np.testing.assert_array_equal(F, want, strict=True)


def test_nndsvda_does_not_depend_on_blas_threads():
    """ARPACK's vectors and numpy's norms of long vectors are summed in parts by BLAS's
    threads: the start is computed with one BLAS thread whatever the library has."""
    X = make_sparse_degrees(40_000, 3000, 200_000, rows="powerlaw", cols="powerlaw", random_state=0)
    data = _data(X)
    results = []
    for threads in (1, 2):
        with threadpoolctl.threadpool_limits(threads, user_api="blas"):
            results.append(nd.nndsvda(data, 6))
            after = threadpoolctl.threadpool_info()
        # the caller's limit is put back
        assert all(p["num_threads"] == threads for p in after if p["user_api"] == "blas")
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


@given(binary_matrices(min_n=2, min_m=2), st.integers(1, 12), st.integers(0, 3))
def test_randomized_svd_equals_the_dense_svd(X, k, q):
    """With a sketch as wide as the shorter side (oversamples ≥ min(n, m)) the subspace is
    the whole space: the triplets are exact to rounding, for any k up to min(n, m) and on
    rows or columns that are empty (σ = 0)."""
    r = min(k, min(X.shape))
    C = check_binary_matrix(X)
    U, S, Vt = nd.randomized_svd(C, r, oversamples=12, power_iterations=q, seed=q)
    _check_triplets(X, U, S, Vt, r)
    # The transpose given or built: the same bits.
    U2, S2, Vt2 = nd.randomized_svd(
        C, r, transpose_mask(C), oversamples=12, power_iterations=q, seed=q
    )
    for a, b in ((U, U2), (S, S2), (Vt, Vt2)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("shape", [(3000, 400), (400, 3000)])
@pytest.mark.parametrize("k", [1, 10])
def test_randomized_svd_is_near_arpack_on_skewed_data(shape, k):
    """On power-law degrees the default sketch, k + 10 columns and four passes of XᵀX, finds
    the leading singular values to a few per cent (the first ones closest)."""
    X = make_sparse_degrees(*shape, 30_000, rows="powerlaw", cols="powerlaw", random_state=3)
    X = check_binary_matrix(X)
    U, S, Vt = nd.randomized_svd(X, k)
    dense = np.linalg.svd(X.toarray().astype(float), compute_uv=False)[:k]
    np.testing.assert_allclose(S, dense, rtol=0.05)
    np.testing.assert_allclose(S[:2], dense[:2], rtol=1e-6)
    np.testing.assert_allclose(X @ Vt.T, U * S, atol=0.1 * S[0])  # X v ≈ σ u


class _Blocks:
    """:class:`banmf.engine.protocol.Side` of X's rows split into blocks, as the Dask backend
    keeps them: a block is a list of the blocks' arrays, the Gram their sum."""

    def __init__(self, X, offsets):
        self.cuts = list(zip(offsets[:-1], offsets[1:], strict=True))
        self.X = [X[a:b] for a, b in self.cuts]
        self.Xt = [transpose_mask(part) for part in self.X]

    def put(self, Y):
        return [nd.Here.put(Y[a:b]) for a, b in self.cuts]

    def gram(self, Y):
        return sum(nd.Here.gram(part) for part in Y)

    def times(self, Y, M):
        return [nd.Here.times(part, M) for part in Y]

    def x_times(self, C, single=False):
        return [nd.mask_product(part, C, single) for part in self.X]

    def xt_times(self, Y, single=False):
        """Summed in float64 and then rounded, as the backend's (its blocks' partial sums)."""
        total = sum(
            nd.mask_product(Xt, part.astype(np.float32) if single else part)
            for Xt, part in zip(self.Xt, Y, strict=True)
        )
        return total.astype(np.float32) if single else total


@pytest.mark.parametrize("shape", [(3000, 400), (400, 3000)])
@pytest.mark.parametrize("k", [1, 10])
def test_subspace_svd_over_row_blocks_agrees_with_one_block(shape, k):
    """The Dask backend's arrangement (X's rows in blocks, one of them empty: the products
    and the row side's Gram summed over them, the column side whole) gives the one-machine
    triplets to within 10⁻⁸ up to each pair's sign, which NNDSVD does not see (it keeps the
    same parts of x, y as of -x, -y), on X and on its transpose (the sketch on the blocks'
    side). (The second orthonormalisation's Gram is the identity to rounding, so its
    eigenvectors, the basis's rotation, follow the rounding: only the span and the final
    triplets agree. The power iterations round their first products to float32 after sums
    whose last bits differ between one block and several, so an entry may round to the next
    float32 and the span move by that much: up to 5e-10 in σ and 8e-9 in the vectors here.)"""
    X = check_binary_matrix(
        make_sparse_degrees(*shape, 30_000, rows="powerlaw", cols="powerlaw", random_state=5)
    )
    n = shape[0]
    rows = _Blocks(X, [0, n // 7, n // 7, n // 2, n])
    U, S, V = nd.subspace_svd(shape, k, rows, nd.Here, rows.x_times, rows.xt_times)
    eU, eS, eVt = nd.randomized_svd(X, k)
    np.testing.assert_allclose(S, eS, rtol=1e-8)
    signs = np.sign(np.sum(V.T * eVt, axis=1))
    np.testing.assert_allclose(V.T * signs[:, None], eVt, atol=1e-7)
    np.testing.assert_allclose(np.concatenate(U) * signs, eU, atol=1e-7)


def test_randomized_svd_is_the_same_on_any_number_of_threads(monkeypatch):
    from banmf.runtime import threads as _threads

    monkeypatch.setattr(_threads, "PARALLEL_MIN_WORK", 0)  # the passes parallel even here
    X = check_binary_matrix(
        make_sparse_degrees(2000, 300, 20_000, rows="powerlaw", cols="powerlaw", random_state=0)
    )
    results = []
    for threads in (1, 2):
        with thread_budget(threads):
            results.append(nd.randomized_svd(X, 6))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_nndsvda_switches_to_the_randomized_svd_at_its_size(monkeypatch):
    """Below :data:`RANDOMIZED_MIN_NNZ` the factors are ARPACK's (the dense reference's), from
    it on the randomized SVD's; the switch lies above the 10⁶ nonzeros of the documented
    results, which keep ARPACK's factors."""
    assert nd.RANDOMIZED_MIN_NNZ > 10**6
    rng = np.random.default_rng(1)
    X = np.zeros((40, 30), dtype=int)
    for size, (r, c) in zip(range(8, 0, -1), rng.integers(0, 20, size=(8, 2))):
        X[r : r + size + 3, c : c + size] = 1
    data, nnz = _data(X), int(X.sum())
    calls = []
    randomized = nd.randomized_svd
    monkeypatch.setattr(
        nd, "randomized_svd", lambda *a, **kw: calls.append(1) or randomized(*a, **kw)
    )
    monkeypatch.setattr(nd, "RANDOMIZED_MIN_NNZ", nnz + 1)
    W, Ht = nd.nndsvda(data, 3)
    assert not calls
    eW, eHt = ref.nndsvda(X, 3)
    np.testing.assert_allclose(W, eW, atol=1e-8)
    monkeypatch.setattr(nd, "RANDOMIZED_MIN_NNZ", nnz)
    W, Ht = nd.nndsvda(data, 3)
    assert calls
    # The blocks' singular values are well apart: the randomized factors are the same.
    np.testing.assert_allclose(W, eW, atol=1e-6)
    np.testing.assert_allclose(Ht, eHt, atol=1e-6)


@pytest.mark.parametrize("k", [1, 3, 7])
def test_nndsvda_equals_the_dense_reference(k):
    """Matrices with well separated singular values (planted blocks of different sizes)."""
    rng = np.random.default_rng(k)
    X = np.zeros((40, 30), dtype=int)
    for size, (r, c) in zip(range(8, 0, -1), rng.integers(0, 20, size=(8, 2))):
        X[r : r + size + 3, c : c + size] = 1
    W, Ht = nd.nndsvda(_data(X), k)
    eW, eHt = ref.nndsvda(X, k)
    np.testing.assert_allclose(W, eW, atol=1e-8)
    np.testing.assert_allclose(Ht, eHt, atol=1e-8)


@pytest.mark.parametrize("threshold", [0, 10**12])
def test_nndsvda_falls_back_where_no_svd_exists(threshold, monkeypatch):
    """On either SVD."""
    monkeypatch.setattr(nd, "RANDOMIZED_MIN_NNZ", threshold)
    assert nd.nndsvda(_data(np.zeros((5, 4), dtype=int)), 2) is None
    assert nd.nndsvda(_data(np.ones((1, 4), dtype=int)), 2) is None
    # k past min(n, m) - 1: the extra factors are the fill alone, and the model still fits
    W, Ht = nd.nndsvda(_data(np.eye(3, dtype=int)), 3)
    assert W.shape == (3, 3) and (W[:, 2:] == 1 / 3).all()
    X = (np.random.default_rng(0).random((30, 4)) < 0.5).astype(int)
    model = BANMF(4, random_state=0, n_init=1, max_iter=5, tol=None, swap=False, polish=False)
    model.fit(X)  # k = m: one factor of the NMF start is the fill alone
    assert model.reconstruction_err_ == 0 or "nmf" in model.extra_start_errors_
