"""Smoke test of an installed banmf wheel, as a user who never saw the repository has it.

Run by .ci/run with the python of a fresh virtual environment holding only the wheel (and
pytest), from a temporary folder outside the checkout:

    python wheel_smoke.py CHECKOUT

It checks that banmf is imported from that environment (not from CHECKOUT), that every bundled
dataset loads through the ``load_*`` functions from the data installed with the package, with
its provenance and license README beside it, and that the ``banmf`` console script factorizes a
bundled file: what a wheel adds to the checkout the test suite runs on (the doctests and every
other test run on the checkout). Exits non-zero on the first failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


def step(name: str) -> None:
    print(f"wheel smoke: {name}", flush=True)


def main(checkout: Path) -> int:
    t0 = time.perf_counter()
    if os.environ.get("BANMF_DATA"):
        sys.exit("wheel smoke: unset BANMF_DATA; this checks the data installed with the package")

    import banmf
    from banmf import datasets

    package = Path(banmf.__file__).resolve().parent
    step(f"banmf {banmf.__version__} imported from {package}")
    assert checkout not in package.parents, f"banmf was imported from the checkout ({package})"
    assert "site-packages" in package.parts, f"banmf is not an installed package: {package}"

    data = datasets.data_dir()
    step(f"data_dir() = {data}")
    assert data == package / "bundled", (
        f"data_dir() is {data}, not the installed {package / 'bundled'}"
    )
    assert (data / "README.md").is_file(), "the provenance and license README is not installed"
    assert "license" in (data / "README.md").read_text(encoding="utf-8").lower()

    # Every loader with every variant; together they must read every bundled matrix.
    expected = {  # (loader, kwargs): (shape, nnz)
        ("load_zoo", (("variant", "15"),)): ((101, 15), 660),
        ("load_zoo", (("variant", "16_legs"),)): ((101, 16), 738),
        ("load_zoo", (("variant", "14"),)): ((101, 14), 616),
        ("load_votes", (("variant", "232"),)): ((232, 16), 1939),
        ("load_votes", (("variant", "435_yes"),)): ((435, 16), 3421),
        ("load_votes", (("variant", "435_missing_mask"),)): ((435, 16), 392),
        ("load_lucap0", ()): ((2000, 143), 147632),
        ("load_mushroom", (("drop_class", False),)): ((8124, 119), 186852),
        ("load_mushroom", ()): ((8124, 117), None),
        ("load_retail", ()): ((88162, 16470), 908576),
    }
    loaders = {name for name in datasets.__all__ if name.startswith("load_")}
    assert loaders == {name for name, _ in expected}, f"loaders not smoke-tested: {loaders}"
    read = []
    real_read = datasets.read_dataset

    def recording_read(path, *args, **kwargs):
        read.append(Path(path))
        return real_read(path, *args, **kwargs)

    datasets.read_dataset = recording_read
    try:
        for (name, kwargs), (shape, nnz) in expected.items():
            ds = getattr(datasets, name)(**dict(kwargs))
            step(
                f"{name}({', '.join(f'{k}={v!r}' for k, v in kwargs)}): {ds.X.shape}, nnz {ds.X.nnz}"
            )
            assert ds.X.shape == shape and (nnz is None or ds.X.nnz == nnz), (name, kwargs)
    finally:
        datasets.read_dataset = real_read
    assert all(p.parent == data for p in read), f"read outside the installed data: {read}"
    bundled = {p.name for p in data.iterdir() if p.name.endswith((".mtx", ".mtx.gz"))}
    assert bundled == {p.name for p in read}, (
        f"bundled but never loaded: {bundled - {p.name for p in read}}"
    )

    # The console script installed with the wheel, on a bundled file located via the package.
    script = Path(sys.executable).parent / ("banmf.exe" if os.name == "nt" else "banmf")
    zoo = data / "zoo_101x15.mtx"
    step(f"{script.name} factorize {zoo} -k 5 --json")
    out = subprocess.run(
        [str(script), "factorize", str(zoo), "-k", "5", "--json"],
        check=False,
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        sys.exit(f"banmf factorize failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    record = json.loads(out.stdout)
    assert record["shape"] == [101, 15] and record["n_components"] == 5, record
    step(f"factorize: error {record['error']}, relative error {record['relative_error']:.4f}")

    step(f"ok in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python wheel_smoke.py CHECKOUT")
    sys.exit(main(Path(sys.argv[1]).resolve()))
