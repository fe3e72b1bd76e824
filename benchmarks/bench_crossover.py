"""Where parallel kernels start to pay: serial vs parallel time per call of the MU kernels.

    python benchmarks/bench_crossover.py [--k 10] [--repeats 31]

For growing X (uniform rows, ~40 nonzeros a row) it times one call of each MU kernel (the row
update, the WᵀY scatter, the Y pass) in its serial and its parallel variant, interleaved in
one process, and prints the medians, their ratio and the work per call in the units of
``banmf.runtime.threads.PARALLEL_MIN_WORK`` (multiply-adds). Run it alone and beside a busy process
(``--busy``): the crossover moves up when the machine is shared.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time

import numba
import numpy as np

from banmf import make_sparse_uniform
from banmf._kernels.mu import (
    Cells,
    Factors,
    YSums,
    padded_width,
    project_spmm,
    row_width,
    scatter_rows,
    update_rows,
)
from banmf._kernels.prefetch import zeros_line_aligned
from banmf._kernels.sparse import Sparse


def _burn(stop):
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def _median_call(fn, args, repeats):
    fn(*args)  # compile or load
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--repeats", type=int, default=31)
    p.add_argument("--busy", action="store_true", help="run beside one CPU-burning process")
    args = p.parse_args(argv)
    stop = mp.Event()
    burner = mp.Process(target=_burn, args=(stop,), daemon=True) if args.busy else None
    if burner:
        burner.start()
    k, dtype = args.k, np.float64
    kp = padded_width(k, dtype)
    width = row_width(kp, dtype)
    rng = np.random.default_rng(0)
    print(
        f"threads {numba.get_num_threads()}, k={k}, float64"
        + (", beside a busy process" if burner else "")
    )
    print(
        f"{'nnz':>9} {'kernel':>8} {'work':>10} {'serial µs':>10} {'parallel µs':>12} {'ser/par':>8}"
    )
    try:
        for nnz in (2_000, 10_000, 30_000, 100_000, 300_000, 1_000_000):
            n, m = max(1, nnz // 40), 2000
            X = make_sparse_uniform(n, m, nnz, random_state=0)
            W, Ht = zeros_line_aligned((n, kp), dtype), zeros_line_aligned((m, kp), dtype)
            W[:, :k], Ht[:, :k] = rng.random((n, k)), rng.random((m, k))
            y, YHt, sq = np.ones(X.nnz), zeros_line_aligned((n, kp), dtype), np.empty((n, 2))
            G = Ht[:, :k].T @ Ht[:, :k]
            gram, blocks, out = (
                np.empty((4, k, k)),
                zeros_line_aligned((4, m, kp), dtype),
                zeros_line_aligned((m, kp), dtype),
            )
            Y = project_spmm(width)
            no_cells = Cells(np.zeros_like(X.indptr), X.indices[:0], y[:0])  # no unknown cells
            S = Sparse(X.indptr, X.indices)
            cases = {
                "update": (update_rows, (W, YHt, G, 0.0, 1e-12, gram, None), n * k * k),
                "scatter": (
                    scatter_rows(width),
                    (S, y, no_cells, W, blocks, out, width),
                    X.nnz * k,
                ),
                "y pass": (
                    Y,
                    (S, y, Factors(W, Ht), YSums(YHt, sq), no_cells, 1.0, float(k), True, width),
                    2 * X.nnz * k,
                ),
            }
            for name, (kern, kargs, work) in cases.items():
                s = _median_call(kern.serial, kargs, args.repeats)
                q = _median_call(kern.parallel, kargs, args.repeats)
                print(
                    f"{X.nnz:>9} {name:>8} {work:>10.2e} {1e6 * s:>10.1f} {1e6 * q:>12.1f} {s / q:>8.2f}"
                )
    finally:
        stop.set()
        if burner:
            burner.join()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
