"""Running a benchmark's tasks and keeping their records, and a local Dask cluster (shared by
the benchmark scripts)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor


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
