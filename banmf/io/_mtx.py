"""Matrix Market files (``.mtx``, ``.mm``; ``.gz`` too): coordinate pattern/integer/real or
dense array, general or symmetric, read with numpy's C parser; written as coordinate pattern
general. Labels and unknown cells live in the sidecar."""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..data.dataset import Dataset
from ..data.validation import format_value
from ..exceptions import InputError
from ..runtime.memory import check_matrix_size, check_memory
from ._common import fail, not_binary, quote, support_from_coords
from ._formats import Format
from ._sidecars import with_sidecar, write_with_sidecar
from ._textfiles import PARSE_BYTES_PER_CHAR, open_text_output, read_text, text_lines

# Tokens as numpy's text parser splits them, and the numbers it reads (to point at the culprit
# when it stops).
_TOKEN = re.compile(r"[^ \t\n\r\v\f]+")
_NUMBER = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|inf(?:inity)?|nan(?:\([^)]*\))?)",
    re.IGNORECASE,
)
# Indices are parsed as float64, exact up to 2**53.
_MAX_MTX_DIM = 2**53


@dataclass(frozen=True)
class _Header:
    """What the banner and the size line of a Matrix Market file say.

    Attributes
    ----------
    layout : {"coordinate", "array"}
    field : {"pattern", "integer", "real"}
    symmetric : bool
    n, m : int
        The shape.
    count : int
        Entries (coordinate) or values (array, the lower triangle's when symmetric) the body
        holds.
    per : int
        Numbers per entry: 2 or 3 (coordinate), 1 (array).
    size_line : int
        The size line's number in the file.
    body_start : int
        Offset in the text of the body (the line after the size line).
    """

    layout: str
    field: str
    symmetric: bool
    n: int
    m: int
    count: int
    per: int
    size_line: int
    body_start: int


def _read_support(path: Path) -> sp.csr_array:
    """The support of the Matrix Market file at ``path`` as a CSR mask (symmetric files
    mirrored); InputError naming the line at the first thing wrong."""
    text = read_text(path)
    head = _read_header(path, text)
    body = text[head.body_start :]
    del text
    values = _read_numbers(path, body, head)
    if head.layout == "array":
        return _array_support(path, body, head, values)
    r, c = _coordinate_cells(path, body, head, values)
    del values  # before the mirror and the CSR: the cells' int64 copies are all that is left
    if head.symmetric:
        r, c = _mirrored(r, c)
    return support_from_coords(path, r, c, (head.n, head.m))


def _read_header(path: Path, text: str) -> _Header:
    """The banner (line 1) and the size line (the first after it that is neither blank nor a
    comment) of the file's ``text``, checked."""
    lines = text_lines(text)
    layout, field_, symmetry = _read_banner(path, next(lines, None))
    for size_line, offset, line in lines:
        if line.strip() and not line.startswith("%"):
            break
    else:
        fail(path, None, "no size line")
    want = 3 if layout == "coordinate" else 2
    size = line.split()
    if len(size) != want or not all(s.isascii() and s.isdigit() for s in size):
        fail(
            path,
            size_line,
            f"bad size line {quote(line.strip())} (expected {want} nonnegative integers)",
        )
    if any(len(s) > 30 for s in size):
        fail(path, size_line, f"the size {quote(max(size, key=len), 24)} is too large")
    dims = [int(s) for s in size]
    n, m = dims[0], dims[1]
    if n == 0 or m == 0:
        fail(path, size_line, f"the matrix is empty ({n}×{m})")
    if max(n, m) > _MAX_MTX_DIM:
        fail(path, size_line, f"a {n}×{m} matrix is too large (at most 2^53 rows or columns)")
    symmetric = symmetry == "symmetric"
    if symmetric and n != m:
        fail(path, size_line, f"a symmetric matrix must be square, the size line says {n}×{m}")
    per = (2 if field_ == "pattern" else 3) if layout == "coordinate" else 1
    # A symmetric dense array holds the lower triangle only, column by column.
    count = dims[2] if layout == "coordinate" else n * (n + 1) // 2 if symmetric else n * m
    start = offset + len(line) + 1
    return _Header(layout, field_, symmetric, n, m, count, per, size_line, start)


def _read_banner(path: Path, first) -> tuple[str, str, str]:
    """``(layout, field, symmetry)``, lower case, from the first line (``text_lines``'s
    triple, or None for an empty file), checked: the ones a 0/1 matrix can be stored in."""
    header = first[2].split() if first else []
    if len(header) != 5 or header[0].lower() != "%%matrixmarket" or header[1].lower() != "matrix":
        fail(path, 1, "not a Matrix Market file (expected '%%MatrixMarket matrix coordinate ...')")
    layout, field_, symmetry = (h.lower() for h in header[2:])
    if layout not in ("coordinate", "array"):
        fail(path, 1, f"unknown layout {quote(header[2])} (coordinate or array)")
    if field_ not in ("pattern", "integer", "real"):
        fail(
            path,
            1,
            f"field {quote(header[3])} is not supported for 0/1 data (pattern, integer or real)",
        )
    if symmetry not in ("general", "symmetric"):
        fail(path, 1, f"symmetry {quote(header[4])} is not supported (general or symmetric)")
    if layout == "array" and field_ == "pattern":
        fail(path, 1, "a dense array cannot have the field 'pattern' (integer or real)")
    return layout, field_, symmetry


def _read_numbers(path: Path, body: str, head: _Header) -> np.ndarray:
    """The body's numbers as float64, as many as the header declares (else the InputError of
    :func:`_locate_mtx_problem`, at the line where things go wrong)."""
    # Comment lines between entries are not standard, but some writers leave them.
    numbers = (
        "\n".join("" if ln.startswith("%") else ln for ln in body.split("\n"))
        if "%" in body
        else body
    )
    check_memory(PARSE_BYTES_PER_CHAR * len(numbers), f"{path}: parsing it")
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
    if values is None or values.size != head.per * head.count:
        _locate_mtx_problem(path, body, head.size_line, head.per, head.count, head.layout)
    return values


def _array_support(path: Path, body: str, head: _Header, values: np.ndarray) -> sp.csr_array:
    """The support of a dense array's ``values`` (column-major; the lower triangle's when
    symmetric, mirrored), which must all be 0 or 1."""
    n, m, symmetric = head.n, head.m, head.symmetric
    # Build temporaries: two flags and an index per value (and the triangle's positions),
    # then three index arrays per nonzero.
    check_matrix_size(
        n,
        m,
        n * m,
        f"{path}, line {head.size_line}",
        extra=head.count * (10 + (16 if symmetric else 0)) + 24 * n * m,
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
        raise InputError(
            not_binary(
                f"{path}, line {_token_line(body, head.size_line, e)}",
                values[e],
                int(row) + 1,
                int(col) + 1,
                int(bad.sum()),
            )
        )
    rows, cols = position(np.flatnonzero(values))
    if symmetric:
        rows, cols = _mirrored(rows, cols)
    return support_from_coords(path, rows, cols, (n, m))


def _coordinate_cells(
    path: Path, body: str, head: _Header, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The 0-based rows and columns (int64) of the ones among a coordinate body's entries
    (``values``, ``head.per`` numbers each), checked: whole indices within the shape, values
    0 or 1. A symmetric file's mirror is not added."""
    per = head.per
    entries_ = values.reshape(head.count, per)
    rows, cols = entries_[:, 0], entries_[:, 1]
    _check_indices(path, body, head, rows, cols)
    total = head.count * (2 if head.symmetric else 1)
    # Build temporaries: rows, columns, keys and their sorted copy, int64 each.
    check_matrix_size(head.n, head.m, total, f"{path}, line {head.size_line}", extra=total * 32)
    if per == 3:
        vals = entries_[:, 2]
        bad = ~((vals == 0) | (vals == 1))
        if bad.any():
            e = int(np.flatnonzero(bad)[0])
            raise InputError(
                not_binary(
                    f"{path}, line {_token_line(body, head.size_line, e * per)}",
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
    r -= 1
    c -= 1
    return r, c


def _check_indices(path: Path, body: str, head: _Header, rows, cols) -> None:
    """Raise the InputError about the first entry whose indices (1-based, float64) are not
    whole numbers, or lie outside the declared shape."""
    n, m = head.n, head.m
    bad = (rows != np.floor(rows)) | (cols != np.floor(cols))
    if bad.any():
        e = int(np.flatnonzero(bad)[0])
        fail(
            path,
            _token_line(body, head.size_line, e * head.per),
            f"index ({format_value(rows[e])}, {format_value(cols[e])}) is not a pair of whole numbers",
        )
    bad = (rows < 1) | (rows > n) | (cols < 1) | (cols > m)
    if bad.any():
        e = int(np.flatnonzero(bad)[0])
        fail(
            path,
            _token_line(body, head.size_line, e * head.per),
            f"index ({format_value(rows[e])}, {format_value(cols[e])}) outside the declared {n}×{m} (1-based)",
        )


def _mirrored(rows: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A symmetric matrix's cells from its lower triangle's: each off-diagonal cell twice."""
    off = rows != cols
    return np.concatenate([rows, cols[off]]), np.concatenate([cols, rows[off]])


def _token_line(body: str, size_line: int, token: int) -> int:
    """File line of the ``token``-th number after the size line (comments skipped)."""
    seen = 0
    for line_no, _, line in text_lines(body, line_no=size_line + 1):
        if line.startswith("%"):
            continue
        seen += len(_TOKEN.findall(line))
        if seen > token:
            return line_no
    return size_line


def _locate_mtx_problem(path, body, size_line, per, count, layout):
    seen = 0
    for line_no, _, line in text_lines(body, line_no=size_line + 1):
        if line.startswith("%"):
            continue
        tokens = _TOKEN.findall(line)
        if not tokens:
            continue
        if layout == "coordinate" and len(tokens) != per:
            fail(
                path,
                line_no,
                f"expected {per} numbers per entry, found {len(tokens)}: {quote(line.strip())}",
            )
        for tok in tokens:
            if not _NUMBER.fullmatch(tok):
                fail(path, line_no, f"{quote(tok)} is not a number")
        seen += len(tokens) // per if layout == "coordinate" else len(tokens)
    what = "entries" if layout == "coordinate" else "values"
    fail(path, None, f"declares {count} {what} but has {seen}")


def read_mtx(path: Path) -> Dataset:
    """The registry's reader of Matrix Market files: the support, with the sidecar's labels."""
    return with_sidecar(path, _read_support(path))


def write_mtx(X: sp.csr_array, path: Path, labels: dict, missing) -> None:
    """The registry's writer: coordinate pattern general, labels and unknown cells in the sidecar."""

    def write(tmp: Path) -> None:
        n, m = X.shape
        with open_text_output(tmp, path) as fh:
            fh.write("%%MatrixMarket matrix coordinate pattern general\n")
            fh.write(f"{n} {m} {X.nnz}\n")
            rows = np.repeat(np.arange(1, n + 1), np.diff(X.indptr))
            np.savetxt(fh, np.column_stack([rows, X.indices + 1]), fmt="%d")

    write_with_sidecar(X, path, labels, missing, write)


MTX = Format(
    name="mtx",
    suffixes=(".mtx", ".mm"),
    read=read_mtx,
    write=write_mtx,
    labels="sidecar",
    missing="a mask file named by the sidecar",
    sidecar=True,
    gzip=True,
    export=True,
)
