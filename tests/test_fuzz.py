"""Fuzzing the readers: random bytes and damaged valid files, through the API and the CLI.

Every reader either returns a canonical support mask or raises ValueError, TypeError,
FileNotFoundError or PermissionError with a one-line message; warnings are one-line
DataWarnings; the CLI exits 0 or 2 with no traceback. A 256 MB memory budget makes a huge
header a refusal rather than an allocation. The default run tries a few dozen inputs per
reader; ``python -m pytest -m slow tests/test_fuzz.py`` tries thousands.
"""

import functools
import gzip
import io
import json
import re
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from banmf import Factorization
from banmf.cli import main
from banmf.io import DataWarning, load_result, read_dataset, save_result, write_matrix

ALLOWED = (ValueError, TypeError, FileNotFoundError, PermissionError)
TARGETS = ["x.mtx", "x.mtx.gz", "x.npz", "x.csv", "x.tsv", "x.dat", "result.npz"]

# Pieces that broke or could break parsers: signs, sizes at the int32/int64/float64 limits,
# non-numbers, separators, NUL, bad UTF-8, Unicode digits.
NASTY_TOKENS = [
    b"-1",
    b"0",
    b"1",
    b"2",
    b"0.5",
    b"nan",
    b"inf",
    b"-inf",
    b"1e400",
    b"1.5",
    b"3000000000",
    b"1000000000000",
    b"100000000000000000000000",
    b"99999999999",
    b"2147483647",
    b"2147483648",
    b"4294967296",
    b"9223372036854775807",
    b"9223372036854775808",
    b"18446744073709551616",
    b"9" * 400,
    b"9" * 5000,
    b"\x00",
    b"\xff\xfe",
    b"\xc3\x28",
    b"%",
    b",",
    b";",
    b"\t",
    b"\n",
    b"\r",
    b" ",
    b'"',
    b"True",
    b"false",
    b"abc",
    b"1_0",
    "\u0661".encode(),
    "\u2028".encode(),
    b"\x1c",
    b"0x10",
    b"%%MatrixMarket matrix array real symmetric",
    b"coordinate",
    b"skew-symmetric",
]

NASTY_ARRAYS = [
    np.array([]),
    np.array([-1]),
    np.array([10**12, 3]),
    np.array([2**62, 2**62]),
    np.array([3]),
    np.array([[1, 2], [3, 4]]),
    np.array([0.5, 2.0]),
    np.array([np.nan, 1.0]),
    np.array(b"csr"),
    np.array(b"csc"),
    np.array(b"coo"),
    np.array(b"dia"),
    np.array(b"bsr"),
    np.array(b"xyz"),
    np.array("csr"),
    np.array([3, 3]),
    np.array([3, 3], dtype=np.uint64),
    np.array([0, 1, 2, 3]),
    np.array([3, 2, 1, 0]),
    np.zeros(5, np.uint8),
    np.array([True, False]),
    np.array([1 + 2j]),
    np.array([None], dtype=object),
    np.array([2**63 - 1, 1], dtype=np.int64),
    np.array([1.0, 2.0]),
    np.arange(7) % 3,
    np.array([0, 2, 1, 2, 5, 5, 5], np.uint64),
    np.array([2**64 - 1, 0], np.uint64),
]


NASTY_SIDECARS = [
    b"",
    b"\xff\xfe",
    b"[]",
    b"null",
    b"{",
    b"[" * 50_000,
    b'{"shape": [1e300, 2]}',
    b'{"shape": [4e18, 4e18]}',
    b'{"shape": [9223372036854775808, 1]}',
    b'{"shape": [true, 2]}',
    b'{"shape": [2, 3]}',
    b'{"shape": [99, 99]}',
    b'{"shape": [3000000000, 5]}',
    b'{"shape": "6x5"}',
    b'{"row_labels": "[\'a\'"}',
    b'{"row_labels": [1, 2]}',
    b'{"row_labels": "' + b"[" * 5000 + b'"}',
    b'{"col_labels": {"a": 1}}',
    b'{"name": 5}',
    b'{"name": "x\\ny"}',
]


def _seed_matrix():
    X = np.zeros((6, 5), dtype=bool)
    X[[0, 1, 1, 3, 4], [0, 1, 3, 2, 0]] = True  # row 2 and 5, column 4 empty
    return X


@functools.cache
def _seeds() -> dict:
    """Valid files of each kind, as bytes (the mutations start from these). Not a fixture, so
    that hypothesis does not print them with every failure."""
    with tempfile.TemporaryDirectory() as tmp:
        return _write_seeds(Path(tmp))


def _write_seeds(folder):
    X = _seed_matrix()
    out = {}
    for name in TARGETS[:-1]:
        write_matrix(X, folder / name)
        out[name] = [(folder / name).read_bytes()]
    out["x.mtx"] += [
        b"%%MatrixMarket matrix array integer general\n2 3\n1\n0\n0\n1\n1\n0\n",
        b"%%MatrixMarket matrix coordinate real symmetric\n% c\n3 3 3\n1 1 1\n2 1 1.0\n3 2 0\n",
        b"%%MatrixMarket matrix array real symmetric\n2 2\n1\n0\n1\n",
    ]
    out["x.csv"] += [
        b"name,a,b\nant,1,0\nbee,true,FALSE\n",
        b",0,1\n0,1,0\n1,0,1\n",
        b"ant;1;0\nbee;0;1\n",
    ]
    out["x.tsv"] += [b"a\tb\n1\t0\n0\t1\n"]
    out["x.dat"] += [b"1 3 3\n\n0\n", b"0 1\n2 2 7\n"]
    factorization = Factorization(
        W=np.eye(6, 2, dtype=bool),
        H=np.eye(2, 5, dtype=bool),
        error=3,
        relative_error=0.6,
        seconds=0.0,
        n_iter=0,
        method="planted",
        params={},
    )
    save_result(factorization, folder / "r.npz", X=X)
    out["result.npz"] = [(folder / "r.npz").read_bytes()]
    return out


@st.composite
def mutated_bytes(draw, seed: bytes) -> bytes:
    """A valid file with a few of: truncation, byte flips, nasty tokens inserted or put in place
    of a number, a line repeated or deleted, a giant line."""
    data = bytearray(seed)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(
            st.sampled_from(["truncate", "flip", "insert", "number", "repeat", "delete", "giant"])
        )
        at = draw(st.integers(0, len(data)))
        if op == "truncate":
            del data[at:]
        elif op == "flip" and data:
            i = min(at, len(data) - 1)
            data[i] ^= draw(st.integers(1, 255))
        elif op == "insert":
            data[at:at] = draw(st.sampled_from(NASTY_TOKENS))
        elif op == "number":
            numbers = list(re.finditer(rb"[0-9]+", bytes(data)))
            if numbers:
                match = draw(st.sampled_from(numbers))
                data[match.start() : match.end()] = draw(st.sampled_from(NASTY_TOKENS))
        elif op in ("repeat", "delete"):
            lines = bytes(data).split(b"\n")
            i = draw(st.integers(0, len(lines) - 1))
            lines[i : i + 1] = [lines[i]] * (draw(st.integers(2, 50)) if op == "repeat" else 0)
            data = bytearray(b"\n".join(lines))
        elif op == "giant":
            chunk = draw(st.sampled_from([b"1 ", b"0,", b"1\t", b"9", b"a", b"\x00", b"1 1\n"]))
            data[at:at] = chunk * draw(st.integers(1000, 100_000))
    return bytes(data)


@st.composite
def mutated_archive(draw, seed: bytes) -> bytes:
    """A valid .npz with arrays replaced, removed or added, or its metadata's fields changed."""
    with np.load(io.BytesIO(seed)) as z:
        arrays = {key: z[key] for key in z.files}
    keys = sorted(arrays) + ["coords", "offsets", "row", "col", "indptr", "X_indptr"]
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(keys))
        if key == "meta" and draw(st.booleans()):
            try:
                meta = json.loads(bytes(arrays["meta"]))
            except (KeyError, ValueError, TypeError):  # already replaced or removed
                continue
            json_values = st.recursive(
                st.none()
                | st.booleans()
                | st.integers(-(2**64), 2**64)
                | st.floats()
                | st.text(max_size=5),
                lambda inner: (
                    st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=3)
                ),
                max_leaves=6,
            )
            meta[
                draw(st.sampled_from(["shape", "n_components", "format", "format_version", "nnz"]))
            ] = draw(json_values)
            arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
        elif draw(st.booleans()):
            arrays.pop(key, None)
        else:
            arrays[key] = draw(st.sampled_from(NASTY_ARRAYS))
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


@st.composite
def fuzz_input(draw, name):
    """Bytes for a file called ``name`` (random, empty, or a mutated valid file), and the name
    and bytes of a sidecar (its own ``NAME.EXT.json`` or an old shared ``x.json``), or None."""
    data = draw(file_bytes(name))
    sidecar = None
    if name in ("x.mtx", "x.mtx.gz", "x.dat") and draw(st.integers(0, 3)) == 0:
        side = draw(st.sampled_from([name + ".json", "x.json"]))
        sidecar = side, draw(st.sampled_from(NASTY_SIDECARS) | st.binary(max_size=200))
    return data, sidecar


@st.composite
def file_bytes(draw, name):
    """Bytes for a file called ``name``: random, empty, or a mutated valid file."""
    kind = draw(st.sampled_from(["random", "empty", "mutated", "mutated", "mutated", "archive"]))
    seed = draw(st.sampled_from(_seeds()[name]))
    if kind == "random":
        return draw(st.binary(max_size=2000))
    if kind == "empty":
        return b""
    if kind == "archive" and name.endswith(".npz"):
        return draw(mutated_archive(seed))
    if name.endswith(".gz") and draw(st.booleans()):  # damage the text inside the gzip stream
        return gzip.compress(draw(mutated_bytes(gzip.decompress(seed))))
    return draw(mutated_bytes(seed))


def _check_support_mask(X, path):
    assert isinstance(X, sp.csr_array) and X.dtype == bool and X.ndim == 2, path
    assert X.shape[0] >= 1 and X.shape[1] >= 1
    assert X.indices.dtype == X.indptr.dtype and len(X.indptr) == X.shape[0] + 1
    assert X.indptr[0] == 0 and X.indptr[-1] == X.nnz and (np.diff(X.indptr) >= 0).all()
    for i in range(X.shape[0]):
        row = X.indices[X.indptr[i] : X.indptr[i + 1]]
        assert (np.diff(row) > 0).all() and (row >= 0).all() and (row < X.shape[1]).all()
    assert X.data.all()


def _call(fn, path):
    """fn(path), asserting that it returns or raises only what the CLI reports in one line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = fn(path)
        except ALLOWED as exc:
            message = str(exc)
            assert message and "\n" not in message and "allow_pickle" not in message, repr(message)
            assert "np.float64" not in message and "np.int64" not in message, message
            result = None
    for w in caught:
        if issubclass(w.category, ResourceWarning):
            continue  # an unclosed handle somewhere in the test's own garbage
        assert issubclass(w.category, DataWarning), (w.category, str(w.message))
        assert "\n" not in str(w.message)
    return result


def _check_cli(argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, stdout=out, stderr=err)
    text = err.getvalue()
    assert code in (0, 2), (code, text)
    assert "Traceback" not in text and "internal error" not in text, text
    assert all(line.startswith("banmf: ") for line in text.splitlines()), text


def _fuzz_one(folder, name, data, valid_matrix):
    for leftover in folder.iterdir():
        leftover.unlink()
    path = folder / name
    data, sidecar = data
    path.write_bytes(data)
    if sidecar is not None:
        (folder / sidecar[0]).write_bytes(sidecar[1])
    if name == "result.npz":
        saved = _call(load_result, path)
        if saved is not None:
            n, m = saved.shape
            assert saved.W.shape == (n, saved.n_components) and saved.H.shape == (
                saved.n_components,
                m,
            )
            assert saved.W.dtype == bool and saved.H.dtype == bool
            if saved.X is not None:
                _check_support_mask(saved.X, path)
        _check_cli(["evaluate", str(valid_matrix), str(path)])
        return
    ds = _call(read_dataset, path)
    if ds is not None:
        _check_support_mask(ds.X, path)
    _check_cli(["info", str(path)])


@pytest.fixture
def small_budget(monkeypatch):
    monkeypatch.setenv("BANMF_MEMORY_LIMIT", "256M")


@pytest.fixture
def valid_matrix(tmp_path_factory):
    path = tmp_path_factory.mktemp("valid") / "valid.mtx"
    write_matrix(_seed_matrix(), path)
    return path


FIXTURES_OK = [
    HealthCheck.function_scoped_fixture,
    HealthCheck.too_slow,
    HealthCheck.data_too_large,
]


@pytest.mark.parametrize("name", TARGETS)
@settings(max_examples=30, deadline=None, suppress_health_check=FIXTURES_OK)
@given(data=st.data())
def test_fuzz_readers_quick(tmp_path, small_budget, valid_matrix, name, data):
    _fuzz_one(tmp_path, name, data.draw(fuzz_input(name)), valid_matrix)


@pytest.mark.slow
@pytest.mark.parametrize("name", TARGETS)
@settings(max_examples=500, deadline=None, suppress_health_check=FIXTURES_OK)
@given(data=st.data())
def test_fuzz_readers_long(tmp_path, small_budget, valid_matrix, name, data):
    _fuzz_one(tmp_path, name, data.draw(fuzz_input(name)), valid_matrix)


@settings(max_examples=40, deadline=None, suppress_health_check=FIXTURES_OK)
@given(
    X=st.integers(1, 5).flatmap(
        lambda n: st.integers(1, 5).flatmap(
            lambda m: st.lists(
                st.lists(st.booleans(), min_size=m, max_size=m), min_size=n, max_size=n
            )
        )
    ),
    sep=st.sampled_from([",", ";", "\t"]),
    header=st.sampled_from(["none", "plain", "trailing"]),
    labels=st.booleans(),
)
def test_delimited_tables_with_a_separator_ending_every_line(tmp_path, X, sep, header, labels):
    """A separator at the end of every line is never a column, a header of the data's width
    always names the columns, and a header of another width is a one-line error."""
    X = np.array(X, dtype=bool)
    n, m = X.shape
    cols = [f"c{j}" for j in range(m)]
    rows = [f"r{i}" for i in range(n)] if labels else None
    lines = [
        sep.join(([rows[i]] if labels else []) + [str(int(v)) for v in X[i]]) + sep
        for i in range(n)
    ]
    if header != "none":
        names = ([""] if labels else []) + cols
        lines.insert(0, sep.join(names) + (sep if header == "trailing" else ""))
    path = tmp_path / "t.csv"
    path.write_text("\n".join(lines) + "\n")
    ds = read_dataset(path, header=header != "none", index_col=labels)
    np.testing.assert_array_equal(ds.X.toarray(), X)
    assert ds.missing is None and ds.row_labels == rows
    assert ds.col_labels == (None if header == "none" else cols)
    if header != "none":
        lines[0] = sep.join(([""] if labels else []) + cols + ["extra", "more"])
        path.write_text("\n".join(lines) + "\n")
        with pytest.raises(ValueError, match=rf"line 1: the header names {m + 2 + labels} col"):
            read_dataset(path, header=True, index_col=labels)
