"""Factorizations as files: result files (:class:`banmf.Factorization`'s own ``.npz``, saved and
loaded by :mod:`banmf.result`) and the export of W and H, with names, for other tools."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..data.dataset import Dataset
from ..exceptions import InvalidParameterError
from ..result import Factorization
from ..runtime.files import atomic_path
from ._formats import REGISTRY, export_formats
from ._matrices import write_matrix
from ._sidecars import sidecar_path


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
    return paths + ([sidecar_path(p) for p in paths] if REGISTRY[format].sidecar else [])


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
    if format not in export_formats():
        raise InvalidParameterError(f"format must be one of {export_formats()}, got {format!r}")
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
        changes["X"] = Dataset.of(X).X
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
