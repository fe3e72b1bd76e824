"""Reading and writing 0/1 matrices and factorizations.

Matrices: Matrix Market (coordinate pattern/integer/real or dense array, general or symmetric,
``.gz`` too), scipy ``.npz``, dense 0/1 CSV/TSV (optional header row and index column; the
separator is detected among ``,``, tab and ``;``) and FIMI transaction files (``.dat``: one line
per row, space-separated item ids). Labels, the shape and the unknown cells of ``.mtx``, ``.npz``
and ``.dat`` files are kept in a sidecar that belongs to one file, its name + ``.json``
(``a.mtx.json``); the shared ``NAME.json`` of older versions (and of the bundled data) is read
when it can only be that file's. Every reader
returns a canonical support mask in memory O(nnz + n + m); a malformed file gets one line naming
the file, the line where there is one, and the problem (rows and columns counted from 1). A
reader estimates what the matrix will take from the file's header before allocating it, and
refuses a matrix larger than the memory available (:mod:`banmf._memory`, ``BANMF_MEMORY_LIMIT``).
Oddities that the readers read past, such as duplicate entries, raise a :class:`DataWarning`.

Factorizations are saved as one self-describing ``.npz`` (W, H, the loss curve, metadata as
JSON: method, parameters, errors, versions) that :func:`load_result` reads back, refusing in one
line anything else; the format is :class:`banmf.Factorization`'s own (:mod:`banmf.result`).
All writes are atomic (:mod:`banmf._files`): a temporary file in the same folder, renamed over
the target when complete, with the permissions a plain ``open()`` would give (or those of the file
it replaces). :func:`check_output` checks a destination before any work is done.
"""

from __future__ import annotations

import contextlib
import csv
import glob
import gzip
import io as _io
import itertools
import json
import os
import re
import stat
import sys
import warnings
import zlib
from array import array
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .._boolean import csr_from_parts, support_mask_from_keys
from .._files import atomic_path, check_output
from .._files import check_readable as _check_readable
from .._files import csr_problem as _csr_problem
from .._files import jsonable as jsonable  # banmf.io.jsonable, as before
from .._files import nbytes as _nbytes
from .._files import npz_array as _npz_array
from .._files import open_npz as _open_npz
from .._files import reason_of as _reason
from .._files import signed as _signed
from .._files import sorted_rows as _sorted_rows
from .._files import stored_pattern as _stored_pattern
from .._memory import ENV_VAR, check_matrix_size, check_memory
from .._validation import check_binary_matrix, entries, format_value
from ..dataset import Dataset
from ..exceptions import DataWarning
from ..result import EMBED_MAX_NNZ as EMBED_MAX_NNZ  # the result files' names, as before
from ..result import RESULT_FORMAT as RESULT_FORMAT
from ..result import RESULT_VERSION as RESULT_VERSION
from ..result import Factorization

__all__ = [
    "DataWarning",
    "Dataset",
    "atomic_path",
    "check_output",
    "load_result",
    "npz_shape",
    "read_dataset",
    "read_matrix",
    "save_result",
    "write_matrix",
]

FORMATS = ("mtx", "npz", "csv", "tsv", "dat", "h5ad")
# Parsing text holds at most one 8-byte number per 2 characters ("1 " or "1\n").
_PARSE_BYTES_PER_CHAR = 4
# (banmf/, above this package: the warnings point past every banmf frame)
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


# --- messages -------------------------------------------------------------------------------


def _fail(path, line_no, problem):
    where = f"{path}, line {line_no}" if line_no is not None else str(path)
    raise ValueError(f"{where}: {problem}")


def _quote(text: str, limit: int = 40) -> str:
    """``repr`` of file content for a message, cut short (a line may be megabytes long)."""
    return repr(text if len(text) <= limit else text[:limit] + "…")


def _not_binary(where: str, value, row, col, count: int) -> str:
    """The message for entries other than 0/1 in a file (positions counted from 1; a ``str``
    value is shown as it is)."""
    return (
        f"{where}: value {value if isinstance(value, str) else format_value(value)} at row {row}, "
        f"column {col} is not 0 or 1 "
        f"({entries(count, 'is not 0 or 1')} in the file); binarize the data first"
    )


def _warn_data(message: str) -> None:
    # Point the warning at the first caller outside banmf: the readers sit at several depths.
    level, frame = 2, sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE_DIR):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, DataWarning, stacklevel=level)


def _warn_duplicates(path, count: int) -> None:
    _warn_data(f"{path}: {count} duplicate {'entry' if count == 1 else 'entries'} counted once")


# --- reading --------------------------------------------------------------------------------


def format_of(path: Path, fmt: str | None) -> str:
    if fmt is not None:
        if fmt not in FORMATS:
            raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
        return fmt
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    ext = suffixes[-1].lstrip(".") if suffixes else ""
    aliases = {
        "mtx": "mtx",
        "mm": "mtx",
        "npz": "npz",
        "csv": "csv",
        "tsv": "tsv",
        "txt": "dat",
        "dat": "dat",
        "h5ad": "h5ad",
    }
    if ext not in aliases:
        raise ValueError(
            f"{path}: cannot tell the format from the extension {ext or '(none)'!r}; "
            f"use one of .mtx, .mtx.gz, .npz, .csv, .tsv, .dat, .h5ad or pass format="
        )
    return aliases[ext]


def _read_text(path: Path) -> str:
    """The file's text (gzip looked through, a UTF-8 byte-order mark dropped, line ends made
    ``\\n``), after checking that the memory can hold it."""
    _check_readable(path)
    try:
        gz = path.suffix.lower() == ".gz"
        if gz or not stat.S_ISREG(path.stat().st_mode):
            # The size is unknown up front (compressed data, a pipe, a device): check as it grows.
            data = bytearray()
            with (gzip.open if gz else open)(path, "rb") as fh:
                while chunk := fh.read(1 << 24):
                    data += chunk
                    check_memory(
                        2 * len(data), f"{path}: {'decompressing' if gz else 'reading'} it"
                    )
        else:
            check_memory(2 * path.stat().st_size, f"{path}: reading it")
            data = path.read_bytes()
    except PermissionError:
        raise PermissionError(f"{path}: cannot read it (permission denied)") from None
    except gzip.BadGzipFile:
        raise ValueError(f"{path}: unreadable (not a gzip file)") from None
    except (EOFError, zlib.error):
        raise ValueError(f"{path}: unreadable (truncated or damaged gzip data)") from None
    except OSError as exc:
        raise ValueError(f"{path}: unreadable ({exc.strerror or _reason(exc)})") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ValueError(
            f"{path}, line {line}: not UTF-8 text (byte 0x{data[exc.start]:02x})"
        ) from None
    del data
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text


def _lines(text: str, start: int = 0, line_no: int = 1):
    """(line number, offset, line) from ``start``, split at ``\\n`` only, one at a time (a list
    of all lines would cost ~50 bytes a line)."""
    while start < len(text):
        end = text.find("\n", start)
        if end < 0:
            end = len(text)
        yield line_no, start, text[start:end]
        start, line_no = end + 1, line_no + 1


def read_matrix(path, *, format: str | None = None, **options) -> sp.csr_array:
    """Read a 0/1 matrix file into a canonical CSR support mask.

    Parameters
    ----------
    path : str or Path
    format : {"mtx", "npz", "csv", "tsv", "dat"} or None
        By default from the extension (``.gz`` is looked through).
    **options
        For CSV/TSV: ``header`` and ``index_col`` (bool or None = detect). For ``.dat``:
        ``one_based`` (default False) and ``n_cols`` (default: the sidecar's shape, else the
        largest item id + 1).

    Returns
    -------
    csr_array of shape (n, m), bool

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    PermissionError
        The file cannot be read.
    ValueError
        Unknown format, unreadable or malformed file (with the line), values other than 0/1, a
        matrix larger than the memory available (see ``BANMF_MEMORY_LIMIT``).
    TypeError
        An option that does not apply to the format, or of the wrong type.

    Warns
    -----
    DataWarning
        Duplicate entries (counted once); cells whose value the file leaves unknown (read as 0
        here: :func:`read_dataset` returns them as its ``missing``).
    """
    data = read_dataset(path, format=format, **options)
    if data.missing is not None and data.missing.nnz:
        _warn_data(
            f"{path}: {entries(data.missing.nnz)} of unknown value, read as 0; "
            "read_dataset(path).missing holds them (fit with missing=)"
        )
    return data.X


_OPTIONS = {
    "csv": ("header", "index_col"),
    "tsv": ("header", "index_col"),
    "dat": ("one_based", "n_cols"),
}


def read_dataset(path, *, format: str | None = None, **options) -> Dataset:
    """Like :func:`read_matrix`, with the labels the file (or its ``.json`` sidecar) carries."""
    path = Path(path)
    fmt = format_of(path, format)
    extra = set(options) - set(_OPTIONS.get(fmt, ()))
    if extra:
        raise TypeError(f"options {sorted(extra)} do not apply to {fmt} files")
    for key in ("header", "index_col", "one_based"):
        if (
            key in options
            and options[key] is not None
            and not isinstance(options[key], (bool, np.bool_))
        ):
            raise TypeError(f"{key} must be True, False or None, got {options[key]!r}")
    n_cols = options.get("n_cols")
    if n_cols is not None and (
        isinstance(n_cols, (bool, np.bool_)) or not isinstance(n_cols, (int, np.integer))
    ):
        raise TypeError(f"n_cols must be a positive integer, got {n_cols!r}")
    if n_cols is not None and n_cols < 1:
        raise ValueError(f"n_cols must be a positive integer, got {n_cols}")
    try:
        if fmt == "npz":
            X = _read_npz(path)
            return _with_sidecar(path, X, missing=_npz_missing(path, X.shape))
        if fmt == "mtx":
            return _with_sidecar(path, _read_mtx(path))
        if fmt == "dat":
            return _read_dat(path, **options)
        if fmt == "h5ad":
            return _read_h5ad(path)
        return _read_delimited(path, "," if fmt == "csv" else "\t", **options)
    except MemoryError:  # an estimate fell short: still one line, not a traceback
        raise ValueError(
            f"{path}: not enough memory to read it (set {ENV_VAR} to a budget that fits)"
        ) from None


# --- sidecars -------------------------------------------------------------------------------


def _sidecar_path(path: Path) -> Path:
    """The sidecar that belongs to ``path`` alone: its full name + ``.json`` (``a.mtx.json``)."""
    return path.with_name(path.name + ".json")


def _legacy_sidecar_path(path: Path) -> Path:
    """The sidecar name of banmf before 0.x: the name without its data extensions + ``.json``
    (``a.json`` for ``a.mtx``, ``a.dat`` and ``a.npz`` alike), as the bundled data use."""
    return path.with_name(_legacy_stem(path.name) + ".json")


def _legacy_stem(name: str) -> str:
    for ext in (".gz", ".mtx", ".mm", ".dat", ".txt", ".npz"):
        if name.lower().endswith(ext):
            name = name[: -len(ext)]
    return name


#: The formats whose labels, shape and unknown cells live in a sidecar.
_SIDECAR_FORMATS = ("mtx", "npz", "dat")
#: Sidecar keys that describe one file's content: a new file by that name does not inherit them.
_CONTENT_KEYS = (
    "row_labels",
    "col_labels",
    "shape",
    "missing",
    "nnz",
    "density",
    "sha256",
    "file",
    "format",
)


@dataclass(frozen=True)
class _Sidecar:
    """The sidecar of a data file: where it is (None: there is none), its JSON object, and
    whether it is an old-style shared one (``NAME.json``)."""

    path: Path | None = None
    meta: dict = field(default_factory=dict)
    legacy: bool = False


def _legacy_owner(path: Path) -> str | None:
    """Why the old-style sidecar beside ``path`` may not be ``path``'s: "" when it is, None
    when it names another file.

    It is when it names ``path`` (key ``file``, as the bundled data's do), or else when no
    other data file shares it: a file with a sidecar of its own, or of a format that has none,
    does not count."""
    legacy = _legacy_sidecar_path(path)
    named = _raw_sidecar(legacy).get("file")
    if isinstance(named, str):
        return "" if named == path.name else None
    others = []
    with contextlib.suppress(OSError):
        for other in sorted(path.parent.glob(glob.escape(_legacy_stem(path.name)) + ".*")):
            if other.name == path.name or other == legacy:
                continue
            if _legacy_sidecar_path(other) != legacy or _sidecar_path(other).exists():
                continue
            with contextlib.suppress(ValueError):
                if format_of(other, None) in _SIDECAR_FORMATS and other.is_file():
                    others.append(other.name)
    return f"it may describe {', '.join(others)} as well" if others else ""


def _sidecar(path: Path, *, quiet: bool = False) -> _Sidecar:
    """The sidecar describing ``path``: its own (``a.mtx.json``), else the old shared
    ``a.json`` when that can only be ``path``'s (:func:`_legacy_owner`; a DataWarning says
    why not otherwise, unless ``quiet``)."""
    own = _sidecar_path(path)
    if own.exists():
        return _Sidecar(own, _label_lists(_raw_sidecar(own)))
    legacy = _legacy_sidecar_path(path)
    if not legacy.exists():
        return _Sidecar()
    why = _legacy_owner(path)
    if why is None:
        return _Sidecar()
    if why:
        if not quiet:
            _warn_data(
                f"{legacy}: not read for {path.name} ({why}); rename it to {own.name} if it "
                f"describes {path.name}"
            )
        return _Sidecar()
    return _Sidecar(legacy, _label_lists(_raw_sidecar(legacy)), legacy=True)


def _raw_sidecar(side: Path) -> dict:
    """The sidecar's JSON object as stored, or {} when there is none."""
    if not side.exists():
        return {}
    try:
        meta = json.loads(side.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise ValueError(f"{side}: unreadable sidecar ({_reason(exc)})") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{side}: unreadable sidecar (not a JSON object)")
    return meta


def _label_lists(meta: dict) -> dict:
    for key in ("row_labels", "col_labels"):
        if isinstance(meta.get(key), str):  # some sidecars store the list as its repr
            meta[key] = _parse_label_list(meta[key])
    return meta


def _parse_label_list(text: str) -> list | None:
    import ast

    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else None


def _sidecar_shape(side: _Sidecar) -> tuple[int, int] | None:
    shape = side.meta.get("shape")
    if shape is None:
        return None
    if not (
        isinstance(shape, list)
        and len(shape) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in shape)
    ):
        raise ValueError(
            f"{side.path}: 'shape' must be two positive integers, got {_quote(str(shape))}"
        )
    return shape[0], shape[1]


def _sidecar_missing(path: Path, side: _Sidecar, shape: tuple[int, int]) -> sp.csr_array | None:
    """The mask of unknown cells that the sidecar names (key ``missing``: a 0/1 matrix file
    beside it, any format), or None."""
    name = side.meta.get("missing")
    if name is None:
        return None
    if not isinstance(name, str) or not name or Path(name).name != name:
        raise ValueError(
            f"{side.path}: 'missing' must name a file in the same folder, got {name!r}"
        )
    mask_path = side.path.with_name(name)
    if not mask_path.exists():
        raise ValueError(f"{side.path}: the missing-cell mask {name} is not there")
    mask = read_dataset(mask_path).X
    if mask.shape != shape:
        raise ValueError(
            f"{mask_path}: a {mask.shape[0]}×{mask.shape[1]} mask for {path}'s "
            f"{shape[0]}×{shape[1]} matrix"
        )
    return mask


def _with_sidecar(
    path: Path, X: sp.csr_array, side: _Sidecar | None = None, missing=None
) -> Dataset:
    side = _sidecar(path) if side is None else side
    recorded = _sidecar_shape(side)
    if recorded is not None and recorded != X.shape:
        where = (
            f"{side.path} describes a {recorded[0]}×{recorded[1]} matrix, but {path} is "
            f"{X.shape[0]}×{X.shape[1]}"
        )
        if not side.legacy:
            raise ValueError(f"{where}: the sidecar is stale; delete it or write {path} again")
        _warn_data(f"{where}: not read for {path.name} (a sidecar of another file by that name)")
        side = _Sidecar()
    meta = side.meta
    if missing is None and side.path is not None:
        missing = _sidecar_missing(path, side, X.shape)
    labels = []
    for key, size, what in (
        ("row_labels", X.shape[0], "rows"),
        ("col_labels", X.shape[1], "columns"),
    ):
        value = meta.get(key)
        if value is not None and (not isinstance(value, list) or len(value) != size):
            count = len(value) if isinstance(value, list) else "no list of"
            raise ValueError(f"{side.path}: {count} {key.replace('_', ' ')} for {size} {what}")
        labels.append(None if value is None else [str(v) for v in value])
    name = meta.get("name")
    return Dataset(
        _observed_ones(X, missing),
        labels[0],
        labels[1],
        name if isinstance(name, str) else path.name,
        meta,
        missing,
    )


def _observed_ones(X: sp.csr_array, missing) -> sp.csr_array:
    """X without ones on unknown cells (a file's value there means nothing)."""
    if missing is None or missing.nnz == 0:
        return X
    from .._validation import check_unknown

    return check_unknown(X, missing)[0]


# --- Matrix Market --------------------------------------------------------------------------

# Tokens as numpy's text parser splits them, and the numbers it reads (to point at the culprit
# when it stops).
_TOKEN = re.compile(r"[^ \t\n\r\v\f]+")
_NUMBER = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf(?:inity)?|nan(?:\([^)]*\))?)",
    re.IGNORECASE,
)
# Indices are parsed as float64, exact up to 2**53.
_MAX_MTX_DIM = 2**53


def _read_mtx(path: Path) -> sp.csr_array:
    text = _read_text(path)
    lines = _lines(text)
    first = next(lines, None)
    header = first[2].split() if first else []
    if len(header) != 5 or header[0].lower() != "%%matrixmarket" or header[1].lower() != "matrix":
        _fail(path, 1, "not a Matrix Market file (expected '%%MatrixMarket matrix coordinate ...')")
    layout, field_, symmetry = (h.lower() for h in header[2:])
    if layout not in ("coordinate", "array"):
        _fail(path, 1, f"unknown layout {_quote(header[2])} (coordinate or array)")
    if field_ not in ("pattern", "integer", "real"):
        _fail(
            path,
            1,
            f"field {_quote(header[3])} is not supported for 0/1 data (pattern, integer or real)",
        )
    if symmetry not in ("general", "symmetric"):
        _fail(path, 1, f"symmetry {_quote(header[4])} is not supported (general or symmetric)")
    if layout == "array" and field_ == "pattern":
        _fail(path, 1, "a dense array cannot have the field 'pattern' (integer or real)")
    for size_line, offset, line in lines:
        if line.strip() and not line.startswith("%"):
            break
    else:
        _fail(path, None, "no size line")
    want = 3 if layout == "coordinate" else 2
    size = line.split()
    if len(size) != want or not all(s.isascii() and s.isdigit() for s in size):
        _fail(
            path,
            size_line,
            f"bad size line {_quote(line.strip())} (expected {want} nonnegative integers)",
        )
    if any(len(s) > 30 for s in size):
        _fail(path, size_line, f"the size {_quote(max(size, key=len), 24)} is too large")
    dims = [int(s) for s in size]
    n, m = dims[0], dims[1]
    if n == 0 or m == 0:
        _fail(path, size_line, f"the matrix is empty ({n}×{m})")
    if max(n, m) > _MAX_MTX_DIM:
        _fail(path, size_line, f"a {n}×{m} matrix is too large (at most 2^53 rows or columns)")
    symmetric = symmetry == "symmetric"
    if symmetric and n != m:
        _fail(path, size_line, f"a symmetric matrix must be square, the size line says {n}×{m}")
    per = (2 if field_ == "pattern" else 3) if layout == "coordinate" else 1
    # A symmetric dense array holds the lower triangle only, column by column.
    count = dims[2] if layout == "coordinate" else n * (n + 1) // 2 if symmetric else n * m
    body = text[offset + len(line) + 1 :]
    del text
    # Comment lines between entries are not standard, but some writers leave them.
    numbers = (
        "\n".join("" if ln.startswith("%") else ln for ln in body.split("\n"))
        if "%" in body
        else body
    )
    check_memory(_PARSE_BYTES_PER_CHAR * len(numbers), f"{path}: parsing it")
    try:
        with warnings.catch_warnings():
            # numpy parses whitespace-separated text in C; before 2.0 it only warned on junk
            warnings.simplefilter("error", DeprecationWarning)
            values = (
                np.fromstring(numbers, dtype=np.float64, sep=" ")
                if numbers.strip()
                else np.empty(0)
            )
    except (ValueError, DeprecationWarning):  # numpy stopped at something that is not a number
        values = None
    del numbers
    if values is None or values.size != per * count:
        _locate_mtx_problem(path, body, size_line, per, count, layout)
    where = f"{path}, line {size_line}"
    if layout == "array":
        # Build temporaries: two flags and an index per value (and the triangle's positions),
        # then three index arrays per nonzero.
        check_matrix_size(
            n, m, n * m, where, extra=count * (10 + (16 if symmetric else 0)) + 24 * n * m
        )
        if symmetric:
            col_of, row_of = np.triu_indices(n)  # (column, row) of the lower triangle, column-major

            def position(e):
                return row_of[e], col_of[e]
        else:

            def position(e):
                return e % n, e // n

        bad = ~((values == 0) | (values == 1))
        if bad.any():
            e = int(np.flatnonzero(bad)[0])
            row, col = position(e)
            raise ValueError(
                _not_binary(
                    f"{path}, line {_token_line(body, size_line, e)}",
                    values[e],
                    int(row) + 1,
                    int(col) + 1,
                    int(bad.sum()),
                )
            )
        rows, cols = position(np.flatnonzero(values))
        if symmetric:
            off = rows != cols
            rows, cols = np.concatenate([rows, cols[off]]), np.concatenate([cols, rows[off]])
        return _support_from_coords(path, rows, cols, (n, m))
    entries_ = values.reshape(count, per)
    rows, cols = entries_[:, 0], entries_[:, 1]
    bad = (rows != np.floor(rows)) | (cols != np.floor(cols))
    if bad.any():
        e = int(np.flatnonzero(bad)[0])
        _fail(
            path,
            _token_line(body, size_line, e * per),
            f"index ({format_value(rows[e])}, {format_value(cols[e])}) is not a pair of whole numbers",
        )
    bad = (rows < 1) | (rows > n) | (cols < 1) | (cols > m)
    if bad.any():
        e = int(np.flatnonzero(bad)[0])
        _fail(
            path,
            _token_line(body, size_line, e * per),
            f"index ({format_value(rows[e])}, {format_value(cols[e])}) outside the declared {n}×{m} (1-based)",
        )
    total = count * (2 if symmetric else 1)
    # Build temporaries: rows, columns, keys and their sorted copy, int64 each.
    check_matrix_size(n, m, total, where, extra=total * 32)
    if per == 3:
        vals = entries_[:, 2]
        bad = ~((vals == 0) | (vals == 1))
        if bad.any():
            e = int(np.flatnonzero(bad)[0])
            raise ValueError(
                _not_binary(
                    f"{path}, line {_token_line(body, size_line, e * per)}",
                    vals[e],
                    format_value(rows[e]),
                    format_value(cols[e]),
                    int(bad.sum()),
                )
            )
        keep = vals != 0
        rows, cols = rows[keep], cols[keep]
    r = rows.astype(np.int64)
    c = cols.astype(np.int64)
    del values, entries_, rows, cols
    r -= 1
    c -= 1
    if symmetric:
        off = r != c
        r, c = np.concatenate([r, c[off]]), np.concatenate([c, r[off]])
    return _support_from_coords(path, r, c, (n, m))


def _token_line(body: str, size_line: int, token: int) -> int:
    """File line of the ``token``-th number after the size line (comments skipped)."""
    seen = 0
    for line_no, _, line in _lines(body, line_no=size_line + 1):
        if line.startswith("%"):
            continue
        seen += len(_TOKEN.findall(line))
        if seen > token:
            return line_no
    return size_line


def _locate_mtx_problem(path, body, size_line, per, count, layout):
    seen = 0
    for line_no, _, line in _lines(body, line_no=size_line + 1):
        if line.startswith("%"):
            continue
        tokens = _TOKEN.findall(line)
        if not tokens:
            continue
        if layout == "coordinate" and len(tokens) != per:
            _fail(
                path,
                line_no,
                f"expected {per} numbers per entry, found {len(tokens)}: {_quote(line.strip())}",
            )
        for tok in tokens:
            if not _NUMBER.fullmatch(tok):
                _fail(path, line_no, f"{_quote(tok)} is not a number")
        seen += len(tokens) // per if layout == "coordinate" else len(tokens)
    what = "entries" if layout == "coordinate" else "values"
    _fail(path, None, f"declares {count} {what} but has {seen}")


def _support_from_coords(
    path, rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int]
) -> sp.csr_array:
    """Support mask of 0-based (row, column) pairs of a file's ones; repeats are counted once
    with a :class:`DataWarning`."""
    keys = rows.astype(np.int64, copy=False) * shape[1] + cols
    unique = np.unique(keys)
    if len(unique) != len(keys):
        _warn_duplicates(path, len(keys) - len(unique))
    return support_mask_from_keys(unique, shape)


# --- FIMI transactions ----------------------------------------------------------------------

_ITEM_ID = re.compile(r"-?[0-9]+")
_PLAIN_IDS = re.compile(r"[0-9 \t\v\f]*")  # a line of ASCII item ids


def _item_id(path, line_no: int, tok: str, first: int) -> int:
    """The 0-based column of an item id token, or a one-line error naming it."""
    if not _ITEM_ID.fullmatch(tok):
        _fail(path, line_no, f"item id {_quote(tok)} is not an integer")
    if len(tok) > 19 or int(tok) - first >= 2**63 - 2:  # beyond int64
        _fail(path, line_no, f"item id {_quote(tok, 24)} is too large")
    v = int(tok) - first
    if v < 0:
        _fail(path, line_no, f"item id {tok} is below the first id ({first})")
    return v


def _read_dat(path: Path, one_based: bool = False, n_cols: int | None = None) -> Dataset:
    text = _read_text(path)
    sidecar = _sidecar(path)
    meta, side = sidecar.meta, sidecar.path
    shape = _sidecar_shape(sidecar)
    check_memory(_PARSE_BYTES_PER_CHAR * len(text), f"{path}: parsing it")
    first = 1 if one_based else 0
    indptr, cols = array("q", [0]), array("q")
    duplicates, top = 0, 0
    spmf_names: dict[int, str] = {}
    for line_no, _, line in _lines(text):
        if line.startswith("@"):
            # SPMF's header lines: "@ITEM=<id>=<name>" names an item; others are notes.
            if line.startswith("@ITEM="):
                tok, _, name = line[6:].partition("=")
                spmf_names[_item_id(path, line_no, tok.strip(), first)] = name.strip()
            continue
        tokens = line.split()
        if _PLAIN_IDS.fullmatch(line) and max(map(len, tokens), default=0) <= 19:  # the usual line
            row = {int(tok) - first for tok in tokens}
        else:
            row = {_item_id(path, line_no, tok, first) for tok in tokens}
        if row and (min(row) < 0 or max(row) >= 2**63 - 2):  # a 0 when one_based, or beyond int64
            bad = min(row) + first if min(row) < 0 else max(row) + first
            _item_id(path, line_no, str(bad), first)
        duplicates += len(tokens) - len(row)
        if row:
            cols.extend(sorted(row))
            top = max(top, cols[-1] + 1)
        indptr.append(len(cols))
    del text
    if duplicates:
        _warn_duplicates(path, duplicates)
    lines = len(indptr) - 1
    names_file = path.with_name(_legacy_stem(path.name) + ".names")  # FIMI's item names
    file_names = None
    if meta.get("col_labels") is None and names_file.exists():
        file_names = [v.strip() for v in _read_text(names_file).split("\n")]
        while file_names and not file_names[-1]:
            file_names.pop()
        if shape is None and n_cols is None:  # items that never occur still have names
            top = max(top, len(file_names))
    if shape is not None and lines > shape[0]:
        raise ValueError(f"{side} says {shape[0]} rows, but {path} has {lines} lines")
    n = shape[0] if shape is not None else lines  # editors may drop trailing empty lines
    if n == 0:
        raise ValueError(f"{path}: no rows")
    m = int(n_cols if n_cols is not None else shape[1] if shape is not None else top)
    if m < top:
        last = top - 1 + first
        if n_cols is not None:
            raise ValueError(f"{path}: item id {last} does not fit n_cols={n_cols}")
        raise ValueError(f"{side} says {shape[1]} columns, but {path} has the item id {last}")
    if m == 0:
        raise ValueError(f"{path}: no items on any line; pass n_cols to read an all-zero matrix")
    check_matrix_size(n, m, len(cols), str(path))
    if file_names is not None:
        if len(file_names) != m:
            raise ValueError(f"{names_file}: {len(file_names)} item names for {m} columns")
        meta = {**meta, "col_labels": file_names}
    elif spmf_names and meta.get("col_labels") is None:
        meta = {
            **meta,
            "col_labels": [spmf_names.get(j, str(j + first)) for j in range(m)],
        }
    indptr.extend(itertools.repeat(len(cols), n - lines))
    idx = np.int32 if max(n, m, len(cols)) < 2**31 - 1 else np.int64
    X = csr_from_parts(
        np.frombuffer(indptr, np.int64).astype(idx),
        np.frombuffer(cols, np.int64).astype(idx),
        (n, m),
    )
    if side is not None:  # an explicit n_cols overrides the recorded width
        meta = {**meta, "shape": [n, m]}
    return _with_sidecar(path, X, _Sidecar(side, meta, sidecar.legacy))


# --- AnnData ------------------------------------------------------------------------------


def _anndata():
    try:
        import anndata
    except ImportError:
        raise ImportError(
            ".h5ad files need anndata: pip install anndata (or banmf[anndata])"
        ) from None
    return anndata


def _read_h5ad(path: Path) -> Dataset:
    """An AnnData file's X (sparse or dense, 0/1), with obs names as row labels and var names
    as column labels."""
    anndata = _anndata()
    _check_readable(path)
    try:
        adata = anndata.read_h5ad(path)
    except (OSError, KeyError, ValueError, TypeError) as exc:  # TypeError: unexpected keys
        raise ValueError(f"{path}: not a readable .h5ad file ({_reason(exc)})") from None
    if adata.X is None:
        raise ValueError(f"{path}: the AnnData file has no X matrix")
    X = check_binary_matrix(adata.X, name=f"{path}: X", one_based=True)
    missing = None
    if "missing" in adata.layers:
        missing = check_binary_matrix(
            adata.layers["missing"], name=f"{path}: layer 'missing'", one_based=True
        )
    return Dataset(
        _observed_ones(X, missing),
        [str(v) for v in adata.obs_names],
        [str(v) for v in adata.var_names],
        path.name,
        missing=missing,
    )


def _write_h5ad(X: sp.csr_array, tmp: Path, labels: dict, missing=None) -> None:
    """X as uint8 CSR (what single-cell tools expect of counts), labels as obs and var names,
    unknown cells as the layer ``missing``."""
    anndata = _anndata()
    import pandas as pd

    n, m = X.shape
    obs = pd.DataFrame(index=labels.get("row_labels", [str(i) for i in range(n)]))
    var = pd.DataFrame(index=labels.get("col_labels", [str(j) for j in range(m)]))

    def counts(M):
        return sp.csr_matrix((np.ones(M.nnz, np.uint8), M.indices, M.indptr), shape=(n, m))

    layers = {} if missing is None else {"missing": counts(missing)}
    anndata.AnnData(X=counts(X), obs=obs, var=var, layers=layers).write_h5ad(tmp)


# --- CSV / TSV ------------------------------------------------------------------------------

_SEPARATORS = {",": "commas", "\t": "tabs", ";": "semicolons"}


#: Text cells that mean "unknown" (compared in lower case): R's and pandas' NA, the UCI ``?``,
#: a blank.
MISSING_CELLS = frozenset({"", "?", "na", "n/a", "nan"})


def _binary_cell(cell: str) -> bool | None:
    """True/False for a cell holding 1/0 (any number equal to them, or true/false in any case),
    None for anything else."""
    if cell == "1" or cell == "0":
        return cell == "1"
    low = cell.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        x = float(cell)
    except ValueError:
        return None
    return bool(x) if x in (0.0, 1.0) else None


def _is_number(cell: str) -> bool:
    """A number, or an unknown cell (a place a number would be)."""
    if _binary_cell(cell) is not None or cell.lower() in MISSING_CELLS:
        return True
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _is_data_row(cells: list[str]) -> bool:
    """Every cell after an optional label (the first cell) holds 0/1 or is unknown, and one
    holds 0/1."""
    body = cells[1:] if len(cells) > 1 else cells
    known = [c for c in body if c.lower() not in MISSING_CELLS]
    return bool(known) and all(_binary_cell(c) is not None for c in known)


def _looks_like_header(first: list[str], second: list[str] | None) -> bool:
    body = first[1:] if len(first) > 1 else first
    if len(first) > 1 and first[0] == "" and any(body):
        return True  # a blank corner above a column of row labels (pandas, R)
    if _is_data_row(first):
        return False  # 0/1 after an optional label: data
    if any(c and not _is_number(c) for c in body):
        return True  # words: column names
    # Numbers other than 0/1: column numbers under a corner label ("id,1,2,3" above 0/1 rows),
    # else data with a bad value, reported with its line.
    return (
        len(first) > 1 and not _is_number(first[0]) and second is not None and _is_data_row(second)
    )


def _sniff_separator(path: Path, text: str, expected: str) -> str:
    """The separator of the first lines: the expected one if it splits every line into the same
    number (> 1) of cells, else the one of ``,``, tab, ``;`` that does; failing that, the one
    that does so below the first line (a header of another width, reported as such)."""
    sample = list(itertools.islice((ln for ln in _io.StringIO(text) if ln.strip()), 20))
    widths, below = {}, {}
    for sep in (expected, *[s for s in _SEPARATORS if s != expected]):
        try:
            split = [len(cells) for cells in csv.reader(sample, delimiter=sep)]
        except csv.Error:
            split = []
        widths[sep], below[sep] = set(split), set(split[1:])
    for found in (widths, below):
        fits = [sep for sep, w in found.items() if len(w) == 1 and min(w) > 1]
        if fits:
            return fits[0]
    if widths[expected] == {1}:
        splitting = [sep for sep, w in widths.items() if w and max(w) > 1]
        if splitting:
            kind = "tab-separated" if expected == "\t" else "comma-separated"
            raise ValueError(
                f"{path}: expected {kind} values, but the first lines have no {_SEPARATORS[expected]}; "
                f"they have {_SEPARATORS[splitting[0]]}, in different numbers per line"
            )
    return expected


def _read_delimited(
    path: Path, delimiter: str, header: bool | None = None, index_col: bool | None = None
) -> Dataset:
    text = _read_text(path)
    delimiter = _sniff_separator(path, text, delimiter)
    check_memory(_PARSE_BYTES_PER_CHAR * len(text), f"{path}: parsing it")

    def records():
        """(line number, stripped cells) of the non-blank lines."""
        reader = csv.reader(_io.StringIO(text), delimiter=delimiter)
        try:
            for cells in reader:
                if any(c.strip() for c in cells):
                    yield reader.line_num, [c.strip() for c in cells]
        except csv.Error as exc:
            _fail(path, reader.line_num, f"cannot split the line into cells ({_reason(exc)})")

    head = list(itertools.islice(records(), 2))
    if not head:
        raise ValueError(f"{path}: no data")
    if header is None:
        header = _looks_like_header(head[0][1], head[1][1] if len(head) > 1 else None)
    rows = records()
    header_line, col_labels = next(rows) if header else (None, None)
    first_row = next(rows, None)
    if first_row is None:
        raise ValueError(f"{path}: a header but no data rows")
    rows = itertools.chain([first_row], rows)
    if index_col is None:
        cells = first_row[1]
        index_col = len(cells) > 1 and (
            (
                col_labels is not None
                and col_labels[0] == ""
                # (the data row may end with a separator that the header does not)
                and len(col_labels) in (len(cells), len(cells) - (cells[-1] == ""))
            )
            or _has_label_column(records(), header)
        )
    width = len(first_row[1]) - (1 if index_col else 0)
    if width < 1:
        raise ValueError(f"{path}: no columns besides the row labels")
    row_labels = [] if index_col else None
    last_blank = width > 1  # every row so far ends with an empty cell
    indptr, indices = array("q", [0]), array("q")
    unknown = array("q")  # row-major keys of the unknown cells
    bad_count, first_bad = 0, None
    for r, (line_no, cells) in enumerate(rows):
        if index_col:
            row_labels.append(cells[0])
            cells = cells[1:]
        if len(cells) != width:
            _fail(
                path,
                line_no,
                f"{len(cells)} value{'' if len(cells) == 1 else 's'} where the first row "
                f"has {width}",
            )
        last_blank = last_blank and cells[-1] == ""
        ones = [c for c, cell in enumerate(cells) if cell == "1"]
        if (
            len(ones) + cells.count("0") != width
        ):  # other spellings, blanks, bad values: cell by cell
            ones = []
            for c, cell in enumerate(cells):
                v = _binary_cell(cell)
                if v:
                    ones.append(c)
                elif v is None:
                    if cell.lower() in MISSING_CELLS:
                        unknown.append(r * width + c)
                        continue
                    bad_count += 1
                    # (the column as the file counts it: the row labels are column 1)
                    first_bad = first_bad or (line_no, cell, r + 1, c + 1 + bool(index_col))
        indices.extend(ones)
        indptr.append(len(indices))
    if first_bad is not None:
        line_no, cell, row, col = first_bad
        shown = cell if _is_number(cell) and len(cell) <= 24 else _quote(cell, 24)
        raise ValueError(_not_binary(f"{path}, line {line_no}", shown, row, col, bad_count))
    n = len(indptr) - 1
    unknown = np.frombuffer(unknown, np.int64)
    width, col_labels, trailing = _delimited_width(
        path, header_line, first_row[0], col_labels, width, index_col, last_blank
    )
    if trailing:
        # The separator that ends every line made a last column of blanks: drop their keys.
        r, c = np.divmod(unknown, width + 1)
        unknown = r[c < width] * width + c[c < width]
    check_matrix_size(n, width, len(indices), str(path))
    idx = np.int32 if max(n, width, len(indices)) < 2**31 - 1 else np.int64
    X = csr_from_parts(
        np.frombuffer(indptr, np.int64).astype(idx),
        np.frombuffer(indices, np.int64).astype(idx),
        (n, width),
    )
    missing = support_mask_from_keys(unknown, (n, width)) if len(unknown) else None
    return Dataset(X, row_labels, col_labels, path.name, missing=missing)


def _delimited_width(path, header_line, row_line, col_labels, width, index_col, last_blank):
    """The table's width, its column names and whether every line ends with a separator.

    A separator at the end of every data line is no column, unless the header names one
    there (then it is a column of unknown cells). The header may have one cell more than the
    data, above the row labels (a corner), and may end with a separator too. Any other
    width is an error: a header over the wrong columns would name every column wrongly."""
    if col_labels is None:
        return (width - 1, None, True) if last_blank else (width, None, False)
    names = col_labels[:-1] if len(col_labels) > 1 and col_labels[-1] == "" else col_labels
    for trailing in (True, False) if last_blank else (False,):
        data = width - trailing
        for fit in (col_labels, names):
            if len(fit) == data:
                return data, fit, trailing
            if index_col and len(fit) == data + 1:  # a corner above the row labels
                return data, fit[1:], trailing
    data = width - last_blank
    ends = " (not counting the separator that ends every line)" if last_blank else ""
    label = " besides their labels" if index_col else ""
    _fail(
        path,
        header_line,
        f"the header names {len(names)} columns, the rows below have {data}{label}{ends} "
        f"(line {row_line}); give each column one name, or pass header=False to read the first "
        "line as data",
    )


def _has_label_column(records, header: bool) -> bool:
    """Some first cell of the first 100 data rows is a word rather than 0/1 or a number (a
    label further down shows as a row one cell too long, with its line)."""
    rows = itertools.islice(records, 1 if header else 0, 101 if header else 100)
    return any(cells[0] and not _is_number(cells[0]) for _, cells in rows)


# --- scipy .npz -----------------------------------------------------------------------------


_NPZ_PARTS = {
    "csr": ("indices", "indptr"),
    "csc": ("indices", "indptr"),
    "bsr": ("indices", "indptr"),
    "dia": ("offsets",),
    "coo": ("row", "col"),
}


def _read_npz(path: Path) -> sp.csr_array:
    def not_npz(reason):
        return ValueError(f"{path}: not a scipy sparse .npz file ({reason})")

    zf, headers = _open_npz(path, not_npz)
    with zf:
        for key in ("format", "shape", "data"):
            if key not in headers:
                raise not_npz(f"no '{key}' array")
        if (
            headers["format"][1].kind not in "SU"
            or headers["format"][0] != ()
            or headers["format"][1].itemsize > 64
        ):
            raise not_npz("the 'format' array is not a format name")
        if headers["shape"][0] != (2,) or headers["shape"][1].kind not in "iu":
            raise not_npz("the 'shape' array is not two integers")
        try:
            fmt = _npz_array(zf, "format").item()
            n, m = (int(v) for v in _npz_array(zf, "shape"))
        except Exception as exc:
            raise not_npz(f"damaged: {_reason(exc)}") from None
        fmt = fmt.decode("ascii", "replace") if isinstance(fmt, bytes) else str(fmt)
        parts = _NPZ_PARTS.get(fmt)
        if parts is None:
            raise not_npz(f"unknown sparse format {_quote(fmt)}")
        if fmt == "coo" and "coords" in headers:
            parts = ("coords",)
        for key in parts:
            if key not in headers:
                raise not_npz(f"no '{key}' array for the {fmt} format")
            if headers[key][1].kind not in "iu":
                raise not_npz(f"the '{key}' array holds {headers[key][1]}, not integers")
        kind = headers["data"][1].kind
        if kind == "c":
            raise ValueError(f"{path}: the values are complex numbers, not 0/1")
        if kind not in "biuf":
            raise not_npz(f"the 'data' array holds {headers['data'][1]}, not numbers")
        if n < 0 or m < 0:
            raise not_npz(f"negative shape ({n}, {m})")
        if n == 0 or m == 0:
            raise ValueError(f"{path}: the matrix is empty ({n}×{m})")
        stored = sum(_nbytes(headers[k]) for k in ("data", *parts))
        nnz = int(np.prod(headers["data"][0], dtype=object))
        # Loaded arrays, then rows, columns, keys and their sorted copy (int64 each).
        check_matrix_size(n, m, nnz, str(path), extra=stored + 32 * nnz)
        try:
            arrays = {k: _npz_array(zf, k) for k in ("data", *parts)}
        except Exception as exc:
            raise not_npz(f"damaged: {_reason(exc)}") from None
    for key in parts:
        arrays[key] = _signed(arrays[key])
        if arrays[key] is None:
            raise ValueError(
                f"{path}: not a valid {fmt.upper()} matrix (the '{key}' array has values "
                "beyond 64-bit integers)"
            )
    data = arrays["data"]
    if fmt == "csr" and data.ndim == 1:
        indptr, indices = arrays["indptr"], arrays["indices"]
        problem = _csr_problem(indptr, indices, n, m) or (
            None if len(data) == len(indices) else "as many values as indices"
        )
        if problem:
            raise ValueError(f"{path}: not a valid CSR matrix ({problem})")
        if (data == 1).all() and _sorted_rows(indptr, indices):  # canonical already (our own files)
            idx = np.int32 if max(n, m, len(indices)) < 2**31 - 1 else np.int64
            return csr_from_parts(indptr.astype(idx), indices.astype(idx), (n, m))
    try:
        if fmt == "coo":
            coords = (
                arrays["coords"] if "coords" in arrays else np.stack([arrays["row"], arrays["col"]])
            )
            if coords.ndim != 2 or coords.shape[0] != 2 or data.shape != (coords.shape[1],):
                raise ValueError("coordinates and values do not pair up")
            rows, cols, values = coords[0], coords[1], data
        else:
            cls = getattr(sp, f"{fmt}_array")
            parts_ = (
                (data, arrays["offsets"])
                if fmt == "dia"
                else (data, arrays["indices"], arrays["indptr"])
            )
            coo = cls(parts_, shape=(n, m)).tocoo()
            rows, cols, values = coo.row, coo.col, coo.data
    except Exception as exc:  # scipy's checks of the arrays' consistency
        raise ValueError(f"{path}: not a valid {fmt.upper()} matrix ({_reason(exc)})") from None
    outside = (rows < 0) | (rows >= n) | (cols < 0) | (cols >= m)
    if outside.any():
        e = int(np.flatnonzero(outside)[0])
        raise ValueError(
            f"{path}: entry at row {int(rows[e]) + 1}, column {int(cols[e]) + 1} is outside the "
            f"{n}×{m} matrix"
        )
    if values.dtype != np.bool_:
        bad = ~((values == 0) | (values == 1))
        if bad.any():
            e = int(np.flatnonzero(bad)[0])
            raise ValueError(
                _not_binary(
                    str(path), values[e], int(rows[e]) + 1, int(cols[e]) + 1, int(bad.sum())
                )
            )
    keep = values != 0
    return _support_from_coords(path, rows[keep], cols[keep], (n, m))


def npz_shape(path) -> tuple[int, int]:
    """The shape of the sparse matrix in an ``.npz`` file, from its small ``shape`` array
    alone (the rest is not read): what :func:`banmf.distributed.read_blocks` needs to lay out
    row blocks before any worker reads them.

    Parameters
    ----------
    path : str or Path
        A sparse matrix saved as ``.npz`` (:func:`write_matrix`, ``scipy.sparse.save_npz``).

    Returns
    -------
    tuple of int
        ``(n, m)``.

    Raises
    ------
    ValueError
        The file is not a scipy sparse ``.npz`` archive, or its shape is not two
        nonnegative integers.
    """
    path = Path(path)

    def not_npz(reason):
        return ValueError(f"{path}: not a scipy sparse .npz file ({reason})")

    zf, headers = _open_npz(path, not_npz)
    with zf:
        if "shape" not in headers:
            raise not_npz("no 'shape' array")
        try:
            shape = _npz_array(zf, "shape")
        except Exception as exc:  # zipfile, zlib and numpy raise many kinds
            raise not_npz(f"damaged: {_reason(exc)}") from None
    if shape.shape != (2,) or shape.dtype.kind not in "iu" or (shape < 0).any():
        raise not_npz("the 'shape' array is not two nonnegative integers")
    return int(shape[0]), int(shape[1])


def _npz_missing(path: Path, shape: tuple[int, int]) -> sp.csr_array | None:
    """The mask of unknown cells that :func:`write_matrix` stores in an .npz beside the matrix
    (arrays ``missing_indptr`` and ``missing_indices``, which scipy's reader ignores), or
    None."""

    def damaged(reason):
        return ValueError(f"{path}: damaged missing-cell mask ({reason})")

    zf, headers = _open_npz(path, damaged)
    with zf:
        keys = {"missing_indptr", "missing_indices"}
        if not keys & set(headers):
            return None
        if not keys <= set(headers) or any(headers[k][1].kind not in "iu" for k in keys):
            raise damaged("it needs integer missing_indptr and missing_indices arrays")
        try:
            indptr = _signed(_npz_array(zf, "missing_indptr"))
            indices = _signed(_npz_array(zf, "missing_indices"))
        except Exception as exc:
            raise damaged(_reason(exc)) from None
    mask = _stored_pattern(indptr, indices, shape)
    if mask is None:
        raise damaged("not a sorted CSR pattern of the matrix's shape")
    return mask


def matrix_stats(X: sp.csr_array) -> dict:
    """What ``banmf info`` says of a support mask: empty rows and columns, duplicate rows, the
    largest row and column counts.

    Time and memory O(nnz log nnz) beyond X itself: nothing of the shape's size (a header of
    10^9 × 10^9 with two entries answers at once).

    Parameters
    ----------
    X : csr_array of shape (n, m), canonical support mask

    Returns
    -------
    dict
        ``empty_rows``, ``empty_columns``, ``duplicate_rows`` (rows equal to an earlier row,
        empty ones included), ``max_row_nnz``, ``max_column_nnz``.
    """
    n, m = X.shape
    # The row of each entry (a binary search in the row pointers), not a count per row.
    # (in the pointers' own dtype: another would make searchsorted copy them)
    rows = np.searchsorted(X.indptr, np.arange(X.nnz, dtype=X.indptr.dtype), side="right") - 1
    starts = np.flatnonzero(np.concatenate(([True], rows[1:] != rows[:-1]))) if X.nnz else rows
    row_nnz = np.diff(np.append(starts, X.nnz))
    cols, col_nnz = np.unique(X.indices, return_counts=True)
    seen, duplicates = set(), 0
    for start, count in zip(starts.tolist(), row_nnz.tolist()):  # the nonempty rows only
        key = X.indices[start : start + count].tobytes()
        duplicates += key in seen
        seen.add(key)
    empty_rows = n - len(starts)
    return {
        "empty_rows": int(empty_rows),
        "empty_columns": int(m - len(cols)),
        "duplicate_rows": duplicates + max(empty_rows - 1, 0),
        "max_row_nnz": int(row_nnz.max()) if X.nnz else 0,
        "max_column_nnz": int(col_nnz.max()) if X.nnz else 0,
    }


# --- writing --------------------------------------------------------------------------------


@contextlib.contextmanager
def _open_text_output(tmp: Path, path: Path):
    """Text stream to ``tmp``, gzip-compressed when ``path`` ends in .gz (the gzip header names
    ``path``, not the temporary file)."""
    with open(tmp, "wb") as raw:
        if path.suffix.lower() == ".gz":
            with (
                gzip.GzipFile(filename=path.name, mode="wb", fileobj=raw) as gz,
                _io.TextIOWrapper(gz, encoding="utf-8", newline="\n") as fh,
            ):
                yield fh
        else:
            with _io.TextIOWrapper(raw, encoding="utf-8", newline="\n") as fh:
                yield fh


def write_matrix(
    X, path, *, format: str | None = None, row_labels=None, col_labels=None, missing=None
) -> None:
    """Write a 0/1 matrix atomically; reading it back (:func:`read_dataset`) gives the same
    shape, entries and labels.

    Parameters
    ----------
    X : array-like or sparse of shape (n, m), 0/1
    path : str or Path
        Format from the extension: .mtx (``.gz`` compresses), .npz, .csv, .tsv, .dat, .h5ad.
        A ``.dat`` file cannot tell empty trailing columns (or an all-zero matrix's width): its
        shape goes to the sidecar ``PATH.json`` (e.g. ``a.dat.json``, key ``shape``). The
        sidecar belongs to this file alone: the keys of an earlier one that do not describe the
        content (source, license, ...) are kept; an old-style ``NAME.json`` shared by several
        files of that name is never rewritten.
    format : {"mtx", "npz", "csv", "tsv", "dat", "h5ad"} or None
        Overrides the extension.
    row_labels, col_labels : sequence of str, optional
        Names of the rows and columns: a name column and a header row in .csv and .tsv files,
        obs and var names in .h5ad files (AnnData; needs ``anndata``), else the keys
        ``row_labels`` and ``col_labels`` of the sidecar ``PATH.json``.
    missing : array-like or sparse of shape (n, m), optional
        Cells whose value is unknown: ``?`` in .csv and .tsv files, arrays beside the matrix in
        .npz, the layer ``missing`` in .h5ad, else a mask ``PATH.missing.mtx`` that the key
        ``missing`` of ``PATH.json`` names (:func:`read_dataset` reads it back as its
        ``missing``).
    """
    path = Path(path)
    fmt = format_of(path, format)
    X = check_binary_matrix(X)
    n, m = X.shape
    if missing is not None:
        missing = check_binary_matrix(missing, "missing")
        if missing.shape != (n, m):
            raise ValueError(f"missing has shape {missing.shape} but X has shape {(n, m)}")
        X = _observed_ones(X, missing)
        if missing.nnz == 0:
            missing = None
    labels = {}
    for key, value, size, what in (
        ("row_labels", row_labels, n, "rows"),
        ("col_labels", col_labels, m, "columns"),
    ):
        if value is not None:
            value = [str(v) for v in value]
            if len(value) != size:
                raise ValueError(f"{len(value)} {key.replace('_', ' ')} for {size} {what}")
            labels[key] = value
    if fmt == "npz" and path.suffix.lower() == ".gz":
        raise ValueError(f"{path}: .npz files are compressed already; drop the .gz")
    delimited = fmt in ("csv", "tsv")
    side, meta, mask_path = None, None, None
    if fmt in _SIDECAR_FORMATS:
        side = _sidecar_path(path)
        # Read (and check) an existing sidecar first. Its own keys (source, license, ...) carry
        # over; what described the earlier content does not. An old-style shared one that this
        # file cannot claim is left alone, and this file gets its own so that it never claims
        # it later.
        found = _sidecar(path, quiet=True)
        legacy = _legacy_sidecar_path(path).exists()
        if fmt == "dat" or labels or missing is not None or found.path or legacy:
            meta = {k: v for k, v in found.meta.items() if k not in _CONTENT_KEYS}
            meta.update(labels, shape=[n, m])
            if missing is not None and fmt != "npz":  # an .npz holds its mask inside
                mask_path = path.with_name(path.name + ".missing.mtx")
                meta["missing"] = mask_path.name
        else:
            side = None
    if fmt == "h5ad":
        _anndata()  # before anything is written
    if mask_path is not None:
        write_matrix(missing, mask_path)
    with atomic_path(path) as tmp:
        if fmt == "npz":
            with open(tmp, "wb") as fh:
                arrays = {}
                if missing is not None:
                    arrays = {"missing_indptr": missing.indptr, "missing_indices": missing.indices}
                _save_npz(fh, X, arrays)
        elif fmt == "h5ad":
            _write_h5ad(X, tmp, labels, missing)
        else:
            with _open_text_output(tmp, path) as fh:
                if delimited and (labels or missing is not None):
                    _write_labelled(fh, X, "," if fmt == "csv" else "\t", labels, missing)
                else:
                    _write_text(fh, X, fmt)
    if side is not None:
        with atomic_path(side) as tmp:
            tmp.write_text(json.dumps(meta, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _save_npz(fh, X: sp.csr_array, extra: dict) -> None:
    """X in the layout of ``scipy.sparse.save_npz`` (a CSR matrix, compressed), with the
    ``extra`` arrays beside it: scipy's reader ignores them."""
    np.savez_compressed(
        fh,
        indices=X.indices,
        indptr=X.indptr,
        format=b"csr",
        shape=X.shape,
        data=np.ones(X.nnz, dtype=bool),
        **extra,
    )


def _write_labelled(fh, X: sp.csr_array, sep: str, labels: dict, missing=None) -> None:
    """A delimited 0/1 table with a header row (column names) and/or a name column, and ``?``
    at the unknown cells."""
    writer = csv.writer(fh, delimiter=sep, lineterminator="\n")
    rows, cols = labels.get("row_labels"), labels.get("col_labels")
    if cols is not None:
        writer.writerow(([""] if rows is not None else []) + cols)
    line = np.zeros(X.shape[1], dtype=object)
    for i in range(X.shape[0]):
        idx = X.indices[X.indptr[i] : X.indptr[i + 1]]
        unknown = (
            idx[:0]
            if missing is None
            else missing.indices[missing.indptr[i] : missing.indptr[i + 1]]
        )
        line[idx] = 1
        line[unknown] = "?"
        writer.writerow(([rows[i]] if rows is not None else []) + line.tolist())
        line[idx] = 0
        line[unknown] = 0


def _write_text(fh, X: sp.csr_array, fmt: str) -> None:
    n, m = X.shape
    if fmt == "mtx":
        fh.write("%%MatrixMarket matrix coordinate pattern general\n")
        fh.write(f"{n} {m} {X.nnz}\n")
        rows = np.repeat(np.arange(1, n + 1), np.diff(X.indptr))
        np.savetxt(fh, np.column_stack([rows, X.indices + 1]), fmt="%d")
    elif fmt == "dat":
        for i in range(n):
            fh.write(" ".join(map(str, X.indices[X.indptr[i] : X.indptr[i + 1]].tolist())) + "\n")
    else:
        # One row at a time (the text is n×m, the memory need not be): "0,0,...,0\n" with the
        # ones set in place.
        line = np.frombuffer(
            (("0" + ("," if fmt == "csv" else "\t")) * m)[:-1].encode() + b"\n", np.uint8
        ).copy()
        for i in range(n):
            cols = 2 * X.indices[X.indptr[i] : X.indptr[i + 1]].astype(np.intp)
            line[cols] = ord("1")
            fh.write(line.tobytes().decode("ascii"))
            line[cols] = ord("0")


# --- factorizations -------------------------------------------------------------------------

#: Formats of :func:`export_factors`.
EXPORT_FORMATS = ("csv", "mtx", "npz")


def prefix_path(prefix, tail: str) -> Path:
    """``PREFIX`` + ``tail`` as a path (the prefix's folder, its name extended)."""
    prefix = Path(prefix)
    return prefix.with_name(prefix.name + tail)


def export_paths(prefix, format: str) -> list[Path]:
    """The files :func:`export_factors` writes for ``prefix`` in ``format``."""
    if format == "npz":
        return [prefix_path(prefix, "_factors.npz")]
    tails = ("_W", "_H")
    paths = [prefix_path(prefix, f"{t}.{format}") for t in tails]
    return paths + ([_sidecar_path(p) for p in paths] if format == "mtx" else [])


def export_factors(result, prefix, format: str = "csv") -> list[Path]:
    """Write a factorization's W and H, with names, for other tools (R, spreadsheets, numpy).

    Rows of W are named by the data's row labels and its columns ``factor_0`` ...; rows of H
    are the factors and its columns the data's column labels (``row_i`` / ``col_j`` when the
    data had none). Every file is written atomically.

    Parameters
    ----------
    result : Factorization
    prefix : str or Path
        Path and stem of the files.
    format : {"csv", "mtx", "npz"}, default "csv"
        "csv": ``PREFIX_W.csv`` and ``PREFIX_H.csv`` (0/1 cells, a header row and a name
        column). "mtx": ``PREFIX_W.mtx``, ``PREFIX_H.mtx`` (pattern coordinates) and the names
        in ``PREFIX_W.mtx.json``, ``PREFIX_H.mtx.json`` beside them (``row_labels``, ``col_labels``),
        as :func:`read_dataset` reads them. "npz": ``PREFIX_factors.npz``, a numpy archive of
        bool ``W``, ``H`` and str ``row_labels``, ``col_labels`` (``numpy.load``).

    Returns
    -------
    list of Path
        The files written.
    """
    if format not in EXPORT_FORMATS:
        raise ValueError(f"format must be one of {EXPORT_FORMATS}, got {format!r}")
    W, H = np.asarray(result.W, dtype=bool), np.asarray(result.H, dtype=bool)
    n, k = W.shape
    m = H.shape[1]
    rows = (
        [str(v) for v in result.row_labels] if result.row_labels else [f"row_{i}" for i in range(n)]
    )
    cols = (
        [str(v) for v in result.col_labels] if result.col_labels else [f"col_{j}" for j in range(m)]
    )
    factors = [f"factor_{l}" for l in range(k)]
    paths = export_paths(prefix, format)
    if format == "npz":
        with atomic_path(paths[0]) as tmp:
            with open(tmp, "wb") as fh:
                np.savez_compressed(
                    fh,
                    W=W,
                    H=H,
                    row_labels=np.array(rows, dtype=str),
                    col_labels=np.array(cols, dtype=str),
                )
        return paths
    for side, M, (names_r, names_c) in (("W", W, (rows, factors)), ("H", H, (factors, cols))):
        path = prefix_path(prefix, f"_{side}.{format}")
        write_matrix(M, path, format=format, row_labels=names_r, col_labels=names_c)
    return paths


def save_result(result, path, *, X=None, extra: dict | None = None) -> None:
    """Save a factorization atomically, as one compressed ``.npz`` that :func:`load_result`
    (:meth:`banmf.Factorization.load`) reads back: everything but the estimator, and of
    ``info`` what is small enough (arrays up to 10,000 values).

    Parameters
    ----------
    result : Factorization or fitted estimator
        An estimator is saved as :meth:`Factorization.from_estimator` gives it.
    path : str or Path
    X : array-like or sparse, optional
        The factorized matrix, if ``result`` does not hold it already; its support is saved
        when it has at most 2,000,000 nonzeros.
    extra : dict, optional
        More provenance for :attr:`Factorization.meta` (JSON-able), e.g. the input file and
        its checksum.
    """
    if not isinstance(result, Factorization):
        result = Factorization.from_estimator(result)
    changes = {}
    if X is not None:
        changes["X"] = check_binary_matrix(X)
    if extra:
        changes["meta"] = {**result.meta, **extra}
    if changes:
        result = result.replace(**changes)
    result.save(path)


def load_result(path) -> Factorization:
    """Read a factorization written by :func:`save_result` (:meth:`banmf.Factorization.load`).

    Returns
    -------
    Factorization

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    ValueError
        In one line, ``"<path>: not a banmf result file (<reason>)"`` for anything else (another
        kind of file, a damaged or truncated one, inconsistent metadata), or a result written by
        a newer banmf.
    """
    return Factorization.load(path)
