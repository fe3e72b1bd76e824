"""Experiment 6: convergence of regularized BANMF (and BANMF) on a planted matrix.

Left: the relaxed objective per iteration (with the penalty for Reg-BANMF, whose λ ramps from
1e-4 to 1e10). Right: the Boolean error after runs of increasing length.

    python scripts/convergence.py [--quick] [--out results/convergence]
"""

from __future__ import annotations

import sys
import time

from _common import factorize, out_dir, parser, pyplot, savefig, write_csv, write_params

import banmf

LENGTHS = [10, 20, 50, 100, 200, 500, 1000, 2000]


def main(argv=None) -> int:
    p = parser(__doc__, "convergence")
    p.add_argument("--n", type=int, default=100)
    args = p.parse_args(argv)
    n, k, d, noise = (40, 3, 0.5, 0.01) if args.quick else (args.n, 5, 0.5, 0.01)
    lengths = LENGTHS[:4] if args.quick else LENGTHS
    out = out_dir(args.out)
    start = time.time()
    X, W0, H0 = banmf.make_boolean(n, n, k, d, noise=noise, random_state=0)
    planted = banmf.boolean_error(X, W0, H0) / X.nnz
    curves = {
        m: factorize(X, k, m, 0, max_iter=lengths[-1]).estimator.loss_curve_
        for m in ("reg-banmf", "banmf")
    }
    rows = []
    for m in ("reg-banmf", "banmf"):
        for length in lengths:
            r = factorize(X, k, m, 0, max_iter=length)
            rows.append(
                {
                    "method": m,
                    "iters": length,
                    "relative_error": r.relative_error,
                    "seconds": r.seconds,
                }
            )
    write_csv(out / "boolean_error.csv", rows)
    write_csv(
        out / "objective.csv",
        [
            {"iteration": t + 1, **{m: float(c[t]) for m, c in curves.items()}}
            for t in range(lengths[-1])
        ],
    )
    write_params(
        out / "params.json",
        {
            "experiment": "convergence",
            "n": n,
            "k": k,
            "density": d,
            "noise": noise,
            "planted_relative_error": planted,
            "lengths": lengths,
        },
        time.time() - start,
    )
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for m, c in curves.items():
        axes[0].semilogy(range(1, len(c) + 1), c, label=m)
        pts = [(r["iters"], r["relative_error"]) for r in rows if r["method"] == m]
        axes[1].semilogx(*zip(*pts), marker="o", label=m)
    axes[1].axhline(planted, color="gray", ls="--", label="planted factors")
    axes[0].set_xlabel("iteration")
    axes[0].set_ylabel("relaxed objective (with penalty)")
    axes[1].set_xlabel("iterations in the run")
    axes[1].set_ylabel("Boolean relative error")
    for ax in axes:
        ax.legend()
    fig.suptitle(f"{n}×{n}, k={k}, d={d}, {int(noise * 100)}% noise")
    savefig(fig, out / "convergence.png")
    for r in rows:
        print(f"{r['method']} {r['iters']:>5} iterations: {r['relative_error']:.4f}")
    print(f"planted factors: {planted:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
