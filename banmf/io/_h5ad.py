"""AnnData files (``.h5ad``, needs ``anndata``): X with the obs and var names as labels and the
layer ``missing`` as the unknown cells."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..data.dataset import Dataset
from ..exceptions import InputError
from ..runtime.files import atomic_path
from ..runtime.files import check_readable as _check_readable
from ..runtime.files import reason_of as _reason
from ._formats import Format
from .anndata import MISSING_LAYER, anndata_module, anndata_parts


def read_h5ad(path: Path) -> Dataset:
    """An AnnData file's X (sparse or dense, 0/1), with obs names as row labels and var names
    as column labels (:func:`banmf.io.anndata.anndata_parts`)."""
    anndata = anndata_module()
    _check_readable(path)
    try:
        adata = anndata.read_h5ad(path)
    except (OSError, KeyError, ValueError, TypeError) as exc:  # TypeError: unexpected keys
        raise InputError(f"{path}: not a readable .h5ad file ({_reason(exc)})") from None
    return Dataset(**anndata_parts(adata, where=f"{path}: ", name=path.name, one_based=True))


def _write_h5ad(X: sp.csr_array, tmp: Path, labels: dict, missing=None) -> None:
    """X as uint8 CSR (what single-cell tools expect of counts), labels as obs and var names,
    unknown cells as the layer ``missing``."""
    anndata = anndata_module()
    import pandas as pd

    n, m = X.shape
    obs = pd.DataFrame(index=labels.get("row_labels", [str(i) for i in range(n)]))
    var = pd.DataFrame(index=labels.get("col_labels", [str(j) for j in range(m)]))

    def counts(M):
        return sp.csr_matrix((np.ones(M.nnz, np.uint8), M.indices, M.indptr), shape=(n, m))

    layers = {} if missing is None else {MISSING_LAYER: counts(missing)}
    anndata.AnnData(X=counts(X), obs=obs, var=var, layers=layers).write_h5ad(tmp)


def write_h5ad(X: sp.csr_array, path: Path, labels: dict, missing) -> None:
    """The registry's writer (anndata checked for before anything is written)."""
    anndata_module()  # before anything is written
    with atomic_path(path) as tmp:
        _write_h5ad(X, tmp, labels, missing)


H5AD = Format(
    name="h5ad",
    suffixes=(".h5ad",),
    read=read_h5ad,
    write=write_h5ad,
    labels="obs and var names",
    missing="the layer missing",
)
