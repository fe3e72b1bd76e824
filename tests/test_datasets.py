"""Generators and bundled datasets."""

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import reference as ref
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

from banmf import (
    boolean_error,
    boolean_product,
    make_boolean,
    make_sparse_tiles,
    make_sparse_uniform,
)
from banmf.datasets import (
    load_lucap0,
    load_mushroom,
    load_retail,
    load_votes,
    load_zoo,
    make_sparse_degrees,
    planted_probability,
)
from banmf.exceptions import InvalidParameterError


def test_generator_density_is_d_in_expectation():
    for d, k in ((0.2, 5), (0.5, 3), (0.8, 5)):
        dens = np.array(
            [make_boolean(50, 50, k, d, random_state=s)[0].nnz / 2500 for s in range(500)]
        )
        assert abs(dens.mean() - d) < 3 * dens.std(ddof=1) / np.sqrt(len(dens))


def test_generator_planted_product_and_reproducibility():
    X, W, H = make_boolean(40, 30, 4, 0.4, random_state=7)
    np.testing.assert_array_equal(X.toarray(), ref.boolean_product(W, H))
    X2, W2, _ = make_boolean(40, 30, 4, 0.4, random_state=7)
    np.testing.assert_array_equal(X2.toarray(), X.toarray())
    assert planted_probability(0.5, 1) == pytest.approx(np.sqrt(0.5))


@pytest.mark.parametrize("kind", ["iid", "count"])
def test_noise_flips(kind):
    Xc, W, H = make_boolean(100, 80, 3, 0.4, random_state=3)
    Xn, W2, H2 = make_boolean(100, 80, 3, 0.4, noise=0.05, noise_kind=kind, random_state=3)
    np.testing.assert_array_equal(W, W2)
    flips = int((Xc.toarray() ^ Xn.toarray()).sum())
    if kind == "count":
        assert flips == int(0.05 * 8000)
    else:
        assert abs(flips - 400) < 5 * np.sqrt(400)


def test_bad_generator_arguments():
    with pytest.raises(ValueError, match="density"):
        make_boolean(5, 5, 2, 1.5)
    with pytest.raises(ValueError, match="noise"):
        make_boolean(5, 5, 2, 0.5, noise=-0.1)
    with pytest.raises(ValueError, match="n must be"):
        make_boolean(0, 5, 2, 0.5)


def test_sparse_uniform():
    X = make_sparse_uniform(500, 300, 4000, random_state=0)
    assert X.shape == (500, 300) and 3900 < X.nnz <= 4000 and X.has_canonical_format
    with pytest.raises(ValueError, match="exceeds"):
        make_sparse_uniform(2, 2, 5)


KINDS = ("uniform", "poisson", "powerlaw")


def _degrees(X):
    return np.diff(X.indptr), np.bincount(X.indices, minlength=X.shape[1])


@pytest.mark.parametrize("rows", KINDS)
@pytest.mark.parametrize("cols", KINDS)
def test_sparse_degrees_exact_nnz_no_repeats(rows, cols):
    X = make_sparse_degrees(3000, 2000, 30000, rows=rows, cols=cols, random_state=0)
    assert X.shape == (3000, 2000) and X.nnz == 30000 and X.has_canonical_format
    assert X.dtype == bool and X.data.all()
    keys = np.repeat(np.arange(3000), np.diff(X.indptr)) * 2000 + X.indices
    assert np.all(np.diff(keys) > 0)  # sorted and distinct: no repeated entry
    r, c = _degrees(X)
    if rows == "uniform":
        assert set(r.tolist()) == {10}
    if cols == "uniform":  # no row is nearly full: the matching keeps the column degrees
        assert set(c.tolist()) == {15}


def test_sparse_degrees_skew():
    n, m, nnz = 20000, 2000, 200000  # mean row degree 10, mean column degree 100
    r, c = _degrees(make_sparse_degrees(n, m, nnz, rows="powerlaw", cols="poisson", random_state=1))
    assert r.max() > 20 * r.mean() and c.max() < 2 * c.mean()
    r, c = _degrees(make_sparse_degrees(n, m, nnz, rows="poisson", cols="powerlaw", random_state=1))
    assert c.max() > 10 * c.mean() and r.max() < 3 * r.mean()
    assert r.var() == pytest.approx(r.mean(), rel=0.1)  # Poisson: variance ≈ mean
    # A larger exponent is a lighter tail.
    heavy = _degrees(make_sparse_degrees(n, m, nnz, rows="powerlaw", exponent=1.8, random_state=2))[
        0
    ]
    light = _degrees(make_sparse_degrees(n, m, nnz, rows="powerlaw", exponent=4.0, random_state=2))[
        0
    ]
    assert heavy.max() > 3 * light.max()


def test_sparse_degrees_reproducible():
    a = make_sparse_degrees(500, 300, 4000, rows="powerlaw", cols="powerlaw", random_state=3)
    b = make_sparse_degrees(500, 300, 4000, rows="powerlaw", cols="powerlaw", random_state=3)
    c = make_sparse_degrees(500, 300, 4000, rows="powerlaw", cols="powerlaw", random_state=4)
    assert (a != b).nnz == 0 and (a != c).nnz > 0


@pytest.mark.parametrize("rows", KINDS)
@pytest.mark.parametrize("cols", KINDS)
def test_sparse_degrees_extremes(rows, cols):
    # Empty, full and nearly full matrices (rows that need every column), and single rows or
    # columns: exact nnz, no repeats.
    for n, m in ((1, 1), (1, 9), (9, 1), (6, 5), (40, 30)):
        for nnz in sorted({0, 1, n * m // 2, n * m - 1, n * m}):
            for seed in range(2):
                X = make_sparse_degrees(
                    n, m, nnz, rows=rows, cols=cols, exponent=1.5, random_state=seed
                )
                D = X.toarray()
                assert X.nnz == nnz == D.sum() and X.has_canonical_format
                if rows == "uniform":
                    assert np.ptp(D.sum(axis=1)) <= 1


def test_sparse_degrees_bad_arguments():
    with pytest.raises(ValueError, match="rows must be one of"):
        make_sparse_degrees(5, 5, 3, rows="zipf")
    with pytest.raises(ValueError, match="cols must be one of"):
        make_sparse_degrees(5, 5, 3, cols=None)
    with pytest.raises(ValueError, match="exponent"):
        make_sparse_degrees(5, 5, 3, rows="powerlaw", exponent=1.0)
    with pytest.raises(ValueError, match="exceeds"):
        make_sparse_degrees(2, 2, 5)
    with pytest.raises(ValueError, match="nnz must be"):
        make_sparse_degrees(2, 2, -1)


def test_sparse_tiles_plant_the_tiles_in_x():
    X, W, H = make_sparse_tiles(5000, 400, 40000, 8, random_state=0)
    assert X.shape == (5000, 400) and W.shape == (5000, 8) and H.shape == (8, 400)
    assert X.has_canonical_format and abs(X.nnz - 40000) < 0.1 * 40000
    D = X.toarray()
    P = ref.boolean_product(W, H)
    assert not (P & ~D).any()  # without dropout every tile cell is a one of X
    # about half of the ones are planted, half background
    assert 0.3 < P.sum() / X.nnz < 0.6
    widths, heights = H.sum(axis=1), W.sum(axis=0)
    assert widths.min() >= 2 and widths.max() <= 20 and heights.min() >= 1
    # tiles overlap: power-law columns are drawn into several tiles
    assert (H.astype(int).sum(axis=0) >= 2).any()


def test_sparse_tiles_dropout_clears_that_share_of_the_tiles():
    X, W, H = make_sparse_tiles(4000, 300, 30000, 6, tile_share=0.8, dropout=0.2, random_state=1)
    P = ref.boolean_product(W, H)
    kept = (X.toarray() & P).sum() / P.sum()
    # dropped cells come back only where the background lands on them (a few %)
    assert 0.76 < kept < 0.86


def test_sparse_tiles_degrees_follow_the_kinds():
    """The background (the ones outside the tiles) has degrees of the kinds asked for."""
    n, m, nnz = 20000, 2000, 200000

    def background(cols):
        X, W, H = make_sparse_tiles(n, m, nnz, 10, rows="poisson", cols=cols, random_state=2)
        # X's ones off the planted W⊗H, without a dense 20000×2000 array.
        return _degrees(sp.csr_array(X.astype(bool) > boolean_product(W, H).astype(bool)))

    r, c = background("powerlaw")
    assert c.max() > 10 * c.mean()
    assert r.var() == pytest.approx(r.mean(), rel=0.2)  # Poisson rows: variance ≈ mean
    r, c = background("poisson")
    assert c.var() == pytest.approx(c.mean(), rel=0.2) and c.max() < 2 * c.mean()


def test_sparse_tiles_reproducible_and_checked():
    a = make_sparse_tiles(500, 100, 3000, 4, random_state=3)
    b = make_sparse_tiles(500, 100, 3000, 4, random_state=3)
    assert (a[0] != b[0]).nnz == 0 and (a[1] == b[1]).all() and (a[2] == b[2]).all()
    X, W, H = make_sparse_tiles(50, 10, 0, 0, random_state=0)
    assert X.nnz == 0 and W.shape == (50, 0) and H.shape == (0, 10)
    X, W, H = make_sparse_tiles(30, 3, 20, 2, tile_cols=(2, 50), random_state=0)
    assert H.sum(axis=1).max() <= 3
    for kwargs, match in (
        ({"tile_share": 1.5}, "tile_share"),
        ({"dropout": 1.0}, "dropout"),
        ({"tile_cols": (0, 3)}, "tile_cols"),
        ({"tile_cols": (5, 3)}, "tile_cols"),
        ({"tile_cols": 4}, "tile_cols"),
        ({"overlap": 1.5}, "overlap"),
        ({"overlap": -0.1}, "overlap"),
        ({"overlap": "half"}, "overlap"),
        ({"rows": "zipf"}, "rows must be one of"),
        ({"exponent": 1}, "exponent"),
    ):
        with pytest.raises(InvalidParameterError, match=match):
            make_sparse_tiles(20, 20, 50, 2, **kwargs)
    with pytest.raises(ValueError, match="k must be"):
        make_sparse_tiles(20, 20, 50, -1)
    with pytest.raises(ValueError, match="exceeds"):
        make_sparse_tiles(2, 2, 5, 1)


def _shared_with_an_earlier_tile(H):
    """For every tile after the first: the most columns it shares with one earlier tile."""
    common = H.astype(np.int64) @ H.T.astype(np.int64)
    return np.array([common[l, :l].max() for l in range(1, len(H))], dtype=np.int64)


def _assert_overlap(H, overlap):
    """Each tile after the first shares rint(overlap * width) columns with its parent, or the
    whole parent when narrower (and no parent is narrower than the narrowest earlier tile)."""
    widths = H.sum(axis=1)
    least = np.minimum(np.rint(overlap * widths[1:]), np.minimum.accumulate(widths)[:-1])
    assert (_shared_with_an_earlier_tile(H) >= least).all()


@given(
    st.integers(1, 60),
    st.integers(1, 40),
    st.floats(0.0, 1.0),
    st.integers(0, 6),
    st.floats(0.0, 1.0),
    st.integers(1, 8),
    st.integers(0, 8),
    st.sampled_from(KINDS),
    st.integers(0, 2**31),
)
def test_sparse_tiles_overlap_property(n, m, fill, k, overlap, lo, extra, cols, seed):
    """Any shape, size and overlap: canonical X holding every planted cell, tiles of the asked
    widths, each after the first sharing its share of columns with an earlier one, and the
    same draw for the same seed."""
    nnz = int(fill * n * m)
    kwargs = dict(tile_cols=(lo, lo + extra), overlap=overlap, cols=cols, random_state=seed)
    X, W, H = make_sparse_tiles(n, m, nnz, k, **kwargs)
    assert X.shape == (n, m) and W.shape == (n, k) and H.shape == (k, m)
    assert X.has_canonical_format and X.dtype == bool and X.data.all()
    assert not (ref.boolean_product(W, H) & ~X.toarray()).any()  # no dropout: tiles in X
    widths, heights = H.sum(axis=1), W.sum(axis=0)
    assert (widths >= min(lo, m)).all() and (widths <= min(lo + extra, m)).all()
    assert (heights >= 1).all()
    if k > 1:
        _assert_overlap(H, overlap)
    X2, W2, H2 = make_sparse_tiles(n, m, nnz, k, **kwargs)
    assert (X != X2).nnz == 0 and (W == W2).all() and (H == H2).all()


def test_sparse_tiles_without_overlap_draw_as_before():
    """overlap=0 (the default) draws the matrices drawn before the parameter existed (seeded
    fits of the corpus and the benchmarks stay the same); overlap > 0 changes the tiles after
    the first."""
    a = make_sparse_tiles(800, 150, 6000, 6, random_state=5)
    digest = hashlib.sha256()
    for part in (a[0].indptr, a[0].indices, np.packbits(a[1]), np.packbits(a[2])):
        digest.update(part.astype(np.int64).tobytes())
    assert digest.hexdigest()[:16] == "7acc79c6a9082971"  # drawn before overlap= was added
    c = make_sparse_tiles(800, 150, 6000, 6, overlap=0.5, random_state=5)
    assert (a[1][:, 0] == c[1][:, 0]).all() and (a[2][0] == c[2][0]).all()
    # Without overlap, tiles share columns only where heavy columns are drawn twice.
    assert _shared_with_an_earlier_tile(c[2]).sum() > _shared_with_an_earlier_tile(a[2]).sum()


def _ratings(seed):
    """Users × items as in bench_sparse_accuracy's "ratings" case, 1/4 of its size."""
    return make_sparse_tiles(
        5_000,
        1_500,
        100_000,
        20,
        tile_share=0.6,
        tile_cols=(20, 300),
        dropout=0.4,
        overlap=0.3,
        exponent=3,
        random_state=seed,
    )


def _clicks(seed):
    """Sessions × pages as in bench_sparse_accuracy's "clicks" case, 1/5 of its size."""
    return make_sparse_tiles(
        10_000,
        1_000,
        30_000,
        20,
        tile_cols=(2, 6),
        dropout=0.2,
        overlap=0.5,
        rows="poisson",
        exponent=2,
        random_state=seed,
    )


@pytest.mark.parametrize("seed", [0, 1])
def test_ratings_like_data(seed):
    """Heavy users and heavy items, wide overlapping genres each rated in part, and a planted
    truth that explains only a small share of the ones."""
    X, W, H = _ratings(seed)
    assert X.shape == (5_000, 1_500) and abs(X.nnz - 100_000) < 5_000
    r, c = _degrees(X)
    assert r.max() > 10 * r.mean() and c.max() > 8 * c.mean()  # power laws on both sides
    assert np.median(r) < 0.75 * r.mean()  # most users rate little
    widths = H.sum(axis=1)
    assert widths.min() >= 20 and widths.max() <= 300
    _assert_overlap(H, 0.3)
    P = boolean_product(W, H)
    rated = (X.multiply(P)).nnz / P.nnz  # 60 % kept, plus the background landing there
    assert 0.58 < rated < 0.7
    assert 0.75 < boolean_error(X, W, H) / X.nnz < 0.95


@pytest.mark.parametrize("seed", [0, 1])
def test_click_stream_like_data(seed):
    """A few clicks per session, a few pages in a large share of the sessions, short paths
    that share pages."""
    X, W, H = _clicks(seed)
    assert X.shape == (10_000, 1_000) and abs(X.nnz - 30_000) < 2_000
    r, c = _degrees(X)
    assert 2 < r.mean() < 4 and r.max() < 20  # very short rows, no heavy sessions
    top = np.sort(c)[::-1] / X.shape[0]
    assert top[0] > 0.25 and top[10] < 0.1  # a few very popular pages, then a long tail
    widths = H.sum(axis=1)
    assert widths.min() >= 2 and widths.max() <= 6
    _assert_overlap(H, 0.5)
    P = boolean_product(W, H)
    assert 0.78 < X.multiply(P).nnz / P.nnz < 0.9  # paths followed to the end 80 % of clicks


def test_bundled_datasets():
    zoo = load_zoo()
    assert zoo.X.shape == (101, 15) and zoo.X.nnz == 660
    assert zoo.row_labels[0] == "aardvark" and zoo.col_labels[-1] == "catsize"
    assert load_zoo("14").X.shape == (101, 14) and load_zoo("16_legs").X.nnz == 738
    assert load_votes().X.shape == (232, 16) and load_votes("435_missing_mask").X.nnz == 392
    assert load_lucap0().X.shape == (2000, 143)
    assert load_mushroom().X.shape == (8124, 117)
    assert load_retail().X.nnz == 908576
    with pytest.raises(ValueError, match="variant"):
        load_zoo("13")


def test_damaged_data_is_detected(tmp_path):
    import shutil

    from banmf.datasets import data_dir

    for name in ("zoo_101x15.mtx", "zoo_101x15.json"):
        shutil.copy(data_dir() / name, tmp_path / name)
    (tmp_path / "zoo_101x15.mtx").write_text(
        (tmp_path / "zoo_101x15.mtx").read_text().replace("\n1 1\n", "\n1 2\n", 1)
    )
    with pytest.raises(ValueError, match="checksum"):
        load_zoo(data_home=tmp_path)
    with pytest.raises(FileNotFoundError):
        load_zoo(data_home=tmp_path / "nowhere")


# ---------------------------------------------------------------------------------------------
# Where the bundled data is found: data_home=, BANMF_DATA, the installed package, the checkout

REPO = Path(__file__).resolve().parent.parent


def test_installed_copy_finds_its_data_through_package_resources(tmp_path):
    """A copy of the package laid out as a wheel installs it (banmf/bundled/, no data/ beside it)
    finds the data with importlib.resources, with BANMF_DATA unset and run from elsewhere."""
    import banmf

    site = tmp_path / "site"
    shutil.copytree(
        Path(banmf.__file__).parent,
        site / "banmf",
        ignore=shutil.ignore_patterns("__pycache__", "bundled"),
    )
    (site / "banmf" / "bundled").mkdir()
    for name in ("zoo_101x15.mtx", "zoo_101x15.json"):
        shutil.copy(REPO / "data" / name, site / "banmf" / "bundled" / name)
    env = {k: v for k, v in os.environ.items() if k != "BANMF_DATA"}
    env["PYTHONPATH"] = str(site)
    code = (
        "import banmf.datasets as d; "
        "print(d.__file__, d._REPO_DATA.exists(), d.data_dir(), d.load_zoo().X.nnz, sep='\\n')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        text=True,
        capture_output=True,
        check=True,
    ).stdout.split("\n")
    assert out[0] == str(site / "banmf" / "datasets.py")  # the copy, not the checkout
    assert out[1] == "False"  # no repository data/ beside the copy
    assert out[2] == str(site / "banmf" / "bundled")
    assert out[3] == "660"


def test_data_dir_order(tmp_path, monkeypatch):
    from banmf import datasets

    monkeypatch.delenv("BANMF_DATA", raising=False)
    assert datasets.data_dir() == REPO / "data"  # a checkout: no banmf/bundled, the repo's data/
    installed = tmp_path / "installed"
    installed.mkdir()
    shutil.copy(REPO / "data" / "zoo_101x15.mtx", installed)
    monkeypatch.setattr(datasets, "_installed_data", lambda: installed)
    assert datasets.data_dir() == installed  # installed data before the repository's
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.setenv("BANMF_DATA", str(other))
    assert datasets.data_dir() == other  # BANMF_DATA before both
    assert datasets.data_dir(installed) == installed  # and data_home= before all
    monkeypatch.setenv("BANMF_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(FileNotFoundError, match="BANMF_DATA=.*nowhere: no such folder"):
        datasets.data_dir()


def test_no_data_anywhere_says_where_to_get_it(tmp_path, monkeypatch):
    from banmf import datasets

    monkeypatch.delenv("BANMF_DATA", raising=False)
    monkeypatch.setattr(datasets, "_installed_data", lambda: None)
    monkeypatch.setattr(datasets, "_REPO_DATA", tmp_path / "data")
    with pytest.raises(FileNotFoundError, match="data_home=, or set BANMF_DATA"):
        load_zoo()


def test_packaging_lists_every_subpackage_and_ships_the_data():
    """pyproject.toml lists the packages by hand (banmf.bundled is mapped to data/): none forgotten."""
    import tomllib

    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {
        ".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "banmf").rglob("__init__.py")
    }
    assert set(setuptools["packages"]) == on_disk | {"banmf.bundled"}
    assert setuptools["package-dir"] == {"banmf.bundled": "data"}
    patterns = setuptools["package-data"]["banmf.bundled"]
    shipped = {p.name for pat in patterns for p in (REPO / "data").glob(pat)}
    assert shipped == {p.name for p in (REPO / "data").iterdir() if p.is_file()}
