"""AnnData objects (single-cell data; needs ``anndata``, an optional dependency): X or a layer
read as banmf's data, and a factorization written where scanpy's tools write their results.

Both :mod:`banmf.io` (``.h5ad`` files) and :func:`banmf.factorize` (an AnnData given in memory)
read an AnnData here, so that a file and the object it holds give the same data.
"""

from __future__ import annotations

from ._files import jsonable
from ._validation import check_binary_matrix
from .dataset import Dataset
from .exceptions import InputError, MissingDependencyError

#: The layer that marks a cell whose value is unknown (1: unknown), as ``.h5ad`` files keep it.
MISSING_LAYER = "missing"


def anndata_module():
    """``anndata``, imported on first use; a :class:`MissingDependencyError` saying what to
    install when it is not."""
    try:
        import anndata
    except ImportError:
        raise MissingDependencyError(
            ".h5ad files need anndata: pip install anndata (or banmf[anndata])"
        ) from None
    return anndata


def is_anndata(X) -> bool:
    """An AnnData object, recognised without importing anndata."""
    return type(X).__module__.split(".")[0] == "anndata" and hasattr(X, "obsm")


def anndata_dataset(
    adata, layer: str | None = None, *, where: str = "", name: str = "", one_based: bool = False
) -> Dataset:
    """The 0/1 matrix of an AnnData (``X``, or the layer ``layer``) with the obs names as row
    labels, the var names as column labels and the layer ``missing``, if there is one, as the
    unknown cells. ``where`` starts the messages (a file's path); ``one_based`` counts rows
    and columns in them from 1 (as for files)."""
    if layer is None:
        if adata.X is None:
            raise InputError(f"{where}the AnnData {'file ' if where else ''}has no X matrix")
        values, what = adata.X, "X"
    else:
        if layer not in adata.layers:
            have = ", ".join(map(repr, adata.layers)) or "none"
            raise InputError(f"{where}the AnnData has no layer {layer!r} (its layers: {have})")
        values, what = adata.layers[layer], f"layer {layer!r}"
    X = check_binary_matrix(values, name=f"{where}{what}", one_based=one_based)
    missing = None
    if MISSING_LAYER in adata.layers and layer != MISSING_LAYER:
        missing = check_binary_matrix(
            adata.layers[MISSING_LAYER],
            name=f"{where}layer {MISSING_LAYER!r}",
            one_based=one_based,
        )
    return Dataset(
        X,
        [str(v) for v in adata.obs_names],
        [str(v) for v in adata.var_names],
        name,
        missing=missing,
    )


def store_result(adata, result, key_added: str = "banmf") -> None:
    """Write a factorization into ``adata`` as scanpy's tools write theirs: W (n, k) as
    ``obsm["X_<key>"]``, Hᵀ (m, k) as ``varm["<key>_H"]``, and in ``uns["<key>"]`` the method,
    k, the errors, the iterations, the time and the parameters (those set to None left out:
    ``.h5ad`` files cannot hold None)."""
    params = {k: v for k, v in jsonable(result.params).items() if v is not None}
    adata.obsm[f"X_{key_added}"] = result.W
    adata.varm[f"{key_added}_H"] = result.H.T.copy()
    adata.uns[key_added] = {
        "method": result.method,
        "k": int(result.n_components),
        "error": int(result.error),
        "relative_error": float(result.relative_error),
        "n_iter": int(result.n_iter),
        "seconds": float(result.seconds),
        "interrupted": bool(result.interrupted),
        "params": params,
    }
