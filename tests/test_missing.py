"""Unknown cells, end to end: the masked objective and counts against dense oracles, values
under the mask never read, an all-observed mask is no mask, every method, completion and
held-out scores."""

import warnings

import numpy as np
import pytest
import reference as ref
import scipy.sparse as sp
from conftest import binary_matrices, observed_and_unknown
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import banmf
from banmf import (
    BANMF,
    METHODS,
    NMF,
    boolean_error,
    booleanize,
    error_counts,
    factorize,
    polish,
    predict_cells,
    refine_thresholds,
    swap_factors,
)
from banmf.data.masks import mismatches
from banmf.data.validation import check_binary_matrix
from banmf.engine import iterations as mu
from banmf.engine.iterations import MUSolver
from banmf.exceptions import InputError
from banmf.io import Dataset
from banmf.model_selection import held_out_scores, hold_out, mask_entries

FORMS = ("missing", "observed")


def masks(form, unknown):
    """The keyword a fit takes for these unknown cells (dense bool)."""
    return {"missing": unknown} if form == "missing" else {"observed": ~unknown}


@st.composite
def masked(draw, max_n=10, max_m=10):
    """(X, unknown, form): random 0/1 data, random unknown cells (some ones among them)."""
    Xd = draw(binary_matrices(max_n=max_n, max_m=max_m)).astype(bool)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    unknown = rng.random(Xd.shape) < draw(st.sampled_from([0.0, 0.1, 0.4, 0.9]))
    return Xd, unknown, draw(st.sampled_from(FORMS))


def boolean_factors(rng, shape, k, p=0.4):
    n, m = shape
    return rng.random((n, k)) < p, rng.random((k, m)) < p


# ---------------------------------------------------------------------------- the data type


def test_check_unknown_drops_the_ones_under_the_mask_and_agrees_in_both_forms():
    Xd = np.array([[1, 1, 0], [0, 1, 1]], dtype=bool)
    M = np.array([[0, 1, 1], [0, 0, 0]], dtype=bool)
    X = check_binary_matrix(Xd)
    Xm, um = observed_and_unknown(X, missing=M)
    Xo, uo = observed_and_unknown(X, observed=~M)
    for Xk in (Xm, Xo):
        assert Xk.toarray().tolist() == (Xd & ~M).tolist()
    assert (um.observed, uo.observed) == (False, True)
    assert um.cells.toarray().tolist() == M.tolist()
    assert uo.cells.toarray().tolist() == (~M & ~Xd).tolist()  # the observed zeros
    assert um.observed_count(Xm.nnz) == uo.observed_count(Xo.nnz) == 4
    # nothing unknown is no mask
    assert observed_and_unknown(X, missing=np.zeros((2, 3)))[1] is None
    assert observed_and_unknown(X, observed=np.ones((2, 3)))[1] is None
    assert observed_and_unknown(X)[1] is None


def test_bad_masks_are_refused_with_their_name():
    X = check_binary_matrix(np.eye(3))
    with pytest.raises(ValueError, match="give missing or observed, not both"):
        observed_and_unknown(X, missing=np.eye(3), observed=np.eye(3))
    with pytest.raises(ValueError, match=r"missing has shape \(2, 3\) but X has shape \(3, 3\)"):
        observed_and_unknown(X, missing=np.ones((2, 3)))
    with pytest.raises(ValueError, match="observed has 1 entry that is not 0 or 1"):
        observed_and_unknown(X, observed=np.diag([1, 2, 1]))
    with pytest.raises(TypeError, match="missing must hold numbers"):
        observed_and_unknown(X, missing=np.array([["a"] * 3] * 3))


# ------------------------------------------------------------------------ counts and search


@given(masked(), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_error_counts_are_over_the_observed_cells(problem, k, seed):
    Xd, unknown, form = problem
    W, H = boolean_factors(np.random.default_rng(seed), Xd.shape, k)
    want = ref.boolean_error(Xd, W, H, ~unknown)
    assert boolean_error(Xd, W, H, **masks(form, unknown)) == want
    fn, fp = error_counts(Xd, W, H, **masks(form, unknown))
    P = ref.boolean_product(W, H)
    assert (fn, fp) == (int((Xd & ~P & ~unknown).sum()), int((~Xd & P & ~unknown).sum()))
    X, unk = observed_and_unknown(Xd, **masks(form, unknown))
    assert mismatches(X, W, H, unk) == want


@settings(max_examples=40)
@given(masked(), st.integers(1, 3), st.integers(0, 2**32 - 1), st.sampled_from([2, 5, 9]))
def test_threshold_search_finds_the_best_observed_error_on_the_grid(problem, k, seed, P):
    Xd, unknown, form = problem
    rng = np.random.default_rng(seed)
    W, H = rng.random((Xd.shape[0], k)), rng.random((k, Xd.shape[1]))
    exhaustive = booleanize(Xd, W, H, P, search="exhaustive", **masks(form, unknown))
    Ws, Hs = exhaustive.info["W_scaled"], exhaustive.info["H_scaled"]
    grid = ref.grid_errors(Xd, Ws, Hs, P, ~unknown)
    np.testing.assert_array_equal(exhaustive.info["error_grid"], grid)
    for search in ("pruned", "coordinate"):
        res = booleanize(Xd, W, H, P, search=search, **masks(form, unknown))
        assert res.error == ref.boolean_error(Xd, res.W, res.H, ~unknown)
        if search == "pruned":  # the first grid point of the lowest error
            assert res.error == grid.min()
            s, t = divmod(int(np.argmin(grid)), P)
            np.testing.assert_array_equal(res.W, Ws > np.linspace(0, Ws.max(), P)[s])


@settings(max_examples=40)
@given(masked(), st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_refinements_count_the_observed_cells_and_never_raise_the_error(problem, k, seed):
    Xd, unknown, form = problem
    rng = np.random.default_rng(seed)
    W, H = boolean_factors(rng, Xd.shape, k)
    given_masks = masks(form, unknown)
    start = ref.boolean_error(Xd, W, H, ~unknown)
    for method in ("exact", "flip"):
        res = polish(Xd, W, H, method=method, **given_masks)
        assert res.error == ref.boolean_error(Xd, res.W, res.H, ~unknown) <= start
        assert res.info["history"] == sorted(res.info["history"], reverse=True)
        if method == "exact":  # every row is the best it can be given H, and every column
            errs = ref.row_errors(Xd, res.H, ~unknown)
            codes = res.W.astype(int) @ (1 << np.arange(k))
            np.testing.assert_array_equal(errs[np.arange(len(codes)), codes], errs.min(axis=1))
    sw = swap_factors(Xd, W, H, **given_masks)
    assert sw.error == ref.boolean_error(Xd, sw.W, sw.H, ~unknown) <= start
    Wc, Hc = rng.random(W.shape), rng.random(H.shape)
    th = refine_thresholds(Xd, Wc, Hc, 0.5, 0.5, **given_masks)
    assert th.error == ref.boolean_error(Xd, th.W, th.H, ~unknown)
    assert th.error <= ref.boolean_error(Xd, Wc > 0.5, Hc > 0.5, ~unknown)


# ------------------------------------------------------------------- the relaxed objective


@pytest.mark.parametrize("small", [True, False])  # the plain-loop kernels, or the vector ones
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("project", [True, False])
def test_masked_objective_matches_the_oracle_and_never_rises(small, form, project, monkeypatch):
    if not small:
        monkeypatch.setattr(mu, "SMALL_WORK", 0)
    rng = np.random.default_rng(3)
    Xd = rng.random((40, 30)) < 0.3
    unknown = rng.random(Xd.shape) < 0.25
    k = 4
    X, unk = observed_and_unknown(Xd, **masks(form, unknown))
    W, Ht = rng.random((40, k)) + 0.01, rng.random((30, k)) + 0.01
    lower, upper = (1.0, float(k)) if project else (1.0, 1.0)  # NMF: Y = X on the ones
    solver = MUSolver(
        Dataset.trusted(X, unk), W, Ht, project=project, lower=1.0, upper=float(k), eps=1e-12
    )
    values = solver.iterate(np.zeros(60))
    assert np.all(np.diff(values) <= 1e-9 * values[0])
    oracle = ref.masked_objective(Xd & ~unknown, solver.W, solver.Ht.T, lower, upper, ~unknown)
    assert values[-1] == pytest.approx(oracle, rel=1e-9)


@given(masked(max_n=9, max_m=9), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_the_two_forms_run_the_same_iteration(problem, k, seed):
    Xd, unknown, _ = problem
    rng = np.random.default_rng(seed)
    W, Ht = rng.random((Xd.shape[0], k)) + 0.01, rng.random((Xd.shape[1], k)) + 0.01
    runs = []
    for form in FORMS:
        X, unk = observed_and_unknown(Xd, **masks(form, unknown))
        solver = MUSolver(
            Dataset.trusted(X, unk), W, Ht, project=True, lower=1.0, upper=float(k), eps=1e-12
        )
        runs.append((solver.iterate(np.zeros(15)), solver.W.copy()))
    np.testing.assert_allclose(runs[0][0], runs[1][0], rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(runs[0][1], runs[1][1], rtol=1e-6, atol=1e-9)


@st.composite
def exact_problems(draw, max_n=10, max_m=10, max_k=3):
    n, m, k = draw(st.integers(1, max_n)), draw(st.integers(1, max_m)), draw(st.integers(1, max_k))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    W0, H0 = rng.random((n, k)) < 0.4, rng.random((k, m)) < 0.4
    return W0, H0, rng.random((n, m)) < 0.3, rng.random((n, m)) < 0.5


@given(exact_problems(), st.sampled_from(FORMS))
def test_exactness_theorems_hold_on_the_observed_cells(problem, form):
    W0, H0, unknown, noise = problem
    k = W0.shape[1]
    truth = ref.boolean_product(W0, H0)
    Xd = np.where(unknown, noise, truth)  # anything at all under the mask
    X, unk = observed_and_unknown(Xd, **masks(form, unknown))
    # Theorem 1: the exact factors with Y = W0 H0 are a fixed point of zero objective
    Y = W0.astype(float) @ H0.astype(float)
    y0 = Y[truth & ~unknown]
    W, Ht = W0.astype(float), np.ascontiguousarray(H0.T, dtype=float)
    solver = MUSolver(
        Dataset.trusted(X, unk),
        W,
        Ht,
        project=True,
        lower=1.0,
        upper=float(k),
        eps=1e-12,
        y=y0.copy(),
    )
    assert solver.objective() == pytest.approx(0.0, abs=1e-9)
    solver.iterate(np.zeros(1))
    live_w, live_h = H0.any(axis=1), W0.any(axis=0)
    np.testing.assert_allclose(solver.W[:, live_w], W0[:, live_w], rtol=1e-9, atol=0)
    np.testing.assert_allclose(solver.Ht[:, live_h], H0.T[:, live_h], rtol=1e-9, atol=0)
    assert solver.objective() == pytest.approx(0.0, abs=1e-9)
    # Theorem 2: thresholding exact factors at 0 fits every observed cell
    assert booleanize(Xd, W, H0.astype(float), **masks(form, unknown)).error == 0
    assert boolean_error(Xd, W0, H0, **masks(form, unknown)) == 0


# ---------------------------------------------------------------------------- every method


def make(name, **extra):
    """A quick estimator of every method (few iterations, fixed seed)."""
    cls = METHODS[name]
    params = {"random_state": 0, **extra}
    names = set(cls._param_names())
    if "max_iter" in names:
        params["max_iter"] = 30
    if "init_iter" in names:
        params["init_iter"] = 10
    if "n_init" in names:
        params["n_init"] = 2
    return cls(2, **params)


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", list(METHODS))
@settings(max_examples=8, deadline=None)
@given(masked(max_n=12, max_m=9), st.integers(0, 2**32 - 1))
def test_values_under_the_mask_are_never_read(name, problem, seed):
    Xd, unknown, form = problem
    if form == "observed" and name in ("asso", "grecond"):
        form = "missing"
    if unknown.all():  # nothing observed: every method refuses to fit
        with pytest.raises(ValueError, match="every cell of X is unknown"):
            make(name).fit(Xd, **masks(form, unknown))
        return
    other = np.where(unknown, np.random.default_rng(seed).random(Xd.shape) < 0.5, Xd)
    a = make(name).fit(Xd, **masks(form, unknown))
    b = make(name).fit(other, **masks(form, unknown))
    np.testing.assert_array_equal(a.W_, b.W_)
    np.testing.assert_array_equal(a.components_, b.components_)
    assert a.reconstruction_err_ == b.reconstruction_err_
    assert a.reconstruction_err_ == ref.boolean_error(Xd, a.W_, a.components_, ~unknown)
    assert a.n_observed_ == int((~unknown).sum())


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("name", list(METHODS))
def test_an_all_observed_mask_is_no_mask(name):
    X, _, _ = banmf.make_boolean(30, 20, 3, 0.3, noise=0.05, random_state=1)
    plain = make(name).fit(X)
    for given_mask in ({"missing": sp.csr_array((30, 20))}, {"observed": np.ones((30, 20))}):
        if name in ("asso", "grecond") and "observed" in given_mask:
            continue
        masked_fit = make(name).fit(X, **given_mask)
        np.testing.assert_array_equal(plain.W_, masked_fit.W_)
        np.testing.assert_array_equal(plain.components_, masked_fit.components_)
        assert plain.reconstruction_err_ == masked_fit.reconstruction_err_
        if hasattr(plain, "loss_curve_"):
            np.testing.assert_array_equal(plain.loss_curve_, masked_fit.loss_curve_)


@pytest.mark.parametrize("name", ["asso", "grecond"])
def test_greedy_methods_refuse_the_observed_form_and_explain(name):
    with pytest.raises(ValueError, match="don't care.*Give missing="):
        make(name).fit(np.eye(4), observed=np.eye(4))


@pytest.mark.filterwarnings("ignore:n_components=.*exceeds")
@pytest.mark.filterwarnings("ignore:the unknown cells hide all")
@settings(max_examples=40, deadline=None)
@given(masked(max_n=14, max_m=9), st.sampled_from([0.3, 0.6, 1.0]), st.integers(1, 3))
def test_asso_and_grecond_treat_unknown_cells_as_dont_care(problem, tau, k):
    Xd, unknown, _ = problem
    assume(not unknown.all())  # refused: see test_values_under_the_mask_are_never_read
    est = banmf.ASSO(k, tau=tau).fit(Xd, missing=unknown)
    k = min(k, *Xd.shape)  # the fit caps k at min(n, m)
    W, H = ref.asso(Xd, k, tau, unknown=unknown)
    np.testing.assert_array_equal(est.W_, W)
    np.testing.assert_array_equal(est.components_, H)
    est = banmf.GreConD(k).fit(Xd, missing=unknown)
    W, H = ref.grecond(Xd, k, unknown=unknown)
    np.testing.assert_array_equal(est.W_, W)
    np.testing.assert_array_equal(est.components_, H)
    # GreConD never covers an observed zero
    assert not (ref.boolean_product(W, H) & ~Xd & ~unknown).any()


@pytest.mark.slow  # a property at size (10⁵ × 10⁵ cells): the second tier
def test_observed_form_never_forms_the_whole_matrix():
    # 10^5 × 10^5 cells (80 GB as float64): a fit that formed anything n×m could not run.
    n = m = 100_000
    rng = np.random.default_rng(0)
    rows, cols = rng.integers(0, n, 3000), rng.integers(0, m, 3000)
    observed = sp.csr_array((np.ones(3000, bool), (rows, cols)), shape=(n, m))
    ones = sp.csr_array((np.ones(1000, bool), (rows[:1000], cols[:1000])), shape=(n, m))
    # Two iterations reach every step of the fit (iterations, thresholds, polish, the
    # predictor's choice) as twenty do: the property is about the shapes formed, not the count.
    model = BANMF(3, max_iter=2, n_init=1, random_state=0).fit(ones, observed=observed)
    assert model.n_observed_ == observed.nnz
    assert model.reconstruction_err_ == boolean_error(
        ones, model.W_, model.components_, observed=observed
    )


def test_transform_and_score_take_unknown_cells():
    X, _, _ = banmf.make_boolean(40, 20, 3, 0.3, random_state=2)
    Xd = X.toarray()
    unknown = np.random.default_rng(0).random(Xd.shape) < 0.2
    model = BANMF(3, random_state=0).fit(Xd, missing=unknown)
    other = np.where(unknown, 1 - Xd, Xd)
    np.testing.assert_array_equal(
        model.transform(Xd, missing=unknown), model.transform(other, missing=unknown)
    )
    W = model.transform(Xd, missing=unknown)
    bits = banmf.model_selection.description_length(Xd, W, model.components_, missing=unknown)
    assert model.score(other, missing=unknown) == pytest.approx(-bits / (~unknown).sum())


# ---------------------------------------------------------------- completion and held out


def test_planted_matrix_is_recovered_from_a_third_of_its_cells_hidden():
    # (At 50×50 a third hidden can leave two exact factorizations of what is observed that
    # differ on the hidden cells; at 200×200 the planted one is the only one.)
    X, W0, H0 = banmf.make_boolean(200, 200, 5, 0.5, random_state=4)
    hidden = mask_entries(X, 0.3, random_state=0)
    res = factorize(X, 5, missing=hidden, random_state=0)
    scores = held_out_scores(X, res.W, res.H, hidden)
    assert res.error == 0 and scores["errors"] == 0 and scores["accuracy"] == 1.0
    completed = res.complete()
    np.testing.assert_array_equal(completed.toarray(), X.toarray())


@given(masked(), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_predict_and_complete_against_the_dense_product(problem, k, seed):
    Xd, unknown, form = problem
    W, H = boolean_factors(np.random.default_rng(seed), Xd.shape, k)
    P = ref.boolean_product(W, H)
    rows, cols = np.nonzero(np.ones(Xd.shape, dtype=bool))
    np.testing.assert_array_equal(predict_cells(W, H, rows, cols), P[rows, cols])
    res = banmf.Factorization.from_factors(Xd, W, H, **masks(form, unknown))
    assert res.error == ref.boolean_error(Xd, W, H, ~unknown)
    assert res.n_observed == int((~unknown).sum())
    np.testing.assert_array_equal(res.complete().toarray(), np.where(unknown, P, Xd))
    keys, values = res.filled()  # the cells complete() fills in
    if values is None:  # observed= data: the unknown cells predicted 1
        np.testing.assert_array_equal(keys, np.flatnonzero(unknown & P.astype(bool)))
    else:
        np.testing.assert_array_equal(keys, np.flatnonzero(unknown))
        np.testing.assert_array_equal(values, P[unknown].astype(bool))


@given(masked(), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_evaluate_counts_the_observed_cells_against_the_dense_product(problem, k, seed):
    Xd, unknown, form = problem
    W, H = boolean_factors(np.random.default_rng(seed), Xd.shape, k)
    P = ref.boolean_product(W, H).astype(bool)
    res = banmf.Factorization.from_factors(Xd, W, H)
    scores = res.replace(**masks(form, unknown)).evaluate(Xd)
    missed, covered = int((Xd & ~P & ~unknown).sum()), int((~Xd & P & ~unknown).sum())
    assert (scores["false_negatives"], scores["false_positives"]) == (missed, covered)
    assert scores["error"] == missed + covered and scores["unknown_cells"] == unknown.sum()
    assert scores["relative_error"] == banmf.result.relative_error(
        missed + covered, int((Xd & ~unknown).sum())
    )
    assert res.evaluate()["error"] == res.error  # default: its own data, every cell observed


def test_predict_cells_refuses_cells_outside_the_matrix():
    with pytest.raises(ValueError, match=r"cols\[1\] = 3 is outside 0..2"):
        predict_cells(np.eye(2), np.ones((2, 3)), [0, 1], [0, 3])
    with pytest.raises(ValueError, match="one entry per cell"):
        predict_cells(np.eye(2), np.ones((2, 3)), [0, 1], [0])
    with pytest.raises(TypeError, match="rows must hold integers"):
        predict_cells(np.eye(2), np.ones((2, 3)), [0.5], [0])


@given(binary_matrices(max_n=20, max_m=20), st.sampled_from([0.0, 0.1, 0.5, 0.9]))
def test_mask_entries_hides_the_same_share_of_ones_and_zeros(Xd, fraction):
    Xd = Xd.astype(bool)
    hidden = mask_entries(Xd, fraction, random_state=1).toarray()
    assert hidden[Xd].sum() == round(fraction * Xd.sum())
    assert hidden[~Xd].sum() == round(fraction * (~Xd).sum())
    again = mask_entries(Xd, fraction, random_state=1).toarray()
    np.testing.assert_array_equal(hidden, again)
    # already unknown cells are never chosen; the observed form draws from its cells
    unknown = np.random.default_rng(0).random(Xd.shape) < 0.3
    for given_mask in ({"missing": unknown}, {"observed": ~unknown}):
        h = mask_entries(Xd, fraction, random_state=2, **given_mask).toarray()
        assert not (h & unknown).any()
        assert h[Xd & ~unknown].sum() == round(fraction * (Xd & ~unknown).sum())


def test_mask_entries_on_large_sparse_data_and_its_checks():
    X = banmf.make_sparse_uniform(20_000, 5_000, 100_000, random_state=0)
    hidden = mask_entries(X, 0.1, random_state=0, n_zeros=5000)
    keys = hidden.nonzero()
    truth = X[keys[0], keys[1]]
    assert int(np.asarray(truth).sum()) == round(0.1 * X.nnz)
    assert hidden.nnz == round(0.1 * X.nnz) + 5000
    with pytest.raises(ValueError, match=r"fraction must be a number in \[0, 1\)"):
        mask_entries(X, 1.0)
    with pytest.raises(ValueError, match="n_zeros must be a nonnegative integer"):
        mask_entries(X, 0.1, n_zeros=-1)
    with pytest.raises(ValueError, match="exceeds the 2 observed zeros"):
        mask_entries(np.array([[1, 0, 0]]), 0.5, n_zeros=3)


@pytest.mark.parametrize("form", [None, *FORMS])
def test_hold_out_hides_mask_entries_cells_beside_the_unknown_ones(form):
    rng = np.random.default_rng(0)
    Xd, unknown = rng.random((30, 20)) < 0.3, rng.random((30, 20)) < 0.2
    given_masks = {} if form is None else masks(form, unknown)
    fit_masks, hidden = hold_out(Xd, 0.25, random_state=3, **given_masks)
    again = mask_entries(Xd, 0.25, random_state=3, **given_masks)  # the same draws
    np.testing.assert_array_equal(hidden.toarray(), again.toarray())
    # Fitted with the hidden cells unknown too, in the form the data's were given.
    before = unknown if form else np.zeros_like(unknown)
    fit_unknown = (
        ~fit_masks["observed"].toarray() if form == "observed" else fit_masks["missing"].toarray()
    )
    assert fit_masks["observed" if form == "observed" else "missing"] is not None
    np.testing.assert_array_equal(fit_unknown, before | hidden.toarray())
    with pytest.raises(InputError, match="1e-09 holds out no cell of the 600 observed cells"):
        hold_out(Xd, 1e-9)


def test_held_out_scores_against_counting_by_hand():
    Xd = np.array([[1, 1, 0, 0], [0, 1, 1, 0]], dtype=bool)
    W, H = np.array([[1], [0]], bool), np.array([[1, 0, 1, 0]], bool)  # predicts row 0: 1010
    hidden = np.array([[1, 1, 1, 1], [0, 0, 1, 1]], bool)
    s = held_out_scores(Xd, W, H, hidden)
    # cells (0,0) 1/1 ok, (0,1) 1/0 wrong, (0,2) 0/1 wrong, (0,3) ok, (1,2) 1/0 wrong, (1,3) ok
    assert (s["cells"], s["errors"], s["ones"], s["predicted_ones"], s["true_positives"]) == (
        6,
        3,
        3,
        2,
        1,
    )
    assert s["accuracy"] == pytest.approx(0.5)
    assert s["precision"] == pytest.approx(0.5) and s["recall"] == pytest.approx(1 / 3)
    assert s["f1"] == pytest.approx(0.4)


def test_a_masked_result_saves_and_loads_with_its_cells(tmp_path):
    from banmf.datasets import load_votes

    votes = load_votes("435")
    res = factorize(votes.X, 3, missing=votes.missing, random_state=0, n_init=1)
    assert res.n_observed == 435 * 16 - 392 and res.missing.nnz == 392
    res.save(tmp_path / "r.npz")
    back = banmf.Factorization.load(tmp_path / "r.npz")
    np.testing.assert_array_equal(back.missing.toarray(), votes.missing.toarray())
    assert back.n_observed == res.n_observed and back.error == res.error
    np.testing.assert_array_equal(back.complete().toarray(), res.complete().toarray())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        NMF(3, random_state=0).fit(votes.X, missing=votes.missing)


@given(masked(), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_patterns_count_the_known_cells(problem, k, seed):
    Xd, unknown, form = problem
    W, H = boolean_factors(np.random.default_rng(seed), Xd.shape, k)
    res = banmf.Factorization.from_factors(Xd, W, H, **masks(form, unknown))
    observed = ~unknown
    for p in res.patterns():
        tile = W[:, p.factor][:, None] & H[p.factor][None, :]
        assert p.unknown == int((tile & unknown).sum())
        assert p.ones == int((tile & Xd & observed).sum())
        without = W.copy()
        without[:, p.factor] = False
        rise = ref.boolean_error(Xd, without, H, observed) - ref.boolean_error(Xd, W, H, observed)
        assert p.contribution == rise


def test_fit_many_takes_the_mask_once_for_all_fits():
    X, _, _ = banmf.make_boolean(40, 30, 3, 0.3, random_state=5)
    unknown = np.random.default_rng(1).random((40, 30)) < 0.2
    fits = banmf.fit_many(
        [BANMF(k, random_state=0, n_init=1) for k in (2, 3)], X, n_jobs=2, missing=unknown
    )
    for est in fits:
        alone = BANMF(est.n_components, random_state=0, n_init=1).fit(X, missing=unknown)
        np.testing.assert_array_equal(est.W_, alone.W_)
        assert est.reconstruction_err_ == alone.reconstruction_err_


@pytest.mark.parametrize("method", ["banmf", "asso", "grecond"])
def test_an_all_unknown_fit_is_refused_and_hidden_ones_are_said(method):
    X, _, _ = banmf.make_boolean(12, 9, 2, density=0.4, random_state=0)
    every = np.ones(X.shape, bool)
    with pytest.raises(ValueError, match=r"every cell of X is unknown \(missing= marks all 12×9"):
        banmf.factorize(X, 2, method, missing=every, random_state=0)
    with pytest.raises(
        ValueError, match=r"every cell of X is unknown \(observed= marks none of the 12×9"
    ):
        banmf.factorize(X, 2, method, observed=np.zeros(X.shape, bool), random_state=0)
    with pytest.warns(UserWarning, match=f"hide all {X.nnz} ones of X"):
        res = banmf.factorize(X, 2, method, missing=X, random_state=0)
    assert res.error == 0


def test_factorize_keeps_the_unknown_cells_a_dataset_carries():
    from banmf.datasets import load_votes

    votes = load_votes("435")
    res = banmf.factorize(votes, 3, random_state=0, n_init=1, max_iter=20)
    given = banmf.factorize(
        votes.X, 3, missing=votes.missing, random_state=0, n_init=1, max_iter=20
    )
    assert res.missing is not None and (res.missing != votes.missing).nnz == 0
    assert res.error == given.error and res.n_observed == given.n_observed < 435 * 16
    assert res.row_labels == votes.row_labels and res.col_labels == votes.col_labels


# ------------------------------------------------------------------------- the predictor


def noisy_problem(form, seed=0, share=0.2):
    """Planted data with noise, a share of its cells unknown, and the fit's keywords."""
    X, _, _ = banmf.make_boolean(80, 50, 3, 0.3, noise=0.05, random_state=seed)
    unknown = np.random.default_rng(seed).random(X.shape) < share
    return X.toarray().astype(bool), unknown, masks(form, unknown)


def small_banmf(**params):
    return BANMF(3, max_iter=60, n_init=3, **{"random_state": 0, **params})


@pytest.mark.parametrize("form", FORMS)
def test_the_predictor_choice_never_reads_the_unknown_cells(form):
    Xd, unknown, fit_masks = noisy_problem(form)
    rows, cols = np.nonzero(unknown)
    results = []
    for values in (Xd, np.where(unknown, ~Xd, Xd), Xd | unknown):
        model = small_banmf().fit(values, **fit_masks)
        res = banmf.Factorization.from_estimator(model)
        results.append((model.predictor_, res.predict(rows, cols), res.predict_proba(rows, cols)))
    first = results[0][0]
    assert first is not None and first.kind in ("product", "vote", "nmf")
    for predictor, guess, proba in results[1:]:
        assert predictor.to_json() == first.to_json()
        np.testing.assert_array_equal(guess, results[0][1])
        np.testing.assert_array_equal(proba, results[0][2])


def test_the_predictor_is_the_same_for_a_seed_whatever_the_threads():
    Xd, unknown, fit_masks = noisy_problem("missing", seed=1)
    rows, cols = np.nonzero(unknown)
    fits = [small_banmf(n_jobs=jobs).fit(Xd, **fit_masks) for jobs in (1, 2, 1)]
    for model in fits[1:]:
        assert model.predictor_.to_json() == fits[0].predictor_.to_json()
        for a, b in zip(model.predictor_.factors, fits[0].predictor_.factors):
            np.testing.assert_array_equal(a, b)
    other = small_banmf(random_state=5).fit(Xd, **fit_masks).predictor_
    assert other.report != fits[0].predictor_.report  # another seed, another inner split


def test_no_predictor_without_unknown_cells_or_with_one_start():
    Xd, unknown, fit_masks = noisy_problem("missing")
    assert small_banmf().fit(Xd).predictor_ is None
    res = factorize(Xd, 3, "nmf", random_state=0, **fit_masks)  # one start: W⊗H alone
    assert res.predictor is None
    with pytest.raises(InputError, match="no calibrated predictor"):
        res.predict_proba([0], [0])
    np.testing.assert_array_equal(
        res.predict([0, 1], [2, 3]), predict_cells(res.W, res.H, [0, 1], [2, 3])
    )


def test_predict_proba_is_calibrated_on_planted_data():
    X, _, _ = banmf.make_boolean(300, 120, 4, 0.3, noise=0.08, random_state=3)
    hidden = mask_entries(X, 0.3, random_state=0)
    res = factorize(X, 4, random_state=0, missing=hidden)
    rows, cols = hidden.nonzero()
    truth = X.toarray().astype(bool)[rows, cols]
    proba = res.predict_proba(rows, cols)
    assert ((proba >= 0) & (proba <= 1)).all()
    # On cells the choice never saw, the mean score of a bin is near its frequency of ones.
    for value in np.unique(proba):
        inside = proba == value
        if inside.sum() >= 200:
            assert abs(truth[inside].mean() - value) < 0.06, value
    base = truth.mean()
    assert np.mean((proba - truth) ** 2) < 0.5 * base * (1 - base)  # beats the base rate
    report = res.predictor.report
    assert sum(b["cells"] for b in report["bins"]) == report["held_out_cells"]
    assert 0 <= report["brier"] < 0.25
    assert res.predictor.kind in report["error_rates"]


def test_the_predictor_is_no_worse_than_the_product_where_it_was_chosen():
    from banmf.datasets import load_votes

    votes = load_votes("435")
    fit_masks, hidden = hold_out(votes, 0.2, random_state=0, missing=votes.missing)
    res = factorize(votes.X, 5, random_state=0, **fit_masks)
    rows, cols = hidden.nonzero()
    truth = votes.X.toarray().astype(bool)[rows, cols]
    chosen = (res.predict(rows, cols) != truth).mean()
    product = (predict_cells(res.W, res.H, rows, cols) != truth).mean()
    assert res.predictor.kind != "product" and chosen < product - 0.01


@pytest.mark.parametrize("kind", ["vote", "folds"])
def test_the_observed_form_lists_the_cells_the_vote_predicts_one(kind):
    import dataclasses

    Xd, unknown, fit_masks = noisy_problem("observed", share=0.5)
    res = factorize(Xd, 3, random_state=0, max_iter=60, n_init=3, **fit_masks)
    if res.predictor.kind != "vote":  # the test is about a vote: make this one one
        res = res.replace(predictor=small_banmf().fit(Xd, **fit_masks).predictor_)
    assert res.predictor.kind == "vote"
    if kind == "folds":  # the vote's starts as the members of a "folds" predictor
        starts = len(res.predictor.factors[0])
        folds = dataclasses.replace(
            res.predictor, kind="folds", member_kind="vote", sizes=(1, starts - 1)
        )
        res = res.replace(predictor=folds)
    n, m = Xd.shape
    rows, cols = np.divmod(np.arange(n * m), m)
    guess = res.predict(rows, cols).reshape(n, m)
    keys, values = res.filled()
    assert values is None
    # X's ones under the unknown cells are never read: every unknown cell guessed 1 is listed.
    np.testing.assert_array_equal(keys, np.flatnonzero(unknown & guess))
    np.testing.assert_array_equal(res.complete().toarray(), (Xd & ~unknown) | (unknown & guess))


def column_majority_problem(form="missing"):
    """Columns of independent cells, a one in seven of ten cells of every other column and in
    two of ten of the rest: the column majority is the best predictor there is."""
    rng = np.random.default_rng(0)
    share = np.where(np.arange(24) % 2 == 0, 0.7, 0.2)
    Xd = rng.random((40, 24)) < share
    unknown = rng.random(Xd.shape) < 0.3
    return Xd, unknown, masks(form, unknown)


@pytest.mark.parametrize("form", ["missing", "observed"])
def test_the_column_majority_is_a_kind_of_predictor_chosen_where_it_predicts_best(form):
    from banmf.selection.predictor import column_shares

    Xd, unknown, fit_masks = column_majority_problem(form)
    res = factorize(Xd, 8, random_state=0, max_iter=50, n_init=2, **fit_masks)
    predictor = res.predictor
    rates = predictor.report["error_rates"]
    # Scored beside the factors' kinds on the inner fit's held-out cells, and the best there.
    assert predictor.kind == "majority" and rates["majority"] == min(rates.values())
    assert {"product", "vote", "majority"} <= set(rates)
    # Its score is the column's share of ones among its observed cells, all of them.
    data = Dataset.of(Xd, **fit_masks)
    np.testing.assert_array_equal(predictor.factors[0], column_shares(data.X, data.unknown))
    shares = (Xd & ~unknown).sum(axis=0) / (~unknown).sum(axis=0)
    np.testing.assert_allclose(predictor.factors[0], shares)
    majority = np.broadcast_to(shares > 0.5, Xd.shape)
    rows, cols = np.nonzero(unknown)
    np.testing.assert_array_equal(res.predict(rows, cols), majority[rows, cols])
    # complete() fills the unknown cells by it, in either form of the unknown cells.
    np.testing.assert_array_equal(res.complete().toarray(), (Xd & ~unknown) | (unknown & majority))


@pytest.mark.parametrize(
    "kind", ["vote", "nmf", "product", "majority", "folds of votes", "folds of nmf"]
)
def test_a_predictor_saves_and_loads_with_the_result(tmp_path, kind):
    from banmf.selection.predictor import Predictor

    Xd, unknown, fit_masks = noisy_problem("missing")
    res = factorize(Xd, 3, random_state=0, max_iter=60, n_init=3, **fit_masks)
    rng = np.random.default_rng(0)
    factors = {
        "vote": (rng.random((4, 80, 3)) < 0.3, rng.random((4, 3, 50)) < 0.3),
        "nmf": (rng.random((80, 3)), rng.random((3, 50))),
        "product": (),
        "majority": (rng.random(50),),
        "folds of votes": (rng.random((5, 80, 3)) < 0.3, rng.random((5, 3, 50)) < 0.3),
        "folds of nmf": (rng.random((3, 80, 3)), rng.random((3, 3, 50))),
    }[kind]
    members = {"folds of votes": ("vote", (2, 3)), "folds of nmf": ("nmf", (1, 1, 1))}
    member_kind, sizes = members.get(kind, ("", ()))
    predictor = Predictor(
        kind.split()[0],
        0.4,
        np.array([0.2, 0.6]),
        np.array([0.1, 0.5, 0.9]),
        {"a": 1},
        factors,
        member_kind,
        sizes,
    )
    res = res.replace(predictor=predictor)
    res.save(tmp_path / "r.npz")
    back = banmf.Factorization.load(tmp_path / "r.npz")
    assert back.predictor.to_json() == predictor.to_json()
    rows, cols = np.nonzero(unknown)
    np.testing.assert_array_equal(back.predict(rows, cols), res.predict(rows, cols))
    np.testing.assert_array_equal(back.predict_proba(rows, cols), res.predict_proba(rows, cols))
    np.testing.assert_array_equal(back.complete().toarray(), res.complete().toarray())
    assert "predictor" not in back.meta


def test_a_damaged_predictor_is_refused(tmp_path):
    import json

    Xd, unknown, fit_masks = noisy_problem("missing")
    res = factorize(Xd, 3, random_state=0, max_iter=60, n_init=3, **fit_masks)
    assert res.predictor.kind != "product"  # it has arrays to lose
    res.save(tmp_path / "r.npz")
    with np.load(tmp_path / "r.npz") as f:
        arrays = dict(f)
    meta = json.loads(bytes(arrays["meta"]).decode())
    meta["predictor"]["kind"] = "oracle"
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(InputError, match="corrupt metadata: predictor"):
        banmf.Factorization.load(tmp_path / "bad.npz")
    meta["predictor"]["kind"] = res.predictor.kind
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    arrays.pop("predictor_W", None)
    arrays.pop("predictor_H", None)
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises(InputError, match="damaged predictor"):
        banmf.Factorization.load(tmp_path / "bad.npz")


def test_a_folds_predictor_whose_sizes_do_not_match_its_factors_is_refused(tmp_path):
    import json

    from banmf.selection.predictor import Predictor

    Xd, unknown, fit_masks = noisy_problem("missing")
    res = factorize(Xd, 3, random_state=0, max_iter=60, n_init=3, **fit_masks)
    rng = np.random.default_rng(0)
    factors = (rng.random((5, 80, 3)) < 0.3, rng.random((5, 3, 50)) < 0.3)
    folds = Predictor(
        "folds", 0.5, np.array([0.5]), np.array([0.2, 0.8]), {}, factors, "vote", (2, 3)
    )
    res.replace(predictor=folds).save(tmp_path / "r.npz")
    with np.load(tmp_path / "r.npz") as f:
        arrays = dict(f)
    meta = json.loads(bytes(arrays["meta"]).decode())
    for sizes, member_kind, match in [
        ([2, 2], "vote", "damaged predictor"),  # 4 starts named, 5 stored
        ([2, 0, 3], "vote", "corrupt metadata"),
        ([2, 3], "product", "corrupt metadata"),
        ([1, 1, 1, 1, 1], "nmf", "damaged predictor"),  # Boolean bits where floats belong
    ]:
        meta["predictor"].update(sizes=sizes, member_kind=member_kind)
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        np.savez(tmp_path / "bad.npz", **arrays)
        with pytest.raises(InputError, match=match):
            banmf.Factorization.load(tmp_path / "bad.npz")


@given(
    st.integers(1, 4),
    st.lists(st.integers(1, 3), min_size=1, max_size=4),
    st.sampled_from(["vote", "nmf"]),
    st.integers(0, 2**32 - 1),
)
@settings(max_examples=30, deadline=None)
def test_a_folds_predictor_averages_its_members_calibrated_probabilities(k, sizes, kind, seed):
    from banmf.selection.predictor import Predictor, calibrate, fold_predictor

    rng = np.random.default_rng(seed)
    n, m = 7, 5
    if kind == "vote":
        members = [(rng.random((s, n, k)) < 0.4, rng.random((s, k, m)) < 0.4) for s in sizes]
    else:
        members = [(rng.random((n, k)), rng.random((k, m))) for _ in sizes]
    # Each member scored on its own fold's cells (here: a few random cells each).
    cells = [rng.integers(0, [n, m], size=(rng.integers(1, 8), 2)) for _ in members]
    truths = [rng.random(len(c)) < 0.5 for c in cells]
    alone = [Predictor(kind, 0.5, np.zeros(0), np.zeros(1), factors=f) for f in members]
    candidates = [{kind: p.score(None, None, c[:, 0], c[:, 1])} for p, c in zip(alone, cells)]
    order = rng.permutation(sum(len(t) for t in truths))
    folds = fold_predictor(kind, members, candidates, truths, 1.0, order)
    assert folds.kind == "folds" and folds.member_kind == kind and folds.threshold == 0.5
    assert folds.report["members"] == len(members)
    assert folds.sizes == (tuple(sizes) if kind == "vote" else (1,) * len(sizes))
    # The reference: one calibration of every member's held-out scores, the members' mean.
    edges, probabilities = calibrate(
        np.concatenate([c[kind] for c in candidates]), np.concatenate(truths)
    )
    np.testing.assert_array_equal(folds.edges, edges)
    rows, cols = np.divmod(np.arange(n * m), m)
    want = np.mean(
        [
            probabilities[np.searchsorted(edges, p.score(None, None, rows, cols), side="right")]
            for p in alone
        ],
        axis=0,
    )
    np.testing.assert_allclose(folds.predict_proba(None, None, rows, cols), want, rtol=1e-12)
    np.testing.assert_array_equal(folds.predict(None, None, rows, cols), want > 0.5)


@given(st.lists(st.integers(0, 4), min_size=1, max_size=30), st.integers(0, 2**32 - 1))
def test_best_threshold_has_the_fewest_errors(values, seed):
    from banmf.selection.predictor import best_threshold, calibrate

    scores = np.array(values, dtype=np.float64) / 4
    truth = np.random.default_rng(seed).random(len(scores)) < 0.5
    threshold, errors = best_threshold(scores, truth)
    assert errors == ((scores > threshold) != truth).sum()
    for t in np.concatenate([[-1.0], scores]):  # every way to cut the scores
        assert errors <= ((scores > t) != truth).sum()
    edges, probabilities = calibrate(scores, truth)
    assert (np.diff(probabilities) >= 0).all() and len(probabilities) == len(edges) + 1
    # Pooled to be nondecreasing, the calibration keeps the share of ones.
    assert np.isclose(
        probabilities[np.searchsorted(edges, scores, side="right")].sum(), truth.sum()
    )


@given(
    st.lists(st.integers(0, 4), min_size=1, max_size=30),
    st.integers(0, 2**32 - 1),
    st.integers(1, 5),
)
def test_a_zero_weight_counts_each_zero_that_many_times(values, seed, weight):
    """The choice on a sample of the zeros, each standing for ``weight`` zeros, is the choice on
    the cells with every zero repeated that often."""
    from banmf.selection.predictor import best_threshold, calibrate, kind_threshold, reliability

    scores = np.array(values, dtype=np.float64) / 4
    truth = np.random.default_rng(seed).random(len(scores)) < 0.5
    repeat = np.where(truth, 1, weight)
    scores_r, truth_r = np.repeat(scores, repeat), np.repeat(truth, repeat)
    assert best_threshold(scores, truth, weight) == best_threshold(scores_r, truth_r)
    for kind in ("product", "vote"):
        assert kind_threshold(kind, scores, truth, weight) == kind_threshold(
            kind, scores_r, truth_r
        )
    for a, b in zip(calibrate(scores, truth, weight), calibrate(scores_r, truth_r)):
        np.testing.assert_allclose(a, b)
    probabilities = np.clip(scores, 0, 1)
    once = reliability(probabilities, truth, weight)
    every = reliability(np.repeat(probabilities, repeat), truth_r)
    assert np.isclose(once["brier"], every["brier"])
    for a, b in zip(once["bins"], every["bins"]):
        assert a["bin"] == b["bin"]
        assert np.isclose(a["frequency"], b["frequency"])
        assert np.isclose(a["mean_probability"], b["mean_probability"])


def test_on_sparse_data_the_inner_fit_leaves_out_a_sample_of_the_zeros(monkeypatch):
    """A fifth of every observed zero would be a fifth of n·m cells: the inner fit leaves out
    a bounded sample, each zero standing for its share, and says so."""
    import banmf.engine.predictor as module

    monkeypatch.setattr(module, "INNER_MIN_ZEROS", 100)
    X = banmf.make_sparse_tiles(400, 200, 800, 3, random_state=0)[0]
    missing = mask_entries(X, 0.05, random_state=1, n_zeros=50)
    model = small_banmf().fit(X, missing=missing)
    report = model.predictor_.report
    ones = round(module.INNER_HOLD_OUT * (X.nnz - missing.multiply(X).nnz))
    zeros = round(module.INNER_HOLD_OUT * (400 * 200 - X.nnz - 50))
    drawn = max(module.INNER_ZEROS_PER_ONE * ones, 100)
    assert report["held_out_cells"] == ones + drawn
    assert report["zero_weight"] == zeros / drawn > 10
    assert sum(b["cells"] for b in report["bins"]) == ones + drawn
    for rate in report["error_rates"].values():
        assert 0 <= rate <= 1


def test_the_html_report_names_the_predictor():
    from banmf.report.html import report_html

    Xd, unknown, fit_masks = noisy_problem("missing")
    res = factorize(Xd, 3, random_state=0, max_iter=60, n_init=3, **fit_masks)
    report = res.predictor.report
    assert (
        f"{res.predictor.kind}, threshold {res.predictor.threshold:.4g}: chosen on "
        f"{report['held_out_cells']} observed cells" in report_html(res)
    )
