"""The README's command from an empty kernel cache and from a full one: what a newcomer waits.

    python benchmarks/bench_startup.py [--pairs 3] [--out benchmarks/results/startup.jsonl]

Runs ``banmf factorize data/zoo_101x15.mtx -k 5`` (the README's first command) in fresh
processes: each pair from an empty ``NUMBA_CACHE_DIR``, once as it is and once with
``BANMF_NO_AHEAD=1`` (no second process compiling ahead, :mod:`banmf.runtime.warmup`), in alternating
order, then once more from the cache the first left. Each run's wall time and the compile time
its time line reports. Prints the medians and appends one JSON record (date, commit, host CPU
and cache, versions, command, figures) to ``--out``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMAND = ["-m", "banmf", "factorize", "data/zoo_101x15.mtx", "-k", "5"]
COMPILING = re.compile(r"\+ ([\d.]+) s compiling")


def run(cache: str, ahead: bool) -> tuple[float, float]:
    """One run of the command with kernel cache ``cache``: wall seconds, compile seconds."""
    env = {**os.environ, "NUMBA_CACHE_DIR": cache}
    if not ahead:
        env["BANMF_NO_AHEAD"] = "1"
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, *COMMAND], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    ).stdout
    wall = time.perf_counter() - start
    found = COMPILING.search(out)
    return wall, float(found.group(1)) if found else 0.0


def host() -> dict:
    """The CPU's model and caches, from lscpu where it runs."""
    info = {"machine": platform.machine(), "cores": os.cpu_count()}
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return info
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("Model name", "CPU family", "Model", "L2 cache", "L3 cache"):
            info[key.strip()] = value.strip()
    return info


def versions() -> dict:
    import numba
    import numpy
    import scipy

    import banmf

    return {
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "numba": numba.__version__,
        "banmf": banmf.__version__,
    }


def commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        return ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "startup.jsonl"))
    args = parser.parse_args()
    runs: dict[str, list] = {"first": [], "first_no_ahead": [], "later": []}
    for i in range(args.pairs):
        with tempfile.TemporaryDirectory() as a, tempfile.TemporaryDirectory() as b:
            order = [(a, True), (b, False)] if i % 2 == 0 else [(b, False), (a, True)]
            for cache, ahead in order:
                runs["first" if ahead else "first_no_ahead"].append(run(cache, ahead))
            runs["later"].append(run(a, True))
    figures = {}
    for name, values in runs.items():
        figures[name] = {
            "wall_s": [round(w, 2) for w, _ in values],
            "compile_s": [round(c, 2) for _, c in values],
            "median_wall_s": round(statistics.median(w for w, _ in values), 2),
            "median_compile_s": round(statistics.median(c for _, c in values), 2),
        }
        print(
            f"{name:15} wall {figures[name]['median_wall_s']:6.2f} s"
            f"  compiling {figures[name]['median_compile_s']:6.2f} s  (median of {len(values)})"
        )
    record = {
        "benchmark": "startup",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": commit(),
        "host": host(),
        "versions": versions(),
        "command": "python " + " ".join(COMMAND),
        "pairs": args.pairs,
        "figures": figures,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
    print(f"appended a record to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
