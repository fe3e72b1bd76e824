"""ELBMF: its kernels against dense oracles, its iterates against a dense port of the published
algorithm (tests/reference.py), and the estimator's unknown cells, precision, threads and
interruptions."""

import signal
import warnings

import numpy as np
import pytest
import reference as ref
import scipy.sparse as sp
from conftest import run_both
from hypothesis import given
from hypothesis import strategies as st

import banmf
from banmf import ELBMF, make_boolean
from banmf._kernels.elbmf import PARTS, Prox, observed_sums, prox_step, support_gradient
from banmf._kernels.sparse import Sparse
from banmf.io import Dataset
from banmf.models import elbmf as module

FORMS = ["all", "missing", "observed"]


@st.composite
def problems(draw, max_n=7, max_m=7, ks=(1, 2, 3, 5)):
    """X (dense bool), the listed cells in one form (dense bool: the unknown cells, or the
    observed zeros), whether they are the observed zeros, and factors F (n, k), Ot (m, k) in a
    dtype; small shapes make empty rows and columns and an all-zero X common."""
    n = draw(st.integers(1, max_n))
    m = draw(st.integers(1, max_m))
    k = draw(st.sampled_from(ks))
    form = draw(st.sampled_from(FORMS))
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    X = rng.random((n, m)) < draw(st.sampled_from([0.0, 0.2, 0.6, 1.0]))
    if form == "all":
        cells = np.zeros((n, m), dtype=bool)
    else:
        cells = (rng.random((n, m)) < 0.4) & ~X  # never on a one, as banmf's Unknown
    F = rng.random((n, k)).astype(dtype)
    Ot = rng.random((m, k)).astype(dtype)
    return X, cells, form == "observed", F, Ot


def sparse(B):
    S = sp.csr_array(B)
    return Sparse(S.indptr.astype(np.int32), S.indices.astype(np.int32))


def tol(dtype):
    return 1e-12 if dtype == np.float64 else 1e-4


@given(problems())
def test_support_gradient_is_the_dense_sparse_part_of_the_gradient(problem):
    X, cells, listed, F, Ot = problem
    out = np.full_like(F, np.nan)
    C = sparse(cells) if cells.any() else None
    run_both(support_gradient, sparse(X), C, F, Ot, listed, out)
    expected = ref.elbmf_support_gradient(X, cells, F, Ot, listed)
    np.testing.assert_allclose(out, expected, rtol=tol(F.dtype), atol=tol(F.dtype) * 10)


@given(problems(), st.floats(0.01, 2.0), st.floats(0.0, 0.1), st.floats(0.0, 1e3), st.booleans())
def test_prox_step_is_the_elastic_prox_of_a_gradient_step(problem, eta, l1, l2, gram):
    _, _, _, F, Ot = problem
    P = np.random.default_rng(0).standard_normal(F.shape).astype(F.dtype)
    G = Ot.astype(np.float64).T @ Ot.astype(np.float64)
    F64 = F.astype(np.float64)
    step = F64 - eta * ((F64 @ G if gram else 0.0) + P)
    expected = ref.elbmf_prox(step, eta * l1, eta * l2)
    run_both(prox_step, F, P, G, Prox(eta, l1, l2, gram))
    np.testing.assert_allclose(F, expected, rtol=tol(F.dtype), atol=tol(F.dtype))
    assert (F >= 0).all()


@given(problems())
def test_observed_sums_are_the_dense_sums(problem):
    X, cells, _, F, Ot = problem
    out = np.full((PARTS, 3), np.nan)
    C = sparse(cells) if cells.any() else None
    run_both(observed_sums, sparse(X), C, F, Ot, out)
    expected = ref.elbmf_observed_sums(X, cells, F, Ot)
    np.testing.assert_allclose(out.sum(axis=0), expected, rtol=1e-12, atol=1e-12)


def test_prox_pulls_to_the_nearer_of_zero_and_one():
    x = np.array([-0.3, 0.0, 0.2, 0.5, 0.51, 1.0, 1.7])
    y = ref.elbmf_prox(x, 0.0, 1e12)
    np.testing.assert_allclose(y, [0, 0, 0, 0, 1, 1, 1], atol=1e-11)
    G = np.zeros((1, 1))
    F = x[:, None].copy()
    prox_step.serial(F, np.zeros_like(F), G, Prox(1.0, 0.0, 1e12, True))
    np.testing.assert_allclose(F[:, 0], y, atol=0)


# ------------------------------------------------------------------ the iterates and the oracle


def masks(X, form, seed=3):
    """``missing=`` / ``observed=`` for X (dense), and the observed cells (dense bool)."""
    rng = np.random.default_rng(seed)
    if form == "all":
        return {}, np.ones(X.shape, dtype=bool)
    if form == "missing":
        M = rng.random(X.shape) < 0.1
        return {"missing": M}, ~M
    O = (rng.random(X.shape) < 0.6) | X.astype(bool)
    return {"observed": O}, O


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("beta", [1e-4, 0.0])
def test_the_sparse_iterates_are_the_dense_algorithms(form, beta):
    X = make_boolean(25, 18, 3, 0.3, noise=0.05, random_state=1)[0].toarray()
    kw, observed = masks(X, form)
    data = Dataset.of(X, **kw)
    rng = np.random.default_rng(7)
    U0, V0 = rng.random((25, 3)), rng.random((3, 18))
    run = module.ipalm(
        data, U0.copy(), np.ascontiguousarray(V0.T), max_iter=60, tol=None, beta=beta
    )
    Xo = X.astype(bool) & observed  # a one on an unknown cell is not observed
    U, V, losses = ref.elbmf(Xo, U0, V0, 60, beta=beta, observed=observed)
    np.testing.assert_allclose(run.losses, losses, rtol=1e-9)
    np.testing.assert_allclose(run.U, U, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(run.Vt.T, V, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("form", FORMS)
def test_the_estimator_gives_the_oracles_factors(form):
    X = make_boolean(30, 20, 3, 0.3, noise=0.03, random_state=2)[0].toarray()
    kw, observed = masks(X, form)
    model = ELBMF(3, random_state=5).fit(X, **kw)
    rng = np.random.default_rng(5)
    U0, V0 = rng.random((30, 3)), rng.random((3, 20))
    Xo = X.astype(bool) & observed
    U, V, losses = ref.elbmf(Xo, U0, V0, 3000, tol=1e-8, observed=observed)
    assert model.converged_ and model.n_iter_ == len(losses)
    np.testing.assert_array_equal(model.W_, U > 0.5)
    np.testing.assert_array_equal(model.components_, V > 0.5)
    assert model.reconstruction_err_ == ref.boolean_error(Xo, U > 0.5, V > 0.5, observed)
    np.testing.assert_allclose(model.loss_curve_, losses, rtol=1e-9, atol=1e-9)


def test_the_loss_is_the_observed_cells_only():
    X = make_boolean(20, 15, 2, 0.4, random_state=0)[0].toarray()
    M = np.zeros(X.shape, dtype=bool)
    M[:5] = True  # the first five rows unknown
    model = ELBMF(2, random_state=0, max_iter=20, tol=None).fit(X, missing=M)
    U, V = model.W_continuous_, model.H_continuous_
    expected = float((((X - U @ V) ** 2) * ~M).sum())
    assert model.loss_curve_[-1] == pytest.approx(expected, rel=1e-10)


# ------------------------------------------------------------------ the estimator


def test_float32_follows_float64_within_its_precision():
    X = make_boolean(40, 30, 3, 0.3, noise=0.02, random_state=0)[0]
    a = ELBMF(3, random_state=0, max_iter=40, tol=None).fit(X)
    b = ELBMF(3, random_state=0, max_iter=40, tol=None, dtype=np.float32).fit(X)
    assert b.W_continuous_.dtype == np.float32
    # The loss is a sum of n·m terms each carrying float32's unit roundoff.
    rtol = X.shape[0] * X.shape[1] * np.finfo(np.float32).eps
    np.testing.assert_allclose(b.loss_curve_, a.loss_curve_, rtol=rtol)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("form", FORMS)
def test_same_seed_same_bits_whatever_the_threads(dtype, form, monkeypatch):
    import banmf.runtime.threads as threads

    monkeypatch.setattr(threads, "PARALLEL_MIN_WORK", 0)  # the parallel variants on small data
    X = make_boolean(60, 40, 4, 0.3, noise=0.03, random_state=3)[0].toarray()
    kw, _ = masks(X, form)
    fits = [
        ELBMF(4, random_state=1, max_iter=50, tol=None, dtype=dtype, n_jobs=j).fit(X, **kw)
        for j in (1, 2)
    ]
    np.testing.assert_array_equal(fits[0].W_continuous_, fits[1].W_continuous_, strict=True)
    np.testing.assert_array_equal(fits[0].H_continuous_, fits[1].H_continuous_, strict=True)
    np.testing.assert_array_equal(fits[0].loss_curve_, fits[1].loss_curve_, strict=True)


def test_recovers_planted_factors_and_ends_boolean():
    X = make_boolean(60, 40, 3, 0.3, random_state=4)[0]
    model = ELBMF(3, random_state=0).fit(X)
    assert model.converged_ and model.relative_error_ < 0.1
    U = model.W_continuous_
    assert np.all((U < 1e-6) | (np.abs(U - 1) < 1e-6))


def test_max_iter_ends_the_fit_without_a_warning_and_converged_says_so():
    X = make_boolean(20, 15, 2, 0.4, random_state=0)[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = ELBMF(2, max_iter=5, random_state=0).fit(X)
    assert model.n_iter_ == 5 and not model.converged_
    assert model.W_.dtype == bool


@pytest.mark.parametrize(
    "params, match",
    [
        ({"beta": 1.0}, "beta"),
        ({"l1": -1.0}, "l1"),
        ({"regularization_rate": 0}, "regularization_rate"),
        ({"dtype": np.int32}, "dtype"),
        ({"tol": -1.0}, "tol"),
    ],
)
def test_bad_parameters_are_refused_by_name(params, match):
    with pytest.raises(ValueError, match=match):
        ELBMF(2, **params).fit(np.eye(4))


def test_factorize_and_the_registry_reach_it():
    X = make_boolean(20, 15, 2, 0.4, random_state=0)[0]
    r = banmf.factorize(X, 2, method="elbmf", random_state=0, max_iter=300, tol=None)
    assert r.method == "elbmf" and isinstance(r.estimator, ELBMF)
    assert r.error == ELBMF(2, random_state=0, max_iter=300, tol=None).fit(X).reconstruction_err_
    assert len(r.loss_curve) == r.n_iter


def test_the_first_ctrl_c_keeps_the_iterations_done(monkeypatch):
    X = make_boolean(30, 20, 3, 0.3, random_state=0)[0]
    real = module.StartProgress.iteration

    def signal_at_five(self, t, objective):
        real(self, t, objective)
        if t == 5:
            signal.raise_signal(signal.SIGINT)  # deferred to the iteration's end

    monkeypatch.setattr(module.StartProgress, "iteration", signal_at_five)
    model = ELBMF(3, random_state=0, polish=True)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X)
    assert model.interrupted_ and model.n_iter_ == 5
    assert model.polish_rounds_ == 0  # the polish is skipped
    assert model.reconstruction_err_ == banmf.boolean_error(X, model.W_, model.components_)


def test_a_ctrl_c_raised_inside_a_step_keeps_the_last_iterates(monkeypatch):
    X = make_boolean(30, 20, 3, 0.3, random_state=0)[0]
    real, calls = module._Side.step, []

    def step(self, *args):
        calls.append(1)
        if len(calls) == 7:  # the fourth iteration's U step
            self.F, self.prev = self.prev, self.F  # as if stopped after the extrapolation
            self._extrapolated = True
            raise KeyboardInterrupt
        real(self, *args)

    monkeypatch.setattr(module._Side, "step", step)
    model = ELBMF(3, random_state=0)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X)
    assert model.interrupted_ and model.n_iter_ == 3
    reference = ELBMF(3, random_state=0, max_iter=3, tol=None).fit(X)
    np.testing.assert_array_equal(model.W_continuous_, reference.W_continuous_)
