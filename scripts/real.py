"""Experiment 5 (paper §5): error vs k on Zoo, votes and LUCAP0, and rank-3 Zoo reconstructions.

python scripts/real.py [--quick] [--out results/real] [--jobs 2]
"""

from __future__ import annotations

import sys
import time

import numpy as np
from _common import (
    ALL_METHODS,
    estimator,
    factorize,
    out_dir,
    parser,
    pyplot,
    savefig,
    write_csv,
    write_params,
)

import banmf
from banmf.datasets import load_lucap0, load_votes, load_zoo

DATASETS = {
    "zoo": lambda: load_zoo("15"),
    "votes": lambda: load_votes("232"),
    "lucap0": load_lucap0,
}


def sweep(name: str, ks: list[int], methods: list[str], jobs: int) -> list[dict]:
    """Every method at every k on one dataset: one ``banmf.fit_many`` over all the fits, which
    run side by side on ``jobs`` threads."""
    X = DATASETS[name]().X
    fits = [(k, method, estimator(method, k, 0)) for method in methods for k in ks]
    start = time.monotonic()
    banmf.fit_many([est for _, _, est in fits], X, n_jobs=jobs)
    sys.stderr.write(f"real: {name}, {len(fits)} fits ({time.monotonic() - start:.0f} s)\n")
    return [
        {
            "dataset": name,
            "k": k,
            "method": method,
            "seed": 0,
            "error": est.reconstruction_err_,
            "relative_error": est.relative_error_,
            "seconds": est.fit_seconds_,
        }
        for k, method, est in fits
    ]


def order(F):
    return np.lexsort([~F[:, l] for l in reversed(range(F.shape[1]))])


def main(argv=None) -> int:
    p = parser(__doc__, "real")
    p.add_argument("--methods", nargs="+", default=ALL_METHODS)
    p.add_argument("--kmax", type=int, default=10)
    args = p.parse_args(argv)
    names = ["zoo", "votes"] if args.quick else list(DATASETS)
    ks = [1, 3] if args.quick else list(range(1, args.kmax + 1))
    methods = args.methods
    out = out_dir(args.out)
    start = time.time()
    rows = [row for name in names for row in sweep(name, ks, methods, args.jobs)]
    write_csv(out / "runs.csv", rows)
    plt = pyplot()
    fig, axes = plt.subplots(1, len(names), figsize=(5 * len(names), 4.2))
    for ax, name in zip(np.atleast_1d(axes), names):
        for method in methods:
            pts = sorted(
                (r["k"], r["relative_error"])
                for r in rows
                if r["dataset"] == name and r["method"] == method
            )
            ax.plot(*zip(*pts), marker="o", ms=3, label=method)
        ax.set_title(name)
        ax.set_xlabel("k")
    np.atleast_1d(axes)[0].set_ylabel("Boolean relative error |X − W⊗H| / nnz")
    np.atleast_1d(axes)[-1].legend(fontsize=8)
    savefig(fig, out / "real_error_vs_k.png")
    # rank-3 Zoo reconstructions, one panel per method, rows/columns ordered by the data's BANMF factors
    zoo = load_zoo("15").X
    fits = {m: factorize(zoo, 3, m, 0) for m in methods}
    ref = fits[methods[0]]
    rows_o, cols_o = order(ref.W), order(ref.H.T)
    fig, axes = plt.subplots(
        1, len(methods) + 1, figsize=(2.2 * (len(methods) + 1), 5), sharey=True
    )
    axes[0].imshow(
        ~zoo.toarray()[np.ix_(rows_o, cols_o)], cmap="gray", aspect="auto", interpolation="nearest"
    )
    axes[0].set_title("Zoo data")
    for ax, m in zip(axes[1:], methods):
        R = banmf.boolean_product(fits[m].W, fits[m].H).toarray()[np.ix_(rows_o, cols_o)]
        ax.imshow(~R, cmap="gray", aspect="auto", interpolation="nearest")
        ax.set_title(f"{m}\nerr {fits[m].relative_error:.3f}", fontsize=9)
    savefig(fig, out / "zoo_rank3.png")
    write_params(
        out / "params.json",
        {
            "experiment": "real",
            "datasets": names,
            "ks": ks,
            "methods": methods,
            "zoo_variant": "15 Boolean attributes",
            "votes_variant": "232 complete rows",
            "seed": 0,
        },
        time.time() - start,
    )
    for name in names:
        for k in ks:
            cells = {
                r["method"]: r["relative_error"]
                for r in rows
                if r["dataset"] == name and r["k"] == k
            }
            print(f"{name} k={k}: " + ", ".join(f"{m} {cells[m]:.3f}" for m in methods))
    return 0


if __name__ == "__main__":
    sys.exit(main())
