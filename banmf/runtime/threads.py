"""The thread budget: how many threads banmf may use, and which kernel variant runs.

Threads are a budget, not a given: the machine may be shared and this process may be one of
several (a k sweep, joblib or Dask workers, a notebook beside a script). A fit runs inside
:func:`thread_budget`, which resolves ``n_jobs`` once; every kernel call then asks
:func:`variant` for the serial kernel (small work, or a budget of one thread) or the parallel
one on the budget's threads. Numba's thread count is set around each parallel call and put
back after it (it is per calling thread), so nothing changes the process's state for good.
"""

from __future__ import annotations

import contextlib
import contextvars
import ctypes
import functools
import importlib.metadata
import math
import numbers
import os
import sys
import threading
import warnings
from contextlib import contextmanager

import numba

from ..exceptions import InvalidParameterError

# Numba's OpenMP threads otherwise spin for a while after every parallel call, waiting for the
# next; on a shared machine they take the cores that other processes (and the other fits of a
# sweep) need, and every join then waits for a descheduled spinner (docs/decisions.md,
# "Waiting threads"). GNU OpenMP reads this when Numba first starts its threads; a policy the
# user has set is kept.
if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"


def _load_tbb() -> None:
    """Make the TBB runtime of the ``tbb`` wheel (``pip install banmf[tbb]``) visible to Numba,
    whose default order of threading layers then starts TBB's (a layer the user chose with
    ``NUMBA_THREADING_LAYER`` is still the one used). Every parallel kernel is called through
    this module, so this runs before Numba starts its threads.

    The wheel puts ``libtbb.so.12`` in the environment's ``lib`` folder, where the dynamic
    loader does not look, so Numba's TBB layer fails to load and Numba falls back to OpenMP.
    Loaded once by its path, the library is then found by its name. Why TBB where it is
    installed: its waiting threads make an iteration a little faster than OpenMP's passive
    ones, and it keeps its threads in processes forked after them (docs/decisions.md, "Waiting
    threads"; docs/PERFORMANCE.md)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        files = importlib.metadata.files("tbb") or []
    except importlib.metadata.PackageNotFoundError:
        return
    for file in files:
        if file.name == "libtbb.so.12":
            with contextlib.suppress(OSError):
                ctypes.CDLL(str(file.locate()), mode=ctypes.RTLD_GLOBAL)
            return


_load_tbb()

# GNU OpenMP cannot run a parallel region in a process forked after its threads started: the
# child is killed ("fork() called from a process already using GNU OpenMP, this is unsafe"),
# and a multiprocessing pool that forked it hangs. So a process forked from one whose Numba
# threads are GNU OpenMP's runs every kernel serially (the same bits), and says so once.
# Numba's other layers (TBB; Intel's OpenMP) are safe after a fork.
_forked_after_omp = False
_fork_warned = False


def _after_fork_in_child() -> None:
    global _forked_after_omp, _fork_warned
    try:
        layer = numba.threading_layer()
    except ValueError:  # the parent never started Numba's threads: the child starts its own
        return
    vendor = getattr(sys.modules.get("numba.np.ufunc.omppool"), "openmp_vendor", "GNU")
    if layer == "omp" and vendor != "Intel":
        _forked_after_omp, _fork_warned = True, False


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _serial_after_fork() -> bool:
    """Whether this process must not start parallel kernels (forked after GNU OpenMP's
    threads started); warns once when it first turns a parallel call into a serial one."""
    global _fork_warned
    if _forked_after_omp and not _fork_warned:
        _fork_warned = True
        warnings.warn(
            "this process was forked from one whose OpenMP threads had started, and GNU "
            "OpenMP cannot run threads after a fork: banmf's kernels run on one thread here "
            "(the same results). To use threads in worker processes, start them with the "
            "'spawn' or 'forkserver' method (multiprocessing.get_context), or install the "
            "TBB threading layer (pip install banmf[tbb]).",
            RuntimeWarning,
            stacklevel=2,
        )
    return _forked_after_omp


#: Work (about one multiply-add or one word operation per unit) below which a kernel call runs
#: serially: there a parallel call's fork and join cost more than they save, the more so on a
#: busy machine (docs/decisions.md, "Serial calls for small work").
PARALLEL_MIN_WORK = 500_000

_budget: contextvars.ContextVar[int | None] = contextvars.ContextVar("banmf_threads", default=None)
# Set by whoever runs work in other threads (banmf.runtime.runner): fits stop at their next iteration
# once one of these is set, as on Ctrl-C, since KeyboardInterrupt reaches only the main thread.
# Every enclosing one holds: a start among several inside one fit of banmf.fit_many stops when
# either its own fit or fit_many is cancelled.
_cancel: contextvars.ContextVar[tuple[threading.Event, ...]] = contextvars.ContextVar(
    "banmf_cancel", default=()
)


@functools.lru_cache(maxsize=1)
def _cgroup_cpus() -> float:
    """CPUs allowed by the cgroup's CPU quota (v2 ``cpu.max`` or v1 CFS), or inf."""
    try:
        with open("/sys/fs/cgroup/cpu.max") as fh:
            quota, period = fh.read().split()[:2]
        if quota != "max":
            return int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") as fh:
            quota = int(fh.read())
        with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as fh:
            period = int(fh.read())
        if quota > 0 and period > 0:
            return quota / period
    except (OSError, ValueError):
        pass
    return math.inf


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity mask, capped by the cgroup's CPU quota."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    quota = _cgroup_cpus()
    return max(1, cpus if quota == math.inf else min(cpus, math.ceil(quota)))


def _soft_limits() -> list[int]:
    """Thread limits the user has set for this process: ``OMP_NUM_THREADS`` and, if
    threadpoolctl is in use, its OpenMP limits."""
    limits = []
    value = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if value.isdigit() and int(value) > 0:
        limits.append(int(value))
    if "threadpoolctl" in sys.modules:
        # Once imported (by the user, or by serial_blas after a first fit): a user's
        # threadpool_limits(1) around a call must hold.
        for pool in _controller().info():
            if pool.get("user_api") == "openmp" and pool.get("num_threads"):
                limits.append(int(pool["num_threads"]))
    return limits


def effective_n_jobs(n_jobs=None) -> int:
    """The number of threads ``n_jobs`` stands for, with scikit-learn's meaning.

    Parameters
    ----------
    n_jobs : int or None
        ``None``: what the environment allows: inside :func:`thread_budget` (a fit with its own
        ``n_jobs``, a start among several), that budget; otherwise the usable CPUs (affinity
        mask and cgroup quota), at most ``NUMBA_NUM_THREADS``, ``OMP_NUM_THREADS`` and any
        threadpoolctl OpenMP limit in force. ``-1``: every usable CPU (at most ``NUMBA_NUM_THREADS``);
        ``-2`` all but one, and so on. A positive int: that many threads (kernels use at most
        ``NUMBA_NUM_THREADS`` of them; several starts or fits can use more).

    Returns
    -------
    int
        At least 1.
    """
    if n_jobs is not None and (
        isinstance(n_jobs, bool) or not isinstance(n_jobs, numbers.Integral)
    ):
        raise InvalidParameterError(f"n_jobs must be None or an int, got {n_jobs!r}")
    if n_jobs is not None and n_jobs == 0:
        raise InvalidParameterError(
            "n_jobs must be None, a positive int or a negative int (-1: all CPUs), got 0"
        )
    if n_jobs is not None and n_jobs > 0:
        return int(n_jobs)
    if n_jobs is None and _budget.get() is not None:
        return _budget.get()
    cpus = min(usable_cpus(), numba.config.NUMBA_NUM_THREADS)
    if n_jobs is None:
        return max(1, min([cpus, *_soft_limits()]))
    return max(1, cpus + 1 + int(n_jobs))


@contextmanager
def thread_budget(n_jobs=None):
    """Run the enclosed banmf calls on at most ``effective_n_jobs(n_jobs)`` threads.

    The budget belongs to the calling thread's context; threads that banmf starts (parallel
    starts, :func:`banmf.fit_many`) get their own share of it. Yields the number of threads.
    """
    n = effective_n_jobs(n_jobs)
    token = _budget.set(n)
    try:
        yield n
    finally:
        _budget.reset(token)


def current_threads() -> int:
    """The budget in force: set by :func:`thread_budget`, else what the environment allows."""
    return effective_n_jobs(None)


def cancelled() -> bool:
    """Has any caller that runs this work in another thread asked it to stop?"""
    return any(event.is_set() for event in _cancel.get())


@contextmanager
def cancel_with(event: threading.Event):
    """Fits in the enclosed code stop, as on Ctrl-C, once ``event`` is set (or any event of an
    enclosing :func:`cancel_with`)."""
    token = _cancel.set((*_cancel.get(), event))
    try:
        yield
    finally:
        _cancel.reset(token)


def threads_for(work: float) -> int:
    """Threads a kernel call of ``work`` units should use: 1 (serial) below
    :data:`PARALLEL_MIN_WORK`, on a budget of one or in a process forked after GNU OpenMP's
    threads started, else the budget (at most ``NUMBA_NUM_THREADS``)."""
    if work < PARALLEL_MIN_WORK:
        return 1
    threads = min(current_threads(), numba.config.NUMBA_NUM_THREADS)
    return 1 if threads > 1 and _serial_after_fork() else threads


def blocks_for(threads: int, items: int) -> int:
    """Blocks to split ``items`` into for a kernel on ``threads`` threads: one when serial (each
    block has its own scratch), four per thread when parallel (uneven blocks balance out).
    Only for kernels whose results do not depend on the blocks (integer counts, or one block
    per output)."""
    return max(1, min(4 * threads if threads > 1 else 1, items))


def variant(kernel, threads: int):
    """The callable to run ``kernel`` (a :class:`banmf._kernels.variants.Kernel`) on
    ``threads`` threads: its serial dispatcher for 1, else its parallel one wrapped to run on
    exactly that many Numba threads."""
    if threads <= 1:
        return kernel.serial
    return functools.partial(_on_threads, kernel.parallel, threads)


@functools.cache
def parallel_is_threadsafe() -> bool:
    """Whether Numba's threading layer takes parallel kernels launched from several threads
    at once: TBB and OpenMP do, the fallback ``workqueue`` does not (it aborts the process).
    Asking for the thread count starts the layer, which fixes which one it is."""
    numba.get_num_threads()
    return numba.threading_layer() in ("tbb", "omp")


_blas_lock = threading.Lock()
_blas_users = 0
_blas_limiter = None


_controller_cache: tuple[int, object] | None = None


def _controller():
    """threadpoolctl's view of the thread pools loaded in this process.

    Making one scans every loaded shared library (about 1 ms), too slow for each kernel call
    outside a fit; reading a made one's limits is a few µs and sees the limits in force. It is
    made again when modules have been imported since, the way a new OpenMP or BLAS runtime
    gets loaded (Numba's OpenMP pool included)."""
    global _controller_cache
    key = len(sys.modules)
    cached = _controller_cache
    if cached is None or cached[0] != key:
        import threadpoolctl

        cached = _controller_cache = (len(sys.modules), threadpoolctl.ThreadpoolController())
    return cached[1]


@contextmanager
def serial_blas():
    """numpy's and scipy's BLAS on one thread inside the block, for every thread of the
    process (the BLAS libraries' thread count is process-wide); put back when the last block
    open ends.

    OpenBLAS splits a long dot, matrix-vector or matrix product between its threads, each
    summing its share: the bits of ARPACK's singular vectors, of numpy's norms and of a Gram
    matrix over many rows then depend on how many threads BLAS has (the cores of the machine,
    ``OPENBLAS_NUM_THREADS``). Every estimator's ``fit`` and ``transform`` run inside it
    (:func:`banmf.models._base.budgeted`), and so does NNDSVD wherever it is called."""
    global _blas_users, _blas_limiter
    with _blas_lock:
        if _blas_users == 0:
            _blas_limiter = _controller().limit(limits=1, user_api="blas")
        _blas_users += 1
    try:
        yield
    finally:
        with _blas_lock:
            _blas_users -= 1
            if _blas_users == 0:
                _blas_limiter.restore_original_limits()
                _blas_limiter = None


def pick(kernel, work: float):
    """The callable for one call of ``work`` units: ``variant(kernel, threads_for(work))``,
    except that a kernel whose ``one_thread`` is "parallel" runs its parallel dispatcher on one
    thread where the budget is one thread but the work is large (a parallel call costs about
    6 µs more, which small work does not repay), if the threading layer lets several threads
    launch parallel kernels at once (:func:`parallel_is_threadsafe`): starts side by side,
    each on one thread, do."""
    threads = threads_for(work)
    if (
        threads == 1
        and work >= PARALLEL_MIN_WORK
        and kernel.one_thread == "parallel"
        and not _forked_after_omp
        and parallel_is_threadsafe()
    ):
        return functools.partial(_on_threads, kernel.parallel, 1)
    return variant(kernel, threads)


def _on_threads(dispatcher, threads: int, *args):
    previous = numba.get_num_threads()
    if previous == threads:
        return dispatcher(*args)
    numba.set_num_threads(threads)
    try:
        return dispatcher(*args)
    finally:
        numba.set_num_threads(previous)
