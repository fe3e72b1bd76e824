"""The thread budget: n_jobs's meaning, serial and parallel kernels, parallel starts."""

import importlib.metadata
import multiprocessing
import os
import subprocess
import sys
import warnings

import numba
import numpy as np
import pytest
import threadpoolctl
from conftest import observed_and_unknown

import banmf
from banmf import BANMF, METHODS, effective_n_jobs, make_boolean
from banmf._kernels.variants import kernel
from banmf.data.validation import check_binary_matrix
from banmf.datasets import make_sparse_degrees
from banmf.runtime import threads as _threads
from banmf.runtime.threads import thread_budget, threads_for, usable_cpus, variant


@kernel(cache=False)  # get_num_threads is a dynamic global: not cacheable
def _threads_seen(out):
    """Each iteration records the thread count the kernel sees."""
    for i in numba.prange(out.shape[0]):
        out[i] = numba.get_num_threads()


def test_n_jobs_meaning(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cpus = min(usable_cpus(), numba.config.NUMBA_NUM_THREADS)
    assert effective_n_jobs(None) == cpus
    assert effective_n_jobs(-1) == cpus
    assert effective_n_jobs(-2) == max(1, cpus - 1)
    assert effective_n_jobs(-1000) == 1
    assert effective_n_jobs(1) == 1 and effective_n_jobs(7) == 7
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert effective_n_jobs(None) == 1  # a soft limit: None honours it, -1 does not
    assert effective_n_jobs(-1) == cpus
    with pytest.raises(ValueError, match="n_jobs"):
        effective_n_jobs(0)
    with pytest.raises(TypeError, match="n_jobs"):
        effective_n_jobs(1.5)
    with pytest.raises(TypeError, match="n_jobs"):
        effective_n_jobs(True)


def test_usable_cpus_follows_the_affinity_mask():
    import os

    assert 1 <= usable_cpus() <= len(os.sched_getaffinity(0))


def test_threadpoolctl_limits_are_honoured(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    # Numba's OpenMP runtime is loaded once a parallel kernel has run: then threadpoolctl sees it.
    _threads_seen.parallel(np.zeros(2, np.int64))
    if not any(p["user_api"] == "openmp" for p in threadpoolctl.threadpool_info()):
        pytest.skip("no OpenMP runtime visible to threadpoolctl")
    with threadpoolctl.threadpool_limits(limits=1, user_api="openmp"):
        assert effective_n_jobs(None) == 1


def test_kernel_calls_outside_a_fit_do_not_rescan_the_thread_pools(monkeypatch):
    # Once threadpoolctl is imported, every kernel call outside a fit reads its limits: making
    # a controller scans every loaded library (about 1 ms), so it is made once and reused.
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    effective_n_jobs(None)
    made = []
    real = threadpoolctl.ThreadpoolController
    monkeypatch.setattr(
        threadpoolctl, "ThreadpoolController", lambda *a: made.append(1) or real(*a)
    )
    for _ in range(50):
        effective_n_jobs(None)
    assert made == []
    # A module imported since may have loaded a new runtime: the pools are scanned again.
    monkeypatch.setitem(sys.modules, "banmf_test_new_runtime", None)
    effective_n_jobs(None)
    assert made == [1]


def test_budget_nests_and_is_restored():
    with thread_budget(1) as n:
        assert n == 1 and effective_n_jobs(None) == 1
        with thread_budget(None):  # a nested fit with n_jobs=None inherits the budget
            assert effective_n_jobs(None) == 1
        with thread_budget(3):
            assert effective_n_jobs(None) == 3
        assert effective_n_jobs(None) == 1
    assert _threads._budget.get() is None


def test_small_work_runs_serially_and_large_work_on_the_budget():
    big = _threads.PARALLEL_MIN_WORK
    with thread_budget(2):
        assert threads_for(big - 1) == 1
        assert threads_for(big) == min(2, numba.config.NUMBA_NUM_THREADS)
    with thread_budget(1):
        assert threads_for(10 * big) == 1
        assert variant(_threads_seen, threads_for(10 * big)) is _threads_seen.serial


def _fit_in_child(X, queue):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = BANMF(4, random_state=0, n_jobs=2, n_init=1, max_iter=30).fit(X)
    said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    queue.put((model.W_, model.components_, said))


@pytest.mark.slow  # it starts a process: the second tier
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork() on this platform")
@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="one Numba thread")
def test_a_process_forked_after_the_threads_started_fits_with_the_same_result():
    """GNU OpenMP kills a process forked after its threads started once the child starts a
    parallel region (a forked multiprocessing pool then hangs): there banmf's kernels run
    serially, say so once, and give the parent's bits. Under TBB the child keeps its threads."""
    X = make_sparse_degrees(20_000, 1_000, 200_000, rows="powerlaw", random_state=0)
    parent = BANMF(4, random_state=0, n_jobs=2, n_init=1, max_iter=30).fit(X)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_fit_in_child, args=(X, queue))
    with warnings.catch_warnings():
        # Python 3.12+ warns that forking a process with threads (Numba's) may deadlock the
        # child: the case under test.
        warnings.simplefilter("ignore", DeprecationWarning)
        child.start()
    try:
        W, H, said = queue.get(timeout=60)
    finally:
        child.join(timeout=60)
    assert child.exitcode == 0
    np.testing.assert_array_equal(W, parent.W_)
    np.testing.assert_array_equal(H, parent.components_)
    vendor = getattr(sys.modules.get("numba.np.ufunc.omppool"), "openmp_vendor", None)
    if numba.threading_layer() == "omp" and vendor == "GNU":
        assert len(said) == 1 and "forked" in said[0] and "banmf[tbb]" in said[0]
    else:
        assert not said


def _installed(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.mark.skipif(
    not (sys.platform.startswith("linux") and _installed("tbb")), reason="no tbb extra here"
)
def test_the_tbb_extra_gives_numba_its_tbb_layer_unless_the_user_chose_one():
    """With ``banmf[tbb]`` installed, banmf lets Numba find the wheel's runtime (not on the
    loader's path) before its threads start: Numba's TBB layer starts, or the layer that
    NUMBA_THREADING_LAYER names."""
    code = (
        "import banmf, numba; banmf.effective_n_jobs(2); numba.get_num_threads(); "
        "print(numba.threading_layer())"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_THREADING_LAYER"}
    layers = []
    for chosen in (None, "omp", "tbb"):
        run = subprocess.run(
            [sys.executable, "-c", code],
            env=env if chosen is None else {**env, "NUMBA_THREADING_LAYER": chosen},
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        layers.append(run.stdout.strip())
    assert layers == ["tbb", "omp", "tbb"]


@kernel(cache=False, one_thread="parallel")
def _threads_seen_one(out):
    """:func:`_threads_seen` for a kernel that runs its parallel variant on one thread."""
    for i in numba.prange(out.shape[0]):
        out[i] = numba.get_num_threads()


def test_one_thread_kernels_run_parallel_on_one_thread_where_the_layer_allows(monkeypatch):
    big = _threads.PARALLEL_MIN_WORK
    with thread_budget(1):
        monkeypatch.setattr(_threads, "parallel_is_threadsafe", lambda: True)
        call = _threads.pick(_threads_seen_one, big)
        assert call.func is _threads._on_threads and call.args == (_threads_seen_one.parallel, 1)
        out = np.zeros(8, np.int64)
        call(out)
        assert (out == 1).all()
        # Small work stays serial (a parallel call costs more than it saves), and so does a
        # kernel that did not ask, or any kernel under a layer that aborts on concurrent use.
        assert _threads.pick(_threads_seen_one, big - 1) is _threads_seen_one.serial
        assert _threads.pick(_threads_seen, 10 * big) is _threads_seen.serial
        monkeypatch.setattr(_threads, "parallel_is_threadsafe", lambda: False)
        assert _threads.pick(_threads_seen_one, 10 * big) is _threads_seen_one.serial
    with pytest.raises(ValueError, match="one_thread"):
        kernel(one_thread="threads")


@pytest.mark.skipif(
    not _threads.parallel_is_threadsafe(), reason="the threading layer is not thread-safe"
)
def test_one_thread_updates_side_by_side_equal_the_serial_kernel():
    """Row updates on one thread each, from four threads at once (as starts side by side run
    them): each result equals the serial kernel's to the bit."""
    import threading

    from banmf._kernels.mu import update_rows

    rng = np.random.default_rng(0)
    k, n = 10, 20_000
    G = rng.random((k, k))
    G = G @ G.T
    cases = [(rng.random((n, k)), rng.random((n, k)) * 3) for _ in range(4)]
    expected = []
    for F, numer in cases:
        F, gram = F.copy(), np.empty((4, k, k))
        update_rows.serial(F, numer, G, 0.0, 1e-9, gram, None)
        expected.append((F, gram))
    got, calls = [None] * len(cases), [None] * len(cases)

    def run(c):
        with thread_budget(1):
            calls[c] = call = _threads.pick(update_rows, n * k * k)
            for _ in range(20):
                F, gram = cases[c][0].copy(), np.empty((4, k, k))
                call(F, cases[c][1], G, 0.0, 1e-9, gram, None)
            got[c] = (F, gram)

    threads = [threading.Thread(target=run, args=(c,)) for c in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(call.args == (update_rows.parallel, 1) for call in calls)
    for (F, gram), (F0, gram0) in zip(got, expected, strict=True):
        np.testing.assert_array_equal(F, F0)
        np.testing.assert_array_equal(gram, gram0)


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two Numba threads")
def test_a_parallel_kernel_sees_exactly_its_threads_and_leaves_the_count_as_it_was():
    before = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        out = np.zeros(8, np.int64)
        variant(_threads_seen, 2)(out)
        assert (out == 2).all()
        assert numba.get_num_threads() == 1
    finally:
        numba.set_num_threads(before)


def _fitted(model):
    return model.W_, model.components_, model.reconstruction_err_, model.init_errors_, model.n_iter_


def _assert_same(a, b):
    np.testing.assert_array_equal(a.W_, b.W_)
    np.testing.assert_array_equal(a.components_, b.components_)
    np.testing.assert_array_equal(a.W_continuous_, b.W_continuous_)
    assert a.reconstruction_err_ == b.reconstruction_err_
    assert a.init_errors_ == b.init_errors_
    np.testing.assert_array_equal(a.loss_curve_, b.loss_curve_)


@pytest.mark.parametrize("density", [0.2, 0.5])
def test_parallel_starts_equal_sequential_starts(density):
    X, _, _ = make_boolean(40, 30, 4, density, noise=0.02, random_state=3)
    params = {"n_components": 4, "max_iter": 60, "n_init": 5, "random_state": 7}
    one = BANMF(n_jobs=1, **params).fit(X)
    two = BANMF(n_jobs=2, **params).fit(X)
    four = BANMF(n_jobs=4, **params).fit(X)  # more threads than starts or cores
    assert len(one.init_errors_) == 5
    _assert_same(one, two)
    _assert_same(one, four)


def test_an_exact_fit_ends_parallel_starts_as_it_ends_sequential_ones():
    # Noise-free planted data: most starts fit exactly, so the restarts end early.
    X, _, _ = make_boolean(30, 20, 3, 0.4, random_state=1)
    params = {"n_components": 3, "max_iter": 300, "n_init": 10, "random_state": 0}
    one = BANMF(n_jobs=1, **params).fit(X)
    two = BANMF(n_jobs=2, **params).fit(X)
    assert one.reconstruction_err_ == 0 and len(one.init_errors_) < 10
    _assert_same(one, two)


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_gives_the_same_result_serial_and_parallel(name, monkeypatch):
    """With every kernel forced parallel (no crossover), n_jobs=2 equals n_jobs=1 bit for bit."""
    X, _, _ = make_boolean(60, 40, 4, 0.3, noise=0.05, random_state=2)
    params = {"max_iter": 30} if "max_iter" in METHODS[name]._param_names() else {}
    if "polish" in METHODS[name]._param_names():
        params["polish"] = True
    serial = banmf.factorize(X, 4, method=name, random_state=0, n_jobs=1, **params)
    monkeypatch.setattr(_threads, "PARALLEL_MIN_WORK", 0)
    parallel = banmf.factorize(X, 4, method=name, random_state=0, n_jobs=2, **params)
    np.testing.assert_array_equal(serial.W, parallel.W)
    np.testing.assert_array_equal(serial.H, parallel.H)
    assert serial.error == parallel.error


@pytest.mark.slow  # a property at size (BLAS threads only start on large products)
@pytest.mark.parametrize(
    "name, shape, nnz, k, params",
    [
        # m = 40,000: the first W step reads HHᵀ, a Gram matrix over 40,000 rows of Hᵀ
        ("banmf", (2000, 40_000), 80_000, 10, {"n_init": 1, "extra_starts": (), "max_iter": 20}),
        # dense products whose inner dimension is the 3,000 rows
        ("pnlpf", (3000, 800), 120_000, 4, {"max_iter": 20}),
    ],
)
def test_fits_do_not_depend_on_the_blas_thread_count(name, shape, nnz, k, params):
    """OpenBLAS splits a long product's sums between its threads: a fit runs numpy's BLAS on
    one thread (banmf.runtime.threads.serial_blas), so that the continuous factors and the loss
    curve, not only the Boolean factors, are the same on any number of BLAS threads. (Both
    cases differed at 1 and 2 BLAS threads before.)"""
    from banmf.datasets import make_sparse_degrees

    X = make_sparse_degrees(*shape, nnz, rows="powerlaw", cols="powerlaw", random_state=0)
    fits = []
    for threads in (1, 2):
        with threadpoolctl.threadpool_limits(threads, user_api="blas"):
            fits.append(METHODS[name](k, random_state=0, **params).fit(X))
            blas = [p for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
        assert all(p["num_threads"] == threads for p in blas)  # the caller's limit is back
    one, two = fits
    for attr in ("W_", "components_", "W_continuous_", "H_continuous_", "loss_curve_"):
        np.testing.assert_array_equal(getattr(one, attr), getattr(two, attr), err_msg=attr)


def test_the_solver_is_made_on_one_blas_thread_outside_a_fit_too():
    """A Dask worker makes its blocks' solvers outside any estimator's fit: their first Gram
    matrices (HHᵀ over 40,000 rows of Hᵀ here) must not follow the worker's BLAS threads."""
    from banmf.data.dataset import Dataset
    from banmf.datasets import make_sparse_degrees
    from banmf.engine.iterations import MUSolver

    X = make_sparse_degrees(200, 40_000, 8_000, random_state=0)
    rng = np.random.default_rng(0)
    W, Ht = rng.random((200, 10)), rng.random((40_000, 10))
    grams = []
    for threads in (1, 2):
        with threadpoolctl.threadpool_limits(threads, user_api="blas"):
            solver = MUSolver(Dataset(X), W, Ht, project=True, lower=1.0, upper=10.0, eps=1e-9)
            grams.append(solver.HHt.copy())
    np.testing.assert_array_equal(*grams)


def test_transform_runs_within_the_budget():
    X, _, _ = make_boolean(40, 30, 3, 0.4, random_state=0)
    model = BANMF(3, max_iter=50, n_init=2, random_state=0, n_jobs=1).fit(X)
    W1 = model.transform(X)
    W2 = model.set_params(n_jobs=2).transform(X)
    np.testing.assert_array_equal(W1, W2)


def test_fit_many_equals_fitting_one_by_one():
    X, _, _ = make_boolean(50, 30, 4, 0.3, noise=0.03, random_state=5)

    def make():
        return [BANMF(k, max_iter=80, n_init=3, random_state=s) for k in (2, 4) for s in (0, 1)]

    alone = [est.fit(X) for est in make()]
    together = banmf.fit_many(make() + [banmf.ASSO(3)], X, n_jobs=2)
    assert together[-1].n_components_ == 3
    for a, b in zip(alone, together):
        _assert_same(a, b)


def test_fits_in_other_threads_stop_when_cancelled():
    import threading

    X, _, _ = make_boolean(40, 30, 3, 0.4, random_state=0)
    event = threading.Event()
    seen = []

    def cancel_at_3(t, f):
        seen.append(t)
        if t == 3:
            event.set()

    with _threads.cancel_with(event):
        model = BANMF(
            3, max_iter=100, n_init=4, n_jobs=2, random_state=0, callback=cancel_at_3
        ).fit(X)
    assert model.interrupted_ and model.n_iter_ <= 4 and max(seen) <= 4


# float32 compiles every parallel kernel again: the second tier (and the TBB stage of .ci/run).
@pytest.mark.parametrize("dtype", [np.float64, pytest.param(np.float32, marks=pytest.mark.slow)])
def test_vector_kernels_serial_and_parallel_give_the_same_fit(dtype, monkeypatch):
    """The register-tiled MU kernels (problems over SMALL_WORK), forced here on a small X: the
    serial and parallel variants give the same fit to the bit."""
    from banmf.engine import iterations as mu

    monkeypatch.setattr(mu, "SMALL_WORK", 0)
    X, _, _ = make_boolean(70, 50, 5, 0.3, noise=0.03, random_state=4)
    params = {"n_components": 5, "max_iter": 40, "n_init": 2, "random_state": 1, "dtype": dtype}
    serial = BANMF(n_jobs=1, **params).fit(X)
    monkeypatch.setattr(_threads, "PARALLEL_MIN_WORK", 0)
    parallel = BANMF(n_jobs=2, **{**params, "n_init": 1}).fit(X)
    alone = BANMF(n_jobs=1, **{**params, "n_init": 1}).fit(X)
    _assert_same(alone, parallel)
    assert serial.init_errors_[0] == alone.reconstruction_err_


def test_cheap_starts_run_in_the_calling_thread(monkeypatch):
    import threading

    from banmf.engine import local as module

    monkeypatch.setattr(module, "PARALLEL_STARTS_MIN_COST", 5e7)
    X, _, _ = make_boolean(40, 30, 3, 0.3, noise=0.05, random_state=0)
    threads = set()
    BANMF(
        3,
        max_iter=20,
        n_init=4,
        n_jobs=2,
        random_state=0,
        callback=lambda t, f: threads.add(threading.current_thread().name),
    ).fit(X)
    assert threads == {threading.current_thread().name}
    monkeypatch.setattr(module, "PARALLEL_STARTS_MIN_COST", 0)
    threads.clear()
    BANMF(
        3,
        max_iter=20,
        n_init=4,
        n_jobs=2,
        random_state=0,
        extra_starts=(),  # the NMF start runs in the calling thread, after the others
        callback=lambda t, f: threads.add(threading.current_thread().name),
    ).fit(X)
    # Worker threads only (how many of the two get a start depends on the scheduler: on a
    # busy machine one may take every start before the other wakes).
    assert threads and all(name.startswith("banmf-start") for name in threads)


def test_ctrl_c_while_starts_run_side_by_side_keeps_the_running_ones_and_starts_no_other(
    monkeypatch,
):
    import _thread
    import threading

    from banmf.engine import local as module

    monkeypatch.setattr(module, "PARALLEL_STARTS_MIN_COST", 0)
    X, _, _ = make_boolean(40, 30, 3, 0.3, noise=0.05, random_state=0)
    once = threading.Event()

    def ctrl_c(t, f):
        if t == 5 and not once.is_set():
            once.set()
            _thread.interrupt_main()  # as if Ctrl-C arrived: in the calling thread only

    model = BANMF(
        3, max_iter=10_000, n_init=4, n_jobs=2, random_state=0, extra_starts=(), callback=ctrl_c
    )
    with (
        pytest.warns(UserWarning, match="the running starts stop here") as told,
        pytest.raises(KeyboardInterrupt),
    ):
        model.fit(X)
    assert [w.filename for w in told] == [__file__]  # the warning points at the fit's caller
    # The starts under way (one or two, as the threads were scheduled) were booleanized; the
    # later ones never began.
    assert model.interrupted_ and 1 <= len(model.init_errors_) <= 2
    assert model.n_iter_ < 10_000
    assert model.reconstruction_err_ == min(model.init_errors_)


@pytest.mark.parametrize("form", [None, "missing", "observed"])
def test_the_solver_fused_on_two_threads_equals_it_on_one(form, monkeypatch):
    """On several threads the W step's update and scatter run as one parallel call and the H
    step sums Wᵀ Y's partials itself (update_scatter_rows); on one they run apart. Both give
    the same iterations to the bit, with or without unknown cells in either form, and Wᵀ Y
    read after a W step is the same."""
    from banmf.data.dataset import Dataset
    from banmf.engine.iterations import MUSolver

    rng = np.random.default_rng(4)
    Xd = rng.random((300, 200)) < 0.3
    k = 6
    keyword = {}
    if form is not None:
        unknown = rng.random(Xd.shape) < (0.1 if form == "missing" else 0.9)
        keyword = {"missing": unknown} if form == "missing" else {"observed": ~unknown}
    X, unk = observed_and_unknown(check_binary_matrix(Xd), **keyword)
    W, Ht = rng.random((300, k)) + 0.01, rng.random((200, k)) + 0.01
    monkeypatch.setattr(_threads, "PARALLEL_MIN_WORK", 0)
    runs = []
    for threads in (1, 2):
        with thread_budget(threads):
            solver = MUSolver(
                Dataset.trusted(X, unk), W, Ht, project=True, lower=1.0, upper=float(k), eps=1e-9
            )
        assert not solver.small
        assert (solver._update_scatter is not None) == (threads == 2)
        values = solver.iterate(np.zeros(5))
        solver.step_w(0.0)
        runs.append((values, solver.W.copy(), solver.Ht.copy(), solver.WtY_partial.copy()))
    for one, two in zip(*runs):
        np.testing.assert_array_equal(one, two, strict=True)
