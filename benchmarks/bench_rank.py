"""Choosing k: how often each criterion of ``select_rank`` returns the planted rank.

    python benchmarks/bench_rank.py [--part planted real] [--sizes 100x100 1000x500]
        [--ks 3 5 10 15] [--densities 0.2 0.5] [--noises 0 0.01 0.05] [--seeds 5]
        [--jobs 2] [--out records.jsonl] [--quick]

``planted``: the paper's generator over the grid (n×m, true k, density d, noise: the share of
cells flipped; 5 seeds each), :func:`banmf.select_rank` over k = 1..20 with its defaults
(description length, 5-fold cross-validation and the agreement of the 5 fold fits; the search stops 3
ranks past the turn). Reports, per noise level, the share of problems where each criterion
and the combined choice return the true k, and within ±1.

``real``: the curves and the choice on the bundled Zoo, votes, LUCAP0 and mushroom (``--data``);
``--n-init 1`` makes every fit one start, for the larger sets.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np
from _records import run_tasks

import banmf

CHOICES = ("mdl", "cv", "stability", "combined")
REAL = {
    "zoo": lambda: banmf.datasets.load_zoo().X,
    "votes": lambda: banmf.datasets.load_votes().X,
    "lucap0": lambda: banmf.datasets.load_lucap0().X,
    "mushroom": lambda: banmf.datasets.load_mushroom().X,
}


def run(task) -> dict:
    size, k, density, noise, seed, max_k, params, threads = task
    import numba

    if threads:
        numba.set_num_threads(threads)
    n, m = (int(v) for v in size.split("x"))
    X, _, _ = banmf.make_boolean(n, m, k, density, noise=noise, random_state=seed)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sel = banmf.select_rank(X, range(1, max_k + 1), random_state=seed, **params)
    return {
        "size": size,
        "k": k,
        "density": density,
        "noise": noise,
        "seed": seed,
        **{name: int(v) for name, v in sel.choices.items()},
        "combined": int(sel.best_k),
        "tried": sel.ks[-1],
        "seconds": round(time.perf_counter() - start, 2),
    }


def planted_table(records: list) -> None:
    """Shares of exact (and ±1) choices per size and noise level, then per size and true k."""
    print("\nshare of problems where the choice is the planted k (within ±1)")
    for by, label, show in (("noise", "noise", lambda v: f"{100 * v:g} %"), ("k", "true k", str)):
        print(f"\n| size | {label} | problems | " + " | ".join(CHOICES) + " | median seconds |")
        print("|---|---|---|" + "---|" * len(CHOICES) + "---|")
        for size in sorted({r["size"] for r in records}):
            for value in sorted({r[by] for r in records}):
                rows = [r for r in records if r["size"] == size and r[by] == value]
                if not rows:
                    continue
                cells = []
                for name in CHOICES:
                    exact = np.mean([r[name] == r["k"] for r in rows])
                    near = np.mean([abs(r[name] - r["k"]) <= 1 for r in rows])
                    cells.append(f"{100 * exact:.0f} % ({100 * near:.0f} %)")
                seconds = np.median([r["seconds"] for r in rows])
                print(
                    f"| {size} | {show(value)} | {len(rows)} | "
                    + " | ".join(cells)
                    + f" | {seconds:.1f} |"
                )


def real_curves(max_k: int, names, params: dict) -> None:
    for name in names:
        load = REAL[name]
        X = load()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sel = banmf.select_rank(X, range(1, max_k + 1), random_state=0, **params)
        print(f"\n### {name} ({X.shape[0]}×{X.shape[1]}), {sel.seconds:.0f} s\n")
        print("| k | error | bits | held-out error | agreement |")
        print("|---|---|---|---|---|")
        for row in sel.to_dict()["per_k"]:
            print(
                f"| {row['k']} | {row['training_error']} | {row['description_length']:.0f} | "
                f"{row['held_out_error']:.4f} ± {row['held_out_se']:.4f} | "
                f"{row['stability']:.3f} |"
            )
        print(f"\nchosen k = {sel.best_k}: {sel.reason}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--part", nargs="+", default=["planted", "real"])
    parser.add_argument("--sizes", nargs="+", default=["100x100", "1000x500"])
    parser.add_argument("--data", nargs="+", default=list(REAL), choices=list(REAL))
    parser.add_argument("--ks", type=int, nargs="+", default=[3, 5, 10, 15])
    parser.add_argument("--densities", type=float, nargs="+", default=[0.2, 0.5])
    parser.add_argument("--noises", type=float, nargs="+", default=[0.0, 0.01, 0.05])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--max-k", type=int, default=20, dest="max_k")
    parser.add_argument(
        "--n-init",
        type=int,
        dest="n_init",
        help="starts of every fit (default: the method's own, n_init='auto')",
    )
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", help="also write every record to this JSON-lines file")
    parser.add_argument("--quick", action="store_true", help="one small problem per noise level")
    parser.add_argument(
        "--tables", metavar="JSONL", help="print the table of earlier runs' records and exit"
    )
    args = parser.parse_args(argv)
    if args.tables:
        with open(args.tables) as f:
            planted_table([json.loads(line) for line in f if line.strip()])
        return 0
    params = {} if args.n_init is None else {"n_init": args.n_init}
    print(
        f"{os.cpu_count()} CPUs, --jobs {args.jobs}" + (f", n_init={args.n_init}" if params else "")
    )
    if "planted" in args.part:
        if args.quick:
            args.sizes, args.ks, args.densities, args.seeds, args.max_k = (
                ["40x30"],
                [3],
                [0.3],
                1,
                6,
            )
        tasks = [
            (size, k, d, noise, seed, args.max_k, params, 1 if args.jobs > 1 else 0)
            for size in args.sizes
            for k in args.ks
            for d in args.densities
            for noise in args.noises
            for seed in range(args.seeds)
        ]
        planted_table(run_tasks(run, tasks, args.jobs, args.out))
    if "real" in args.part:
        names = ["zoo"] if args.quick else [n for n in REAL if n in args.data]
        real_curves(6 if args.quick else args.max_k, names, params)
    return 0


if __name__ == "__main__":
    sys.exit(main())
