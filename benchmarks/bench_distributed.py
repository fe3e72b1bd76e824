"""Per-iteration cost of ``banmf.distributed.BANMF`` on a local Dask cluster against ``banmf.BANMF``.

    python benchmarks/bench_distributed.py [--nnz 1e7 1e8] [--k 10] [--m 10000] [--blocks 8]
        [--workers 1 2] [--iters 5 25] [--repeats 3] [--busy] [--out records.jsonl] [--quick]

Data: ``banmf.make_sparse_tiles(n, m, nnz, k, random_state=0)`` with n = nnz / 10 rows and m
columns, generated once per ``--nnz`` and written once as ``--blocks`` row-block files
(``banmf.distributed.write_blocks``) to a temporary folder; the distributed fits read them with
``read_blocks``, so the workers read their rows from the files (X is not sent to them).

Both sides fit the paper's single start: ``thresholds="global"``, ``polish=False``,
``swap=False``, ``extra_starts=()``, ``combine=False``, ``n_init=1``, ``tol=None``,
``random_state=0``; the single
machine with ``n_jobs=2``, the cluster (``LocalCluster(n_workers=w, threads_per_worker=
max(1, 2 // w), processes=True)``, one per measurement, created here) with each worker's threads.
Per-iteration seconds are (t(T2) - t(T1)) / (T2 - T1) for fits of T1 and T2 iterations
(``--iters``), so that setup (the blocks' reading, the actors) and the threshold search cancel;
the median over ``--repeats`` such pairs. Each side has one untimed warm-up fit of T1
iterations first (Numba compiles in the driver and in every worker). The threshold search
cancels only roughly: how many grid points it visits (and so its time and round trips) depends
on the factors, which differ after T1 and T2 iterations; on small data (``--quick``) that
difference can exceed the iterations' own cost and the per-iteration figures come out noisy,
even negative.

Columns:
- nnz, workers: the data's nonzeros (as asked) and the Dask workers;
- single s/it: ``banmf.BANMF`` per iteration (n_jobs=2), in the repeats alternated with the
  cluster's;
- distributed s/it: ``banmf.distributed.BANMF`` per iteration on that many workers;
- ratio: distributed / single (> 1: the cluster is slower);
- MB sent/it, MB received/it, round trips/it: ``traffic_`` of the T2 fit minus that of the
  T1 fit, over T2 - T1 (the arrays sent by the driver to the workers and received back, 10⁶
  bytes; calls to all workers that the driver waited for); medians over the repeats;
- same factors: every distributed fit's ``W_`` and ``components_`` equal those of the single
  machine's fit with the same T (yes/no).

The iterations alone (a third table): the seconds each fit spends in the engine's iteration
loop (``banmf.engine.driver.Driver.iterate``, timed by wrapping it: instrumentation, not API),
so (loop of T2 - loop of T1) / (T2 - T1) is the time per iteration and nothing else; medians
over the repeats, each side's, the single machine's per repeat too. (``timings_``'s
"iterations" also holds the start's set-up: the solver's arrays, W's draw and, on the cluster,
a round to every block. That set-up varied by more than its own length between fits, 0.15 to
0.38 s at 10⁷ nonzeros on 2 workers, as the blocks' fresh arrays met the memory the fit
before left, which alone moved the cluster's figure by up to 10 ms per iteration.)
**The verdict (the target, at most 1.25× one machine's
time per iteration) is on these.** The whole fits' differences above also hold the difference
of the two fits' threshold searches, which does not cancel: after T1 iterations the search
visits other grid points than after T2, and each visit costs the cluster a round trip where
one machine pays a kernel call. At 10⁸ nonzeros the T1 fit's search took about 4 s longer
than the T2 fit's on one machine, which took a fifth off its apparent time per iteration.

The single machine and the cluster alternate: each repeat fits the single machine's T1 and T2,
then the cluster's, so that both sides see the same load; the ratio is that of the two sides'
medians over the repeats.

Where the time goes (a second table, one more fit of T2 iterations per cluster, timed inside):
- round s: the driver's wall time of an iteration's round trip (``Session.sum`` of the step);
- slowest / fastest worker s: the time a worker spends in that round's call (its blocks' Y pass
  and W step, and their sums), the slowest and the fastest of the workers;
- round - slowest s: what the round costs beyond the slowest worker's compute: the round trip,
  the serialization of Hᵀ, HHᵀ and the partial sums, the actor's dispatch;
- driver s: the time between two rounds of the iterations: the H step and the objective;
- slowest worker CPU s: the CPU time of the slowest worker's call (of the thread running it:
  with one thread per worker, all its compute), below its wall time when a busy machine takes
  the core from it;
medians over the fit's rounds (so their sum is that fit's time per iteration, which the
repeats' differences of fits measure apart). The timing wraps ``BlockServer.sums`` on the workers and
``Session.sum`` here (private classes: this is instrumentation, not API).

The work (a fourth table): CPU seconds per iteration, which a busy machine inflates much less
than wall time, so that the two sides' work compares even under load:
- single CPU s/it: the single machine's process CPU time (both threads) per iteration, from the
  same differences of fits as its wall time, less what the process spends while it waits (the
  cluster's scheduler and the client run in it: their CPU per second, measured over 5 s
  before the repeats, times the wall time); medians over the repeats. Being a difference of
  whole fits it holds the threshold searches' difference too (see the iterations alone), which
  lowered it at 10⁸, so the work ratio there errs high;
- workers' CPU s/it: the workers' CPU time in a round, summed over the workers, plus the
  driver's time between rounds (the H step); medians over the timed fit's rounds (one thread
  per worker: with more, the kernels' other threads are not counted);
- work ratio: workers' / single (1: the cluster does the single machine's work, no more).

``--busy``: after those, the single machine and the 2-worker cluster once more while one
CPU-burning subprocess (``python -c "while True: pass"``) runs beside them (started before the
single-machine fits and killed after the cluster's), in a second table. The machine has 2
cores: the neighbour takes one.

``--out FILE`` appends one JSON record per table row (benchmarks/_records.py). Progress goes
to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from _records import RESULTS, append_record, local_client, row_record, run_tasks, superscript_power

import banmf
import banmf.distributed as bd

#: Both sides' fit: the paper's single start, a fixed number of iterations (the caller's).
PARAMS = {
    "thresholds": "global",
    "polish": False,
    "swap": False,
    "extra_starts": (),
    "combine": False,
    "n_init": 1,
    "tol": None,
    "random_state": 0,
}
QUICK = {"nnz": [200_000], "blocks": 4, "iters": [3, 8], "repeats": 1, "workers": [1, 2]}
# The target of the distributed iteration against one machine's (docs/SCALING.md, "Measured").
OVERHEAD_LIMIT = 1.25


def log(*parts) -> None:
    print(*parts, file=sys.stderr, flush=True)


def _count(text: str) -> int:
    """``1e7`` → 10000000."""
    return int(float(text))


def _timed(make, X):
    """Wall and process CPU seconds of ``make().fit(X)``, the model, and the seconds in the
    engine's iteration loop (:func:`_iterating`)."""
    _loops.clear()
    start, cpu = time.perf_counter(), time.process_time()
    model = make().fit(X)
    return time.perf_counter() - start, time.process_time() - cpu, model, sum(_loops)


#: Seconds of each call of ``Driver.iterate`` since :func:`_timed` cleared it.
_loops: list[float] = []


def _iterating() -> None:
    """Time every call of the engine's iteration loop (``Driver.iterate``: a start's
    iterations, without its set-up and threshold search) into :data:`_loops`, on either side
    (the Dask estimator runs the same driver). Wraps the method once."""
    from banmf.engine.driver import Driver

    if getattr(Driver.iterate, "timed", False):
        return
    plain = Driver.iterate

    def iterate(self, *args, **kwargs):
        began = time.perf_counter()
        try:
            return plain(self, *args, **kwargs)
        finally:
            _loops.append(time.perf_counter() - began)

    iterate.timed = True
    Driver.iterate = iterate


def _same(model, ref: tuple) -> bool:
    """The model's Boolean factors are ``ref``'s ``(W_, components_)``."""
    return bool(np.array_equal(model.W_, ref[0]) and np.array_equal(model.components_, ref[1]))


def _median(values) -> float:
    return float(np.median(values))


def single_machine(X, k, iters, label):
    """A function running one repeat of ``banmf.BANMF``'s fits (n_jobs=2) of T1 and T2
    iterations: it returns their per-iteration wall and CPU seconds, and keeps the fits'
    Boolean factors (per T) in its ``refs``; after one untimed warm-up fit."""
    T1, T2 = iters

    def make(T):
        return lambda: banmf.BANMF(k, max_iter=T, n_jobs=2, **PARAMS)

    seconds, _, _, _ = _timed(make(T1), X)
    log(f"  {label} single machine: warm-up fit {seconds:.1f} s")

    def pair() -> tuple[float, float, float]:
        times, cpus, phases = {}, {}, {}
        for T in iters:
            times[T], cpus[T], model, phases[T] = _timed(make(T), X)
            # Only the Boolean factors are kept (at 1e8 a whole model holds GBs).
            pair.refs.setdefault(T, (model.W_, model.components_))
            del model
        per_iter = (times[T2] - times[T1]) / (T2 - T1)
        log(
            f"  {label} single machine: T={T1} {times[T1]:.2f} s, "
            f"T={T2} {times[T2]:.2f} s: {per_iter:.4g} s/it"
        )
        steps = T2 - T1
        return per_iter, (cpus[T2] - cpus[T1]) / steps, (phases[T2] - phases[T1]) / steps

    pair.refs = {}
    return pair


def _time_worker_calls(start: bool = True):
    """(Run on each worker.) With ``start``, time every ``BlockServer.sums`` call from now on
    (wrapping the class once); else return the ``(call, seconds, CPU seconds)`` timed so far:
    the CPU time of the thread running the call (all the call's compute with one thread per
    worker; with more, the kernels' other threads and the threads running blocks side by side
    are not counted)."""
    from banmf.engine.dask import worker as _worker

    server = _worker.BlockServer
    if not hasattr(server, "bench_times"):
        plain = server.sums

        def sums(self, func, *args, **kwargs):
            began, cpu = time.perf_counter(), time.thread_time()
            try:
                return plain(self, func, *args, **kwargs)
            finally:
                server.bench_times.append(
                    (func.__name__, time.perf_counter() - began, time.thread_time() - cpu)
                )

        server.sums, server.bench_times = sums, []
    if start:
        server.bench_times.clear()
        return None
    return list(server.bench_times)


@contextlib.contextmanager
def _timed_rounds():
    """Each ``Session.sum`` at the driver, while in the block: ``(call name, start, end)``."""
    from banmf.engine.dask.session import Session

    plain, rounds = Session.sum, []

    def timed(self, func, *args):
        began = time.perf_counter()
        try:
            return plain(self, func, *args)
        finally:
            rounds.append((func.__name__, began, time.perf_counter()))

    Session.sum = timed
    try:
        yield rounds
    finally:
        Session.sum = plain


def where_time_goes(client, make, X) -> dict:
    """One fit, timed inside: per round of the iterations, the driver's wall time and each
    worker's time in its call (medians over the rounds)."""
    client.run(_time_worker_calls, True)
    with _timed_rounds() as rounds:
        make().fit(X)
    per_worker = [
        [(t, cpu) for name, t, cpu in calls if name == "step"]
        for calls in client.run(_time_worker_calls, False).values()
    ]
    per_worker = [times for times in per_worker if times]
    walls = [end - start for name, start, end in rounds if name == "step"]
    # The driver's work between two rounds of the iterations (no other call between them).
    gaps = [b[1] - a[2] for a, b in zip(rounds, rounds[1:]) if a[0] == "step" and b[0] == "step"]
    n = min(len(walls), *(len(times) for times in per_worker))
    slowest = [max(times[i] for times in per_worker) for i in range(n)]
    fastest = [min(times[i] for times in per_worker) for i in range(n)]
    driver = _median(gaps)
    return {
        "round_s": _median(walls[:n]),
        "slowest_s": _median([t for t, _ in slowest]),
        "slowest_cpu_s": _median([cpu for _, cpu in slowest]),
        "fastest_s": _median([t for t, _ in fastest]),
        "beyond_s": _median([w - c[0] for w, c in zip(walls[:n], slowest, strict=True)]),
        "driver_s": driver,
        "workers_cpu_s": _median([sum(times[i][1] for times in per_worker) for i in range(n)])
        + driver,
        "rounds": n,
    }


def distributed(folder, workers, k, iters, repeats, single, label) -> dict:
    """Per-iteration seconds and traffic of ``banmf.distributed.BANMF`` on a fresh local
    cluster of ``workers`` processes reading the row blocks in ``folder``, each repeat after
    one of the single machine's (``single``, from :func:`single_machine`)."""
    T1, T2 = iters
    threads = max(1, 2 // workers)
    with local_client(workers, threads) as client:
        X = bd.read_blocks(folder)
        background = _idle_cpu()

        def make(T):
            return lambda: bd.BANMF(k, max_iter=T, client=client, **PARAMS)

        seconds, _, _, _ = _timed(make(T1), X)
        log(f"  {label} {workers} worker(s) × {threads} thread(s): warm-up fit {seconds:.1f} s")
        per_iter, sent, received, trips, same, alone, phase = [], [], [], [], [], [], []
        for r in range(repeats):
            alone.append(single())
            times, traffic, phases = {}, {}, {}
            for T in iters:
                times[T], _, model, phases[T] = _timed(make(T), X)
                traffic[T] = model.traffic_
                same.append(_same(model, single.refs[T]))
                blocks, peak = model.n_blocks_, model.peak_block_bytes_
                del model
            steps = T2 - T1
            per_iter.append((times[T2] - times[T1]) / steps)
            phase.append((phases[T2] - phases[T1]) / steps)
            sent.append((traffic[T2]["sent_bytes"] - traffic[T1]["sent_bytes"]) / steps)
            received.append((traffic[T2]["received_bytes"] - traffic[T1]["received_bytes"]) / steps)
            trips.append((traffic[T2]["round_trips"] - traffic[T1]["round_trips"]) / steps)
            log(
                f"  {label} {workers} worker(s), repeat {r + 1}: T={T1} {times[T1]:.2f} s, "
                f"T={T2} {times[T2]:.2f} s: {per_iter[-1]:.4g} s/it (iterations alone "
                f"{phase[-1]:.4g}, single machine's {alone[-1][2]:.4g}); same factors: {same[-2:]}"
            )
        inside = where_time_goes(client, make(T2), X)
        log(f"  {label} {workers} worker(s), timed inside: {inside}")
        return {
            **inside,
            "single": _median([wall for wall, _, _ in alone]),
            "single_all": [wall for wall, _, _ in alone],
            "single_cpu_s": _median([cpu - background * wall for wall, cpu, _ in alone]),
            "single_phase": _median([it for _, _, it in alone]),
            "single_phase_all": [it for _, _, it in alone],
            "distributed_phase": _median(phase),
            "distributed_phase_all": phase,
            "background_cpu": background,
            "distributed": _median(per_iter),
            "distributed_all": per_iter,
            "sent_mb": _median(sent) / 1e6,
            "received_mb": _median(received) / 1e6,
            "round_trips": _median(trips),
            "same_factors": all(same),
            "n_blocks": blocks,
            "peak_block_mb": peak / 1e6,
        }


def _idle_cpu(seconds: float = 5.0) -> float:
    """This process's CPU seconds per second while it waits: the local cluster's scheduler and
    the client run in it, beside the single machine's fits."""
    start, cpu = time.perf_counter(), time.process_time()
    time.sleep(seconds)
    return (time.process_time() - cpu) / (time.perf_counter() - start)


@contextlib.contextmanager
def busy_neighbour():
    """One CPU-burning process for the duration of the block."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    log(f"busy neighbour started (pid {proc.pid})")
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()
        log(f"busy neighbour (pid {proc.pid}) killed")


def _header(title: str) -> None:
    print(f"\n{title}\n")
    print(
        "| nnz | workers | single s/it | distributed s/it | ratio | MB sent/it | MB received/it "
        "| round trips/it | same factors |"
    )
    print("|---|---|---|---|---|---|---|---|---|", flush=True)


def _row(rec: dict) -> None:
    cells = [
        _nnz(rec["nnz"]),
        rec["workers"],
        f"{rec['single']:.4g}",
        f"{rec['distributed']:.4g}",
        f"{rec['ratio']:.2f}×",
        f"{rec['sent_mb']:.3g}",
        f"{rec['received_mb']:.3g}",
        f"{rec['round_trips']:.3g}",
        "yes" if rec["same_factors"] else "no",
    ]
    print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)


def _inside_table(records: list) -> None:
    print("\nWhere the time goes (medians over one T2 fit's rounds; seconds):\n")
    print(
        "| nnz, workers | single s/it | distributed s/it | round s | slowest worker s "
        "| fastest worker s | round - slowest s | driver s | slowest worker CPU s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for rec in records:
        keys = ("single", "distributed", "round_s", "slowest_s", "fastest_s", "beyond_s")
        cells = [
            f"{_nnz(rec['nnz'])}, {rec['workers']}",
            *(f"{rec[key]:.4g}" for key in (*keys, "driver_s", "slowest_cpu_s")),
        ]
        print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)
    print("\nThe iterations alone (the engine's iteration loop: no set-up, no threshold search):\n")
    print("| nnz, workers | single s/it | distributed s/it | ratio | single, each repeat |")
    print("|---|---|---|---|---|")
    for rec in records:
        each = ", ".join(f"{s:.3g}" for s in rec["single_phase_all"])
        cells = [
            f"{_nnz(rec['nnz'])}, {rec['workers']}",
            f"{rec['single_phase']:.4g}",
            f"{rec['distributed_phase']:.4g}",
            f"{rec['phase_ratio']:.2f}×",
            each,
        ]
        print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)
    print("\nThe work (CPU seconds per iteration):\n")
    print("| nnz, workers | single CPU s/it | workers' CPU s/it | work ratio |")
    print("|---|---|---|---|")
    for rec in records:
        cells = [
            f"{_nnz(rec['nnz'])}, {rec['workers']}",
            f"{rec['single_cpu_s']:.4g}",
            f"{rec['workers_cpu_s']:.4g}",
            f"{rec['work_ratio']:.2f}×",
        ]
        print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)


def _nnz(nnz: int) -> str:
    """10000000 → "1e7"."""
    mantissa, exponent = f"{nnz:.0e}".split("e")
    return f"{mantissa}e{int(exponent)}" if float(f"{nnz:.0e}") == nnz else f"{nnz:,}"


def measure(nnz, args) -> dict:
    """The records of one nnz: the data generated and written once; the single machine and
    each cluster size alone, then (``--busy``) the single machine and 2 workers beside a
    CPU-burning neighbour. Returns {"alone": records, "busy": records}."""
    n, m, k = max(1, nnz // 10), args.m, args.k
    label = f"[nnz {_nnz(nnz)}]"
    log(f"{label} generating {n:,}×{m:,}, k={k} (make_sparse_tiles) ...")
    start = time.perf_counter()
    X = banmf.make_sparse_tiles(n, m, nnz, k, random_state=0)[0]
    seconds = time.perf_counter() - start
    log(f"{label} {X.shape[0]:,}×{X.shape[1]:,}, {X.nnz:,} nonzeros in {seconds:.0f} s")
    common = {
        "nnz": nnz,
        "n": n,
        "m": m,
        "k": k,
        "nonzeros": int(X.nnz),
        "blocks": args.blocks,
        "iters": list(args.iters),
        "repeats": args.repeats,
    }
    out = {}
    with tempfile.TemporaryDirectory(prefix="bench_distributed_") as folder:
        start = time.perf_counter()
        paths = bd.write_blocks(X, folder, n_blocks=args.blocks)
        size = sum(p.stat().st_size for p in paths) / 1e6
        seconds = time.perf_counter() - start
        log(f"{label} wrote {len(paths)} block files ({size:.0f} MB) in {seconds:.0f} s")
        for busy in (False, True) if args.busy else (False,):
            tag = f"{label[:-1]}, busy]" if busy else label
            single = {}

            def run(task, busy=busy, tag=tag, single=single):
                kind, w = task
                rec = {**common, "busy": busy, "kind": kind, "workers": w}
                if kind == "single":
                    # The warm-up, and the factors of a first repeat to compare the cluster's with.
                    single["pair"] = single_machine(X, k, args.iters, tag)
                    seconds, cpu, phase = single["pair"]()
                    rec.update(single=seconds, single_cpu_s=cpu, single_phase=phase)
                else:
                    dist = distributed(folder, w, k, args.iters, args.repeats, single["pair"], tag)
                    rec.update(
                        **dist,
                        ratio=dist["distributed"] / dist["single"],
                        work_ratio=dist["workers_cpu_s"] / dist["single_cpu_s"],
                        phase_ratio=dist["distributed_phase"] / dist["single_phase"],
                    )
                rec["loadavg"] = round(os.getloadavg()[0], 2)
                return rec

            tasks = [("single", 0)] + [("distributed", w) for w in ([2] if busy else args.workers)]
            context = busy_neighbour() if busy else contextlib.nullcontext()
            with context:
                records = run_tasks(run, tasks, 1, args.out)
            out["busy" if busy else "alone"] = [r for r in records if r["kind"] == "distributed"]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nnz", nargs="+", type=_count, default=[10**7])
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--m", type=int, default=10_000, help="columns")
    parser.add_argument("--blocks", type=int, default=8, help="row-block files")
    parser.add_argument("--workers", nargs="+", type=int, default=[1, 2])
    parser.add_argument(
        "--iters", nargs=2, type=int, default=[5, 25], metavar=("T1", "T2"), help="T1 < T2"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--busy",
        action="store_true",
        help="also the single machine and 2 workers beside a CPU-burning process",
    )
    parser.add_argument("--out", help="also append every row's record to this JSON-lines file")
    parser.add_argument(
        "--record",
        action="store_true",
        help="append the 2-worker rows of the docs' table (docs/SCALING.md, what to expect) "
        "to benchmarks/results/distributed.jsonl",
    )
    parser.add_argument(
        "--quick", action="store_true", help="nnz 2e5, 4 blocks, iters 3 8, 1 repeat, workers 1 2"
    )
    args = parser.parse_args(argv)
    _iterating()
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    if not args.iters[0] < args.iters[1]:
        parser.error("--iters T1 T2 needs T1 < T2")
    import dask

    print(
        f"{datetime.datetime.now():%Y-%m-%d %H:%M}, {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.2f}; banmf {banmf.__version__}, dask {dask.__version__}; "
        f"k={args.k}, n = nnz/10 × m={args.m:,}, {args.blocks} row-block files, "
        f"iterations {args.iters[0]} and {args.iters[1]}, median of {args.repeats}",
        flush=True,
    )
    tables = [("alone", False)] + ([("busy", True)] if args.busy else [])
    results = {name: [] for name, _ in tables}
    for nnz in args.nnz:
        for name, records in measure(nnz, args).items():
            results[name] += records
    for name, busy in tables:
        title = (
            "With a busy neighbour (one CPU-burning process), single machine and 2 workers:"
            if busy
            else "Alone:"
        )
        _header(title)
        for rec in results[name]:
            _row(rec)
        _inside_table(results[name])
        print()
        for rec in results[name]:
            if rec["workers"] == 2:
                ok = rec["phase_ratio"] <= OVERHEAD_LIMIT
                print(
                    f"Overhead with 2 workers at nnz={_nnz(rec['nnz'])}"
                    f"{' (busy neighbour)' if busy else ''}: {rec['phase_ratio']:.2f}× the "
                    f"single machine's time per iteration (the iterations alone; whole fits "
                    f"{rec['ratio']:.2f}×): {'within' if ok else 'above'} {OVERHEAD_LIMIT}× "
                    f"({'yes' if ok else 'no'})"
                )
                if args.record:
                    command = "python benchmarks/bench_distributed.py " + " ".join(
                        argv or sys.argv[1:]
                    )
                    append_record(RESULTS / "distributed.jsonl", docs_row(rec, command))
    return 0


def docs_row(rec: dict, command: str) -> dict:
    """A 2-worker record as a row of docs/SCALING.md's table ``distributed``: the iterations
    alone on both sides, and a round's medians (milliseconds)."""
    nnz = superscript_power(rec["nnz"])
    machine = "beside a CPU-burning process" if rec["busy"] else "alone"
    ms = {key: 1000 * rec[key] for key in ("round_s", "slowest_s", "beyond_s", "driver_s")}
    figures = {
        "nnz": nnz,
        "machine": f"{machine} (load {rec['loadavg']:.1f})",
        "one machine s/it": f"{rec['single_phase']:.3g}",
        "cluster s/it": f"{rec['distributed_phase']:.3g}",
        "ratio": f"**{rec['phase_ratio']:.2f}×**",
        "a round: slowest worker / beyond it / driver": (
            f"{ms['round_s']:.0f} ms: {ms['slowest_s']:.0f} / {ms['beyond_s']:.1f} / "
            f"{ms['driver_s']:.1f} ms"
        ),
    }
    return row_record(
        "distributed",
        command,
        "distributed",
        f"{nnz} / {machine}",
        figures,
        settings={"workers": rec["workers"], "loadavg": rec.get("loadavg")},
    )


if __name__ == "__main__":
    sys.exit(main())
