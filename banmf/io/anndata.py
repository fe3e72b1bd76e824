"""AnnData objects (single-cell data; needs ``anndata``, an optional dependency): X or a layer
read as banmf's data, and a factorization written where scanpy's tools write their results.

Both :mod:`banmf.io` (``.h5ad`` files) and :func:`banmf.factorize` (an AnnData given in memory)
read an AnnData here, so that a file and the object it holds give the same data.
"""

from __future__ import annotations

from ..data.validation import check_binary_matrix
from ..exceptions import InputError, InvalidParameterError, MissingDependencyError
from ..runtime.files import jsonable

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


def anndata_parts(
    adata, layer: str | None = None, *, where: str = "", name: str = "", one_based: bool = False
) -> dict:
    """The 0/1 matrix of an AnnData (``X``, or the layer ``layer``) with the obs names as row
    labels, the var names as column labels and the layer ``missing``, if there is one, as the
    unknown cells: the keyword arguments of :class:`banmf.Dataset` (``Dataset(**parts)``).
    ``where`` starts the messages (a file's path); ``one_based`` counts rows and columns in
    them from 1 (as for files)."""
    if layer is None:
        if adata.X is None:
            raise InputError(f"{where}the AnnData {'file ' if where else ''}has no X matrix")
        values, what = adata.X, "X"
    else:
        if layer not in adata.layers:
            have = ", ".join(map(repr, adata.layers)) or "none"
            raise InputError(f"{where}the AnnData has no layer {layer!r} (its layers: {have})")
        values, what = adata.layers[layer], f"layer {layer!r}"
    X = check_binary_matrix(
        values, name=f"{where}{what}", one_based=one_based, binarize=_binarize(layer, where)
    )
    missing = None
    if MISSING_LAYER in adata.layers and layer != MISSING_LAYER:
        missing = check_binary_matrix(
            adata.layers[MISSING_LAYER],
            name=f"{where}layer {MISSING_LAYER!r}",
            one_based=one_based,
            binarize=_binarize(MISSING_LAYER, where),
        )
    return {
        "X": X,
        "row_labels": [str(v) for v in adata.obs_names],
        "col_labels": [str(v) for v in adata.var_names],
        "name": name,
        "missing": missing,
    }


def _binarize(layer: str | None, where: str) -> str:
    """How to binarize X or a layer of an AnnData, in the message about its values (a file's:
    in Python, before writing it again)."""
    part = "adata.X" if layer is None else f"adata.layers[{layer!r}]"
    then = " in Python, then write the file again" if where else ""
    return f"{part} = {part} > 0{then}"


def result_keys(key_added: str) -> tuple[str, str, str]:
    """The ``obsm``, ``varm`` and ``uns`` keys that :func:`store_result` writes for
    ``key_added``."""
    return f"X_{key_added}", f"{key_added}_H", key_added


def is_banmf_record(record) -> bool:
    """``record`` (an ``uns`` entry) is one that :func:`store_result` wrote: it says
    ``"written_by": "banmf"``, or has the method, k and params of a record written before
    banmf said so."""
    if not isinstance(record, dict):
        return False
    if record.get("written_by") == "banmf":
        return True
    return {"method", "k", "params"} <= set(record) and "written_by" not in record


def check_destination(adata, key_added, overwrite: bool = False) -> str:
    """``key_added`` checked before a fit: a non-empty string, and the entries it names in
    ``adata`` either absent or banmf's own (the ``uns`` record under that key is banmf's), or
    ``overwrite`` is set; otherwise an :class:`InvalidParameterError` naming the entries and
    the fix. Returns the key."""
    if not isinstance(key_added, str) or not key_added or "/" in key_added:
        raise InvalidParameterError(
            f"key_added must be a non-empty string without '/', e.g. 'banmf'; got {key_added!r}"
        )
    if overwrite or is_banmf_record(adata.uns.get(key_added)):
        return key_added
    obsm, varm, uns = result_keys(key_added)
    taken = [
        f'{where}["{key}"]'
        for where, key, mapping in (
            ("obsm", obsm, adata.obsm),
            ("varm", varm, adata.varm),
            ("uns", uns, adata.uns),
        )
        if key in mapping
    ]
    if taken:
        raise InvalidParameterError(
            f"the AnnData already has {' and '.join(taken)}, not written by banmf; "
            f"choose another key_added (e.g. key_added='banmf_{key_added}') "
            "or pass overwrite=True to replace it"
        )
    return key_added


def store_result(adata, result, key_added: str = "banmf") -> None:
    """Write a factorization into ``adata`` as scanpy's tools write theirs: W (n, k) as
    ``obsm["X_<key>"]``, Hᵀ (m, k) as ``varm["<key>_H"]``, and in ``uns["<key>"]`` who wrote
    it (``"written_by": "banmf"``), the method, k, the errors, the iterations, the time and the
    parameters (those set to None left out: ``.h5ad`` files cannot hold None)."""
    params = {k: v for k, v in jsonable(result.params).items() if v is not None}
    obsm, varm, uns = result_keys(key_added)
    adata.obsm[obsm] = result.W
    adata.varm[varm] = result.H.T.copy()
    adata.uns[uns] = {
        "written_by": "banmf",
        "method": result.method,
        "k": int(result.n_components),
        "error": int(result.error),
        "relative_error": float(result.relative_error),
        "n_iter": int(result.n_iter),
        "seconds": float(result.seconds),
        "interrupted": bool(result.interrupted),
        "params": params,
    }
