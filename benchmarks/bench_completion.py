"""Completion: how well each method predicts cells it did not see, and what unknown cells cost.

    python benchmarks/bench_completion.py [--part accuracy votes cost] [--data ...]
        [--fractions 0.1 0.2 0.3 0.5] [--ks 5 10 auto] [--seeds 10] [--large-seeds 3]
        [--first-seed 0] [--jobs 2] [--methods ...] [--out records.jsonl] [--quick]

``accuracy``: hide a share of the observed cells, ones and zeros alike
(:func:`banmf.model_selection.mask_entries`, seeded), fit the rest with the hidden cells as
``missing=``, and score the prediction on them (:meth:`banmf.Factorization.predict`: the
predictor the fit chose, docs/missing.md): the held-out error rate beside the error rate on
the fitted (observed) cells, and F1 on the ones. Methods: the library default (``banmf``; its
row ``banmf W⊗H`` scores the same fit by its Boolean product alone, as before the fit chose a
predictor), the paper's configuration (``banmf (paper)``), NMF thresholded with the mask
(``nmf``, its defaults), ASSO with the hidden cells "don't care" (``asso``, its τ sweep;
refused over ``--asso-budget`` operations), the column majority of the observed cells
(``majority``), and every other registered method with its defaults (all by default). Data:
the paper's generator at 50×50 (``gen50``) and 1000×1000 (``gen1000``), d = 0.2 and 0.5, k = 5
and 10 (fitted at the planted k; the data and the hidden cells are drawn with the seed);
structured data with noise, as real data is: ``ratings`` (user-item-like, 2000×500, 40,000
ones, half of them in 10 overlapping tiles with a fifth of their ones dropped, the rest
scattered; k = 10) and ``survey`` (answers-like, 600×40, 6 planted patterns, 8 % of the cells
flipped; k = 6); the bundled LUCAP0 (k = 10), mushroom (k = 10) and votes (all 435 members,
k = 5; its own 392 unknown votes stay unknown). For planted data the table also counts the seeds
whose hidden cells were all predicted right. After the tables, every cell where the default's
held-out error is above another method's is listed.
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
from banmf.data.masks import mask_difference, mask_union
from banmf.model_selection import held_out_scores, mask_entries

PAPER = dict(banmf.PAPER_CONFIG)
METHODS = ("banmf", "banmf (paper)", "nmf", "asso", "majority")
#: ``--methods`` takes these and any other registered method, with its defaults.
CHOICES = (*METHODS, *(name for name in banmf.METHODS if name not in METHODS))
GENERATED = {
    f"gen{n}-d{d}-k{k}": (n, d, k) for n in (50, 1000) for d in (0.2, 0.5) for k in (5, 10)
}
NOISY = {"ratings": 10, "survey": 6}
REAL = {"lucap0": 10, "mushroom": 10, "votes": 5}
DATA = (*GENERATED, *NOISY, *REAL)
QUICK = {"gen50-d0.5-k5", "votes"}


def load(name: str, seed: int):
    """(X, cells already unknown or None, k)."""
    if name in GENERATED:
        n, d, k = GENERATED[name]
        X, _, _ = banmf.make_boolean(n, n, k, d, random_state=seed)
        return X, None, k
    if name == "ratings":
        X, _, _ = banmf.make_sparse_tiles(
            2000, 500, 40_000, 10, overlap=0.3, dropout=0.2, random_state=seed
        )
        return X, None, NOISY[name]
    if name == "survey":
        X, _, _ = banmf.make_boolean(600, 40, 6, 0.35, noise=0.08, random_state=seed)
        return X, None, NOISY[name]
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
    """The method's result (a :class:`banmf.Factorization`) on X with ``unknown`` cells."""
    if method == "majority":
        return banmf.Factorization.from_factors(X, *majority(X, unknown), missing=unknown)
    name, params = {
        "banmf (paper)": ("banmf", PAPER),
        "asso": ("asso", {"work_budget": asso_budget}),
    }.get(method, (method, {}))
    return banmf.factorize(X, k, name, random_state=seed, missing=unknown, **params)


def hidden_scores(X, guess, rows, cols) -> dict:
    """Errors, error rate and F1 of the ones of the 0/1 ``guess`` at the hidden cells."""
    truth = np.asarray(X[rows, cols]).ravel() > 0
    hits = int((guess & truth).sum())
    errors = int((guess != truth).sum())  # every error is a missed one or a false one
    f1 = 2 * hits / (2 * hits + errors) if hits or errors else 1.0
    return {"error": errors, "cells": len(rows), "error_rate": errors / len(rows), "f1": f1}


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
            res = fit(method, X, unknown, k, seed, asso_budget)
    except ValueError as exc:
        return {**rec, "refused": str(exc).split(";")[0][:90]}
    seconds = round(time.perf_counter() - start, 3)
    rows, cols = hidden.nonzero()
    scores = hidden_scores(X, res.predict(rows, cols), rows, cols)
    rec.update(
        k_fitted=res.n_components,
        seconds=seconds,
        **scores,
        observed_error_rate=res.error / res.n_observed,
        predictor=None if res.predictor is None else res.predictor.kind,
    )
    if res.predictor is not None:  # the same fit scored by W⊗H alone
        product = held_out_scores(X, res.W, res.H, hidden)
        rec.update(product_error_rate=product["error_rate"], product_f1=product["f1"])
    return rec


def with_product_rows(records: list) -> list:
    """The records, and for the default's a record ``banmf W⊗H``: its fit scored by W⊗H."""
    out = []
    for r in records:
        out.append(r)
        if r["method"] == "banmf" and "product_error_rate" in r:
            out.append(
                {
                    **r,
                    "method": "banmf W⊗H",
                    "error_rate": r["product_error_rate"],
                    "f1": r["product_f1"],
                    "error": round(r["product_error_rate"] * r["cells"]),
                    "predictor": "product",
                }
            )
    return out


def median_of(rows, key):
    return float(np.median([r[key] for r in rows]))


def accuracy_tables(records, datasets, fractions, methods) -> list:
    """Print a table per data set and rank; return ``(data, k, fraction, default's rate,
    best other method, its rate)`` wherever another method's median held-out error is lower."""
    # The default's fit scored by W⊗H alone, under it (not a method of its own: no rival).
    shown = [name for m in methods for name in ((m, "banmf W⊗H") if m == "banmf" else (m,))]
    losses = []
    for data, k in dict.fromkeys((r["data"], r["k"]) for r in records):
        if data not in datasets:
            continue
        rows = [r for r in records if r["data"] == data and r["k"] == k]
        seeds = sorted({r["seed"] for r in rows})
        print(f"\n### {data} (k={k}, {len(seeds)} seeds)\n")
        head = ["method", *(f"{int(100 * f)} % hidden" for f in fractions)]
        print("| " + " | ".join(head) + " |\n|" + "---|" * len(head))
        rates = {
            (m, f): median_of(done, "error_rate")
            for m in shown
            for f in fractions
            if (
                done := [
                    r for r in rows if r["method"] == m and r["fraction"] == f and "error_rate" in r
                ]
            )
        }
        best = {
            f: min((v for (m, g), v in rates.items() if g == f), default=None) for f in fractions
        }
        for m in shown:
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
                text = f"{rates[m, f]:.4f}"
                if rates[m, f] == best[f]:
                    text = f"**{text}**"
                text += f" / {median_of(done, 'observed_error_rate'):.4f}"
                text += f", F1 {median_of(done, 'f1'):.3f}"
                if data in GENERATED:
                    text += f", exact {sum(r['error'] == 0 for r in done)}/{len(done)}"
                if k == "auto" and m != "majority":
                    text += f", k {median_of(done, 'k_fitted'):g}"
                if m == "banmf":
                    kinds = sorted({r["predictor"] or "product" for r in done})
                    text += f", {'+'.join(kinds)}"
                text += f" ({median_of(done, 'seconds'):.2f} s)"
                cells.append(text)
            print("| " + " | ".join(cells) + " |")
        for f in fractions:
            others = {m: rates[m, f] for m in methods if m != "banmf" and (m, f) in rates}
            if ("banmf", f) in rates and others:
                rival = min(others, key=others.get)
                if others[rival] < rates["banmf", f]:
                    losses.append((data, k, f, rates["banmf", f], rival, others[rival]))
    return losses


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
    from banmf.engine.iterations import MUSolver
    from banmf.io import Dataset

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
    parser.add_argument("--fractions", type=float, nargs="+", default=[0.1, 0.2, 0.3, 0.5])
    parser.add_argument(
        "--methods",
        nargs="+",
        choices=CHOICES,
        help="default: every one (--quick: banmf, banmf (paper), nmf, asso and majority)",
    )
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
    parser.add_argument(
        "--first-seed",
        type=int,
        default=0,
        dest="first_seed",
        help="the first seed of every data set (default 0): seeds first..first+N-1",
    )
    parser.add_argument("--asso-budget", type=float, default=1e10, dest="asso_budget")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=15, help="cost: repeats per case")
    parser.add_argument("--out", help="also write every record to this JSON-lines file")
    parser.add_argument("--quick", action="store_true", help="small data, two seeds")
    args = parser.parse_args(argv)
    datasets = [d for d in args.data if d in QUICK] if args.quick else args.data
    args.methods = args.methods or list(METHODS if args.quick else CHOICES)
    print(f"{os.cpu_count()} CPUs, --jobs {args.jobs}")
    if "accuracy" in args.part:
        tasks = []
        for data in datasets:
            seeds = (
                2 if args.quick else args.seeds if data.startswith("gen50") else args.large_seeds
            )
            for k, fraction, seed, method in itertools.product(
                args.ks or [None],
                args.fractions,
                range(args.first_seed, args.first_seed + seeds),
                args.methods,
            ):
                threads = 1 if args.jobs > 1 else 0
                tasks.append((data, fraction, seed, method, args.asso_budget, threads, k))
        records = with_product_rows(run_tasks(run, tasks, args.jobs, args.out))
        print(
            "\nheld-out error rate / error rate on the fitted cells (medians over seeds), F1 on "
            "the ones, seeds predicted exactly, the default's predictor"
        )
        losses = accuracy_tables(records, datasets, args.fractions, args.methods)
        print(f"\n### where the default is not best ({len(losses)} cells)\n")
        if losses:
            print("| data | k | hidden | default | best other | gap |\n|---|---|---|---|---|---|")
        for data, k, f, mine, rival, theirs in losses:
            print(
                f"| {data} | {k} | {int(100 * f)} % | {mine:.4f} | {rival} {theirs:.4f} | "
                f"{mine - theirs:+.4f} |"
            )
    if "votes" in args.part:
        votes_example(*((2, (3,)) if args.quick else (5,)))
    if "cost" in args.part:
        cost(3 if args.quick else args.repeats, args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
