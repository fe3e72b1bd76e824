"""One suite over every registered method, then the facts particular to each."""

import warnings

import numpy as np
import pytest
import reference as ref
import scipy.sparse as sp

from banmf import (
    ASSO,
    METHODS,
    NMF,
    PNLPF,
    GreConD,
    ZhangThreshold,
    boolean_error,
    factorize,
    make_boolean,
)
from banmf.models.asso import TAU_GRID


def fast(method: str) -> dict:
    """Settings that keep a test fit short: iteration counts capped at 100."""
    params = METHODS[method]._param_names()
    return {name: 100 for name in params if name in ("max_iter", "init_iter")}


FAST = {method: fast(method) for method in METHODS}


def test_the_registry_feeds_the_command_line_and_the_docs():
    from pathlib import Path

    from banmf.cli import build_parser
    from banmf.models._base import BaseFactorization

    assert all(issubclass(cls, BaseFactorization) for cls in METHODS.values())
    assert len(set(METHODS.values())) == len(METHODS)
    factorize_help = build_parser()._subparsers._group_actions[0].choices["factorize"].format_help()
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    for name in METHODS:
        assert name in factorize_help and f"`{name}`" in readme


@pytest.fixture(scope="module")
def planted():
    X, _, _ = make_boolean(30, 25, 3, 0.3, noise=0.02, random_state=1)
    return X


@pytest.mark.parametrize("method", sorted(METHODS))
def test_common_contract(method, planted):
    X = planted
    r = factorize(X, 3, method=method, random_state=0, **FAST[method])
    assert r.W.shape == (30, 3) and r.H.shape == (3, 25)
    assert r.W.dtype == bool and r.H.dtype == bool
    assert r.error == boolean_error(X, r.W, r.H) == ref.boolean_error(X.toarray(), r.W, r.H)
    assert r.relative_error == r.error / X.nnz
    assert r.seconds > 0 and r.n_iter >= 1 and r.method == method
    assert r.params["n_components"] == 3
    again = factorize(X.toarray(), 3, method=method, random_state=0, **FAST[method])
    np.testing.assert_array_equal(again.W, r.W)
    np.testing.assert_array_equal(again.H, r.H)


@pytest.mark.parametrize("method", sorted(METHODS))
def test_common_bad_input(method):
    cls = METHODS[method]
    with pytest.raises(ValueError, match="not 0 or 1"):
        cls(2).fit(np.array([[0, 2], [1, 0]]))
    with pytest.raises(ValueError, match="NaN"):
        cls(2).fit(np.array([[0, np.nan], [1, 0]]))
    with pytest.raises(ValueError, match="empty"):
        cls(2).fit(np.zeros((0, 3)))
    with pytest.raises(ValueError, match="2-D"):
        cls(2).fit(np.ones(3))
    with pytest.raises((ValueError, TypeError), match="n_components"):
        cls(0).fit(np.eye(3))


@pytest.mark.parametrize("method", sorted(METHODS))
def test_common_degenerate_inputs(method):
    cls = METHODS[method]
    params = FAST[method]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # all-zero X warns for the MU methods
        est = cls(2, random_state=0, **params).fit(np.zeros((5, 4)))
    assert est.reconstruction_err_ == 0
    assert not ref.boolean_product(est.W_, est.components_).any()
    Xd = np.zeros((6, 5), dtype=int)
    Xd[1:4, 1:3] = 1  # empty rows and columns around one block
    est = cls(1, random_state=0, **params).fit(sp.csr_matrix(Xd))
    assert est.reconstruction_err_ == 0
    for attr in ("W_continuous_", "H_continuous_", "loss_curve_"):
        if hasattr(est, attr):
            assert np.isfinite(getattr(est, attr)).all()


def test_factorize_rejects_unknown_method_and_parameter():
    with pytest.raises(ValueError, match="unknown method 'svd'"):
        factorize(np.eye(3), 2, method="svd")
    with pytest.raises(ValueError, match="no parameter"):
        factorize(np.eye(3), 2, method="asso", gamma=3)


def test_asso_recovers_disjoint_blocks():
    Xd = np.zeros((12, 10), dtype=int)
    Xd[0:4, 0:3] = Xd[4:9, 3:7] = Xd[9:12, 7:10] = 1
    est = ASSO(3).fit(Xd)
    assert est.reconstruction_err_ == 0 and est.n_iter_ == 3
    for tau in (0.3, 1.0):
        assert ASSO(1, tau=tau).fit(np.ones((4, 5))).reconstruction_err_ == 0
    assert set(est.tau_errors_) == set(TAU_GRID)
    with pytest.raises(ValueError, match="tau"):
        ASSO(2, tau=1.5).fit(Xd)


def test_grecond_never_covers_a_zero_and_is_exact_when_unlimited():
    rng = np.random.default_rng(3)
    for seed in range(10):
        Xd = (np.random.default_rng(seed).random((20, 15)) < rng.uniform(0.1, 0.6)).astype(int)
        full = GreConD().fit(Xd)
        assert full.reconstruction_err_ == 0
        for k in (1, 3):
            est = GreConD(k).fit(Xd)
            prod = ref.boolean_product(est.W_, est.components_)
            assert not (prod & (Xd == 0)).any()
            assert est.components_.shape == (k, 15)


def test_nmf_objective_non_increasing():
    X, _, _ = make_boolean(40, 30, 4, 0.3, random_state=0)
    est = NMF(4, max_iter=300, random_state=0).fit(X)
    assert np.all(np.diff(est.loss_curve_) <= 1e-9 * est.loss_curve_[0])


def test_nmf_matches_dense_lee_seung():
    rng = np.random.default_rng(2)
    Xd = rng.random((12, 9)) < 0.4
    W0, H0 = rng.random((12, 2)) + 0.1, rng.random((2, 9)) + 0.1
    est = NMF(2, max_iter=25, init="custom", normalize=None).fit(Xd, W=W0, H=H0)
    W, H, _, f = ref.banmf(Xd, W0, H0, 25, np.zeros(25), 1.0, np.inf, 1e-12, project=False)
    np.testing.assert_allclose(est.W_continuous_, W, rtol=1e-9)
    np.testing.assert_allclose(est.loss_curve_, f, rtol=1e-9)


@pytest.mark.parametrize("method", ["reg-banmf", "reg-nmf", "pnlpf"])
def test_penalized_methods_end_near_boolean_on_planted_data(method):
    X, _, _ = make_boolean(40, 40, 3, 0.4, random_state=5)
    est = factorize(X, 3, method=method, random_state=0).estimator
    W, H = est.W_continuous_, est.H_continuous_

    def dist(F):
        return np.abs(F - np.round(F)).max()

    assert dist(W) < 0.05 and dist(H) < 0.05
    assert est.relative_error_ < 0.05


def test_dense_methods_refuse_inputs_over_budget():
    X = sp.random(3000, 3000, density=1e-4, format="csr", random_state=0) > 0
    for cls in (PNLPF, ZhangThreshold):
        with pytest.raises(ValueError, match="dense_budget"):
            cls(2, dense_budget=1_000_000).fit(X)


@pytest.mark.filterwarnings("ignore:n_components=.*exceeds")
@pytest.mark.parametrize("w_neg", [1.0, 0.5, 3.0])
def test_asso_matches_dense_reference(w_neg):
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=30, deadline=None)
    @given(
        st.integers(1, 14),
        st.integers(1, 12),
        st.floats(0.1, 0.7),
        st.integers(1, 4),
        st.sampled_from([0.3, 0.6, 0.9, 1.0]),
        st.integers(0, 2**31),
    )
    def check(n, m, density, k, tau, seed):
        Xd = np.random.default_rng(seed).random((n, m)) < density
        W, H = ref.asso(Xd, min(k, n, m), tau, 1.0, w_neg)  # k past min(n, m) is capped
        est = ASSO(k, tau=tau, w_neg=w_neg).fit(Xd)
        np.testing.assert_array_equal(est.W_, W)
        np.testing.assert_array_equal(est.components_, H)

    check()


@pytest.mark.filterwarnings("ignore:n_components=.*exceeds")
def test_grecond_matches_dense_reference():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=40, deadline=None)
    @given(
        st.integers(1, 70),
        st.integers(1, 10),
        st.floats(0.1, 0.8),
        st.sampled_from([None, 1, 3]),
        st.integers(0, 2**31),
    )
    def check(n, m, density, k, seed):
        Xd = np.random.default_rng(seed).random((n, m)) < density
        W, H = ref.grecond(Xd, k and min(k, n, m))  # k past min(n, m) is capped
        est = GreConD(k).fit(Xd)
        np.testing.assert_array_equal(est.W_, W)
        np.testing.assert_array_equal(est.components_, H)

    check()
