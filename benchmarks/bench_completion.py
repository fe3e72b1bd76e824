"""Completion: how well each method predicts cells it did not see, and what unknown cells cost.

    python benchmarks/bench_completion.py [--part accuracy votes cost] [--data ...]
        [--fractions 0.1 0.3 0.5] [--ks 5 10 auto] [--seeds 10] [--jobs 2]
        [--out records.jsonl] [--quick]

``accuracy``: hide a share of the observed cells, ones and zeros alike
(:func:`banmf.model_selection.mask_entries`, seeded), fit the rest with the hidden cells as
``missing=``, and score the prediction on them (:func:`held_out_scores`): the held-out error
rate, and F1 on the ones. Methods: the library default (``banmf``), the paper's configuration
(``banmf (paper)``), NMF thresholded with the mask (``nmf``, its defaults), ASSO with the hidden
cells "don't care" (``asso``, its τ sweep; refused over ``--asso-budget`` operations), and the
column majority of the observed cells (``majority``). Data: the paper's generator at 50×50
(``gen50``) and 1000×1000 (``gen1000``), d = 0.2 and 0.5, k = 5 and 10 (fitted at the planted
k; the data and the hidden cells are drawn with the seed), and the bundled LUCAP0 (k = 10),
mushroom (k = 10) and votes (all 435 members, k = 5; its own 392 unknown votes stay unknown).
For generated data the table also counts the seeds whose hidden cells were all predicted right.
``--ks`` fits every data set at each of these ranks instead of its own; ``auto`` lets each
method choose k by held-out error on the fitted cells (``n_components="auto"``; the table gives
the median k chosen).

``votes``: the worked example. The 435 members' votes at k = 3, 5, 10, with the ``?`` votes
as unknown cells, as 0 and as 1; 10 % of the known votes held out (5 seeds) to score each
(``--quick``: k = 3, 2 seeds).

``cost``: the time of an iteration with unknown cells against without, in one run: 10⁶ ones
(``make_sparse_uniform``, 10⁵ × 10⁴), k = 32, float32. With ``missing=``: 10 % of the ones and
as many zeros unknown (2·10⁵ cells), or 10⁵ zeros alone (every one known). With ``observed=``: only the ones and those zeros observed,
every other cell unknown (user-item data). Medians of alternating repeats.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
import warnings

import numpy as np
from _records import run_tasks

import banmf
from banmf._boolean import mask_difference, mask_union
from banmf.model_selection import held_out_scores, mask_entries

PAPER = dict(banmf.PAPER_CONFIG)
METHODS = ("banmf", "banmf (paper)", "nmf", "asso", "majority")
#: ``--methods`` takes these and any other registered method, with its defaults.
CHOICES = (*METHODS, *(name for name in banmf.METHODS if name not in METHODS))
GENERATED = {
    f"gen{n}-d{d}-k{k}": (n, d, k) for n in (50, 1000) for d in (0.2, 0.5) for k in (5, 10)
}
REAL = {"lucap0": 10, "mushroom": 10, "votes": 5}
DATA = (*GENERATED, *REAL)
QUICK = {"gen50-d0.5-k5", "votes"}


def load(name: str, seed: int):
    """(X, cells already unknown or None, k)."""
    if name in GENERATED:
        n, d, k = GENERATED[name]
        X, _, _ = banmf.make_boolean(n, n, k, d, random_state=seed)
        return X, None, k
    if name == "votes":
        ds = banmf.datasets.load_votes("435")
        return ds.X, ds.missing, REAL[name]
    return getattr(banmf.datasets, f"load_{name}")().X, None, REAL[name]


def majority(X, unknown):
    """Each column's majority among its cells observed in the fit, as Boolean factors: W
    (n, 1) of ones and H (1, m) of the columns where ones are at least half."""
    n, m = X.shape
    ones = np.bincount(mask_difference(X, unknown).indices, minlength=m)
    seen = n - np.bincount(unknown.indices, minlength=m)
    H = (2 * ones >= np.maximum(seen, 1))[None, :]
    return np.ones((n, 1), dtype=bool), H


def fit(method: str, X, unknown, k: int, seed: int, asso_budget: float):
    if method == "majority":
        return majority(X, unknown)
    name, params = {
        "banmf (paper)": ("banmf", PAPER),
        "asso": ("asso", {"work_budget": asso_budget}),
    }.get(method, (method, {}))
    res = banmf.factorize(X, k, name, random_state=seed, missing=unknown, **params)
    return res.W, res.H


def run(task) -> dict:
    data, fraction, seed, method, asso_budget, threads, k_asked = task
    import numba

    if threads:
        numba.set_num_threads(threads)
    X, known_unknown, k = load(data, seed)
    k = k if k_asked is None else k_asked
    hidden = mask_entries(X, fraction, random_state=seed, missing=known_unknown)
    unknown = hidden if known_unknown is None else mask_union(hidden, known_unknown)
    rec = {"data": data, "fraction": fraction, "seed": seed, "method": method, "k": k}
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            W, H = fit(method, X, unknown, k, seed, asso_budget)
    except ValueError as exc:
        return {**rec, "refused": str(exc).split(";")[0][:90]}
    scores = held_out_scores(X, W, H, hidden)
    rec.update(
        k_fitted=W.shape[1],
        seconds=round(time.perf_counter() - start, 3),
        error=scores["errors"],
        cells=scores["cells"],
        error_rate=scores["error_rate"],
        f1=scores["f1"],
    )
    return rec


def accuracy_tables(records, datasets, fractions, methods) -> None:
    for data, k in dict.fromkeys((r["data"], r["k"]) for r in records):
        if data not in datasets:
            continue
        rows = [r for r in records if r["data"] == data and r["k"] == k]
        seeds = sorted({r["seed"] for r in rows})
        print(f"\n### {data} (k={k}, {len(seeds)} seeds)\n")
        head = ["method", *(f"{int(100 * f)} % hidden" for f in fractions)]
        print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
        best = {}
        for f in fractions:
            medians = [
                np.median(
                    [r["error_rate"] for r in rows if r["method"] == m and r["fraction"] == f]
                )
                for m in methods
                if any("error_rate" in r for r in rows if r["method"] == m and r["fraction"] == f)
            ]
            best[f] = min(medians) if medians else None
        for m in methods:
            cells = [m]
            for f in fractions:
                got = [r for r in rows if r["method"] == m and r["fraction"] == f]
                done = [r for r in got if "error_rate" in r]
                if not got:
                    cells.append("")
                    continue
                if not done:
                    cells.append("refused")
                    continue
                rate = float(np.median([r["error_rate"] for r in done]))
                text = f"{rate:.4f}"
                if rate == best[f]:
                    text = f"**{text}**"
                text += f", F1 {np.median([r['f1'] for r in done]):.3f}"
                if data in GENERATED:
                    text += f", exact {sum(r['error'] == 0 for r in done)}/{len(done)}"
                if k == "auto" and m != "majority":
                    text += f", k {np.median([r['k_fitted'] for r in done]):g}"
                text += f" ({np.median([r['seconds'] for r in done]):.2f} s)"
                cells.append(text)
            print("| " + " | ".join(cells) + " |")


def votes_example(seeds: int, ks=(3, 5, 10)) -> None:
    """The three treatments of the ``?`` votes at each k, scored on held-out votes."""
    ds = banmf.datasets.load_votes("435")
    X, unknown = ds.X, ds.missing
    print("\n### votes: the ? cells as unknown, as 0, as 1 (10 % of the known votes held out)\n")
    print("| k | treatment | held-out error rate | F1 | training error (fitted cells) |")
    print("|---|---|---|---|---|")
    for k in ks:
        for treatment in ("unknown", "as 0", "as 1"):
            rates, f1s, train = [], [], []
            for seed in range(seeds):
                hidden = mask_entries(X, 0.1, random_state=seed, missing=unknown)
                if treatment == "unknown":
                    data, fit_missing = X, mask_union(hidden, unknown)
                else:
                    data = X if treatment == "as 0" else mask_union(X, unknown)
                    fit_missing = hidden
                res = banmf.factorize(data, k, random_state=seed, missing=fit_missing)
                s = held_out_scores(X, res.W, res.H, hidden)
                rates.append(s["error_rate"])
                f1s.append(s["f1"])
                train.append(res.error)
            print(
                f"| {k} | {treatment} | {np.median(rates):.4f} | {np.median(f1s):.3f} | "
                f"{int(np.median(train))} |"
            )


def cost(repeats: int, quick: bool) -> None:
    """Median seconds per iteration with and without unknown cells, alternating, one run."""
    from banmf.io import Dataset
    from banmf.models._mu import MUSolver

    n, m, nnz, k = (10_000, 1_000, 100_000, 32) if quick else (100_000, 10_000, 1_000_000, 32)
    X = banmf.make_sparse_uniform(n, m, nnz, random_state=0)
    hidden = mask_entries(X, 0.1, random_state=0, n_zeros=round(0.1 * X.nnz))
    zeros = mask_entries(X, 0.0, random_state=0, n_zeros=round(0.1 * X.nnz))
    observed = mask_union(X, hidden)  # the ones and the hidden zeros observed, the rest not
    rng = np.random.default_rng(0)
    W0 = (rng.random((n, k)) + 0.01).astype(np.float32)
    Ht0 = (rng.random((m, k)) + 0.01).astype(np.float32)
    cases = {
        "no unknown cells": Dataset(X),
        f"missing= ({hidden.nnz:,} cells: 10 % of the ones, as many zeros)": Dataset(
            X, missing=hidden
        ),
        f"missing= ({zeros.nnz:,} zeros)": Dataset(X, missing=zeros),
        f"observed= ({observed.nnz:,} cells)": Dataset(X, observed=observed),
    }
    solvers = {
        name: MUSolver(d, W0, Ht0, project=True, lower=1.0, upper=float(k), eps=1e-12)
        for name, d in cases.items()
    }
    lams = np.zeros(5)
    times = {name: [] for name in solvers}
    for solver in solvers.values():
        solver.iterate(lams)  # compile and warm up
    for _ in range(repeats):
        for name, solver in solvers.items():
            start = time.perf_counter()
            solver.iterate(lams)
            times[name].append((time.perf_counter() - start) / len(lams))
    base = np.median(times["no unknown cells"])
    print(f"\n### cost of an iteration: {n:,}×{m:,}, {X.nnz:,} ones, k = {k}, float32\n")
    print("| case | ms / iteration (median) | ratio to no unknown cells |")
    print("|---|---|---|")
    for name, values in times.items():
        med = np.median(values)
        ratios = np.array(values) / np.array(times["no unknown cells"])
        print(
            f"| {name} | {1000 * med:.1f} | {med / base:.2f} (median of pairs {np.median(ratios):.2f}) |"
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--part", nargs="+", default=["accuracy", "votes", "cost"])
    parser.add_argument("--data", nargs="+", default=list(DATA), choices=DATA)
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.1, 0.3, 0.5])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=CHOICES)
    parser.add_argument(
        "--ks",
        nargs="+",
        type=lambda text: text if text == "auto" else int(text),
        help="ranks to fit every data set at (integers or auto; default: each one's own)",
    )
    parser.add_argument("--seeds", type=int, default=10, help="seeds of gen50 (default 10)")
    parser.add_argument(
        "--large-seeds",
        type=int,
        default=3,
        dest="large_seeds",
        help="seeds of gen1000 and the real data (default 3)",
    )
    parser.add_argument("--asso-budget", type=float, default=1e10, dest="asso_budget")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=15, help="cost: repeats per case")
    parser.add_argument("--out", help="also write every record to this JSON-lines file")
    parser.add_argument("--quick", action="store_true", help="small data, two seeds")
    args = parser.parse_args(argv)
    datasets = [d for d in args.data if d in QUICK] if args.quick else args.data
    print(f"{os.cpu_count()} CPUs, --jobs {args.jobs}")
    if "accuracy" in args.part:
        tasks = []
        for data in datasets:
            seeds = (
                2 if args.quick else args.seeds if data.startswith("gen50") else args.large_seeds
            )
            for k, fraction, seed, method in itertools.product(
                args.ks or [None], args.fractions, range(seeds), args.methods
            ):
                threads = 1 if args.jobs > 1 else 0
                tasks.append((data, fraction, seed, method, args.asso_budget, threads, k))
        records = run_tasks(run, tasks, args.jobs, args.out)
        print("\nheld-out error rate (median over seeds), F1 on the ones, seeds predicted exactly")
        accuracy_tables(records, datasets, args.fractions, args.methods)
    if "votes" in args.part:
        votes_example(*((2, (3,)) if args.quick else (5,)))
    if "cost" in args.part:
        cost(3 if args.quick else args.repeats, args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
