"""Compiling a fit's kernels ahead, in a second process.

A default BANMF fit calls some forty Numba kernels. Numba compiles each on its first call
and keeps the machine code in its on-disk cache, so only the first run of a kind of fit pays
(its dtype, its unknown cells, its serial or parallel kernels). Compilation holds a
process-wide lock: one process compiles on one core. So a first run of ``banmf factorize``
starts a second process (:func:`spawn`) before it parses its arguments, where Numba's cache
looks empty (:func:`cache_looks_empty`); the process loads banmf while the first one reads
the data, and is then given the fit (:meth:`Ahead.begin`; a later run that compiles after
all starts it at its first compilation, :func:`ahead`). It calls the fit's kernels through
the same steps of the one-machine backend on a small matrix (:func:`plan`), in the opposite
order of the fit's: the combination of the starts first, the iterations last, and the
threshold search's chain of kernels one at a time from its end. Each kernel it compiles goes
to the cache, where the fit, reaching it later, loads it instead of compiling it. The two
meet in the middle, and the first run waits for about half of the compilation. Both compile
each kernel signature under a lock of their own (:func:`compile_once`): where one reaches a
kernel that the other is compiling, it waits for the other's entry instead of compiling it
too.

The second process only writes the cache (Numba writes its files atomically: a reader sees a
whole entry or none), so it changes no result; it is stopped when the fit ends. The test
suite uses :func:`warm` and :func:`compile_once` the same way: one worker compiles forwards,
the other backwards. ``BANMF_NO_AHEAD=1`` turns the second process off.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from types import SimpleNamespace

#: The unknown cells a plan's small matrix has: none, ``missing=`` or ``observed=``.
FORMS = ("all", "missing", "observed")


#: The most cells a plan's matrix has: :func:`ahead` starts no second process for a larger
#: fit, whose kernels (parallel ones, other branches) a small matrix would not compile, and
#: whose own time dwarfs the compilation.
MAX_CELLS = 10**6


def _problem(dtype, k: int, form: str, shape: tuple[int, int], density: float):
    """A BANMF fit's backend on a random matrix of ``shape`` and about ``density``: the
    estimator, its data, its run settings, the backend and the matrix's planted factors. The
    steps take the branches (and serial or parallel kernels) that their sizes choose, so the
    shape is the fit's own."""
    import numpy as np
    import scipy.sparse as sp

    from ..datasets import make_boolean
    from ..engine.local import LocalBackend
    from ..models.banmf import BANMF

    n, m = shape
    k = min(k, n, m)
    density = min(max(density, 1.0 / (n * m)), 1.0)
    X, W, H = make_boolean(n, m, k, density=density, noise=0.05, random_state=0)
    rng = np.random.default_rng(0)
    masks = {}
    if form == "missing":
        masks["missing"] = sp.csr_array(rng.random((n, m)) < 0.1)
    elif form == "observed":
        masks["observed"] = sp.csr_array(rng.random((n, m)) < 0.6)
    model = BANMF(k, dtype=dtype, random_state=0, n_jobs=1)
    data = model._begin(X, **masks)[0]
    p = model._check_params(k, data.X.shape, data.X.nnz)
    backend = LocalBackend(model, data, p, np.random.default_rng(0))
    return model, data, p, backend, (W, H)


def plan(
    dtype="float64",
    k: int = 5,
    form: str = "all",
    shape: tuple[int, int] = (40, 30),
    density: float = 0.3,
) -> list[Callable[[], object]]:
    """The steps of a default fit of ``dtype`` at rank ``k`` with unknown cells of ``form``
    on data of ``shape`` and ``density``, each a call that runs one step on a random matrix
    like it, in the order a fit first runs them (:meth:`banmf.engine.Driver.fit`): the
    greedy start, the polish and the swaps (which refine it), the iterations of a random
    start, their threshold search, the per-factor thresholds, the NMF start, the combination
    (with GreConD's factors where it runs GreConD, and then without).

    Backwards, the combination's own kernels come before GreConD's, and the threshold
    search's kernels one at a time from its last (the hits, the pairs' histograms and bound,
    the pruned search, on ranks and counts of their kinds: zeros) before the search: a fit
    reaches them along a chain, where a process going backwards through the whole chain would
    follow it kernel by kernel."""
    import numpy as np

    from ..engine.booleanize import (
        GridRows,
        grid_points,
        hit_counts,
        pair_bound,
        pair_counts,
        rank_dtype,
        search_counts,
        small_search,
    )
    from ..engine.driver import greedy_record

    model, data, p, backend, planted = _problem(dtype, k, form, shape, density)
    n, m = data.X.shape
    k, P = p.k, p.n_thresholds
    unknown = data.unknown
    # Few observed cells: the search counts the error at every point, no coverage.
    counted = unknown is not None and unknown.observed
    rng = np.random.default_rng(1)
    state: dict = {}

    dense = data.X.toarray() != 0
    if unknown is not None:  # the cells whose error counts
        observed = unknown.cells.toarray() != 0
        observed = observed if unknown.observed else ~observed

    def boolean_run(name: str):
        W, H = rng.random((n, k)) < 0.3, rng.random((k, m)) < 0.3
        # Counted here in numpy (the plan's matrices are small): data.error's kernels are the
        # fit's first, which a step going backwards would otherwise wait for.
        wrong = ((W.astype(np.int64) @ H.astype(np.int64)) > 0) != dense
        if unknown is not None:
            wrong &= observed
        return greedy_record(W, H, int(wrong.sum()), name, {})

    def begin():
        return backend.begin(0, next(iter(backend.random_starts())), model._project_y)

    def iterations():
        state["start"] = start = begin()
        for _ in range(2):
            start.iterate(p.lams[: start.chunk(p.check_every, False)])

    def search():
        start = state.get("start") or begin()  # backwards: a start not iterated
        start.threshold()

    # The search's kernels one at a time, on ranks and counts of their kinds (zeros).
    u, vt = np.zeros((n, k), rank_dtype(P)), np.zeros((m, k), rank_dtype(P))

    def grid_hits():
        GridRows(data, u).hit_diffs(vt, P)

    def pair_histograms():
        if not counted:
            pair_counts(u, P)

    def pair_cover():
        if not counted:
            A = np.zeros((P, k, k), dtype=np.int64)
            pair_bound(A, A)

    def pruned_search():
        if counted:
            return
        zeros = np.zeros((P + 1, P + 1), dtype=np.int64)
        hits, cell_hits = hit_counts(zeros, None if unknown is None else zeros, P)
        points = grid_points(1.0, P)
        covered = np.zeros((P, P), dtype=np.int64)
        search_counts(
            GridRows(data, u),
            vt,
            P,
            data.X.nnz,
            "pruned",
            points,
            points,
            model.normalize,
            hits,
            cell_hits,
            covered,
            small_search(n, k, m),
        )

    def thresholds():
        # What the per-factor thresholds read of a start's record, for factors near the
        # planted ones and for random ones: their kernels follow the factors' patterns.
        W, H = planted
        for near in (0.7, 0.0):
            record = {
                "W_continuous": near * W + (1 - near) * rng.random((n, k)),
                "H_continuous": near * H + (1 - near) * rng.random((k, m)),
                "thresholds": (np.full(k, 0.5), np.full(k, 0.5)),
            }
            backend.refine_thresholds(SimpleNamespace(**record))

    def polish():
        if p.polish is not None:
            backend.polish(boolean_run("polish"), p.polish)

    def swaps():
        for _ in backend.swaps(boolean_run("swaps"), p.polish or "auto", k):
            pass

    def runs(grecond: bool) -> list:
        runs = [boolean_run("0"), boolean_run("1")]
        for i, run in enumerate(runs):
            run.start = i
        if not grecond:  # a run from GreConD: the combination does not run it
            runs[1].start = "grecond"
        return runs

    def greedy():
        backend.greedy("columns", k)

    def nmf():
        backend.nmf_init()

    def combination_and_grecond():
        backend.combine(runs(grecond=True), k)

    def combination():
        backend.combine(runs(grecond=False), k)

    return [
        greedy,
        polish,
        swaps,
        iterations,
        search,
        grid_hits,
        pair_histograms,
        pair_cover,
        pruned_search,
        thresholds,
        nmf,
        combination_and_grecond,
        combination,
    ]


#: The steps of :func:`plan` that compile the threshold search's kernels one at a time, after
#: its own step (``search``).
SEARCH_STEPS = ("grid_hits", "pair_histograms", "pair_cover", "pruned_search")


def warm(
    dtype="float64",
    k: int = 5,
    form: str = "all",
    shape: tuple[int, int] = (40, 30),
    density: float = 0.3,
    backwards: bool = False,
) -> None:
    """Compile (or load from the cache) the kernels of a default fit (:func:`plan`), in the
    fit's order or ``backwards``."""
    import warnings

    steps = plan(dtype, k, form, shape, density)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for step in reversed(steps) if backwards else steps:
            step()


def compile_once(folder: str) -> Callable[[], None]:
    """Let processes that share Numba's cache compile each cached kernel signature once.

    Two processes that reach a kernel's first call together both compile it: the cache is
    shared, but nothing says that the other one is compiling. From this call on, this process
    compiles a signature of a kernel that has a cache while holding a lock file of its own in
    ``folder``, taken inside Numba's in-process compiler lock (so that threads and processes
    take the locks in one order; a kernel's callees are locked after it, and calls never go
    round in a circle). A process that finds the lock taken waits, and then loads the other's
    entry from the cache. Kernels without a cache compile as before. Returns a call that
    undoes this; a no-op where Numba is not compiling (``NUMBA_DISABLE_JIT``) or without
    POSIX file locks."""
    from numba import config

    try:
        import fcntl
    except ImportError:  # not POSIX: each process compiles what it reaches
        return lambda: None
    if config.DISABLE_JIT:
        return lambda: None
    import hashlib

    from numba.core.caching import NullCache
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.dispatcher import Dispatcher

    os.makedirs(folder, exist_ok=True)
    compile_here = Dispatcher.compile

    def compile_locked(self, sig):
        if isinstance(self._cache, NullCache):
            return compile_here(self, sig)
        name = f"{self.py_func.__module__}.{self.py_func.__qualname__}:{sig}"
        path = os.path.join(folder, hashlib.sha1(name.encode()).hexdigest())
        with global_compiler_lock, open(path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            return compile_here(self, sig)

    def undo() -> None:
        with global_compiler_lock:
            if Dispatcher.compile is compile_locked:
                Dispatcher.compile = compile_here

    with global_compiler_lock:
        Dispatcher.compile = compile_locked
    return undo


def cache_looks_empty() -> bool:
    """Whether Numba's cache seems to hold none of banmf's kernels, as after a fresh install:
    no index of the kernel that the command line calls first (``popcount64``) where Numba
    keeps the kernels' cache (``NUMBA_CACHE_DIR``, else beside the source or in the user's
    cache), looked for without importing Numba. A guess: it only decides whether the second
    process starts before the data is read or at the first compilation."""
    import glob
    import hashlib

    from .. import _kernels

    source = os.path.dirname(os.path.abspath(_kernels.__file__))
    # Numba's name for a source folder inside a cache folder.
    inside = f"{os.path.basename(source)}_{hashlib.sha1(source.encode()).hexdigest()}"
    if os.environ.get("NUMBA_CACHE_DIR"):
        folders = [os.path.join(os.environ["NUMBA_CACHE_DIR"], inside)]
    else:
        user = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
        folders = [os.path.join(source, "__pycache__"), os.path.join(user, "numba", inside)]
    return not any(glob.glob(os.path.join(f, "boolean.popcount64-*.nbi")) for f in folders)


class Ahead:
    """The second process (:func:`spawn`): :meth:`begin` gives it its fit, :meth:`stop` ends
    it (also as a context) and undoes :func:`compile_once` in this process."""

    def __init__(self, process: subprocess.Popen | None = None, folder: str | None = None):
        self.process, self.folder = process, folder
        self._undo: Callable[[], None] | None = None

    def begin(self, dtype, k: int, form: str, shape: tuple[int, int], nnz: int) -> Ahead:
        """Start compiling the kernels of a default fit of ``dtype`` at rank ``k`` of data of
        ``shape`` with ``nnz`` ones and unknown cells of ``form``; or stop, past
        :data:`MAX_CELLS`, for another form, or once begun. Returns itself."""
        n, m = shape
        if self.process is None or self._undo is not None:
            return self
        if not 0 < n * m <= MAX_CELLS or form not in FORMS:
            self.stop()
            return self
        import numpy as np

        line = f"{np.dtype(dtype).name} {int(k)} {form} {n} {m} {nnz / (n * m)!r}\n"
        try:
            self.process.stdin.write(line.encode())
            self.process.stdin.close()
        except OSError:  # it has ended
            self.stop()
            return self
        self._undo = compile_once(self.folder)
        return self

    def stop(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.process.kill()
            if self.process.stdin is not None and not self.process.stdin.closed:
                try:
                    self.process.stdin.close()
                except OSError:
                    pass
        self.process = None
        if self._undo is not None:
            self._undo()
            self._undo = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def __enter__(self) -> Ahead:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def spawn() -> Ahead:
    """Start the second process, which loads banmf and then waits for its fit
    (:meth:`Ahead.begin`); a no-op :class:`Ahead` with one core or with ``BANMF_NO_AHEAD=1``.
    Started before the data is read, it is ready about when the fit starts compiling."""
    if os.environ.get("BANMF_NO_AHEAD") == "1" or (os.cpu_count() or 1) < 2:
        return Ahead()
    # The two processes' locks (compile_once): a folder of this run's own.
    folder = tempfile.mkdtemp(prefix="banmf-compile-")
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "banmf.runtime.warmup", folder],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Its own process group: a Ctrl-C at the terminal goes to the fit, which stops it.
            start_new_session=True,
        )
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)
        return Ahead()
    return Ahead(process, folder)


def ahead(dtype, k: int, form: str, shape: tuple[int, int], nnz: int) -> Ahead:
    """Start compiling the kernels of a default fit of data of ``shape`` with ``nnz`` ones
    backwards in a second process (module docstring): :func:`spawn` and
    :meth:`Ahead.begin`. Returns its :class:`Ahead`, to :meth:`~Ahead.stop` when the fit
    ends."""
    n, m = shape
    if not 0 < n * m <= MAX_CELLS or form not in FORMS:
        return Ahead()
    return spawn().begin(dtype, k, form, shape, nnz)


def main(argv: list[str]) -> int:
    """``python -m banmf.runtime.warmup FOLDER``, then ``DTYPE K FORM N M DENSITY`` on its
    standard input: :func:`warm` backwards, under :func:`compile_once`'s locks in FOLDER.
    Nothing on the standard input: nothing to do."""
    # Loaded while the fit's process reads its data.
    import numpy as np

    from ..engine import booleanize, driver, local  # noqa: F401

    words = sys.stdin.readline().split()
    if not words:
        return 0
    dtype, k, form = np.dtype(words[0]).type, int(words[1]), words[2]
    if form not in FORMS:
        raise SystemExit(f"form must be one of {FORMS}, got {form!r}")
    shape, density = (int(words[3]), int(words[4])), float(words[5])
    compile_once(argv[0])
    warm(dtype, k, form, shape, density, backwards=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
