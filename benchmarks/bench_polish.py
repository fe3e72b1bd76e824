"""Cost of the Boolean refinements against BANMF iterations, on 100,000×10,000 with 10⁶ nonzeros.

    python benchmarks/bench_polish.py [--ks 8 16 32] [--n 100000 --m 10000 --nnz 1000000]

For each k: the median BANMF iteration (paper configuration, 30 iterations), then, starting from
its booleanized factors, one sweep of per-factor threshold descent, one polish round (both
half-steps; ``method="auto"``, which picks the flips here) and the polish run to its end. Costs
are reported in seconds and in BANMF iterations measured in the same process. The matrix is
uniformly random (no planted structure), so the error barely moves: this measures cost only.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import banmf


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ks", nargs="+", type=int, default=[8, 16, 32])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--m", type=int, default=10_000)
    parser.add_argument("--nnz", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    X = banmf.make_sparse_uniform(args.n, args.m, args.nnz, random_state=0)
    print(f"{args.n}×{args.m}, {X.nnz} nonzeros\n")
    print(
        "| k | BANMF s/it | method | threshold sweep s (its) | polish round s (its) | full polish s, rounds | error grid → sweep → polish |"
    )
    print("|---|---|---|---|---|---|---|", flush=True)
    paper = {**banmf.PAPER_CONFIG, "tol": "auto"}
    for k in args.ks:
        banmf.BANMF(k, max_iter=2, **paper).fit(X)  # compile outside the timings
        stamps: list[float] = []
        model = banmf.BANMF(
            k,
            max_iter=30,
            random_state=0,
            **paper,
            callback=lambda t, f, out=stamps: out.append(time.perf_counter()),
        ).fit(X)
        it = float(np.median(np.diff(stamps)))
        k_ = model.W_.shape[1]
        t0 = time.perf_counter()
        ref = banmf.refine_thresholds(
            X,
            model.W_continuous_,
            model.H_continuous_,
            np.full(k_, model.grid_thresholds_[0]),
            np.full(k_, model.grid_thresholds_[1]),
            max_sweeps=1,
        )
        sweep = time.perf_counter() - t0
        t0 = time.perf_counter()
        one = banmf.polish(X, model.W_, model.components_, max_rounds=1)
        round_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        full = banmf.polish(X, model.W_, model.components_)
        full_s = time.perf_counter() - t0
        print(
            f"| {k} | {it:.4f} | {full.info['method']} | {sweep:.3f} ({sweep / it:.1f}) "
            f"| {round_s:.3f} ({round_s / it:.1f}) | {full_s:.3f}, {full.n_iter} "
            f"| {model.reconstruction_err_} → {ref.error} → {full.error} (one round: {one.error}) |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
