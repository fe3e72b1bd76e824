"""Running a benchmark's tasks and keeping their records (shared by the benchmark scripts)."""

from __future__ import annotations

import json
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
