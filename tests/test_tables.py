"""The docs' tables match the records they are generated from (benchmarks/tables.py)."""

import functools
import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@functools.cache
def _tables():
    """benchmarks/tables.py, imported from its path (benchmarks/ is not a package)."""
    name = "benchmarks_tables"
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / "tables.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_docs_tables_match_their_records():
    problems = _tables().check()
    assert not problems, "\n".join(problems) + "\nrun: python benchmarks/tables.py --write"


def test_every_record_names_where_it_comes_from():
    for path in sorted((ROOT / "benchmarks" / "results").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            if "benchmark" not in rec:  # a run's raw output (bench_sparse_accuracy.py --out)
                continue
            assert {"date", "commit", "host", "command"} <= rec.keys(), (path.name, rec)
            assert "cores" in rec["host"], (path.name, rec)


def test_latest_record_per_row_wins(tmp_path, monkeypatch):
    tables = _tables()
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    base = {"host": {"cores": 2}, "command": "x", "table": "t", "key": "a"}
    records = [
        {**base, "date": "2026-01-02", "commit": "bbb", "figures": {"k": "a", "s": "2"}},
        {**base, "date": "2026-01-01", "commit": "aaa", "figures": {"k": "a", "s": "1"}},
        {
            **base,
            "key": "b",
            "date": "2026-01-01",
            "commit": "bbb",
            "figures": {"k": "b", "s": "3"},
        },
    ]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    text = tables.Rows("r.jsonl").render("t")
    assert "| a | 2 |" in text and "| b | 3 |" in text and "| 1 |" not in text
    assert "No records yet" in tables.Rows("missing.jsonl").render("t")
    assert "No records yet" in tables.Sparse(("missing.jsonl",)).render("sparse")


def test_a_runs_row_replaces_the_transcribed_one(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import bench_distributed

    tables = _tables()
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    rec = {
        "nnz": 10**7,
        "busy": False,
        "loadavg": 0.5,
        "single_phase": 0.07,
        "distributed_phase": 0.077,
        "phase_ratio": 1.1,
        "workers": 2,
        **{key: 0.01 for key in ("round_s", "slowest_s", "beyond_s", "driver_s")},
    }
    fresh = bench_distributed.docs_row(rec, "python benchmarks/bench_distributed.py --record")
    old = (ROOT / "benchmarks" / "results" / "distributed.jsonl").read_text(encoding="utf-8")
    (tmp_path / "distributed.jsonl").write_text(old + json.dumps(fresh) + "\n")
    text = tables.render("distributed")
    assert "alone (load 0.5)" in text and "| 0.0724 |" not in text
    assert "1 of 3 transcribed" not in text and "transcribed from earlier docs" in text
