"""Every experiment script runs end to end in --quick mode and writes CSV, PNG and params; the
scripts' own set-up (the rank-gap suite) does what they say."""

import csv
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

# Each starts an experiment script in its own process: the second tier.
pytestmark = pytest.mark.slow

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
EXPERIMENTS = ["density", "noise", "rank_gap", "timing", "real", "convergence"]


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_quick_run(name, tmp_path):
    pytest.importorskip("matplotlib")
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPTS / f"{name}.py"),
            "--quick",
            "--jobs",
            "2",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    files = {p.suffix for p in tmp_path.iterdir()}
    assert {".csv", ".png", ".json"} <= files
    params = json.loads((tmp_path / "params.json").read_text())
    assert params["experiment"] == name and "versions" in params
    for path in tmp_path.glob("*.csv"):
        with open(path) as fh:
            rows = list(csv.DictReader(fh))
        assert rows, path
    assert not list(tmp_path.glob(".*tmp"))


@pytest.fixture
def rank_gap(monkeypatch):
    # The scripts import their shared code from their own folder (scripts/_common.py).
    monkeypatch.syspath_prepend(str(SCRIPTS))
    return importlib.import_module("rank_gap")


def test_rank_gap_suite_redraws_below_k(rank_gap):
    grid = rank_gap.settings([10, 12], [3], [0.5], 2, square_only=False)
    assert len(grid) == 8  # 4 (n, m) pairs × 2 repeats
    for seed, (n, m, k, d, rep) in enumerate(grid):
        c = rank_gap.rank_gap_case(n, m, k, d, rep, random_state=seed)
        assert c.X.shape == (n, m) and c.real_rank >= c.k == 3 and c.gap == c.real_rank - 3
    square = rank_gap.settings([10, 12], [3], [0.5], 1, square_only=True)
    assert [(n, m) for n, m, *_ in square] == [(10, 10), (12, 12)]


def test_rank_gap_case_gives_up_on_an_unreachable_rank(rank_gap):
    # A 2×2 matrix has real rank at most 2: rank 3 is never reached.
    with pytest.raises(RuntimeError, match="no 2×2 matrix of real rank ≥ 3"):
        rank_gap.rank_gap_case(2, 2, 3, 0.5, max_redraws=5, random_state=0)
