"""Dense 0/1 text tables (``.csv``, ``.tsv``; ``.gz`` too): the separator, a header row and a
column of row labels detected; ``?``, ``NA`` and blank cells are unknown."""

from __future__ import annotations

import csv
import io as _io
import itertools
from array import array
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..data.dataset import Dataset
from ..data.masks import csr_from_parts, support_mask_from_keys
from ..exceptions import InputError
from ..runtime.files import atomic_path
from ..runtime.files import reason_of as _reason
from ..runtime.memory import check_matrix_size, check_memory
from ._common import fail, not_binary, quote
from ._formats import Format
from ._textfiles import PARSE_BYTES_PER_CHAR, open_text_output, read_text

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
            raise InputError(
                f"{path}: expected {kind} values, but the first lines have no {_SEPARATORS[expected]}; "
                f"they have {_SEPARATORS[splitting[0]]}, in different numbers per line"
            )
    return expected


def _read_delimited(
    path: Path, delimiter: str, header: bool | None = None, index_col: bool | None = None
) -> Dataset:
    text = read_text(path)
    delimiter = _sniff_separator(path, text, delimiter)
    check_memory(PARSE_BYTES_PER_CHAR * len(text), f"{path}: parsing it")

    def records():
        """(line number, stripped cells) of the non-blank lines."""
        reader = csv.reader(_io.StringIO(text), delimiter=delimiter)
        try:
            for cells in reader:
                if any(c.strip() for c in cells):
                    yield reader.line_num, [c.strip() for c in cells]
        except csv.Error as exc:
            fail(path, reader.line_num, f"cannot split the line into cells ({_reason(exc)})")

    head = list(itertools.islice(records(), 2))
    if not head:
        raise InputError(f"{path}: no data")
    if header is None:
        header = _looks_like_header(head[0][1], head[1][1] if len(head) > 1 else None)
    rows = records()
    header_line, col_labels = next(rows) if header else (None, None)
    first_row = next(rows, None)
    if first_row is None:
        raise InputError(f"{path}: a header but no data rows")
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
        raise InputError(f"{path}: no columns besides the row labels")
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
            fail(
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
        shown = cell if _is_number(cell) and len(cell) <= 24 else quote(cell, 24)
        raise InputError(not_binary(f"{path}, line {line_no}", shown, row, col, bad_count))
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
    fail(
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


def read_csv(path: Path, header: bool | None = None, index_col: bool | None = None) -> Dataset:
    """The registry's reader of .csv files (another separator is detected)."""
    return _read_delimited(path, ",", header, index_col)


def read_tsv(path: Path, header: bool | None = None, index_col: bool | None = None) -> Dataset:
    """The registry's reader of .tsv files (another separator is detected)."""
    return _read_delimited(path, "\t", header, index_col)


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


def _write_plain(fh, X: sp.csr_array, sep: str) -> None:
    # One row at a time (the text is n×m, the memory need not be): "0,0,...,0\n" with the
    # ones set in place.
    n, m = X.shape
    line = np.frombuffer(((("0" + sep) * m)[:-1]).encode() + b"\n", np.uint8).copy()
    for i in range(n):
        cols = 2 * X.indices[X.indptr[i] : X.indptr[i + 1]].astype(np.intp)
        line[cols] = ord("1")
        fh.write(line.tobytes().decode("ascii"))
        line[cols] = ord("0")


def _write_delimited(X: sp.csr_array, path: Path, sep: str, labels: dict, missing) -> None:
    """The registry's writers: 0/1 cells, with a header row, a name column and ``?`` cells when
    there are labels or unknown cells."""
    with atomic_path(path) as tmp, open_text_output(tmp, path) as fh:
        if labels or missing is not None:
            _write_labelled(fh, X, sep, labels, missing)
        else:
            _write_plain(fh, X, sep)


def write_csv(X: sp.csr_array, path: Path, labels: dict, missing) -> None:
    _write_delimited(X, path, ",", labels, missing)


def write_tsv(X: sp.csr_array, path: Path, labels: dict, missing) -> None:
    _write_delimited(X, path, "\t", labels, missing)


# What the two separators share.
_TABLE = {
    "options": ("header", "index_col"),
    "gzip": True,
    "labels": "header row, name column",
    "missing": "? cells (NA, N/A, NaN, blank read too)",
}
CSV = Format(name="csv", suffixes=(".csv",), read=read_csv, write=write_csv, export=True, **_TABLE)
TSV = Format(name="tsv", suffixes=(".tsv",), read=read_tsv, write=write_tsv, **_TABLE)
