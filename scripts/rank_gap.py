"""Experiment 3 (paper §5): error vs the lower bound of the Boolean rank gap.

Matrices: N, M ∈ {10..50}, k ∈ {2..6}, d ∈ {0.25, 0.5, 0.75}, 5 per setting, redrawn while
rank_R(X) < k; gap lower bound = rank_R(X) − k. The default is every (N, M) pair (126,075
matrices: many hours on 2 cores); ``--square-only`` keeps N = M (3,075 matrices).

    python scripts/rank_gap.py --square-only [--quick] [--out results/rank_gap] [--jobs 2]
"""

from __future__ import annotations

import sys
import time

import numpy as np
from _common import (
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

from banmf.datasets import rank_gap_case

METHODS = ["nmf", "reg-nmf", "banmf", "reg-banmf", "pnlpf", "banmf (polished)"]


def one(task):
    n, m, k, d, rep, seed, methods = task
    case = rank_gap_case(n, m, k, d, rep, random_state=seed)
    rows = []
    for method in methods:
        r = factorize(case.X, k, method, seed)
        rows.append(
            {
                "n": n,
                "m": m,
                "k": k,
                "density": d,
                "repeat": rep,
                "real_rank": case.real_rank,
                "gap": case.gap,
                "method": method,
                "error": r.error,
                "relative_error": r.relative_error,
            }
        )
    return rows


def main(argv=None) -> int:
    p = parser(__doc__, "rank_gap")
    p.add_argument("--square-only", action="store_true")
    p.add_argument("--methods", nargs="+", default=METHODS)
    args = p.parse_args(argv)
    if args.quick:
        sizes, ranks, densities, repeats = [10, 20], [2, 4], [0.5], 1
    else:
        sizes, ranks, densities, repeats = (
            list(range(10, 51)),
            list(range(2, 7)),
            [0.25, 0.5, 0.75],
            5,
        )
    pairs = (
        [(s, s) for s in sizes]
        if (args.square_only or args.quick)
        else [(a, b) for a in sizes for b in sizes]
    )
    tasks = []
    for n, m in pairs:
        for k in ranks:
            for d in densities:
                for rep in range(repeats):
                    tasks.append((n, m, k, d, rep, len(tasks), args.methods))
    out = out_dir(args.out)
    start = time.time()
    rows = [r for chunk in run_tasks(one, tasks, args.jobs, "rank gap") for r in chunk]
    write_csv(out / "runs.csv", rows)
    for r in rows:
        r["gap_bin"] = min(r["gap"], 10) if r["gap"] < 10 else "10+"
    summary = summarize(rows, ["method", "gap_bin"], "relative_error")
    write_csv(out / "summary.csv", summary)
    write_params(
        out / "params.json",
        {
            "experiment": "rank_gap",
            "sizes": [sizes[0], sizes[-1]],
            "pairs": len(pairs),
            "ranks": ranks,
            "densities": densities,
            "repeats": repeats,
            "matrices": len(tasks),
            "methods": args.methods,
            "square_only": bool(args.square_only or args.quick),
        },
        time.time() - start,
    )
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    bins = sorted({s["gap_bin"] for s in summary}, key=lambda b: 99 if b == "10+" else b)
    for method in args.methods:
        cells = [
            next((s for s in summary if s["method"] == method and s["gap_bin"] == b), None)
            for b in bins
        ]
        xs = [i for i, c in enumerate(cells) if c]
        ax.errorbar(
            xs,
            [cells[i]["mean"] for i in xs],
            yerr=[cells[i]["std"] / np.sqrt(cells[i]["n"]) for i in xs],
            marker="o",
            capsize=3,
            label=method,
        )
    ax.set_xticks(range(len(bins)), [str(b) for b in bins])
    ax.set_xlabel("lower bound of the rank gap, rank_R(X) − k")
    ax.set_ylabel("Boolean relative error (mean ± s.e.)")
    ax.set_title(
        f"{len(tasks)} matrices ({'N = M' if args.square_only or args.quick else 'all N, M'})"
    )
    ax.legend(fontsize=8)
    savefig(fig, out / "rank_gap.png")
    for b in bins:
        print(
            f"gap {b}: "
            + ", ".join(
                f"{s['method']} {s['mean']:.4f} (n={s['n']})" for s in summary if s["gap_bin"] == b
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
