"""Shared plumbing of the experiment scripts: arguments, a process pool over seeds, outputs.

Scripts use banmf's public API only. Each writes into its output folder a CSV of every run,
a CSV summary, PNG figures and ``params.json`` (the exact parameters and library versions).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

import banmf

#: Display order of the methods in tables and figures. "banmf" and "reg-banmf" are the paper's
#: configuration; "banmf (polished)" is the library's default BANMF (see VARIANTS).
ALL_METHODS = ["banmf", "banmf (polished)", *(name for name in banmf.METHODS if name != "banmf")]


def parser(description: str, default_out: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--quick", action="store_true", help="few seeds, small sizes: a smoke run under a minute"
    )
    p.add_argument(
        "--out", default=f"results/{default_out}", help="output folder (default: %(default)s)"
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        help="worker processes (default: all cores)",
    )
    return p


def _init_worker() -> None:
    # One Numba thread per worker: the pool already uses every core.
    import numba

    numba.set_num_threads(1)


def run_tasks(fn, tasks: list, jobs: int, label: str = "runs") -> list:
    """``[fn(t) for t in tasks]`` on ``jobs`` processes, with a progress line on stderr."""
    start = time.monotonic()
    results = []
    if jobs <= 1:
        iterator = map(fn, tasks)
        pool = None
    else:
        pool = ProcessPoolExecutor(max_workers=jobs, initializer=_init_worker)
        iterator = pool.map(fn, tasks, chunksize=max(1, len(tasks) // (8 * jobs)))
    try:
        for i, res in enumerate(iterator, start=1):
            results.append(res)
            if i == len(tasks) or i % max(1, len(tasks) // 20) == 0:
                sys.stderr.write(f"\r{label}: {i}/{len(tasks)} ({time.monotonic() - start:.0f} s)")
                sys.stderr.flush()
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    sys.stderr.write("\n")
    return results


def out_dir(path: str) -> Path:
    d = Path(path)
    d.mkdir(parents=True, exist_ok=True)
    return d


def write_csv(path: Path, rows: list[dict]) -> None:
    """Write rows atomically (temp file + rename)."""
    if not rows:
        return
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def write_params(path: Path, params: dict, seconds: float) -> None:
    import numba
    import scipy

    record = {
        **params,
        "seconds": round(seconds, 1),
        "versions": {
            "banmf": banmf.__version__,
            "numpy": np.__version__,
            "scipy": scipy.__version__,
            "numba": numba.__version__,
            "python": platform.python_version(),
        },
        "command": " ".join(sys.argv),
        "metric": "Boolean relative error = |X - W⊗H| / nnz(X)",
    }
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(record, indent=2, default=str))
    os.replace(tmp, path)


def savefig(fig, path: Path) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
    os.replace(tmp, path)


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def summarize(rows: list[dict], keys: list[str], value: str) -> list[dict]:
    """Mean, std, count and exact count of ``value`` grouped by ``keys``."""
    groups: dict[tuple, list[float]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in keys), []).append(float(r[value]))
    out = []
    for key, vals in groups.items():
        v = np.asarray(vals)
        out.append(
            {
                **dict(zip(keys, key)),
                "mean": v.mean(),
                "std": v.std(ddof=1) if len(v) > 1 else 0.0,
                "n": len(v),
                "exact": int((v == 0).sum()),
            }
        )
    return out


#: The paper's BANMF: one start, all max_iter iterations, one global pair of grid thresholds,
#: no polish.
PAPER_BANMF = dict(banmf.PAPER_CONFIG)

#: Named parameter variants usable wherever a method name is. "banmf" and "reg-banmf" are pinned
#: to the paper's configuration (the library defaults add restarts, per-factor thresholds and
#: the polish: "banmf (polished)"); PNL-PF as in PyBMF's example notebook (γ = 5, λ growth
#: ×1.02, 500 iterations) instead of its defaults (γ = 10, ×3, 100).
VARIANTS = {
    "banmf": ("banmf", PAPER_BANMF),
    "reg-banmf": ("reg-banmf", PAPER_BANMF),
    "banmf (polished)": ("banmf", {}),
    "reg-banmf (polished)": ("reg-banmf", {}),
    "pnlpf-example": ("pnlpf", {"gamma": 5.0, "growth": 1.02, "max_iter": 500}),
}


def factorize(X, k, name: str, seed: int, **params):
    """``banmf.factorize`` for a method name or a named variant of one."""
    method, preset = VARIANTS.get(name, (name, {}))
    return banmf.factorize(X, k, method=method, random_state=seed, **{**preset, **params})


def estimator(name: str, k: int, seed: int, **params):
    """An unfitted estimator for a method name or a named variant of one."""
    method, preset = VARIANTS.get(name, (name, {}))
    return banmf.METHODS[method](n_components=k, random_state=seed, **{**preset, **params})
