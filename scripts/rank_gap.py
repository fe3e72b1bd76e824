"""Experiment 3 (paper §5): error vs the lower bound of the Boolean rank gap.

Matrices: N, M ∈ {10..50}, k ∈ {2..6}, d ∈ {0.25, 0.5, 0.75}, 5 per setting, redrawn while
rank_R(X) < k; gap lower bound = rank_R(X) − k. The default is every (N, M) pair (126,075
matrices: many hours on 2 cores); ``--square-only`` keeps N = M (3,075 matrices).

    python scripts/rank_gap.py --square-only [--quick] [--out results/rank_gap] [--jobs 2]
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
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

import banmf

METHODS = ["nmf", "reg-nmf", "banmf", "reg-banmf", "pnlpf", "banmf (polished)"]


@dataclass(frozen=True)
class RankGapCase:
    """One matrix of the suite: X planted with rank k, and its real rank."""

    X: sp.csr_array
    n: int
    m: int
    k: int
    density: float
    repeat: int
    real_rank: int

    @property
    def gap(self) -> int:
        """Lower bound of the Boolean rank gap: ``rank_R(X) − k`` (numpy ``matrix_rank``)."""
        return self.real_rank - self.k


def rank_gap_case(n, m, k, density, repeat=0, *, max_redraws=1000, random_state=None):
    """One planted X (``banmf.make_boolean``), redrawn while its real rank is below k."""
    rng = np.random.default_rng(random_state)
    for _ in range(max_redraws):
        X, _, _ = banmf.make_boolean(n, m, k, density, random_state=rng)
        rank = int(np.linalg.matrix_rank(X.toarray().astype(np.float64)))
        if rank >= k:
            return RankGapCase(X, n, m, k, density, repeat, rank)
    raise RuntimeError(
        f"no {n}×{m} matrix of real rank ≥ {k} at d={density} in {max_redraws} draws"
    )


def settings(sizes, ranks, densities, repeats, *, square_only):
    """Every (n, m, k, d, repeat) of the suite: all (n, m) pairs of ``sizes``, or n = m."""
    pairs = [(s, s) for s in sizes] if square_only else [(a, b) for a in sizes for b in sizes]
    return [
        (n, m, k, d, rep)
        for n, m in pairs
        for k in ranks
        for d in densities
        for rep in range(repeats)
    ]


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
    square_only = args.square_only or args.quick
    grid = settings(sizes, ranks, densities, repeats, square_only=square_only)
    tasks = [(*setting, seed, args.methods) for seed, setting in enumerate(grid)]
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
            "pairs": len(sizes) if square_only else len(sizes) ** 2,
            "ranks": ranks,
            "densities": densities,
            "repeats": repeats,
            "matrices": len(tasks),
            "methods": args.methods,
            "square_only": bool(square_only),
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
    ax.set_title(f"{len(tasks)} matrices ({'N = M' if square_only else 'all N, M'})")
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
