"""Every experiment script runs end to end in --quick mode and writes CSV, PNG and params."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

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
