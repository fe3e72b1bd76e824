"""The public readers and writer of 0/1 matrix files: the checks every format shares, then the
format's own reader or writer, looked up in the registry (:mod:`banmf.io._formats`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..data.dataset import Dataset
from ..data.validation import entries
from ..exceptions import InputError, InvalidParameterError
from ..runtime.memory import ENV_VAR
from ._common import warn_data
from ._formats import REGISTRY, format_of, reading_format


def read_matrix(path, *, format: str | None = None, **options) -> sp.csr_array:
    """Read a 0/1 matrix file into a canonical CSR support mask.

    Parameters
    ----------
    path : str or Path
    format : {"mtx", "npz", "csv", "tsv", "dat", "h5ad"} or None
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
    InputError
        An extension that names no format, an unreadable or malformed file (with the line),
        values other than 0/1 (a ``ValueError``).
    ValueError
        A matrix larger than the memory available (see ``BANMF_MEMORY_LIMIT``).
    InvalidParameterError
        An unknown ``format``; an option that does not apply to the format, or of the wrong
        type (a ``ValueError`` and a ``TypeError``).

    Warns
    -----
    DataWarning
        Duplicate entries (counted once); cells whose value the file leaves unknown (read as 0
        here: :func:`read_dataset` returns them as its ``missing``).
    """
    data = read_dataset(path, format=format, **options)
    if data.missing is not None and data.missing.nnz:
        warn_data(
            f"{path}: {entries(data.missing.nnz)} of unknown value, read as 0; "
            "read_dataset(path).missing holds them (fit with missing=)"
        )
    return data.X


def read_dataset(path, *, format: str | None = None, **options) -> Dataset:
    """Like :func:`read_matrix`, with the labels the file (or its ``.json`` sidecar) carries."""
    path = Path(path)
    fmt, guess = reading_format(path, format)
    extra = set(options) - set(REGISTRY[fmt].options)
    if extra:
        raise InvalidParameterError(f"options {sorted(extra)} do not apply to {fmt} files")
    for key in ("header", "index_col", "one_based"):
        if (
            key in options
            and options[key] is not None
            and not isinstance(options[key], (bool, np.bool_))
        ):
            raise InvalidParameterError(f"{key} must be True, False or None, got {options[key]!r}")
    n_cols = options.get("n_cols")
    if n_cols is not None and (
        isinstance(n_cols, (bool, np.bool_)) or not isinstance(n_cols, (int, np.integer))
    ):
        raise InvalidParameterError(f"n_cols must be a positive integer, got {n_cols!r}")
    if n_cols is not None and n_cols < 1:
        raise InvalidParameterError(f"n_cols must be a positive integer, got {n_cols}")
    try:
        return REGISTRY[fmt].read(path, **options)
    except InputError as exc:
        if not guess:
            raise
        raise InputError(f"{exc} [{guess}]") from None
    except MemoryError:  # an estimate fell short: still one line, not a traceback
        raise InputError(
            f"{path}: not enough memory to read it (set {ENV_VAR} to a budget that fits)"
        ) from None


def write_matrix(
    X, path, *, format: str | None = None, row_labels=None, col_labels=None, missing=None
) -> None:
    """Write a 0/1 matrix atomically; reading it back (:func:`read_dataset`) gives the same
    shape, entries and labels.

    Parameters
    ----------
    X : array-like, sparse, DataFrame or Dataset of shape (n, m), 0/1
        A :class:`Dataset` (or a DataFrame) brings its labels and unknown cells.
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
        Names of the rows and columns (default: X's own, if it has them): a name column and a header row in .csv and .tsv files,
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
    data = Dataset.of(X, missing)
    if data.observed is not None:
        raise InputError(
            "X's unknown cells are given as its observed cells (observed=): a file lists its "
            "unknown cells; write the cells as a matrix of their own instead"
        )
    X, missing = data.X, data.missing
    n, m = X.shape
    labels = {}
    for key, value, size, what in (
        ("row_labels", data.row_labels if row_labels is None else row_labels, n, "rows"),
        ("col_labels", data.col_labels if col_labels is None else col_labels, m, "columns"),
    ):
        if value is not None:
            value = [str(v) for v in value]
            if len(value) != size:
                raise InputError(f"{len(value)} {key.replace('_', ' ')} for {size} {what}")
            labels[key] = value
    REGISTRY[fmt].write(X, path, labels, missing)
