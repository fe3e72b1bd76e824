"""The exact Boolean polish: kernels against brute force, and the error never rises."""

import numpy as np
import reference as ref
from conftest import binary_matrices
from hypothesis import given
from hypothesis import strategies as st

from banmf import boolean_error, make_boolean
from banmf._kernels.polish import best_row_codes, subset_sums
from banmf._validation import check_binary_matrix
from banmf.polish import _codes, polish


@given(st.integers(1, 5), st.integers(0, 2**31))
def test_subset_sums(k, seed):
    counts = np.random.default_rng(seed).integers(0, 5, size=1 << k).astype(np.int64)
    expected = ref.subset_sums(counts, k)
    subset_sums(counts, k)
    np.testing.assert_array_equal(counts, expected)


@given(binary_matrices(max_n=10, max_m=10), st.integers(1, 3), st.integers(1, 3), st.integers(0, 2**31))
def test_best_row_codes_is_the_brute_force_row_optimum(Xd, k, n_blocks, seed):
    rng = np.random.default_rng(seed)
    n, m = Xd.shape
    W, H = rng.random((n, k)) < 0.4, rng.random((k, m)) < 0.4
    X = check_binary_matrix(Xd)
    b, a = _codes(H.T), _codes(W)
    F = np.bincount(b, minlength=1 << k).astype(np.int64)
    subset_sums(F, k)
    before = a.copy()
    changed = best_row_codes(X.indptr, X.indices, b, F, k, m, a, min(n_blocks, n))
    errs = ref.row_errors(Xd, H)
    rows = np.arange(n)
    np.testing.assert_array_equal(errs[rows, a], errs.min(axis=1))
    # a row moves only on a strict improvement
    same = errs[rows, before] == errs.min(axis=1)
    np.testing.assert_array_equal(a[same], before[same])
    assert changed == int((a != before).sum())


@given(binary_matrices(max_n=12, max_m=12), st.integers(1, 3), st.integers(0, 2**31))
def test_polish_never_increases_the_error_and_ends_at_a_fixed_point(Xd, k, seed):
    rng = np.random.default_rng(seed)
    n, m = Xd.shape
    W, H = rng.random((n, k)) < 0.4, rng.random((k, m)) < 0.4
    res = polish(Xd, W, H)
    assert res.history[0] == ref.boolean_error(Xd, W, H)
    assert all(b <= a for a, b in zip(res.history, res.history[1:]))
    assert res.error == boolean_error(Xd, res.W, res.H) == ref.boolean_error(Xd, res.W, res.H)
    # converged: no single row of W nor column of H can do better (brute force)
    row_best = ref.row_errors(Xd, res.H).min(axis=1)
    np.testing.assert_array_equal(ref.row_errors(Xd, res.H)[np.arange(n), _codes(res.W)], row_best)
    col_errs = ref.row_errors(Xd.T, res.W.T)
    np.testing.assert_array_equal(col_errs[np.arange(m), _codes(res.H.T)], col_errs.min(axis=1))


def test_polish_repairs_a_damaged_planted_factorization():
    X, W, H = make_boolean(60, 50, 4, 0.4, random_state=3)
    W2 = W.copy()
    W2[:10] = ~W2[:10]  # spoil ten rows
    res = polish(X, W2, H)
    assert res.history[0] > 0 and res.error == 0


def test_polish_rejects_large_k():
    import pytest

    with pytest.raises(ValueError, match="max_k"):
        polish(np.eye(20), np.eye(20), np.eye(20))


def test_estimator_polish_option():
    import pytest

    from banmf import BANMF, NMF

    X, _, _ = make_boolean(50, 50, 5, 0.8, random_state=1)
    plain = BANMF(5, random_state=1).fit(X)
    polished = BANMF(5, random_state=1, polish=True).fit(X)
    assert polished.booleanized_err_ == plain.reconstruction_err_
    assert polished.reconstruction_err_ <= plain.reconstruction_err_
    assert polished.reconstruction_err_ == boolean_error(X, polished.W_, polished.components_)
    assert NMF(5, random_state=1, polish=True, max_iter=200).fit(X).reconstruction_err_ <= NMF(5, random_state=1, max_iter=200).fit(X).reconstruction_err_
    with pytest.raises(ValueError, match="polish=True needs n_components"):
        BANMF(17, polish=True, max_iter=2).fit(np.ones((20, 20)))
    with pytest.raises(TypeError, match="polish"):
        BANMF(2, polish="yes", max_iter=2).fit(np.eye(3))
