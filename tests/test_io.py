"""Readers, writers and result files: round trips, formats, and errors that name file and line."""

import gzip

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import binary_matrices
from hypothesis import given
from hypothesis import strategies as st

from banmf import factorize, make_boolean
from banmf.io import atomic_path, load_result, read_dataset, read_matrix, save_result, write_matrix


@given(binary_matrices(max_n=9, max_m=9), st.sampled_from(["x.mtx", "x.mtx.gz", "x.npz", "x.csv", "x.tsv", "x.dat"]))
def test_round_trip(tmp_path_factory, Xd, name):
    path = tmp_path_factory.mktemp("rt") / name
    if name.endswith(".dat") and not Xd.any():
        return  # a transaction file cannot say how many columns an all-zero matrix has
    write_matrix(Xd, path)
    opts = {"n_cols": Xd.shape[1]} if name.endswith(".dat") else {}
    X = read_matrix(path, **opts)
    np.testing.assert_array_equal(X.toarray(), Xd.astype(bool))


def test_matrix_market_variants(tmp_path):
    p = tmp_path / "a.mtx"
    p.write_text("%%MatrixMarket matrix coordinate integer symmetric\n% comment\n3 3 2\n2 1 1\n3 3 0\n")
    np.testing.assert_array_equal(read_matrix(p).toarray(), [[0, 1, 0], [1, 0, 0], [0, 0, 0]])
    p.write_text("%%MatrixMarket matrix array real general\n2 2\n1\n0\n1\n1\n")
    np.testing.assert_array_equal(read_matrix(p).toarray(), [[1, 1], [0, 1]])


@pytest.mark.parametrize(
    "text, match",
    [
        ("hello\n", r"line 1: not a Matrix Market file"),
        ("%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1\n", "line 1: field 'complex'"),
        ("%%MatrixMarket matrix coordinate pattern general\n3 x 1\n", "line 2: bad size line"),
        ("%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 1\n4 1\n", r"line 4: index \(4, 1\) outside"),
        ("%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 1\n2 a\n", "line 4: 'a' is not a number"),
        ("%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 1\n2 2 2\n", "line 4: expected 2 numbers"),
        ("%%MatrixMarket matrix coordinate pattern general\n3 3 3\n1 1\n2 2\n", "declares 3 entries but has 2"),
        ("%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n2 2 0.5\n", "line 4: value 0.5 is not 0 or 1"),
        ("%%MatrixMarket matrix coordinate pattern general\n0 3 0\n", "line 2: the matrix is empty"),
    ],
)
def test_malformed_matrix_market_names_file_and_line(tmp_path, text, match):
    p = tmp_path / "bad.mtx"
    p.write_text(text)
    with pytest.raises(ValueError, match=match) as info:
        read_matrix(p)
    assert "bad.mtx" in str(info.value)


def test_csv_header_and_index_detection(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text("name,f1,f2,f3\ncat,1,0,1\ndog,0,0,1\n")
    ds = read_dataset(p)
    assert ds.row_labels == ["cat", "dog"] and ds.col_labels == ["f1", "f2", "f3"]
    np.testing.assert_array_equal(ds.X.toarray(), [[1, 0, 1], [0, 0, 1]])
    p.write_text("1,0\n0,1\n")
    ds = read_dataset(p)
    assert ds.row_labels is None and ds.col_labels is None and ds.X.nnz == 2
    p.write_text("1,0\n0,2\n")
    with pytest.raises(ValueError, match=r"a.csv, line 2: value '2' in column 2 is not 0 or 1"):
        read_matrix(p)
    p.write_text("1,0\n0\n")
    with pytest.raises(ValueError, match="line 2: 1 values where the first row has 2"):
        read_matrix(p)


def test_fimi_dat(tmp_path):
    p = tmp_path / "t.dat"
    p.write_text("1 3 3\n\n0\n")
    np.testing.assert_array_equal(read_matrix(p).toarray(), [[0, 1, 0, 1], [0, 0, 0, 0], [1, 0, 0, 0]])
    with pytest.raises(ValueError, match="line 3: item id 0 is below the first id"):
        read_matrix(p, one_based=True)
    p.write_text("1 3\n2\n")
    np.testing.assert_array_equal(read_matrix(p, one_based=True, n_cols=4).toarray(), [[1, 0, 1, 0], [0, 1, 0, 0]])
    p.write_text("1 2\n3 x\n")
    with pytest.raises(ValueError, match="t.dat, line 2: item id 'x' is not an integer"):
        read_matrix(p)


def test_unreadable_and_unknown_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_matrix(tmp_path / "missing.mtx")
    (tmp_path / "a.xyz").write_text("1")
    with pytest.raises(ValueError, match="cannot tell the format"):
        read_matrix(tmp_path / "a.xyz")
    (tmp_path / "b.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a scipy sparse .npz"):
        read_matrix(tmp_path / "b.npz")
    (tmp_path / "c.mtx.gz").write_bytes(b"not gzip")
    with pytest.raises(ValueError, match="unreadable"):
        read_matrix(tmp_path / "c.mtx.gz")
    with pytest.raises(TypeError, match="do not apply"):
        read_matrix(tmp_path / "a.mtx", header=True)


def test_result_round_trip(tmp_path):
    X, _, _ = make_boolean(30, 20, 3, 0.3, random_state=0)
    r = factorize(X, 3, method="banmf", random_state=0, max_iter=100)
    path = tmp_path / "r.npz"
    save_result(r, path, X=X, extra={"input": "x.mtx"})
    saved = load_result(path)
    np.testing.assert_array_equal(saved.W, r.W)
    np.testing.assert_array_equal(saved.H, r.H)
    np.testing.assert_array_equal(saved.X.toarray(), X.toarray())
    np.testing.assert_allclose(saved.loss_curve, r.estimator.loss_curve_)
    assert saved.meta["error"] == r.error and saved.meta["method"] == "banmf"
    assert saved.meta["params"]["max_iter"] == 100 and saved.meta["input"] == "x.mtx"
    assert saved.meta["thresholds"] == [t.tolist() for t in r.estimator.thresholds_]
    assert {"banmf", "numpy", "scipy", "numba"} <= set(saved.meta["versions"])
    asso = factorize(X, 3, method="asso", tau=0.5)
    save_result(asso.estimator, tmp_path / "a.npz")
    assert load_result(tmp_path / "a.npz").loss_curve is None
    (tmp_path / "z.npz").write_bytes(b"zz")
    with pytest.raises(ValueError, match="not a banmf result"):
        load_result(tmp_path / "z.npz")


def test_atomic_write_leaves_no_partial_file(tmp_path):
    target = tmp_path / "out.mtx"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("crash mid-write")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.mtx"]
    with pytest.raises(FileNotFoundError, match="no such folder"):
        write_matrix(np.eye(2), tmp_path / "nope" / "x.mtx")


def test_gzip_written_is_readable_by_scipy(tmp_path):
    import scipy.io

    X, _, _ = make_boolean(20, 10, 2, 0.3, random_state=1)
    write_matrix(X, tmp_path / "x.mtx.gz")
    with gzip.open(tmp_path / "x.mtx.gz", "rb") as fh:
        ref = scipy.io.mmread(fh)
    np.testing.assert_array_equal(sp.csr_matrix(ref).toarray() != 0, X.toarray())
