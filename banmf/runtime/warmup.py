"""Compiling a fit's kernels ahead, in a second process.

A default BANMF fit calls some forty Numba kernels. Numba compiles each on its first call
and keeps the machine code in its on-disk cache, so only the first run of a kind of fit pays
(its dtype, its unknown cells, its serial or parallel kernels). Compilation holds a
process-wide lock: one process compiles on one core. So when a fit starts compiling,
:func:`ahead` starts a second process that calls the same kernels, through the same steps
of the one-machine backend on a small matrix, in the opposite order of the fit's: the
combination of the starts first, the iterations last. Each kernel it compiles goes to the
cache, where the fit, reaching it later, loads it instead of compiling it. The two meet in
the middle, and the first run waits for about half of the compilation.

The second process only writes the cache (Numba writes its files atomically: a reader sees a
whole entry or none), so it changes no result; it is stopped when the fit ends. The test
suite uses :func:`warm` the same way: one worker compiles forwards, the other backwards.
``BANMF_NO_AHEAD=1`` turns :func:`ahead` off.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from types import SimpleNamespace

import numpy as np

#: The unknown cells a plan's small matrix has: none, ``missing=`` or ``observed=``.
FORMS = ("all", "missing", "observed")


#: The most cells a plan's matrix has: :func:`ahead` starts no second process for a larger
#: fit, whose kernels (parallel ones, other branches) a small matrix would not compile, and
#: whose own time dwarfs the compilation.
MAX_CELLS = 10**6


def _problem(dtype, k: int, form: str, shape: tuple[int, int], density: float):
    """A BANMF fit's backend on a random matrix of ``shape`` and about ``density``: the
    estimator, its data, its run settings. The steps take the branches (and serial or
    parallel kernels) that their sizes choose, so the shape is the fit's own."""
    import scipy.sparse as sp

    from ..datasets import make_boolean
    from ..engine.local import LocalBackend
    from ..models.banmf import BANMF

    n, m = shape
    k = min(k, n, m)
    density = min(max(density, 1.0 / (n * m)), 1.0)
    X, _, _ = make_boolean(n, m, k, density=density, noise=0.05, random_state=0)
    rng = np.random.default_rng(0)
    masks = {}
    if form == "missing":
        masks["missing"] = sp.csr_array(rng.random((n, m)) < 0.1)
    elif form == "observed":
        masks["observed"] = sp.csr_array(rng.random((n, m)) < 0.6)
    model = BANMF(k, dtype=dtype, random_state=0, n_jobs=1)
    data = model._begin(X, **masks)[0]
    p = model._check_params(k, data.X.shape, data.X.nnz)
    return model, data, p, LocalBackend(model, data, p, np.random.default_rng(0))


def plan(
    dtype=np.float64,
    k: int = 5,
    form: str = "all",
    shape: tuple[int, int] = (40, 30),
    density: float = 0.3,
) -> list[Callable[[], object]]:
    """The steps of a default fit of ``dtype`` at rank ``k`` with unknown cells of ``form``
    on data of ``shape`` and ``density``, each a call that runs one step on a random matrix
    like it, in the order a fit first runs them (:meth:`banmf.engine.Driver.fit`): the
    greedy start, the polish and the swaps (which refine it), the iterations of a random
    start and their threshold search, the per-factor thresholds, the NMF start, the
    combination."""
    from ..engine.driver import greedy_record

    model, data, p, backend = _problem(dtype, k, form, shape, density)
    n, m = data.X.shape
    k = p.k
    rng = np.random.default_rng(1)
    state: dict = {}

    def boolean_run(name: str):
        W, H = rng.random((n, k)) < 0.3, rng.random((k, m)) < 0.3
        return greedy_record(W, H, data.error(W, H), name, {})

    def iterations():
        start = backend.begin(0, next(iter(backend.random_starts())), model._project_y)
        for _ in range(2):
            start.iterate(p.lams[: start.chunk(p.check_every, False)])
        state["run"] = start.threshold()

    def thresholds():
        found = state.get("run")
        if found is None:  # backwards: the iterations have not run yet
            found = {
                "W_continuous": rng.random((n, k)),
                "H_continuous": rng.random((k, m)),
                "thresholds": (np.full(k, 0.5), np.full(k, 0.5)),
            }
        # What the per-factor thresholds read of a start's record.
        backend.refine_thresholds(SimpleNamespace(**found))

    def polish():
        if p.polish is not None:
            backend.polish(boolean_run("polish"), p.polish)

    def swaps():
        for _ in backend.swaps(boolean_run("swaps"), p.polish or "auto", k):
            pass

    def combination():
        runs = [boolean_run("0"), boolean_run("1")]
        for i, run in enumerate(runs):
            run.start = i
        backend.combine(runs, k)

    return [
        lambda: backend.greedy("columns", k),
        polish,
        swaps,
        iterations,
        thresholds,
        backend.nmf_init,
        combination,
    ]


def warm(
    dtype=np.float64,
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


class Ahead:
    """The second process of :func:`ahead`; :meth:`stop` ends it (also as a context)."""

    def __init__(self, process: subprocess.Popen | None):
        self.process = process

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process = None

    def __enter__(self) -> Ahead:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def ahead(dtype, k: int, form: str, shape: tuple[int, int], nnz: int) -> Ahead:
    """Start compiling the kernels of a default fit of data of ``shape`` with ``nnz`` ones
    backwards in a second process (module docstring); a no-op with one core, past
    :data:`MAX_CELLS`, or with ``BANMF_NO_AHEAD=1``. Returns its :class:`Ahead`, to
    :meth:`~Ahead.stop` when the fit ends."""
    n, m = shape
    if (
        os.environ.get("BANMF_NO_AHEAD") == "1"
        or (os.cpu_count() or 1) < 2
        or not 0 < n * m <= MAX_CELLS
        or form not in FORMS
    ):
        return Ahead(None)
    name = np.dtype(dtype).name
    density = repr(nnz / (n * m))
    command = [
        sys.executable,
        "-m",
        "banmf.runtime.warmup",
        name,
        str(int(k)),
        form,
        str(n),
        str(m),
    ]
    command.append(density)
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Its own process group: a Ctrl-C at the terminal goes to the fit, which stops it.
            start_new_session=True,
        )
    except OSError:
        return Ahead(None)
    return Ahead(process)


def main(argv: list[str]) -> int:
    """``python -m banmf.runtime.warmup DTYPE K FORM N M DENSITY``: :func:`warm` backwards."""
    dtype, k, form = np.dtype(argv[0]).type, int(argv[1]), argv[2]
    if form not in FORMS:
        raise SystemExit(f"form must be one of {FORMS}, got {form!r}")
    shape, density = (int(argv[3]), int(argv[4])), float(argv[5])
    warm(dtype, k, form, shape, density, backwards=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
