"""Ctrl-C anywhere in a fit: the first keeps the best result so far, a second aborts.

Ctrl-C reaches the main thread only, so these fits run their starts there (``n_jobs=1``);
the starts side by side are interrupted by a real signal in tests/test_cli.py.
"""

import numpy as np
import pytest

import banmf.engine.local as banmf_module
from banmf import BANMF, boolean_error, make_boolean
from banmf.runtime.signals import Interruptions


@pytest.fixture
def X():
    return make_boolean(40, 30, 3, 0.4, noise=0.1, random_state=0)[0]


def interrupt_call(monkeypatch, name, when, times=1):
    """Make ``banmf.engine.local.<name>`` raise KeyboardInterrupt at its calls number ``when``
    (1-based) and the ``times - 1`` calls after it."""
    real = getattr(banmf_module, name)
    calls = []

    def wrapped(*args, **kwargs):
        calls.append(1)
        if when <= len(calls) < when + times:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(banmf_module, name, wrapped)
    return calls


def assert_usable(model, X):
    assert model.interrupted_
    assert model.W_.shape == (X.shape[0], 3) and model.components_.shape == (3, X.shape[1])
    assert model.reconstruction_err_ == boolean_error(X, model.W_, model.components_)


def fit_interrupted(model, X):
    with pytest.raises(KeyboardInterrupt):
        model.fit(X)
    return model


def test_ctrl_c_in_the_threshold_search_of_the_first_start_booleanizes_it_anyway(X, monkeypatch):
    calls = interrupt_call(monkeypatch, "threshold_factors", 1)
    model = fit_interrupted(BANMF(3, n_init=3, max_iter=50, random_state=0, n_jobs=1), X)
    assert_usable(model, X)
    assert len(calls) == 2 and len(model.init_errors_) == 1  # the search ran again; no more starts


def test_ctrl_c_in_a_later_threshold_search_keeps_the_earlier_starts(X, monkeypatch):
    reference = BANMF(3, n_init=1, max_iter=50, random_state=0, n_jobs=1).fit(X)
    interrupt_call(monkeypatch, "threshold_factors", 2)
    model = fit_interrupted(BANMF(3, n_init=3, max_iter=50, random_state=0, n_jobs=1), X)
    assert_usable(model, X)
    assert model.init_errors_ == reference.init_errors_  # start 2 was dropped, start 1 stands
    np.testing.assert_array_equal(model.W_, reference.W_)


@pytest.mark.parametrize(
    "step, kept",
    [("refine_factor_thresholds", ["grid"]), ("polish_factors", ["grid", "per-factor thresholds"])],
)
def test_ctrl_c_in_a_refinement_keeps_the_steps_done(X, monkeypatch, step, kept):
    interrupt_call(monkeypatch, step, 1)
    # No extra starts: the "columns" start runs first, and its polish would be the first.
    model = BANMF(3, n_init=3, max_iter=50, random_state=0, n_jobs=1, extra_starts=())
    model = fit_interrupted(model, X)
    assert_usable(model, X)
    assert list(model.refinement_) == kept and len(model.init_errors_) == 1
    assert model.reconstruction_err_ == model.refinement_[kept[-1]] == model.unpolished_err_


def test_ctrl_c_between_starts_keeps_the_finished_ones(X, monkeypatch):
    real = BANMF._initial_factors
    calls = []

    def second_raises(self, *args):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, *args)

    monkeypatch.setattr(BANMF, "_initial_factors", second_raises)
    model = fit_interrupted(BANMF(3, n_init=5, max_iter=30, random_state=0, n_jobs=1), X)
    assert_usable(model, X)
    assert len(model.init_errors_) == 2


def test_a_second_ctrl_c_aborts_and_leaves_the_model_unfitted(X, monkeypatch):
    # The first ends the iterations (the callback raises it), the second lands in the search.
    interrupt_call(monkeypatch, "threshold_factors", 1)

    def ctrl_c(t, f):
        if t == 3:
            raise KeyboardInterrupt

    model = BANMF(3, n_init=2, max_iter=50, random_state=0, n_jobs=1, callback=ctrl_c)
    with pytest.warns(UserWarning, match="interrupted after 3"), pytest.raises(KeyboardInterrupt):
        model.fit(X)
    assert not hasattr(model, "components_") and not hasattr(model, "interrupted_")


def test_an_uninterrupted_fit_says_so_and_refinement_lists_the_steps_that_ran(X):
    model = BANMF(3, n_init=1, max_iter=30, random_state=0, thresholds="global", polish=False).fit(
        X
    )
    assert not model.interrupted_ and list(model.refinement_) == ["grid"]
    model = BANMF(3, n_init=1, max_iter=30, random_state=0, n_jobs=1).fit(X)
    assert list(model.refinement_) == ["grid", "per-factor thresholds", "polish"]
    assert model.refinement_["polish"] == model.reconstruction_err_


def test_interruptions_count_across_threads():
    seen = Interruptions()
    assert seen.first() and not seen.first() and seen.count == 2


def test_pnlpf_keeps_the_factors_of_the_iterations_done(X, monkeypatch):
    from banmf import PNLPF

    real = PNLPF._iterate

    def three_then_ctrl_c(self, Xd, weights, W, H, losses, max_iter):
        real(self, Xd, weights, W, H, losses, min(3, max_iter))
        raise KeyboardInterrupt

    monkeypatch.setattr(PNLPF, "_iterate", three_then_ctrl_c)
    model = fit_interrupted(PNLPF(3, random_state=0), X)
    assert_usable(model, X)
    assert model.n_iter_ == 3


def test_zhang_keeps_the_grid_thresholds_and_skips_the_polish(X, monkeypatch):
    from banmf import ZhangThreshold

    def ctrl_c(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(ZhangThreshold, "_refine", ctrl_c)
    model = fit_interrupted(ZhangThreshold(3, max_iter=50, random_state=0, polish=True), X)
    assert_usable(model, X)
    assert not model.refined_ and model.polish_rounds_ == 0


def test_ctrl_c_in_a_baselines_polish_keeps_the_unpolished_factors(X, monkeypatch):
    import banmf.models._base as base
    from banmf import ZhangThreshold

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(base, "polish_factors", ctrl_c)
    model = fit_interrupted(ZhangThreshold(3, max_iter=50, random_state=0, polish=True), X)
    assert_usable(model, X)
    assert model.reconstruction_err_ == model.unpolished_err_


def test_ctrl_c_in_the_combination_keeps_the_best_start(X, monkeypatch):
    """The starts are done: Ctrl-C while their factors are combined keeps the best of them."""
    plain = BANMF(3, n_init=2, max_iter=50, random_state=0, n_jobs=1, combine=False).fit(X)
    interrupt_call(monkeypatch, "combine", 1)
    model = fit_interrupted(BANMF(3, n_init=2, max_iter=50, random_state=0, n_jobs=1), X)
    assert_usable(model, X)
    assert "combined" not in model.extra_start_errors_
    assert model.init_errors_ == plain.init_errors_
    np.testing.assert_array_equal(model.components_, plain.components_)


def test_ctrl_c_in_the_combinations_polish_keeps_the_choice(X, monkeypatch):
    """Ctrl-C in the polish of the combination's choice: the choice stands as a start, kept
    only if lower than the others."""
    real = banmf_module.combine

    def new_choice(data, runs, k, more=()):
        W, H, error, info = real(data, runs, k, more)
        return W, H, error, {**info, "new": True}  # so that it is polished

    monkeypatch.setattr(banmf_module, "combine", new_choice)
    calls = interrupt_call(monkeypatch, "polish_factors", 5)
    model = fit_interrupted(BANMF(3, n_init=2, max_iter=50, random_state=0, n_jobs=1), X)
    assert len(calls) == 5  # "columns", two random starts, "nmf", the combination's polish
    assert_usable(model, X)
    errors = [*model.init_errors_, *model.extra_start_errors_.values()]
    assert model.reconstruction_err_ == min(errors)
    assert "combined" in model.extra_start_errors_
    if model.best_start_ == "combined":
        assert list(model.refinement_) == ["combined"]  # the polish did not finish
