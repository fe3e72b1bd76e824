"""Experiment 2 (paper §5): error under iid flip noise, 50×50, d=0.5, k=5, every method.

Error is reported against the noisy X (what the method sees) and against the clean X (what it
should find); the paper does not say which it used.

    python scripts/noise.py [--quick] [--seeds 100] [--out results/noise] [--jobs 2]
"""

from __future__ import annotations

import sys
import time

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

LEVELS = [0.0, 0.01, 0.05]


def one(task):
    seed, noise, n, k, d, methods = task
    X, W0, H0 = banmf.make_boolean(n, n, k, d, noise=noise, random_state=seed)
    clean = banmf.boolean_product(W0, H0)
    truth = banmf.boolean_error(X, W0, H0)
    rows = []
    for method in methods:
        r = factorize(X, k, method, seed)
        err_clean = banmf.boolean_error(clean, r.W, r.H)
        rows.append(
            {
                "noise": noise,
                "seed": seed,
                "method": method,
                "error_noisy": r.error,
                "relative_error_noisy": r.relative_error,
                "error_clean": err_clean,
                "relative_error_clean": err_clean / max(clean.nnz, 1),
                "planted_error_noisy": truth,
                "seconds": r.seconds,
            }
        )
    return rows


def main(argv=None) -> int:
    p = parser(__doc__, "noise")
    p.add_argument("--seeds", type=int, default=100)
    p.add_argument("--methods", nargs="+", default=ALL_METHODS)
    args = p.parse_args(argv)
    n, k, d = (20, 3, 0.5) if args.quick else (50, 5, 0.5)
    seeds = 2 if args.quick else args.seeds
    out = out_dir(args.out)
    start = time.time()
    tasks = [(s, e, n, k, d, args.methods) for e in LEVELS for s in range(seeds)]
    rows = [r for chunk in run_tasks(one, tasks, args.jobs, "noise") for r in chunk]
    write_csv(out / "runs.csv", rows)
    noisy = summarize(rows, ["method", "noise"], "relative_error_noisy")
    clean = summarize(rows, ["method", "noise"], "relative_error_clean")
    write_csv(
        out / "summary.csv",
        [{**a, "against": "noisy"} for a in noisy] + [{**c, "against": "clean"} for c in clean],
    )
    write_params(
        out / "params.json",
        {
            "experiment": "noise",
            "n": n,
            "k": k,
            "density": d,
            "noise": LEVELS,
            "noise_kind": "iid",
            "seeds": seeds,
            "methods": args.methods,
        },
        time.time() - start,
    )
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for ax, summary, what in zip(axes, (noisy, clean), ("noisy X (observed)", "clean X (planted)")):
        for method in args.methods:
            cells = [
                next(s for s in summary if s["method"] == method and s["noise"] == e)
                for e in LEVELS
            ]
            ax.errorbar(
                [100 * e for e in LEVELS],
                [c["mean"] for c in cells],
                yerr=[c["std"] for c in cells],
                marker="o",
                capsize=3,
                label=method,
            )
        ax.set_xlabel("noise (% of entries flipped)")
        ax.set_title(f"error against the {what}")
    axes[0].set_ylabel("Boolean relative error |X − W⊗H| / nnz")
    axes[1].legend(fontsize=8)
    fig.suptitle(f"{n}×{n}, d={d}, k={k}, {seeds} matrices per level (mean ± std)")
    savefig(fig, out / "noise.png")
    for e in LEVELS:
        print(
            f"noise={e}: "
            + ", ".join(f"{s['method']} {s['mean']:.4f}" for s in noisy if s["noise"] == e)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
