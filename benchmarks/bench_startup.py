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
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _records import append_record, provenance

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
        **provenance("startup", "python " + " ".join(COMMAND)),
        "pairs": args.pairs,
        "figures": figures,
    }
    append_record(args.out, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
