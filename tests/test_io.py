"""Readers, writers and result files: round trips, formats, and errors that name file and line."""

import gzip
import importlib.util
import json
import os
import re
import stat
import zipfile
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import binary_matrices
from hypothesis import given
from hypothesis import strategies as st

import banmf
from banmf import InputError, InvalidParameterError, factorize, make_boolean
from banmf.io import (
    EXPORT_FORMATS,
    FORMATS,
    OUTPUT_SUFFIXES,
    REGISTRY,
    DataWarning,
    atomic_path,
    check_output,
    load_result,
    read_dataset,
    read_matrix,
    save_result,
    write_matrix,
)

DOCS = Path(__file__).resolve().parent.parent / "docs"


@st.composite
def matrices_with_empty_edges(draw):
    """0/1 matrices, then up to 3 empty rows and columns at the end (what .dat used to lose)."""
    core = draw(binary_matrices(max_n=7, max_m=7))
    rows, cols = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    return np.pad(core, ((0, rows), (0, cols)))


# .h5ad needs anndata, an optional extra (absent from the lowest-versions run).
_FORMATS_HERE = [f for f in FORMATS if f != "h5ad" or importlib.util.find_spec("anndata")]
# Every ending the writer takes (the command line's outputs too), .gz of the text formats included.
ROUND_TRIP_NAMES = [f"x{s}" for s in OUTPUT_SUFFIXES if s != ".h5ad" or "h5ad" in _FORMATS_HERE]


@given(matrices_with_empty_edges(), st.sampled_from(ROUND_TRIP_NAMES))
def test_every_format_round_trips_the_shape(tmp_path_factory, Xd, name):
    path = tmp_path_factory.mktemp("rt") / name
    write_matrix(Xd, path)
    X = read_matrix(path)
    assert X.shape == Xd.shape
    np.testing.assert_array_equal(X.toarray(), Xd.astype(bool))
    assert X.dtype == bool and X.has_sorted_indices and X.indices.dtype == X.indptr.dtype


def test_dat_sidecar_records_the_shape_and_keeps_other_keys(tmp_path):
    path, old, side = tmp_path / "t.dat", tmp_path / "t.json", tmp_path / "t.dat.json"
    X = np.zeros((20, 30), dtype=bool)
    X[:15, :27] = np.random.default_rng(0).random((15, 27)) < 0.3
    old.write_text(json.dumps({"name": "baskets", "source": "shop", "shape": [1, 1]}))
    write_matrix(X, path)  # the old shared sidecar's own keys move to t.dat's own
    assert json.loads(side.read_text()) == {"name": "baskets", "source": "shop", "shape": [20, 30]}
    assert json.loads(old.read_text())["shape"] == [1, 1]  # and it is left alone
    ds = read_dataset(path)
    assert ds.X.shape == (20, 30) and ds.name == "baskets"
    assert read_matrix(path, n_cols=40).shape == (20, 40)  # an explicit n_cols wins
    path.write_text(path.read_text().rstrip("\n") + "\n")  # an editor dropped the empty last rows
    assert read_matrix(path).shape == (20, 30)
    side.write_text(json.dumps({"shape": [20, 5]}))
    with pytest.raises(ValueError, match=r"t.dat.json says 5 columns, but .*t.dat has the item id"):
        read_matrix(path)
    side.write_text(json.dumps({"shape": [2, 30]}))
    with pytest.raises(ValueError, match=r"t.dat.json says 2 rows, but .*t.dat has \d+ lines"):
        read_matrix(path)
    side.write_text(json.dumps({"shape": "wide"}))
    with pytest.raises(ValueError, match="'shape' must be two positive integers"):
        read_matrix(path)
    side.write_text("{not json")
    with pytest.raises(ValueError, match="t.dat.json: unreadable sidecar"):
        write_matrix(X, path)  # refused before anything is written: the sidecar is not clobbered
    assert side.read_text() == "{not json"


def test_matrix_market_variants(tmp_path):
    p = tmp_path / "a.mtx"
    p.write_text(
        "%%MatrixMarket matrix coordinate integer symmetric\n% comment\n3 3 2\n2 1 1\n3 3 0\n"
    )
    np.testing.assert_array_equal(read_matrix(p).toarray(), [[0, 1, 0], [1, 0, 0], [0, 0, 0]])
    p.write_text("%%MatrixMarket matrix array real general\n2 2\n1\n0\n1\n1\n")
    np.testing.assert_array_equal(read_matrix(p).toarray(), [[1, 1], [0, 1]])


@pytest.mark.parametrize(
    "text, match",
    [
        ("hello\n", r"line 1: not a Matrix Market file"),
        (
            "%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1\n",
            "line 1: field 'complex'",
        ),
        ("%%MatrixMarket matrix coordinate pattern general\n3 x 1\n", "line 2: bad size line"),
        (
            "%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 1\n4 1\n",
            r"line 4: index \(4, 1\) outside",
        ),
        (
            "%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 1\n2 a\n",
            "line 4: 'a' is not a number",
        ),
        (
            "%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 1\n2 2 2\n",
            "line 4: expected 2 numbers",
        ),
        (
            "%%MatrixMarket matrix coordinate pattern general\n3 3 3\n1 1\n2 2\n",
            "declares 3 entries but has 2",
        ),
        (
            "%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 1\n2 2 0.5\n",
            r"line 4: value 0.5 at row 2, column 2 is not 0 or 1 \(1 entry that is not 0 or 1 in the file\)",
        ),
        (
            "%%MatrixMarket matrix coordinate pattern general\n0 3 0\n",
            "line 2: the matrix is empty",
        ),
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
    with pytest.raises(
        ValueError, match=r"a.csv, line 2: value 2 at row 2, column 2 is not 0 or 1"
    ):
        read_matrix(p)
    p.write_text("1,0\n0\n")
    with pytest.raises(ValueError, match="line 2: 1 value where the first row has 2"):
        read_matrix(p)


def test_fimi_dat(tmp_path):
    p = tmp_path / "t.dat"
    p.write_text("1 3 3\n\n0\n")
    with pytest.warns(DataWarning, match="t.dat: 1 duplicate entry counted once"):
        X = read_matrix(p)
    np.testing.assert_array_equal(X.toarray(), [[0, 1, 0, 1], [0, 0, 0, 0], [1, 0, 0, 0]])
    with pytest.raises(ValueError, match="line 3: item id 0 is below the first id"):
        read_matrix(p, one_based=True)
    p.write_text("1 3\n2\n")
    np.testing.assert_array_equal(
        read_matrix(p, one_based=True, n_cols=4).toarray(), [[1, 0, 1, 0], [0, 1, 0, 0]]
    )
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


def test_the_registry_names_every_format_and_its_extensions(tmp_path):
    assert FORMATS == tuple(REGISTRY) and len(set(FORMATS)) == len(FORMATS)
    assert EXPORT_FORMATS == ("csv", "mtx", "npz")
    assert OUTPUT_SUFFIXES[: len(FORMATS)] == tuple(f".{name}" for name in FORMATS)
    assert {".mtx.gz", ".csv.gz", ".tsv.gz", ".dat.gz"} == set(OUTPUT_SUFFIXES[len(FORMATS) :])
    assert set(EXPORT_FORMATS) == {name for name, spec in REGISTRY.items() if spec.export}
    for name, spec in REGISTRY.items():
        assert spec.name == name and spec.suffixes and spec.labels and spec.missing
        for suffix in spec.suffixes:
            assert banmf.io.format_of(Path("a" + suffix.upper()), None) == name
            assert banmf.io.format_of(Path("a.b" + suffix + ".gz"), None) == name
        assert banmf.io.format_of(Path("a.xyz"), name) == name
    with pytest.raises(InvalidParameterError, match="unknown format 'xyz'; choose one of mtx, npz"):
        banmf.io.format_of(Path("a.mtx"), "xyz")
    with pytest.raises(InputError, match=r"use one of \.mtx, \.mm, \.npz, .*\.h5ad"):
        banmf.io.format_of(Path("a.xyz"), None)
    write_matrix(np.eye(2), tmp_path / "a.csv")
    for fmt in FORMATS:  # options other formats take are refused, before the file is read
        for option in {o for spec in REGISTRY.values() for o in spec.options} - set(
            REGISTRY[fmt].options
        ):
            with pytest.raises(InvalidParameterError, match=f"do not apply to {fmt} files"):
                read_matrix(tmp_path / "a.csv", format=fmt, **{option: None})


def test_export_writes_a_sidecar_for_the_formats_that_have_one(tmp_path):
    for fmt in EXPORT_FORMATS:
        paths = banmf.io.export_paths(tmp_path / "p", fmt)
        sidecars = [p for p in paths if p.name.endswith(".json")]
        assert bool(sidecars) == (fmt != "npz" and REGISTRY[fmt].sidecar)


def _docs_table(text: str, first_header: str) -> list[list[str]]:
    """The cells (backticks dropped) of the Markdown table whose first header is given."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([c.strip().replace("`", "") for c in line.strip().strip("|").split("|")])
    return rows


def test_the_docs_table_of_formats_is_the_registry():
    rows = _docs_table((DOCS / "formats.md").read_text(encoding="utf-8"), "format")
    assert [row[0] for row in rows] == list(FORMATS)
    for (name, extensions, options, labels, missing, gz, export), spec in zip(
        rows, REGISTRY.values(), strict=True
    ):
        assert extensions.split(", ") == list(spec.suffixes), name
        assert (options.split(", ") if options else []) == list(spec.options), name
        assert (labels, missing) == (spec.labels, spec.missing), name
        assert gz == ("yes" if spec.gzip else ""), name
        assert export == ("yes" if spec.export else ""), name


def test_the_cli_docs_name_every_format():
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    named = re.search(r"`--format ([a-z0-9|]+)`", text).group(1)
    assert named.split("|") == list(FORMATS)
    assert all(f"`{spec.suffixes[0]}`" in text for spec in REGISTRY.values())


def test_file_problems_are_input_errors_and_bad_options_parameter_errors(tmp_path):
    (tmp_path / "a.mtx").write_text(
        "%%MatrixMarket matrix coordinate pattern general\n2 2 1\n3 1\n"
    )
    with pytest.raises(InputError, match=r"a\.mtx, line 3: index \(3, 1\) outside"):
        read_matrix(tmp_path / "a.mtx")
    (tmp_path / "a.dat").write_text("0 1\n")
    with pytest.raises(InvalidParameterError, match="n_cols must be a positive integer"):
        read_matrix(tmp_path / "a.dat", n_cols=0)
    with pytest.raises(InputError, match="3 row labels for 2 rows"):
        write_matrix(np.eye(2), tmp_path / "b.csv", row_labels=["a", "b", "c"])
    with pytest.raises(InvalidParameterError, match="format must be one of"):
        banmf.io.export_factors(None, tmp_path / "p", "tsv")


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
    assert saved.error == r.error and saved.method == "banmf" and saved.n_iter == r.n_iter
    assert saved.params["max_iter"] == 100 and saved.meta["input"] == "x.mtx"
    assert saved.info["thresholds_"] == [t.tolist() for t in r.estimator.thresholds_]
    assert saved.info["refinement_"] == r.info["refinement_"] and not saved.interrupted
    assert {"banmf", "numpy", "scipy", "numba"} <= set(saved.meta["versions"])
    labelled = r.replace(row_labels=[f"r{i}" for i in range(30)], col_labels=None, missing=X)
    labelled.save(tmp_path / "l.npz")
    back = type(r).load(tmp_path / "l.npz")
    assert back.row_labels == labelled.row_labels and back.col_labels is None
    np.testing.assert_array_equal(back.missing.toarray(), X.toarray())
    assert back.observed is None
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


# --- CSV / TSV ---------------------------------------------------------------------------------


@pytest.mark.parametrize("cell", ["", "?", "NA", "na", "N/A", "NaN"])
def test_csv_unknown_cells_are_read_as_missing(tmp_path, cell):
    p = tmp_path / "b.csv"
    p.write_text(f"1,0,1\n0,{cell},1\n{cell},1,1\n")
    ds = read_dataset(p)
    assert ds.missing.toarray().tolist() == [[0, 0, 0], [0, 1, 0], [1, 0, 0]]
    assert ds.X.toarray().astype(int).tolist() == [[1, 0, 1], [0, 0, 1], [0, 1, 1]]
    # read_matrix has nowhere to put them: it says so
    with pytest.warns(DataWarning, match=r"2 entries of unknown value, read as 0"):
        read_matrix(p)
    # with labels, and a row that is all unknown but its name
    p.write_text(f"name,a,b\nant,1,{cell}\nbee,{cell},{cell}\n")
    ds = read_dataset(p)
    assert ds.row_labels == ["ant", "bee"] and ds.col_labels == ["a", "b"]
    assert ds.missing.toarray().tolist() == [[0, 1], [1, 1]]


def test_csv_boolean_words_are_values(tmp_path):
    p = tmp_path / "b.csv"
    p.write_text("True,False\nfalse,TRUE\n")
    ds = read_dataset(p)
    assert ds.col_labels is None and ds.row_labels is None
    np.testing.assert_array_equal(ds.X.toarray(), [[1, 0], [0, 1]])
    p.write_text("name,x,y\nant,true,False\n")
    ds = read_dataset(p)
    assert ds.col_labels == ["x", "y"] and ds.row_labels == ["ant"]
    np.testing.assert_array_equal(ds.X.toarray(), [[1, 0]])


def test_csv_row_labels_without_header(tmp_path):
    p = tmp_path / "l.csv"
    p.write_text("ant,1,0\nbee,0,1\n")
    ds = read_dataset(p)
    assert ds.row_labels == ["ant", "bee"] and ds.col_labels is None
    np.testing.assert_array_equal(ds.X.toarray(), [[1, 0], [0, 1]])


@pytest.mark.parametrize(
    "text, rows, cols, dense",
    [
        ("name,f1,f2\ncat,1,0\ndog,0,1\n", ["cat", "dog"], ["f1", "f2"], [[1, 0], [0, 1]]),  # both
        ("f1,f2\n1,0\n0,1\n", None, ["f1", "f2"], [[1, 0], [0, 1]]),  # header only
        ("1,0\n0,1\n", None, None, [[1, 0], [0, 1]]),  # neither
        (",0,1\n0,1,0\n1,0,1\n", ["0", "1"], ["0", "1"], [[1, 0], [0, 1]]),  # pandas: blank corner
        ("id,1,2,3\nant,1,0,1\n", ["ant"], ["1", "2", "3"], [[1, 0, 1]]),  # numbered columns
        ("f\n1\n0\n", None, ["f"], [[1], [0]]),  # one column
        ("1.0,0.0\n0,1e0\n", None, None, [[1, 0], [0, 1]]),  # numbers equal to 0/1
    ],
)
def test_csv_header_and_index_detection_cases(tmp_path, text, rows, cols, dense):
    p = tmp_path / "a.csv"
    p.write_text(text)
    ds = read_dataset(p)
    assert ds.row_labels == rows and ds.col_labels == cols
    np.testing.assert_array_equal(ds.X.toarray(), dense)


@pytest.mark.parametrize(
    "name, text",
    [
        ("semi.csv", "1;0;1\n0;1;1\n"),
        ("commas.tsv", "1,0,1\n0,1,1\n"),
        ("tabs.csv", "1\t0\t1\n0\t1\t1\n"),
        ("semi_labels.csv", "name;a;b;c\nant;1;0;1\nbee;0;1;1\n"),
    ],
)
def test_csv_separator_is_detected(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    np.testing.assert_array_equal(read_matrix(p).toarray(), [[1, 0, 1], [0, 1, 1]])


def test_csv_unclear_separator_says_what_was_found(tmp_path):
    p = tmp_path / "odd.tsv"
    p.write_text("1,0,1\n0,1\n1\n")
    with pytest.raises(ValueError) as info:
        read_matrix(p)
    message = str(info.value)
    assert "odd.tsv: expected tab-separated values" in message and "commas" in message
    assert "\n" not in message


def test_csv_bad_values_counted_with_grammar(tmp_path):
    p = tmp_path / "v.csv"
    p.write_text("1,0\n0,2\n")
    with pytest.raises(
        ValueError,
        match=r"v.csv, line 2: value 2 at row 2, column 2 is not 0 or 1 "
        r"\(1 entry that is not 0 or 1 in the file\); binarize the data first",
    ):
        read_matrix(p)
    p.write_text("1,0.5\n0,2\n")
    with pytest.raises(
        ValueError, match=r"line 1: value 0.5 at row 1, column 2 .*\(2 entries that are not"
    ):
        read_matrix(p)


# --- memory budget -----------------------------------------------------------------------------


MM_PATTERN = "%%MatrixMarket matrix coordinate pattern general\n"


@pytest.fixture
def budget(monkeypatch):
    """A 64 MB memory budget: a tiny file with a huge header must be refused, not allocated."""
    monkeypatch.setenv("BANMF_MEMORY_LIMIT", "64M")


def test_memory_limit_variable(monkeypatch):
    from banmf.runtime.memory import available_memory, check_memory, format_size, parse_size

    assert parse_size("8G") == 8 * 2**30 and parse_size("512m") == 512 * 2**20
    assert (
        parse_size("1.5K") == 1536
        and parse_size("1000") == 1000
        and parse_size("2TiB") == 2 * 2**40
    )
    assert format_size(48 * 2**30) == "48.0 GB" and format_size(512) == "512 bytes"
    monkeypatch.setenv("BANMF_MEMORY_LIMIT", "21.3G")
    assert available_memory() == int(21.3 * 2**30)
    with pytest.raises(
        ValueError,
        match=r"^the planted matrix needs about 48.0 GB, more than the 21.3 GB "
        r"available \(set BANMF_MEMORY_LIMIT to change the budget\)$",
    ):
        check_memory(48 * 2**30, "the planted matrix")
    for bad in ("lots", "-1", "0", "8X"):
        monkeypatch.setenv("BANMF_MEMORY_LIMIT", bad)
        with pytest.raises(ValueError, match=f"BANMF_MEMORY_LIMIT='{bad}' is not a size"):
            available_memory()
    monkeypatch.delenv("BANMF_MEMORY_LIMIT")
    assert available_memory() is None or available_memory() > 0


@pytest.mark.parametrize(
    "size, match",
    [
        (
            "3000000000 3 3",
            (
                r"line 2: a 3000000000×3 matrix with 3 nonzeros needs about 44.7 GB, more than "
                r"the 64.0 MB available"
            ),
        ),
        (
            "1000000000000 3 3",
            r"line 2: a 1000000000000×3 matrix with 3 nonzeros needs about 14.6 TB",
        ),
        (
            "100000000000000000000000 3 3",
            r"line 2: a 100000000000000000000000×3 matrix is too large",
        ),
        ("3 3 1000000000000", "declares 1000000000000 entries but has 3"),
        ("4611686018427387904 4 3", r"matrix is too large \(at most 2\^53 rows or columns\)"),
        (
            "4294967296 4294967296 3",
            r"matrix is too large \(1.84e\+19 positions; 64-bit indices address at most",
        ),
        ("3 " + "9" * 5000 + " 3", "line 2: the size '9999.*' is too large"),
    ],
)
def test_huge_matrix_market_header_is_refused_in_one_line(tmp_path, budget, size, match):
    p = tmp_path / "huge.mtx"
    p.write_text(MM_PATTERN + size + "\n1 1\n2 2\n3 3\n")
    with pytest.raises(ValueError, match=match) as info:
        read_matrix(p)
    assert (
        "huge.mtx" in str(info.value) and "\n" not in str(info.value) and len(str(info.value)) < 300
    )


def test_huge_dense_array_header_is_refused(tmp_path, budget):
    p = tmp_path / "dense.mtx"
    p.write_text("%%MatrixMarket matrix array real general\n100000 100000\n1\n0\n")
    with pytest.raises(ValueError, match="declares 10000000000 values but has 2"):
        read_matrix(p)


def test_huge_dat_item_id_is_refused(tmp_path, budget):
    p = tmp_path / "big.dat"
    p.write_text("1 99999999999\n2\n")
    with pytest.raises(
        ValueError, match=r"big.dat: a 2×100000000000 matrix with 3 nonzeros needs about 745.1 GB"
    ):
        read_matrix(p)
    p.write_text("1 99999999999999999999\n")
    with pytest.raises(
        ValueError, match=r"big.dat, line 1: item id '99999999999999999999' is too large"
    ):
        read_matrix(p)
    p.write_text("1 " + "9" * 5000 + "\n")  # beyond Python's 4300-digit int() limit
    with pytest.raises(ValueError, match=r"big.dat, line 1: item id '9{24}…' is too large$"):
        read_matrix(p)
    p.write_text("1 2\n")
    with pytest.raises(ValueError, match=r"big.dat: a 1×100000000000 matrix"):
        read_matrix(tmp_path / "big.dat", n_cols=10**11)


def test_huge_npz_shape_is_refused_before_loading(tmp_path, budget):
    p = tmp_path / "huge.npz"
    np.savez(
        p,
        format=np.array(b"coo"),
        shape=np.array([10**12, 3]),
        row=np.array([0]),
        col=np.array([0]),
        data=np.array([1]),
    )
    with pytest.raises(
        ValueError, match=r"huge.npz: a 1000000000000×3 matrix with 1 nonzeros needs"
    ):
        read_matrix(p)
    np.savez(
        p,
        format=np.array(b"csr"),
        shape=np.array([3, 3]),
        indptr=np.zeros(4, int),
        indices=np.zeros(0, int),
        data=np.zeros(10**8, bool),
    )  # 100 MB of values claimed
    with pytest.raises(ValueError, match=r"huge.npz: a 3×3 matrix with 100000000 nonzeros needs"):
        read_matrix(p)


def test_unbounded_text_is_refused_as_it_grows(tmp_path, monkeypatch):
    monkeypatch.setenv("BANMF_MEMORY_LIMIT", "16M")
    bomb = tmp_path / "bomb.mtx.gz"
    bomb.write_bytes(gzip.compress(MM_PATTERN.encode() + b"1 1\n" * 10_000_000, compresslevel=1))
    assert bomb.stat().st_size < 1_000_000
    with pytest.raises(
        ValueError,
        match=r"bomb.mtx.gz: decompressing it needs about 32.0 MB, more than the "
        r"16.0 MB available",
    ):
        read_matrix(bomb)
    if os.path.exists("/dev/zero"):  # a device never ends
        with pytest.raises(ValueError, match=r"^/dev/zero: reading it needs about"):
            read_matrix("/dev/zero", format="mtx")


def test_make_boolean_refuses_over_budget_at_once(budget):
    import time

    start = time.perf_counter()
    with pytest.raises(
        ValueError,
        match=r"make_boolean\(100000000, 100000000, 5, density=0.3\): a "
        r"100000000×100000000 matrix .* needs about .* PB, more than the "
        r"64.0 MB available",
    ):
        make_boolean(10**8, 10**8, 5, density=0.3)
    with pytest.raises(ValueError, match="too large"):
        make_boolean(10**10, 10**10, 5, density=1e-12)
    assert time.perf_counter() - start < 1
    X, _, _ = make_boolean(200, 100, 3, 0.3, noise=0.1, random_state=0)  # small ones still work
    assert X.shape == (200, 100)
    from banmf import make_sparse_degrees, make_sparse_uniform

    for make in (make_sparse_uniform, make_sparse_degrees):
        with pytest.raises(
            ValueError,
            match=rf"{make.__name__}\(1099511627776, 10, 5\): a 1099511627776×10 "
            r"matrix with 5 nonzeros needs about",
        ):
            make(2**40, 10, 5)
        with pytest.raises(ValueError, match="too large"):
            make(2**40, 2**40, 5)


def test_largest_sizes_keep_their_indices(tmp_path, monkeypatch):
    # One row and 2**31 + 1 columns cost nothing in CSR: the budget is only a number here.
    monkeypatch.setenv("BANMF_MEMORY_LIMIT", "1P")
    m = 2**31 + 1
    p = tmp_path / "wide.mtx"
    p.write_text(MM_PATTERN + f"1 {m} 2\n1 {m}\n1 {2**31 - 1}\n")
    X = read_matrix(p)
    assert X.indices.dtype == np.int64 and X.indptr.dtype == np.int64
    assert X.indices.tolist() == [2**31 - 2, m - 1] and X.shape == (1, m)
    p.write_text(MM_PATTERN + f"1 {2**31 - 2} 1\n1 {2**31 - 2}\n")  # just fits int32
    X = read_matrix(p)
    assert X.indices.dtype == np.int32 and X.indices.tolist() == [2**31 - 3]
    p = tmp_path / "wide.dat"
    p.write_text(f"0 {2**40}\n")
    X = read_matrix(p)
    assert (
        X.shape == (1, 2**40 + 1)
        and X.indices.dtype == np.int64
        and X.indices.tolist() == [0, 2**40]
    )


# --- duplicates and values other than 0/1 ------------------------------------------------------


def test_duplicate_entries_warn_alike_in_every_reader(tmp_path):
    (tmp_path / "d.dat").write_text("1 1 2\n3 3 3\n")
    (tmp_path / "d.mtx").write_text(MM_PATTERN + "3 4 5\n1 1\n1 1\n2 2\n3 4\n3 4\n")
    np.savez(
        tmp_path / "d.npz",
        format=np.array(b"coo"),
        shape=np.array([3, 4]),
        row=np.array([0, 0, 2]),
        col=np.array([1, 1, 3]),
        data=np.array([1, 1, 1]),
    )
    expected = {
        "d.dat": "3 duplicate entries",
        "d.mtx": "2 duplicate entries",
        "d.npz": "1 duplicate entry",
    }
    for name, count in expected.items():
        with pytest.warns(DataWarning) as caught:
            read_matrix(tmp_path / name)
        assert (
            len(caught) == 1
            and str(caught[0].message) == f"{tmp_path / name}: {count} counted once"
        )
        assert caught[0].filename == __file__  # points at the caller, not at banmf
    assert issubclass(DataWarning, UserWarning)


def test_dense_array_bad_value_message(tmp_path):
    p = tmp_path / "dense_array2.mtx"
    p.write_text("%%MatrixMarket matrix array real general\n2 2\n1\n0\n2\n1\n")
    with pytest.raises(ValueError) as info:
        read_matrix(p)
    assert str(info.value) == (
        f"{p}, line 5: value 2 at row 1, column 2 is not 0 or 1 (1 entry that is not 0 "
        f"or 1 in the file); binarize the data first"
    )
    p.write_text("%%MatrixMarket matrix array real general\n2 2\n1\n0.5\n2\n1\n")
    with pytest.raises(
        ValueError, match=r"line 4: value 0.5 at row 2, column 1 .*\(2 entries that are not"
    ):
        read_matrix(p)
    p.write_text(
        "%%MatrixMarket matrix array integer symmetric\n2 2\n1\n0\n1\n"
    )  # lower triangle only
    np.testing.assert_array_equal(read_matrix(p).toarray(), [[1, 0], [0, 1]])


def test_unsigned_index_arrays_are_checked_as_numbers(tmp_path):
    # Differences of uint64 pointers wrap around: [0, 2, 1, 2] looked like a running count.
    p = tmp_path / "u.npz"
    np.savez(
        p,
        format=np.array(b"csr"),
        shape=np.array([3, 3]),
        indptr=np.array([0, 2, 1, 2], np.uint64),
        indices=np.array([1, 0], np.uint64),
        data=np.array([True, True]),
    )
    with pytest.raises(
        ValueError, match=r"u.npz: not a valid CSR matrix \(the index pointers are not a running"
    ):
        read_matrix(p)
    np.savez(
        p,
        format=np.array(b"csr"),
        shape=np.array([1, 3]),
        indptr=np.array([0, 2], np.uint64),
        indices=np.array([2, 0], np.uint64),
        data=np.array([True, True]),
    )
    np.testing.assert_array_equal(read_matrix(p).toarray(), [[1, 0, 1]])  # unsorted: sorted
    np.savez(
        p,
        format=np.array(b"coo"),
        shape=np.array([3, 3]),
        row=np.array([2**64 - 1], np.uint64),
        col=np.array([0], np.uint64),
        data=np.array([1]),
    )
    with pytest.raises(
        ValueError, match=r"not a valid COO matrix \(the 'row' array has values beyond 64-bit"
    ):
        read_matrix(p)


def test_file_value_messages_are_plain(tmp_path):
    p = tmp_path / "v.npz"
    sp.save_npz(p, sp.csr_array(np.array([[0.0, 2.0], [1.0, 0.5]])))
    with pytest.raises(ValueError) as info:
        read_matrix(p)
    assert str(info.value) == (
        f"{p}: value 2 at row 1, column 2 is not 0 or 1 (2 entries that are not 0 or 1 "
        f"in the file); binarize the data first"
    )
    p = tmp_path / "v.mtx"
    p.write_text("%%MatrixMarket matrix coordinate real general\n3 3 2\n1 1 nan\n2 2 1\n")
    with pytest.raises(
        ValueError, match=r"line 3: value nan at row 1, column 1 is not 0 or 1 \(1 entry that is"
    ):
        read_matrix(p)
    p.write_text(MM_PATTERN + "3 3 1\n1.5 2\n")
    with pytest.raises(
        ValueError, match=r"line 3: index \(1.5, 2\) is not a pair of whole numbers"
    ):
        read_matrix(p)
    p.write_text(MM_PATTERN + "3 3 1\n1000000 2\n")
    with pytest.raises(ValueError, match=r"line 3: index \(1000000, 2\) outside the declared 3×3"):
        read_matrix(p)


def test_api_value_messages_are_plain_and_zero_based():
    from banmf.data.validation import check_binary_matrix

    with pytest.raises(ValueError) as info:
        check_binary_matrix(np.array([[0.0, 2.0]]))
    assert str(info.value) == (
        "X has 1 entry that is not 0 or 1 (2 at row 0, column 1); binarize first, e.g. with X > 0"
    )
    with pytest.raises(
        ValueError, match=r"^X has 2 entries that are not 0 or 1 \(e.g. 0.5 at row 0, column 0\)"
    ):
        check_binary_matrix(sp.csr_array(np.array([[0.5, 3.0]])))
    with pytest.raises(
        ValueError, match=r"^X has 1 entry that is NaN or infinite \(nan at row 0, column 1\)$"
    ):
        check_binary_matrix(np.array([[0.0, np.nan]]))


# --- result files ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def saved_result(tmp_path_factory):
    X, _, _ = make_boolean(30, 20, 3, 0.3, random_state=0)
    r = factorize(X, 3, method="banmf", random_state=0, max_iter=20)
    path = tmp_path_factory.mktemp("result") / "r.npz"
    save_result(r, path, X=X)
    return path


def _rewrite_result(source, target, change):
    """Copy a result archive, with ``change(arrays)`` applied to its arrays."""
    with np.load(source) as z:
        arrays = {key: z[key] for key in z.files}
    change(arrays)
    np.savez(target, **arrays)


def _set_meta(**fields):
    def change(arrays):
        meta = json.loads(bytes(arrays["meta"]))
        meta.update(fields)
        arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)

    return change


NOT_A_RESULT = {
    "random bytes": lambda src, p: p.write_bytes(bytes(range(256)) * 4),
    "empty file": lambda src, p: p.write_bytes(b""),
    "a matrix .npz": lambda src, p: sp.save_npz(p, sp.csr_array(np.eye(3))),
    "a .mtx file": lambda src, p: p.write_text(MM_PATTERN + "2 2 1\n1 1\n"),
    "a zip without the keys": lambda src, p: zipfile.ZipFile(p, "w").close(),
    "a zip of text": lambda src, p: _zip_text(p),
    "an object array": lambda src, p: np.savez(p, meta=np.array([{"format": 1}], dtype=object)),
    "truncated": lambda src, p: p.write_bytes(src.read_bytes()[: len(src.read_bytes()) // 2]),
    "a flipped byte": lambda src, p: p.write_bytes(
        _flip(src.read_bytes(), _middle_of(src, "W.npy"))
    ),
    # zipfile raised NotImplementedError ("zip file version 21.0") for this one (found by fuzzing)
    "a future zip version": lambda src, p: p.write_bytes(
        _flip(src.read_bytes(), src.read_bytes().index(b"PK\x01\x02") + 6)
    ),
    "meta not JSON": lambda src, p: _rewrite_result(
        src, p, lambda a: a.update(meta=np.frombuffer(b"{oops", np.uint8))
    ),
    "meta a list": lambda src, p: _rewrite_result(
        src, p, lambda a: a.update(meta=np.frombuffer(b"[1]", np.uint8))
    ),
    "meta nested deep": lambda src, p: _rewrite_result(
        src, p, lambda a: a.update(meta=np.frombuffer(b"[" * 100000, np.uint8))
    ),
    "meta as text": lambda src, p: _rewrite_result(src, p, lambda a: a.update(meta=np.array("{}"))),
    "bad shape": lambda src, p: _rewrite_result(src, p, _set_meta(shape=[30])),
    "shape of strings": lambda src, p: _rewrite_result(src, p, _set_meta(shape=["30", "20"])),
    "bad k": lambda src, p: _rewrite_result(src, p, _set_meta(n_components=-1)),
    "bad version": lambda src, p: _rewrite_result(src, p, _set_meta(format_version="one")),
    "W of another shape": lambda src, p: _rewrite_result(src, p, lambda a: a.update(W=a["W"][:5])),
    "H missing": lambda src, p: _rewrite_result(src, p, lambda a: a.pop("H")),
    "X indices outside": lambda src, p: _rewrite_result(
        src, p, lambda a: a["X_indices"].__setitem__(0, 999)
    ),
    "X pointers wrong": lambda src, p: _rewrite_result(
        src, p, lambda a: a.update(X_indptr=a["X_indptr"][:3])
    ),
    "X without pointers": lambda src, p: _rewrite_result(src, p, lambda a: a.pop("X_indptr")),
    "X unsorted": lambda src, p: _rewrite_result(
        src, p, lambda a: a.update(X_indices=a["X_indices"][::-1].copy())
    ),
    "X unsigned, unsorted": lambda src, p: _rewrite_result(
        src, p, lambda a: a.update(X_indices=a["X_indices"][::-1].astype(np.uint64))
    ),
    "loss as text": lambda src, p: _rewrite_result(
        src, p, lambda a: a.update(loss_curve=np.array(["x"]))
    ),
}


def _zip_text(path):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("meta.npy", "not an array")


def _middle_of(path, member: str) -> int:
    """Offset of the middle of a zip member's compressed bytes."""
    import struct

    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    with open(path, "rb") as fh:
        fh.seek(info.header_offset + 26)
        name, extra = struct.unpack("<HH", fh.read(4))
    return info.header_offset + 30 + name + extra + info.compress_size // 2


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]


@pytest.mark.parametrize("case", sorted(NOT_A_RESULT))
def test_load_result_refuses_other_files_in_one_line(tmp_path, saved_result, case):
    p = tmp_path / "other.npz"
    NOT_A_RESULT[case](saved_result, p)
    with pytest.raises(ValueError) as info:
        load_result(p)
    message = str(info.value)
    assert message.startswith(f"{p}: not a banmf result file"), message
    assert "\n" not in message and "allow_pickle" not in message and len(message) < 300


def test_load_result_missing_and_newer(tmp_path, saved_result):
    with pytest.raises(FileNotFoundError, match="no such file"):
        load_result(tmp_path / "missing.npz")
    p = tmp_path / "newer.npz"
    _rewrite_result(saved_result, p, _set_meta(format_version=99))
    with pytest.raises(ValueError, match="newer.npz: written by a newer banmf"):
        load_result(p)
    assert load_result(saved_result).X.shape == (30, 20)


# --- writing -----------------------------------------------------------------------------------


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("name", ["x.mtx", "x.mtx.gz", "x.npz", "x.csv", "x.dat", "r.npz"])
def test_written_files_get_the_mode_open_would_give(tmp_path, saved_result, name):
    path = tmp_path / name
    old = os.umask(0o027)
    try:
        if name == "r.npz":
            saved = load_result(saved_result)
            from banmf import Factorization

            save_result(
                Factorization(
                    W=saved.W, H=saved.H, error=0, relative_error=0.0, method="planted", params={}
                ),
                path,
            )
        else:
            write_matrix(np.eye(3), path)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o640
        os.chmod(path, 0o604)  # replacing a file keeps its mode
        write_matrix(np.eye(3), path, format="npz" if name.endswith(".npz") else None)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o604
    finally:
        os.umask(old)


def test_gzip_header_names_the_final_file(tmp_path):
    path = tmp_path / "x.mtx.gz"
    write_matrix(np.eye(3), path)
    with gzip.open(path, "rb") as fh:
        fh.read()
        assert fh.name == str(path)
    header = path.read_bytes()[:64]
    assert header[3] & 0x08  # FNAME flag
    stored = header[10 : header.index(b"\0", 10)]
    assert stored == b"x.mtx"
    with pytest.raises(
        ValueError, match=r"x.npz.gz: .npz files are compressed already; drop the .gz"
    ):
        write_matrix(np.eye(3), tmp_path / "x.npz.gz")


def test_check_output(tmp_path):
    src = tmp_path / "in.mtx"
    write_matrix(np.eye(2), src)
    check_output(tmp_path / "out.mtx", inputs=[src])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mtx"]  # the probe is gone
    for same in (src, tmp_path / "." / "in.mtx", os.path.relpath(src)):
        with pytest.raises(ValueError, match=r"^refusing to overwrite the input "):
            check_output(same, inputs=[src])
    link = tmp_path / "link.mtx"
    link.symlink_to(src)
    with pytest.raises(ValueError, match="refusing to overwrite the input"):
        check_output(link, inputs=[src])
    with pytest.raises(FileNotFoundError, match=r"nope: no such folder for the output x.mtx$"):
        check_output(tmp_path / "nope" / "x.mtx")
    with pytest.raises(ValueError, match=r"is a directory$"):
        check_output(tmp_path)
    with pytest.raises(PermissionError, match=r"^/proc: cannot write there \("):
        check_output("/proc/x.mtx")  # refused even for root
    with pytest.raises(PermissionError, match=r"^/proc: cannot write there"):
        write_matrix(np.eye(2), "/proc/x.mtx")  # atomic_path makes the same check


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes to read-only folders"
)
def test_check_output_read_only_folder(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        with pytest.raises(PermissionError, match=r"ro: cannot write there \(permission denied\)"):
            check_output(folder / "x.mtx")
        with pytest.raises(PermissionError, match="cannot write there"):
            write_matrix(np.eye(2), folder / "x.mtx")
    finally:
        folder.chmod(0o755)


@pytest.mark.parametrize("name", ["x.csv", "x.tsv", "x.mtx", "x.mtx.gz", "x.npz", "x.dat"])
@pytest.mark.parametrize("which", ["both", "rows", "cols"])
def test_labels_round_trip_through_every_writer_and_reader(tmp_path, name, which):
    from banmf.io import read_dataset, write_matrix

    X = (np.random.default_rng(1).random((7, 5)) < 0.4).astype(int)
    X[0, :] = 1  # a nonempty row and column for every format
    rows = [f"r {i}" for i in range(7)] if which != "cols" else None
    cols = [f"c,{j}" for j in range(5)] if which != "rows" else None
    write_matrix(X, tmp_path / name, row_labels=rows, col_labels=cols)
    ds = read_dataset(tmp_path / name)
    np.testing.assert_array_equal(ds.X.toarray(), X)
    assert (ds.row_labels, ds.col_labels) == (rows, cols)


def test_labels_must_fit_the_matrix(tmp_path):
    from banmf.io import write_matrix

    with pytest.raises(ValueError, match="3 row labels for 2 rows"):
        write_matrix(np.eye(2, dtype=int), tmp_path / "x.csv", row_labels=["a", "b", "c"])
    assert not list(tmp_path.iterdir())


def test_anndata_files_carry_obs_and_var_names(tmp_path, monkeypatch):
    pytest.importorskip("anndata")
    from banmf.io import read_dataset, write_matrix

    X = (np.random.default_rng(2).random((6, 4)) < 0.5).astype(int)
    write_matrix(
        X, tmp_path / "x.h5ad", row_labels=[f"cell{i}" for i in range(6)], col_labels=list("ABCD")
    )
    ds = read_dataset(tmp_path / "x.h5ad")
    np.testing.assert_array_equal(ds.X.toarray(), X)
    assert ds.row_labels == [f"cell{i}" for i in range(6)] and ds.col_labels == list("ABCD")
    write_matrix(X, tmp_path / "y.h5ad")  # AnnData always names: the indices
    assert read_dataset(tmp_path / "y.h5ad").col_labels == ["0", "1", "2", "3"]
    import anndata

    anndata.AnnData(X=np.array([[0.0, 2.0], [1.0, 0.0]])).write_h5ad(tmp_path / "counts.h5ad")
    with pytest.raises(ValueError, match="counts.h5ad"):
        read_dataset(tmp_path / "counts.h5ad")
    (tmp_path / "bad.h5ad").write_text("not hdf5")
    with pytest.raises(ValueError, match="not a readable .h5ad"):
        read_dataset(tmp_path / "bad.h5ad")
    import sys

    monkeypatch.setitem(sys.modules, "anndata", None)  # as if it were not installed
    with pytest.raises(ImportError, match="banmf\\[anndata\\]"):
        read_dataset(tmp_path / "x.h5ad")
    with pytest.raises(ImportError, match="banmf\\[anndata\\]"):
        write_matrix(X, tmp_path / "z.h5ad")
    assert not (tmp_path / "z.h5ad").exists()


def test_fimi_item_names_from_spmf_headers_or_a_names_file(tmp_path):
    from banmf.io import read_dataset

    spmf = tmp_path / "shop.dat"
    spmf.write_text(
        "@CONVERTED_FROM_TEXT\n@ITEM=1=milk\n@ITEM=2=bread\n@ITEM=3=eggs\n1 2\n2 3\n1 3\n"
    )
    ds = read_dataset(spmf, one_based=True)
    assert ds.col_labels == ["milk", "bread", "eggs"] and ds.X.shape == (3, 3)
    assert ds.X.toarray().astype(int).tolist() == [[1, 1, 0], [0, 1, 1], [1, 0, 1]]
    plain = tmp_path / "b.dat"
    plain.write_text("0 1\n1 2\n")
    (tmp_path / "b.names").write_text("a\nb\nc\nd\n")  # item 3 never occurs: still a column
    ds = read_dataset(plain)
    assert ds.X.shape == (2, 4) and ds.col_labels == ["a", "b", "c", "d"]
    (tmp_path / "b.names").write_text("a\nb\n")
    with pytest.raises(ValueError, match="2 item names for 3 columns"):
        read_dataset(plain)
    bad = tmp_path / "c.dat"
    bad.write_text("@ITEM=x=milk\n0\n")
    with pytest.raises(ValueError, match="line 1: item id 'x' is not an integer"):
        read_dataset(bad)


@pytest.mark.parametrize(
    "name", ["x.csv", "x.tsv", "x.mtx", "x.mtx.gz", "x.npz", "x.dat", "x.h5ad"]
)
@pytest.mark.parametrize("labelled", [True, False])
def test_unknown_cells_round_trip_through_every_writer_and_reader(tmp_path, name, labelled):
    from banmf.io import read_dataset, write_matrix

    if name.endswith(".h5ad"):
        pytest.importorskip("anndata")
    rng = np.random.default_rng(2)
    X = rng.random((7, 5)) < 0.4
    X[0, :] = True
    missing = rng.random((7, 5)) < 0.3
    missing[0, :] = False
    rows = [f"r{i}" for i in range(7)] if labelled else None
    write_matrix(X, tmp_path / name, row_labels=rows, missing=missing)
    ds = read_dataset(tmp_path / name)
    np.testing.assert_array_equal(ds.missing.toarray(), missing)
    np.testing.assert_array_equal(ds.X.toarray(), X & ~missing)  # a value there means nothing
    if labelled or not name.endswith(".h5ad"):  # (AnnData always has names: 0, 1, ...)
        assert ds.row_labels == rows
    # the matrix alone reads, with a word on what was left out
    with pytest.warns(DataWarning, match="of unknown value, read as 0"):
        read_matrix(tmp_path / name)
    # writing the same name without a mask leaves no stale mask behind
    write_matrix(X, tmp_path / name, row_labels=rows)
    assert read_dataset(tmp_path / name).missing is None


def test_a_sidecar_names_a_mask_that_is_checked(tmp_path):
    from banmf.io import read_dataset, write_matrix

    write_matrix(np.eye(3), tmp_path / "a.mtx", missing=np.fliplr(np.eye(3)))
    side = json.loads((tmp_path / "a.mtx.json").read_text())
    assert side["missing"] == "a.mtx.missing.mtx"
    write_matrix(np.ones((2, 2)), tmp_path / "a.mtx.missing.mtx")
    with pytest.raises(ValueError, match=r"a 2×2 mask for .*a.mtx's 3×3 matrix"):
        read_dataset(tmp_path / "a.mtx")
    (tmp_path / "a.mtx.json").write_text(json.dumps({"missing": "../elsewhere.mtx"}))
    with pytest.raises(ValueError, match="'missing' must name a file in the same folder"):
        read_dataset(tmp_path / "a.mtx")
    (tmp_path / "a.mtx.json").write_text(json.dumps({"missing": "gone.mtx"}))
    with pytest.raises(ValueError, match="the missing-cell mask gone.mtx is not there"):
        read_dataset(tmp_path / "a.mtx")


# --- sidecars belong to one file -----------------------------------------------------------------


def test_writing_a_dat_keeps_the_mask_and_labels_of_an_mtx_of_the_same_name(tmp_path):
    X = np.eye(4, dtype=bool)
    missing = np.zeros((4, 4), dtype=bool)
    missing[0, 3] = missing[2, 1] = True
    rows = ["a", "b", "c", "d"]
    write_matrix(X, tmp_path / "a.mtx", row_labels=rows, missing=missing)
    write_matrix(np.ones((2, 3)), tmp_path / "a.dat")  # `banmf generate a.dat ...`
    ds = read_dataset(tmp_path / "a.mtx")
    np.testing.assert_array_equal(ds.missing.toarray(), missing)
    assert ds.row_labels == rows
    assert read_dataset(tmp_path / "a.dat").X.shape == (2, 3)


def test_generating_a_dat_next_to_the_bundled_zoo_leaves_it_intact(tmp_path):
    import shutil

    from banmf.cli import main
    from banmf.datasets import data_dir, load_zoo

    for name in ("zoo_101x15.mtx", "zoo_101x15.json"):  # the bundled, old-style sidecar
        shutil.copy(data_dir() / name, tmp_path / name)
    out = tmp_path / "zoo_101x15.dat"
    assert main(["generate", str(out), "-n", "6", "-m", "9", "-k", "2"]) == 0
    zoo = load_zoo(data_home=tmp_path)  # the checksum and labels still its own
    assert zoo.X.shape == (101, 15) and len(zoo.row_labels) == 101
    assert read_dataset(out).X.shape == (6, 9) and read_dataset(out).row_labels is None


def test_a_labelled_mtx_next_to_a_dat_leaves_the_dat_readable(tmp_path):
    X = np.zeros((5, 8), dtype=bool)
    X[:3, :4] = True  # empty trailing rows and columns: the .dat needs its recorded shape
    write_matrix(X, tmp_path / "g.dat")
    write_matrix(X[:4, :3], tmp_path / "g.mtx", row_labels=list("wxyz"))  # `complete --out g.mtx`
    np.testing.assert_array_equal(read_matrix(tmp_path / "g.dat").toarray(), X)
    assert read_dataset(tmp_path / "g.dat").row_labels is None
    assert read_dataset(tmp_path / "g.mtx").row_labels == list("wxyz")


def test_an_old_shared_sidecar_is_read_only_when_it_is_unambiguous(tmp_path):
    X = np.eye(3, dtype=bool)
    write_matrix(X, tmp_path / "a.mtx")
    old = tmp_path / "a.json"  # as banmf wrote it before sidecars had the full file name
    old.write_text(json.dumps({"row_labels": ["x", "y", "z"], "source": "lab"}))
    assert read_dataset(tmp_path / "a.mtx").row_labels == ["x", "y", "z"]  # the only a.*
    write_matrix(X, tmp_path / "a.dat")  # gets its own sidecar, leaves a.json alone
    assert json.loads(old.read_text()) == {"row_labels": ["x", "y", "z"], "source": "lab"}
    assert read_dataset(tmp_path / "a.mtx").row_labels == ["x", "y", "z"]  # still the only one
    sp.save_npz(tmp_path / "a.npz", sp.csr_array(X))  # another file that could own it
    with pytest.warns(DataWarning, match=r"a.json: not read for a.mtx \(it may describe a.npz"):
        assert read_dataset(tmp_path / "a.mtx").row_labels is None
    old.write_text(json.dumps({"file": "a.mtx", "row_labels": ["x", "y", "z"]}))
    assert read_dataset(tmp_path / "a.mtx").row_labels == ["x", "y", "z"]  # it names its file
    assert read_dataset(tmp_path / "a.npz").row_labels is None
    old.write_text(json.dumps({"shape": [2, 2], "row_labels": ["x", "y"]}))
    (tmp_path / "a.npz").unlink()
    with pytest.warns(DataWarning, match=r"a.json describes a 2×2 matrix, but .*a.mtx is 3×3"):
        assert read_dataset(tmp_path / "a.mtx").row_labels is None
    (tmp_path / "a.mtx.json").write_text(json.dumps({"shape": [2, 2]}))  # its own: an error
    with pytest.raises(ValueError, match=r"a.mtx.json describes a 2×2 .* the sidecar is stale"):
        read_dataset(tmp_path / "a.mtx")


def test_a_sidecar_does_not_carry_labels_to_a_new_file_by_its_name(tmp_path):
    write_matrix(np.eye(3), tmp_path / "a.mtx", row_labels=["x", "y", "z"], col_labels=list("abc"))
    write_matrix(np.ones((2, 2)), tmp_path / "a.mtx")
    ds = read_dataset(tmp_path / "a.mtx")
    assert ds.X.shape == (2, 2) and ds.row_labels is None and ds.col_labels is None


# --- destinations that cannot be replaced ------------------------------------------------------


@pytest.fixture
def immutable(tmp_path):
    """A file that even root cannot replace (``chattr +i``), where the file system allows it."""
    import shutil
    import subprocess

    path = tmp_path / "locked.mtx"
    write_matrix(np.eye(2), path)
    if shutil.which("chattr") is None:
        pytest.skip("no chattr")
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
        pytest.skip("chattr +i not allowed here")
    yield path
    subprocess.run(["chattr", "-i", str(path)], check=True)


def _fail_replacing(monkeypatch, target):
    """Make os.replace fail onto ``target`` only (as over an immutable file)."""
    real = os.replace

    def replace(src, dst, **kw):
        if os.fspath(dst) == os.fspath(target):
            raise PermissionError(1, "Operation not permitted")
        return real(src, dst, **kw)

    monkeypatch.setattr(os, "replace", replace)


def test_check_output_refuses_an_immutable_destination(immutable):
    before = immutable.read_bytes()
    with pytest.raises(PermissionError, match=r"locked.mtx: cannot replace it \(it is immutable"):
        check_output(immutable)
    assert immutable.read_bytes() == before
    assert sorted(p.name for p in immutable.parent.iterdir()) == ["locked.mtx"]


def test_check_output_tries_a_rename_in_the_folder(tmp_path, monkeypatch):
    def replace(src, dst, **kw):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(PermissionError, match=r"cannot rename files there \(operation not perm"):
        check_output(tmp_path / "x.mtx")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("name", ["x.mtx", "x.mtx.gz", "r.npz"])
def test_an_output_that_cannot_replace_its_destination_is_kept_beside_it(
    tmp_path, monkeypatch, saved_result, name
):
    from banmf.exceptions import OutputNotReplaced

    dest = tmp_path / name
    dest.write_bytes(b"the old file")
    _fail_replacing(monkeypatch, dest)
    saved = tmp_path / name.replace(".", ".saved.", 1)
    with pytest.raises(OutputNotReplaced, match=rf"{name}: cannot replace it .*saved as {saved}$"):
        if name == "r.npz":
            save_result(load_result(saved_result), dest)
        else:
            write_matrix(np.eye(3), dest)
    assert dest.read_bytes() == b"the old file"
    if name == "r.npz":
        assert load_result(saved).shape == load_result(saved_result).shape
    else:
        np.testing.assert_array_equal(read_matrix(saved).toarray(), np.eye(3))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([name, saved.name])
    with pytest.raises(OutputNotReplaced, match=r"saved-2"):  # a second one does not clobber it
        write_matrix(np.eye(3), dest)


def test_cli_refuses_an_immutable_output_up_front(immutable):
    import io as _io

    from banmf.cli import main

    err = _io.StringIO()
    code = main(["generate", str(immutable), "-n", "5", "-m", "4", "-k", "2"], stderr=err)
    assert code == 2 and "cannot replace it (it is immutable" in err.getvalue()


def test_cli_says_where_an_unreplaceable_output_went(tmp_path, monkeypatch):
    import io as _io

    from banmf.cli import main

    dest = tmp_path / "g.mtx"
    _fail_replacing(monkeypatch, dest)
    err = _io.StringIO()
    code = main(["generate", str(dest), "-n", "5", "-m", "4", "-k", "2"], stderr=err)
    assert code == 2
    assert err.getvalue().startswith(f"banmf: error: {dest}: cannot replace it")
    assert f"saved as {tmp_path / 'g.saved.mtx'}" in err.getvalue()
    assert read_matrix(tmp_path / "g.saved.mtx").shape == (5, 4)


# --- CSV widths ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, labels, rows",
    [
        ("a,b,c\n1,0,1,\n0,1,1,\n", ["a", "b", "c"], None),  # the file
        ("a,b,c,\n1,0,1,\n0,1,1,\n", ["a", "b", "c"], None),  # every line ends with one
        ("1,0,1,\n0,1,1,\n", None, None),
        (",a,b,c\nx,1,0,1,\ny,0,1,1,\n", ["a", "b", "c"], ["x", "y"]),
        ("a;b;c;\n1;0;1;\n0;1;1;\n", ["a", "b", "c"], None),
    ],
)
def test_csv_trailing_separators_are_not_a_column(tmp_path, text, labels, rows):
    path = tmp_path / "t.csv"
    path.write_text(text)
    ds = read_dataset(path)
    assert ds.X.toarray().astype(int).tolist() == [[1, 0, 1], [0, 1, 1]]
    assert ds.col_labels == labels and ds.row_labels == rows and ds.missing is None


def test_csv_a_last_column_of_unknown_cells_is_kept_when_the_header_names_it(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("a,b,c\n1,0,\n0,1,\n")
    ds = read_dataset(path)
    assert ds.col_labels == ["a", "b", "c"] and ds.missing.toarray()[:, 2].all()


@pytest.mark.parametrize(
    "text, match",
    [
        (
            "a,b\n1,0,1\n0,1,1\n",
            r"t.csv, line 1: the header names 2 columns, the rows below have 3",
        ),
        ("a,b,c,d\n1,0,1\n0,1,1\n", r"line 1: the header names 4 columns, the rows below have 3"),
        ("a,b\n1,0,1,\n0,1,1,\n", r"names 2 columns, the rows below have 3 \(not counting"),
    ],
)
def test_csv_header_of_another_width_is_an_error(tmp_path, text, match):
    path = tmp_path / "t.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
        read_dataset(path)


# --- a huge declared shape with few entries ------------------------------------------------------


def _peak_bytes(fn):
    import tracemalloc

    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_info_on_a_huge_sparse_header_costs_only_the_row_pointers(tmp_path):
    """``banmf info`` on a 10⁷×10⁷ header with 2 entries: the row pointers (40 MB of int32)
    are the one array of the shape's size; no per-row or per-column counts, no loop over the
    rows (10⁸ and 10⁹ took 45 s and minutes)."""
    import io as _io

    from banmf.cli import main

    n = 10**7
    path = tmp_path / "huge.mtx"
    path.write_text(f"{MM_PATTERN}{n} {n} 2\n1 1\n{n} {n}\n")
    out = _io.StringIO()
    indptr = 4 * (n + 1)
    assert _peak_bytes(lambda: read_matrix(path)) < 1.2 * indptr
    assert _peak_bytes(lambda: main(["info", str(path), "--json"], stdout=out)) < 1.2 * indptr
    record = json.loads(out.getvalue())
    assert record["empty_rows"] == n - 2 and record["empty_columns"] == n - 2
    assert record["duplicate_rows"] == n - 3 and record["max_row_nnz"] == 1


@pytest.mark.parametrize("n", [10**8, 10**9])
def test_info_on_a_huge_sparse_header_refuses_past_the_budget(tmp_path, monkeypatch, n):
    import io as _io

    from banmf.cli import main

    monkeypatch.setenv("BANMF_MEMORY_LIMIT", "100M")
    path = tmp_path / "huge.mtx"
    path.write_text(f"{MM_PATTERN}{n} {n} 2\n1 1\n{n} {n}\n")
    err = _io.StringIO()
    assert main(["info", str(path)], stderr=err) == 2
    assert re.search(rf"huge.mtx, line 2: .*{n}×{n}.* needs about [\d.]+ [MG]B", err.getvalue())


@given(matrices_with_empty_edges())
def test_matrix_stats_match_a_dense_count(Xd):
    from banmf.io import matrix_stats

    X = sp.csr_array(Xd.astype(bool))
    X.sort_indices()
    rows = [tuple(np.flatnonzero(r)) for r in Xd]
    want = {
        "empty_rows": int((Xd.sum(1) == 0).sum()),
        "empty_columns": int((Xd.sum(0) == 0).sum()),
        "duplicate_rows": len(rows) - len(set(rows)),
        "max_row_nnz": int(Xd.sum(1).max()),
        "max_column_nnz": int(Xd.sum(0).max()),
    }
    from banmf.data.masks import csr_from_parts

    assert matrix_stats(csr_from_parts(X.indptr, X.indices, X.shape)) == want


# --- positions in messages: file columns, from 1 -------------------------------------------------


def test_csv_bad_value_names_the_file_column(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("name,a,b,c\nant,1,0,1\nbee,0,yes,1\n")
    with pytest.raises(ValueError, match=r"t.csv, line 3: value 'yes' at row 2, column 3 is not"):
        read_dataset(path)
    path.write_text("a,b,c\n1,0,1\n0,yes,1\n")  # no row labels: the same column
    with pytest.raises(ValueError, match=r"line 3: value 'yes' at row 2, column 2 is not"):
        read_dataset(path)


def test_h5ad_messages_name_the_file_and_count_from_1(tmp_path):
    anndata = pytest.importorskip("anndata")
    import h5py

    anndata.AnnData(X=np.array([[0.0, 1.0, 2.0]])).write_h5ad(tmp_path / "counts.h5ad")
    with pytest.raises(ValueError, match=r"counts.h5ad: X has 1 entry .*\(2 at row 1, column 3\)"):
        read_dataset(tmp_path / "counts.h5ad")
    odd = tmp_path / "odd.h5ad"
    anndata.AnnData(X=np.eye(2)).write_h5ad(odd)
    with h5py.File(odd, "a") as f:  # a key AnnData does not expect
        f.create_dataset("surprise", data=np.arange(3))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # AnnData's note on the key's missing encoding
        with pytest.raises(ValueError, match=r"odd.h5ad: not a readable .h5ad file \(.*surprise"):
            read_dataset(odd)  # (AnnData raises a TypeError without the file's name)


def test_a_matrix_market_banner_is_recognised_whatever_the_extension(tmp_path):
    X = sp.csr_array(np.array([[1, 0, 1], [0, 1, 0]], dtype=np.uint8))
    write_matrix(X, tmp_path / "a.mtx")
    text = (tmp_path / "a.mtx").read_text()
    for name in ("a.txt", "a.data", "a"):
        (tmp_path / name).write_text(text)
        assert (read_matrix(tmp_path / name) != X).nnz == 0
    with gzip.open(tmp_path / "b.txt.gz", "wt") as fh:
        fh.write(text)
    assert (read_matrix(tmp_path / "b.txt.gz") != X).nnz == 0
    (tmp_path / "t.txt").write_text("0 2\n1\n")  # FIMI transactions, as the extension says
    assert (read_matrix(tmp_path / "t.txt") != X).nnz == 0


def test_a_format_guessed_from_a_generic_extension_is_named_in_errors(tmp_path):
    (tmp_path / "bad.txt").write_text("1 2\n3 x\n")
    with pytest.raises(InputError, match=r"line 2: item id 'x' is not an integer \[read as FIMI"):
        read_matrix(tmp_path / "bad.txt")
    (tmp_path / "bad.dat").write_text("1 2\n3 x\n")  # a definite extension: no guess to name
    with pytest.raises(InputError, match=r"not an integer$"):
        read_matrix(tmp_path / "bad.dat")
