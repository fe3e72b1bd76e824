"""PaNDa+: its kernels against dense oracles written from the paper's Algorithms 1-3
(tests/reference.py, each step judged by the full cost J), the fit against the dense reference
algorithm, the cost it reports, planted patterns, reproducibility and unknown cells."""

import numpy as np
import pytest
import reference as ref
import scipy.sparse as sp
from conftest import binary_matrices
from hypothesis import given, settings
from hypothesis import strategies as st

from banmf import PaNDa, boolean_error, factorize, make_boolean
from banmf._kernels.panda import (
    Cells,
    Codes,
    Core,
    Tolerances,
    extend_core,
    find_core,
    residual_counts,
    single_patterns,
)
from banmf._kernels.sparse import Sparse
from banmf.data.masks import transpose_mask
from banmf.data.validation import check_binary_matrix
from banmf.models import panda as panda_module

pytestmark = pytest.mark.usefixtures("wrapping_integers")

#: ρ values whose products with small integers are exact, so that the kernels' comparisons
#: (counts against ρ·count) and the oracle's (costs against costs) agree to the last bit.
RHOS = [0.0, 0.5, 1.0, 1.5, 2.0]
EPS = [0.0, 0.25, 0.5, 1.0]


def _codes(B):
    """Bit codes (r, 1) of a bool matrix (r, k ≤ 64)."""
    out = np.zeros((B.shape[0], 1), dtype=np.uint64)
    for l in range(B.shape[1]):
        out[B[:, l], 0] |= np.uint64(1) << np.uint64(l)
    return out


def _case(Xd, seed, form):
    """X, random patterns Π (W, H) and unknown cells of the kind ``form`` (None, "missing",
    "observed"): the kernels' inputs and the oracle's dense observed mask."""
    rng = np.random.default_rng(seed)
    Xd = Xd.astype(bool)
    n, m = Xd.shape
    k = int(rng.integers(0, 4))
    W = rng.random((n, k)) < 0.4
    H = rng.random((k, m)) < 0.4
    cells = ~Xd & (rng.random((n, m)) < (0.0 if form is None else 0.3))
    if form == "observed":
        observed = Xd | cells
    else:
        observed = ~cells
    X = check_binary_matrix(Xd.astype(np.int8))
    C = sp.csr_array(cells)
    C.indices = C.indices.astype(X.indices.dtype)
    C.indptr = C.indptr.astype(X.indptr.dtype)
    return Xd, X, transpose_mask(X), C, transpose_mask(C), form == "observed", W, H, observed


def _order(rng, m):
    return rng.permutation(m).astype(np.int64)


# ---------------------------------------------------------------------------------- kernels


@given(binary_matrices(), st.integers(0, 2**32 - 1))
def test_residual_counts_and_single_patterns_match_dense(Xd, seed):
    Xd, X, *_, W, H, _ = _case(Xd, seed, None)
    out = np.empty(X.shape[1], dtype=np.int64)
    residual_counts(X.indptr, X.indices, _codes(W), _codes(H.T), out)
    np.testing.assert_array_equal(out, (Xd & ~ref.boolean_product(W, H)).sum(axis=0))
    single = np.empty(W.shape[0], dtype=np.int64)
    single_patterns(_codes(W), single)
    first = W.argmax(axis=1) if W.shape[1] else np.zeros(W.shape[0], dtype=int)
    expected = np.where(W.sum(axis=1) == 1, first, np.where(W.any(axis=1), -1, -2))
    np.testing.assert_array_equal(single, expected)


def _find(Xt, W, H, order, rho, n, m):
    in_rows = np.empty(n, dtype=bool)
    rows = np.empty(n, dtype=np.int64)
    cols = np.empty(m, dtype=np.int64)
    ext = np.empty(m, dtype=np.int64)
    codes = Codes(_codes(W), _codes(H.T), np.empty(n, np.int64), np.empty(m, np.int64))
    t, c, e = find_core(
        Sparse(Xt.indptr, Xt.indices), codes, order, rho, Core(in_rows, rows, cols, ext)
    )
    return in_rows, rows[:t], cols[:c], ext[:e]


@given(binary_matrices(), st.integers(0, 2**32 - 1), st.sampled_from(RHOS))
def test_find_core_matches_the_dense_algorithm(Xd, seed, rho):
    Xd, X, Xt, _, _, _, W, H, observed = _case(Xd, seed, None)
    n, m = X.shape
    order = _order(np.random.default_rng(seed), m)
    in_rows, rows, cols, ext = _find(Xt, W, H, order, rho, n, m)
    want_rows, want_items, want_ext = ref.panda_find_core(Xd, observed, W, H, order, rho)
    if not want_items.any():  # no residual one in the first item: no core
        assert len(cols) == 0 and len(rows) == 0
        return
    np.testing.assert_array_equal(in_rows, want_rows)
    np.testing.assert_array_equal(np.sort(rows), np.flatnonzero(want_rows))
    np.testing.assert_array_equal(np.sort(cols), np.flatnonzero(want_items))
    np.testing.assert_array_equal(ext, want_ext)


@settings(max_examples=60)
@given(
    binary_matrices(),
    st.integers(0, 2**32 - 1),
    st.sampled_from([None, "missing", "observed"]),
    st.sampled_from(RHOS),
    st.sampled_from(EPS),
    st.sampled_from(EPS),
)
def test_extend_core_matches_the_dense_algorithm(Xd, seed, form, rho, eps_row, eps_col):
    Xd, X, Xt, C, Ct, obs_form, W, H, observed = _case(Xd, seed, form)
    n, m = X.shape
    order = _order(np.random.default_rng(seed + 1), m)
    in_rows, rows, cols, ext = _find(Xt, W, H, order, rho, n, m)
    if len(cols) == 0:
        return
    start_rows, start_items = in_rows.copy(), np.zeros(m, dtype=bool)
    start_items[cols] = True
    in_cols = start_items.copy()
    row_pat = np.empty(n, dtype=np.int64)
    col_pat = np.empty(m, dtype=np.int64)
    single_patterns(_codes(W), row_pat)
    single_patterns(_codes(H.T), col_pat)
    added = extend_core(
        Sparse(X.indptr, X.indices),
        Sparse(Xt.indptr, Xt.indices),
        Cells(Sparse(C.indptr, C.indices), Sparse(Ct.indptr, Ct.indices), obs_form),
        Codes(_codes(W), _codes(H.T), row_pat, col_pat),
        Tolerances(eps_row, eps_col, rho),
        in_rows,
        in_cols,
        ext,
    )
    want_rows, want_items = ref.panda_extend(
        Xd, observed, W, H, start_rows, start_items, ext, eps_row, eps_col, rho
    )
    np.testing.assert_array_equal(in_rows, want_rows)
    np.testing.assert_array_equal(in_cols, want_items)
    assert ref.panda_noise_ok(Xd, observed, in_rows, in_cols, eps_row, eps_col)

    # What it reports added is the fall of J plus ρ times the growth of the pattern.
    def cost(r, c):
        return ref.panda_cost(Xd, np.column_stack([W, r]), np.vstack([H, c]), rho, observed)

    growth = int(in_rows.sum() + in_cols.sum() - start_rows.sum() - start_items.sum())
    assert added == cost(start_rows, start_items) - cost(in_rows, in_cols) + rho * growth


def test_kernels_on_k_equal_one_and_empty_rows_and_columns():
    Xd = np.zeros((5, 4), dtype=bool)
    Xd[1:3, 1:3] = True
    Xd[3, 1] = True
    W = np.zeros((5, 1), dtype=bool)
    H = np.zeros((1, 4), dtype=bool)
    W[1, 0] = H[0, 1] = True  # one pattern covering (1, 1)
    X = check_binary_matrix(Xd.astype(np.int8))
    out = np.empty(4, dtype=np.int64)
    residual_counts(X.indptr, X.indices, _codes(W), _codes(H.T), out)
    np.testing.assert_array_equal(out, [0, 2, 2, 0])
    order = np.array([1, 2, 0, 3], dtype=np.int64)
    in_rows, rows, cols, ext = _find(transpose_mask(X), W, H, order, 0.0, 5, 4)
    want = ref.panda_find_core(Xd, np.ones_like(Xd), W, H, order, 0.0)
    np.testing.assert_array_equal(in_rows, want[0])
    np.testing.assert_array_equal(ext, want[2])


# ------------------------------------------------------------------------------------- fits


@pytest.mark.filterwarnings("ignore:n_components=.* exceeds")
@settings(max_examples=30)
@given(
    binary_matrices(max_n=10, max_m=9),
    st.sampled_from(RHOS),
    st.sampled_from(EPS),
    st.sampled_from(EPS),
    st.sampled_from([None, 1, 3]),
    st.sampled_from([None, "missing", "observed"]),
    st.integers(0, 2**32 - 1),
)
def test_fit_matches_the_dense_algorithm_and_reports_its_cost(
    Xd, rho, eps_row, eps_col, k, form, seed
):
    Xd, X, *_, observed = _case(Xd, seed, form)
    mask = observed if form == "observed" else ~observed
    kwargs = {} if form is None else {form: sp.csr_array(mask)}
    if not observed.any():  # nothing observed: refused (tests/test_missing.py)
        return
    model = PaNDa(k, eps_row=eps_row, eps_col=eps_col, rho=rho, n_restarts=1).fit(X, **kwargs)
    W, H = ref.panda(Xd, k, eps_row, eps_col, rho, observed)
    assert model.n_iter_ == W.shape[1]
    np.testing.assert_array_equal(model.W_[:, : W.shape[1]], W)
    np.testing.assert_array_equal(model.components_[: W.shape[1]], H)
    assert not model.W_[:, W.shape[1] :].any() and not model.components_[W.shape[1] :].any()
    assert model.cost_ == ref.panda_cost(Xd, model.W_, model.components_, rho, observed)
    assert model.reconstruction_err_ == ref.boolean_error(Xd, W, H, observed)
    # Each pattern lowered J, so J is below that of no pattern (every observed one missed).
    assert model.n_iter_ == 0 or model.cost_ < Xd.sum()
    for l in range(model.n_iter_):
        assert ref.panda_noise_ok(Xd, observed, W[:, l], H[l], eps_row, eps_col)


def test_cost_is_reported_with_restarts_and_after_the_polish():
    X, _, _ = make_boolean(40, 30, 3, 0.3, noise=0.05, random_state=3)
    Xd = X.toarray().astype(bool)
    for params in ({"n_restarts": 4, "random_state": 1}, {"polish": True}):
        model = PaNDa(3, rho=0.5, **params).fit(X)
        assert model.cost_ == ref.panda_cost(Xd, model.W_, model.components_, 0.5)
        assert model.reconstruction_err_ == boolean_error(X, model.W_, model.components_)


def test_restarts_never_do_worse_than_the_frequency_order_on_the_first_pattern():
    X, _, _ = make_boolean(60, 40, 4, 0.3, noise=0.05, random_state=4)
    one = PaNDa(1, n_restarts=1).fit(X)
    many = PaNDa(1, n_restarts=6, random_state=0).fit(X)
    assert many.cost_ <= one.cost_


@pytest.mark.parametrize("overlap", [False, True])
def test_planted_blocks_are_recovered(overlap):
    n, m = 60, 40
    Xd = np.zeros((n, m), dtype=bool)
    Xd[0:20, 0:15] = True
    Xd[20:45, 15:30] = True
    if overlap:
        Xd[35:60, 25:40] = True  # shares rows 35-44 and columns 25-29 with the second block
    else:
        Xd[45:60, 30:40] = True
    model = PaNDa(3).fit(sp.csr_array(Xd))
    assert model.reconstruction_err_ == 0
    found = {
        (tuple(np.flatnonzero(w)), tuple(np.flatnonzero(h)))
        for w, h in zip(model.W_.T, model.components_)
    }
    blocks = [((0, 20), (0, 15)), ((20, 45), (15, 30))]
    blocks.append(((35, 60), (25, 40)) if overlap else ((45, 60), (30, 40)))
    assert found == {(tuple(range(*r)), tuple(range(*c))) for r, c in blocks}


def test_noisy_blocks_are_found_within_the_tolerances():
    rng = np.random.default_rng(0)
    Xd = np.zeros((50, 30), dtype=bool)
    Xd[:25, :15] = True
    Xd[25:, 15:] = True
    flips = rng.random(Xd.shape) < 0.05
    Xd ^= flips
    model = PaNDa(2, eps_row=0.3, eps_col=0.3).fit(Xd.astype(np.int8))
    truth = np.zeros_like(Xd)
    truth[:25, :15] = truth[25:, 15:] = True
    # The planted blocks explain X up to the flips: PaNDa+ gets close to that.
    assert model.reconstruction_err_ <= flips.sum() + 10
    for l in range(2):
        assert ref.panda_noise_ok(
            Xd, np.ones_like(Xd), model.W_[:, l], model.components_[l], 0.3, 0.3
        )


def test_stops_when_no_pattern_lowers_the_cost_and_pads():
    Xd = np.zeros((8, 8), dtype=np.int8)
    Xd[:4, :4] = 1
    Xd[6, 7] = 1  # a lone one: a pattern for it costs ρ·2 = 2 > 1
    model = PaNDa(5).fit(Xd)
    assert model.n_iter_ == 1 and model.W_.shape == (8, 5)
    assert not model.W_[:, 1:].any() and model.reconstruction_err_ == 1
    assert model.cost_ == 8 + 1
    unlimited = PaNDa().fit(Xd)
    assert unlimited.W_.shape == (8, 1)
    exact = PaNDa(rho=0.0).fit(Xd)  # J_A: the lone one is worth a pattern too
    assert exact.reconstruction_err_ == 0


def test_reproducible_for_a_seed_and_the_same_whatever_n_jobs(monkeypatch):
    monkeypatch.setattr(panda_module, "PARALLEL_ROUNDS_MIN_WORK", 0)  # rounds in threads
    X, _, _ = make_boolean(80, 50, 4, 0.3, noise=0.05, random_state=2)
    fits = [PaNDa(4, n_restarts=5, eps_row=0.5, random_state=7, n_jobs=j).fit(X) for j in (1, 2, 2)]
    for other in fits[1:]:
        np.testing.assert_array_equal(other.W_, fits[0].W_)
        np.testing.assert_array_equal(other.components_, fits[0].components_)
        assert other.cost_ == fits[0].cost_


def test_values_under_missing_cells_are_never_read():
    rng = np.random.default_rng(5)
    X, _, _ = make_boolean(40, 30, 3, 0.35, noise=0.03, random_state=5)
    Xd = X.toarray().astype(bool)
    cells = sp.csr_array(rng.random(Xd.shape) < 0.15)
    a, b = Xd.copy(), Xd.copy()
    a[cells.toarray()] = True
    b[cells.toarray()] = False
    fa = PaNDa(3, eps_row=0.5, random_state=0).fit(a.astype(np.int8), missing=cells)
    fb = PaNDa(3, eps_row=0.5, random_state=0).fit(b.astype(np.int8), missing=cells)
    np.testing.assert_array_equal(fa.W_, fb.W_)
    np.testing.assert_array_equal(fa.components_, fb.components_)
    assert fa.cost_ == fb.cost_ and fa.reconstruction_err_ == fb.reconstruction_err_


def test_every_cell_observed_is_no_unknown_cell():
    X, _, _ = make_boolean(40, 30, 3, 0.35, noise=0.03, random_state=5)
    every = sp.csr_array(np.ones(X.shape, dtype=bool))
    a = PaNDa(3, eps_row=0.5, eps_col=0.5, random_state=0).fit(X)
    b = PaNDa(3, eps_row=0.5, eps_col=0.5, random_state=0).fit(X, observed=every)
    c = PaNDa(3, eps_row=0.5, eps_col=0.5, random_state=0).fit(
        X, missing=sp.csr_array(X.shape, dtype=bool)
    )
    for other in (b, c):
        np.testing.assert_array_equal(other.W_, a.W_)
        np.testing.assert_array_equal(other.components_, a.components_)
        assert other.cost_ == a.cost_


def test_sparse_and_dense_input_agree():
    X, _, _ = make_boolean(50, 40, 3, 0.3, noise=0.03, random_state=6)
    params = {"n_restarts": 3, "random_state": 0, "eps_row": 0.5, "eps_col": 0.5}
    a = PaNDa(3, **params).fit(X)
    b = PaNDa(3, **params).fit(X.toarray())
    c = factorize(sp.coo_matrix(X), 3, method="panda", **params)
    for other_W, other_H in ((b.W_, b.components_), (c.W, c.H)):
        np.testing.assert_array_equal(other_W, a.W_)
        np.testing.assert_array_equal(other_H, a.components_)


def test_work_budget_refuses_up_front():
    X, _, _ = make_boolean(50, 40, 3, 0.3, random_state=0)
    with pytest.raises(ValueError, match="work_budget"):
        PaNDa(3, n_restarts=20, work_budget=1e4).fit(X)
    assert PaNDa(3, work_budget=None).fit(X).n_iter_ >= 1


def test_ctrl_c_keeps_the_patterns_found(monkeypatch):
    X, _, _ = make_boolean(50, 40, 4, 0.3, random_state=0)
    calls = []
    original = PaNDa._round

    def interrupting(self, state, order):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return original(self, state, order)

    monkeypatch.setattr(PaNDa, "_round", interrupting)
    model = PaNDa(4, n_restarts=1)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X)
    assert model.interrupted_ and model.n_iter_ == 2 and model.W_.shape == (50, 4)
    assert model.cost_ == ref.panda_cost(X.toarray(), model.W_, model.components_, 1.0)


def test_ctrl_c_in_rounds_side_by_side_keeps_the_patterns_found(monkeypatch):
    monkeypatch.setattr(panda_module, "PARALLEL_ROUNDS_MIN_WORK", 0)  # rounds in threads
    X, _, _ = make_boolean(50, 40, 4, 0.3, random_state=0)
    alone = PaNDa(4, n_restarts=4, random_state=0, n_jobs=2).fit(X)
    calls = []
    original = PaNDa._round

    def interrupting(self, state, order):
        calls.append(1)
        if len(calls) == 4 * 2 + 1:  # in the rounds of pattern 3
            raise KeyboardInterrupt
        return original(self, state, order)

    monkeypatch.setattr(PaNDa, "_round", interrupting)
    model = PaNDa(4, n_restarts=4, random_state=0, n_jobs=2)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X)
    assert model.interrupted_ and model.n_iter_ == 2
    np.testing.assert_array_equal(model.W_[:, :2], alone.W_[:, :2])
    assert not model.W_[:, 2:].any()
