"""Per-iteration cost of BANMF against plain numpy/scipy implementations of the same iteration.

    python benchmarks/bench_core.py [--quick] [--dtype float32] [--sizes i ii iii]

Every measurement runs in its own fresh process, so "peak MB" is that process's peak resident
memory (data generation included). Times are medians over the timed iterations; ratios compare
implementations measured in the same run on the same matrix (same generator seed).

References:
- scipy: the same iteration with scipy.sparse products (Y @ Hᵀ, Wᵀ @ Y) and a chunked numpy
  SDDMM for the projection, Y stored as a CSR matrix on the support of X.
- dense: numpy on dense n×m arrays; only where 4 such arrays fit in the memory budget.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import sys
import time

import numpy as np

import banmf

SIZES = {
    "i": ("2000×143, d=0.1 (LUCAP0 size)", 2000, 143, 28600, 200),
    "ii": ("100,000×10,000, 1e6 nnz", 100_000, 10_000, 1_000_000, 20),
    "iii": ("1,000,000×100,000, 1e8 nnz", 1_000_000, 100_000, 100_000_000, 3),
}
DENSE_BUDGET_BYTES = 4 * 2**30


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _data(n, m, nnz):
    return banmf.make_sparse_uniform(n, m, nnz, random_state=0)


def run_banmf(n, m, nnz, k, iters, dtype):
    X = _data(n, m, nnz)
    stamps = []
    start = time.perf_counter()
    model = banmf.BANMF(
        k, max_iter=iters, random_state=0, dtype=dtype,
        callback=lambda t, f: stamps.append(time.perf_counter()),
    ).fit(X)
    end = time.perf_counter()
    return {
        "iter": float(np.median(np.diff([start] + stamps)[1:])),
        "boolean": end - stamps[-1],
        "total": end - start,
        "peak": _peak_mb(),
        "rel_err": model.relative_error_,
        "nnz": X.nnz,
    }


def run_scipy(n, m, nnz, k, iters, dtype):
    import scipy.sparse as sp

    X = _data(n, m, nnz)
    rng = np.random.default_rng(0)
    W = rng.random((n, k)).astype(dtype)
    H = rng.random((k, m)).astype(dtype)
    Y = sp.csr_matrix((np.ones(X.nnz, dtype=dtype), X.indices, X.indptr), shape=X.shape)
    rows = np.repeat(np.arange(n), np.diff(X.indptr))
    cols = X.indices
    eps, chunk = 1e-12, 1 << 20
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        W *= (Y @ H.T) / (W @ (H @ H.T) + eps)
        H *= (Y.T @ W).T / ((W.T @ W) @ H + eps)
        for lo in range(0, X.nnz, chunk):
            r, c = rows[lo : lo + chunk], cols[lo : lo + chunk]
            s = np.einsum("pk,pk->p", W[r], H[:, c].T)
            Y.data[lo : lo + chunk] = np.clip(s, 1.0, k)
        times.append(time.perf_counter() - t0)
    return {"iter": float(np.median(times)), "peak": _peak_mb()}


def run_dense(n, m, nnz, k, iters, dtype):
    X = _data(n, m, nnz).toarray().astype(dtype)
    rng = np.random.default_rng(0)
    W = rng.random((n, k)).astype(dtype)
    H = rng.random((k, m)).astype(dtype)
    Y = X.copy()
    mask = X > 0
    eps = 1e-12
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        W *= (Y @ H.T) / (W @ (H @ H.T) + eps)
        H *= (W.T @ Y) / ((W.T @ W) @ H + eps)
        Y = np.where(mask, np.clip(W @ H, 1.0, k), 0.0).astype(dtype)
        times.append(time.perf_counter() - t0)
    return {"iter": float(np.median(times)), "peak": _peak_mb()}


def _in_child(fn, *args):
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(fn, args)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", choices=list(SIZES), default=list(SIZES))
    parser.add_argument("--ks", nargs="+", type=int, default=[10, 32])
    parser.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    parser.add_argument("--quick", action="store_true", help="sizes i and ii only, fewer iterations")
    args = parser.parse_args(argv)
    sizes = [s for s in args.sizes if not (args.quick and s == "iii")]
    dtype = np.dtype(args.dtype)
    header = (
        f"{'size':<32} {'k':>3} {'BANMF s/it':>11} {'scipy s/it':>11} {'ratio':>6} "
        f"{'dense s/it':>11} {'ratio':>6} {'bool s':>8} {'peak MB':>8} {'rel err':>8}"
    )
    print(f"dtype {dtype.name}, {banmf.__version__}, numba threads {_threads()}", flush=True)
    print(header, flush=True)
    for key in sizes:
        label, n, m, nnz, iters = SIZES[key]
        if args.quick:
            iters = max(3, iters // 4)
        for k in args.ks:
            ours = _in_child(run_banmf, n, m, nnz, k, iters + 1, dtype)
            ref = _in_child(run_scipy, n, m, nnz, k, max(2, iters // 4), dtype)
            dense_fits = 4 * n * m * dtype.itemsize <= DENSE_BUDGET_BYTES
            dense = _in_child(run_dense, n, m, nnz, k, max(2, iters // 4), dtype) if dense_fits else None
            print(
                f"{label:<32} {k:>3} {ours['iter']:>11.4g} {ref['iter']:>11.4g} "
                f"{ref['iter'] / ours['iter']:>5.1f}x "
                + (f"{dense['iter']:>11.4g} {dense['iter'] / ours['iter']:>5.1f}x " if dense else f"{'—':>11} {'—':>6} ")
                + f"{ours['boolean']:>8.3g} {ours['peak']:>8.0f} {ours['rel_err']:>8.4f}",
                flush=True,
            )
    return 0


def _threads() -> int:
    import numba

    return numba.get_num_threads()


if __name__ == "__main__":
    sys.exit(main())
