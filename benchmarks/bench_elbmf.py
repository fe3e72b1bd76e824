"""ELBMF sparse against the dense algorithm as published: the same iterations from the same start.

    python benchmarks/bench_elbmf.py [--sizes 10000x1000:100000 100000x1000:1000000]
                                     [--k 10] [--iters 20 5] [--repeats 3] [--threads 1]
                                     [--out benchmarks/results/elbmf.jsonl]

For each size ``NxM:NNZ``, a :func:`banmf.make_sparse_tiles` matrix with k planted tiles, and
one start (U, V uniform in [0, 1)). The sparse iterations (:func:`banmf.models.elbmf.ipalm`,
what ``ELBMF`` runs) and the dense numpy port of the reference code (``tests/reference.py``'s
``elbmf``: ``U VVᵀ − X Vᵀ`` and the loss ``‖X − UV‖²`` on the dense X, float64) each run
``iters`` iterations with ``tol=None``, ``repeats`` times in alternation, both on ``--threads``
threads (banmf's budget and numpy's BLAS). Reports the median seconds per iteration, the ratio
dense / sparse (> 1: the sparse one is faster), and how far apart the two ends are: the largest
difference of the factors, the relative difference of the last loss, and the Boolean errors of
both factors rounded at ½. Prints a table and appends one JSON record per size to ``--out``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from _records import append_record, provenance
from threadpoolctl import threadpool_limits

import banmf
from banmf.io import Dataset
from banmf.models.elbmf import ipalm
from banmf.runtime.threads import thread_budget

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import reference  # noqa: E402  (the dense oracle of the tests is the dense algorithm)


def size(text: str) -> tuple[int, int, int]:
    shape, nnz = text.split(":")
    n, m = shape.split("x")
    return int(n), int(m), int(nnz)


def measure(X, k: int, iters: int, repeats: int, threads: int) -> dict:
    """The medians, ratio and agreement of one size (module docstring)."""
    n, m = X.shape
    data = Dataset.of(X)
    rng = np.random.default_rng(0)
    U0, V0 = rng.random((n, k)), rng.random((k, m))
    with thread_budget(threads):
        ipalm(data, U0.copy(), np.ascontiguousarray(V0.T), max_iter=2, tol=None)  # compile
    Xd = X.toarray().astype(np.float64)
    sparse_s, dense_s = [], []
    for _ in range(repeats):
        with thread_budget(threads), threadpool_limits(threads):
            start = time.perf_counter()
            run = ipalm(data, U0.copy(), np.ascontiguousarray(V0.T), max_iter=iters, tol=None)
            sparse_s.append((time.perf_counter() - start) / iters)
        with threadpool_limits(threads):
            start = time.perf_counter()
            U, V, losses = reference.elbmf(Xd, U0, V0, iters)
            dense_s.append((time.perf_counter() - start) / iters)
    sparse, dense = statistics.median(sparse_s), statistics.median(dense_s)
    Wb, Hb = run.U > 0.5, np.ascontiguousarray((run.Vt > 0.5).T)
    return {
        "shape": [n, m],
        "nnz": int(X.nnz),
        "k": k,
        "iterations": iters,
        "repeats": repeats,
        "threads": threads,
        "sparse_s_per_iter": sparse_s,
        "dense_s_per_iter": dense_s,
        "median_sparse_s_per_iter": sparse,
        "median_dense_s_per_iter": dense,
        "ratio_dense_over_sparse": dense / sparse,
        "max_factor_difference": float(max(np.abs(run.U - U).max(), np.abs(run.Vt.T - V).max())),
        "last_loss_relative_difference": abs(run.losses[-1] - losses[-1]) / abs(losses[-1]),
        "boolean_error_sparse": data.error(Wb, Hb),
        "boolean_error_dense": data.error(U > 0.5, np.ascontiguousarray(V > 0.5)),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", nargs="+", default=["10000x1000:100000", "100000x1000:1000000"])
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--iters", nargs="+", type=int, default=[20, 5])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "elbmf.jsonl"))
    args = parser.parse_args(argv)
    iters = args.iters + [args.iters[-1]] * (len(args.sizes) - len(args.iters))
    command = "python benchmarks/bench_elbmf.py " + " ".join(argv or sys.argv[1:])
    print(
        "| shape | nnz | k | sparse s/it | dense s/it | dense / sparse | max Δ factors | Δ loss | errors |"
    )
    print("|---|---|---|---|---|---|---|---|---|", flush=True)
    for text, it in zip(args.sizes, iters):
        n, m, nnz = size(text)
        X, _, _ = banmf.make_sparse_tiles(n, m, nnz, args.k, random_state=0)
        figures = measure(X, args.k, it, args.repeats, args.threads)
        print(
            f"| {n}×{m} | {X.nnz} | {args.k} | {figures['median_sparse_s_per_iter']:.4f} "
            f"| {figures['median_dense_s_per_iter']:.4f} "
            f"| {figures['ratio_dense_over_sparse']:.1f}× "
            f"| {figures['max_factor_difference']:.1e} "
            f"| {figures['last_loss_relative_difference']:.1e} "
            f"| {figures['boolean_error_sparse']}, {figures['boolean_error_dense']} |",
            flush=True,
        )
        append_record(args.out, {**provenance("elbmf", command.strip()), **figures})
    return 0


if __name__ == "__main__":
    sys.exit(main())
