"""OrMachine: its Gibbs conditionals against enumeration of the likelihood, its kernels against
dense oracles, and the estimator's posterior, recovery, reproducibility and unknown cells."""

import numpy as np
import pytest
import reference as ref
import scipy.sparse as sp
from conftest import run_both
from hypothesis import given
from hypothesis import strategies as st

import banmf
from banmf import OrMachine, make_boolean
from banmf._kernels.ormachine import Other, Weights, accumulate_codes, all_row_scores, gibbs_rows
from banmf._kernels.sparse import Sparse
from banmf.io import Dataset
from banmf.models import ormachine as module

FORMS = ["all", "missing", "observed"]


def pack(B):
    """Rows of a bool matrix (r, k) as packed codes (r, ceil(k / 64)), bit l of word l // 64."""
    r, k = B.shape
    out = np.zeros((r, max(1, -(-k // 64))), dtype=np.uint64)
    for l in range(k):
        out[B[:, l], l >> 6] |= np.uint64(1) << np.uint64(l & 63)
    return out


def unpack(codes, k):
    return np.array(
        [[bool(int(c[l >> 6]) >> (l & 63) & 1) for l in range(k)] for c in codes], dtype=bool
    ).reshape(len(codes), k)


def kernel_inputs(X, observed, form, other):
    """The arguments of the row kernels for the rows of X (dense bool) whose observed cells are
    ``observed``, in one of the three forms, the other factor ``other`` (m, k) held fixed."""
    Xs = sp.csr_array(X.astype(bool))
    if form == "observed":
        cells = sp.csr_array(observed & ~X)
        implicit, w_one, w_cell = False, 1, -1
    else:
        cells = sp.csr_array(~observed)
        implicit, w_one, w_cell = True, 2, 1
    codes = pack(other)
    distinct, inverse, counts = np.unique(codes, axis=0, return_inverse=True, return_counts=True)
    nonzero = distinct.any(axis=1)
    ids = np.full(len(distinct), -1)
    ids[nonzero] = np.arange(nonzero.sum())
    i32 = np.int32
    return (
        Sparse(Xs.indptr.astype(i32), Xs.indices.astype(i32)),
        Sparse(cells.indptr.astype(i32), cells.indices.astype(i32)),
        Weights(w_one, w_cell, implicit),
        Other(
            ids[inverse.ravel()].astype(np.int64),
            np.ascontiguousarray(distinct[nonzero]),
            counts[nonzero].astype(np.int64),
        ),
    )


@st.composite
def problems(draw, max_n=6, max_m=6, ks=(1, 2, 3, 4)):
    """X, its observed cells (in the given form's terms: the observed form leaves every one
    observed), Z, U and λ; small shapes make empty rows, columns and factors common."""
    n = draw(st.integers(1, max_n))
    m = draw(st.integers(1, max_m))
    k = draw(st.sampled_from(ks))
    form = draw(st.sampled_from(FORMS))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    density = draw(st.sampled_from([0.0, 0.2, 0.5, 0.9]))
    X = rng.random((n, m)) < density
    observed = np.ones((n, m), dtype=bool) if form == "all" else rng.random((n, m)) < 0.7
    if form == "observed":
        observed |= X  # every one is observed in this form
    else:
        X &= observed  # X's value on an unknown cell is never read
    Z = rng.random((n, k)) < draw(st.sampled_from([0.0, 0.3, 0.7]))
    U = rng.random((m, k)) < draw(st.sampled_from([0.0, 0.3, 0.7]))
    lam = draw(st.floats(0.05, 6.0))
    return X, observed, form, Z, U, lam


@given(problems())
def test_conditional_log_odds_match_enumeration_of_the_likelihood(problem):
    X, observed, form, Z, U, lam = problem
    args = kernel_inputs(X, observed, form, U)
    scores = np.empty(Z.shape, dtype=np.int64)
    all_row_scores.serial(*args, pack(Z), scores)
    expected = ref.ormachine_log_odds(X, observed, Z, U, lam)
    np.testing.assert_allclose(lam * scores, expected, rtol=1e-9, atol=1e-9)
    np.testing.assert_array_equal(scores, ref.ormachine_scores(X, observed, Z, U))


@given(problems(max_n=8, max_m=8, ks=(1, 2, 3, 5, 66)))
def test_gibbs_rows_match_the_dense_sweep(problem):
    X, observed, form, Z, U, lam = problem
    uniforms = np.random.default_rng(int(lam * 1000)).random(Z.shape)
    args = kernel_inputs(X, observed, form, U)
    codes = pack(Z)
    errors = np.empty(X.shape[0], dtype=np.int64)
    n_blocks = 1 + int(lam * 7) % X.shape[0]  # any split of the rows gives the same sweep
    run_both(gibbs_rows, *args, n_blocks, float(lam), uniforms, codes, errors)
    Z_new, wrong = ref.ormachine_sweep(X, observed, Z, U, lam, uniforms)
    np.testing.assert_array_equal(unpack(codes, Z.shape[1]), Z_new)
    np.testing.assert_array_equal(errors, wrong)


@given(problems(ks=(1, 3, 64, 70)))
def test_row_scores_parallel_equal_serial(problem):
    X, observed, form, Z, U, _ = problem
    args = kernel_inputs(X, observed, form, U)
    run_both(all_row_scores, *args, pack(Z), np.empty(Z.shape, dtype=np.int64))


@given(st.integers(1, 9), st.sampled_from([1, 2, 63, 64, 65]), st.integers(0, 2**32 - 1))
def test_accumulate_codes_adds_one_sample(n, k, seed):
    B = np.random.default_rng(seed).random((n, k)) < 0.4
    counts = np.arange(n * k, dtype=np.int64).reshape(n, k)
    expected = counts + B
    run_both(accumulate_codes, pack(B), counts)
    np.testing.assert_array_equal(counts, expected)


# -- the estimator -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def planted():
    return make_boolean(80, 60, 4, 0.3, noise=0.05, random_state=3)


def test_posterior_means_lie_in_the_unit_interval_and_round_to_the_factors(planted):
    X = planted[0]
    est = OrMachine(4, max_iter=60, random_state=0).fit(X)
    for P, B in ((est.W_posterior_, est.W_), (est.H_posterior_, est.components_)):
        assert P.dtype == np.float64 and ((P >= 0) & (P <= 1)).all()
        np.testing.assert_array_equal(B, P > 0.5)
        # means of 0/1 samples: multiples of 1 / n_samples
        np.testing.assert_allclose(P * est.n_samples_, np.round(P * est.n_samples_), atol=1e-9)
    assert est.W_posterior_.shape == (80, 4) and est.H_posterior_.shape == (4, 60)
    assert est.n_samples_ == 30 and est.n_iter_ == 60
    assert est.error_curve_.shape == est.lambda_curve_.shape == (60,)
    assert (est.lambda_curve_ >= 0).all() and np.isfinite(est.lambda_curve_).all()


def test_recovers_planted_factors_under_five_percent_noise(planted):
    X, W, H = planted
    est = OrMachine(4, random_state=0).fit(X)
    truth = ref.boolean_product(W, H)
    found = ref.boolean_product(est.W_, est.components_)
    assert (found != truth).sum() <= 0.01 * truth.sum()  # the clean matrix, not the noise
    assert est.reconstruction_err_ <= banmf.boolean_error(X, W, H)
    # the noise is estimated: P = σ(λ) near the 95 % of cells left unflipped
    assert 0.93 < 1 / (1 + np.exp(-est.lambda_)) < 0.97


def test_same_seed_same_result_whatever_the_thread_count(monkeypatch, planted):
    from banmf.runtime import threads as _threads

    monkeypatch.setattr(_threads, "PARALLEL_MIN_WORK", 0)  # the parallel kernels run
    X = planted[0]
    fits = [OrMachine(4, max_iter=30, random_state=7, n_jobs=j).fit(X) for j in (1, 2, 1)]
    for est in fits[1:]:
        np.testing.assert_array_equal(est.W_posterior_, fits[0].W_posterior_)
        np.testing.assert_array_equal(est.H_posterior_, fits[0].H_posterior_)
        np.testing.assert_array_equal(est.lambda_curve_, fits[0].lambda_curve_)
    other = OrMachine(4, max_iter=30, random_state=8).fit(X)
    assert not np.array_equal(other.lambda_curve_, fits[0].lambda_curve_)


def test_sparse_and_dense_input_give_the_same_fit(planted):
    X = planted[0]
    rng = np.random.default_rng(0)
    M = rng.random(X.shape) < 0.1
    a = OrMachine(4, max_iter=20, random_state=1).fit(X, missing=sp.csr_matrix(M))
    b = OrMachine(4, max_iter=20, random_state=1).fit(X.toarray(), missing=M)
    np.testing.assert_array_equal(a.W_posterior_, b.W_posterior_)
    np.testing.assert_array_equal(a.H_posterior_, b.H_posterior_)


def test_unknown_cells_are_never_read_and_both_forms_agree(planted):
    X = planted[0].toarray()
    rng = np.random.default_rng(1)
    M = rng.random(X.shape) < 0.2
    fits = []
    for fill in (False, True):  # whatever X holds on the unknown cells
        Xf = np.where(M, fill, X)
        fits.append(OrMachine(4, max_iter=30, random_state=2).fit(Xf, missing=M))
    # the same cells unknown, said the other way: the observed zeros listed
    Xo = X & ~M
    fits.append(OrMachine(4, max_iter=30, random_state=2).fit(Xo, observed=~M))
    for est in fits[1:]:
        np.testing.assert_array_equal(est.W_posterior_, fits[0].W_posterior_)
        np.testing.assert_array_equal(est.H_posterior_, fits[0].H_posterior_)
        assert est.reconstruction_err_ == fits[0].reconstruction_err_
    assert fits[0].reconstruction_err_ == ref.boolean_error(X, fits[0].W_, fits[0].components_, ~M)
    # an all-observed mask is no mask
    plain = OrMachine(4, max_iter=30, random_state=2).fit(X)
    masked = OrMachine(4, max_iter=30, random_state=2).fit(X, missing=np.zeros_like(M))
    np.testing.assert_array_equal(plain.W_posterior_, masked.W_posterior_)


def test_fits_few_observed_cells():
    X, W, H = make_boolean(60, 50, 3, 0.3, random_state=4)
    truth = ref.boolean_product(W, H)
    O = np.random.default_rng(0).random(X.shape) < 0.5
    Xo = truth & O
    est = OrMachine(3, random_state=0).fit(Xo, observed=O)
    assert est.reconstruction_err_ <= 0.05 * Xo.sum()
    found = ref.boolean_product(est.W_, est.components_)
    assert (found != truth)[~O].sum() <= 0.1 * truth[~O].sum()  # the unseen cells predicted


def test_ctrl_c_keeps_the_samples_so_far(monkeypatch, planted):
    X = planted[0]
    sweep = module._Side.sweep
    calls = []

    def interrupted_sweep(self, *args):
        calls.append(1)
        if len(calls) == 2 * 25 + 1:  # in sweep 26: 5 samples kept after a burn-in of 20
            raise KeyboardInterrupt
        return sweep(self, *args)

    monkeypatch.setattr(module._Side, "sweep", interrupted_sweep)
    est = OrMachine(4, max_iter=40, burn_in=20, random_state=0)
    with pytest.raises(KeyboardInterrupt):
        est.fit(X)
    assert est.interrupted_ and est.n_samples_ == 5 and est.n_iter_ == 25
    assert est.reconstruction_err_ == banmf.boolean_error(X, est.W_, est.components_)
    calls.clear()
    est = OrMachine(4, max_iter=60, burn_in=40, random_state=0)  # stopped in the burn-in
    with pytest.raises(KeyboardInterrupt):
        est.fit(X)
    assert est.n_samples_ == 1 and set(np.unique(est.W_posterior_)) <= {0.0, 1.0}


def test_several_chains_keep_the_best_and_one_chain_is_the_first_of_them():
    X, W, H = make_boolean(300, 300, 5, 0.5, noise=0.01, random_state=0)
    one = OrMachine(5, max_iter=60, random_state=0).fit(X)  # this chain stays in a local mode
    three = OrMachine(5, max_iter=60, random_state=0, n_init=3).fit(X)
    assert len(one.chain_errors_) == 1 and len(three.chain_errors_) == 3
    assert three.chain_errors_[0] == one.chain_errors_[0] == one.reconstruction_err_
    assert three.reconstruction_err_ == three.chain_errors_.min() < one.reconstruction_err_
    assert three.reconstruction_err_ <= banmf.boolean_error(X, W, H)


def test_polish_and_parameters_are_checked(planted):
    X = planted[0]
    est = OrMachine(4, max_iter=20, polish=True, random_state=0).fit(X)
    assert est.reconstruction_err_ <= est.unpolished_err_
    with pytest.raises(ValueError, match="burn_in=20 leaves no samples"):
        OrMachine(2, max_iter=20, burn_in=20).fit(X)
    with pytest.raises(ValueError, match="work_budget"):
        OrMachine(2, work_budget=1e3).fit(X)
    with pytest.raises(ValueError, match="alpha must be"):
        OrMachine(2, alpha=0).fit(X)


def test_verbose_reports_the_phases_and_sweeps(capsys, planted):
    OrMachine(3, max_iter=6, random_state=0, verbose=2).fit(planted[0])
    err = capsys.readouterr().err
    assert "burn-in" in err and "sampling" in err and "iteration 6/6" in err and "error" in err


def test_lambda_is_drawn_above_chance_even_for_a_bad_state():
    est = OrMachine(2, random_state=0)
    rng = np.random.default_rng(0)
    lams = [est._draw_lambda(rng, 100, wrong) for wrong in (0, 10, 50, 90, 100)]
    assert all(np.isfinite(lams)) and min(lams) >= 0
    assert lams[0] > lams[1] > lams[2]  # fewer errors, larger λ


def test_the_work_estimate_counts_every_chain_and_large_k():
    X, _, _ = make_boolean(30, 25, 3, 0.3, random_state=0)
    with pytest.raises(ValueError, match="n_init=50"):
        OrMachine(3, max_iter=10, n_init=50, work_budget=1.2e5).fit(X)
    OrMachine(3, max_iter=10, n_init=1, work_budget=1.2e5).fit(X)
    # 2.0**k overflows a float past k = 1023: the estimate counts codes as integers (k is
    # capped at min(n, m), so the data must be that wide).
    with pytest.raises(ValueError, match="n_components=1100"):
        OrMachine(1100, max_iter=2, work_budget=1e3).fit(np.eye(1100, dtype=int))


def test_ctrl_c_between_chains_keeps_the_finished_ones_and_a_second_aborts(monkeypatch, planted):
    X = planted[0]
    real = Dataset.error
    calls = []

    def second_raises(*args):  # the error of chain 2, after its sweeps
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(Dataset, "error", second_raises)
    est = OrMachine(4, max_iter=20, n_init=3, random_state=0)
    with pytest.raises(KeyboardInterrupt):
        est.fit(X)
    alone = OrMachine(4, max_iter=20, random_state=0).fit(X)
    assert est.interrupted_ and len(est.chain_errors_) == 1
    np.testing.assert_array_equal(est.W_, alone.W_)
    # A first Ctrl-C in chain 1's sweeps, a second in its error: no result.
    calls.clear()
    monkeypatch.setattr(Dataset, "error", second_raises)
    sweep = module._Side.sweep

    def interrupted_sweep(self, *args):
        if not calls:
            calls.append(1)  # so that the next error counted is the second
            raise KeyboardInterrupt
        return sweep(self, *args)

    monkeypatch.setattr(module._Side, "sweep", interrupted_sweep)
    est = OrMachine(4, max_iter=20, n_init=3, random_state=0)
    with pytest.raises(KeyboardInterrupt):
        est.fit(X)
    assert not hasattr(est, "W_")
