"""A/B time of one BANMF fit between source trees, measured in the same run.

    python benchmarks/bench_ab.py TREE_A TREE_B [--n 100000] [--m 10000] [--nnz 1000000]
                                  [--k 32] [--max-iter 50] [--repeats 5] [--config paper]

Each tree (a checkout of banmf: the folder holding ``banmf/``) is imported in its own fresh
process (``PYTHONPATH=TREE``), which generates the same matrix
(``banmf.make_sparse_degrees``, Poisson degrees, seed 0), compiles the kernels with a short
fit, then times ``repeats`` fits with ``n_components=k``: of the paper's configuration
(``--config paper``, ``banmf.PAPER_CONFIG``: one random start, all ``max_iter`` iterations,
global thresholds, no polish), or of the default pipeline (``--config default``: its starts,
thresholds, polish and swaps; ``max_iter`` is then the most iterations a start runs). The trees
alternate, repeat by repeat, so that a busy machine slows both
alike. Prints per tree the median fit time and the median time per iteration, and B's time
over A's, and appends a record to ``benchmarks/results/ab.jsonl`` (``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from _records import RESULTS, append_record, commit, provenance

CHILD = """
import json, sys, time
import banmf
n, m, nnz, k, max_iter = (int(v) for v in sys.argv[1:6])
X = banmf.make_sparse_degrees(n, m, nnz, random_state=0)
params = dict(banmf.PAPER_CONFIG if sys.argv[6] == "paper" else {}, random_state=0)
banmf.BANMF(k, max_iter=2, **params).fit(X)  # the kernels compiled (or loaded) first
start = time.perf_counter()
model = banmf.BANMF(k, max_iter=max_iter, **params).fit(X)
print(json.dumps({"seconds": time.perf_counter() - start, "error": model.reconstruction_err_,
                  "file": banmf.__file__}))
"""


def run(tree: str, args) -> dict:
    env = {**os.environ, "PYTHONPATH": tree}
    sizes = [str(v) for v in (args.n, args.m, args.nnz, args.k, args.max_iter, args.config)]
    out = subprocess.run(
        [sys.executable, "-c", CHILD, *sizes], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs=2)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--m", type=int, default=10_000)
    parser.add_argument("--nnz", type=int, default=1_000_000)
    parser.add_argument("--k", type=int, default=32)
    parser.add_argument("--max-iter", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--config", choices=("paper", "default"), default="paper")
    parser.add_argument("--out", default=str(RESULTS / "ab.jsonl"))
    args = parser.parse_args()
    times: dict[str, list[float]] = {tree: [] for tree in args.trees}
    errors: dict[str, set] = {tree: set() for tree in args.trees}
    for _ in range(args.repeats):
        for tree in args.trees:
            record = run(tree, args)
            times[tree].append(record["seconds"])
            errors[tree].add(record["error"])
    print(
        f"{args.n}x{args.m}, {args.nnz} nonzeros, k={args.k}, {args.max_iter} iterations, "
        f"{args.config} configuration"
    )
    for tree in args.trees:
        median = statistics.median(times[tree])
        # The default pipeline's starts stop at their tolerance: no time per iteration then.
        each = (
            f" ({median / args.max_iter * 1e3:.2f} ms/iteration)" if args.config == "paper" else ""
        )
        print(
            f"{tree}: median {median:.3f} s{each}, "
            f"runs {', '.join(f'{t:.3f}' for t in times[tree])}, error {sorted(errors[tree])}"
        )
    a, b = (statistics.median(times[tree]) for tree in args.trees)
    print(f"B/A: {b / a:.3f}")
    sizes = {k: getattr(args, k) for k in ("n", "m", "nnz", "k", "max_iter", "repeats", "config")}
    record = provenance("ab", "python " + " ".join(sys.argv))
    record["settings"] = sizes
    record["trees"] = [
        {
            "tree": tree,
            "commit": commit(Path(tree)),
            "seconds": [round(t, 4) for t in times[tree]],
            "median_s": round(statistics.median(times[tree]), 4),
            "errors": sorted(errors[tree]),
        }
        for tree in args.trees
    ]
    record["b_over_a"] = round(b / a, 4)
    append_record(args.out, record)


if __name__ == "__main__":
    main()
