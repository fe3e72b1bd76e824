"""Every registered method as an estimator: declared parameters, scikit-learn's conventions,
``transform``/``score``, ``verbose``."""

import inspect
import logging

import numpy as np
import pytest

from banmf import (
    METHODS,
    InvalidParameterError,
    NotFittedError,
    boolean_error,
    make_boolean,
)
from banmf.model_selection import description_length
from banmf.models._base import COMMON_CONSTRAINTS


# GreConD chooses its rank by default; the others get a small one.
def make(cls, **params):
    return cls(**{"n_components": 3, "random_state": 0, **params})


@pytest.fixture(scope="module")
def X():
    return make_boolean(60, 30, 3, 0.3, noise=0.02, random_state=0)[0]


@pytest.mark.parametrize("name", list(METHODS))
def test_every_parameter_has_declared_constraints(name):
    cls = METHODS[name]
    params = set(inspect.signature(cls.__init__).parameters) - {"self"}
    assert set(cls._parameter_constraints) == params
    assert set(COMMON_CONSTRAINTS) <= params


@pytest.mark.parametrize("name", list(METHODS))
def test_a_bad_value_of_any_parameter_is_refused_by_name(name, X):
    cls = METHODS[name]
    for param in cls._param_names():
        with pytest.raises(InvalidParameterError, match=rf"{cls.__name__}: {param} must be"):
            make(cls, **{param: "bogus"}).fit(X)
    with pytest.raises(ValueError, match="n_components must be"):  # both kinds catch it
        make(cls, n_components=0).fit(X)
    with pytest.raises(TypeError, match="verbose must be"):
        make(cls, verbose=-1).fit(X)


@pytest.mark.parametrize("name", list(METHODS))
def test_transform_is_the_best_rows_for_the_fitted_h_and_score_is_minus_the_bits_per_cell(name, X):
    model = (
        make(METHODS[name], max_iter=50)
        if "max_iter" in METHODS[name]._param_names()
        else make(METHODS[name])
    )
    with pytest.raises(NotFittedError):
        model.score(X)
    model.fit(X)
    W = model.transform(X)
    assert W.shape == (X.shape[0], model.n_components_) and W.dtype == bool
    error = boolean_error(X, W, model.components_)
    # the bits per cell to send X by the fitted H: falls with the error, rises with k
    cells = X.shape[0] * X.shape[1]
    assert model.score(X) == pytest.approx(-description_length(X, W, model.components_) / cells)
    if name not in ("banmf", "reg-banmf", "nmf", "reg-nmf"):
        # The exact rows given H are at least as good as those the fit found.
        assert error <= model.reconstruction_err_
    with pytest.raises(ValueError, match="columns"):
        model.score(X[:, :5])


def test_get_and_set_params_follow_scikit_learn():
    from banmf import BANMF

    model = BANMF(3, tol=None)
    assert model.get_params(deep=False) == model.get_params() and model.get_params()["tol"] is None
    assert model.set_params(max_iter=7) is model and model.max_iter == 7
    with pytest.raises(ValueError, match="no parameter 'alpha'"):
        model.set_params(alpha=1)
    assert repr(model) == "BANMF(n_components=3, max_iter=7, tol=None)"


@pytest.mark.parametrize("verbose, iterations", [(1, False), (2, True)])
def test_verbose_shows_progress_on_stderr(X, capsys, verbose, iterations):
    from banmf import BANMF

    BANMF(3, max_iter=30, n_init=1, random_state=0, verbose=verbose).fit(X)
    err = capsys.readouterr().err
    # One count over the starts: "columns" first, the random one, "nmf", then the combination
    # (GreConD's factors for its pool report as part of it, not as a start of their own).
    assert "banmf: start 1/4 (columns): error" in err
    assert "banmf: start 2/4: threshold search" in err and "banmf: start 2/4: error" in err
    assert "banmf: start 4/4 (combined): combining" in err and "start 1/1" not in err
    assert ("iteration" in err) is iterations
    assert not logging.getLogger("banmf").handlers  # taken down after the fit
    BANMF(3, max_iter=30, n_init=1, random_state=0).fit(X)
    assert capsys.readouterr().err == ""


# -- with scikit-learn, when it is installed --------------------------------------------------

#: The checks of scikit-learn's check_estimator that apply to unsupervised estimators of 0/1
#: data (the others feed real-valued or labelled data, which banmf refuses by design).
SKLEARN_CHECKS = [
    "check_estimator_cloneable",
    "check_estimator_repr",
    "check_do_not_raise_errors_in_init_or_set_params",
    "check_get_params_invariance",
    "check_no_attributes_set_in_init",
    "check_parameters_default_constructible",
    "check_set_params",
    "check_estimators_unfitted",
    "check_transformers_unfitted",
    "check_fit1d",
    "check_mixin_order",
    "check_valid_tag_types",
    "check_estimator_tags_renamed",
]


@pytest.mark.parametrize("name", list(METHODS))
def test_scikit_learn_checks_clone_and_grid_search(name, X):
    pytest.importorskip("sklearn", minversion="1.6")
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV
    from sklearn.utils import estimator_checks

    cls = METHODS[name]
    model = make(cls)
    for check in SKLEARN_CHECKS:
        getattr(estimator_checks, check)(cls.__name__, model)
    copy = clone(model)
    assert copy is not model and copy.get_params() == model.get_params()
    extra = {"max_iter": 30} if "max_iter" in cls._param_names() else {}
    search = GridSearchCV(make(cls, **extra), {"n_components": [1, 3]}, cv=3).fit(X)
    assert search.best_params_["n_components"] in (1, 3)
    assert np.isfinite(search.best_score_) and search.best_score_ <= 0


@pytest.mark.parametrize("name", list(METHODS))
def test_k_past_min_shape_is_capped_once_for_every_method(name):
    """No method fits more factors than the Boolean rank can use: k = 10⁶ on 12×7 data fits 7
    (issue 30: k = 10000 on Zoo ran for minutes at 11.9 GB, k = 10⁶ failed after 9 s)."""
    X = make_boolean(12, 7, 2, 0.4, random_state=1)[0]
    with pytest.warns(UserWarning, match=r"n_components=1000000 exceeds min\(n, m\)=7"):
        model = METHODS[name](n_components=10**6, random_state=0).fit(X)
    assert model.n_components_ <= 7 and model.components_.shape[0] == model.n_components_
    assert model.W_.shape == (12, model.n_components_)


@pytest.mark.parametrize("name", list(METHODS))
def test_a_k_that_would_not_fit_in_memory_is_refused_before_the_fit(name, monkeypatch):
    X = make_boolean(400, 300, 3, 0.1, random_state=1)[0]
    monkeypatch.setenv("BANMF_MEMORY_LIMIT", "1M")
    with pytest.raises(ValueError, match=r"n_components=300\) on a 400×300 matrix needs about"):
        METHODS[name](n_components=300, random_state=0).fit(X)


@pytest.mark.parametrize("form, k, jobs", [("none", 10, 2), ("missing", 2, 1), ("observed", 1, 1)])
def test_banmf_memory_estimate_bounds_what_the_fit_allocates(form, k, jobs, monkeypatch):
    """The estimate the fit is refused by holds everything numpy allocates in the fit, the
    inner fit of the predictor included (it once held out a fifth of every zero, n·m/5 cells,
    which no estimate counted: the floor of zeros it leaves out is lowered here so that their
    cap binds on this small matrix, as on large sparse data)."""
    import tracemalloc

    import scipy.sparse as sp

    import banmf.engine.predictor as module
    from banmf.data.dataset import Dataset
    from banmf.datasets import make_sparse_degrees
    from banmf.model_selection import mask_entries
    from banmf.runtime.threads import thread_budget

    X = make_sparse_degrees(3000, 400, 15_000, rows="powerlaw", cols="powerlaw", random_state=0)
    fit_masks = {
        "none": {},
        "missing": {"missing": mask_entries(X, 0.05, random_state=1, n_zeros=2000)},
        "observed": {
            "observed": sp.csr_array((X != 0) + mask_entries(X, 0.0, random_state=1, n_zeros=X.nnz))
        },
    }[form]
    monkeypatch.setattr(module, "INNER_MIN_ZEROS", 1000)
    model = METHODS["banmf"](k, random_state=0, n_jobs=jobs, max_iter=100)
    with thread_budget(jobs):
        estimate = model._fit_bytes(Dataset.of(X, **fit_masks), k)
    tracemalloc.start()
    try:
        model.fit(X, **fit_masks)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (form == "none") == (model.predictor_ is None)
    assert peak < estimate


@pytest.mark.parametrize("name", list(METHODS))
def test_every_method_chooses_k_with_auto(name):
    X = make_boolean(24, 14, 2, 0.4, random_state=1)[0]
    extra = {"max_iter": 30} if "max_iter" in METHODS[name]._param_names() else {}
    model = METHODS[name](n_components="auto", random_state=0, **extra).fit(X)
    held = model.rank_selection_.held_out_error
    k = model.n_components_
    assert k == model.rank_selection_.best_k == min(held, key=lambda r: (held[r], r))
    # one factor misses a planted one; past 2, noisy fold fits of some methods may tie lower
    assert k >= 2 and held[1] > held[k]
    assert model.components_.shape == (k, 14) and model.n_components == "auto"
    # a refit at a given k keeps no selection of an earlier one
    assert not hasattr(model.set_params(n_components=1).fit(X), "rank_selection_")


def test_auto_follows_scikit_learn_and_no_other_string_passes():
    pytest.importorskip("sklearn", minversion="1.6")
    from sklearn.base import clone

    from banmf import BANMF

    model = BANMF(n_components="auto", random_state=0)
    assert clone(model).get_params() == model.get_params()
    assert repr(model) == "BANMF(n_components='auto', random_state=0)"
    with pytest.raises(InvalidParameterError, match=r"n_components must be .* or 'auto'"):
        BANMF(n_components="Auto").fit(np.eye(3))


def test_the_distributed_fit_refuses_auto():
    pytest.importorskip("distributed")
    import banmf.distributed as bd

    with pytest.raises(InvalidParameterError, match="fits a given k: n_components='auto'"):
        bd.BANMF(n_components="auto").fit(np.eye(4))


def test_verbose_auto_shows_the_ranks_not_the_fits_of_the_selection(capsys):
    from banmf import BANMF

    X = make_boolean(24, 14, 2, 0.4, random_state=1)[0]
    BANMF("auto", n_init=1, max_iter=30, random_state=0, verbose=1).fit(X)
    lines = capsys.readouterr().err.splitlines()
    chosen = next(i for i, line in enumerate(lines) if "'auto': k=2, the lowest" in line)
    assert any(line.startswith("banmf: k=1: error") for line in lines[:chosen])
    assert not any("start" in line for line in lines[:chosen])  # the selection's fits
    assert any("start" in line for line in lines[chosen:])  # the fit at k=2
