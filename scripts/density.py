"""Experiment 1 (paper §5): error vs density on 50×50, k=5 planted matrices, every method.

python scripts/density.py [--quick] [--seeds 100] [--out results/density] [--jobs 2]
"""

from __future__ import annotations

import sys
import time

import numpy as np
from _common import (
    ALL_METHODS,
    factorize,
    out_dir,
    parser,
    pyplot,
    run_tasks,
    savefig,
    summarize,
    write_csv,
    write_params,
)

import banmf


def one(task):
    seed, d, n, k, methods = task
    X, _, _ = banmf.make_boolean(n, n, k, d, random_state=seed)
    rows = []
    for method in methods:
        r = factorize(X, k, method, seed)
        rows.append(
            {
                "density": d,
                "seed": seed,
                "method": method,
                "error": r.error,
                "relative_error": r.relative_error,
                "seconds": r.seconds,
            }
        )
    return rows


def main(argv=None) -> int:
    p = parser(__doc__, "density")
    p.add_argument("--seeds", type=int, default=100)
    p.add_argument("--methods", nargs="+", default=ALL_METHODS)
    args = p.parse_args(argv)
    n, k, densities = (20, 3, [0.2, 0.5, 0.8]) if args.quick else (50, 5, [0.2, 0.5, 0.8])
    seeds = 2 if args.quick else args.seeds
    out = out_dir(args.out)
    start = time.time()
    tasks = [(s, d, n, k, args.methods) for d in densities for s in range(seeds)]
    rows = [r for chunk in run_tasks(one, tasks, args.jobs, "density") for r in chunk]
    write_csv(out / "runs.csv", rows)
    summary = summarize(rows, ["method", "density"], "relative_error")
    write_csv(out / "summary.csv", summary)
    write_params(
        out / "params.json",
        {
            "experiment": "density",
            "n": n,
            "m": n,
            "k": k,
            "densities": densities,
            "seeds": seeds,
            "methods": args.methods,
            "method_params": "library defaults",
        },
        time.time() - start,
    )
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.8 / len(args.methods)
    for i, method in enumerate(args.methods):
        cells = [
            next(s for s in summary if s["method"] == method and s["density"] == d)
            for d in densities
        ]
        ax.bar(
            np.arange(len(densities)) + i * width,
            [c["mean"] for c in cells],
            width,
            yerr=[c["std"] for c in cells],
            label=method,
            capsize=2,
        )
    ax.set_xticks(np.arange(len(densities)) + 0.4 - width / 2, [f"d = {d}" for d in densities])
    ax.set_ylabel("Boolean relative error |X − W⊗H| / nnz")
    ax.set_title(f"{n}×{n}, k={k}, {seeds} matrices per density (mean ± std)")
    ax.legend(fontsize=8, ncol=2)
    savefig(fig, out / "density.png")
    for d in densities:
        line = ", ".join(f"{s['method']} {s['mean']:.4f}" for s in summary if s["density"] == d)
        print(f"d={d}: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
