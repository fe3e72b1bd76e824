"""Compiling a fit's kernels ahead in a second process (banmf.runtime.warmup)."""

import io
import os
import subprocess
import sys
import textwrap

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
    assert handle.process is None


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
    warm = [
        sys.executable,
        "-m",
        "banmf.runtime.warmup",
        "float64",
        "5",
        "all",
        "101",
        "15",
        "0.4356",
    ]
    subprocess.run(warm, check=True, env=env, timeout=600)
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
    assert int(out.split()[0]) <= 3, out
