"""The default pipeline at scale: where a user's wait goes, phase by phase.

    python benchmarks/bench_scale.py [--quick] [--sizes 1e6 1e7 [1e8]] [--ks 10 32]
                                     [--threads 2 1] [--busy] [--dask WORKERS [--blocks 8]]
                                     [--out records.jsonl]

``banmf.BANMF(k, random_state=0, n_jobs=threads)`` with every other parameter at its default
(restarts, extra starts, per-factor thresholds, polish, swaps, the combination of the starts) on
power-law matrices (``make_sparse_degrees(rows="powerlaw", cols="powerlaw")``, exponent 2.5):
10⁶ nonzeros on 100,000×10,000, 10⁷ on 1,000,000×100,000 and, when asked for (``--sizes 1e8``:
hours on 2 cores and about 14 GB resident at k = 10), 10⁸ on 10,000,000×1,000,000. Each fit
runs in a fresh process after a small fit that compiles the kernels (not timed); ``--busy``
runs each fit beside a second process that keeps one core busy; ``--progress`` prints each
phase as it begins.

The phases come from the fit itself (``BANMF.timings_``), summed over the starts:
``iterations`` (random starts; the first one's alone beside it), ``thresholds`` (the grid search
and the per-factor thresholds), ``polish`` and ``swaps`` (of the random starts), each extra start
whole (``columns``, ``grecond``, ``nmf``: greedy factors or NNDSVD and iterations, then its
own thresholds, polish and swaps), ``combined`` (the choice among the starts' factors and its
polish and swaps), and ``final``: the rest of ``fit_seconds_`` (checking the data, the kept
start's rows, the final error). Starts that run side by side each count their own wall time,
so the phases may add up to more than the fit. Peak memory: the highest resident size during
each phase, above the resident size before the fit (the data and the compiled kernels), sampled
every 10 ms and placed in phases by the fit's progress records; beside it, the fit's own
estimate of its peak (``BANMF._fit_bytes``, which the fit checks against the memory available
before it begins: it should be above the measured peak, and not by much).

The second table divides each phase by the random starts' iterations (the cost that grows as
nnz·k per iteration), and the whole fit's time per nonzero·k by that of the smallest size at the
same k and threads: > 1 means it grew faster than nnz·k. The third divides each later phase of
an extra start that iterates (the NMF start) by that start's own iterations. The fourth gives the
coverages each start's grid threshold search computed (``n_evaluated``: the points its lower
bound did not rule out), counted by wrapping :func:`banmf.engine.booleanize.search_grid`.

``--dask WORKERS``: the same pipeline on a Dask cluster instead,
``banmf.distributed.BANMF(k, random_state=0, n_blocks=--blocks)`` (its defaults are one
machine's but the polish, single-bit flips there) on a
``LocalCluster(n_workers=WORKERS, threads_per_worker=threads, processes=True)`` started in the
fit's process (the small fit first compiles the workers' kernels too). Peak memory is then the
driver's alone. A fifth table gives each start's polish: seconds, rounds and round trips (the
calls that the driver waited for, as ``traffic_["round_trips"]`` counts them), by wrapping
``DaskBackend.polish``. To compare two source trees, run the script with ``PYTHONPATH`` set to
each in turn (the fit's process and the workers import banmf from there; each record names the
banmf it ran).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import multiprocessing as mp
import os
import sys
import threading
import time

import numpy as np
from _records import RESULTS, append_record, local_client, row_record, run_tasks, superscript_power

#: The row blocks of a ``--dask`` fit by default (as ``bench_distributed.py``'s).
DASK_BLOCKS = 8

#: Size label: (n, m, nnz).
SIZES = {
    "2e4": (4_000, 1_000, 20_000),
    "1e6": (100_000, 10_000, 1_000_000),
    "1e7": (1_000_000, 100_000, 10_000_000),
    "1e8": (10_000_000, 1_000_000, 100_000_000),
}

#: Table columns: the phases, in the order a fit runs them.
PHASES = ("iterations", "thresholds", "polish", "swaps", "columns", "grecond", "nmf", "combined")
#: An extra start's own phases after its iterations (``BANMF.timings_``), in the order they run.
START_PHASES = ("threshold search", "per-factor thresholds", "polish", "swaps")


def _rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class _Sampler:
    """Resident size every ``every`` seconds in a thread, and the fit's progress records, both
    stamped with ``time.monotonic()`` (the clock of the log records' own stamps is the wall
    clock: these are taken here instead)."""

    def __init__(self, every: float = 0.01, echo: bool = False):
        self.every, self.samples, self.events = every, [], []
        self.echo, self._echoed = echo, -60.0
        self.last = {}  # each thread's last progress record (a start runs on one thread)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), _rss_mb()))
            self._stop.wait(self.every)

    def emit(self, record):  # a logging handler's
        data = getattr(record, "banmf", None)
        if data is not None:
            now = time.monotonic()
            self.events.append((now, data))
            self.last[threading.get_ident()] = data
            # A fit of hours is read as it goes (and what a cut-off one reached is kept): its
            # phases as they begin and its iterations once a minute, with the resident size.
            if self.echo and (data["event"] != "iteration" or now - self._echoed >= 60):
                self._echoed = now
                print(
                    f"[{now - self.begin:9.1f} s, {_rss_mb():6.0f} MB] {record.getMessage()}",
                    file=sys.stderr,
                    flush=True,
                )

    def __enter__(self):
        handler = logging.Handler(logging.DEBUG)
        handler.emit = self.emit
        self._handler, logger = handler, logging.getLogger("banmf.progress")
        self._level = logger.level
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)  # the iteration records mark when a start begins
        self.begin = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self.end = time.monotonic()
        self._stop.set()
        self._thread.join()
        logger = logging.getLogger("banmf.progress")
        logger.removeHandler(self._handler)
        logger.setLevel(self._level)

    def peaks(self, baseline: float) -> dict:
        """Peak resident MB above ``baseline`` in each phase (the columns of :data:`PHASES`
        and ``final``), from the windows between one start's progress records."""
        windows: list[tuple[str, float, float]] = []
        by_start: dict = {}
        for stamp, data in self.events:
            by_start.setdefault((data["start"], data.get("name")), []).append((stamp, data))
        ends = []
        for (_, name), records in by_start.items():
            last, phase = None, "iterations"
            for stamp, data in records:
                event = data["event"]
                if last is None:
                    last = stamp
                if event in ("phase", "done"):
                    windows.append((_column(name, phase), last, stamp))
                    last = stamp
                    phase = data.get("phase", phase)
            ends.append(records[-1][0])
        windows.append(("final", max(ends, default=self.begin), self.end))
        stamps = np.array([s for s, _ in self.samples])
        rss = np.array([r for _, r in self.samples])
        out: dict[str, float] = {}
        for column, lo, hi in windows:
            # The sample just before the window too: a short phase may fall between samples.
            i, j = max(0, np.searchsorted(stamps, lo) - 1), np.searchsorted(stamps, hi, "right")
            if j > i:
                out[column] = max(out.get(column, 0.0), float(rss[i:j].max()) - baseline)
        return out


def _column(name: str | None, phase: str) -> str:
    """The table column of a phase of a start (``name``: None for a random start)."""
    if name is not None:
        return name  # an extra start or the combination: whole
    if phase in ("threshold search", "per-factor thresholds"):
        return "thresholds"
    return phase


def phase_seconds(timings: dict) -> dict:
    """Seconds per column of :data:`PHASES` from a fit's ``timings_``, plus ``first
    iterations`` (the first random start's) and ``starts wall`` (all the starts)."""
    out = dict.fromkeys(PHASES, 0.0)
    for start, phases in timings.items():
        if start == "fit":
            continue
        for phase, seconds in phases.items():
            column = _column(start if isinstance(start, str) else None, phase)
            out[column] += seconds
    out["first iterations"] = timings.get(0, {}).get("iterations", 0.0)
    out["starts wall"] = timings["fit"]["starts"]
    return out


@contextlib.contextmanager
def _counting_coverages(sampler: _Sampler):
    """The coverages each grid threshold search computes (its ``n_evaluated``, which the fit
    does not record), as ``{start: [counts]}``: an extra start by name, the random starts under
    ``"random"``, told apart by the last progress record of the thread that runs the search."""
    import banmf.engine.booleanize as booleanize

    counts: dict[str, list[int]] = {}
    search_grid = booleanize.search_grid

    def counted(*args, **kwargs):
        out = search_grid(*args, **kwargs)
        data = sampler.last.get(threading.get_ident(), {})
        counts.setdefault(data.get("name") or "random", []).append(int(out[3]))
        return out

    # The Dask backend holds its own reference to the function.
    users = [booleanize, sys.modules.get("banmf.engine.dask.backend")]
    users = [module for module in users if module is not None]
    for module in users:
        module.search_grid = counted
    try:
        yield counts
    finally:
        for module in users:
            module.search_grid = search_grid


@contextlib.contextmanager
def _timing_dask_polish():
    """Each polish of a start on Dask (``DaskBackend.polish``): ``{start, seconds, rounds,
    round_trips}`` in a list."""
    from banmf.engine.dask.backend import DaskBackend

    plain, polishes = DaskBackend.polish, []

    def timed(self, run, method):
        calls, began = self.session.calls, time.perf_counter()
        out = plain(self, run, method)
        polishes.append(
            {
                "start": str(run["start"]),
                "seconds": time.perf_counter() - began,
                "rounds": out["polish_rounds"],
                "round_trips": self.session.calls - calls,
            }
        )
        return out

    DaskBackend.polish = timed
    try:
        yield polishes
    finally:
        DaskBackend.polish = plain


def _busy(stop):
    while not stop.is_set():
        sum(range(10_000))


@contextlib.contextmanager
def _estimator(task: dict):
    """A function making the task's estimator for k: ``banmf.BANMF``, or with ``task["dask"]``
    ``banmf.distributed.BANMF`` on a local cluster that lives as long as the block."""
    import banmf

    if not task.get("dask"):
        yield lambda k: banmf.BANMF(k, random_state=0, n_jobs=task["threads"])
        return
    import banmf.distributed as bd

    with local_client(task["dask"], task["threads"]) as client:
        yield lambda k: bd.BANMF(k, random_state=0, n_blocks=task["blocks"], client=client)


def _estimate_mb(model, X, task: dict) -> float | None:
    """The fit's own estimate of its peak memory (what it checks against the memory available
    before it begins), in MiB; None for a Dask fit, which checks each block's instead."""
    if task.get("dask"):
        return None
    from banmf.data.dataset import Dataset
    from banmf.runtime.threads import thread_budget

    with thread_budget(task["threads"]):
        return model._fit_bytes(Dataset.of(X), task["k"]) / 2**20


def run_fit(task: dict) -> dict:
    """One default fit in this (fresh) process: its phases, their peak memory, the error."""
    import banmf
    from banmf.datasets import make_sparse_degrees

    n, m, nnz = SIZES[task["size"]]
    with _estimator(task) as make:
        # Compile every kernel the fit needs outside the timing: the same pipeline, small.
        warm = make_sparse_degrees(
            2000, 500, 20_000, rows="powerlaw", cols="powerlaw", random_state=1
        )
        make(task["k"]).fit(warm)
        X = make_sparse_degrees(n, m, nnz, rows="powerlaw", cols="powerlaw", random_state=0)
        estimate = _estimate_mb(make(task["k"]), X, task)
        baseline = _rss_mb()
        load = os.getloadavg()[0]
        polishing = _timing_dask_polish() if task.get("dask") else contextlib.nullcontext([])
        with (
            _Sampler(echo=task.get("progress", False)) as sampler,
            _counting_coverages(sampler) as coverages,
        ):
            with polishing as polishes:
                model = make(task["k"]).fit(X)
    seconds = phase_seconds(model.timings_)
    seconds["final"] = model.fit_seconds_ - seconds["starts wall"]
    random_starts = [s for s in model.timings_ if isinstance(s, int)]
    return {
        **task,
        "n": n,
        "m": m,
        "nnz": int(X.nnz),
        "fit": model.fit_seconds_,
        "seconds": seconds,
        "peak_mb": sampler.peaks(baseline),
        "baseline_mb": baseline,
        "estimate_mb": estimate,
        "random_starts": len(random_starts),
        "n_iter": model.n_iter_,
        "extra": sorted(s for s in model.timings_ if isinstance(s, str) and s != "fit"),
        "best_start": str(model.best_start_),
        "relative_error": model.relative_error_,
        "loadavg": round(load, 2),
        "coverages": coverages,
        "timings": {str(key): value for key, value in model.timings_.items()},
        "polishes": polishes,
        "round_trips": getattr(model, "traffic_", {}).get("round_trips"),
        "banmf": os.path.dirname(banmf.__file__),
    }


def _send_fit(task: dict, conn) -> None:
    """(In the child.) :func:`run_fit`'s record, or the error it raised, sent on ``conn``."""
    try:
        conn.send(("ok", run_fit(task)))
    except BaseException as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        raise


def _in_child(task: dict) -> dict:
    """:func:`run_fit` in a fresh process (its own peak memory), beside a process that keeps a
    core busy when ``task["busy"]``. Not a pool's worker: a Dask cluster's workers are the
    child's children, which a pool's (daemonic) workers may not have."""
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    busy = ctx.Process(target=_busy, args=(stop,), daemon=True) if task["busy"] else None
    if busy is not None:
        busy.start()
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_send_fit, args=(task, send))
    try:
        child.start()
        send.close()
        try:
            status, value = receive.recv()
        except EOFError:
            raise RuntimeError(f"the fit's process ended without a record: {task}") from None
        if status != "ok":
            raise RuntimeError(f"the fit failed: {value}")
        return value
    finally:
        child.join()
        if busy is not None:
            stop.set()
            busy.join()


def _fmt(seconds: float) -> str:
    return "—" if seconds == 0 else f"{seconds:.3g}"


def _where(rec: dict) -> str:
    """Where the fit ran: its threads (per worker, on Dask), a busy neighbour."""
    dask = f"dask {rec['dask']}×" if rec.get("dask") else ""
    return f"{dask}{rec['threads']}{' + busy' if rec['busy'] else ''}"


def print_tables(records: list[dict]) -> None:
    print(
        "| nnz | k | threads | fit s | random starts | iterations s (first) | thresholds s "
        "| polish s | swaps s | columns s | grecond s | nmf s | combined s | final s "
        "| peak MB over data (phase) | the fit's estimate MB | error |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for rec in records:
        s, peak = rec["seconds"], rec["peak_mb"]
        top = max(peak, key=peak.get) if peak else "—"
        cells = [
            f"{rec['nnz']:.0e}".replace("+0", ""),
            rec["k"],
            _where(rec),
            f"{rec['fit']:.3g}",
            rec["random_starts"],
            f"{s['iterations']:.3g} ({s['first iterations']:.3g})",
            *(_fmt(s[c]) for c in PHASES[1:]),
            _fmt(s["final"]),
            f"{peak.get(top, 0):.0f} ({top})",
            "—" if rec.get("estimate_mb") is None else f"{rec['estimate_mb']:.0f}",
            f"{rec['relative_error']:.4f}",
        ]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    print(
        "\nEach phase over the random starts' iterations, and the fit's time per nonzero·k over "
        "the smallest size's at the same k and threads (> 1: grew faster than nnz·k)\n"
    )
    print("| nnz | k | threads | " + " | ".join(PHASES[1:]) + " | final | growth over nnz·k |")
    print("|---|---|---|" + "---|" * (len(PHASES) + 1))
    smallest: dict = {}
    for rec in sorted(records, key=lambda r: r["nnz"]):
        key = (rec["k"], _where(rec))
        unit = rec["fit"] / (rec["nnz"] * rec["k"])
        smallest.setdefault(key, unit)
    for rec in records:
        s = rec["seconds"]
        it = max(s["iterations"], 1e-12)
        key = (rec["k"], _where(rec))
        growth = rec["fit"] / (rec["nnz"] * rec["k"]) / smallest[key]
        cells = [
            f"{rec['nnz']:.0e}".replace("+0", ""),
            rec["k"],
            _where(rec),
            *(f"{s[c] / it:.2f}" if s[c] else "—" for c in PHASES[1:]),
            f"{s['final'] / it:.2f}",
            f"{growth:.2f}",
        ]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    print("\nEach extra start's own phases: seconds, and over that start's own iterations\n")
    print("| nnz | k | threads | start | iterations s | " + " | ".join(START_PHASES) + " |")
    print("|---|---|---|---|---|" + "---|" * len(START_PHASES))
    for rec in records:
        for start, phases in rec["timings"].items():
            own = phases.get("iterations", 0.0)
            # Random starts are in the tables above; greedy starts, the combination and the
            # fit's own record do not iterate.
            if start.isdigit() or not own:
                continue
            cells = [
                f"{rec['nnz']:.0e}".replace("+0", ""),
                rec["k"],
                _where(rec),
                start,
                f"{own:.3g}",
                *(
                    f"{phases[p]:.3g} ({phases[p] / own:.2f}×)" if phases.get(p) else "—"
                    for p in START_PHASES
                ),
            ]
            print("| " + " | ".join(str(c) for c in cells) + " |")
    print("\nCoverages each start's grid threshold search computed\n")
    print("| nnz | k | threads | start: coverages |")
    print("|---|---|---|---|")
    for rec in records:
        cells = [
            f"{rec['nnz']:.0e}".replace("+0", ""),
            rec["k"],
            _where(rec),
            ", ".join(f"{start}: {counts}" for start, counts in rec.get("coverages", {}).items()),
        ]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    on_dask = [rec for rec in records if rec.get("dask")]
    if not on_dask:
        return
    print("\nEach start's polish on Dask: seconds, rounds, round trips; the fit's round trips\n")
    print("| nnz | k | threads | polish s | start: s (rounds, round trips) | fit round trips |")
    print("|---|---|---|---|---|---|")
    for rec in on_dask:
        polishes = rec["polishes"]
        cells = [
            f"{rec['nnz']:.0e}".replace("+0", ""),
            rec["k"],
            _where(rec),
            f"{sum(q['seconds'] for q in polishes):.3g}",
            ", ".join(
                f"{q['start']}: {q['seconds']:.3g} ({q['rounds']}, {q['round_trips']})"
                for q in polishes
            ),
            rec["round_trips"],
        ]
        print("| " + " | ".join(str(c) for c in cells) + " |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", nargs="+", choices=list(SIZES), default=["1e6", "1e7"], help="nonzeros"
    )
    parser.add_argument("--ks", nargs="+", type=int, default=[10, 32])
    parser.add_argument("--threads", nargs="+", type=int, default=[2, 1])
    parser.add_argument("--busy", action="store_true", help="each fit beside a busy process")
    parser.add_argument(
        "--dask",
        type=int,
        metavar="WORKERS",
        help="fit banmf.distributed.BANMF on a local cluster of this many workers, each of "
        "--threads threads",
    )
    parser.add_argument(
        "--blocks", type=int, default=DASK_BLOCKS, help="row blocks of a --dask fit"
    )
    parser.add_argument(
        "--quick", action="store_true", help="a 4000×1000 matrix of 2·10⁴ nonzeros, k = 4"
    )
    parser.add_argument("--out", help="append each record to this JSON-lines file")
    parser.add_argument(
        "--record",
        action="store_true",
        help="append each fit's row of the docs' table (docs/PERFORMANCE.md, the default "
        "pipeline at scale) to benchmarks/results/scale.jsonl",
    )
    parser.add_argument(
        "--progress", action="store_true", help="print each fit's phases as they begin (stderr)"
    )
    args = parser.parse_args(argv)
    sizes, ks = (["2e4"], [4]) if args.quick else (args.sizes, args.ks)
    tasks = [
        {
            "size": size,
            "k": k,
            "threads": threads,
            "busy": args.busy,
            "dask": args.dask,
            "blocks": args.blocks,
            "progress": args.progress,
        }
        for size in sizes
        for k in ks
        for threads in args.threads
    ]
    print(
        f"The default pipeline on power-law matrices: {', '.join(sizes)} nonzeros, k = "
        f"{', '.join(map(str, ks))}, threads {', '.join(map(str, args.threads))}"
        f"{', beside a busy process' if args.busy else ''}"
        f"{f', on Dask: {args.dask} workers, {args.blocks} row blocks' if args.dask else ''}\n",
        flush=True,
    )
    records = run_tasks(_in_child, tasks, 1, args.out)
    print_tables(records)
    if args.record:
        command = "python benchmarks/bench_scale.py " + " ".join(argv or sys.argv[1:])
        for rec in records:
            if not rec.get("dask"):
                append_record(RESULTS / "scale.jsonl", docs_row(rec, command))
    return 0


def docs_row(rec: dict, command: str) -> dict:
    """The record of one fit as a row of docs/PERFORMANCE.md's table ``scale``: seconds per
    phase, in brackets as a share of the random starts' iterations."""
    s, size = rec["seconds"], superscript_power(int(float(rec["size"])))
    threads = f"{rec['threads']}{', busy' if rec['busy'] else ''}"

    def share(phase: str) -> str:
        return "—" if s[phase] == 0 else f"{s[phase]:.3g} ({s[phase] / s['iterations']:.2f}×)"

    figures = {
        "nnz": size,
        "k": str(rec["k"]),
        "threads": threads,
        "load": f"{rec['loadavg']:.1f}",
        "fit s": f"{rec['fit']:.3g}",
        "iterations (random start)": f"{s['iterations']:.3g} s",
        **{phase: share(phase) for phase in ("thresholds", "polish", "swaps", "columns")},
        "nmf": share("nmf"),
        "combined": share("combined"),
        "peak MiB over the data": f"{max(rec['peak_mb'].values(), default=0):.0f}",
        "the fit's estimate": "—" if rec["estimate_mb"] is None else f"{rec['estimate_mb']:.0f}",
        "error": f"{rec['relative_error']:.4f}".lstrip("0"),
    }
    key = f"{size} / {rec['k']} / {threads}"
    return row_record("scale", command, "scale", key, figures, settings={"size": rec["size"]})


if __name__ == "__main__":
    sys.exit(main())
