"""Compiling a fit's kernels ahead in a second process (banmf.runtime.warmup)."""

import io
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from banmf.cli.render import Progress, compiled_kinds, kernel_kinds
from banmf.runtime import warmup as _warmup


@pytest.mark.parametrize("form", _warmup.FORMS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_every_step_runs_both_ways(dtype, form):
    for backwards in (False, True):
        _warmup.warm(dtype, 3, form, shape=(20, 12), density=0.3, backwards=backwards)


def test_a_rank_past_the_shape_is_cut():
    _warmup.warm(np.float64, 9, "all", shape=(5, 4), density=0.5)


def _dispatchers() -> list:
    """Every dispatcher of banmf's kernels (both variants of a :class:`Kernel`)."""
    import importlib
    import pkgutil

    from numba.core.dispatcher import Dispatcher

    from banmf import _kernels
    from banmf._kernels.variants import Kernel

    found = {}
    for info in pkgutil.iter_modules(_kernels.__path__):
        module = importlib.import_module(f"{_kernels.__name__}.{info.name}")
        for obj in vars(module).values():
            for d in (obj.serial, obj.parallel) if isinstance(obj, Kernel) else (obj,):
                if isinstance(d, Dispatcher):
                    found[id(d)] = d
    return list(found.values())


def kernel_calls(steps) -> set:
    """The kernels (qualified name, argument types) that ``steps`` call from Python, found
    without compiling: each kernel runs as its Python function, its callees too (not listed).
    The kernels' compiled signatures are set aside meanwhile, so that every call is seen."""
    from numba.core import types
    from numba.core.dispatcher import Dispatcher, OmittedArg

    found, depth = set(), 0

    def value(arg):
        return arg.value if isinstance(arg, OmittedArg) else arg

    def interpreted(self, *args, **kws):
        # Numba calls this where no compiled signature fits, and calls what it returns.
        if depth == 0:
            sig = tuple(
                types.Omitted(a.value) if isinstance(a, OmittedArg) else self.typeof_pyval(a)
                for a in args
            )
            found.add((self.py_func.__qualname__, sig))

        def run(*args):
            nonlocal depth
            depth += 1
            try:
                return self.py_func(*map(value, args))
            finally:
                depth -= 1

        return run

    kept = [(d, list(d.overloads.values())) for d in _dispatchers()]
    compile_for_args = Dispatcher._compile_for_args
    Dispatcher._compile_for_args = interpreted
    try:
        for d, _ in kept:
            d._reset_overloads()
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            for step in steps:
                step()
    finally:
        Dispatcher._compile_for_args = compile_for_args
        for d, compiled in kept:
            d._reset_overloads()
            for cres in compiled:
                d.add_overload(cres)
    return found


@pytest.mark.parametrize("form", _warmup.FORMS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(101, 15), (300, 200), (2, 3)])
def test_the_search_kernels_one_at_a_time_are_those_of_the_search(dtype, form, shape):
    """The plan's steps that compile the threshold search's kernels one at a time, on zeros,
    call each with the signature that the search itself calls it with, and together they
    call all of the search's kernels but the first (the ranks', of the search's own step)."""
    from banmf.engine.booleanize import threshold_factors

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny shapes: the unknown cells may hide every one
        steps = {step.__name__: step for step in _warmup.plan(dtype, 5, form, shape, 0.3)}
        model, data, p = _warmup._problem(dtype, 5, form, shape, 0.3)[:3]
    rng = np.random.default_rng(0)
    n, m = shape

    def search():
        W, H = rng.random((n, p.k)), rng.random((p.k, m))
        threshold_factors(data, W, H, p.n_thresholds, model.normalize, "pruned")

    real = kernel_calls([search])
    parts = kernel_calls([steps[name] for name in _warmup.SEARCH_STEPS])
    ranks = {call for call in real if call[0].startswith("scaled_ranks")}
    assert parts == real - ranks and ranks


def test_ahead_starts_nothing_where_it_would_not_pay(monkeypatch):
    monkeypatch.delenv("BANMF_NO_AHEAD")
    assert _warmup.ahead(np.float64, 5, "all", (2000, 1000), 10**5).process is None
    assert _warmup.ahead(np.float64, 5, "all", (0, 10), 0).process is None
    assert _warmup.ahead(np.float64, 5, "unknown", (10, 10), 5).process is None
    monkeypatch.setenv("BANMF_NO_AHEAD", "1")
    assert _warmup.ahead(np.float64, 5, "all", (10, 10), 5).process is None


def test_ahead_runs_and_stops(tmp_path, monkeypatch):
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one core: ahead() starts nothing")
    monkeypatch.delenv("BANMF_NO_AHEAD")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))  # the child's cache, not the suite's
    with _warmup.ahead(np.float64, 3, "all", (20, 12), 80) as handle:
        assert handle.process.poll() is None
        folder = handle.folder
        assert os.path.isdir(folder)
    assert handle.process is None and not os.path.exists(folder)


def test_a_process_spawned_early_waits_for_its_fit_or_stops(tmp_path, monkeypatch):
    """Started before the data is read, the second process waits; too large a fit stops it,
    and so does an end of its input with no fit."""
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one core: spawn() starts nothing")
    monkeypatch.delenv("BANMF_NO_AHEAD")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    with _warmup.spawn() as handle:
        assert handle.process.poll() is None
        handle.begin(np.float64, 5, "all", (2000, 1000), 10**5)  # past MAX_CELLS
        assert handle.process is None and handle.folder is None
    handle = _warmup.spawn()
    process = handle.process
    process.stdin.close()  # no fit
    assert process.wait(timeout=60) == 0
    handle.stop()


def test_the_command_line_starts_it_before_the_parser_on_a_first_run(monkeypatch, tmp_path):
    """`banmf factorize` on an empty cache starts the second process from its words, gives it
    the fit once the data is read, and stops it at the end; another command, a cluster's fit
    or a warm cache start none, and a fit it does not serve stops it."""
    from banmf.cli import fit as cli_fit
    from banmf.cli import main

    events = []

    class Handle(_warmup.Ahead):
        def __init__(self):
            super().__init__()
            self.process = self  # "running"

        def begin(self, dtype, k, form, shape, nnz):
            events.append(("begin", np.dtype(dtype).name, k, form, shape, nnz))
            return self

        def stop(self):
            events.append(("stop",))
            self.process = None

    monkeypatch.setattr(_warmup, "spawn", lambda: events.append(("spawn",)) or Handle())
    empty = [True]
    monkeypatch.setattr(_warmup, "cache_looks_empty", lambda: empty[0])
    zoo = "data/zoo_101x15.mtx"
    assert cli_fit.ahead_for(["info", zoo]).process is None
    assert cli_fit.ahead_for(["factorize", zoo, "--scheduler", "tcp://x:1"]).process is None
    assert events == []
    out = io.StringIO()
    assert main(["factorize", zoo, "-k", "3", "-q"], stdout=out, stderr=io.StringIO()) == 0
    assert events[0] == ("spawn",)
    assert events[1] == ("begin", "float64", 3, "all", (101, 15), 660)
    assert events[-1] == ("stop",)
    events.clear()
    args = ["factorize", zoo, "-k", "3", "-q", "--method", "grecond"]
    assert main(args, stdout=out, stderr=io.StringIO()) == 0
    assert events[0] == ("spawn",) and ("stop",) in events
    assert not [e for e in events if e[0] == "begin"]
    events.clear()
    empty[0] = False
    assert main(["factorize", zoo, "-k", "3", "-q"], stdout=out, stderr=io.StringIO()) == 0
    assert events == []


def test_an_empty_cache_looks_empty(tmp_path, monkeypatch):
    """The guess reads Numba's index of the first kernel where Numba keeps it."""
    import hashlib

    from banmf import _kernels

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert _warmup.cache_looks_empty()
    source = os.path.dirname(os.path.abspath(_kernels.__file__))
    inside = f"{os.path.basename(source)}_{hashlib.sha1(source.encode()).hexdigest()}"
    (tmp_path / inside).mkdir()
    (tmp_path / inside / "boolean.popcount64-11.py311.nbi").write_bytes(b"")
    assert not _warmup.cache_looks_empty()


@pytest.mark.slow
def test_processes_under_compile_once_compile_a_kernel_once(tmp_path):
    """Two processes that share Numba's cache and compile_once's folder, reaching the same
    new kernel together: one compiles it, the other waits and loads it from the cache."""
    module = tmp_path / "kernel_once.py"
    module.write_text(
        textwrap.dedent(
            """
            from numba import njit

            @njit(cache=True)
            def total(a):
                s = 0.0
                for x in a:
                    s += x * x
                return s
            """
        )
    )
    script = textwrap.dedent(
        f"""
        import sys, time
        import numpy as np
        from numba.core import event
        from banmf.runtime.warmup import compile_once
        compiled = []
        class Count(event.Listener):
            def on_start(self, ev):
                compiled.append(ev.data["dispatcher"].py_func.__name__)
            def on_end(self, ev):
                pass
        event.register("numba:compile", Count())
        compile_once({str(tmp_path / "locks")!r})
        sys.path.insert(0, {str(tmp_path)!r})
        import kernel_once
        while time.time() < float(sys.argv[1]):  # start together
            time.sleep(0.001)
        assert kernel_once.total(np.arange(4.0)) == 14.0
        print(len(compiled))
        """
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    import time

    at = str(time.time() + 5)
    runs = [
        subprocess.Popen([sys.executable, "-c", script, at], env=env, stdout=subprocess.PIPE)
        for _ in range(2)
    ]
    counts = sorted(int(run.communicate(timeout=120)[0]) for run in runs)
    assert [run.returncode for run in runs] == [0, 0]
    assert counts == [0, 1]


class Event:
    def __init__(self, data):
        self.data = data


def test_progress_starts_the_second_process_on_the_first_compilation():
    started = []

    class Handle:
        stopped = False

        def stop(self):
            Handle.stopped = True

    def ahead():
        started.append(1)
        return Handle()

    from banmf._kernels.polish import cut_sums

    with Progress(io.StringIO(), "fitting", enabled=False, ahead=ahead) as progress:
        for _ in range(2):
            progress.on_start(Event({"dispatcher": cut_sums.parallel, "args": ()}))
            progress.on_end(Event({}))
    assert started == [1] and Handle.stopped
    assert progress.compiled == {"parallel"}


def test_kernel_kinds_in_words():
    from numba import types

    from banmf._kernels.polish import cut_sums

    args = (types.Array(types.float32, 2, "C"), types.int64)
    kinds = kernel_kinds({"dispatcher": cut_sums.serial, "args": args})
    assert kinds == {"serial", "float32"}
    assert compiled_kinds(kinds | {"float64"}) == "serial float32 float64 kernels"


@pytest.mark.slow
def test_after_the_plan_a_fit_of_that_kind_compiles_almost_nothing(tmp_path):
    """The plan reaches the kernels a default fit calls: on an empty cache, after the plan
    ran backwards in one process, a fit of Zoo's shape in another compiles at most a few
    kernels (those whose branch follows the data's values, not its shape)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "BANMF_NO_AHEAD": "1"}
    warm = [sys.executable, "-m", "banmf.runtime.warmup", str(tmp_path / "locks")]
    fit = "float64 5 all 101 15 0.4356\n"
    subprocess.run(warm, input=fit, text=True, check=True, env=env, timeout=600)
    count = textwrap.dedent(
        """
        import threading
        from numba.core import event
        import banmf
        names = []
        depth = threading.local()
        class Count(event.Listener):
            def on_start(self, ev):
                depth.n = getattr(depth, "n", 0) + 1
                if depth.n == 1 and ev.data["dispatcher"].py_func.__module__.startswith("banmf"):
                    names.append(ev.data["dispatcher"].py_func.__qualname__)
            def on_end(self, ev):
                depth.n -= 1
        event.register("numba:compile", Count())
        banmf.BANMF(5, random_state=0).fit(banmf.datasets.load_zoo().X)
        print(len(names), names)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", count], check=True, env=env, capture_output=True, text=True
    ).stdout
    assert int(out.split()[0]) <= 1, out
