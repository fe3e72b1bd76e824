"""Experiment 4 (paper §5): time for 1000 iterations vs size, and time to a settled Boolean error.

Square planted matrices, d=0.5, k=5. BANMF, NMF and PNL-PF each run exactly ``--iters``
iterations (PNL-PF with its stop rule off and a 1-iteration NMF start, so that the times
compare iterations; a real PNL-PF start, 1000 NMF iterations, is timed and reported apart).
Beyond 500 the sizes keep doubling while the next fit is predicted (4× the last) to stay under
``--budget`` seconds. Fits run one at a time with all cores, so times are comparable.

    python scripts/timing.py [--quick] [--budget 60] [--out results/timing]
"""

from __future__ import annotations

import sys
import time

import numpy as np
from _common import PAPER_BANMF, out_dir, parser, pyplot, savefig, write_csv, write_params

import banmf

METHODS = {"banmf": PAPER_BANMF, "nmf": {}, "pnlpf": {"tol": None, "init_iter": 1}}
CHECKPOINTS = [10, 20, 50, 100, 200, 500, 1000]
CONVERGENCE_PARAMS = {"pnlpf": {"init_iter": 1000}}


def timed(X, k, method, iters, seed=0):
    params = {**METHODS[method], "max_iter": iters}
    start = time.perf_counter()
    r = banmf.factorize(X, k, method=method, random_state=seed, **params)
    return time.perf_counter() - start, r


def main(argv=None) -> int:
    p = parser(__doc__, "timing")
    p.add_argument("--iters", type=int, default=1000)
    p.add_argument(
        "--budget",
        type=float,
        default=60.0,
        help="stop growing a method's size past this many seconds",
    )
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    iters = 50 if args.quick else args.iters
    base = [50, 100] if args.quick else [100, 200, 300, 400, 500]
    repeats = 1 if args.quick else args.repeats
    k, d = 5, 0.5
    out = out_dir(args.out)
    start = time.time()
    X0, _, _ = banmf.make_boolean(20, 20, 2, 0.5, random_state=0)
    for method in METHODS:  # compile outside the timings
        timed(X0, 2, method, 2)
    rows = []
    for method in METHODS:
        n = base[0]
        sizes = list(base)
        while sizes:
            n = sizes.pop(0)
            X, _, _ = banmf.make_boolean(n, n, k, d, random_state=n)
            secs = [timed(X, k, method, iters)[0] for _ in range(repeats)]
            rows.append(
                {"method": method, "n": n, "iters": iters, "seconds": float(np.median(secs))}
            )
            sys.stderr.write(f"{method} {n}×{n}: {np.median(secs):.3f} s\n")
            # doubling n quadruples the work: grow only while the next run should fit the budget
            if not sizes and not args.quick and 4 * np.median(secs) < args.budget:
                sizes.append(2 * n)
    write_csv(out / "times.csv", rows)
    # time to a settled Boolean error: fits of increasing length on one 200×200 matrix
    n_conv = 60 if args.quick else 200
    X, _, _ = banmf.make_boolean(n_conv, n_conv, k, d, random_state=1)
    conv = []
    for method in METHODS:
        for c in CHECKPOINTS[:3] if args.quick else CHECKPOINTS:
            # here PNL-PF gets its real start (1000 NMF iterations): its error depends on it
            params = {**METHODS[method], **CONVERGENCE_PARAMS.get(method, {}), "max_iter": c}
            start_fit = time.perf_counter()
            r = banmf.factorize(X, k, method=method, random_state=0, **params)
            conv.append(
                {
                    "method": method,
                    "iters": c,
                    "seconds": time.perf_counter() - start_fit,
                    "relative_error": r.relative_error,
                }
            )
    write_csv(out / "convergence.csv", conv)
    # PNL-PF's NMF start is part of its cost in practice: measure it on its own too
    init_secs = {}
    for n in base:
        X, _, _ = banmf.make_boolean(n, n, k, d, random_state=n)
        init_secs[n] = timed(X, k, "nmf", 1000)[0]
    write_params(
        out / "params.json",
        {
            "experiment": "timing",
            "k": k,
            "density": d,
            "iters": iters,
            "repeats": repeats,
            "budget_s": args.budget,
            "pnlpf_params": METHODS["pnlpf"],
            "pnlpf_convergence_params": CONVERGENCE_PARAMS["pnlpf"],
            "pnlpf_nmf_start_seconds_1000_iters": init_secs,
        },
        time.time() - start,
    )
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for method in METHODS:
        pts = [(r["n"], r["seconds"]) for r in rows if r["method"] == method]
        axes[0].loglog(*zip(*pts), marker="o", label=method)
        pts = [(r["iters"], r["relative_error"]) for r in conv if r["method"] == method]
        axes[1].semilogx(*zip(*pts), marker="o", label=method)
    axes[0].set_xlabel("n (n×n, d=0.5, k=5)")
    axes[0].set_ylabel(f"seconds for {iters} iterations")
    axes[0].legend()
    axes[1].set_xlabel("iterations in the run (PNL-PF: after a 1000-iteration NMF start)")
    axes[1].set_ylabel("Boolean relative error")
    axes[1].set_title(f"{n_conv}×{n_conv}: Boolean error vs time")
    axes[1].legend()
    savefig(fig, out / "timing.png")
    by = {(r["method"], r["n"]): r["seconds"] for r in rows}
    for n in base:
        if ("pnlpf", n) in by:
            print(
                f"{n}×{n}: banmf {by[('banmf', n)]:.3f} s, nmf {by[('nmf', n)]:.3f} s, pnlpf {by[('pnlpf', n)]:.3f} s, "
                f"pnlpf/banmf {by[('pnlpf', n)] / by[('banmf', n)]:.1f}x"
            )
    for method in METHODS:
        print(
            f"largest {method} under budget: {max(r['n'] for r in rows if r['method'] == method)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
