"""FIMI transaction files (``.dat``, ``.txt``; ``.gz`` too): one line per row, the column ids of
its ones. The format has no shape: the sidecar keeps it, with the labels and unknown cells;
item names may also come from SPMF's ``@ITEM`` lines or a ``NAME.names`` file."""

from __future__ import annotations

import itertools
import re
from array import array
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..data.dataset import Dataset
from ..data.masks import csr_from_parts
from ..exceptions import InputError
from ..runtime.memory import check_matrix_size, check_memory
from ._common import fail, quote, warn_duplicates
from ._formats import Format
from ._sidecars import (
    Sidecar,
    find_sidecar,
    legacy_stem,
    sidecar_shape,
    with_sidecar,
    write_with_sidecar,
)
from ._textfiles import PARSE_BYTES_PER_CHAR, open_text_output, read_text, text_lines

_ITEM_ID = re.compile(r"-?[0-9]+")
_PLAIN_IDS = re.compile(r"[0-9 \t\v\f]*")  # a line of ASCII item ids


def _item_id(path, line_no: int, tok: str, first: int) -> int:
    """The 0-based column of an item id token, or a one-line error naming it."""
    if not _ITEM_ID.fullmatch(tok):
        fail(path, line_no, f"item id {quote(tok)} is not an integer")
    if len(tok) > 19 or int(tok) - first >= 2**63 - 2:  # beyond int64
        fail(path, line_no, f"item id {quote(tok, 24)} is too large")
    v = int(tok) - first
    if v < 0:
        fail(path, line_no, f"item id {tok} is below the first id ({first})")
    return v


def read_dat(path: Path, one_based: bool = False, n_cols: int | None = None) -> Dataset:
    """The registry's reader of transaction files: the shape from the sidecar (else the lines
    and the largest id + 1; ``n_cols`` overrides the width), item names from the sidecar, SPMF's
    ``@ITEM`` lines or ``NAME.names``."""
    text = read_text(path)
    sidecar = find_sidecar(path)
    meta, side = sidecar.meta, sidecar.path
    shape = sidecar_shape(sidecar)
    check_memory(PARSE_BYTES_PER_CHAR * len(text), f"{path}: parsing it")
    first = 1 if one_based else 0
    indptr, cols = array("q", [0]), array("q")
    duplicates, top = 0, 0
    spmf_names: dict[int, str] = {}
    for line_no, _, line in text_lines(text):
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
        warn_duplicates(path, duplicates)
    lines = len(indptr) - 1
    names_file = path.with_name(legacy_stem(path.name) + ".names")  # FIMI's item names
    file_names = None
    if meta.get("col_labels") is None and names_file.exists():
        file_names = [v.strip() for v in read_text(names_file).split("\n")]
        while file_names and not file_names[-1]:
            file_names.pop()
        if shape is None and n_cols is None:  # items that never occur still have names
            top = max(top, len(file_names))
    if shape is not None and lines > shape[0]:
        raise InputError(f"{side} says {shape[0]} rows, but {path} has {lines} lines")
    n = shape[0] if shape is not None else lines  # editors may drop trailing empty lines
    if n == 0:
        raise InputError(f"{path}: no rows")
    m = int(n_cols if n_cols is not None else shape[1] if shape is not None else top)
    if m < top:
        last = top - 1 + first
        if n_cols is not None:
            raise InputError(f"{path}: item id {last} does not fit n_cols={n_cols}")
        raise InputError(f"{side} says {shape[1]} columns, but {path} has the item id {last}")
    if m == 0:
        raise InputError(f"{path}: no items on any line; pass n_cols to read an all-zero matrix")
    check_matrix_size(n, m, len(cols), str(path))
    if file_names is not None:
        if len(file_names) != m:
            raise InputError(f"{names_file}: {len(file_names)} item names for {m} columns")
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
    return with_sidecar(path, X, Sidecar(side, meta, sidecar.legacy))


def write_dat(X: sp.csr_array, path: Path, labels: dict, missing) -> None:
    """The registry's writer: the 0-based ids of each row's ones; the shape, labels and unknown
    cells in the sidecar."""

    def write(tmp: Path) -> None:
        with open_text_output(tmp, path) as fh:
            for i in range(X.shape[0]):
                fh.write(
                    " ".join(map(str, X.indices[X.indptr[i] : X.indptr[i + 1]].tolist())) + "\n"
                )

    # The file cannot tell empty trailing columns (or an all-zero matrix's width).
    write_with_sidecar(X, path, labels, missing, write, shape_needed=True)


DAT = Format(
    name="dat",
    suffixes=(".dat", ".txt"),
    read=read_dat,
    write=write_dat,
    options=("one_based", "n_cols"),
    labels="sidecar (item names also: SPMF's @ITEM lines, NAME.names)",
    missing="a mask file named by the sidecar",
    sidecar=True,
    gzip=True,
)
