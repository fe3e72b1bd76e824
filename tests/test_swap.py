"""Factor swaps and the column start: kernels and the best swap against brute force, errors
never rise, and the estimator's use of them."""

import numpy as np
import pytest
import reference as ref
import scipy.sparse as sp
from conftest import binary_matrices, run_both
from hypothesis import given
from hypothesis import strategies as st

from banmf import BANMF, NMF, boolean_error, make_sparse_degrees, swap_factors
from banmf._kernels.polish import single_cover
from banmf.data.masks import pack_rows, transpose_mask
from banmf.data.validation import check_binary_matrix
from banmf.engine.columns import column_factors
from banmf.engine.polish import WholeRows
from banmf.engine.swaps import choose_swap
from banmf.io import Dataset


@given(binary_matrices(max_n=10, max_m=10), st.sampled_from([1, 2, 3, 66]), st.integers(0, 2**31))
def test_single_cover_equals_the_dense_oracle(Xd, k, seed):
    """Every word count (k = 66 spans two words), empty rows and columns, k = 1."""
    rng = np.random.default_rng(seed)
    n, m = Xd.shape
    A, B = rng.random((n, k)) < 0.4, rng.random((m, k)) < 0.4
    X = check_binary_matrix(Xd)
    out = np.full((n, k + 1), -1, dtype=np.int64)
    run_both(single_cover, X.indptr, X.indices, pack_rows(A), pack_rows(B), out)
    np.testing.assert_array_equal(out, ref.single_cover(Xd, A, B))


def _random_factors(rng, n, m, k):
    return rng.random((n, k)) < 0.35, rng.random((k, m)) < 0.35


@given(binary_matrices(max_n=9, max_m=9), st.integers(1, 3), st.integers(0, 2**31))
def test_the_chosen_swap_is_the_brute_force_best_swap(Xd, k, seed):
    rng = np.random.default_rng(seed)
    n, m = Xd.shape
    W, H = _random_factors(rng, n, m, k)
    rows = WholeRows(Dataset(Xd), W.copy())
    Ht = np.ascontiguousarray(H.T)
    change, l, j = choose_swap(*rows.swap_costs(Ht))
    expected = ref.swap_changes(Xd, W, H)
    assert change == expected.min()
    if change < 0:
        assert expected[l, j] == change
        # the new factor: column j over the rows whose ones there are left uncovered
        W2, H2 = W.copy(), H.copy()
        W2[:, l], H2[l] = False, False
        uncovered = Xd[:, j].astype(bool) & ~ref.boolean_product(W2, H2)[:, j]
        rows.swap_in(Ht, l, j)
        np.testing.assert_array_equal(rows.W[:, l], uncovered)


@given(binary_matrices(max_n=12, max_m=12), st.integers(1, 3), st.integers(0, 2**31))
def test_swaps_lower_the_error_strictly_and_end_where_no_swap_helps(Xd, k, seed):
    rng = np.random.default_rng(seed)
    n, m = Xd.shape
    W, H = _random_factors(rng, n, m, k)
    res = swap_factors(Xd, W, H)
    history = res.info["history"]
    assert history[0] == ref.boolean_error(Xd, W, H)
    assert all(b < a for a, b in zip(history, history[1:]))
    assert res.error == history[-1] == ref.boolean_error(Xd, res.W, res.H)
    assert res.n_iter == len(res.info["swaps"]) == len(history) - 1
    if res.n_iter:  # after a swap the factors are polished, so no swap is left to make
        assert ref.swap_changes(Xd, res.W, res.H).min() >= 0


def test_swap_factors_checks_its_inputs_and_stops_at_max_swaps():
    X = np.eye(4, dtype=int)
    W, H = np.zeros((4, 2), bool), np.zeros((2, 4), bool)
    assert swap_factors(X, W, H, max_swaps=1).n_iter == 1
    assert swap_factors(X, W, H).error == 2
    with pytest.raises(ValueError, match="max_swaps"):
        swap_factors(X, W, H, max_swaps=-1)
    with pytest.raises(ValueError, match="method"):
        swap_factors(X, W, H, method="greedy")
    with pytest.raises(ValueError, match="shapes|shape"):
        swap_factors(X, W[:3], H)


def test_swaps_put_in_what_the_polish_cannot_move():
    """Two copies of one factor and a block left out: the polish is stuck, one swap fixes it."""
    X = np.zeros((6, 6), dtype=int)
    X[:3, :3] = 1
    X[3:, 3:] = 1
    W = np.zeros((6, 2), bool)
    W[:3] = True
    H = np.zeros((2, 6), bool)
    H[:, :3] = True
    from banmf import polish

    assert polish(X, W, H).error == 9
    res = swap_factors(X, W, H)
    assert res.error == 0 and res.n_iter == 1


@given(binary_matrices(max_n=10, max_m=10), st.integers(1, 12))
def test_column_factors_are_the_most_frequent_columns(Xd, k):
    X = check_binary_matrix(Xd)
    W, H = column_factors(transpose_mask(X), k)
    eW, eH = ref.column_factors(Xd, k)
    np.testing.assert_array_equal(W[:, : eW.shape[1]], eW)
    np.testing.assert_array_equal(H[: eH.shape[0]], eH)
    assert not W[:, eW.shape[1] :].any() and not H[eH.shape[0] :].any()


def test_the_extra_starts_compete_with_the_random_starts():
    """On power-law sparse data the most frequent columns are strong factors: the default
    reaches at least their error; each extra start's error is reported, the best is kept."""
    X = sp.csr_array(
        make_sparse_degrees(2000, 300, 6000, rows="poisson", cols="powerlaw", random_state=0)
    )
    Wc, Hc = ref.column_factors(X.toarray(), 5)
    columns = boolean_error(X, Wc, Hc)
    model = BANMF(5, random_state=0, n_init=1).fit(X)
    assert set(model.extra_start_errors_) == {"nmf", "columns", "combined"}
    assert model.extra_start_errors_["columns"] <= columns
    errors = [*model.init_errors_, *model.extra_start_errors_.values()]
    assert model.reconstruction_err_ == min(errors)
    assert model.reconstruction_err_ == boolean_error(X, model.W_, model.components_)
    if model.reconstruction_err_ < min(model.init_errors_, default=np.inf) and "columns" in (
        model.refinement_
    ):
        assert model.n_iter_ == 0 and len(model.loss_curve_) == 0
    plain = BANMF(5, random_state=0, n_init=1, swap=False, extra_starts=(), combine=False).fit(X)
    assert plain.extra_start_errors_ == {} and plain.swaps_ == []
    assert model.reconstruction_err_ <= plain.reconstruction_err_
    # the random starts are the same with or without the extra ones
    assert plain.init_errors_[0] >= model.init_errors_[0]
    greedy = BANMF(5, random_state=0, n_init=1, extra_starts=("grecond",)).fit(X)
    assert set(greedy.extra_start_errors_) - {"combined"} == {"grecond"}
    assert NMF(5).extra_starts == () and NMF(5).swap is False


@pytest.mark.parametrize("bad", [("random",), ("nmf", "nmf"), "nmf", None])
def test_extra_starts_are_checked(bad):
    with pytest.raises(ValueError, match="extra_starts"):
        BANMF(2, extra_starts=bad).fit(np.eye(3))
