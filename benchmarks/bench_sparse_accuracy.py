"""Lowest error on large, very sparse data: the default BANMF against every other method.

    python benchmarks/bench_sparse_accuracy.py
        [--data retail mushroom tiles-small tiles-large ratings clicks]
        [--ks 5 10 20 50] [--methods ...] [--jobs 1] [--out results.jsonl] [--quick]
        [--tables results.jsonl]

For every dataset and rank k: the relative training error |X − W⊗H| / nnz(X) and the fit time
of the library default (``banmf``), the default without the combination of its starts
(``combine=False``: the default before it), the default with one random start (``n_init=1``;
the extra starts and the combination still run), the paper's configuration of BANMF (one start, 1000
iterations, global grid thresholds, no polish, no swaps, no extra starts), banmf's other methods
in their defaults (``nmf``, ``reg-nmf``, ``asso``, ``grecond``, ``elbmf``) and scikit-learn's
NMF (its defaults) booleanized by the paper's grid (``banmf.booleanize``). Seed 0 throughout. A
method that refuses the problem (a work or memory budget) shows its reason instead of a number.
banmf's methods fit at most min(n, m) factors (with a warning): a record of a larger k says the
k fit (``k_fit``); scikit-learn's NMF fits the k asked.

The data:

- ``retail``: the bundled 88,162 × 16,470 baskets (0.06 % ones);
- ``mushroom``: the bundled 8,124 × 119 one-hot table (19 %), dense by comparison;
- ``tiles-small`` / ``tiles-large``: :func:`banmf.make_sparse_tiles` at 10⁴ × 10³ with 10⁵
  ones (1 %) and 10⁵ × 10⁴ with 10⁶ ones (0.1 %), 20 planted tiles holding half the ones,
  power-law rows and columns;
- ``ratings``: ratings-like data, users × items, from :func:`banmf.make_sparse_tiles`:
  2·10⁴ × 3·10³ with 4·10⁵ ones (0.66 %), power-law users and items (exponent 3: the most
  rated item has 43 % of the users), 20 genres of 20–300 items sharing 30 % of their items
  with an earlier genre, each user rating 60 % of a genre's items, the genres holding 36 % of
  the ones; the planted genres' own error is 0.87 of the ones;
- ``clicks``: click-stream-like data, sessions × pages: 5·10⁴ × 2·10³ with 1.5·10⁵ ones
  (0.14 %), about 3 clicks per session (Poisson), power-law pages (exponent 2: the two most
  visited pages are in 57 % and 33 % of the sessions), 20 paths of 2–6 pages sharing half of
  their pages with an earlier path, 20 % of a path's clicks dropped; the planted paths' own
  error is 0.69 of the ones;
- ``zoo``, ``votes``, ``lucap0`` (``--data`` only): the other bundled data, 101 × 15,
  232 × 16 and 2000 × 143.

For the generated data the table also gives the error of the planted tiles themselves
("truth") and each method's tile recovery: the mean over planted tiles of the best Jaccard
similarity (as sets of cells) with a found factor.

Every fit is timed in its own process with ``--jobs`` > 1 (then each on one thread); with
``--jobs 1`` (the default) they run one after the other on every thread. The machine is shared:
compare times within one run. Every record is appended to
``benchmarks/results/sparse_accuracy.jsonl`` (``--out``) with its provenance (date, commit,
host, versions, command) and the tree and commit of the banmf measured: run another checkout's
banmf with ``PYTHONPATH=TREE`` to compare trees.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np
import scipy.sparse as sp
from _records import RESULTS, commit, provenance, run_tasks

import banmf

PAPER = dict(banmf.PAPER_CONFIG)
METHODS = {
    "banmf": ("banmf", {}),
    "banmf (no combination)": ("banmf", {"combine": False}),
    "banmf (1 start)": ("banmf", {"n_init": 1}),
    "banmf (paper)": ("banmf", PAPER),
    "nmf": ("nmf", {}),
    "reg-nmf": ("reg-nmf", {}),
    "asso": ("asso", {}),
    "grecond": ("grecond", {}),
    "elbmf": ("elbmf", {}),
    "sklearn NMF + grid": (None, {}),
}
DATA = ("retail", "mushroom", "tiles-small", "tiles-large", "ratings", "clicks")
#: The other bundled data (``--data`` only): small and dense by comparison.
SMALL = ("zoo", "votes", "lucap0")
#: The generated data: (n, m, nnz), the --quick (n, m, nnz), make_sparse_tiles' other arguments.
TILES = {
    "tiles-small": ((10_000, 1_000, 100_000), (1_000, 100, 1_000), {}),
    "tiles-large": ((100_000, 10_000, 1_000_000), (10_000, 1_000, 10_000), {}),
    "ratings": (
        (20_000, 3_000, 400_000),
        (2_000, 300, 10_000),
        {"tile_share": 0.6, "tile_cols": (20, 300), "dropout": 0.4, "overlap": 0.3, "exponent": 3},
    ),
    "clicks": (
        (50_000, 2_000, 150_000),
        (5_000, 200, 15_000),
        {"tile_cols": (2, 6), "dropout": 0.2, "overlap": 0.5, "rows": "poisson", "exponent": 2},
    ),
}
PLANTED_K = 20


def load(name: str, quick: bool = False):
    """(X as a CSR support mask, planted W, planted H or None, None)."""
    if name in TILES:
        full, small, params = TILES[name]
        n, m, nnz = small if quick else full
        X, W, H = banmf.make_sparse_tiles(n, m, nnz, PLANTED_K, random_state=0, **params)
        return X, W, H
    X = getattr(banmf.datasets, f"load_{name}")().X
    if quick:
        X = X[:2000]
    return sp.csr_array(X), None, None


def recovery(W0, H0, W, H) -> float:
    """Mean over planted tiles of the best Jaccard similarity (cells) with a found factor."""
    W0, H0, W, H = (np.asarray(a, dtype=np.int64) for a in (W0, H0, W, H))
    inter = (W0.T @ W) * (H0 @ H.T)  # (k0, k) cells in both tiles
    size0 = W0.sum(axis=0) * H0.sum(axis=1)
    size = W.sum(axis=0) * H.sum(axis=1)
    union = size0[:, None] + size[None, :] - inter
    jaccard = np.where(union > 0, inter / np.maximum(union, 1), 0.0)
    return float(jaccard.max(axis=1).mean()) if jaccard.size else 0.0


def sklearn_grid(X, k: int):
    """scikit-learn's NMF in its defaults, booleanized by the paper's grid."""
    from sklearn.decomposition import NMF

    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its ConvergenceWarning at max_iter=200
        model = NMF(n_components=k, random_state=0)
        W = model.fit_transform(X.astype(np.float64))
    res = banmf.booleanize(X, W, model.components_)
    return res.W, res.H, res.error, time.perf_counter() - start


def run(task) -> dict:
    data, k, label, quick, threads, prov = task
    import numba

    if threads:
        numba.set_num_threads(threads)
    X, W0, H0 = load(data, quick)
    method, params = METHODS[label]
    rec = {**prov, "data": data, "k": k, "method": label, "quick": quick, "nnz": int(X.nnz)}
    try:
        if method is None:
            W, H, error, seconds = sklearn_grid(X, k)
        else:
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = banmf.factorize(X, k, method=method, random_state=0, **params)
            W, H, error, seconds = res.W, res.H, res.error, time.perf_counter() - start
            if "best_start_" in res.info:  # which start BANMF kept, and every start's error
                rec.update(
                    kept=res.info["best_start_"],
                    starts=res.info["init_errors_"],
                    extra=res.info["extra_start_errors_"],
                )
    except (ValueError, MemoryError) as exc:
        return {**rec, "refused": str(exc).split(";")[0][:80]}
    if W.shape[1] != k:  # banmf's methods cap k at min(n, m), with a warning
        rec["k_fit"] = int(W.shape[1])
    rec.update(error=int(error), relative_error=error / X.nnz, seconds=round(seconds, 2))
    if W0 is not None:
        rec["recovery"] = round(recovery(W0, H0, W, H), 3)
        rec["truth"] = banmf.boolean_error(X, W0, H0) / X.nnz
    return rec


def _warm_up() -> None:
    X, _, _ = banmf.make_sparse_tiles(300, 60, 2000, 3, random_state=0)
    for method, params in METHODS.values():
        if method is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                banmf.factorize(X, 3, method=method, random_state=0, **params)


def table(records: list[dict], data: str, ks, labels) -> str:
    """A markdown table: one row per k, one column per method; the lowest error in bold."""
    by = {(r["k"], r["method"]): r for r in records if r["data"] == data}
    planted = any("recovery" in r for r in by.values())
    head = ["k", *labels] + (["truth"] if planted else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for k in ks:
        errs = [
            by[(k, m)]["relative_error"] for m in labels if "relative_error" in by.get((k, m), {})
        ]
        best = min(errs) if errs else None
        cells = [str(k)]
        for m in labels:
            r = by.get((k, m))
            if r is None:
                cells.append("")
            elif "refused" in r:
                cells.append("refused")
            else:
                value = f"{r['relative_error']:.4f}"
                if r["relative_error"] == best:
                    value = f"**{value}**"
                extra = f", rec. {r['recovery']:.2f}" if "recovery" in r else ""
                cells.append(f"{value} ({r['seconds']:.1f} s{extra})")
        if planted:
            truth = next((r["truth"] for r in by.values() if "truth" in r), None)
            cells.append(f"{truth:.4f}" if truth is not None else "")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", nargs="+", default=list(DATA), choices=DATA + SMALL)
    parser.add_argument("--ks", type=int, nargs="+", default=[5, 10, 20, 50])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument(
        "--out",
        default=str(RESULTS / "sparse_accuracy.jsonl"),
        help="append every record to this JSON-lines file (default: %(default)s)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="small slices of the data (a smoke run)"
    )
    parser.add_argument(
        "--tables",
        metavar="JSONL",
        help="print the tables of earlier runs' records (the last of each cell) and exit",
    )
    args = parser.parse_args(argv)
    if args.tables:
        with open(args.tables) as f:
            records = [json.loads(line) for line in f if line.strip()]
        print_tables(records, args.data, args.ks, args.methods, "earlier runs")
        return 0
    prov = provenance("sparse_accuracy", " ".join(["bench_sparse_accuracy.py", *sys.argv[1:]]))
    # The records name the banmf measured too: its tree and commit (PYTHONPATH may point
    # elsewhere than this checkout).
    tree = os.path.dirname(os.path.dirname(banmf.__file__))
    prov.update(tree=tree, tree_commit=commit(tree))
    tasks = [
        (data, k, label, args.quick, 1 if args.jobs > 1 else 0, prov)
        for data in args.data
        for k in args.ks
        for label in args.methods
    ]
    records = run_tasks(run, tasks, args.jobs, args.out, _warm_up)
    print_tables(records, args.data, args.ks, args.methods, f"--jobs {args.jobs}")
    return 0


def print_tables(records: list[dict], datasets, ks, labels, how: str) -> None:
    print(f"relative error (fit seconds); seed 0; {os.cpu_count()} CPUs, {how}")
    for data in datasets:
        nnz = next((r["nnz"] for r in records if r["data"] == data), None)
        if nnz is not None:
            print(f"\n## {data} ({nnz:,} ones)\n")
            print(table(records, data, ks, labels))


if __name__ == "__main__":
    sys.exit(main())
