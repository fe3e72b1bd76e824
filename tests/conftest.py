import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from numba import config as numba_config

# The command line's fits start no second process to compile ahead (banmf.runtime.warmup): the
# suite's workers compile the kernels themselves (warm_kernels), and a test's processes are
# its own. tests/test_warmup.py turns it back on where it tests it.
os.environ["BANMF_NO_AHEAD"] = "1"

settings.register_profile(
    "default", deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow]
)
# Of the variants a module draws for it (per_profile's ``wide``, else its ``other``): .ci/run's
# second tier runs the kernel tests whose widths it chooses so (the ``widths`` marker). Each
# example may compile new variants, and 24 draw each of the four widths of
# tests/test_kernels.py's ``width_ks`` several times over.
settings.register_profile(
    "wide", deadline=None, max_examples=24, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "thorough", deadline=None, max_examples=300, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("default")


def per_profile(default, other, wide=None):
    """``default`` under the default profile (the suite's time budget), ``wide`` (if given)
    under the "wide" profile (.ci/run's second tier), ``other`` under any other, so that
    ``--hypothesis-profile thorough`` runs a property in full. Read when a test module is
    imported, after pytest has loaded the profile it was given."""
    profile = settings.get_current_profile_name()
    if profile == "default":
        return default
    return wide if profile == "wide" and wide is not None else other


def examples(n: int) -> settings:
    """Settings of a property whose examples are expensive: ``n`` examples under the default
    profile, the profile's own count under any other (:func:`per_profile`)."""
    return per_profile(settings(max_examples=n), settings())


@st.composite
def binary_matrices(draw, max_n=12, max_m=12, min_n=1, min_m=1):
    """Random 0/1 matrices; small shapes make empty rows/columns and all-zero X common."""
    n = draw(st.integers(min_n, max_n))
    m = draw(st.integers(min_m, max_m))
    density = draw(st.sampled_from([0.0, 0.05, 0.3, 0.7, 1.0]))
    seed = draw(st.integers(0, 2**32 - 1))
    return (np.random.default_rng(seed).random((n, m)) < density).astype(np.int8)


@st.composite
def positive_factors(draw, n, m, k):
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    return rng.random((n, k)) + 0.01, rng.random((m, k)) + 0.01


def _copied(a):
    """``a`` with its arrays copied, also those in (named) tuples of arrays."""
    if isinstance(a, np.ndarray):
        return a.copy()
    if isinstance(a, tuple):
        items = [_copied(x) for x in a]
        return type(a)(*items) if hasattr(a, "_fields") else tuple(items)
    return a


def _assert_same_arrays(a, c):
    if isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, c, strict=True)
    elif isinstance(a, tuple):
        for x, y in zip(a, c):
            _assert_same_arrays(x, y)


def run_both(kernel, *args):
    """Run ``kernel.serial`` on copies of the arguments and ``kernel.parallel`` on the
    arguments themselves; assert that both variants leave every array (also those in groups of
    arrays), and return, the same to the last bit. Returns the parallel variant's result."""
    copies = [_copied(a) for a in args]
    expected = kernel.serial(*copies)
    result = kernel.parallel(*args)
    for a, c in zip(args, copies):
        _assert_same_arrays(a, c)
    if isinstance(result, np.ndarray):
        np.testing.assert_array_equal(result, expected, strict=True)
    else:
        assert result == expected
    return result


def binary_arrays(shape):
    return hnp.arrays(np.bool_, shape)


@pytest.fixture(autouse=True)
def parallel_starts_on_small_data(monkeypatch):
    """Tests use small matrices, whose starts banmf runs one after the other (threads do not
    pay there): make them run side by side, so that the threaded path is what is tested.
    ``test_cheap_starts_run_in_the_calling_thread`` checks the real threshold."""
    from banmf.engine import local as module

    monkeypatch.setattr(module, "PARALLEL_STARTS_MIN_COST", 0)


#: Fixtures that start processes (a Dask cluster): a test that uses one, directly or through
#: another fixture, is in the second tier (the ``slow`` marker).
PROCESS_FIXTURES = {"client"}


#: Modules whose tests run the command line or a script in a process of its own: they run
#: last, when the suite's workers have filled Numba's cache, so that their processes load the
#: kernels instead of compiling them again (a process of its own shares no lock of
#: :func:`pytest_configure`).
LAST_MODULES = ("test_cli.py", "test_tour.py", "test_report.py")


def pytest_collection_modifyitems(items):
    for item in items:
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: item.path.name in LAST_MODULES)  # stable: the order otherwise


def pytest_configure(config):
    """Under pytest-xdist, let one worker compile a cached kernel's signature while the others
    wait for it and then load it from Numba's cache, instead of compiling it too
    (:func:`banmf.runtime.warmup.compile_once`): on an empty cache (a fresh clone) the suite's
    time is mostly compilation. The locks live beside the workers' temporary folders, in the
    run's own, which pytest removes with the old runs'."""
    if not hasattr(config, "workerinput") or numba_config.DISABLE_JIT:
        return
    from banmf.runtime.warmup import compile_once

    compile_once(os.path.join(os.path.dirname(config.getoption("basetemp")), "compile-locks"))


@pytest.fixture(scope="session", autouse=True)
def warm_kernels():
    """Compile (or load from cache) a default fit's kernels once, outside the timed test
    bodies. Under pytest-xdist the odd workers go backwards (:func:`banmf.runtime.warmup.warm`): on
    an empty cache two workers then compile different kernels, each loading the other's."""
    from banmf.runtime.warmup import warm

    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    backwards = worker[2:].isdigit() and int(worker[2:]) % 2 == 1
    dtypes = (np.float64, np.float32)
    for dtype in reversed(dtypes) if backwards else dtypes:
        warm(dtype, 2, shape=(8, 6), density=0.4, backwards=backwards)


@pytest.fixture
def wrapping_integers():
    """Compiled integer arithmetic wraps silently (popcount's multiply relies on it); under
    NUMBA_DISABLE_JIT=1 the kernels run on numpy scalars, which warn on the same wrap."""
    if numba_config.DISABLE_JIT:
        with np.errstate(over="ignore"):
            yield
    else:
        yield


def observed_and_unknown(X, missing=None, observed=None):
    """X's observed ones and its unknown cells, as the layers below a fit receive them (the
    parts of :meth:`banmf.io.Dataset.of`)."""
    from banmf.io import Dataset

    data = Dataset.of(X, missing, observed)
    return data.X, data.unknown
