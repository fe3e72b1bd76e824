"""BANMF: exactness theorems, monotone objective, agreement with a dense implementation, edges."""

import logging
import warnings

import numpy as np
import pytest
import reference as ref
import scipy.sparse as sp
from hypothesis import assume, given
from hypothesis import strategies as st

from banmf import (
    BANMF,
    ConvergenceWarning,
    boolean_error,
    boolean_product,
    booleanize,
    make_boolean,
)
from banmf.data.validation import check_binary_matrix
from banmf.datasets import load_zoo
from banmf.engine.iterations import MUSolver
from banmf.io import Dataset


@st.composite
def boolean_rank_problems(draw, max_n=12, max_m=12, max_k=4):
    n, m, k = draw(st.integers(1, max_n)), draw(st.integers(1, max_m)), draw(st.integers(1, max_k))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    p = draw(st.sampled_from([0.1, 0.4, 0.8]))
    return rng.random((n, k)) < p, rng.random((k, m)) < p


@given(boolean_rank_problems())
def test_theorem1_exact_bmf_gives_a_fixed_zero_objective_auxiliary_solution(factors):
    W0, H0 = factors
    k = W0.shape[1]
    Xd = ref.boolean_product(W0, H0)
    Y = W0.astype(float) @ H0.astype(float)
    assert np.all(Y[~Xd] == 0)  # (a)
    assert np.all((Y[Xd] >= 1) & (Y[Xd] <= k))  # (b)
    X = check_binary_matrix(Xd)
    y0 = Y[Xd]  # row-major boolean indexing = CSR order
    W, Ht = W0.astype(float), np.ascontiguousarray(H0.T, dtype=float)
    solver = MUSolver(
        Dataset.of(X), W, Ht, project=True, lower=1.0, upper=float(k), eps=1e-12, y=y0.copy()
    )
    assert solver.objective() == pytest.approx(0.0, abs=1e-12)  # (c)
    solver.step_w(0.0)
    solver.step_h(0.0)
    # (e) the MU steps leave exact Boolean factors where they are (N = P), except a factor
    # whose partner is empty: it explains nothing and MU sends it to 0, harmlessly.
    live_w, live_h = H0.any(axis=1), W0.any(axis=0)
    np.testing.assert_allclose(solver.W[:, live_w], W0[:, live_w], rtol=1e-9, atol=0)
    np.testing.assert_allclose(solver.Ht[:, live_h], H0.T[:, live_h], rtol=1e-9, atol=0)
    solver.step_y()
    np.testing.assert_allclose(solver.y, y0, rtol=1e-9)  # (d) projection keeps Y
    assert solver.objective() == pytest.approx(0.0, abs=1e-9)


@given(boolean_rank_problems(), st.integers(0, 2**32 - 1))
def test_theorem2_exact_auxiliary_solution_thresholds_to_exact_bmf(supports, seed):
    Ws, Hs = supports
    rng = np.random.default_rng(seed)
    W = Ws * (1 + rng.random(Ws.shape))
    H = Hs * (1 + rng.random(Hs.shape))
    Xd = (W @ H) > 0
    assert boolean_error(Xd, W > 0, H > 0) == 0
    assert ref.boolean_error(Xd, W > 0, H > 0) == 0
    D = np.exp(rng.normal(size=W.shape[1]))
    assert boolean_error(Xd, (W * D) > 0, (H / D[:, None]) > 0) == 0
    # the grid starts at δ = 0, so the search finds the exact factorization too
    assert booleanize(Xd, W * D, H / D[:, None]).error == 0
    # Y = WH is feasible with upper=None and a projection leaves it in place
    X = check_binary_matrix(Xd)
    y0 = (W @ H)[Xd]
    solver = MUSolver(
        Dataset.of(X),
        W.copy(),
        np.ascontiguousarray(H.T),
        project=True,
        lower=1.0,
        upper=np.inf,
        eps=1e-12,
        y=y0.copy(),
    )
    solver.step_y()
    np.testing.assert_allclose(solver.y, y0, rtol=1e-12)


def _objective_after_each_half_step(Xd, k, n_iter, seed, upper):
    X = check_binary_matrix(Xd)
    rng = np.random.default_rng(seed)
    W = rng.random((Xd.shape[0], k)) + 0.01
    Ht = rng.random((Xd.shape[1], k)) + 0.01
    solver = MUSolver(Dataset.of(X), W, Ht, project=True, lower=1.0, upper=upper, eps=1e-12)
    mask = Xd.astype(bool)

    def f():
        Y = np.zeros(Xd.shape)
        Y[mask] = solver.y
        return ref.objective(Y, solver.W, solver.Ht.T)

    values = [f()]
    for _ in range(n_iter):
        for step in (lambda: solver.step_w(0.0), lambda: solver.step_h(0.0), solver.step_y):
            step()
            values.append(f())
    return np.array(values)


def test_objective_non_increasing_at_every_half_step():
    rng = np.random.default_rng(0)
    Xd = rng.random((40, 30)) < 0.3
    Xd[np.arange(30), np.arange(30)] = True  # no empty rows or columns
    for upper in (4.0, np.inf):
        f = _objective_after_each_half_step(Xd, 4, 300, 1, upper)
        assert np.all(np.diff(f) <= 1e-9 * max(f[0], 1.0))


@given(st.integers(2, 10), st.integers(2, 10), st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_objective_non_increasing_random(n, m, k, seed):
    rng = np.random.default_rng(seed)
    Xd = rng.random((n, m)) < 0.5
    assume(Xd.any(axis=0).all() and Xd.any(axis=1).all())
    f = _objective_after_each_half_step(Xd, k, 30, seed, float(k))
    assert np.all(np.diff(f) <= 1e-9 * max(f[0], 1.0))


def test_loss_curve_is_the_objective_and_non_increasing():
    X, _, _ = make_boolean(30, 25, 3, 0.4, random_state=2)
    model = BANMF(3, max_iter=200, tol=None, random_state=0).fit(X)
    assert model.loss_curve_.shape == (200,)
    assert np.all(np.diff(model.loss_curve_) <= 1e-9 * model.loss_curve_[0])


@pytest.mark.parametrize("small", [True, False])  # the plain-loop kernels, or the vector ones
@pytest.mark.parametrize(
    "regularization, upper", [(None, "k"), (None, None), (0.3, "k"), ("logspace", None)]
)
def test_matches_dense_reference_implementation(regularization, upper, small, monkeypatch):
    from banmf.engine import iterations as mu

    if not small:
        monkeypatch.setattr(mu, "SMALL_WORK", 0)
    rng = np.random.default_rng(5)
    Xd = rng.random((15, 12)) < 0.4
    Xd[3] = False  # an empty row
    Xd[:, 5] = False  # an empty column
    k, n_iter = 3, 40
    W0, H0 = rng.random((15, k)) + 0.05, rng.random((k, 12)) + 0.05
    model = BANMF(
        k,
        regularization=regularization,
        upper=upper,
        max_iter=n_iter,
        tol=None,
        init="custom",
        normalize=None,
        extra_starts=(),  # the iterations' own factors, not an extra start's
        combine=False,
    ).fit(Xd, W=W0, H=H0)
    lams = {
        None: np.zeros(n_iter),
        0.3: np.full(n_iter, 0.3),
        "logspace": np.logspace(-4, 10, n_iter),
    }[regularization]
    W, H, _, f = ref.banmf(Xd, W0, H0, n_iter, lams, 1.0, k if upper == "k" else np.inf, 1e-12)
    np.testing.assert_allclose(model.W_continuous_, W, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(model.H_continuous_, H, rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(model.loss_curve_, f, rtol=1e-7, atol=1e-9)
    assert np.isfinite(model.W_continuous_).all()


def test_sparse_and_dense_inputs_give_identical_factors():
    X, _, _ = make_boolean(40, 30, 4, 0.3, random_state=3)
    fits = [
        BANMF(4, max_iter=100, random_state=7).fit(Xi)
        for Xi in (X, X.toarray(), sp.coo_matrix(X), X.toarray().astype(float).tolist())
    ]
    for other in fits[1:]:
        np.testing.assert_array_equal(other.W_continuous_, fits[0].W_continuous_)
        np.testing.assert_array_equal(other.components_, fits[0].components_)
        assert other.reconstruction_err_ == fits[0].reconstruction_err_


def test_reproducible_for_a_fixed_seed_and_seed_matters():
    X, _, _ = make_boolean(40, 30, 4, 0.3, random_state=3)
    a = BANMF(4, max_iter=50, random_state=1).fit(X)
    b = BANMF(4, max_iter=50, random_state=1).fit(X)
    c = BANMF(4, max_iter=50, random_state=np.random.default_rng(2)).fit(X)
    np.testing.assert_array_equal(a.W_continuous_, b.W_continuous_)
    np.testing.assert_array_equal(a.loss_curve_, b.loss_curve_)
    assert not np.array_equal(a.W_continuous_, c.W_continuous_)


def test_fitted_attributes_and_reported_error():
    X, _, _ = make_boolean(30, 20, 3, 0.5, noise=0.05, random_state=4)
    model = BANMF(3, regularization="logspace", max_iter=300, random_state=0, polish=False)
    W = model.fit_transform(X)
    H = model.components_
    assert W.shape == (30, 3) and W.dtype == bool and H.shape == (3, 20) and H.dtype == bool
    assert (
        model.reconstruction_err_ == boolean_error(X, W, H) == ref.boolean_error(X.toarray(), W, H)
    )
    assert isinstance(model.reconstruction_err_, int)
    assert model.relative_error_ == model.reconstruction_err_ / X.nnz
    np.testing.assert_array_equal(W, model.W_continuous_ > model.thresholds_[0])
    np.testing.assert_array_equal(H, model.H_continuous_ > model.thresholds_[1][:, None])
    assert model.n_iter_ == 300 and not model.interrupted_
    np.testing.assert_array_equal(
        model.inverse_transform(W).toarray(), boolean_product(W, H).toarray()
    )
    assert "regularization='logspace'" in repr(model)


def test_timings_cover_every_start_and_phase_that_ran():
    X, _, _ = make_boolean(40, 25, 3, 0.4, noise=0.05, random_state=1)
    model = BANMF(3, random_state=0, n_init=2).fit(X)
    timings = model.timings_
    starts = [*range(len(model.init_errors_)), *model.extra_start_errors_]
    assert list(timings) == [*starts, "fit"]
    assert {"iterations", "threshold search", "per-factor thresholds", "polish"} <= set(timings[0])
    assert "greedy factors" in timings["columns"] and "setup" in timings["nmf"]
    assert all(s >= 0 for phases in timings.values() for s in phases.values())
    assert 0 < timings["fit"]["starts"] <= model.fit_seconds_


def test_transform_recovers_planted_rows():
    X, _, _ = make_boolean(40, 30, 3, 0.4, random_state=0)
    model = BANMF(3, max_iter=500, random_state=0).fit(X)
    assert model.reconstruction_err_ == 0
    W_new = model.transform(X[:10])
    assert W_new.shape == (10, 3) and W_new.dtype == bool
    assert boolean_error(X[:10], W_new, model.components_) == 0
    with pytest.raises(ValueError, match="columns"):
        model.transform(np.ones((2, 5)))


def test_all_zero_x_warns_and_stays_finite():
    with pytest.warns(UserWarning, match="no nonzeros"):
        model = BANMF(2, max_iter=20, random_state=0).fit(np.zeros((5, 4)))
    assert model.reconstruction_err_ == 0 and model.relative_error_ == 0.0
    assert np.isfinite(model.W_continuous_).all() and np.isfinite(model.loss_curve_).all()


def test_empty_rows_columns_single_nonzero_and_tiny_shapes():
    Xd = np.zeros((6, 5))
    Xd[2, 3] = 1
    model = BANMF(1, max_iter=50, random_state=0).fit(Xd)
    assert model.reconstruction_err_ == 0
    assert np.isfinite(model.W_continuous_).all() and np.isfinite(model.H_continuous_).all()
    assert BANMF(1, max_iter=5, random_state=0).fit(np.ones((1, 1))).reconstruction_err_ == 0


def test_k_larger_than_min_shape_is_capped_with_a_warning():
    """The Boolean rank never exceeds min(n, m): the fit uses that many factors and says so
    (it used to fit all 5, two of them pointless)."""
    Xd = np.array([[1, 0, 1], [0, 1, 1]])
    with pytest.warns(UserWarning, match=r"exceeds min\(n, m\)=2: .* the fit uses 2"):
        model = BANMF(5, max_iter=300, random_state=0).fit(Xd)
    assert model.n_components == 5 and model.n_components_ == 2
    assert model.W_.shape == (2, 2) and model.components_.shape == (2, 3)
    assert model.reconstruction_err_ == 0
    assert model.transform(Xd).shape == (2, 2)


def test_float32_runs_and_agrees_with_float64():
    X, _, _ = make_boolean(50, 40, 4, 0.4, random_state=8)
    m64 = BANMF(4, max_iter=300, random_state=0).fit(X)
    m32 = BANMF(4, max_iter=300, random_state=0, dtype=np.float32).fit(X)
    assert m32.W_continuous_.dtype == np.float64  # thresholding is done in float64
    np.testing.assert_allclose(m32.loss_curve_[:20], m64.loss_curve_[:20], rtol=1e-3)
    assert abs(m32.reconstruction_err_ - m64.reconstruction_err_) <= 0.05 * X.nnz


def test_tol_stops_early_and_max_iter_warns():
    X, _, _ = make_boolean(30, 20, 3, 0.4, random_state=1)
    model = BANMF(3, max_iter=2000, tol=1e-6, random_state=0).fit(X)
    assert model.n_iter_ < 2000 and model.n_iter_ % 10 == 0
    with pytest.warns(ConvergenceWarning):
        BANMF(3, max_iter=15, tol=1e-12, random_state=0).fit(X)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_callback_can_stop_and_ctrl_c_is_clean(n_jobs):
    X, _, _ = make_boolean(30, 20, 3, 0.4, random_state=1)
    seen = []
    model = BANMF(
        3,
        max_iter=100,
        random_state=0,
        n_init=5,
        n_jobs=n_jobs,
        callback=lambda t, f: seen.append(f) or t >= 7,
    ).fit(X)
    # One after the other, the first start stops and no other begins; side by side, the other
    # running start stops too, at its 7th iteration or when told (if it is behind).
    assert 1 <= model.n_iter_ <= 7 and 7 <= len(seen) <= 7 * n_jobs
    assert 1 <= len(model.init_errors_) <= n_jobs

    def interrupt(t, f):
        if t == 5:
            raise KeyboardInterrupt

    model = BANMF(3, max_iter=100, random_state=0, n_init=5, n_jobs=n_jobs, callback=interrupt)
    with (
        pytest.warns(UserWarning, match="interrupted after 5 iterations"),
        pytest.raises(KeyboardInterrupt),
    ):
        model.fit(X)
    assert model.interrupted_ and 1 <= model.n_iter_ <= 5 and 1 <= len(model.init_errors_) <= n_jobs
    assert model.reconstruction_err_ == boolean_error(X, model.W_, model.components_)


def test_no_warnings_on_a_normal_fit():
    X, _, _ = make_boolean(30, 20, 3, 0.4, random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        BANMF(3, max_iter=20, random_state=0).fit(X)


def test_stopping_early_gives_exactly_the_factors_of_that_iteration():
    X, _, _ = make_boolean(30, 20, 3, 0.4, random_state=1)
    # The start's own factors: a stop by the callback ends the fit before the combination,
    # whose choice (here from GreConD's factors) the plain fit would keep.
    common = {"random_state": 0, "n_init": 1, "polish": False, "extra_starts": (), "combine": False}
    stopped = BANMF(3, max_iter=100, tol=None, callback=lambda t, f: t >= 9, **common).fit(X)
    converged = BANMF(3, max_iter=2000, tol=1e-4, **common).fit(X)
    auto = BANMF(3, max_iter=2000, **common).fit(X)  # tol="auto"
    assert converged.n_iter_ < 2000 and auto.n_iter_ < 2000 and auto.n_iter_ % 10 == 0
    for model in (stopped, converged, auto):
        plain = BANMF(3, max_iter=model.n_iter_, tol=None, **common).fit(X)
        np.testing.assert_array_equal(model.W_continuous_, plain.W_continuous_)
        np.testing.assert_array_equal(model.H_continuous_, plain.H_continuous_)
        np.testing.assert_array_equal(model.loss_curve_, plain.loss_curve_)


def test_auto_n_init_counts_the_whole_cost_of_a_start():
    from banmf.engine import auto_n_init

    def starts(shape, nnz, k, n_iter, **params):
        return auto_n_init(BANMF(k, **params)._check_params(k, shape, nnz), n_iter)

    # 13 iterations at 10⁶ nonzeros, k = 32: the refinements dominate; one start.
    assert starts((100_000, 10_000), 10**6, 32, 13, max_iter=13) == 1
    assert starts((101, 15), 660, 5, 1000) == 10  # Zoo
    assert starts((2000, 143), 147_632, 10, 1000) == 5  # LUCAP0
    assert starts((88_162, 16_470), 908_576, 5, 1000) == 1  # retail, a start of 1000 iterations
    assert starts((88_162, 16_470), 908_576, 5, 60) == 5  # one that tol="auto" stopped early
    assert BANMF(5, init="custom")._check_params(5, (101, 15), 660).n_init == 1


def test_auto_n_init_starts_no_more_than_the_least_cost_of_a_start_allows():
    """Before the first start ends, starts run side by side only up to the tier of the cheapest
    start possible (stopped at the first tolerance check): a start that must be the only one
    never shares its threads with one that would be dropped."""

    def most(shape, nnz, k, **params):
        return BANMF(k, **params)._check_params(k, shape, nnz).n_init

    assert most((101, 15), 660, 5) == 10  # Zoo
    assert most((88_162, 16_470), 908_576, 5) == 5  # retail at k = 5: tol may stop it early
    assert most((88_162, 16_470), 908_576, 50) == 1  # at k = 50 even 20 iterations cost too much
    assert most((88_162, 16_470), 908_576, 5, tol=None) == 1  # all 1000 iterations run
    assert most((2000, 143), 147_632, 10, tol=None) == 5  # LUCAP0


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_auto_n_init_is_decided_by_the_first_start_whatever_the_threads(n_jobs, monkeypatch):
    from banmf.engine import starts as module

    X, _, _ = make_boolean(40, 30, 4, 0.3, noise=0.05, random_state=2)
    monkeypatch.setattr(module, "AUTO_N_INIT", ((1, 10), (10**12, 3)))  # this X: 3 starts
    model = BANMF(4, max_iter=200, random_state=0, n_jobs=n_jobs).fit(X)
    assert model.n_init_ == 3 and len(model.init_errors_) == 3
    same = BANMF(4, max_iter=200, random_state=0, n_init=3, n_jobs=1).fit(X)
    assert model.init_errors_ == same.init_errors_
    np.testing.assert_array_equal(model.W_, same.W_)


def test_auto_tol_stops_plain_banmf_but_never_the_logspace_ramp():
    X, _, _ = make_boolean(30, 20, 3, 0.3, noise=0.05, random_state=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "auto" never warns when max_iter comes first
        plain = BANMF(3, max_iter=2000, n_init=1, random_state=0).fit(X)
        ramp = BANMF(3, max_iter=300, n_init=1, regularization="logspace", random_state=0).fit(X)
        BANMF(3, max_iter=20, n_init=1, random_state=0).fit(X)
    assert plain.n_iter_ < 2000 and ramp.n_iter_ == 300
    with pytest.raises(ValueError, match="tol"):
        BANMF(3, tol="fast").fit(X)
    with pytest.raises(ValueError, match="tol"):
        BANMF(3, tol=-1.0).fit(X)


@pytest.mark.parametrize("k", [15, 10_000, 10**6])
def test_an_exact_start_ends_the_starts_and_huge_k_is_capped(k):
    """Zoo (101×15) at k >= 15: the "columns" start is exact, so no other start runs (all 10
    random starts and the NMF start used to run after it: k = 15 took 85 s on a busy machine,
    k = 10000 minutes and 11.9 GB, k = 10⁶ failed after 9 s)."""
    X = load_zoo().X
    context = (
        pytest.warns(UserWarning, match="the fit uses 15") if k > 15 else warnings.catch_warnings()
    )
    with context:
        model = BANMF(k, random_state=0).fit(X)
    assert model.n_components_ == 15 and model.W_.shape == (101, 15)
    assert model.components_.shape == (15, 15) and model.reconstruction_err_ == 0
    assert model.best_start_ == "columns" and model.extra_start_errors_ == {"columns": 0}
    assert model.init_errors_ == [] and model.n_starts_ == 1 and model.n_iter_ == 0


def test_an_exact_random_start_ends_the_starts_whatever_the_threads():
    X = make_boolean(40, 30, 3, 0.3, random_state=2)[0]
    models = [
        BANMF(3, n_init=6, random_state=0, n_jobs=jobs, extra_starts=("nmf", "columns")).fit(X)
        for jobs in (1, 2)
    ]
    for model in models:
        assert model.reconstruction_err_ == 0 and model.best_start_ == len(model.init_errors_) - 1
        assert "nmf" not in model.extra_start_errors_  # nothing runs after an exact start
        assert model.n_starts_ == len(model.init_errors_) + len(model.extra_start_errors_)
    assert models[0].init_errors_ == models[1].init_errors_
    np.testing.assert_array_equal(models[0].W_, models[1].W_)


def test_verbose_counts_every_start_on_one_scale(caplog):
    """Random and extra starts are numbered together (they were "start 2/5 … start 2/3")."""
    X = make_boolean(60, 40, 4, 0.3, noise=0.05, random_state=0)[0]
    with caplog.at_level(logging.INFO, logger="banmf.progress"):
        model = BANMF(4, n_init=3, max_iter=40, random_state=0).fit(X)
    assert model.n_starts_ == 6 and model.reconstruction_err_ > 0
    done = [r.banmf for r in caplog.records if r.banmf["event"] == "done"]
    # (random starts side by side may finish in any order)
    assert sorted((d["start"], d["n_starts"], d.get("name") or "") for d in done) == [
        (1, 6, "columns"),
        (2, 6, ""),
        (3, 6, ""),
        (4, 6, ""),
        (5, 6, "nmf"),
        (6, 6, "combined"),
    ]
    assert "start 5/6 (nmf): error" in caplog.text
