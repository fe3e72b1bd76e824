"""Factors read as patterns: planted tiles come back, counts against brute force, the CLI."""

import csv
import io
import json

import numpy as np
import pytest
import reference as ref
from conftest import binary_matrices
from hypothesis import given
from hypothesis import strategies as st

from banmf import Factorization, make_boolean, patterns
from banmf.cli import main
from banmf.datasets import data_dir

ZOO = str(data_dir() / "zoo_101x15.mtx")


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_patterns_of_a_planted_matrix_are_the_planted_tiles():
    X, W, H = make_boolean(60, 40, 4, 0.3, random_state=3)
    found = patterns(Factorization.from_factors(X, W, H))
    assert sorted(p.factor for p in found) == list(range(4))
    for p in found:
        assert sorted(p.rows) == np.flatnonzero(W[:, p.factor]).tolist()
        assert sorted(p.cols) == np.flatnonzero(H[p.factor]).tolist()
        assert p.precision == 1.0 and p.ones == p.cells
    contributions = [p.contribution for p in found]
    assert contributions == sorted(contributions, reverse=True)


@given(binary_matrices(max_n=9, max_m=9), st.integers(1, 3), st.integers(0, 2**31))
def test_counts_equal_brute_force(Xd, k, seed):
    rng = np.random.default_rng(seed)
    n, m = Xd.shape
    W, H = rng.random((n, k)) < 0.4, rng.random((k, m)) < 0.4
    found = {p.factor: p for p in patterns(Factorization.from_factors(Xd, W, H))}
    now = ref.boolean_error(Xd, W, H)
    X = Xd.astype(bool)
    for l in range(k):
        p = found[l]
        W2, H2 = W.copy(), H.copy()
        W2[:, l], H2[l] = False, False
        tile = np.outer(W[:, l], H[l])
        others = ref.boolean_product(W2, H2)
        assert p.contribution == ref.boolean_error(Xd, W2, H2) - now
        assert p.ones == int((X & tile).sum())
        assert p.ones_alone == int((X & tile & ~others).sum())
        assert (p.n_rows, p.n_cols) == (int(W[:, l].sum()), int(H[l].sum()))
        # rows first that have more of the pattern's columns
        hits = X[np.ix_(p.rows, np.flatnonzero(H[l]))].sum(axis=1)
        assert (np.diff(hits) <= 0).all()


def test_labels_top_and_checks():
    X = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]])
    res = Factorization.from_factors(
        X, [[1, 0], [1, 0], [0, 1]], [[1, 1, 0], [0, 0, 1]], row_labels=["a", "b", "c"]
    )
    first = res.patterns(top=1)[0]
    assert first.row_names == ["a"] and first.col_names == ["0"] and first.n_rows == 2
    assert first.to_dict()["rows"] == [0] and json.dumps(first.to_dict())
    with pytest.raises(ValueError, match="pass X"):
        patterns(res.replace(X=None))
    with pytest.raises(ValueError, match="matrix"):
        patterns(res, np.ones((3, 4), dtype=int))
    with pytest.raises(ValueError, match="top"):
        patterns(res, top=0)
    assert patterns(Factorization.from_factors(X, np.zeros((3, 0)), np.zeros((0, 3)))) == []


def test_show_and_factorize_show(tmp_path):
    """On Zoo at k = 5 the patterns read as animal classes; text, JSON and CSV agree."""
    res = tmp_path / "zoo.npz"
    code, out, err = run("factorize", ZOO, "-k", 5, "--out", res, "--show", "--top", 4, "-q")
    assert code == 0, err
    assert "pattern 1 (factor" in out and "milk" in out
    assert "antelope" in out and "chicken" in out and "bass" in out  # mammals, birds, fish
    code, text, err = run("show", res, "--top", 4)
    assert code == 0 and text.strip() == out.split("\n\n", 1)[1].strip()
    code, out, _ = run("show", res, "--json")
    rec = json.loads(out)
    assert code == 0 and len(rec["patterns"]) == 5
    saved = Factorization.load(res)
    for p in rec["patterns"]:
        assert sorted(p["cols"]) == np.flatnonzero(saved.H[p["factor"]]).tolist()
    code, out, _ = run("show", res, "--csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and [int(r["factor"]) for r in rows] == [p["factor"] for p in rec["patterns"]]
    assert all(0 <= float(r["precision"]) <= 1 for r in rows)
    code, out, _ = run("factorize", ZOO, "-k", 3, "--show", "--json", "-q")
    assert code == 0 and len(json.loads(out)["patterns"]) == 3


def test_show_needs_data_it_can_match(tmp_path):
    res = tmp_path / "r.npz"
    X = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]])
    Factorization.from_factors(X, [[1], [1], [0]], [[1, 1, 0]]).replace(X=None).save(res)
    code, _, err = run("show", res)
    assert code == 2 and "--data" in err
    code, _, err = run("show", res, "--data", ZOO)
    assert code == 2 and "101×15" in err


@pytest.mark.parametrize("labelled", [True, False])
def test_export_reads_back_equal_with_names(tmp_path, labelled):
    from banmf.io import export_factors, read_dataset

    X, W, H = make_boolean(30, 12, 3, 0.3, random_state=0)
    names = {
        "row_labels": [f"r{i}" for i in range(30)],
        "col_labels": [f"c,{j}" for j in range(12)],
    }
    res = Factorization.from_factors(X, W, H, **(names if labelled else {}))
    rows = names["row_labels"] if labelled else [f"row_{i}" for i in range(30)]
    cols = names["col_labels"] if labelled else [f"col_{j}" for j in range(12)]
    factors = ["factor_0", "factor_1", "factor_2"]
    for fmt in ("csv", "mtx"):
        written = export_factors(res, tmp_path / fmt, fmt)
        assert all(p.exists() for p in written)
        w = read_dataset(tmp_path / f"{fmt}_W.{fmt}")
        h = read_dataset(tmp_path / f"{fmt}_H.{fmt}")
        np.testing.assert_array_equal(w.X.toarray(), W)
        np.testing.assert_array_equal(h.X.toarray(), H)
        assert (w.row_labels, w.col_labels) == (rows, factors)
        assert (h.row_labels, h.col_labels) == (factors, cols)
    (path,) = export_factors(res, tmp_path / "f", "npz")
    with np.load(path) as z:
        np.testing.assert_array_equal(z["W"], W)
        np.testing.assert_array_equal(z["H"], H)
        assert z["row_labels"].tolist() == rows and z["col_labels"].tolist() == cols
    with pytest.raises(ValueError, match="format"):
        export_factors(res, tmp_path / "x", "xls")


def test_export_command(tmp_path):
    res = tmp_path / "zoo.npz"
    assert run("factorize", ZOO, "-k", 3, "--out", res, "-q")[0] == 0
    code, out, err = run("export", res, "--json")
    assert code == 0, err
    written = json.loads(out)["written"]
    assert written == [str(tmp_path / "zoo_W.csv"), str(tmp_path / "zoo_H.csv")]
    with open(written[1]) as fh:
        assert next(csv.reader(fh))[1:4] == ["hair", "feathers", "eggs"]
    code, out, err = run("export", res, "--to", "npz", "--out", tmp_path / "z")
    assert code == 0 and (tmp_path / "z_factors.npz").exists()
    code, _, err = run("export", res, "--to", "xls")
    assert code == 2 and "csv, mtx, npz" in err
    code, _, err = run("export", res, "--out", tmp_path / "missing" / "x")
    assert code == 2 and "no such folder" in err


@pytest.mark.parametrize("sparse", [False, True])
def test_a_dataframe_in_gives_labelled_patterns_out(sparse):
    pd = pytest.importorskip("pandas")
    X, W, H = make_boolean(40, 12, 2, 0.4, random_state=1)
    frame = pd.DataFrame(
        X.toarray().astype(int),
        index=[f"user{i}" for i in range(40)],
        columns=[f"item{j}" for j in range(12)],
    )
    if sparse:
        frame = frame.astype(pd.SparseDtype(int, 0))
    from banmf import factorize

    res = factorize(frame, 2, random_state=0)
    assert res.row_labels == list(frame.index) and res.col_labels == list(frame.columns)
    assert res.X.nnz == X.nnz
    for p in res.patterns():
        assert all(name.startswith("item") for name in p.col_names)
        assert all(name.startswith("user") for name in p.row_names)
    # the estimators take frames too (as values)
    from banmf import BANMF

    model = BANMF(2, random_state=0, n_init=1).fit(frame)
    assert model.W_.shape == (40, 2)


@pytest.mark.parametrize("labelled", [True, False])
def test_pictures_name_rows_and_columns_and_explain_their_colours(tmp_path, labelled, monkeypatch):
    pytest.importorskip("matplotlib")
    from banmf.report import plots as plotting

    X, W, H = make_boolean(30, 12, 3, 0.3, noise=0.05, random_state=2)
    names = {
        "row_labels": [f"row-{i}" for i in range(30)],
        "col_labels": [f"col-{j}" for j in range(12)],
    }
    res = Factorization.from_factors(X, W, H, **(names if labelled else {}))
    svg = tmp_path / "m.svg"
    assert plotting.plot_result(res, svg, X=res.X) == "matrices"
    text = svg.read_text()
    assert "missed one" in text and "covered zero" in text
    assert ("col-3" in text and "row-7" in text) == labelled
    png = tmp_path / "m.png"
    plotting.plot_result(res, png, X=res.X)
    width, height = (
        int.from_bytes(png.read_bytes()[16:20], "big"),
        int.from_bytes(png.read_bytes()[20:24], "big"),
    )
    assert width == 1300 and height >= 450
    # Larger data: the patterns view, factors and columns by name.
    monkeypatch.setattr(plotting, "SMALL_ENTRIES", 100)
    assert plotting.plot_result(res, svg, X=res.X) == "patterns"
    text = svg.read_text()
    assert "factor 0" in text and ("col-" in text) == labelled
    assert plotting.plot_result(res, tmp_path / "s.pdf") == "summary"
    with pytest.raises(ValueError, match="must end in"):
        plotting.plot_result(res, tmp_path / "x.jpg", X=res.X)


def test_an_all_zero_input_gives_empty_patterns_said_as_such(tmp_path):
    X = np.zeros((6, 5), dtype=np.uint8)
    found = patterns(Factorization.from_factors(X, np.zeros((6, 2)), np.eye(2, 5)))
    assert all(p.cells == 0 and np.isnan(p.precision) for p in found)
    assert found[0].to_dict()["precision"] is None
    data, res = tmp_path / "z.mtx", tmp_path / "z.npz"
    data.write_text("%%MatrixMarket matrix coordinate pattern general\n6 5 0\n")
    code, out, err = run("factorize", data, "-k", "2", "--out", res, "-q")
    assert code == 0 and "nothing to factorize, the best W⊗H is all zeros" in err
    code, out, _ = run("show", res)
    assert code == 0 and "precision" not in out and "0 of 0" not in out
    assert "empty, 0 rows × 1 column: it covers no cell" in out and "rows    (none)" in out
    code, out, _ = run("show", res, "--csv")
    assert [row["precision"] for row in csv.DictReader(io.StringIO(out))] == ["", ""]
