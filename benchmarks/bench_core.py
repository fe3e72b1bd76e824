"""Per-iteration cost of BANMF against scikit-learn's NMF and numpy/scipy versions of its iteration.

    python benchmarks/bench_core.py [--quick] [--dtype float32] [--sizes i i5 ii iii] [--ks 10 32 64]
                                    [--degrees [equal uniform poisson ... retail]]
                                    [--kernels [poisson powerlaw ...]] [--repeats 3] [--no-extras]

Every measurement runs in its own fresh process, so "peak MB" is that process's peak resident
memory (data generation included). Times are medians over the timed iterations; ratios compare
implementations measured in the same run on the same matrix (same generator seed), as
reference time / BANMF time (> 1: BANMF is faster).

Columns: BANMF s/it; its achieved GFLOP/s (≈ 6·k·nnz + 4·k²·(n+m) flops per iteration: the
two passes over the nonzeros and the k×k Gram terms) and that as a share of the machine's
peak, measured in the same run as the median dense matmul rate (numpy BLAS, 2 threads);
scikit-learn ``NMF(solver="mu")`` per iteration on the same X (float data) and k, from the
difference of a 2t- and a t-iteration fit; the scipy and dense numpy BANMF iterations;
booleanization time (grid search, global thresholds) and peak memory of the BANMF process.

References:
- sklearn: ``NMF(n_components=k, solver="mu", init="random", tol=0)``: Lee-Seung without Y's
  projection (BANMF does one more pass over the nonzeros).
- scipy: the same iteration with scipy.sparse products (Y @ Hᵀ, Wᵀ @ Y) and a chunked numpy
  SDDMM for the projection, Y stored as a CSR matrix on the support of X.
- dense: numpy on dense n×m arrays; only where 4 such arrays fit in the memory budget.

Then: the same per-iteration comparison on data shaped like users' data (``--degrees``): at
10⁶ nonzeros (100,000×10,000) with equal, Poisson and power-law row and column degrees
(``banmf.datasets.make_sparse_degrees``, exponent 2.5) and on the bundled FIMI retail matrix
(88,162×16,470, 908,576 nonzeros: Poisson-like baskets, power-law items), each beside
scikit-learn's MU on the same matrix, and against our time on ``make_sparse_uniform`` (equal
row counts, the size-ii data above) at the same k; ``--repeats`` alternated pairs of fresh
processes (ours, then scikit-learn's) per row, with the medians and the range of the pairs'
ratios, so that a load that comes and goes falls on both sides. Then each kernel of the iteration
(``--kernels``: the Y pass, the W and H updates, the scatter of Wᵀ Y, and the W
update with the scatter in one parallel call, as an iteration on several threads runs them) on those shapes, with the
share it reaches of the machine's memory bandwidth (a STREAM-like triad measured in the same
run) and of its multiply-add peak (the matmul above). Then start-up (a fresh process importing
banmf and reaching its first iteration, with an empty and with a warm kernel cache), and the
targets of ``docs/PERFORMANCE.md``: LUCAP0 at k=10 (1000 iterations + booleanization) and
500×500, d=0.5, k=5 against PNL-PF.
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
    "i5": ("2000×143, d=0.5 (LUCAP0 size)", 2000, 143, 143000, 200),
    "ii": ("100,000×10,000, 1e6 nnz", 100_000, 10_000, 1_000_000, 20),
    "iii": ("1,000,000×100,000, 1e8 nnz", 1_000_000, 100_000, 100_000_000, 3),
}
DENSE_BUDGET_BYTES = 4 * 2**30

#: Data shaped like users' data, for ``--degrees``: label and the ``make_sparse_degrees``
#: arguments (None: ``make_sparse_uniform``, the reference; "retail": the bundled FIMI data).
#: The generated ones are 100,000×10,000 with 10⁶ nonzeros, like size ii.
DEGREES = {
    "equal": ("equal rows (make_sparse_uniform)", None),
    "uniform": ("uniform rows and columns", {"rows": "uniform", "cols": "uniform"}),
    "poisson": ("Poisson rows and columns", {"rows": "poisson", "cols": "poisson"}),
    "powerlaw-rows": ("power-law rows, Poisson columns", {"rows": "powerlaw", "cols": "poisson"}),
    "powerlaw-cols": ("Poisson rows, power-law columns", {"rows": "poisson", "cols": "powerlaw"}),
    "powerlaw": ("power-law rows and columns", {"rows": "powerlaw", "cols": "powerlaw"}),
    "retail": ("retail 88,162×16,470 (FIMI)", "retail"),
}
DEGREES_SIZE = (100_000, 10_000, 1_000_000, 20)


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _data(n, m, nnz, degrees=None):
    """The benchmark matrix: ``make_sparse_uniform`` (the size table), or a ``DEGREES`` entry
    (``n``, ``m``, ``nnz`` are ignored for the retail data)."""
    spec = DEGREES[degrees][1] if degrees is not None else None
    if spec is None:
        return banmf.make_sparse_uniform(n, m, nnz, random_state=0)
    if spec == "retail":
        from banmf.datasets import load_retail

        return load_retail().X
    from banmf.datasets import make_sparse_degrees

    return make_sparse_degrees(n, m, nnz, **spec, random_state=0)


def degree_skew(degrees) -> tuple[float, float]:
    """Max / mean of the row degrees and of the column degrees of a ``DEGREES`` matrix."""
    X = _data(*DEGREES_SIZE[:3], degrees)
    rows = np.diff(X.indptr)
    cols = np.bincount(X.indices, minlength=X.shape[1])
    return float(rows.max() / rows.mean()), float(cols.max() / cols.mean())


#: The paper's configuration: one start, the global grid, no refinements (the iteration and the
#: booleanization alone are timed); the iteration count is the caller's.
PAPER = {**banmf.PAPER_CONFIG, "tol": "auto"}


def run_banmf(n, m, nnz, k, iters, dtype, degrees=None):
    X = _data(n, m, nnz, degrees)
    stamps = []
    start = time.perf_counter()
    model = banmf.BANMF(
        k,
        max_iter=iters,
        random_state=0,
        dtype=dtype,
        **PAPER,
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


def run_sklearn(n, m, nnz, k, iters, dtype, degrees=None):
    import warnings

    from sklearn.decomposition import NMF

    X = _data(n, m, nnz, degrees).astype(dtype)
    diffs = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning: max_iter is small on purpose
        # Small problems: three pairs of fits and the median difference (single pairs are noisy).
        for _ in range(3 if nnz <= 10**6 else 1):
            times = []
            for t in (iters, 2 * iters):
                t0 = time.perf_counter()
                NMF(k, solver="mu", init="random", max_iter=t, tol=0, random_state=0).fit(X)
                times.append(time.perf_counter() - t0)
            diffs.append((times[1] - times[0]) / iters)
    return {"iter": float(np.median(diffs)), "peak": _peak_mb()}


def machine_peak(dtype) -> float:
    """Median GFLOP/s of a 2000×2000 matmul (numpy BLAS, all threads)."""
    a = np.random.default_rng(0).random((2000, 2000)).astype(dtype)
    a @ a
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        a @ a
        times.append(time.perf_counter() - t0)
    return 2 * 2000**3 / np.median(times) / 1e9


def stream_triad() -> float:
    """GB/s of a STREAM-like triad ``a = b + s·c`` over 2²⁴ float64 (3 × 128 MiB, far past
    the caches) with Numba on every thread: the machine's memory bandwidth as a kernel sees it
    (bytes counted: two reads and one write per element, no write-allocate)."""
    from numba import njit, prange

    @njit(parallel=True, cache=False)
    def triad(a, b, c, s):
        for i in prange(a.shape[0]):
            a[i] = b[i] + s * c[i]

    n = 1 << 24
    a, b, c = np.zeros(n), np.ones(n), np.full(n, 2.0)
    triad(a, b, c, 3.0)
    times = []
    for _ in range(9):
        t0 = time.perf_counter()
        triad(a, b, c, 3.0)
        times.append(time.perf_counter() - t0)
    return 3 * 8 * n / np.median(times) / 1e9


def kernel_costs(n, m, nnz, k, itemsize) -> dict:
    """Per MU kernel: (multiply-adds, bytes at least moved from memory) of one call, counting
    each stream once: indices and Y per nonzero, a row of k values per row of W (read, and
    written where updated) and of Y Hᵀ or the Wᵀ Y partial; the gathered rows of Hᵀ (m rows)
    are counted once, as if cached."""
    row = k * itemsize
    return {
        # Y pass: W[i]·Ht[j] and y·Ht[j] per nonzero; reads indices, y, W, Ht; writes y, Y Hᵀ.
        "Y pass": (2 * nnz * k, nnz * (4 + 2 * itemsize) + n * 2 * row + m * row),
        # W update: the k×k Gram against each row, and WᵀW; reads W and Y Hᵀ, writes W.
        "W update": (2 * n * k * k, 3 * n * row),
        # Scatter: y·W[i] into a partial row per nonzero; reads indices, y, W, the partials.
        "scatter": (nnz * k, nnz * (4 + itemsize) + n * row + 2 * m * row),
        "H update": (2 * m * k * k, 3 * m * row),
        # The W update and the scatter in one parallel call, as an iteration on several
        # threads runs them (then Wᵀ Y's partials summed): the two kernels' costs.
        "W step, one call": (
            2 * n * k * k + nnz * k,
            3 * n * row + nnz * (4 + itemsize) + 2 * m * row,
        ),
    }


def run_kernels(k, dtype, degrees, iters) -> dict:
    """Median seconds of each MU kernel call of an iteration (the library's own solver, on the
    budget's threads), alternating the kernels within each iteration."""
    from banmf.engine.iterations import MUSolver
    from banmf.io import Dataset

    X = _data(*DEGREES_SIZE[:3], degrees)
    n, m = X.shape
    rng = np.random.default_rng(0)
    W0 = (rng.random((n, k)) + 0.01).astype(dtype)
    Ht0 = (rng.random((m, k)) + 0.01).astype(dtype)
    solver = MUSolver(Dataset(X), W0, Ht0, project=True, lower=1.0, upper=float(k), eps=1e-12)
    calls = {
        "Y pass": solver.step_y,
        "W update": lambda: solver._update_w(
            solver._W, solver.YHt, solver.HHt_t, 0.0, solver.eps, solver.WtW_blocks, None
        ),
        "scatter": lambda: solver._scatter_pass(
            solver.indptr, solver.indices, solver.y, solver.WtY, True
        ),
        "H update": lambda: solver.step_h(0.0),
        # (fused only where the solver runs on several threads; the sum left to the H step
        # is done here, so that the H update above stays the update alone)
        "W step, one call": lambda: (solver.step_w(0.0), solver._sum_wty()),
    }
    times: dict[str, list] = {name: [] for name in calls}
    for _ in range(iters + 1):  # the first round compiles
        for name, call in calls.items():
            t0 = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - t0)
    return {
        "n": n,
        "m": m,
        "nnz": X.nnz,
        **{n_: float(np.median(t[1:])) for n_, t in times.items()},
    }


def kernel_table(kinds, ks, dtype, quick=False) -> None:
    """Each MU kernel's time, and the share of the measured memory bandwidth (STREAM-like
    triad) and multiply-add peak (dense matmul) it reaches, on data shaped like users' data."""
    iters = 5 if quick else 15
    bandwidth = _in_child(stream_triad)
    peak = _in_child(machine_peak, dtype)
    print(
        f"\nKernels of one iteration ({iters} calls each, median; same data as the degree table): "
        f"measured memory bandwidth {bandwidth:.1f} GB/s (triad), multiply-add peak "
        f"{peak:.1f} GFLOP/s (matmul); a kernel's GB/s counts the bytes it must at least move, "
        "its GFLOP/s two per multiply-add",
        flush=True,
    )
    print("| data | k | kernel | ms | GB/s | % bandwidth | GFLOP/s | % peak |")
    print("|---|---|---|---|---|---|---|---|", flush=True)
    for kind in kinds:
        for k in ks:
            t = _in_child(run_kernels, k, dtype, kind, iters)
            costs = kernel_costs(t["n"], t["m"], t["nnz"], k, dtype.itemsize)
            for name, (fma, nbytes) in costs.items():
                gb, gf = nbytes / t[name] / 1e9, 2 * fma / t[name] / 1e9
                cells = [
                    DEGREES[kind][0],
                    k,
                    name,
                    f"{1e3 * t[name]:.3g}",
                    f"{gb:.1f}",
                    f"{100 * gb / bandwidth:.0f} %",
                    f"{gf:.1f}",
                    f"{100 * gf / peak:.0f} %",
                ]
                print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)


def flops(n, m, nnz, k) -> float:
    return 6.0 * k * nnz + 4.0 * k * k * (n + m)


_STARTUP = """
import time
t0 = time.perf_counter()
import numpy as np
import banmf
X = banmf.make_boolean(200, 100, 5, 0.3, random_state=0)[0]
first = []
banmf.BANMF(5, max_iter=20, random_state=0, callback=lambda t, f: first.append(time.perf_counter())).fit(X)
print(first[0] - t0, time.perf_counter() - t0)
"""

#: The platform's share of a start-up: the same imports and one cached parallel kernel of one
#: line, which loads Numba's CPU target (and, through its BLAS check, scipy.linalg).
_FLOOR = """
import time
t0 = time.perf_counter()
import numpy as np
import scipy.sparse
import numba

@numba.njit(cache=True, parallel=True)
def total(a):
    s = 0.0
    for i in numba.prange(a.shape[0]):
        s += a[i]
    return s

total(np.ones(3))
print(time.perf_counter() - t0)
"""


def startup() -> dict:
    """Fresh processes: banmf to its first iteration and through a default fit, with an empty
    and with a warm kernel cache; and the platform floor (warm)."""
    import os
    import subprocess
    import tempfile

    def run(script, cwd, env):
        done = subprocess.run(
            [sys.executable, script], cwd=cwd, env=env, check=True, capture_output=True, text=True
        )
        return [float(v) for v in done.stdout.split()]

    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "NUMBA_CACHE_DIR": os.path.join(tmp, "cache")}
        for name, text in (("banmf_start.py", _STARTUP), ("floor.py", _FLOOR)):
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        cold, warm = (run("banmf_start.py", tmp, env) for _ in range(2))
        run("floor.py", tmp, env)
        # Medians of five: single start-ups vary by ±0.1 s on this machine.
        warm_first = float(np.median([run("banmf_start.py", tmp, env)[0] for _ in range(5)]))
        floor = float(np.median([run("floor.py", tmp, env)[0] for _ in range(5)]))
    return {"cold": cold, "warm": warm, "warm_first": warm_first, "floor": floor}


def run_targets(dtype):
    """LUCAP0, k=10: 1000 iterations + booleanization; 500×500 d=0.5 k=5: BANMF vs PNL-PF."""
    from banmf.datasets import load_lucap0

    X = load_lucap0().X
    banmf.BANMF(10, max_iter=2, dtype=dtype, **PAPER).fit(X)  # compile outside the timing
    t0 = time.perf_counter()
    banmf.BANMF(10, max_iter=1000, random_state=0, dtype=dtype, **PAPER).fit(X)
    lucap_paper = time.perf_counter() - t0
    t0 = time.perf_counter()
    banmf.BANMF(10, random_state=0, dtype=dtype).fit(X)
    lucap_default = time.perf_counter() - t0
    X5, _, _ = banmf.make_boolean(500, 500, 5, 0.5, random_state=0)
    banmf.BANMF(5, max_iter=2, dtype=dtype, **PAPER).fit(X5)  # compile outside the timing
    t0 = time.perf_counter()
    banmf.BANMF(5, max_iter=1000, random_state=0, dtype=dtype, **PAPER).fit(X5)
    ours = time.perf_counter() - t0
    # PNL-PF's own iterations: the difference of a 60- and a 30-iteration fit (same NMF start).
    pn = []
    for it in (30, 60):
        t0 = time.perf_counter()
        banmf.PNLPF(5, max_iter=it, tol=None, random_state=0).fit(X5)
        pn.append(time.perf_counter() - t0)
    pnlpf_1000 = (pn[1] - pn[0]) / 30 * 1000
    return {
        "lucap_paper": lucap_paper,
        "lucap_default": lucap_default,
        "banmf_500": ours,
        "pnlpf_500": pnlpf_1000,
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
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes",
        nargs="*",
        choices=list(SIZES),
        default=list(SIZES),
        help="sizes of the first table; give none to skip it",
    )
    parser.add_argument("--ks", nargs="+", type=int, default=[10, 32, 64])
    parser.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    parser.add_argument(
        "--quick", action="store_true", help="sizes i, i5 and ii only, fewer iterations"
    )
    parser.add_argument(
        "--degrees",
        nargs="*",
        choices=list(DEGREES),
        default=list(DEGREES),
        help="data shapes of the degree table (10⁶ nonzeros and retail); give none to skip it",
    )
    parser.add_argument(
        "--kernels",
        nargs="*",
        choices=[kind for kind in DEGREES if kind != "retail"],
        default=["poisson", "powerlaw"],
        help="data shapes of the kernel table (each kernel's share of the measured bandwidth "
        "and peak); give none to skip it",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="alternated (BANMF, scikit-learn) pairs of processes per row of the degree table",
    )
    parser.add_argument("--no-extras", action="store_true", help="skip start-up and target rows")
    args = parser.parse_args(argv)
    sizes = [s for s in args.sizes if not (args.quick and s == "iii")]
    dtype = np.dtype(args.dtype)
    peak = _in_child(machine_peak, dtype)
    print(
        f"dtype {dtype.name}, banmf {banmf.__version__}, numba threads {_threads()}, "
        f"measured matmul peak {peak:.1f} GFLOP/s\n",
        flush=True,
    )
    if sizes:
        print(
            "| size | k | BANMF s/it | GFLOP/s | % peak | sklearn MU s/it | ratio | scipy s/it "
            "| ratio | dense s/it | ratio | booleanize s | peak MB |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    for key in sizes:
        label, n, m, nnz, iters = SIZES[key]
        if args.quick:
            iters = max(3, iters // 4)
        for k in args.ks:
            ours = _in_child(run_banmf, n, m, nnz, k, iters + 1, dtype)
            # Small problems: as many iterations as ours (the difference of two fits is noisy).
            sk_iters = iters if nnz <= 10**6 else max(2, iters // 4)
            sk = _in_child(run_sklearn, n, m, nnz, k, sk_iters, dtype)
            # The scipy iteration takes minutes at 10⁸ nonzeros; scikit-learn covers that size.
            ref = (
                _in_child(run_scipy, n, m, nnz, k, max(2, iters // 4), dtype)
                if nnz <= 10**7
                else None
            )
            dense_fits = 4 * n * m * dtype.itemsize <= DENSE_BUDGET_BYTES
            dense = (
                _in_child(run_dense, n, m, nnz, k, max(2, iters // 4), dtype)
                if dense_fits
                else None
            )
            gf = flops(n, m, ours["nnz"], k) / ours["iter"] / 1e9
            cells = [
                label,
                k,
                f"{ours['iter']:.4g}",
                f"{gf:.1f}",
                f"{100 * gf / peak:.0f} %",
                f"{sk['iter']:.4g}",
                f"{sk['iter'] / ours['iter']:.1f}×",
                f"{ref['iter']:.4g}" if ref else "—",
                f"{ref['iter'] / ours['iter']:.1f}×" if ref else "—",
                f"{dense['iter']:.4g}" if dense else "—",
                f"{dense['iter'] / ours['iter']:.1f}×" if dense else "—",
                f"{ours['boolean']:.3g}",
                f"{ours['peak']:.0f}",
            ]
            print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)
    if args.degrees:
        degree_table(args.degrees, args.ks, dtype, quick=args.quick, repeats=args.repeats)
    if args.kernels:
        kernel_table(args.kernels, args.ks, dtype, quick=args.quick)
    if not args.no_extras:
        st = startup()
        print(
            f"\nstart-up, fresh process to first iteration: {st['cold'][0]:.2f} s with an empty "
            f"kernel cache, {st['warm_first']:.2f} s cached (median of 5; whole default fit: "
            f"{st['cold'][1]:.2f} s / {st['warm'][1]:.2f} s); the platform alone (numpy, "
            f"scipy.sparse, numba and a one-line cached parallel kernel): {st['floor']:.2f} s"
        )
        t = _in_child(run_targets, dtype)
        print(
            f"LUCAP0 k=10, 1000 iterations + booleanization (paper configuration): "
            f"{t['lucap_paper']:.2f} s; default fit (restarts, thresholds, polish): "
            f"{t['lucap_default']:.2f} s"
        )
        print(
            f"500×500 d=0.5 k=5, 1000 iterations: BANMF {t['banmf_500']:.2f} s, PNL-PF "
            f"{t['pnlpf_500']:.2f} s (from its per-iteration time): "
            f"{t['pnlpf_500'] / t['banmf_500']:.1f}× faster",
            flush=True,
        )
    return 0


def degree_table(kinds, ks, dtype, quick=False, repeats=3) -> list[dict]:
    """Per-iteration time on data shaped like users' data, against scikit-learn's MU on the same
    matrix and against our own time on equal row counts at the same k: ``repeats`` alternated
    pairs of processes per row, medians, and the range of the pairs' ratios. Prints a table."""
    n, m, nnz, iters = DEGREES_SIZE
    if quick:
        iters = max(3, iters // 4)
    kinds = list(kinds)
    if "equal" not in kinds:  # the reference of the "× equal" column
        kinds.insert(0, "equal")
    print(
        f"\nDegree skew: {n:,}×{m:,} with {nnz:,} nonzeros (make_sparse_degrees, exponent "
        f"2.5) and the retail data; {iters} timed iterations, {repeats} alternated pairs of "
        "processes per row (medians; the pairs' ratios from lowest to highest)",
        flush=True,
    )
    print(
        "| data | rows max/mean | cols max/mean | k | BANMF s/it | × equal rows | sklearn MU s/it "
        "| ratio | pairs' ratios |"
    )
    print("|---|---|---|---|---|---|---|---|---|", flush=True)
    equal, results = {}, []
    for kind in kinds:
        label = DEGREES[kind][0]
        skew = _in_child(degree_skew, kind)
        for k in ks:
            ours, theirs = [], []
            for _ in range(max(1, repeats)):
                ours.append(_in_child(run_banmf, n, m, nnz, k, iters + 1, dtype, kind)["iter"])
                theirs.append(_in_child(run_sklearn, n, m, nnz, k, iters, dtype, kind)["iter"])
            mine, sk = float(np.median(ours)), float(np.median(theirs))
            pairs = sorted(t / o for o, t in zip(ours, theirs))
            if kind == "equal":
                equal[k] = mine
            results.append(
                {
                    "data": kind,
                    "k": k,
                    "banmf": mine,
                    "sklearn": sk,
                    "pairs": pairs,
                    "rows_skew": skew[0],
                    "cols_skew": skew[1],
                }
            )
            cells = [
                label,
                f"{skew[0]:.1f}",
                f"{skew[1]:.1f}",
                k,
                f"{mine:.4g}",
                f"{mine / equal[k]:.2f}×",
                f"{sk:.4g}",
                f"{sk / mine:.1f}×",
                ", ".join(f"{r:.1f}" for r in pairs),
            ]
            print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)
    return results


def _threads() -> str:
    """Numba's thread count and threading layer (banmf's choice of layer made first)."""
    import numba

    banmf.effective_n_jobs()
    return f"{numba.get_num_threads()} ({numba.threading_layer()})"


if __name__ == "__main__":
    sys.exit(main())
