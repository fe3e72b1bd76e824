"""Reading and writing 0/1 matrices and factorizations.

Matrices: Matrix Market (coordinate pattern/integer/real, general or symmetric, ``.gz`` too),
scipy ``.npz``, dense 0/1 CSV/TSV (optional header row and index column) and FIMI transaction
files (``.dat``: one line per row, space-separated item ids). Every reader returns a canonical
support mask; a malformed file gets a ``ValueError`` naming the file, the line and the problem.

Factorizations are saved as one self-describing ``.npz`` (W, H, the loss curve, metadata as
JSON: method, parameters, errors, versions) that :func:`load_result` reads back. All writes are
atomic: a temporary file in the same folder, renamed over the target when complete.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io as _io
import json
import os
import platform
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ._validation import _csr_from_parts, check_binary_matrix, check_boolean_factors, support_mask

__all__ = [
    "Dataset",
    "SavedResult",
    "atomic_path",
    "load_result",
    "read_dataset",
    "read_matrix",
    "save_result",
    "write_matrix",
]

FORMATS = ("mtx", "npz", "csv", "tsv", "dat")
RESULT_FORMAT = "banmf-factorization"
RESULT_VERSION = 1
# Store X's support inside a result (for `banmf plot` and `banmf evaluate`) up to this size.
EMBED_MAX_NNZ = 2_000_000


@dataclass(frozen=True)
class Dataset:
    """A 0/1 matrix with its labels and description.

    Attributes
    ----------
    X : csr_array of shape (n, m), bool
    row_labels, col_labels : list of str or None
    name : str
    meta : dict
        Sidecar metadata (source, license, transformation, ...), when there is one.
    """

    X: sp.csr_array
    row_labels: list | None = None
    col_labels: list | None = None
    name: str = ""
    meta: dict = field(default_factory=dict)


def _format_of(path: Path, fmt: str | None) -> str:
    if fmt is not None:
        if fmt not in FORMATS:
            raise ValueError(f"unknown format {fmt!r}; choose one of {FORMATS}")
        return fmt
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    ext = suffixes[-1].lstrip(".") if suffixes else ""
    aliases = {"mtx": "mtx", "mm": "mtx", "npz": "npz", "csv": "csv", "tsv": "tsv", "txt": "dat", "dat": "dat"}
    if ext not in aliases:
        raise ValueError(
            f"{path}: cannot tell the format from the extension {ext or '(none)'!r}; "
            f"use one of .mtx, .mtx.gz, .npz, .csv, .tsv, .dat or pass format="
        )
    return aliases[ext]


def _read_text(path: Path) -> str:
    try:
        opener = gzip.open if path.suffix.lower() == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, EOFError) as exc:
        raise ValueError(f"{path}: unreadable ({exc})") from None


class _FileError(ValueError):
    pass


def _fail(path, line_no, problem):
    where = f"{path}, line {line_no}" if line_no is not None else str(path)
    raise _FileError(f"{where}: {problem}")


def read_matrix(path, *, format: str | None = None, **options) -> sp.csr_array:
    """Read a 0/1 matrix file into a canonical CSR support mask.

    Parameters
    ----------
    path : str or Path
    format : {"mtx", "npz", "csv", "tsv", "dat"} or None
        By default from the extension (``.gz`` is looked through).
    **options
        For CSV/TSV: ``header`` and ``index_col`` (bool or None = detect). For ``.dat``:
        ``one_based`` (default False) and ``n_cols``.

    Returns
    -------
    csr_array of shape (n, m), bool

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    ValueError
        Unknown format, unreadable or malformed file (with the line), values other than 0/1.
    """
    return read_dataset(path, format=format, **options).X


def read_dataset(path, *, format: str | None = None, **options) -> Dataset:
    """Like :func:`read_matrix`, with the labels the file (or its ``.json`` sidecar) carries."""
    path = Path(path)
    fmt = _format_of(path, format)
    allowed = {"csv": {"header", "index_col"}, "tsv": {"header", "index_col"}, "dat": {"one_based", "n_cols"}}
    extra = set(options) - allowed.get(fmt, set())
    if extra:
        raise TypeError(f"options {sorted(extra)} do not apply to {fmt} files")
    if fmt == "npz":
        return Dataset(_read_npz(path), name=path.name)
    if fmt == "mtx":
        X = _read_mtx(path)
        meta = _sidecar(path)
        return Dataset(X, meta.get("row_labels"), meta.get("col_labels"), meta.get("name", path.name), meta)
    if fmt == "dat":
        return Dataset(_read_dat(path, **options), name=path.name)
    return _read_delimited(path, "," if fmt == "csv" else "\t", **options)


def _sidecar(path: Path) -> dict:
    name = path.name
    for ext in (".gz", ".mtx", ".mm"):
        if name.lower().endswith(ext):
            name = name[: -len(ext)]
    side = path.with_name(name + ".json")
    if not side.exists():
        return {}
    try:
        meta = json.loads(side.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{side}: unreadable sidecar ({exc})") from None
    for key in ("row_labels", "col_labels"):
        if isinstance(meta.get(key), str):  # some sidecars store the list as its repr
            meta[key] = _parse_label_list(meta[key])
    return meta


def _parse_label_list(text: str) -> list | None:
    import ast

    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else None


def _read_npz(path: Path) -> sp.csr_array:
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        X = sp.load_npz(path)
    except Exception as exc:  # scipy raises several kinds for a bad archive
        raise ValueError(f"{path}: not a scipy sparse .npz file ({exc})") from None
    try:
        return check_binary_matrix(X, name=str(path))
    except ValueError as exc:
        raise ValueError(str(exc)) from None


def _read_mtx(path: Path) -> sp.csr_array:
    text = _read_text(path)
    lines_iter = iter(text.splitlines(keepends=True))
    offset = 0
    line_no = 0
    header = None
    for line in lines_iter:
        line_no += 1
        offset += len(line)
        if header is None:
            header = line.split()
            if len(header) != 5 or header[0].lower() != "%%matrixmarket" or header[1].lower() != "matrix":
                _fail(path, 1, "not a Matrix Market file (expected '%%MatrixMarket matrix coordinate ...')")
            layout, field_, symmetry = (h.lower() for h in header[2:])
            if layout not in ("coordinate", "array"):
                _fail(path, 1, f"unknown layout {layout!r}")
            if field_ not in ("pattern", "integer", "real"):
                _fail(path, 1, f"field {field_!r} is not supported for 0/1 data (pattern, integer or real)")
            if symmetry not in ("general", "symmetric"):
                _fail(path, 1, f"symmetry {symmetry!r} is not supported (general or symmetric)")
            continue
        if line.startswith("%") or not line.strip():
            continue
        size = line.split()
        break
    else:
        _fail(path, line_no or None, "no size line")
    want = 3 if layout == "coordinate" else 2
    try:
        dims = [int(s) for s in size]
        if len(dims) != want or min(dims) < 0:
            raise ValueError
    except ValueError:
        _fail(path, line_no, f"bad size line {line.strip()!r} (expected {want} nonnegative integers)")
    size_line = line_no
    n, m = dims[0], dims[1]
    if n == 0 or m == 0:
        _fail(path, size_line, f"the matrix is empty ({n}×{m})")
    body = text[offset:]
    per = (2 if field_ == "pattern" else 3) if layout == "coordinate" else 1
    count = dims[2] if layout == "coordinate" else n * m
    try:
        with warnings.catch_warnings():
            # numpy parses whitespace-separated text in C; older versions only warn on junk
            warnings.simplefilter("error", DeprecationWarning)
            values = np.fromstring(body, dtype=np.float64, sep=" ") if body.strip() else np.empty(0)
    except (ValueError, DeprecationWarning):
        values = None
    if values is None or values.size != per * count:
        _locate_mtx_problem(path, body, size_line, per, count)
    if layout == "array":
        dense = values.reshape(m, n).T  # column-major
        try:
            return check_binary_matrix(dense, name=str(path))
        except ValueError as exc:
            raise ValueError(str(exc)) from None
    entries = values.reshape(count, per)
    rows, cols = entries[:, 0], entries[:, 1]
    bad = (rows < 1) | (rows > n) | (cols < 1) | (cols > m) | (rows != np.floor(rows)) | (cols != np.floor(cols))
    if bad.any():
        e = int(np.flatnonzero(bad)[0])
        _fail(path, _entry_line(body, size_line, e),
              f"index ({entries[e, 0]:g}, {entries[e, 1]:g}) outside the declared {n}×{m} (1-based)")
    if per == 3:
        vals = entries[:, 2]
        bad = ~((vals == 0) | (vals == 1))
        if bad.any():
            e = int(np.flatnonzero(bad)[0])
            _fail(path, _entry_line(body, size_line, e),
                  f"value {vals[e]:g} is not 0 or 1 ({int(bad.sum())} such entries); binarize the data first")
        keep = vals != 0
        rows, cols = rows[keep], cols[keep]
    r = rows.astype(np.int64) - 1
    c = cols.astype(np.int64) - 1
    if symmetry == "symmetric":
        off = r != c
        r, c = np.concatenate([r, c[off]]), np.concatenate([c, r[off]])
    keys = np.unique(r * m + c)
    if len(keys) != len(r):
        warnings.warn(f"{path}: {len(r) - len(keys)} duplicate entries ignored", UserWarning, stacklevel=3)
    return support_mask(keys // m, keys % m, (n, m))


def _entry_line(body: str, size_line: int, entry: int) -> int:
    """File line of the entry-th data entry (comments and blank lines skipped)."""
    seen = -1
    for i, line in enumerate(body.splitlines(), start=size_line + 1):
        if line.strip() and not line.startswith("%"):
            seen += 1
            if seen == entry:
                return i
    return size_line + entry + 1


def _locate_mtx_problem(path, body, size_line, per, count):
    seen = 0
    for i, line in enumerate(body.splitlines(), start=size_line + 1):
        if not line.strip() or line.startswith("%"):
            continue
        tokens = line.split()
        if len(tokens) != per:
            _fail(path, i, f"expected {per} numbers per entry, found {len(tokens)}: {line.strip()!r}")
        for tok in tokens:
            try:
                float(tok)
            except ValueError:
                _fail(path, i, f"{tok!r} is not a number")
        seen += 1
    _fail(path, None, f"declares {count} entries but has {seen}")


def _read_dat(path: Path, one_based: bool = False, n_cols: int | None = None) -> sp.csr_array:
    text = _read_text(path)
    indptr = [0]
    cols: list[int] = []
    for i, line in enumerate(text.splitlines(), start=1):
        row = []
        for tok in line.split():
            try:
                v = int(tok)
            except ValueError:
                _fail(path, i, f"item id {tok!r} is not an integer")
            v -= 1 if one_based else 0
            if v < 0:
                _fail(path, i, f"item id {tok} is below the first id ({1 if one_based else 0})")
            row.append(v)
        row = sorted(set(row))
        cols.extend(row)
        indptr.append(len(cols))
    n = len(indptr) - 1
    if n == 0:
        raise ValueError(f"{path}: no rows")
    top = max(cols) + 1 if cols else 0
    m = top if n_cols is None else int(n_cols)
    if m < top:
        raise ValueError(f"{path}: item id {top - 1 + (1 if one_based else 0)} does not fit n_cols={n_cols}")
    if m == 0:
        raise ValueError(f"{path}: no items on any line; pass n_cols to read an all-zero matrix")
    idx = np.int32 if max(n, m, len(cols)) < 2**31 - 1 else np.int64
    return _csr_from_parts(np.asarray(indptr, idx), np.asarray(cols, idx), (n, m))


def _is_number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _read_delimited(path: Path, delimiter: str, header: bool | None = None, index_col: bool | None = None) -> Dataset:
    text = _read_text(path)
    rows = [r for r in csv.reader(_io.StringIO(text), delimiter=delimiter)]
    numbered = [(i, r) for i, r in enumerate(rows, start=1) if any(c.strip() for c in r)]
    if not numbered:
        raise ValueError(f"{path}: no data")
    if header is None:
        header = not all(_is_number(c) for c in numbered[0][1] if c.strip())
    col_labels = None
    if header:
        col_labels = [c.strip() for c in numbered[0][1]]
        numbered = numbered[1:]
    if not numbered:
        raise ValueError(f"{path}: a header but no data rows")
    if index_col is None:
        index_col = not all(_is_number(r[0]) for _, r in numbered if r)
    row_labels = [r[0].strip() for _, r in numbered] if index_col else None
    if index_col and col_labels is not None and len(col_labels) == len(numbered[0][1]):
        col_labels = col_labels[1:]
    width = len(numbered[0][1]) - (1 if index_col else 0)
    data = np.zeros((len(numbered), width), dtype=bool)
    for r, (line_no, cells) in enumerate(numbered):
        cells = cells[1:] if index_col else cells
        if len(cells) != width:
            _fail(path, line_no, f"{len(cells)} values where the first row has {width}")
        for c, cell in enumerate(cells):
            cell = cell.strip()
            if cell in ("1", "1.0", "true", "True"):
                data[r, c] = True
            elif cell not in ("0", "0.0", "false", "False", ""):
                _fail(path, line_no, f"value {cell!r} in column {c + 1} is not 0 or 1")
    if col_labels is not None and len(col_labels) != width:
        col_labels = None
    return Dataset(check_binary_matrix(data), row_labels, col_labels, path.name)


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path beside ``path``; rename it over ``path`` only on success."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise FileNotFoundError(f"{parent}: no such folder for the output {path.name}")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_matrix(X, path, *, format: str | None = None) -> None:
    """Write a 0/1 matrix atomically (format from the extension: .mtx[.gz], .npz, .csv, .tsv, .dat)."""
    path = Path(path)
    fmt = _format_of(path, format)
    X = check_binary_matrix(X)
    with atomic_path(path) as tmp:
        if fmt == "npz":
            with open(tmp, "wb") as fh:
                sp.save_npz(fh, sp.csr_matrix(X), compressed=True)
            return
        opener = gzip.open if path.suffix.lower() == ".gz" else open
        with opener(tmp, "wt", encoding="utf-8") as fh:
            if fmt == "mtx":
                fh.write("%%MatrixMarket matrix coordinate pattern general\n")
                fh.write(f"{X.shape[0]} {X.shape[1]} {X.nnz}\n")
                rows = np.repeat(np.arange(1, X.shape[0] + 1), np.diff(X.indptr))
                np.savetxt(fh, np.column_stack([rows, X.indices + 1]), fmt="%d")
            elif fmt == "dat":
                for i in range(X.shape[0]):
                    fh.write(" ".join(map(str, X.indices[X.indptr[i]:X.indptr[i + 1]])) + "\n")
            else:
                sep = "," if fmt == "csv" else "\t"
                for row in X.toarray():  # dense text format: the file is n×m by definition
                    fh.write(sep.join("1" if v else "0" for v in row) + "\n")


@dataclass(frozen=True)
class SavedResult:
    """A factorization read back by :func:`load_result`.

    Attributes
    ----------
    W : ndarray (n, k), bool
    H : ndarray (k, m), bool
    meta : dict
        method, params, error, relative_error, n_iter, seconds, shape, nnz, thresholds,
        versions, created, and what the writer added (input path, sha256, interrupted, ...).
    loss_curve : ndarray or None
    X : csr_array or None
        The input's support, embedded when it had at most 2,000,000 nonzeros.
    """

    W: np.ndarray
    H: np.ndarray
    meta: dict
    loss_curve: np.ndarray | None = None
    X: sp.csr_array | None = None


def _jsonable(value):
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return _jsonable(value.tolist())
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, type) or isinstance(value, np.dtype):
        return np.dtype(value).name if _is_dtype(value) else repr(value)
    return repr(value)


def _is_dtype(value) -> bool:
    try:
        np.dtype(value)
    except TypeError:
        return False
    return True


def versions() -> dict:
    import numba
    import scipy

    from . import __version__

    return {"banmf": __version__, "numpy": np.__version__, "scipy": scipy.__version__,
            "numba": numba.__version__, "python": platform.python_version()}


def save_result(result, path, *, X=None, extra: dict | None = None) -> None:
    """Save a factorization (a :class:`banmf.Factorization` or a fitted estimator) atomically.

    Parameters
    ----------
    result : Factorization or fitted estimator
    path : str or Path
        Written as a compressed ``.npz``.
    X : array-like or sparse, optional
        The factorized matrix; its support is embedded when it has at most 2,000,000 nonzeros.
    extra : dict, optional
        More metadata (JSON-able), e.g. the input file and its checksum.
    """
    if hasattr(result, "estimator"):  # a Factorization
        est, W, H = result.estimator, result.W, result.H
        meta = {"method": result.method, "params": result.params, "error": result.error,
                "relative_error": result.relative_error, "n_iter": result.n_iter, "seconds": result.seconds}
    else:
        est = result
        W, H = est.W_, est.components_
        meta = {"method": type(est).__name__, "params": est.get_params(),
                "error": est.reconstruction_err_, "relative_error": est.relative_error_,
                "n_iter": est.n_iter_, "seconds": getattr(est, "fit_seconds_", None)}
    W, H = check_boolean_factors(W, H)
    meta.update({
        "format": RESULT_FORMAT, "format_version": RESULT_VERSION,
        "shape": [int(W.shape[0]), int(H.shape[1])], "n_components": int(W.shape[1]),
        "thresholds": getattr(est, "thresholds_", None),
        "interrupted": bool(getattr(est, "interrupted_", False)),
        "versions": versions(), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    })
    arrays = {"W": np.packbits(W, axis=1), "H": np.packbits(H, axis=1)}
    loss = getattr(est, "loss_curve_", None)
    if loss is not None:
        arrays["loss_curve"] = np.asarray(loss, dtype=np.float64)
    if X is not None:
        Xm = check_binary_matrix(X)
        if Xm.shape != (W.shape[0], H.shape[1]):
            raise ValueError(f"X has shape {Xm.shape}, the factors give {(W.shape[0], H.shape[1])}")
        meta["nnz"] = int(Xm.nnz)
        if Xm.nnz <= EMBED_MAX_NNZ:
            arrays["X_indptr"], arrays["X_indices"] = Xm.indptr, Xm.indices
    if extra:
        meta.update(extra)
    arrays["meta"] = np.frombuffer(json.dumps(_jsonable(meta)).encode("utf-8"), dtype=np.uint8)
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, **arrays)


def load_result(path) -> SavedResult:
    """Read a factorization written by :func:`save_result`."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {key: z[key] for key in z.files}
    except Exception as exc:
        raise ValueError(f"{path}: not a banmf result file ({exc})") from None
    try:
        meta = json.loads(bytes(data["meta"]).decode("utf-8"))
    except (KeyError, ValueError):
        raise ValueError(f"{path}: not a banmf result file (no metadata)") from None
    if meta.get("format") != RESULT_FORMAT:
        raise ValueError(f"{path}: not a banmf result file (format {meta.get('format')!r})")
    if meta.get("format_version", 0) > RESULT_VERSION:
        raise ValueError(f"{path}: written by a newer banmf (format version {meta['format_version']})")
    n, m = meta["shape"]
    k = meta["n_components"]
    W = np.unpackbits(data["W"], axis=1, count=k).astype(bool)
    H = np.unpackbits(data["H"], axis=1, count=m).astype(bool)
    if W.shape != (n, k) or H.shape != (k, m):
        raise ValueError(f"{path}: factors do not match the recorded shape")
    X = None
    if "X_indptr" in data:
        X = _csr_from_parts(data["X_indptr"], data["X_indices"], (n, m))
    return SavedResult(W, H, meta, data.get("loss_curve"), X)
