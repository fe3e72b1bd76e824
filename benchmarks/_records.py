"""Running a benchmark's tasks and keeping their records (with where and on what they were
measured), and a local Dask cluster (shared by the benchmark scripts)."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import platform
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

#: The checkout the benchmarks belong to.
ROOT = Path(__file__).resolve().parent.parent
#: Where the records go: one JSON-lines file per benchmark.
RESULTS = ROOT / "benchmarks" / "results"


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
    """Python's and the numerical libraries' versions, and banmf's."""
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


def commit(tree: Path = ROOT) -> str:
    """The short commit of ``tree`` (empty outside git)."""
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        return ""


def provenance(benchmark: str, command: str) -> dict:
    """What every record begins with: the benchmark, the date, the commit, the host, the
    versions and the command that measured it."""
    return {
        "benchmark": benchmark,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": commit(),
        "host": host(),
        "versions": versions(),
        "command": command,
    }


def row_record(benchmark: str, command: str, table: str, key: str, figures: dict, **extra) -> dict:
    """A record that is one row of a docs table (``benchmarks/tables.py``, "Rows tables"):
    the provenance, the table's name, the row's key (its configuration: a later record of the
    same key replaces it in the table) and its cells as text, in the table's column order."""
    return {
        **provenance(benchmark, command),
        **extra,
        "table": table,
        "key": key,
        "figures": figures,
    }


def superscript_power(count: int) -> str:
    """10**7 → "10⁷" (other counts as they are, with thousands separators)."""
    exponent = len(str(count)) - 1
    if count == 10**exponent:
        return "10" + str(exponent).translate(str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹"))
    return f"{count:,}"


def append_record(path, record: dict) -> None:
    """Append ``record`` to the JSON-lines file ``path`` (its folder made if need be)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
    print(f"appended a record to {out}")


def run_tasks(run, tasks: list, jobs: int, out_path: str | None = None, warm_up=None) -> list:
    """``run(task)`` for every task, in order: in ``jobs`` worker processes when ``jobs`` > 1,
    else here (after ``warm_up()``, if given, so that compiling is not timed). Each record goes
    to stderr as it comes, and is appended to ``out_path`` (JSON lines) so that a long run
    interrupted keeps what it measured. Returns the records."""
    records = []
    out = open(out_path, "a") if out_path else None
    pool = ProcessPoolExecutor(jobs) if jobs > 1 else None
    try:
        if pool is None and warm_up is not None:
            warm_up()
        for rec in pool.map(run, tasks) if pool else map(run, tasks):
            records.append(rec)
            print(json.dumps(rec), file=sys.stderr, flush=True)
            if out:
                out.write(json.dumps(rec) + "\n")
                out.flush()
    finally:
        if pool is not None:
            pool.shutdown()
        if out:
            out.close()
    return records


@contextlib.contextmanager
def local_client(workers: int, threads: int):
    """A client of a ``LocalCluster`` of ``workers`` processes of ``threads`` threads each, for
    the length of the block. The cluster's nannies set OMP_NUM_THREADS=1 (and other variables)
    in this process's environment for the workers they start: it is put back, so that fits in
    this process keep their threads."""
    from dask.distributed import Client, LocalCluster

    saved = dict(os.environ)
    with (
        LocalCluster(
            n_workers=workers,
            threads_per_worker=threads,
            processes=True,
            dashboard_address=":0",
        ) as cluster,
        Client(cluster) as client,
    ):
        os.environ.clear()
        os.environ.update(saved)
        yield client
