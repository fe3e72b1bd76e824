"""One call for every method (:func:`factorize`), and many fits at once (:func:`fit_many`)."""

from __future__ import annotations

import time

from .data.dataset import Dataset
from .data.validation import is_anndata
from .exceptions import Interrupted, InvalidParameterError
from .io.anndata import anndata_parts, check_destination, store_result
from .models import METHODS
from .result import EMBED_MAX_NNZ, Factorization
from .runtime.runner import fit_tasks

__all__ = ["Factorization", "factorize", "fit_many"]  # Factorization: from banmf.result


def factorize(
    X,
    n_components,
    method: str = "banmf",
    *,
    random_state=None,
    missing=None,
    observed=None,
    layer: str | None = None,
    key_added: str | None = None,
    overwrite: bool = False,
    client=None,
    **method_params,
) -> Factorization:
    """Factorize the 0/1 matrix X with any registered method.

    Parameters
    ----------
    X : array-like, sparse, pandas DataFrame or AnnData of shape (n, m)
        A DataFrame's index and columns become the result's row and column labels (and so
        the names in :func:`banmf.patterns`); one of sparse columns is not densified. An
        AnnData (needs ``anndata``) gives its ``X`` (or ``layer``), its obs and var names as
        labels and its layer ``missing`` as unknown cells, as a ``.h5ad`` file does; the
        result is also written into it (see ``key_added``).
    n_components : int, "auto" or None
        Rank k. "auto": the k from 1 to 20 (at most min(n, m)) with the lowest cross-validated
        held-out error, the selection then in ``result.estimator.rank_selection_`` (see
        :func:`banmf.select_rank`). None only for methods that choose k themselves, e.g.
        ``"grecond"``.
    method : str, default "banmf"
        A key of :data:`banmf.METHODS`.
    random_state : None, int or Generator
    missing : array-like or sparse of shape (n, m), optional
        1 marks a cell whose value is unknown: the fit uses observed cells only, and
        :meth:`Factorization.complete` fills the unknown ones in.
    observed : array-like or sparse of shape (n, m), optional
        The complement, for data where most cells are unknown: 1 marks an observed cell.
        ASSO and GreConD take ``missing`` only.
    layer : str, optional
        With an AnnData X: factorize this layer instead of ``X``.
    key_added : str, optional
        With an AnnData X, where the result goes, as scanpy's tools do: W as
        ``adata.obsm["X_<key>"]``, Hᵀ as ``adata.varm["<key>_H"]`` and the method, k, errors
        and parameters in ``adata.uns["<key>"]``; default ``"banmf"``. Checked before the fit:
        an entry already there that banmf did not write (its ``uns["<key>"]`` record is not
        banmf's) raises :class:`~banmf.exceptions.InvalidParameterError` unless ``overwrite``;
        banmf's own result under the same key is replaced.
    overwrite : bool, default False
        With an AnnData X: replace entries under ``key_added`` that banmf did not write.
    client : distributed.Client, optional
        Fit on this Dask cluster (:class:`banmf.distributed.BANMF`; "banmf" only): X is cut
        into row blocks on the workers. An X given as row blocks
        (:class:`banmf.distributed.BlockMatrix`) is fitted there too, on the current client
        without one. The result is the one a fit on this machine gives (with
        ``polish="flip"``: the exact polish needs X's columns whole), its predictor of unknown
        cells included; the copy of X a result keeps is gathered from small row blocks.
    **method_params
        Passed to the method's estimator (see its class).

    Returns
    -------
    Factorization

    Examples
    --------
    >>> from banmf import factorize, make_boolean
    >>> X, _, _ = make_boolean(40, 30, 3, density=0.3, random_state=0)
    >>> factorize(X, 3, method="asso", tau=0.6).W.shape
    (40, 3)
    """
    if method not in METHODS:
        raise InvalidParameterError(
            f"unknown method {method!r}; choose one of {', '.join(METHODS)}"
        )
    cls = METHODS[method]
    # Row blocks (banmf.distributed.BlockMatrix), told apart without importing Dask's side.
    blocks = type(X).__qualname__ == "BlockMatrix" and type(X).__module__.startswith("banmf.")
    if client is not None or blocks:
        if method != "banmf":
            raise InvalidParameterError(
                f"only 'banmf' fits on a Dask cluster (client= or row blocks), not {method!r}"
            )
        from .distributed import BANMF as cls

        method_params["client"] = client
    valid = set(cls._param_names())
    unknown = set(method_params) - valid
    if unknown:
        raise InvalidParameterError(
            f"method {method!r} has no parameter(s) {sorted(unknown)}; valid: {sorted(valid)}"
        )
    adata = X if is_anndata(X) else None
    if adata is None and (layer is not None or key_added is not None or overwrite):
        raise InvalidParameterError(
            "layer=, key_added= and overwrite= are for an AnnData X (anndata.AnnData); "
            f"got {type(X).__name__}"
        )
    if adata is not None:
        key_added = check_destination(adata, "banmf" if key_added is None else key_added, overwrite)
        X = Dataset(**anndata_parts(adata, layer))
    if blocks:
        if missing is not None or observed is not None:
            raise InvalidParameterError(
                "row blocks carry their unknown cells: pass no missing/observed"
            )
        data, X, labels = X, None, {}
    else:
        data = Dataset.of(X, missing, observed)
        X = data.X
        labels = {
            "row_labels": data.row_labels,
            "col_labels": data.col_labels,
            "missing": data.missing,
            "observed": data.observed,
        }
    est = cls(n_components=n_components, random_state=random_state, **method_params)
    start = time.perf_counter()

    def result_of() -> Factorization:
        fields = {"X": X, **labels}
        if blocks and est.nnz_ <= EMBED_MAX_NNZ:
            # Small row blocks are gathered, as a result keeps a copy of small data.
            fields = dict(zip(("X", "missing", "observed"), data.gather(), strict=True))
        return Factorization.from_estimator(
            est, method=method, seconds=time.perf_counter() - start, **fields
        )

    try:
        est.fit(data)
    except KeyboardInterrupt:
        if not getattr(est, "interrupted_", False):
            raise  # before any result existed, or a second Ctrl-C
        raise Interrupted(result_of()) from None
    result = result_of()
    if adata is not None:
        store_result(adata, result, key_added)
    return result


def fit_many(estimators, X, *, n_jobs=None, missing=None, observed=None) -> list:
    """Fit several estimators to the same X side by side, on one thread budget.

    A sweep over k, seeds or methods: each estimator is fitted in its own thread (the kernels
    release the GIL) with an equal share of the budget, and its result is the one
    ``estimator.fit(X)`` gives alone. X is validated once.

    Parameters
    ----------
    estimators : iterable of estimators
        Unfitted or fitted banmf estimators (any method); each is fitted in place.
    X : array-like or sparse of shape (n, m)
    n_jobs : int or None, default None
        The budget shared by all fits (:func:`banmf.effective_n_jobs`): ``min(n_jobs, number
        of estimators)`` run at a time. An estimator's own ``n_jobs``, if set, is its share.
    missing, observed : array-like or sparse of shape (n, m), optional
        Unknown cells, as in :meth:`banmf.BANMF.fit` (validated once for all fits).

    Returns
    -------
    list
        The estimators, fitted, in the order given.

    Notes
    -----
    On Ctrl-C the fits under way stop at their next iteration and keep their factors so far
    (``interrupted_``), those not begun stay unfitted, and KeyboardInterrupt is raised again.

    Examples
    --------
    >>> from banmf import BANMF, fit_many, make_boolean
    >>> X, _, _ = make_boolean(40, 30, 3, density=0.3, random_state=0)
    >>> fits = fit_many([BANMF(k, max_iter=100, random_state=0) for k in (1, 2, 3)], X, n_jobs=2)
    >>> [f.n_components_ for f in fits]
    [1, 2, 3]
    """
    estimators = list(estimators)
    data = Dataset.of(X, missing, observed)
    return fit_tasks([(est, data) for est in estimators], n_jobs)
