"""Choosing k: the description length against a dense oracle, folds that partition the
observed cells, factor agreement against brute force, planted ranks found, reproducible."""

import io
import itertools
import json
import logging
import pickle

import numpy as np
import pytest
import reference as ref
from conftest import binary_matrices
from hypothesis import example, given, settings
from hypothesis import strategies as st

import banmf
import banmf.engine.predictor
from banmf import select_rank
from banmf.model_selection import (
    MIN_FOLD_ONES,
    STABLE,
    cv_folds,
    description_length,
    factor_agreement,
)
from banmf.selection.held_out import TIE_DECIMALS


@pytest.mark.filterwarnings("ignore:the unknown cells hide all")
@given(binary_matrices(max_n=12, max_m=10), st.integers(1, 4), st.integers(0, 2**32 - 1))
def test_description_length_matches_the_dense_definition(Xd, k, seed):
    rng = np.random.default_rng(seed)
    W, H = rng.random((Xd.shape[0], k)) < 0.4, rng.random((k, Xd.shape[1])) < 0.4
    assert description_length(Xd, W, H) == pytest.approx(ref.description_length(Xd, W, H))
    unknown = rng.random(Xd.shape) < 0.3
    unknown.flat[0] = False  # an all-unknown X is refused (nothing to describe)
    want = ref.description_length(Xd, W, H, ~unknown)
    assert description_length(Xd, W, H, missing=unknown) == pytest.approx(want)
    assert description_length(Xd, W, H, observed=~unknown) == pytest.approx(want)


def test_a_factor_that_explains_its_cells_shortens_the_description():
    X, W, H = banmf.make_boolean(80, 60, 3, 0.3, random_state=0)
    exact = description_length(X, W, H)
    assert exact < description_length(X, W[:, :2], H[:2])  # a factor missing
    assert exact < description_length(X, np.zeros((80, 0)), np.zeros((0, 60)))  # none


@pytest.mark.filterwarnings("ignore:the unknown cells hide all")
@given(
    binary_matrices(max_n=15, max_m=12),
    st.integers(2, 5),
    st.integers(0, 2**32 - 1),
    st.sampled_from([None, "missing", "observed"]),
)
def test_folds_partition_the_observed_cells_ones_and_zeros_evenly(Xd, folds, seed, form):
    Xd = Xd.astype(bool)
    unknown = np.random.default_rng(seed).random(Xd.shape) < (0.0 if form is None else 0.3)
    masks = {} if form is None else {form: unknown if form == "missing" else ~unknown}
    if folds > (~unknown).sum():  # a fold would be empty (or every cell is unknown)
        with pytest.raises(ValueError, match="observed cells|every cell of X is unknown"):
            cv_folds(Xd, folds, random_state=seed, **masks)
        return
    parts = [f.toarray() for f in cv_folds(Xd, folds, random_state=seed, **masks)]
    assert len(parts) == folds
    total = np.sum(parts, axis=0)
    np.testing.assert_array_equal(total, (~unknown).astype(int))  # each observed cell once
    for cells in (Xd & ~unknown, ~Xd & ~unknown):
        counts = [int((p & cells).sum()) for p in parts]
        assert max(counts) - min(counts) <= 1
    sizes = [int(p.sum()) for p in parts]
    assert max(sizes) - min(sizes) <= 1


@given(st.integers(1, 5), st.integers(2, 9), st.integers(2, 9), st.integers(0, 2**32 - 1))
def test_factor_agreement_is_the_bottleneck_matching_of_tiles(k, n, m, seed):
    rng = np.random.default_rng(seed)
    W1, H1 = rng.random((n, k)) < 0.5, rng.random((k, m)) < 0.5
    W2, H2 = rng.random((n, k)) < 0.5, rng.random((k, m)) < 0.5

    def jaccard(a, b):
        A = np.outer(W1[:, a], H1[a])
        B = np.outer(W2[:, b], H2[b])
        union = (A | B).sum()
        return (A & B).sum() / union if union else 0.0

    best = max(
        min(jaccard(a, b) for a, b in enumerate(perm)) for perm in itertools.permutations(range(k))
    )
    assert factor_agreement(W1, H1, W2, H2) == pytest.approx(best)
    order = rng.permutation(k)
    full = bool(np.all(W1.any(axis=0) & H1.any(axis=1)))
    assert factor_agreement(W1, H1, W1[:, order], H1[order]) == (1.0 if full else 0.0)


@pytest.mark.parametrize(
    "n, m, k, density, noise, seed",
    [(60, 50, 4, 0.4, 0.0, 1), (100, 100, 5, 0.2, 0.0, 0), (80, 60, 3, 0.3, 0.01, 2)],
)
def test_a_planted_rank_with_a_clear_gap_is_found(n, m, k, density, noise, seed):
    X, _, _ = banmf.make_boolean(n, m, k, density, noise=noise, random_state=seed)
    sel = select_rank(X, range(1, 10), random_state=0, folds=3)
    assert sel.best_k == k, sel.reason
    assert sel.choices == {"mdl": k, "cv": k, "stability": k}, sel.reason
    assert all(sel.stability[r] < STABLE for r in sel.ks if r > k)
    assert sel.ks[0] == 1 and sel.ks[-1] < 9  # the search stopped once the criteria turned
    assert sel.fits[k].error == sel.training_error[k]


def test_the_selection_is_reproducible_and_takes_unknown_cells():
    X, _, _ = banmf.make_boolean(60, 40, 3, 0.3, random_state=3)
    unknown = np.random.default_rng(0).random((60, 40)) < 0.1
    a = select_rank(X, range(1, 7), random_state=5, folds=3, missing=unknown)
    b = select_rank(X, range(1, 7), random_state=5, folds=3, missing=unknown)
    assert a.to_dict() | {"seconds": 0} == b.to_dict() | {"seconds": 0}
    assert a.best_k == 3
    json.dumps(a.to_dict())  # plain values
    only = select_rank(X, range(1, 5), criteria=["mdl"], random_state=0, patience=None)
    assert only.held_out_error is None and only.stability is None and only.ks == [1, 2, 3, 4]
    assert only.choices == {"mdl": only.best_k}


@settings(max_examples=10, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=3))
def test_the_combined_choice_is_a_majority_or_the_median(values):
    from banmf.selection.ranks import _combined_choice

    choices = dict(zip(["mdl", "cv", "stability"], values))
    k, reason = _combined_choice(choices)
    top = max(values.count(v) for v in values)
    if top > 1 or len(values) == 1:
        assert values.count(k) == top
    else:
        assert k == sorted(values)[(len(values) - 1) // 2] and "median" in reason


def test_bad_arguments_are_refused():
    X = np.eye(5)
    with pytest.raises(ValueError, match="criteria must be some of"):
        select_rank(X, criteria=["aic"])
    with pytest.raises(ValueError, match="unknown method 'x'"):
        select_rank(X, method="x")
    with pytest.raises(ValueError, match="ks must be positive ranks"):
        select_rank(X, ks=[0, 1])
    with pytest.raises(ValueError, match="folds must be an integer >= 2"):
        select_rank(X, folds=1)
    with pytest.raises(ValueError, match="patience must be a positive integer or None"):
        select_rank(X, patience=0)


@pytest.mark.parametrize("seed", [0, 1])
def test_grid_search_with_the_default_score_finds_a_planted_rank(seed):
    """score() is minus the bits per cell of the held-out rows: more factors than the data
    holds cost more than they save, where minus the error would always pick the largest k."""
    pytest.importorskip("sklearn")
    from sklearn.model_selection import GridSearchCV

    X, _, _ = banmf.make_boolean(120, 60, 4, density=0.3, noise=0.03, random_state=seed)
    ks = [3, 4, 5, 6]
    search = GridSearchCV(banmf.BANMF(n_init=1, random_state=0), {"n_components": ks}, cv=3)
    search.fit(X)
    assert search.best_params_ == {"n_components": 4}
    scores = search.cv_results_["mean_test_score"]
    assert np.all(np.diff(scores[1:]) < 0)  # past the planted rank every factor costs bits
    model = search.best_estimator_
    W = model.transform(X)
    bits = description_length(X, W, model.components_)
    assert model.score(X) == pytest.approx(-bits / (X.shape[0] * X.shape[1]))


def test_more_folds_than_the_ones_fill_are_refused_before_any_fit(monkeypatch):
    """1000 folds of zoo's 1,515 cells ran 119 s at k=1: refused at once, with the most."""
    monkeypatch.setattr(banmf.selection.ranks, "fit_tasks", lambda *a: pytest.fail("fitted"))
    X = banmf.datasets.load_zoo().X
    most = X.nnz // MIN_FOLD_ONES
    with pytest.raises(
        ValueError, match=f"at least 10 of its 660 observed ones, so at most {most}"
    ):
        select_rank(X, folds=1000)
    with pytest.raises(ValueError, match=f"pass folds <= {most}"):
        select_rank(X, folds=most + 1, criteria=["stability"])
    few = np.zeros((30, 30), dtype=bool)
    few[0, :15] = True
    with pytest.raises(ValueError, match=r"15 observed ones: too few for 'cv'.*criteria=\['mdl'\]"):
        select_rank(few, criteria=["mdl", "cv"])
    monkeypatch.undo()
    assert select_rank(few, [1], criteria=["mdl"]).folds == 0  # no folds needed


def test_progress_within_a_rank_counts_the_fits(monkeypatch, caplog):
    monkeypatch.setattr(banmf.selection.ranks, "FITS_EVERY_SECONDS", 0.0)
    X, _, _ = banmf.make_boolean(40, 30, 2, 0.3, random_state=0)
    with caplog.at_level(logging.INFO, logger="banmf.progress"):
        select_rank(X, [1, 2], folds=3, random_state=0, n_jobs=1, n_init=1)
    fits = [r.banmf for r in caplog.records if getattr(r, "banmf", {}).get("event") == "fits"]
    assert fits == [
        {"event": "fits", "k": k, "fits_done": d, "n_fits": 4} for k in (1, 2) for d in range(1, 5)
    ]
    assert "k=2: 3/4 fits done" in caplog.text


def test_a_choice_at_the_edge_of_the_ranks_tried_says_so():
    X, _, _ = banmf.make_boolean(60, 50, 4, 0.4, random_state=1)
    short = select_rank(X, range(1, 4), folds=3, random_state=0)
    assert short.best_k == 3 and short.edge == "k=3 is the largest rank tried: try larger k"
    assert short.reason.endswith("; " + short.edge) and short.to_dict()["edge"] == short.edge
    high = select_rank(X, range(4, 7), criteria=["mdl"], random_state=0)
    assert high.best_k == 4 and high.edge == "k=4 is the smallest rank tried: try smaller k"
    # stopped (as by Ctrl-C) after k=2: the last rank done is no finding
    stopped = select_rank(
        X, range(1, 10), folds=3, random_state=0, callback=lambda row: row["k"] == 2
    )
    assert stopped.ks == [1, 2] and stopped.best_k == 2 and "largest rank tried" in stopped.reason
    full = select_rank(X, range(1, 10), folds=3, random_state=0)
    assert full.best_k == 4 and full.edge is None and "rank tried" not in full.reason


def test_select_k_refuses_too_many_folds_and_says_when_the_choice_is_at_the_edge(monkeypatch):
    from banmf.cli import main

    path = str(banmf.datasets.data_dir() / "zoo_101x15.mtx")
    out, err = io.StringIO(), io.StringIO()
    assert main(["select-k", path, "--folds", "1000"], stdout=out, stderr=err) == 2
    assert "at most 66 folds; pass --folds 66 or fewer" in err.getvalue() and out.getvalue() == ""
    monkeypatch.setattr(banmf.selection.ranks, "FITS_EVERY_SECONDS", 0.0)
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["select-k", path, "--ks", "1:2", "--folds", "3", "--param", "n_init=1"],
        stdout=out,
        stderr=err,
    )
    assert code == 0, err.getvalue()
    assert "banmf: k=1: 2/4 fits done" in err.getvalue()
    assert "k=2 is the largest rank tried: try larger k" in out.getvalue()


# -- n_components="auto" ---------------------------------------------------------------------

# A clean planted matrix and a quick BANMF: every fit of the selection is one of these.
QUICK = {"n_init": 2, "max_iter": 200}


@pytest.fixture(scope="module")
def planted():
    return banmf.make_boolean(60, 40, 3, 0.35, random_state=4)[0].toarray()


@pytest.fixture(scope="module")
def auto_fit(planted):
    return banmf.BANMF(n_components="auto", random_state=0, **QUICK).fit(planted)


def test_auto_finds_the_planted_rank_and_fits_there_as_a_given_k_would(planted, auto_fit):
    sel = auto_fit.rank_selection_
    assert auto_fit.n_components_ == sel.best_k == 3 and auto_fit.reconstruction_err_ == 0
    assert sel.choices == {"cv": 3} and sel.folds == 10 and sel.ks[0] == 1
    held = sel.held_out_error
    assert sel.best_k == min(held, key=lambda k: (held[k], k))  # the lowest, not one SE
    given = banmf.BANMF(n_components=3, random_state=0, **QUICK).fit(planted)
    np.testing.assert_array_equal(auto_fit.W_, given.W_)
    np.testing.assert_array_equal(auto_fit.components_, given.components_)


def test_auto_is_reproducible(planted, auto_fit):
    again = banmf.BANMF(n_components="auto", random_state=0, **QUICK).fit(planted)
    assert again.rank_selection_.held_out_error == auto_fit.rank_selection_.held_out_error
    np.testing.assert_array_equal(again.components_, auto_fit.components_)


def test_auto_never_reads_unknown_cells_and_keeps_no_starts(planted):
    unknown = np.random.default_rng(1).random(planted.shape) < 0.15
    flipped = planted.copy()
    flipped[unknown] = 1 - flipped[unknown]  # what is under the mask changes nothing
    fits = [
        banmf.factorize(X, "auto", random_state=2, missing=unknown, **QUICK)
        for X in (planted, flipped)
    ]
    a, b = (f.estimator for f in fits)
    assert a.rank_selection_.to_dict() | {"seconds": 0} == b.rank_selection_.to_dict() | {
        "seconds": 0
    }
    # Scored by the predictor the fit at the chosen k uses, named per k; the margin recorded.
    assert set(a.rank_selection_.predictor) == set(a.rank_selection_.ks)
    assert a.rank_selection_.cv_margin["k"] == a.rank_selection_.best_k
    assert all("predictor" in row for row in a.rank_selection_.to_dict()["per_k"])
    assert fits[0].n_components == 3
    np.testing.assert_array_equal(fits[0].H, fits[1].H)
    rows, cols = np.nonzero(unknown)
    assert fits[0].predictor.to_json() == fits[1].predictor.to_json()
    np.testing.assert_array_equal(
        fits[0].predict_proba(rows, cols), fits[1].predict_proba(rows, cols)
    )
    # The starts reach the scorer through keeping_starts(): no fit keeps them.
    for model in (a, *(fit.estimator for fit in a.rank_selection_.fits.values())):
        assert not any("start" in name and name.startswith("_") for name in vars(model))


def test_auto_predicts_unknown_cells_by_its_fold_fits_the_same_on_any_threads(monkeypatch):
    # Noisy enough that a vote scores the chosen rank (W⊗H itself scores an exact fit's).
    X, _, _ = banmf.make_boolean(80, 50, 3, 0.3, noise=0.15, random_state=0)
    unknown = np.random.default_rng(0).random(X.shape) < 0.2
    rows, cols = np.nonzero(unknown)

    def no_inner_fit(*args):
        raise AssertionError("the fold fits predict: no inner fit")

    monkeypatch.setattr(banmf.engine.predictor, "inner_fit_predictor", no_inner_fit)
    fits = [
        banmf.factorize(
            X, "auto", random_state=0, missing=unknown, n_jobs=jobs, n_init=3, max_iter=60
        )
        for jobs in (1, 2)
    ]
    selection = fits[0].estimator.rank_selection_
    predictor = fits[0].predictor
    assert predictor is selection.fold_predictor and predictor.kind == "folds"
    assert predictor.member_kind == selection.predictor[selection.best_k]
    assert len(predictor.sizes) == predictor.report["members"] == selection.folds
    assert all(
        f.shape[-1 if i == 0 else -2] == selection.best_k for i, f in enumerate(predictor.factors)
    )
    assert predictor.report["held_out_cells"] == int(np.count_nonzero(~unknown))
    proba = fits[0].predict_proba(rows, cols)
    members = predictor.members()
    want = np.mean([m.predict_proba(fits[0].W, fits[0].H, rows, cols) for m in members], axis=0)
    np.testing.assert_allclose(proba, want, rtol=1e-12)
    np.testing.assert_array_equal(fits[0].predict(rows, cols), want > 0.5)
    assert fits[1].predictor.to_json() == predictor.to_json()
    np.testing.assert_array_equal(fits[1].predict_proba(rows, cols), proba)
    for a, b in zip(fits[1].predictor.factors, predictor.factors):
        np.testing.assert_array_equal(a, b)


# Noisy planted data with a fifth of its cells unknown: the predictor beats W⊗H there.
def noisy_selection(
    by_predictor, n_jobs=None, cv_margin=None, ks=(2, 3, 5), patience=None, flip=False
):
    from banmf.selection.ranks import select_rank_of

    X, _, _ = banmf.make_boolean(80, 50, 3, 0.3, noise=0.05, random_state=0)
    unknown = np.random.default_rng(0).random(X.shape) < 0.2
    if flip:  # other values under the unknown cells
        X = np.where(unknown, 1 - X.toarray(), X.toarray())
    return select_rank_of(
        X,
        list(ks),
        banmf.BANMF(max_iter=60, n_init=3),
        criteria=("cv",),
        folds=3,
        cv_rule="min",
        patience=patience,
        missing=unknown,
        random_state=0,
        n_jobs=n_jobs,
        by_predictor=by_predictor,
        cv_margin=cv_margin,
    )


def test_with_unknown_cells_the_folds_are_scored_by_the_predictor():
    by_product = noisy_selection(False)
    serial, parallel = (noisy_selection(True, n_jobs) for n_jobs in (1, 2))
    assert by_product.predictor is None
    # The same fits, whatever the threads: only their scoring differs.
    assert serial.training_error == by_product.training_error
    assert serial.to_dict() | {"seconds": 0} == parallel.to_dict() | {"seconds": 0}
    for k in serial.ks:
        # W⊗H is one of the kinds: the one chosen is never worse, and equal when it is W⊗H.
        if serial.predictor[k] == "product":
            assert serial.held_out_error[k] == by_product.held_out_error[k]
        else:
            assert serial.held_out_error[k] <= by_product.held_out_error[k]
    assert any(serial.held_out_error[k] < by_product.held_out_error[k] for k in serial.ks)


def test_the_margin_takes_the_largest_near_equal_rank_the_same_on_any_threads():
    from banmf.selection.ranks import margin_choice

    lowest = noisy_selection(True)
    serial, parallel = (noisy_selection(True, n_jobs, cv_margin=1.0) for n_jobs in (1, 2))
    assert serial.to_dict() | {"seconds": 0} == parallel.to_dict() | {"seconds": 0}
    # The same fits and scores as the lowest's; only the choice among them differs.
    assert serial.held_out_error == lowest.held_out_error and lowest.cv_margin is None
    record = margin_choice(serial.fold_errors, serial.predictor, 1.0)
    assert serial.cv_margin == record and serial.best_k == record["k"]
    # Every rank's errors on the same folds, in their order: the mean is held_out_error.
    for k, errors in serial.fold_errors.items():
        assert len(errors) == serial.folds
        assert serial.held_out_error[k] == pytest.approx(np.mean(errors))
        assert serial.to_dict()["per_k"][serial.ks.index(k)]["fold_errors"] == errors
    assert record["lowest_k"] == lowest.best_k
    assert serial.to_dict()["cv_margin"] == record
    # Without unknown cells there is no predictor to score by: the lowest, nothing recorded.
    X, _, _ = banmf.make_boolean(40, 30, 3, 0.3, noise=0.05, random_state=0)
    plain = select_rank(
        X, [1, 2, 3], criteria=["cv"], folds=3, cv_rule="min", random_state=0, **QUICK
    )
    assert plain.cv_margin is None and plain.to_dict()["cv_margin"] is None
    # A selection pickled before cv_margin existed loads, without one.
    state = pickle.loads(pickle.dumps(serial)).__dict__.copy()
    del state["cv_margin"]
    old = object.__new__(type(serial))
    old.__dict__.update(state)
    assert old.cv_margin is None and old.to_dict()["best_k"] == serial.best_k
    # And one pickled before the fold errors were kept.
    state = pickle.loads(pickle.dumps(serial)).__dict__.copy()
    del state["fold_errors"]
    old = object.__new__(type(serial))
    old.__dict__.update(state)
    assert old.fold_errors is None
    assert all("fold_errors" not in row for row in old.to_dict()["per_k"])


def paired_choice(fold_errors, kind, margin):
    """:func:`banmf.selection.ranks.margin_choice`, brute force: each rank's fold errors less the
    lowest mean rank's, fold by fold; the largest rank within the margin, checked downwards,
    and every rank within it. Compared as the library compares held-out rates (to
    ``TIE_DECIMALS``): a difference equal to ``margin`` standard errors is within, though the
    standard error's square root may round a last bit below it."""
    ks = sorted(fold_errors)
    means = {k: np.mean(fold_errors[k]) for k in ks}
    lowest = next(k for k in ks if means[k] == min(means.values()))
    near = []
    for k in reversed(ks):
        gaps = np.array(fold_errors[k]) - np.array(fold_errors[lowest])
        mean, se = gaps.mean(), gaps.std(ddof=1) / np.sqrt(len(gaps))
        within = round(mean, TIE_DECIMALS) <= margin * round(se, TIE_DECIMALS)
        if k == lowest or (within and kind[k] in ("vote", "nmf")):
            near.append((k, mean, se))
    k, mean, se = max(near)
    return lowest, k, mean, se, sorted(r for r, _, _ in near)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 24), min_size=3, max_size=3), min_size=1, max_size=8),
    st.lists(st.integers(-16, 16), min_size=3, max_size=3),
    st.lists(st.sampled_from(["product", "vote", "nmf"]), min_size=8, max_size=8),
    st.sampled_from([0.0, 0.5, 1.0, 2.0]),
)
def test_the_margin_choice_against_brute_force(errors, hardness, kinds, margin):
    from banmf.selection.ranks import margin_choice

    # Rates in 64ths (exact in binary): sums and differences carry no rounding.
    ks = [2 * i + 1 for i in range(len(errors))]  # ranks need not be consecutive
    fold_errors = {k: [e / 64 for e in row] for k, row in zip(ks, errors)}
    kind = dict(zip(ks, kinds))
    got = margin_choice(fold_errors, kind, margin)
    lowest, k, mean, se, near = paired_choice(fold_errors, kind, margin)
    assert got["near"] == near
    assert {key: v for key, v in got.items() if key != "near"} == pytest.approx(
        {"margin": margin, "lowest_k": lowest, "k": k, "difference": mean, "se": se}
    )
    assert got["k"] >= lowest
    # Paired: a fold harder or easier for every rank alike changes nothing.
    harder = {k: [e + h / 64 for e, h in zip(row, hardness)] for k, row in fold_errors.items()}
    assert margin_choice(harder, kind, margin) == got


def test_the_margin_pairs_the_ranks_fold_by_fold():
    from banmf.selection.ranks import margin_choice

    # Folds of very unequal difficulty: each rank's own standard error is large.
    hardness = np.array([0.10, 0.30, 0.20, 0.40])
    kind = {1: "vote", 2: "vote", 3: "vote"}
    # Rank 3 is worse than rank 1 on every fold by .01; rank 2 as good as rank 1 on average.
    fold_errors = {
        1: list(hardness),
        2: list(hardness + [0.004, -0.004, 0.003, -0.002]),
        3: list(hardness + 0.01),
    }
    got = margin_choice(fold_errors, kind, 1.0)
    assert got["lowest_k"] == 1 and got["k"] == 2 and got["near"] == [1, 2]
    # Unpaired, rank 3 is within a standard error of the lowest (.01 against ±.065).
    assert np.mean(fold_errors[3]) - np.mean(hardness) < np.std(hardness, ddof=1) / 2
    # A consistent loss is never within the margin, however large the folds' spread.
    assert margin_choice({1: fold_errors[1], 3: fold_errors[3]}, kind, 2.0)["k"] == 1


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(0, 12), min_size=2, max_size=8),
    st.lists(st.integers(0, 4), min_size=8, max_size=8),
    st.lists(st.sampled_from(["product", "vote", "nmf"]), min_size=8, max_size=8),
    st.sampled_from([None, 1.0]),
    st.integers(1, 3),
)
@example(
    [0, 0, 0, 3], [0, 0, 0, 3, 0, 0, 0, 0], ["product"] * 3 + ["vote"] + ["product"] * 4, 1.0, 3
)
def test_the_scan_stops_patience_ranks_past_the_rank_the_rule_takes(
    errors, spreads, kinds, margin, patience
):
    import banmf.selection.ranks as selection

    # A constructed fold-error curve: rank k's two folds score mean ± spread, by kind[k].
    ks = list(range(1, len(errors) + 1))
    rates = {k: [(e - d) / 64, (e + d) / 64] for k, e, d in zip(ks, errors, spreads)}
    kind = dict(zip(ks, kinds))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            selection,
            "_fold_rates",
            lambda X, runs, held, kept, zero_weight, seed: (
                kind[runs[0].n_components],
                rates[runs[0].n_components],
                None,
            ),
        )
        # No trivial predictor to beat: the margin rule alone (the baseline's own test below).
        patch.setattr(selection, "_baseline", lambda X, held, zero_weight: None)
        X, _, _ = banmf.make_boolean(30, 20, 2, 0.3, random_state=0)
        unknown = np.random.default_rng(0).random(X.shape) < 0.1
        got = selection.select_rank_of(
            X,
            ks,
            banmf.BANMF(max_iter=5, n_init=1),
            criteria=("cv",),
            folds=2,
            cv_rule="min",
            patience=patience,
            missing=unknown,
            random_state=0,
            by_predictor=True,
            cv_margin=margin,
        )
    mean = {k: float(np.mean(r)) for k, r in rates.items()}

    def taken(upto):  # the rank the rule takes on ranks 1..upto, brute force
        if margin is None:
            return min(range(1, upto + 1), key=lambda k: (mean[k], k))
        return paired_choice({k: rates[k] for k in range(1, upto + 1)}, kind, margin)[1]

    # The scan tries rank after rank until one is `patience` past the rank taken so far.
    last = next((k for k in ks if k - taken(k) >= patience), ks[-1])
    assert got.ks == ks[:last]
    assert got.best_k == taken(last)
    stopped = {"patience": patience, "from_k": taken(last)} if last < ks[-1] else None
    assert got.stopped == stopped and got.to_dict()["stopped"] == stopped


def test_the_stop_reads_no_unknown_cell_and_is_the_same_on_any_threads():
    from banmf.selection.ranks import margin_choice

    runs = [
        noisy_selection(True, n_jobs, 1.0, range(1, 11), 3, flip)
        for n_jobs, flip in ((1, False), (2, False), (1, True))
    ]
    for other in runs[1:]:
        assert other.to_dict() | {"seconds": 0} == runs[0].to_dict() | {"seconds": 0}
    got = runs[0]
    tried = got.ks
    record = margin_choice(got.fold_errors, got.predictor, 1.0)
    assert got.best_k == record["k"]
    # Three ranks past the rank the margin took, here past its lowest: counted from the
    # lowest, the scan stops sooner, on the same fits.
    assert record["k"] > record["lowest_k"]
    assert got.stopped == {"patience": 3, "from_k": record["k"]}
    assert tried == list(range(1, record["k"] + 4))
    lowest = noisy_selection(True, None, None, range(1, 11), 3)
    assert lowest.stopped == {"patience": 3, "from_k": record["lowest_k"]}
    assert lowest.ks == list(range(1, record["lowest_k"] + 4))
    assert all(lowest.held_out_error[k] == got.held_out_error[k] for k in lowest.ks)
    assert all(lowest.fold_errors[k] == got.fold_errors[k] for k in lowest.ks)
    # A selection pickled before `stopped` existed loads, without one.
    state = pickle.loads(pickle.dumps(got)).__dict__.copy()
    del state["stopped"], state["zero_weight"]
    old = object.__new__(type(got))
    old.__dict__.update(state)
    assert old.stopped is None and old.to_dict()["stopped"] is None
    assert old.zero_weight == 1.0  # nor the zeros' weight: each counted once then


def test_a_kind_of_predictor_scores_the_folds_with_one_threshold():
    from banmf.selection.predictor import choose_over_folds

    rng = np.random.default_rng(0)
    truths = [rng.random(size) < 0.4 for size in (40, 41, 41)]
    product = [t ^ (rng.random(len(t)) < 0.3) for t in truths]  # W⊗H: 30 % wrong
    vote = [np.where(t, 0.75, 0.25) + 0.5 * (rng.random(len(t)) < 0.1) for t in truths]
    candidates = [{"product": p.astype(float), "vote": v} for p, v in zip(product, vote)]
    kind, rates = choose_over_folds(candidates, truths)
    assert kind == "vote"
    # The vote's one threshold is the best single cut of all the folds' cells.
    every = np.concatenate(vote)
    truth = np.concatenate(truths)
    fewest = min(((every > t) != truth).sum() for t in np.concatenate([[-1.0], every]))
    assert sum(r * len(t) for r, t in zip(rates, truths)) == pytest.approx(fewest)
    # Without a kind every fold gives, W⊗H scores them, at 0.5.
    kind, rates = choose_over_folds(
        [candidates[0], {"product": product[1].astype(float)}], truths[:2]
    )
    assert kind == "product"
    assert rates == [((p > 0.5) != t).mean() for p, t in zip(product[:2], truths[:2])]


@given(
    st.lists(
        st.tuples(st.integers(0, 4), st.integers(0, 4), st.booleans()), min_size=4, max_size=40
    ),
    st.integers(2, 4),
    st.integers(1, 5),
)
def test_a_zero_weight_in_the_folds_counts_each_zero_that_many_times(cells, folds, weight):
    """The folds' kind and error rates, each zero standing for ``weight`` zeros, are those of
    the cells with every zero repeated that often."""
    from banmf.selection.predictor import choose_over_folds, error_rate

    cells = np.array(cells, dtype=np.float64)
    parts = [cells[f::folds] for f in range(folds)]
    if any(len(part) == 0 for part in parts):
        return
    candidates = [{"product": p[:, 0] > 2, "vote": p[:, 0] / 4, "nmf": p[:, 1]} for p in parts]
    truths = [p[:, 2] > 0 for p in parts]
    repeats = [np.where(t, 1, weight) for t in truths]
    every = [{kind: np.repeat(s, r) for kind, s in c.items()} for c, r in zip(candidates, repeats)]
    truths_r = [np.repeat(t, r) for t, r in zip(truths, repeats)]
    assert choose_over_folds(candidates, truths, weight) == choose_over_folds(every, truths_r)
    for c, t, c_r, t_r in zip(candidates, truths, every, truths_r):
        assert error_rate(c["product"], t, weight) == error_rate(c_r["product"], t_r)
        assert error_rate(c["product"], t) == np.mean(c["product"] != t)


def fold_selection(monkeypatch, form, n_jobs=None, by_predictor=False, seen=None):
    """``(X, unknown, selection)`` on sparse data whose folds sample the zeros (``FOLD_ZEROS``
    patched to 600: each zero drawn stands for about 11); ``seen`` collects the arguments of
    every ``choose_over_folds`` call."""
    import banmf.selection.held_out as held_out
    import banmf.selection.ranks as module

    monkeypatch.setattr(held_out, "FOLD_ZEROS", 600)
    if seen is not None:
        real = module.choose_over_folds

        def spy(candidates, truths, zero_weight):
            seen.append((candidates, truths, zero_weight))
            return real(candidates, truths, zero_weight)

        monkeypatch.setattr(module, "choose_over_folds", spy)
    X = banmf.make_sparse_tiles(150, 60, 500, 3, random_state=0)[0]
    unknown = np.random.default_rng(0).random(X.shape) < (0.2 if form else 0.0)
    masks = {"missing": {"missing": unknown}, "observed": {"observed": ~unknown}, None: {}}[form]
    selection = module.select_rank_of(
        X,
        [1, 3, 5],
        banmf.BANMF(max_iter=40, n_init=3),
        criteria=("cv",),
        folds=3,
        cv_rule="min",
        random_state=0,
        n_jobs=n_jobs,
        by_predictor=by_predictor,
        **masks,
    )
    return X, unknown, selection


@pytest.mark.parametrize(
    "form, by_predictor", [(None, False), ("missing", True), ("observed", True)]
)
def test_when_the_folds_sample_the_zeros_each_stands_for_its_share(form, by_predictor, monkeypatch):
    """Past ``FOLD_ZEROS`` observed zeros the folds take every one and a sample of the zeros:
    each zero drawn weighs (observed zeros) / ``FOLD_ZEROS`` in the threshold and the rates,
    so that the folds weigh ones and zeros as the data does."""
    from banmf.selection.predictor import kind_threshold

    seen = []
    X, unknown, got = fold_selection(monkeypatch, form, None, by_predictor, seen)
    ones = int((X.toarray().astype(bool) & ~unknown).sum())
    zeros = int((~X.toarray().astype(bool) & ~unknown).sum())
    assert got.fold_zeros == 600 and got.zero_weight == zeros / 600 > 10
    assert got.to_dict()["zero_weight"] == got.zero_weight
    assert (got.predictor is not None) == by_predictor
    assert len(seen) == len(got.ks)
    for k, (candidates, truths, weight) in zip(got.ks, seen):
        assert weight == got.zero_weight
        assert sum(int(t.sum()) for t in truths) == ones
        assert sum(int((~t).sum()) for t in truths) == 600
        kind = got.predictor[k] if by_predictor else "product"
        # Each fold's rate by hand: its kind's guesses (W⊗H's at 0.5, another kind's at its
        # one threshold over every fold's cells), a wrong zero counting `weight` errors.
        pooled = np.concatenate([c[kind] for c in candidates])
        threshold, _ = kind_threshold(kind, pooled, np.concatenate(truths), weight)
        expected = [
            (np.sum(t & ~(c[kind] > threshold)) + weight * np.sum(~t & (c[kind] > threshold)))
            / (t.sum() + weight * (~t).sum())
            for c, t in zip(candidates, truths)
        ]
        assert got.fold_errors[k] == pytest.approx(expected, rel=1e-12)
        assert got.held_out_error[k] == pytest.approx(np.mean(expected), rel=1e-12)
        plain = [np.mean((c[kind] > threshold) != t) for c, t in zip(candidates, truths)]
        assert got.fold_errors[k] != pytest.approx(plain)  # the weight matters here


def test_a_selection_with_weighted_zeros_is_the_same_on_any_threads(monkeypatch):
    one, two = (fold_selection(monkeypatch, "missing", n_jobs, True)[2] for n_jobs in (1, 2))
    again = fold_selection(monkeypatch, "missing", 1, True)[2]
    assert one.zero_weight > 1
    assert one.to_dict() | {"seconds": 0} == two.to_dict() | {"seconds": 0}
    assert one.to_dict() | {"seconds": 0} == again.to_dict() | {"seconds": 0}


def test_the_one_se_rule_and_the_lowest_held_out_error(planted):
    kw = {"criteria": ["cv"], "folds": 3, "random_state": 0, "n_init": 1, "max_iter": 100}
    one_se = select_rank(planted, range(1, 5), **kw)
    lowest = select_rank(planted, range(1, 5), cv_rule="min", **kw)
    assert one_se.held_out_error == lowest.held_out_error  # the same fits, another rule
    held = lowest.held_out_error
    assert lowest.best_k == min(held, key=lambda k: (held[k], k))
    with pytest.raises(ValueError, match="cv_rule must be one of"):
        select_rank(planted, [1], cv_rule="lowest")


def test_a_method_given_as_an_estimator_fits_with_its_parameters(planted):
    template = banmf.BANMF(n_components="auto", n_init=1, max_iter=100, polish=False)
    kw = {"criteria": ["mdl"], "random_state": 0}
    by_estimator = select_rank(planted, [2, 3], method=template, **kw)
    by_name = select_rank(planted, [2, 3], n_init=1, max_iter=100, polish=False, **kw)
    assert by_estimator.to_dict() | {"seconds": 0} == by_name.to_dict() | {"seconds": 0}
    assert by_estimator.fits[3].method == "banmf" and by_estimator.fits[3].params["polish"] is False


def test_auto_reports_each_rank_and_the_choice(planted, caplog):
    with caplog.at_level(logging.INFO, logger="banmf"):
        model = banmf.GreConD(n_components="auto", random_state=0).fit(planted)
    rows = [
        r.banmf["row"] for r in caplog.records if getattr(r, "banmf", {}).get("event") == "rank"
    ]
    assert [row["k"] for row in rows] == model.rank_selection_.ks
    assert "choosing k in 1..20 by held-out error" in caplog.text
    assert f"'auto': k={model.n_components_}, the lowest held-out error" in caplog.text


def interrupt_rank(monkeypatch, rank):
    """Make the fits of the selection's ``rank``-th rank end by Ctrl-C."""
    from banmf.runtime.runner import fit_tasks

    calls = []

    def interrupted(*args):
        calls.append(1)
        if len(calls) == rank:
            raise KeyboardInterrupt
        return fit_tasks(*args)

    monkeypatch.setattr(banmf.selection.ranks, "fit_tasks", interrupted)
    return calls


def test_ctrl_c_during_the_selection_keeps_the_best_rank_done(planted, monkeypatch):
    calls = interrupt_rank(monkeypatch, 3)
    model = banmf.BANMF(n_components="auto", random_state=0, **QUICK)
    with pytest.raises(KeyboardInterrupt):
        model.fit(planted)
    sel = model.rank_selection_
    assert len(calls) == 3 and sel.interrupted and sel.ks == [1, 2]
    # The selection's fit at its best rank so far, to all observed cells, marked interrupted.
    kept = sel.fits[sel.best_k]
    assert model.interrupted_ and model.n_components_ == sel.best_k
    np.testing.assert_array_equal(model.W_, kept.W)
    np.testing.assert_array_equal(model.components_, kept.H)
    assert model.reconstruction_err_ == kept.error
    # banmf.factorize hands it over as the result so far.
    interrupt_rank(monkeypatch, 3)
    with pytest.raises(banmf.exceptions.Interrupted) as caught:
        banmf.factorize(planted, "auto", random_state=0, **QUICK)
    assert caught.value.result.interrupted and caught.value.result.n_components == sel.best_k


def test_ctrl_c_in_the_first_rank_leaves_the_model_unfitted(planted, monkeypatch):
    interrupt_rank(monkeypatch, 1)
    model = banmf.BANMF(n_components="auto", random_state=0, **QUICK)
    with pytest.raises(KeyboardInterrupt):
        model.fit(planted)
    assert not hasattr(model, "components_") and not hasattr(model, "rank_selection_")


def test_equal_held_out_errors_are_equal_whatever_their_last_bit():
    from banmf.selection.ranks import margin_choice

    # The same 61 errors in 240 cells, one error moved between folds: the means differ in
    # their last bit only (0.25833333333333336 and 0.2583333333333333).
    a = [7, 8, 5, 5, 8, 5, 7, 5, 6, 6]
    b = [7, 8, 5, 6, 7, 5, 7, 5, 6, 6]
    fold_errors = {1: [e / 24 for e in b], 2: [e / 24 for e in a]}
    assert np.mean(fold_errors[1]) != np.mean(fold_errors[2])
    got = margin_choice(fold_errors, {1: "product", 2: "product"}, 1.0)
    assert got["lowest_k"] == got["k"] == 1  # a tie: the smaller rank


@pytest.fixture(scope="module")
def noise():
    """Bernoulli(0.3) cells, a fifth of them unknown: nothing for a rank to predict by."""
    rng = np.random.default_rng(1)
    return rng.random((20, 30)) < 0.3, rng.random((20, 30)) < 0.2


def test_auto_on_noise_takes_the_smallest_rank_and_says_no_rank_generalizes(noise):
    X, unknown = noise
    model = banmf.BANMF(n_components="auto", random_state=0, **QUICK)
    model.fit(X, missing=unknown)
    sel = model.rank_selection_
    # No rank beats the trivial predictors: the smallest, found patience (3) ranks in.
    assert not sel.generalizes and sel.best_k == model.n_components_ == 1
    assert sel.ks == [1, 2, 3, 4] and sel.stopped == {"patience": 3, "from_k": 1}
    assert sel.edge is None and "no rank generalizes" in sel.reason
    base = sel.baseline
    assert base["kind"] in ("zeros", "majority") and len(base["fold_errors"]) == sel.folds
    assert base["error"] == min(base["errors"].values())
    record = sel.to_dict()
    assert record["generalizes"] is False and record["baseline"]["kind"] == base["kind"]
    # The unknown cells are predicted by the column majority, chosen on the folds.
    assert model.predictor_.kind == "majority" and sel.fold_predictor is None
    assert "no rank predicted better" in model.predictor_.chosen_on()


def test_auto_on_planted_data_beats_the_trivial_predictors(planted):
    unknown = np.random.default_rng(0).random(planted.shape) < 0.1
    model = banmf.BANMF(n_components="auto", random_state=0, **QUICK).fit(planted, missing=unknown)
    sel = model.rank_selection_
    assert sel.generalizes and sel.best_k >= 3
    assert sel.held_out_error[sel.best_k] < sel.baseline["error"]
    assert model.predictor_.kind != "majority"


def test_auto_with_too_few_ones_for_two_folds_is_refused():
    few = np.zeros((30, 30), dtype=bool)
    few[0, :15] = True
    with pytest.raises(banmf.InputError, match="X has 15 observed ones; give n_components"):
        banmf.BANMF(n_components="auto").fit(few)
