"""Message passing (Ravanbakhsh et al., ICML 2016): the factor messages against brute-force
max-sum, each kernel against its dense numpy oracle (tests/reference.py), whole runs against
the dense reference implementation, and the estimator: recovery, completion, unknown cells,
reproducibility and the budget."""

import numpy as np
import pytest
import reference as ref
import scipy.sparse as sp
from conftest import binary_matrices, observed_and_unknown, run_both
from hypothesis import given
from hypothesis import strategies as st

from banmf import MessagePassing, boolean_error, make_boolean
from banmf._kernels.message_passing import (
    Cells,
    Channel,
    Marginals,
    Messages,
    mp_column_marginals,
    mp_decoded_errors,
    mp_sweep,
)
from banmf.data.validation import check_binary_matrix
from banmf.io import Dataset
from banmf.model_selection import held_out_scores, mask_entries
from banmf.models.message_passing import _Cells, _Run

RHO = 0.01
CO1 = float(np.log1p(-RHO) - np.log(RHO))


def cells_of(Xd, mask=None, form="missing"):
    """The observed cells of the dense 0/1 ``Xd`` with the unknown cells ``mask`` (dense bool,
    True = unknown; None: all observed), given as ``missing=`` or as ``observed=``; also the
    dense observed mask and the cells' (rows, cols)."""
    X = check_binary_matrix(Xd)
    if mask is None or not mask.any():
        X, unknown = observed_and_unknown(X)
        observed = np.ones(Xd.shape, dtype=bool)
    elif form == "missing":
        X, unknown = observed_and_unknown(X, missing=mask)
        observed = ~mask
    else:
        observed = ~mask | Xd.astype(bool)  # the ones are always observed with observed=
        X, unknown = observed_and_unknown(X, observed=observed)
    c = _Cells(Dataset.trusted(X, unknown))
    rows = np.repeat(np.arange(Xd.shape[0]), np.diff(c.indptr))
    return c, observed, rows, c.indices.astype(np.int64)


def dense(values, rows, cols, shape):
    """Per-cell rows (cells, k) as a dense (n, m, k) array, zero off the cells."""
    out = np.zeros((*shape, values.shape[1]))
    out[rows, cols] = values
    return out


# -- the messages are max-sum messages --------------------------------------------------------


@given(
    st.lists(st.floats(-20, 20), min_size=1, max_size=5),
    st.booleans(),
    st.sampled_from([0.01, 0.2, 0.45]),
)
def test_channel_message_is_max_sum_over_the_or(gamma, one, rho):
    """The oracle's γ̂ (the reference code's formula, each l by brute force over the others)
    is the max-sum message of the factor p(X | OR z) to each z_l: every assignment tried."""
    co1 = np.log1p(-rho) - np.log(rho)
    got = ref.mp_channel(np.array([gamma]), np.array([co1 if one else -co1]))[0]
    p1, p0 = (1 - rho, rho) if one else (rho, 1 - rho)

    def channel(z):
        return np.log(p1 if any(z) else p0)

    for l in range(len(gamma)):
        assert got[l] == pytest.approx(ref.maxsum_message(channel, gamma, l), abs=1e-9)


@given(st.floats(-20, 20), st.floats(-20, 20), st.floats(-20, 20))
def test_and_factor_messages_are_max_sum(phi_hat, psi_hat, gamma_hat):
    """The AND factor Z = W ∧ H: its messages to Z (γ), to W (φ) and to H (ψ)."""

    def and_factor(v):
        x, y, z = v
        return 0.0 if z == (x & y) else -np.inf

    incoming = [phi_hat, psi_hat, gamma_hat]
    assert ref.maxsum_message(and_factor, incoming, 2) == pytest.approx(
        min(phi_hat + psi_hat, phi_hat, psi_hat)
    )
    assert ref.maxsum_message(and_factor, incoming, 0) == pytest.approx(
        max(gamma_hat + psi_hat, 0) - max(psi_hat, 0)
    )
    assert ref.maxsum_message(and_factor, incoming, 1) == pytest.approx(
        max(gamma_hat + phi_hat, 0) - max(phi_hat, 0)
    )


# -- each kernel against its oracle -----------------------------------------------------------


@given(
    binary_matrices(max_n=9, max_m=9),
    st.sampled_from([1, 2, 3, 6]),
    st.sampled_from([0.0, 0.5, 0.8]),
    st.booleans(),
    st.sampled_from([0.0, 0.3]),
    st.sampled_from(["missing", "observed"]),
    st.integers(0, 2**31),
)
def test_sweep_matches_the_dense_step(Xd, k, damping, first, share, form, seed):
    rng = np.random.default_rng(seed)
    mask = rng.random(Xd.shape) < share
    c, observed, rows, cols = cells_of(Xd, mask, form)
    n, m = Xd.shape
    in_x = rng.normal(0, 3, (c.count, k))
    in_y = rng.normal(0, 3, (c.count, k))
    cx, cy = -0.4, 0.3
    Dx, Dy = dense(in_x, rows, cols, Xd.shape), dense(in_y, rows, cols, Xd.shape)
    if first:  # in_x, in_y hold the outgoing messages; no incoming ones yet
        marg_x, marg_y = rng.normal(size=(n, k)), rng.normal(size=(m, k))  # ignored
        want = ref.mp_step(Xd, observed, 0 * Dx, 0 * Dy, Dx, Dy, damping, CO1, -CO1, cx, cy)
    else:
        marg_x, marg_y = cx + Dx.sum(axis=1), cy + Dy.sum(axis=0)
        out_x, out_y = marg_x[:, None] - Dx, marg_y[None] - Dy
        want = ref.mp_step(Xd, observed, Dx, Dy, out_x, out_y, damping, CO1, -CO1, cx, cy)
    row_diff = np.zeros(n)
    run_both(
        mp_sweep,
        Cells(c.indptr, c.indices, c.ones),
        Messages(in_x, in_y),
        Marginals(marg_x, marg_y),
        Channel(CO1, -CO1, cx),
        damping,
        first,
        min(3, n),
        row_diff,
    )
    np.testing.assert_allclose(in_x, want[0][rows, cols], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(in_y, want[1][rows, cols], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(marg_x, want[2], rtol=1e-12, atol=1e-12)
    assert row_diff.max(initial=0.0) == pytest.approx(want[4], rel=1e-12, abs=1e-12)


@given(
    binary_matrices(max_n=9, max_m=9),
    st.sampled_from([1, 2, 5]),
    st.sampled_from([0.0, 0.4]),
    st.integers(0, 2**31),
)
def test_column_marginals_match_the_dense_sums(Xd, k, share, seed):
    rng = np.random.default_rng(seed)
    c, _, rows, cols = cells_of(Xd, rng.random(Xd.shape) < share)
    in_y = rng.normal(size=(c.count, k))
    marg_y = np.full((Xd.shape[1], k), np.nan)
    run_both(mp_column_marginals, c.col_indptr, c.col_cells, in_y, 0.7, 2, marg_y)
    want = 0.7 + dense(in_y, rows, cols, Xd.shape).sum(axis=0)
    np.testing.assert_allclose(marg_y, want, rtol=1e-12, atol=1e-12)


@given(
    binary_matrices(max_n=9, max_m=9),
    st.sampled_from([1, 2, 5]),
    st.sampled_from([0.0, 0.4]),
    st.sampled_from(["missing", "observed"]),
    st.integers(0, 2**31),
)
def test_decoded_errors_count_the_observed_cells(Xd, k, share, form, seed):
    rng = np.random.default_rng(seed)
    c, observed, _, _ = cells_of(Xd, rng.random(Xd.shape) < share, form)
    n, m = Xd.shape
    marg_x, marg_y = rng.normal(size=(n, k)), rng.normal(size=(m, k))
    row_err = np.full(n, -1, dtype=np.int64)
    run_both(
        mp_decoded_errors, Cells(c.indptr, c.indices, c.ones), Marginals(marg_x, marg_y), 2, row_err
    )
    assert row_err.sum() == ref.boolean_error(Xd, marg_x > 0, (marg_y > 0).T, observed)


# -- whole runs against the dense reference ---------------------------------------------------


@pytest.mark.parametrize(
    "shape, k, damping, share, form, n_iter",
    [
        ((7, 6), 1, 0.0, 0.0, "missing", 1),
        ((7, 6), 3, 0.5, 0.0, "missing", 1),
        ((9, 8), 3, 0.5, 0.0, "missing", 12),
        ((9, 8), 4, 0.8, 0.3, "missing", 12),
        ((10, 7), 2, 0.3, 0.6, "observed", 15),
    ],
)
def test_iterations_match_the_dense_reference(shape, k, damping, share, form, n_iter):
    rng = np.random.default_rng(sum(shape) + k)
    Xd = (rng.random(shape) < 0.4).astype(int)
    Xd[0] = 0  # an empty row
    mask = rng.random(shape) < share
    c, observed, rows, cols = cells_of(Xd, mask, form)
    est = MessagePassing(k, damping=damping, prior_w=0.4, prior_h=0.55, noise=0.05)
    run = _Run(est, c, *shape, k, np.random.default_rng(0))
    out_x0 = dense(run.in_x, rows, cols, shape)
    out_y0 = dense(run.in_y, rows, cols, shape)
    diffs = [run.step(first=t == 0) for t in range(n_iter)]
    want = ref.message_passing(
        Xd, observed, out_x0, out_y0, n_iter, damping, run.co1, run.co0, run.cx, run.cy
    )
    np.testing.assert_allclose(run.in_x, want[0][rows, cols], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(run.in_y, want[1][rows, cols], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(run.marg_x, want[2], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(run.marg_y, want[3], rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(diffs, want[4], rtol=1e-9, atol=1e-9)
    assert run.cx == pytest.approx(np.log(0.4 / 0.6)) and run.co1 == pytest.approx(np.log(19))


def test_the_fit_decodes_the_best_iteration():
    X, _, _ = make_boolean(40, 30, 4, 0.5, noise=0.03, random_state=2)
    est = MessagePassing(4, max_iter=60, tol=None, random_state=0).fit(X)
    assert est.n_iter_ == 60 and not est.converged_ and len(est.error_curve_) == 60
    assert est.reconstruction_err_ == est.error_curve_.min()
    assert est.error_curve_[est.best_iter_ - 1] == est.error_curve_.min()
    np.testing.assert_array_equal(est.W_, est.W_log_odds_ > 0)
    np.testing.assert_array_equal(est.components_, est.H_log_odds_ > 0)
    assert est.reconstruction_err_ == boolean_error(X, est.W_, est.components_)


# -- the estimator ----------------------------------------------------------------------------


@pytest.mark.parametrize("d", [0.2, 0.5])
def test_planted_factors_are_recovered(d):
    for seed in range(3):
        X, W, H = make_boolean(50, 50, 5, d, random_state=seed)
        est = MessagePassing(5, random_state=seed).fit(X)
        assert est.reconstruction_err_ == 0 and est.converged_


def test_planted_factors_are_recovered_through_noise():
    X, W, H = make_boolean(80, 60, 4, 0.4, noise=0.02, random_state=5)
    est = MessagePassing(4, random_state=0).fit(X)
    clean = ref.boolean_product(W, H)
    # It finds the clean matrix, not the noise: as close to X as the planted factors are.
    assert ref.boolean_error(clean, est.W_, est.components_) == 0
    assert est.reconstruction_err_ == boolean_error(X, W, H)


def test_completion_with_missing_and_with_observed():
    X, W, H = make_boolean(120, 100, 3, 0.3, random_state=3)
    Xd = X.toarray().astype(bool)
    hidden = mask_entries(X, 0.3, random_state=0)
    est = MessagePassing(3, random_state=0).fit(X, missing=hidden)
    scores = held_out_scores(X, est.W_, est.components_, hidden)
    assert scores["error_rate"] < 0.01
    # The user-item form: only 25 % of the cells are seen, ones and zeros alike.
    seen = np.random.default_rng(1).random(Xd.shape) < 0.25
    train = sp.csr_array(Xd & seen)
    est = MessagePassing(3, random_state=0).fit(train, observed=sp.csr_array(seen))
    assert est.n_observed_ == seen.sum()
    unseen = sp.csr_array(~seen)
    assert held_out_scores(X, est.W_, est.components_, unseen)["error_rate"] < 0.02


def test_unknown_cells_are_never_read():
    X, _, _ = make_boolean(40, 30, 3, 0.4, noise=0.05, random_state=4)
    Xd = X.toarray()
    rng = np.random.default_rng(0)
    missing = rng.random(Xd.shape) < 0.2
    scrambled = np.where(missing, rng.random(Xd.shape) < 0.5, Xd).astype(int)
    a = MessagePassing(3, random_state=1).fit(Xd, missing=missing)
    b = MessagePassing(3, random_state=1).fit(scrambled, missing=missing)
    np.testing.assert_array_equal(a.W_, b.W_)
    np.testing.assert_array_equal(a.components_, b.components_)
    assert a.reconstruction_err_ == ref.boolean_error(Xd, a.W_, a.components_, ~missing)
    # observed=: a zero outside the observed cells is unknown, whatever X holds there.
    observed = (rng.random(Xd.shape) < 0.5) | (Xd == 1)
    a = MessagePassing(3, random_state=1).fit(Xd, observed=observed)
    assert a.n_observed_ == observed.sum()
    assert a.reconstruction_err_ == ref.boolean_error(Xd, a.W_, a.components_, observed)


def test_observed_never_touches_the_other_cells():
    """A 10⁶ × 10⁶ matrix with 2000 observed cells: a dense pass would need terabytes."""
    n = 1_000_000
    rng = np.random.default_rng(0)
    rows, cols = rng.integers(0, n, 2000), rng.integers(0, n, 2000)
    keep = np.unique(rows * n + cols)
    rows, cols = keep // n, keep % n
    obs = sp.csr_array((np.ones(len(rows), dtype=bool), (rows, cols)), shape=(n, n))
    X = sp.csr_array((np.ones(1000, dtype=bool), (rows[:1000], cols[:1000])), shape=(n, n))
    est = MessagePassing(2, max_iter=20, random_state=0).fit(X, observed=obs)
    assert est.n_observed_ == len(rows) and est.W_.shape == (n, 2)


def test_same_seed_same_result_on_any_thread_count():
    X, _, _ = make_boolean(150, 120, 5, 0.4, noise=0.03, random_state=6)
    one = MessagePassing(5, max_iter=40, random_state=3, n_jobs=1).fit(X)
    two = MessagePassing(5, max_iter=40, random_state=3, n_jobs=2).fit(X)
    np.testing.assert_array_equal(one.W_log_odds_, two.W_log_odds_)
    np.testing.assert_array_equal(one.H_log_odds_, two.H_log_odds_)
    np.testing.assert_array_equal(one.error_curve_, two.error_curve_)
    other = MessagePassing(5, max_iter=40, random_state=4).fit(X)
    assert not np.array_equal(other.W_log_odds_, one.W_log_odds_)


def test_sparse_and_dense_input_agree():
    X, _, _ = make_boolean(30, 40, 3, 0.3, noise=0.02, random_state=7)
    missing = sp.random(30, 40, density=0.1, random_state=0, format="csr") > 0
    a = MessagePassing(3, random_state=0).fit(X, missing=missing)
    b = MessagePassing(3, random_state=0).fit(X.toarray(), missing=missing.toarray())
    np.testing.assert_array_equal(a.W_log_odds_, b.W_log_odds_)
    np.testing.assert_array_equal(a.components_, b.components_)


def test_polish_only_lowers_the_error():
    X, _, _ = make_boolean(40, 40, 4, 0.5, noise=0.05, random_state=8)
    plain = MessagePassing(4, max_iter=30, random_state=0).fit(X)
    polished = MessagePassing(4, max_iter=30, random_state=0, polish=True).fit(X)
    assert polished.unpolished_err_ == plain.reconstruction_err_
    assert polished.reconstruction_err_ <= plain.reconstruction_err_


def test_the_budget_refuses_before_allocating(monkeypatch):
    X, _, _ = make_boolean(60, 50, 3, 0.3, random_state=0)
    with pytest.raises(ValueError, match=r"every cell of this 60×50 X.*work_budget.*observed="):
        MessagePassing(3, work_budget=1e4).fit(X)
    monkeypatch.setenv("BANMF_MEMORY_LIMIT", "64K")
    with pytest.raises(ValueError, match=r"every cell.*more than the 64.0 KB available.*observed="):
        MessagePassing(3).fit(X)
    with pytest.raises(ValueError, match=r"2,999 observed cells.*missing="):
        MessagePassing(3).fit(X, missing=np.arange(60 * 50).reshape(60, 50) < 1)
    # With observed= only those cells count: 400 of them fit in the same 64 KB.
    observed = np.zeros((60, 50), dtype=bool)
    observed[:8] = True
    MessagePassing(3, max_iter=5).fit(X.toarray() & observed, observed=observed)


def test_ctrl_c_keeps_the_best_factors_so_far_and_cancel_stops(monkeypatch):
    import threading

    from banmf.runtime.threads import cancel_with

    X, _, _ = make_boolean(40, 30, 3, 0.4, noise=0.05, random_state=9)
    step, calls = _Run.step, []

    def interrupted_at_the_fourth(self, first):
        calls.append(first)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return step(self, first)

    monkeypatch.setattr(_Run, "step", interrupted_at_the_fourth)
    est = MessagePassing(3, polish=True, random_state=0)
    with pytest.raises(KeyboardInterrupt):
        est.fit(X)
    assert est.interrupted_ and est.n_iter_ == 3 and est.polish_rounds_ == 0
    assert est.reconstruction_err_ == boolean_error(X, est.W_, est.components_)
    calls[:] = [True] * 3  # Ctrl-C in the first iteration: nothing to keep
    fresh = MessagePassing(3)
    with pytest.raises(KeyboardInterrupt):
        fresh.fit(X)
    assert not hasattr(fresh, "W_")
    monkeypatch.undo()
    stop = threading.Event()
    stop.set()
    with cancel_with(stop):
        est = MessagePassing(3, random_state=0).fit(X)
    assert est.interrupted_ and est.n_iter_ == 1
