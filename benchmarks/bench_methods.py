"""Every registered method on the paper's planted generator: mean error and median fit time.

    python benchmarks/bench_methods.py [--seeds 20] [--n 50] [--k 5] [--densities 0.2 0.5 0.8]

Error is the Boolean relative error |X − W⊗H| / nnz(X) (noiseless X), averaged over seeds;
"exact" counts the seeds recovered with zero error. Each method runs with its defaults
(1000 iterations for the MU methods, the τ sweep for ASSO, unlimited-k GreConD capped at k).
Fits run one after another so that the times are comparable.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import banmf


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--densities", type=float, nargs="+", default=[0.2, 0.5, 0.8])
    parser.add_argument("--methods", nargs="+", default=sorted(banmf.METHODS))
    args = parser.parse_args(argv)
    # compile once outside the timings
    X, _, _ = banmf.make_boolean(10, 10, 2, 0.5, random_state=0)
    for method in args.methods:
        banmf.factorize(X, 2, method=method, random_state=0)
    cols = " ".join(f"{f'd={d}':>22}" for d in args.densities)
    print(
        f"{args.n}×{args.n}, k={args.k}, {args.seeds} seeds; cells: mean rel. error (exact/seeds) median s"
    )
    print(f"{'method':<16} {cols}", flush=True)
    for method in args.methods:
        cells = []
        for d in args.densities:
            errs, times, exact = [], [], 0
            for seed in range(args.seeds):
                X, _, _ = banmf.make_boolean(args.n, args.n, args.k, d, random_state=seed)
                r = banmf.factorize(X, args.k, method=method, random_state=seed)
                errs.append(r.relative_error)
                times.append(r.seconds)
                exact += r.error == 0
            cells.append(f"{np.mean(errs):.4f} ({exact:>2}/{args.seeds}) {np.median(times):5.2f}")
        print(f"{method:<16} " + " ".join(f"{c:>22}" for c in cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
