"""The benchmark scripts run end to end on small inputs and print their tables."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Each starts a benchmark script in its own process: the second tier.
pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def _run(path, *args):
    done = subprocess.run(
        [sys.executable, str(path), *args], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_bench_polish_small():
    out = _run(
        BENCH / "bench_polish.py", "--n", "3000", "--m", "400", "--nnz", "30000", "--ks", "4", "20"
    )
    rows = [line for line in out.splitlines() if line.startswith(("| 4 ", "| 20 "))]
    assert len(rows) == 2 and "flip" in rows[1]


def test_bench_scale_quick():
    out = _run(BENCH / "bench_scale.py", "--quick", "--threads", "1")
    row = next(line for line in out.splitlines() if line.startswith("| 2e4 | 4 | 1 |"))
    cells = row.split(" | ")
    # Iterations, thresholds, polish and the combination ran and were timed.
    assert all(float(cells[i].split()[0]) > 0 for i in (3, 5, 6, 7, 12)), row


def test_bench_accuracy_quick():
    out = _run(BENCH / "bench_accuracy.py", "--quick", "--jobs", "2")
    assert "## 3. Real data" in out and "zoo 101×14" in out


@pytest.mark.parametrize("name", ["quickstart.py"])
def test_quickstart(name):
    out = _run(SCRIPTS / name, "--quick")
    assert "Reg-BANMF" in out and "best of" in out


def test_bench_contention_spells_out_the_paper_config(monkeypatch):
    """Its cases hold banmf.PAPER_CONFIG literally (it imports banmf only in its workers)."""
    import importlib.util

    import banmf

    monkeypatch.syspath_prepend(str(BENCH))  # its records' module, as when run as a script

    spec = importlib.util.spec_from_file_location("bench_contention", BENCH / "bench_contention.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for case in ("lucap0", "1e6"):
        params = module.CASES[case]["params"]
        assert {key: params[key] for key in banmf.PAPER_CONFIG} == dict(banmf.PAPER_CONFIG)


def test_bench_sparse_accuracy_quick(tmp_path):
    out_path = tmp_path / "sparse_accuracy.jsonl"
    out = _run(
        BENCH / "bench_sparse_accuracy.py",
        "--out",
        str(out_path),
        "--quick",
        "--data",
        "tiles-small",
        "ratings",
        "clicks",
        "--ks",
        "5",
        "--methods",
        "banmf",
        "banmf (paper)",
        "grecond",
    )
    assert "## tiles-small" in out and "truth" in out and "rec." in out
    assert "## ratings" in out and "## clicks" in out
    assert "refused" not in out and out.count("truth") == 3
    records = [json.loads(line) for line in out_path.read_text().splitlines()]
    assert len(records) == 9 and {r["benchmark"] for r in records} == {"sparse_accuracy"}
    assert all(r["quick"] and r["tree_commit"] and "host" in r for r in records)


def test_bench_completion_quick():
    out = _run(BENCH / "bench_completion.py", "--quick", "--fractions", "0.3", "--jobs", "2")
    assert "### gen50-d0.5-k5 (k=5, 2 seeds)" in out and "| majority |" in out
    assert "### votes: the ? cells as unknown, as 0, as 1" in out
    assert "| missing= (" in out and "| observed= (" in out


def test_bench_rank_quick():
    # The noise levels share every code path: the noiseless one, whose row is checked, is enough.
    out = _run(BENCH / "bench_rank.py", "--quick", "--noises", "0")
    assert "| 40x30 | 0 % | 1 |" in out and "### zoo (101×15)" in out and "chosen k =" in out


def test_bench_distributed_quick():
    pytest.importorskip("distributed")
    out = _run(BENCH / "bench_distributed.py", "--quick")
    header = (
        "| nnz | workers | single s/it | distributed s/it | ratio | MB sent/it | MB received/it "
        "| round trips/it | same factors |"
    )
    assert header in out
    rows = [line for line in out.splitlines() if line.startswith("| 2e5 |")]
    assert [row.split(" | ")[1] for row in rows] == ["1", "2"]
    assert all(row.rstrip(" |").endswith("| yes") for row in rows), rows
    # the iterations alone, each side's, and the verdict on them
    assert "| nnz, workers | single s/it | distributed s/it | ratio | single, each repeat |" in out
    assert "the single machine's time per iteration (the iterations alone; whole fits" in out


def test_bench_startup_writes_its_record(tmp_path):
    out_path = tmp_path / "startup.jsonl"
    out = _run(BENCH / "bench_startup.py", "--pairs", "1", "--out", str(out_path))
    assert "first_no_ahead" in out
    import json

    (record,) = [json.loads(line) for line in out_path.read_text().splitlines()]
    assert record["command"].endswith("factorize data/zoo_101x15.mtx -k 5")
    assert {"first", "first_no_ahead", "later"} == set(record["figures"])
    assert record["figures"]["first"]["median_compile_s"] > 0  # an empty cache compiles
    assert record["figures"]["later"]["median_compile_s"] == 0  # a full one does not
    assert "numba" in record["versions"] and record["commit"] is not None


def test_bench_elbmf_writes_its_record(tmp_path):
    out_path = tmp_path / "elbmf.jsonl"
    out = _run(
        BENCH / "bench_elbmf.py",
        *("--sizes", "2000x300:6000", "--iters", "3", "--repeats", "1", "--out", str(out_path)),
    )
    assert "| 2000×300 |" in out
    import json

    (record,) = [json.loads(line) for line in out_path.read_text().splitlines()]
    assert record["benchmark"] == "elbmf" and record["ratio_dense_over_sparse"] > 0
    # The same iterations from the same start: the two ends agree to rounding.
    assert record["max_factor_difference"] < 1e-9
    assert record["boolean_error_sparse"] == record["boolean_error_dense"]
