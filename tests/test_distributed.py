"""banmf.distributed: the same fit as one machine, on any number of workers, surviving a lost
worker, out of core; and its row-block files.

The cluster tests start their own LocalCluster of worker processes (skipped without Dask)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import banmf
import banmf.distributed as bd
from banmf.engine import Driver
from banmf.engine.booleanize import GridRows, grid_points, grid_ranks, search_grid
from banmf.engine.dask import worker as _worker
from banmf.engine.dask.blocks import _cuts
from banmf.engine.dask.session import Session
from banmf.io import Dataset
from banmf.runtime.signals import Interruptions

# The parameters both estimators share in these tests: what bd.BANMF runs (global thresholds,
# no polish, no swaps, the columns start), two random starts, few iterations (every round trip
# costs the cluster's latency: the fits' time is their iterations'; none of these fits converges
# by then, and the faults below strike at iteration 40).
SHARED = {
    "n_components": 5,
    "random_state": 0,
    "max_iter": 60,
    "n_init": 2,
    "thresholds": "per-factor",
    "polish": "flip",
    "swap": True,
    "extra_starts": ("nmf", "columns"),
    "combine": False,  # the combination's own tests below
}


def _data(n=300, m=200, seed=0):
    X = banmf.make_boolean(n, m, 5, density=0.3, noise=0.02, random_state=seed)[0]
    missing = sp.random(n, m, density=0.05, random_state=seed + 1, format="csr") > 0
    observed = sp.random(n, m, density=0.6, random_state=seed + 2, format="csr") > 0
    return X, missing, observed


@contextlib.contextmanager
def _cluster(n_workers: int, **kwargs):
    """A LocalCluster of worker processes. Its nannies set OMP_NUM_THREADS=1 (and other
    variables) in this process's environment for the workers they start; the environment is
    put back, or every later fit in this process would see a one-thread budget."""
    distributed = pytest.importorskip("distributed")
    saved = dict(os.environ)

    def restore():
        os.environ.clear()
        os.environ.update(saved)

    try:
        with distributed.LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",  # a free port: another cluster may hold the default
            **kwargs,
        ) as cluster:
            restore()
            yield cluster
    finally:
        restore()


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    with _cluster(2) as cluster, distributed.Client(cluster) as c:
        yield c


@contextlib.contextmanager
def _one_worker():
    """The module's cluster as a fit sees a cluster of one worker (its first): the fit places
    every block there, and repairs and measures there (a cluster of its own would cost its
    start-up)."""
    workers = Session._workers

    def first(self):
        live = workers(self)
        return {w: live[w] for w in sorted(live)[:1]}

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Session, "_workers", first)
        yield


def _same(a, b, exact=False, rtol=1e-9, atol=1e-12):
    """The two fits agree: Boolean factors and errors exactly, the continuous factors to
    ``rtol`` and ``atol`` and the objective to ``rtol`` (bit for bit with ``exact``)."""
    assert np.array_equal(a.W_, b.W_)
    assert np.array_equal(a.components_, b.components_)
    assert a.reconstruction_err_ == b.reconstruction_err_
    assert a.init_errors_ == b.init_errors_ and a.best_start_ == b.best_start_
    assert a.extra_start_errors_ == b.extra_start_errors_
    assert a.n_starts_ == b.n_starts_ and a.n_init_ == b.n_init_
    assert a.n_components_ == b.n_components_
    assert a.n_iter_ == b.n_iter_ and a.n_observed_ == b.n_observed_
    if exact:
        assert np.array_equal(a.W_continuous_, b.W_continuous_)
        assert np.array_equal(a.H_continuous_, b.H_continuous_)
        assert np.array_equal(a.loss_curve_, b.loss_curve_)
    else:
        np.testing.assert_allclose(a.W_continuous_, b.W_continuous_, rtol=rtol, atol=atol)
        np.testing.assert_allclose(a.H_continuous_, b.H_continuous_, rtol=rtol, atol=atol)
        # Relative to the first objective: an exact fit drives it to rounding noise.
        scale = a.loss_curve_[0] if len(a.loss_curve_) else 1.0
        np.testing.assert_allclose(a.loss_curve_, b.loss_curve_, rtol=rtol, atol=rtol * scale)


# -- the same fit as one machine -----------------------------------------------------------


@pytest.fixture(scope="module")
def missing_fit(client):
    """The module cluster's fit of ``_data()`` with its missing cells: compared with one
    machine's below, and the fit without a fault of the lost-worker test."""
    X, missing, _ = _data()
    return bd.BANMF(**SHARED, n_blocks=5).fit(X, missing=missing)


@pytest.mark.parametrize("unknown", [None, "missing", "observed"])
def test_same_factors_as_one_machine(missing_fit, unknown):
    X, missing, observed = _data()
    masks = {None: {}, "missing": {"missing": missing}, "observed": {"observed": observed}}
    one = banmf.BANMF(**SHARED).fit(X, **masks[unknown])
    if unknown == "missing":
        many = missing_fit
    else:
        many = bd.BANMF(**SHARED, n_blocks=5).fit(X, **masks[unknown])
    _same(one, many)
    assert many.n_blocks_ == 5 and many.recoveries_ == 0
    assert many.traffic_["round_trips"] > many.n_iter_


@pytest.fixture
def randomized_svd(monkeypatch):
    """The NNDSVD's randomized SVD on small data, and the number of times each side ran it.
    The switch (:func:`banmf.engine.nndsvd.use_randomized`) is read on the driver, this
    process, which sends the workers only the SVD's products: a monkeypatch here reaches both
    estimators."""
    from banmf.engine import nndsvd
    from banmf.engine.dask import backend as _backend

    monkeypatch.setattr(nndsvd, "RANDOMIZED_MIN_NNZ", 1)
    calls = Counter()
    for module, side in ((nndsvd, "one"), (_backend, "many")):

        def spy(*args, original=module.subspace_svd, side=side, **kwargs):
            calls[side] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(module, "subspace_svd", spy)
    return calls


@pytest.mark.parametrize(
    ("unknown", "wide", "data"),
    [
        (None, False, "planted"),
        ("missing", False, "planted"),
        ("observed", True, "planted"),
        (None, False, "tiles"),
        (None, True, "tiles"),
    ],
)
def test_same_factors_as_one_machine_with_the_randomized_svd(
    client, randomized_svd, unknown, wide, data
):
    """Above the switch both sides run the randomized SVD (X's rows on the blocks: X V per
    block, Xᵀ U and the Gram of the row side summed over them): the NMF start agrees to
    rounding, the fits' Boolean factors are the same; on X and on its transpose (the sketch on
    the blocks' side). On the tiles the NMF start is the one kept. With the sketch on the
    blocks' side its power iterations round to float32 sums made in another order (over the
    blocks), so an entry may round to the next float32: the continuous factors agree to 10⁻⁷
    there, 10⁻⁸ absolute on the entries near 0 (the updates scale a small difference
    up relative to them)."""
    if data == "planted":
        X, missing, observed = _data()
        masks = {None: {}, "missing": {"missing": missing}, "observed": {"observed": observed}}
        params, masks = SHARED, masks[unknown]
    else:
        X, masks = _tiles(shape=(600, 200), nnz=4000, seed=3)
        params, masks = {**COMBINED, "n_components": 8, "combine": False}, masks[unknown]
    if wide:
        X = X.T.tocsr() if sp.issparse(X) else X.T
        masks = {name: mask.T.tocsr() for name, mask in masks.items()}
    one = banmf.BANMF(**params).fit(X, **masks)
    many = bd.BANMF(**params, n_blocks=5).fit(X, **masks)
    # (a fit with missing cells also fits a hold-out to choose its predictor, on each side)
    assert randomized_svd["many"] == randomized_svd["one"] >= 1
    _same(one, many, **({"rtol": 1e-7, "atol": 1e-8} if wide else {}))
    if data == "tiles" and not wide:
        assert many.best_start_ == "nmf"


def test_the_polish_does_what_it_does_on_one_machine(client):
    """Few iterations leave the grid's factors rough: the polish moves many bits, over rows
    on their blocks and over columns from summed bit changes, and ends where one machine's
    does."""
    X = banmf.make_boolean(400, 300, 8, density=0.3, noise=0.05, random_state=1)[0]
    missing = sp.random(400, 300, density=0.05, random_state=2, format="csr") > 0
    params = {**SHARED, "n_components": 8, "max_iter": 10}
    one = banmf.BANMF(**params).fit(X, missing=missing)
    many = bd.BANMF(**params, n_blocks=5).fit(X, missing=missing)
    assert many.refinement_["per-factor thresholds"] < many.refinement_["grid"]
    assert many.refinement_["polish"] < many.refinement_["grid"] / 2
    np.testing.assert_allclose(many.thresholds_[0], one.thresholds_[0], rtol=1e-9)
    assert many.refinement_ == one.refinement_ and many.polish_rounds_ == one.polish_rounds_ > 1
    assert many.swaps_ == one.swaps_
    assert many.unpolished_err_ == one.unpolished_err_
    _same(one, many)


def test_swaps_as_on_one_machine(client):
    """Sparse tiles after a short fit: a swap puts a heavy column in; the same one as on one
    machine (costs and gains summed over blocks)."""
    X = banmf.make_sparse_tiles(2000, 500, 10000, 8, random_state=0)[0]
    params = {**SHARED, "n_components": 8, "max_iter": 30, "n_init": 1}
    one = banmf.BANMF(**params).fit(X)
    many = bd.BANMF(**params, n_blocks=4).fit(X)
    assert many.swaps_ and many.swaps_ == one.swaps_
    assert many.refinement_ == one.refinement_
    _same(one, many)


@pytest.mark.parametrize("svd", ["arpack", "randomized"])
@pytest.mark.parametrize(
    "case", ["k=1", "a block per row", "an empty block", "no nonzeros", "k > min(n, m)"]
)
def test_edge_cases_as_on_one_machine(client, case, svd, monkeypatch):
    """On either SVD of the NMF start (the randomized one's sketch here as wide as the data
    or wider than its rank)."""
    from banmf.engine import nndsvd

    if svd == "randomized":
        monkeypatch.setattr(nndsvd, "RANDOMIZED_MIN_NNZ", 1)
    X = banmf.make_boolean(40, 30, 2, density=0.3, random_state=0)[0]
    k, n_blocks, warns = 2, 3, None
    if case == "k=1":
        k = 1
    elif case == "a block per row":
        X, n_blocks = X[:8], 8
    elif case == "an empty block":
        X = sp.vstack([sp.csr_array((20, 30)), X]).tocsr()
    elif case == "no nonzeros":
        X, warns = np.zeros((6, 5)), "no nonzeros"
    else:
        X, k, warns = X[:5, :4], 6, "exceeds min"
    params = {**SHARED, "n_components": k, "max_iter": 40}
    context = pytest.warns(UserWarning, match=warns) if warns else contextlib.nullcontext()
    with context:
        one = banmf.BANMF(**params).fit(X)
    with context:
        many = bd.BANMF(**params, n_blocks=n_blocks).fit(X)
    _same(one, many)


def test_starts_run_rank_and_count_as_on_one_machine(client, caplog):
    """The columns start runs first, yet ranks after the random starts: here every start ends
    at the same error and random start 0 is kept, its rows on the blocks. Progress counts
    every start on one scale, naming the extra ones."""
    X = banmf.make_boolean(60, 40, 4, density=0.3, noise=0.05, random_state=0)[0]
    params = {**SHARED, "n_components": 2, "n_init": 3, "max_iter": 40}
    fits = []
    for fit in (banmf.BANMF(**params).fit, bd.BANMF(**params, n_blocks=3).fit):
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="banmf.progress"):
            fits.append(fit(X))
        done = [r.banmf for r in caplog.records if getattr(r, "banmf", {}).get("event") == "done"]
        # (one machine's random starts side by side may finish in any order)
        assert sorted((d["start"], d["n_starts"], d.get("name") or "") for d in done) == [
            (1, 5, "columns"),
            (2, 5, ""),
            (3, 5, ""),
            (4, 5, ""),
            (5, 5, "nmf"),
        ]
    one, many = fits
    assert set(one.init_errors_) == {one.extra_start_errors_["columns"]}  # a tie
    assert many.best_start_ == 0 and many.n_starts_ == 5
    _same(one, many)


def test_regularized_and_float32_and_auto_starts(client):
    X, _, _ = _data(seed=3)
    # Short starts: "auto" gives ten of them here at any length.
    params = {**SHARED, "regularization": 0.1, "dtype": np.float32, "n_init": "auto"}
    params["max_iter"] = 15
    one = banmf.BANMF(**params).fit(X)
    many = bd.BANMF(**params, n_blocks=3).fit(X)
    assert one.n_init_ == many.n_init_ == 10 and len(many.init_errors_) == len(one.init_errors_)
    assert np.array_equal(one.W_, many.W_) and np.array_equal(one.components_, many.components_)
    np.testing.assert_allclose(one.loss_curve_, many.loss_curve_, rtol=1e-4)


@pytest.mark.parametrize("bitgen", [np.random.MT19937, np.random.Philox, np.random.PCG64DXSM])
def test_other_bit_generators_give_the_same_start(client, bitgen):
    """MT19937 cannot jump, Philox jumps by blocks of four draws: the driver draws W's rows
    itself, in the same order; PCG64DXSM jumps as PCG64 does."""
    X, _, _ = _data(seed=4)
    # Two random starts: the second's rows come from the stream jumped past the first's. (No
    # extra starts: they draw nothing.)
    params = {**SHARED, "max_iter": 30, "extra_starts": ()}
    for estimator in (banmf.BANMF, bd.BANMF):
        params["random_state"] = np.random.Generator(bitgen(5))
        if estimator is banmf.BANMF:
            one = estimator(**params).fit(X)
        else:
            many = estimator(**params, n_blocks=4).fit(X)
    _same(one, many)


def test_the_number_of_workers_does_not_matter(client):
    """Same blocks, 1, 2 or 3 workers: the same result bit for bit (every sum over blocks is
    added by the same tree)."""
    distributed = pytest.importorskip("distributed")
    X, missing, _ = _data(seed=5)
    params = {**SHARED, "max_iter": 40, "n_blocks": 6}  # the sums' order shows at any length
    with _one_worker():
        fits = [bd.BANMF(**params, client=client).fit(X, missing=missing)]
    with _cluster(3) as cluster, distributed.Client(cluster) as other:
        fits.append(bd.BANMF(**params, client=other).fit(X, missing=missing))
    # 2 workers: the module's cluster. The last cluster's client is the default now: a fit
    # given the module's client still runs there.
    fits.append(bd.BANMF(**params, client=client).fit(X, missing=missing))
    # The one worker held all six blocks at once, each of the module's two three.
    assert fits[0].peak_block_bytes_ > 1.5 * fits[2].peak_block_bytes_
    for other in fits[1:]:
        _same(fits[0], other, exact=True)


def test_files_give_the_same_fit_as_memory(client, tmp_path):
    X, missing, _ = _data(seed=6)
    paths = bd.write_blocks(X, tmp_path / "big", n_blocks=4, missing=missing)
    assert [p.name for p in paths] == [f"part-0000{b}.npz" for b in range(4)]
    blocks = bd.read_blocks(str(tmp_path / "big" / "part-*.npz"))
    assert blocks.shape == X.shape and blocks.n_blocks == 4
    from_files = bd.BANMF(**SHARED).fit(blocks)
    in_memory = bd.BANMF(**SHARED, n_blocks=4).fit(X, missing=missing)
    _same(from_files, in_memory, exact=True)
    # A folder works as the pattern does.
    assert bd.read_blocks(tmp_path / "big").shape == X.shape


@pytest.fixture(scope="module")
def fitted(client):
    """A model fitted on the module's cluster, given its client: the tests below only read it
    (and fit its clone again: a short fit)."""
    X, _, _ = _data(seed=7)
    return X, bd.BANMF(**{**SHARED, "max_iter": 15}, n_blocks=3, client=client).fit(X)


def test_save_and_load(fitted, tmp_path):
    X, model = fitted
    model.save(tmp_path / "fit.npz")
    result = banmf.io.load_result(tmp_path / "fit.npz")
    assert np.array_equal(result.W, model.W_) and result.error == model.reconstruction_err_
    assert "client" not in result.params
    # The fitted model predicts new rows as banmf.BANMF does (its transform).
    assert model.transform(X[:10]).shape == (10, 5)


def test_defaults_are_one_machines_but_the_polish():
    """What README and CHANGELOG say differs by default: the polish. polish=True is "auto" on
    one machine (the exact polish where it is cheap: Zoo at k=5) and flips on a cluster;
    every other default is banmf.BANMF's (the combination too), so with polish="flip" the
    fits agree."""
    from banmf.engine.polish import resolve_polish

    one, many = banmf.BANMF().get_params(), bd.BANMF().get_params()
    assert set(many) - set(one) == {"client", "n_blocks", "block_memory", "max_recoveries"}
    assert many["combine"] is True
    assert {key: many[key] for key in one} == one
    zoo = banmf.datasets.load_zoo().X
    assert banmf.BANMF()._polish_method(5) == "auto"
    assert resolve_polish("auto", zoo.shape, zoo.nnz, 5) == "exact"


# -- the combination of the starts --------------------------------------------------------

# Sparse tiles where the combination beats every start with unknown cells (the choice is new,
# then polished and swapped on the blocks), and where it keeps the best start's factors.
COMBINED = {**SHARED, "n_components": 6, "max_iter": 60, "swap": True, "combine": True}


def _tiles(shape=(400, 300), nnz=3000, seed=1):
    X = banmf.make_sparse_tiles(*shape, nnz, 6, random_state=seed)[0]
    rng = np.random.default_rng(0)
    missing = sp.csr_matrix(rng.random(X.shape) < 0.1)
    observed = sp.csr_matrix(rng.random(X.shape) < 0.7)
    return X, {"missing": {"missing": missing}, "observed": {"observed": observed}, None: {}}


@pytest.fixture(scope="module")
def combined_fit(client):
    """The module cluster's combined fit of ``_tiles()`` with its missing cells: compared with
    one machine's below, and the fit without a fault of the lost-worker test."""
    X, masks = _tiles()
    return bd.BANMF(**COMBINED, n_blocks=4).fit(X, **masks["missing"])


@pytest.mark.parametrize(
    ("unknown", "k", "best", "data"),
    [
        ("missing", 6, "combined", {}),
        ("observed", 6, "combined", {}),
        (None, 1, 0, {}),
        (None, 8, "nmf", {"shape": (600, 200), "nnz": 4000, "seed": 3}),
    ],
)
def test_combined_as_on_one_machine(combined_fit, unknown, k, best, data):
    """GreConD does not pay on these data on one machine (its pool has no GreConD factors
    either), so both pools are the starts' and the grown candidates."""
    X, masks = _tiles(**data)
    params = {**COMBINED, "n_components": k}
    one = banmf.BANMF(**params).fit(X, **masks[unknown])
    if (unknown, k, data) == ("missing", COMBINED["n_components"], {}):
        many = combined_fit
    else:
        many = bd.BANMF(**params, n_blocks=4).fit(X, **masks[unknown])
    _same(one, many)
    assert many.best_start_ == best and "combined" in many.extra_start_errors_
    assert many.reconstruction_err_ == banmf.boolean_error(
        X, many.W_, many.components_, **masks[unknown]
    )


def test_grecond_joins_the_pool_as_on_one_machine(client, monkeypatch):
    """Where one machine pools GreConD's factors (here made to pay everywhere), the cluster
    pools the same factors, found on X gathered on the driver, and ends at the same fit."""
    from banmf.engine import local, pool
    from banmf.engine.dask import backend as _backend

    monkeypatch.setattr(pool, "GRECOND_SHARE", np.inf)
    calls = Counter()
    original = local.grecond_factors
    for module, side in ((local, "one"), (_backend, "many")):

        def spy(*args, side=side):
            calls[side] += 1
            return original(*args)

        monkeypatch.setattr(module, "grecond_factors", spy)
    X, masks = _tiles()
    one = banmf.BANMF(**COMBINED).fit(X, **masks[None])
    many = bd.BANMF(**COMBINED, n_blocks=4).fit(X, **masks[None])
    assert calls == {"one": 1, "many": 1}
    _same(one, many)


@pytest.mark.parametrize("unknown", [None, "observed"])
def test_asso_candidates_join_the_pool_as_on_one_machine(client, monkeypatch, unknown):
    """ASSO's candidates (here from every seed column the share allows, at any cost) are
    counted over the blocks, their seeds chosen from the columns' work summed over the blocks:
    the same pool and the same fit as one machine."""
    from banmf.engine import pool

    monkeypatch.setattr(pool, "ASSO_SHARE", np.inf)
    seeds = Counter()
    original = pool.associated

    def spy(rows, found, *args):
        seeds[type(rows).__name__] += len(found)
        return original(rows, found, *args)

    monkeypatch.setattr(pool, "associated", spy)
    X, masks = _tiles()
    one = banmf.BANMF(**COMBINED).fit(X, **masks[unknown])
    many = bd.BANMF(**COMBINED, n_blocks=4).fit(X, **masks[unknown])
    # Per combination 2k seeds (with observed cells, the predictor's inner fit combines too).
    assert seeds["WholeSource"] == seeds["_BlockSource"] > 0
    assert seeds["WholeSource"] % (2 * COMBINED["n_components"]) == 0
    _same(one, many)


@pytest.mark.parametrize("unknown", ["missing", "observed"])
def test_a_cluster_fit_chooses_and_completes_as_one_machine(client, unknown):
    """With unknown cells, the cluster fit chooses the predictor one machine chooses (its
    inner fit on the same held-out cells, on the cluster), keeps it with the result, and
    completes the same cells the same way, bit for bit. The NMF start's continuous factors
    agree to rounding (sums over rows grouped by block), and so do the NMF predictor's
    threshold and calibration."""
    rng = np.random.default_rng(0)
    X = banmf.make_boolean(20, 30, 3, density=0.3, noise=0.05, random_state=1)[0]
    mask = sp.csr_matrix(rng.random((20, 30)) < (0.1 if unknown == "missing" else 0.8))
    params = {"random_state": 0, "polish": "flip", "max_iter": 100, "n_init": 3}
    one = banmf.factorize(X, 3, **{unknown: mask}, **params)
    many = banmf.factorize(X, 3, **{unknown: mask}, client=client, n_blocks=3, **params)
    assert many.estimator.n_blocks_ == 3
    assert one.predictor is not None and many.predictor is not None
    assert many.predictor.kind == one.predictor.kind
    exact = one.predictor.kind != "nmf"
    close = {"rtol": 0, "atol": 0} if exact else {"rtol": 1e-9, "atol": 1e-12}
    np.testing.assert_allclose(many.predictor.threshold, one.predictor.threshold, **close)
    np.testing.assert_allclose(many.predictor.probabilities, one.predictor.probabilities, **close)
    assert (one.complete() != many.complete()).nnz == 0
    assert np.array_equal(one.filled()[0], many.filled()[0])
    rows, cols = np.divmod(np.arange(20 * 30), 30)
    assert np.array_equal(one.predict(rows, cols), many.predict(rows, cols))
    proba = one.predict_proba(rows, cols), many.predict_proba(rows, cols)
    np.testing.assert_allclose(*proba, **close)


def test_the_cluster_estimator_has_no_fit_of_its_own():
    """banmf.distributed.BANMF is BANMF with a Dask backend: one fit, one choice of the
    predictor, one end of the fit."""
    assert "fit" not in vars(bd.BANMF) and bd.BANMF.fit is banmf.BANMF.fit


def test_a_worker_lost_during_or_after_the_combination(combined_fit, monkeypatch):
    """A worker killed as the combination begins: its blocks are read again, the starts whose
    rows they held run again, the combination again. Killed as the kept "combined" start's
    rows are gathered: the combination (and the starts before it) runs again. Either way the
    result is the fit without the fault (the module cluster's: the number of workers does not
    matter)."""
    from banmf.engine.dask import backend as _backend

    distributed = pytest.importorskip("distributed")
    X, masks = _tiles()
    reference = combined_fit
    assert reference.best_start_ == "combined"
    with _cluster(2) as cluster, distributed.Client(cluster) as c:
        for owner, name in ((_backend._BlockSource, "row_keys"), (_backend.DaskBackend, "rows")):
            victim = sorted(c.run(os.getpid).items())[0][1]
            original, killed = getattr(owner, name), []

            def kill_first(self, *args, original=original, killed=killed, victim=victim):
                if not killed:
                    killed.append(True)
                    os.kill(victim, signal.SIGKILL)
                return original(self, *args)

            with monkeypatch.context() as patch:
                patch.setattr(owner, name, kill_first)
                with pytest.warns(UserWarning, match="worker was lost"):
                    model = bd.BANMF(**COMBINED, n_blocks=4, client=c).fit(X, **masks["missing"])
            assert killed and model.recoveries_ == 1
            _same(reference, model, exact=True)


def test_ctrl_c_during_the_combination_keeps_the_best_start(client, monkeypatch):
    from banmf.engine.dask import backend as _backend

    # The combination begins after any starts: short ones do here.
    params = {**COMBINED, "max_iter": 15}
    X, masks = _tiles()
    row_keys = _backend._BlockSource.row_keys

    def interrupted(self, sets):
        os.kill(os.getpid(), signal.SIGINT)
        return row_keys(self, sets)

    without = bd.BANMF(**{**params, "combine": False}, n_blocks=4).fit(X, **masks["missing"])
    monkeypatch.setattr(_backend._BlockSource, "row_keys", interrupted)
    model = bd.BANMF(**params, n_blocks=4)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X, **masks["missing"])
    assert model.interrupted_ and "combined" not in model.extra_start_errors_
    assert model.best_start_ == without.best_start_
    assert np.array_equal(model.W_, without.W_)


def test_the_block_budget_counts_the_starts_kept_for_the_combination():
    """A block's bytes (what ``block_memory`` bounds) count every start's Boolean rows kept
    for the combination, the polish's bounds and the combination's own state; a start no
    longer the best keeps only its Boolean rows, and without the combination none."""
    X, _ = _tiles()
    fit, k = "budget-test", 6
    _worker.load(fit, 0, Dataset.of(X[:100]), None)
    try:
        block = _worker._blocks[(fit, 0)]
        # The transpose the "columns" start makes, counted from here on.
        assert block.Xt.shape == (300, 100)
        alone = block.nbytes
        for start in range(3):
            _worker.keep_columns(fit, 0, start, np.arange(start, start + k), k)
        rows = 100 * k  # one start's rows, Boolean
        assert block.nbytes == alone + 3 * 9 * rows  # float64 scaled and Boolean
        # The flip polish's bounds on a start's rows (int16), until the best start is chosen.
        _worker.polish_rows_of(fit, 0, 1, np.eye(300, k, dtype=bool), None, None, 0)
        assert block.nbytes == alone + 3 * 9 * rows + 2 * rows
        _worker.keep_only(fit, 0, [1], True)
        assert block.nbytes == alone + 9 * rows + 2 * rows
        _worker.grow_rows(fit, 0, np.eye(2 * k, 300, dtype=bool))
        assert block.nbytes == alone + 9 * rows + 2 * rows + 100 * 2 * k
        _worker.keep_only(fit, 0, [1])
        _worker.pool_end(fit, 0, None, None, k)
        assert block.nbytes == alone + 9 * rows
    finally:
        _worker.forget(fit)


# -- faults and memory ---------------------------------------------------------------------


def test_a_killed_worker_is_survived(missing_fit):
    """A worker killed mid-fit: its blocks are read again on the other, the start runs again,
    and the result is the fit without the fault."""
    distributed = pytest.importorskip("distributed")
    X, missing, _ = _data()
    with _cluster(2) as cluster, distributed.Client(cluster) as c:
        victim = sorted(c.run(os.getpid).items())[0][1]
        killed = []

        def kill(iteration, objective):
            if iteration == 40 and not killed:
                killed.append(iteration)
                os.kill(victim, signal.SIGKILL)

        with pytest.warns(UserWarning, match="worker was lost"):
            model = bd.BANMF(**SHARED, n_blocks=5, client=c, callback=kill).fit(X, missing=missing)
    assert killed and model.recoveries_ == 1
    _same(missing_fit, model, exact=True)


def test_ctrl_c_keeps_the_best_so_far(client):
    """The first SIGINT stops the iterations at the next round; the factors so far are
    booleanized and refined, the model is set, and fit raises KeyboardInterrupt after."""
    X, _, _ = _data(seed=13)
    model = bd.BANMF(
        **{**SHARED, "tol": None},
        n_blocks=3,
        callback=lambda i, f: i == 15 and os.kill(os.getpid(), signal.SIGINT),
    )
    with pytest.warns(UserWarning, match="interrupted after"):
        with pytest.raises(KeyboardInterrupt):
            model.fit(X)
    assert model.interrupted_ and 15 <= model.n_iter_ <= 16 and len(model.init_errors_) == 1
    assert model.reconstruction_err_ == banmf.boolean_error(X, model.W_, model.components_)


def test_a_callback_raising_keyboard_interrupt_is_ctrl_c(client):
    X, _, _ = _data(seed=14)

    def stop(i, f):
        if i == 7:
            raise KeyboardInterrupt

    # Without the columns start, which runs first: it would be kept over the interrupted
    # start (whose refinements end after the round under way).
    model = bd.BANMF(**{**SHARED, "extra_starts": ("nmf",)}, n_blocks=3, callback=stop)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X)
    assert model.interrupted_ and model.n_iter_ == 7
    assert model.n_starts_ == 1 and model.extra_start_errors_ == {}


def test_a_lost_best_start_runs_again_without_the_callback():
    """Start 1 loses a worker: start 0's rows on it are gone too, and start 0 runs again
    before its rows are gathered, exactly as far as it went, without calling the callback."""
    distributed = pytest.importorskip("distributed")
    X, _, _ = _data(seed=15)
    params = {**SHARED, "tol": None, "max_iter": 15, "extra_starts": ("columns",)}
    with _cluster(2) as cluster, distributed.Client(cluster) as c:
        reference = bd.BANMF(**params, n_blocks=4, client=c).fit(X)
        victim = sorted(c.run(os.getpid).items())[0][1]
        calls = []

        def kill(iteration, objective):
            calls.append(iteration)
            if len(calls) == 20:  # the 5th iteration of start 1
                os.kill(victim, signal.SIGKILL)

        with pytest.warns(UserWarning, match="worker was lost"):
            model = bd.BANMF(**params, n_blocks=4, client=c, callback=kill).fit(X)
    assert model.recoveries_ == 1 and len(calls) == 15 + 5 + 15
    _same(reference, model, exact=True)


def test_ctrl_c_before_any_start_aborts(client, monkeypatch):
    X, _, _ = _data(seed=16)
    place = Session.place

    def interrupted(self, blocks):
        os.kill(os.getpid(), signal.SIGINT)
        return place(self, blocks)

    monkeypatch.setattr(Session, "place", interrupted)
    model = bd.BANMF(**SHARED, n_blocks=2)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X)
    assert not hasattr(model, "W_")


def test_an_unreadable_block_is_an_error_not_a_lost_worker(client, tmp_path):
    X, _, _ = _data(seed=17)
    paths = bd.write_blocks(X, tmp_path / "big", n_blocks=3)
    blocks = bd.read_blocks(tmp_path / "big")
    paths[1].unlink()
    with pytest.raises(FileNotFoundError):
        bd.BANMF(**SHARED).fit(blocks)


def test_a_fitted_model_pickles_without_its_client(fitted):
    import pickle

    _, model = fitted
    copy = pickle.loads(pickle.dumps(model))
    assert copy.client is None and np.array_equal(copy.W_, model.W_)


def test_too_many_losses_fail_clearly(client, monkeypatch):
    X, _, _ = _data(seed=9)
    calls = []

    def lose(self):
        calls.append(1)
        raise bd.WorkerLost("simulated")

    # Every step loses a worker: the fit gives up after max_recoveries repairs.
    monkeypatch.setattr(Driver, "fit_one", lambda self, *a, **k: lose(self))
    with pytest.warns(UserWarning, match="worker was lost"):
        with pytest.raises(RuntimeError, match="lost a worker 3 times"):
            bd.BANMF(**SHARED, n_blocks=2, max_recoveries=2).fit(X)
    assert len(calls) == 3


def test_out_of_core(client):
    """A budget below the blocks' size: the worker keeps at most the budget (plus the block
    in use) in memory, the rest in its local folder, and the fit is the same (one worker holds
    every block)."""
    X, missing, _ = _data(n=600, seed=10)
    # Every round trip reads the spilled blocks back (and spills others): a few iterations of
    # one start show it, on three blocks, two of them spilled (each block more adds about a
    # fifth to the test's time).
    params = {**SHARED, "max_iter": 15, "n_init": 1, "n_blocks": 3, "client": client}
    with _one_worker():
        free = bd.BANMF(**params, block_memory=None).fit(X, missing=missing)
        budget = free.peak_block_bytes_ // 3
        tight = bd.BANMF(**params, block_memory=budget).fit(X, missing=missing)
    _same(free, tight, exact=True)
    assert tight.peak_block_bytes_ <= budget + free.peak_block_bytes_ // 4
    assert tight.peak_block_bytes_ < free.peak_block_bytes_ / 2


def test_auto_budget_is_half_the_memory_limit():
    blocks = bd.BlockMatrix.from_matrix(np.eye(4), n_blocks=2)
    budget = {
        param: Session(None, blocks, param, None)._budget({"memory_limit": 1000})
        for param in ("auto", None, 300)
    }
    assert budget == {"auto": 500, None: None, 300: 300}
    assert Session(None, blocks, "auto", None)._budget({"memory_limit": None}) is None


# -- parameters and errors ------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        {"polish": "exact"},
        {"polish": False, "swap": True},
        {"extra_starts": ("grecond",)},
        {"init": "custom"},
        {"client": "tcp://127.0.0.1:1"},
        {"block_memory": -1},
    ],
)
def test_what_is_not_distributed_is_refused(params):
    # (InvalidParameterError is a ValueError.)
    with pytest.raises(ValueError):
        bd.BANMF(**params).fit(np.eye(4))


def test_no_client_says_how_to_get_one(monkeypatch):
    distributed = pytest.importorskip("distributed")

    def none():
        raise ValueError("No clients found")

    monkeypatch.setattr(distributed, "get_client", none)
    with pytest.raises(ValueError, match="no Dask client"):
        bd.BANMF(2).fit(np.eye(4))


def test_read_blocks_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no row-block files"):
        bd.read_blocks(tmp_path / "nothing-*.npz")
    (tmp_path / "a.mtx").write_text("x")
    with pytest.raises(ValueError, match="are .npz files"):
        bd.read_blocks([tmp_path / "a.mtx"])
    banmf.io.write_matrix(np.eye(3), tmp_path / "p-1.npz")
    banmf.io.write_matrix(np.eye(4), tmp_path / "p-2.npz")
    with pytest.raises(ValueError, match="has 4 columns but"):
        bd.read_blocks(tmp_path / "p-*.npz")
    (tmp_path / "p-3.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a scipy sparse .npz"):
        bd.read_blocks([tmp_path / "p-3.npz"])


def test_write_blocks_checks_its_folder_first(tmp_path):
    X = np.eye(6)
    bd.write_blocks(X, tmp_path / "out", n_blocks=2)
    with pytest.raises(FileExistsError, match="already holds"):
        bd.write_blocks(X, tmp_path / "out", n_blocks=2)
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        bd.write_blocks(X, tmp_path / "file")
    with pytest.raises(ValueError, match="exceeds the 6 rows"):
        bd.BlockMatrix.from_matrix(X, n_blocks=7)


def test_blocks_in_natural_order(tmp_path):
    for b in (10, 9, 1):
        banmf.io.write_matrix(np.full((b, 3), 1), tmp_path / f"part-{b}.npz")
    blocks = bd.read_blocks(tmp_path)
    assert [p.name for p in blocks.sources] == ["part-1.npz", "part-9.npz", "part-10.npz"]
    assert blocks.offsets.tolist() == [0, 1, 10, 20]


# -- the pieces, against plain references ------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(st.integers(0, 20), min_size=1, max_size=30),
    n_blocks=st.integers(1, 30),
)
def test_cuts_keep_a_row_per_block_and_balance_nonzeros(rows, n_blocks):
    indptr = np.concatenate([[0], np.cumsum(rows)])
    n = len(rows)
    n_blocks = min(n_blocks, n)
    cuts = _cuts(indptr, n_blocks)
    assert cuts[0] == 0 and cuts[-1] == n and len(cuts) == n_blocks + 1
    assert (np.diff(cuts) >= 1).all()


@settings(max_examples=60, deadline=None)
@given(
    n_blocks=st.integers(1, 12),
    owners=st.lists(st.integers(0, 3), min_size=12, max_size=12),
    seed=st.integers(0, 2**16),
)
def test_the_tree_sum_does_not_depend_on_who_holds_which_block(n_blocks, owners, seed):
    """Workers add the tree's nodes within their blocks, the driver the rest: bit for bit the
    sum of one worker holding everything, whatever the blocks' owners."""
    values = np.random.default_rng(seed).random((n_blocks, 5)) * 10.0 ** np.arange(-8, 9, 4)
    whole = _worker.node_sum(0, n_blocks, lambda b: values[b])
    nodes = {}
    for owner in set(owners[:n_blocks]):
        mine = {b for b in range(n_blocks) if owners[b] == owner}
        for lo, hi in _worker.tree_nodes(0, n_blocks, mine):
            nodes[(lo, hi)] = _worker.node_sum(lo, hi, lambda b: values[b])
    assert np.array_equal(_worker.node_sum(0, n_blocks, None, nodes), whole)
    np.testing.assert_allclose(whole, values.sum(axis=0), rtol=1e-12)


class _Batched(GridRows):
    batch = 16


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**16), k=st.integers(1, 4), P=st.integers(2, 12))
def test_batched_coverages_find_the_same_point(seed, k, P):
    """Asking for coverages ahead (as remote rows do) changes nothing in the search."""
    rng = np.random.default_rng(seed)
    data = banmf.io.Dataset(rng.random((15, 9)) < 0.4)
    X = data.X
    W, H = rng.random((15, k)), rng.random((k, 9))
    w_points, h_points = grid_points(W.max(), P), grid_points(H.max(), P)
    u, vt = grid_ranks(W, w_points), grid_ranks(np.ascontiguousarray(H.T), h_points)
    args = (vt, P, X.nnz, "pruned", w_points, h_points, None)
    plain = search_grid(GridRows(data, u), *args)
    batched = search_grid(_Batched(data, u), *args)
    assert plain[:3] == batched[:3]
    exhaustive = search_grid(
        GridRows(data, u), vt, P, X.nnz, "exhaustive", w_points, h_points, None
    )
    assert plain[2] == exhaustive[2]


class _InProcess:
    """A session whose blocks are this process's: ``sum`` adds them by the fixed tree, as the
    workers and the driver do between them. ``calls`` counts the round trips by task."""

    def __init__(self, fit: str, n_blocks: int):
        self.fit, self.n_blocks = fit, n_blocks
        self.calls: Counter = Counter()
        self.interrupts = Interruptions()

    def each(self, func, *args):
        self.calls[func.__name__] += 1
        return [func(self.fit, b, *args) for b in range(self.n_blocks)]

    def sum(self, func, *args):
        self.calls[func.__name__] += 1
        return _worker.node_sum(0, self.n_blocks, lambda b: func(self.fit, b, *args))


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    k=st.integers(1, 5),
    P=st.integers(2, 10),
    n_blocks=st.integers(1, 4),
    form=st.sampled_from([None, "missing", "observed"]),
)
def test_the_blocks_search_as_the_whole_matrix(seed, k, P, n_blocks, form):
    """The threshold search over row blocks (their sizes and pairs' counts summed, as the
    workers send them) finds the point, the error and the number of coverages of the search
    over all the rows, asking as many ahead: the pairs' floor is the same sum whatever the
    blocks."""
    from banmf.engine.booleanize import pair_counts
    from banmf.engine.dask.backend import _Rows

    rng = np.random.default_rng(seed)
    dense = rng.random((16, 9)) < rng.choice([0.0, 0.2, 0.6])
    dense[:, 0] = dense[0, :] = False  # an empty row and column
    hidden = rng.random(dense.shape) < 0.2
    unknown = {None: {}, "missing": {"missing": hidden}, "observed": {"observed": ~hidden}}[form]
    data = banmf.io.Dataset.of(dense, unknown.get("missing"), unknown.get("observed"))
    W, H = rng.random((16, k)), rng.random((k, 9))
    w_points, h_points = grid_points(W.max(), P), grid_points(H.max(), P)
    u, vt = grid_ranks(W, w_points), grid_ranks(np.ascontiguousarray(H.T), h_points)
    observed = None if data.unknown is None else data.unknown.observed
    args = (vt, P, data.X.nnz, "pruned", w_points, h_points, None, observed)
    # As many coverages asked ahead as the remote rows ask (n_evaluated counts them).
    expected = search_grid(_Batched(data, u), *args)

    blocks = bd.BlockMatrix.from_matrix(dense, n_blocks=n_blocks, **unknown)
    fit = f"pairs-{seed}-{n_blocks}"
    try:
        for b in range(n_blocks):
            _worker.load(fit, b, blocks.sources[b], None)
            with _worker._use(fit, b) as block:
                block.rows = GridRows(block.data, u[blocks.offsets[b] : blocks.offsets[b + 1]])
        session = _InProcess(fit, n_blocks)
        rows = _Rows(session, np.unique(u), pairs=not observed)
        assert search_grid(rows, *args)[:4] == expected[:4]
        if not observed:
            assert np.array_equal(rows.pair_counts(P), pair_counts(u, P))
    finally:
        _worker.forget(fit)


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    k=st.sampled_from([1, 2, 5, 66]),
    n_blocks=st.integers(1, 4),
    form=st.sampled_from([None, "missing", "observed"]),
)
@pytest.mark.filterwarnings("ignore:the unknown cells hide all")
def test_the_blocks_polish_as_the_whole_matrix(seed, k, n_blocks, form):
    """The flip polish over row blocks (each keeping its rows' bounds, summing its moves per
    bit and its error change) gives one machine's W, H and per-round errors
    (:func:`banmf.engine.polish.polish_factors`), without counting the error again; so do the same
    rows after a threshold moved W (the bounds counted anew), and the swaps after (each swap
    moves W: the same)."""
    from banmf.engine.dask.backend import DaskBackend, _BlockRows
    from banmf.engine.polish import WholeRows, polish_factors, polish_over
    from banmf.engine.swaps import swaps_over

    rng = np.random.default_rng(seed)
    n, m = 16, 9
    dense = rng.random((n, m)) < rng.choice([0.0, 0.2, 0.6])
    dense[:, 0] = dense[0, :] = False  # an empty row and column
    hidden = rng.random(dense.shape) < 0.2
    unknown = {None: {}, "missing": {"missing": hidden}, "observed": {"observed": ~hidden}}[form]
    data = banmf.io.Dataset.of(dense, unknown.get("missing"), unknown.get("observed"))
    scaled = rng.random((n, k))
    W, H = scaled > 0.6, rng.random((k, m)) < 0.4
    whole = polish_factors(data, W, H, "flip")

    blocks = bd.BlockMatrix.from_matrix(dense, n_blocks=n_blocks, **unknown)
    fit, start = f"polish-{seed}-{n_blocks}", 0
    try:
        for b in range(n_blocks):
            _worker.load(fit, b, blocks.sources[b], None)
            lo, hi = blocks.offsets[b], blocks.offsets[b + 1]
            with _worker._use(fit, b) as block:
                block.kept[start] = (scaled[lo:hi], W[lo:hi].copy())
        session = _InProcess(fit, n_blocks)
        backend = DaskBackend(None, session, SimpleNamespace(nnz_ones=data.X.nnz), None)
        rows, local = _BlockRows(backend, start), WholeRows(data, W.copy(), scaled)

        def gathered():
            return np.concatenate([_worker.rows_of(fit, b, start)[1] for b in range(n_blocks)])

        Ht, Ht_local = np.array(H.T, order="C"), np.array(H.T, order="C")
        history = [data.error(W, H)]
        assert polish_over(rows, Ht, "flip", history=history) == whole.rounds
        assert history == whole.history and session.calls["counts"] == 0
        assert np.array_equal(gathered(), whole.W) and np.array_equal(Ht.T, whole.H)
        polish_over(local, Ht_local, "flip")

        for each in (rows, local):
            each.set_threshold(k - 1, 0.3)
        history = [data.error(local.W, Ht.T)]
        local_history = history.copy()
        polish_over(rows, Ht, "flip", history=history)
        polish_over(local, Ht_local, "flip", history=local_history)
        assert history == local_history
        assert np.array_equal(gathered(), local.W) and np.array_equal(Ht, Ht_local)
        assert history[-1] == data.error(local.W, Ht.T)

        swaps = list(swaps_over(rows, Ht, "flip", k))
        assert swaps == list(swaps_over(local, Ht_local, "flip", k))
        assert np.array_equal(gathered(), local.W) and np.array_equal(Ht, Ht_local)
        if swaps:
            assert swaps[-1][2] == data.error(local.W, Ht.T)
    finally:
        _worker.forget(fit)


def test_worker_functions_refuse_a_block_they_do_not_hold():
    with pytest.raises(LookupError, match="not on this worker"):
        _worker.column_counts("no-such-fit", 0)


# -- the command line ------------------------------------------------------------------------


def _cli(*argv):
    import io as _io

    from banmf.cli import main

    out, err = _io.StringIO(), _io.StringIO()
    return main(list(argv), stdout=out, stderr=err), out.getvalue(), err.getvalue()


def _cli_process(*argv, **env):
    """``python -m banmf ...`` in its own process, as a user runs it (one Dask client there)."""
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-m", "banmf", *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **env},
    )


def test_cli_factorize_on_a_scheduler(client, tmp_path):
    import json

    X, missing, _ = _data(seed=12)
    bd.write_blocks(X, tmp_path / "big", n_blocks=3, missing=missing)
    address = client.scheduler.address
    done = _cli_process(
        "factorize", str(tmp_path / "big"), "-k", "5", "--scheduler", address,
        "--max-iter", "20", "--param", "n_init=2", "--out", str(tmp_path / "r.npz"),
        "--json", "-q",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(done.stdout)
    model = bd.BANMF(5, random_state=0, max_iter=20, n_init=2, client=client).fit(
        bd.read_blocks(tmp_path / "big")
    )
    assert record["error"] == model.reconstruction_err_ and record["blocks"] == 3
    assert record["observed_cells"] == X.shape[0] * X.shape[1] - missing.nnz
    saved = banmf.io.load_result(tmp_path / "r.npz")
    assert np.array_equal(saved.W, model.W_) and saved.params["n_components"] == 5
    # Small row-block files are kept with the result, as one machine keeps small data.
    assert saved.X.nnz == model.nnz_ and saved.n_observed == record["observed_cells"]
    assert record["false_negatives"] + record["false_positives"] == record["error"]
    code, shown, err = _cli("show", str(tmp_path / "r.npz"))
    assert code == 0 and shown.startswith("pattern 1"), err


def test_cli_on_a_cluster_says_what_one_machine_says(client, tmp_path):
    """Zoo on a cluster and on one machine, with the parameters both run (the exact polish,
    one machine's default for small k, is not distributed: flips on both): the same summary
    but for the method line (it names the scheduler) and the cluster's own line, the same
    factors, the same record, and saved results that ``banmf show`` reads alike (the data
    kept with the result)."""
    import json

    zoo = os.path.join(os.path.dirname(__file__), "..", "data", "zoo_101x15.mtx")
    common = ["-k", "5", "--max-iter", "20", "--param", "n_init=2"]
    runs = {}
    for where, extra in (
        ("one", ["--param", "polish=flip"]),
        ("cluster", ["--scheduler", client.scheduler.address]),
    ):
        saved = str(tmp_path / f"{where}.npz")
        code, text, err = _cli("factorize", zoo, *common, *extra, "--out", saved)
        assert code == 0, err
        # The cluster says why its default may differ from one machine's.
        assert ("polishes these factors exactly" in err) == (where == "cluster")
        code, record, err = _cli("factorize", zoo, *common, *extra, "--json", "-q")
        assert code == 0, err
        runs[where] = (text.splitlines(), json.loads(record), saved)
    (one, one_record, one_saved), (many, many_record, many_saved) = runs.values()

    def same(line):
        return not line.startswith(("method ", "cluster ", "saved "))

    assert [x for x in one if same(x)] == [x for x in many if same(x)]
    assert any(x.startswith("refinement ") for x in many) and "ones missed" in many[2]
    assert "banmf on tcp://" in next(x for x in many if x.startswith("method "))
    differ = {"seconds", "compile_seconds", "params"}
    assert {k: v for k, v in one_record.items() if k not in differ} == {
        k: many_record[k] for k in one_record if k not in differ
    }
    a, b = banmf.io.load_result(one_saved), banmf.io.load_result(many_saved)
    assert np.array_equal(a.W, b.W) and np.array_equal(a.H, b.H)
    assert (a.X != b.X).nnz == 0 and a.row_labels == b.row_labels
    assert {k: v for k, v in a.meta.items() if k != "created"} == {
        k: v for k, v in b.meta.items() if k not in ("created", "scheduler")
    }
    shown = [_cli("show", path) for path in (one_saved, many_saved)]
    assert shown[0][0] == shown[1][0] == 0 and shown[0][1] == shown[1][1]


def test_cli_complete_after_a_cluster_fit_fills_what_one_machine_fills(client, tmp_path):
    """The issue's tour: 20×30 with 10 % unknown cells, ``banmf complete`` after a fit with
    ``--scheduler`` and after one without fills the same cells the same way, and
    ``complete --proba`` finds a predictor in both results."""
    rng = np.random.default_rng(0)
    X = banmf.make_boolean(20, 30, 3, density=0.3, noise=0.05, random_state=1)[0]
    missing = sp.csr_matrix(rng.random((20, 30)) < 0.1)
    data, mask = tmp_path / "x.mtx", tmp_path / "missing.mtx"
    banmf.io.write_matrix(X, data)
    banmf.io.write_matrix(missing, mask)
    common = ["-k", "3", "--max-iter", "100", "--param", "polish=flip", "--missing", str(mask)]
    filled = []
    for where, extra in (("one", []), ("cluster", ["--scheduler", client.scheduler.address])):
        saved = str(tmp_path / f"{where}.npz")
        code, _, err = _cli("factorize", str(data), *common, *extra, "--out", saved, "-q")
        assert code == 0, err
        code, out, err = _cli("complete", str(data), saved, "--missing", str(mask))
        assert code == 0, err
        code, proba, err = _cli("complete", str(data), saved, "--missing", str(mask), "--proba")
        assert code == 0, err
        filled.append(out)
    assert filled[0] == filled[1] and filled[0].count("\n") > missing.nnz // 2


def test_cli_cannot_connect_says_where_and_how_long(tmp_path):
    dask = pytest.importorskip("dask")
    pytest.importorskip("distributed")
    bd.write_blocks(np.eye(6), tmp_path / "big", n_blocks=2)
    # Port 9 on loopback refuses at once; Dask tries again until its connect timeout.
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        code, _, err = _cli(
            "factorize", str(tmp_path / "big"), "-k", "2", "--scheduler", "tcp://127.0.0.1:9"
        )
    assert code == 2 and "cannot connect" in err
    # Said before trying, with the time it may take.
    assert err.index("connecting to tcp://127.0.0.1:9 (giving up after 1 s") < err.index(
        "cannot connect"
    )


@pytest.mark.parametrize(
    "extra, message",
    [
        (("--method", "asso"), "only banmf runs on a cluster"),
        (("--hold-out", "0.1"), "--hold-out needs the data in memory"),
        (("--show",), "--show needs the data in memory"),
    ],
)
def test_cli_scheduler_refusals(tmp_path, extra, message):
    pytest.importorskip("distributed")
    bd.write_blocks(np.eye(6), tmp_path / "big", n_blocks=2)
    argv = ["factorize", str(tmp_path / "big"), "-k", "2", "--scheduler", "local", *extra]
    code, _, err = _cli(*argv)
    assert code != 0 and message in err


# -- a fitted model cloned, a hung worker, the threshold search's cache in the budget --------


def test_a_fitted_model_clones_and_copies_with_its_client(fitted):
    """sklearn's clone and copy.deepcopy share the client (a handle to the cluster, not a
    value: deep-copying it would copy its sockets); the clone is unfitted and fits there."""
    import copy

    sklearn_base = pytest.importorskip("sklearn.base")
    X, model = fitted
    twin = sklearn_base.clone(model)
    assert twin.client is model.client is not None and not hasattr(twin, "W_")
    params = model.get_params(deep=False)
    assert twin.get_params(deep=False).keys() == params.keys()
    assert all(twin.get_params(deep=False)[name] == value for name, value in params.items())
    assert np.array_equal(twin.fit(X).W_, model.W_)
    deep = copy.deepcopy(model)
    assert deep.client is model.client and np.array_equal(deep.W_, model.W_)
    assert deep.W_ is not model.W_ and deep.traffic_ is not model.traffic_
    assert copy.copy(model).client is model.client


def test_a_pickled_model_loads_and_predicts_without_dask(fitted, tmp_path):
    """Loaded in a process where Dask cannot even be imported: no client, the same
    prediction."""
    import pickle
    import subprocess
    import sys

    X, model = fitted
    (tmp_path / "model.pickle").write_bytes(pickle.dumps(model))
    np.save(tmp_path / "rows.npy", X[:10].toarray())
    code = (
        "import sys, pickle, numpy as np; sys.modules['distributed'] = None; "
        f"folder = {str(tmp_path)!r}; "
        "model = pickle.load(open(folder + '/model.pickle', 'rb')); "
        "assert model.client is None; "
        "np.save(folder + '/W.npy', model.transform(np.load(folder + '/rows.npy')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert np.array_equal(np.load(tmp_path / "W.npy"), model.transform(X[:10]))


def test_a_hung_worker_is_survived(missing_fit, monkeypatch):
    """A worker stopped mid-fit (SIGSTOP: alive to the scheduler, silent to the fit) misses
    its round's deadline and counts as lost: its blocks are read again on the other worker,
    the start runs again, and the result is the fit without the fault. Nothing waits on the
    stopped worker afterwards (its memory's peak, the clean-up)."""
    import re

    distributed = pytest.importorskip("distributed")
    from banmf.engine.dask import session as _session

    # Rounds here take milliseconds: the deadline is the floor, shrunk from a minute.
    monkeypatch.setattr(_session, "DEADLINE_FLOOR", 5.0)
    X, missing, _ = _data()
    with _cluster(2) as cluster, distributed.Client(cluster) as c:
        victim, pid = sorted(c.run(os.getpid).items())[0]
        stopped = []

        def stop(iteration, objective):
            if iteration == 40 and not stopped:
                stopped.append(iteration)
                os.kill(pid, signal.SIGSTOP)

        try:
            with pytest.warns(UserWarning, match=re.escape(f"{victim} did not answer")):
                model = bd.BANMF(**SHARED, n_blocks=5, client=c, callback=stop).fit(
                    X, missing=missing
                )
        finally:
            os.kill(pid, signal.SIGCONT)
    assert stopped and model.recoveries_ == 1
    _same(missing_fit, model, exact=True)


class _Answer:
    """A future that is done: its value, or its error raised."""

    def __init__(self, value):
        self.value = value

    def done(self):
        return True

    def result(self, timeout=None):
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


class _Silent:
    """A future that never completes (a hung worker's call)."""

    def done(self):
        return False

    def result(self, timeout=None):
        import time

        time.sleep(timeout)
        raise TimeoutError


def test_the_deadline_follows_the_rounds_and_names_the_late_worker(monkeypatch):
    from collections import deque

    pytest.importorskip("distributed")  # a failed call is told lost or not by Dask's errors

    from banmf.engine.dask import session as _session

    monkeypatch.setattr(_session, "DEADLINE_FLOOR", 0.05)
    session = Session(None, bd.BlockMatrix.from_matrix(np.eye(4), n_blocks=2), None, None)
    assert session.deadline("step") == _session.DEADLINE_FIRST  # nothing timed yet
    session.times["step"] = deque([0.001, 0.03, 0.002])
    assert session.deadline("step") == 0.05  # the floor over 10 × the median
    session.times["step"].extend([0.03, 0.03])
    assert session.deadline("step") == pytest.approx(10 * 0.03)
    monkeypatch.setattr(_session, "DEADLINE_FACTOR", 1.0)
    futures = {"tcp://a": _Answer(1), "tcp://b": _Silent(), "tcp://c": _Silent()}
    with pytest.raises(bd.WorkerLost, match="tcp://b, tcp://c did not answer a round of step"):
        session._wait(futures, "step")
    assert session.hung == {"tcp://b", "tcp://c"}
    # A call that raised TimeoutError itself answered: its error is the work's, not a hang.
    with pytest.raises(TimeoutError):
        session._wait({"tcp://a": _Answer(TimeoutError("slow disk"))}, "load")
    assert session._wait({"tcp://a": _Answer(2)}, "load") == [2] and len(session.times["load"]) == 1


def test_the_threshold_search_cache_counts_in_the_budget():
    """A block's cache of packed W (the threshold search's coverages) is part of what its
    budget checks: without a budget it keeps every threshold asked for (its bytes counted);
    with a budget it gets the room the block leaves, or none (each request then packs W
    again); the counts are the same every way."""
    from banmf.data.masks import Packed

    rng = np.random.default_rng(0)
    data = banmf.io.Dataset(sp.random(300, 60, density=0.2, random_state=1, format="csr") > 0)
    P, k = 12, 6
    u = grid_ranks(rng.random((300, k)), grid_points(1.0, P))
    vt = grid_ranks(rng.random((60, k)), grid_points(1.0, P))
    requests = [(s, [Packed.of(vt, t) for t in range(0, P, 3)]) for s in range(P)]
    expected = [c for row in GridRows(data, u).covers(requests, P) for c in row]
    packed_w = sum(Packed.of(u, s).nbytes for s in range(P))

    def run(budget):
        fit = f"cache-{budget}"
        _worker.load(fit, 0, data, budget)
        with _worker._use(fit, 0) as block:
            block.rows = GridRows(block.data, u)
            own = block.nbytes
        try:
            for pair in requests:  # one round trip per threshold, as the search asks
                assert _worker.covers(fit, 0, [pair], P).tolist() == expected[4 * pair[0] :][:4]
            return own, _worker.peak_bytes(fit)
        finally:
            _worker.forget(fit)

    own, free = run(None)
    assert free - own >= packed_w  # every threshold's packed W, counted
    budget = own + (free - own) // 2
    assert own < run(budget)[1] <= budget  # part of the cache, within the budget
    assert run(own // 2)[1] == own  # no room: no cache (the block in use stays)


# -- a worker's blocks cost what their rows cost in one solver -------------------------------


def test_the_blocks_share_out_one_solvers_partials():
    """Each block's solver has its share of the W pass's Wᵀ Y partials: all the blocks together
    about as many as one solver over all the rows, at least one each."""
    from banmf.engine.iterations import n_row_blocks

    assert n_row_blocks(10**6, 10**4, 16, 8) == 4
    shares = [n_row_blocks(10**6, 10**4, 16, 8, parts) for parts in (1, 2, 3, 4, 8)]
    assert shares == [4, 2, 1, 1, 1]
    assert n_row_blocks(10**6, 10**6, 16, 8, 2) == 1  # the 256 MB cap comes first


def test_a_workers_blocks_side_by_side_give_the_same_sums():
    """A worker with at least as many blocks as threads runs them side by side, each on one
    thread: the same partial sums, bit for bit, as in turn on all its threads, and (to
    rounding) one solver's over all the rows."""
    from banmf.engine.iterations import MUSolver
    from banmf.runtime.threads import current_threads

    X = banmf.make_boolean(2000, 200, 10, density=0.3, noise=0.02, random_state=3)[0]
    blocks = bd.BlockMatrix.from_matrix(X, n_blocks=4)
    rng = np.random.default_rng(0)
    W0, Ht0 = rng.random((2000, 10)), rng.random((200, 10))
    box = {"project": True, "lower": 0.0, "upper": 1.0, "eps": 1e-9}
    budgets = {}

    def step(fit, b, h, lam):
        budgets[b] = current_threads()
        return _worker.step(fit, b, h, lam)

    sums = {}
    for threads in (1, 2):
        fit = f"side-by-side-{threads}"
        server = _worker.BlockServer(fit, threads)
        try:
            for b in range(4):
                _worker.load(fit, b, blocks.sources[b], None)
                rows = W0[blocks.offsets[b] : blocks.offsets[b + 1]]
                _worker.begin(fit, b, Ht0, {"W": rows, **box, "parts": 4})
                with _worker._use(fit, b) as block:
                    assert block.solver.WtY_blocks.shape[0] == 1  # 4 blocks: one partial each
            sums[threads] = server.sums(step, [0, 1, 2, 3], 4, (None, 0.0))[(0, 4)]
            assert set(budgets.values()) == {1}  # side by side (2 threads) or in turn (1)
        finally:
            _worker.forget(fit)
    for one, two in zip(sums[1], sums[2], strict=True):
        assert np.array_equal(one, two)
    whole = MUSolver(Dataset(X), W0, Ht0, **box)
    assert whole.WtY_blocks.shape[0] == 4
    whole.step_w(0.0)
    np.testing.assert_allclose(sums[2][0], whole.WtY_partial, rtol=1e-12)
    np.testing.assert_allclose(sums[2][1], whole.WtW, rtol=1e-12)


def test_several_blocks_per_worker_give_the_factors_of_one_block_each(client):
    """3 blocks on each of the 2 workers (one partial each), 1 block each (2 partials each)
    and one machine (4 partials): the same Boolean factors and errors."""
    X, missing, _ = _data(seed=11)
    params = {**SHARED, "max_iter": 40}
    one = banmf.BANMF(**params).fit(X, missing=missing)
    for n_blocks in (2, 6):
        _same(one, bd.BANMF(**params, n_blocks=n_blocks).fit(X, missing=missing))


def test_a_worker_the_scheduler_still_lists_but_cannot_be_reached_is_lost(monkeypatch):
    """Killed a moment before the repair, a worker may still be in the scheduler's list, so
    its blocks look held: the repair reads every block again, and the worker that its call
    cannot reach is left out (as a hung one), not the repair failed."""

    class Client:
        def scheduler_info(self, n_workers=-1):
            return {"workers": {"tcp://a": {}, "tcp://b": {}}}

        def run(self, func, *args, workers=None, on_error="raise"):
            assert on_error == "return" and workers == ["tcp://a", "tcp://b"]
            return {"tcp://a": None, "tcp://b": OSError("Timed out trying to connect")}

    session = Session(Client(), None, None, None)
    session.where = {0: "tcp://a", 1: "tcp://b"}
    placed = []
    monkeypatch.setattr(session, "place", lambda blocks: placed.append(sorted(blocks)))
    session.repair()
    assert session.hung == {"tcp://b"}
    assert list(session._workers()) == ["tcp://a"]
    assert placed == [[0, 1]] and session.where == {} and session.servers == {}


def test_short_rounds_run_on_the_workers_event_loop():
    """A call's first round runs in the actor's thread; once its rounds are timed under
    ``LOOP_LIMIT`` they run on the worker's event loop (two thread handoffs fewer), longer
    ones in the thread again, and workers in the driver's process never on the loop."""
    from collections import deque

    from banmf.engine.dask import session as _session

    session = Session(None, bd.BlockMatrix.from_matrix(np.eye(4), n_blocks=2), None, None)
    session.servers = {"tcp://a": None, "tcp://b": None}
    assert session._dispatch("step") == {}  # not timed yet
    session.times["step"] = deque([0.01, 0.02, 10.0])
    assert session._dispatch("step") == {"separate_thread": False}
    session.times["step"].extend([_session.LOOP_LIMIT] * 2)
    assert session._dispatch("step") == {}  # the median round is no longer short
    session.times["grid_sums"] = deque([0.01])
    session.servers = {"inproc://a": None}
    assert session._dispatch("grid_sums") == {}


def _loop_threads(start: bool = True):
    """(Run on each worker.) With ``start``, note the thread of every block's ``step`` from
    now on; else put the step back and return the threads noted: ``"loop"`` for the worker's
    event loop, ``"thread"`` for another one."""
    import asyncio

    if start:
        plain = _worker.step

        def step(*args):
            try:
                asyncio.get_running_loop()
                _worker.step_threads.append("loop")
            except RuntimeError:
                _worker.step_threads.append("thread")
            return plain(*args)

        step.__name__, step.plain = "step", plain
        _worker.step, _worker.step_threads = step, []
        return None
    seen = _worker.step_threads
    _worker.step = _worker.step.plain
    del _worker.step_threads
    return seen


def test_a_fit_runs_its_short_rounds_on_the_event_loop_with_the_same_result(client, missing_fit):
    X, missing, _ = _data()
    client.run(_loop_threads, True)
    try:
        model = bd.BANMF(**SHARED, n_blocks=5, client=client).fit(X, missing=missing)
    finally:
        seen = client.run(_loop_threads, False)
    for threads in seen.values():
        assert threads[0] == "thread" and "loop" in threads
    _same(missing_fit, model, exact=True)
