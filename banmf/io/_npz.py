"""scipy's sparse ``.npz`` archives (CSR, CSC, COO, BSR, DIA), read without trusting them;
written as compressed CSR with the unknown cells as two more arrays, which scipy's reader
ignores. Labels live in the sidecar."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..data.dataset import Dataset
from ..data.masks import csr_from_parts
from ..exceptions import InputError
from ..runtime.files import csr_problem as _csr_problem
from ..runtime.files import nbytes as _nbytes
from ..runtime.files import npz_array as _npz_array
from ..runtime.files import open_npz as _open_npz
from ..runtime.files import reason_of as _reason
from ..runtime.files import signed as _signed
from ..runtime.files import sorted_rows as _sorted_rows
from ..runtime.files import stored_pattern as _stored_pattern
from ..runtime.memory import check_matrix_size
from ._common import not_binary, quote, support_from_coords
from ._formats import Format
from ._sidecars import with_sidecar, write_with_sidecar

_NPZ_PARTS = {
    "csr": ("indices", "indptr"),
    "csc": ("indices", "indptr"),
    "bsr": ("indices", "indptr"),
    "dia": ("offsets",),
    "coo": ("row", "col"),
}


def _read_support(path: Path) -> sp.csr_array:
    def not_npz(reason):
        return InputError(f"{path}: not a scipy sparse .npz file ({reason})")

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
            raise not_npz(f"unknown sparse format {quote(fmt)}")
        if fmt == "coo" and "coords" in headers:
            parts = ("coords",)
        for key in parts:
            if key not in headers:
                raise not_npz(f"no '{key}' array for the {fmt} format")
            if headers[key][1].kind not in "iu":
                raise not_npz(f"the '{key}' array holds {headers[key][1]}, not integers")
        kind = headers["data"][1].kind
        if kind == "c":
            raise InputError(f"{path}: the values are complex numbers, not 0/1")
        if kind not in "biuf":
            raise not_npz(f"the 'data' array holds {headers['data'][1]}, not numbers")
        if n < 0 or m < 0:
            raise not_npz(f"negative shape ({n}, {m})")
        if n == 0 or m == 0:
            raise InputError(f"{path}: the matrix is empty ({n}×{m})")
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
            raise InputError(
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
            raise InputError(f"{path}: not a valid CSR matrix ({problem})")
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
        raise InputError(f"{path}: not a valid {fmt.upper()} matrix ({_reason(exc)})") from None
    outside = (rows < 0) | (rows >= n) | (cols < 0) | (cols >= m)
    if outside.any():
        e = int(np.flatnonzero(outside)[0])
        raise InputError(
            f"{path}: entry at row {int(rows[e]) + 1}, column {int(cols[e]) + 1} is outside the "
            f"{n}×{m} matrix"
        )
    if values.dtype != np.bool_:
        bad = ~((values == 0) | (values == 1))
        if bad.any():
            e = int(np.flatnonzero(bad)[0])
            raise InputError(
                not_binary(str(path), values[e], int(rows[e]) + 1, int(cols[e]) + 1, int(bad.sum()))
            )
    keep = values != 0
    return support_from_coords(path, rows[keep], cols[keep], (n, m))


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
    InputError
        The file is not a scipy sparse ``.npz`` archive, or its shape is not two
        nonnegative integers.
    """
    path = Path(path)

    def not_npz(reason):
        return InputError(f"{path}: not a scipy sparse .npz file ({reason})")

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
        return InputError(f"{path}: damaged missing-cell mask ({reason})")

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


def read_npz(path: Path) -> Dataset:
    """The registry's reader of .npz files: the support and the unknown cells stored with it,
    the sidecar's labels."""
    X = _read_support(path)
    return with_sidecar(path, X, missing=_npz_missing(path, X.shape))


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


def write_npz(X: sp.csr_array, path: Path, labels: dict, missing) -> None:
    """The registry's writer: compressed CSR and the unknown cells in one archive, labels in
    the sidecar."""
    if path.suffix.lower() == ".gz":
        raise InputError(f"{path}: .npz files are compressed already; drop the .gz")

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as fh:
            arrays = {}
            if missing is not None:
                arrays = {"missing_indptr": missing.indptr, "missing_indices": missing.indices}
            _save_npz(fh, X, arrays)

    write_with_sidecar(X, path, labels, missing, write, mask_inside=True)


NPZ = Format(
    name="npz",
    suffixes=(".npz",),
    read=read_npz,
    write=write_npz,
    labels="sidecar",
    missing="arrays in the archive",
    sidecar=True,
    export=True,
)
