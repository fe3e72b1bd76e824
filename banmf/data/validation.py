"""Turning user input into the canonical support mask, and the other boundary checks.

Everything past this module trusts its inputs: X is a CSR *support mask* (sorted, deduplicated
column indices, one index dtype, boolean ``data`` of ones) and factors are C-contiguous arrays of
one float dtype.
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
import scipy.sparse as sp

from ..exceptions import InputError, InvalidParameterError
from .masks import (
    csr_from_parts,
    support_mask,
)

__all__ = [
    "check_binary_matrix",
    "check_cells",
    "check_boolean_factors",
    "check_dense_budget",
    "check_dtype",
    "check_n_components",
    "check_random_state",
    "check_work",
]


def format_value(value) -> str:
    """A number as a person writes it (``2``, ``0.5``, ``nan``), not as numpy reprs it
    (``np.float64(2.0)``): for messages."""
    if isinstance(value, (bool, np.bool_)):
        return str(int(value))
    if isinstance(value, (numbers.Integral, np.integer)):
        return str(int(value))
    x = float(value)
    if x.is_integer() and abs(x) < 1e16:
        return str(int(x))
    return repr(x)


def entries(count: int, that: str = "") -> str:
    """``"1 entry"``, ``"3 entries"``; with ``that="is not 0 or 1"``: ``"1 entry that is not 0
    or 1"``, ``"3 entries that are not 0 or 1"`` (the verb agrees with the count)."""
    noun = "entry" if count == 1 else "entries"
    if not that:
        return f"{count} {noun}"
    verb, _, rest = that.partition(" ")
    if count != 1:
        verb = {"is": "are", "was": "were", "has": "have"}.get(verb, verb)
    return f"{count} {noun} that {verb} {rest}".rstrip()


def _describe_bad_values(
    values: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    name: str,
    base: int = 0,
    binarize: str | None = None,
) -> str:
    bad = ~((values == 0) | (values == 1))
    count = int(bad.sum())
    first = int(np.flatnonzero(bad)[0])
    example = "" if count == 1 else "e.g. "
    return (
        f"{name} has {entries(count, 'is not 0 or 1')} ({example}{format_value(values[first])} "
        f"at row {int(rows[first]) + base}, column {int(cols[first]) + base}); binarize first, "
        f"e.g. {binarize or f'with {name} > 0'}"
    )


def _check_numeric(dtype: np.dtype, name: str) -> None:
    if dtype == np.dtype(object) or not (np.issubdtype(dtype, np.number) or dtype == np.bool_):
        raise InputError(f"{name} must hold numbers or booleans, got dtype {dtype}")
    if np.issubdtype(dtype, np.complexfloating):
        raise InputError(f"{name} must be real, got complex dtype {dtype}")


def is_dataframe(X) -> bool:
    """A pandas DataFrame, recognised without importing pandas (an optional dependency)."""
    return type(X).__module__.split(".")[0] == "pandas" and hasattr(X, "columns")


def is_anndata(X) -> bool:
    """An AnnData object, recognised without importing anndata (an optional dependency)."""
    return type(X).__module__.split(".")[0] == "anndata" and hasattr(X, "obsm")


def frame_labels(X) -> tuple[list | None, list | None]:
    """The row and column names of a pandas DataFrame (as str), else ``(None, None)``."""
    if not is_dataframe(X):
        return None, None
    return [str(v) for v in X.index], [str(v) for v in X.columns]


def frame_na(X):
    """A DataFrame's values as float (NA as 0) and the canonical mask of its NA cells, when a
    nullable column (``Int64``, ``boolean``, ...) holds ``pd.NA``; else None. NA is an unknown
    cell (:class:`banmf.io.Dataset`)."""
    import pandas as pd

    nullable = [j for j, d in enumerate(X.dtypes) if getattr(d, "na_value", None) is pd.NA]
    if not nullable:
        return None
    na = np.zeros(X.shape, dtype=bool)
    na[:, nullable] = X.iloc[:, nullable].isna().to_numpy()
    if not na.any():
        return None
    try:
        values = X.to_numpy(dtype=np.float64, na_value=0.0)
    except (TypeError, ValueError) as exc:
        raise InputError(f"X must hold numbers or booleans ({exc})") from None
    return values, support_mask(*na.nonzero(), na.shape)


def check_binary_matrix(
    X, name: str = "X", *, one_based: bool = False, binarize: str | None = None
) -> sp.csr_array:
    """Validate a 0/1 matrix and return it as a canonical CSR support mask.

    Parameters
    ----------
    X : array-like, scipy sparse matrix/array or pandas DataFrame of shape (n, m)
        Values must be 0 or 1 (booleans accepted). Explicit zeros are dropped. A DataFrame of
        sparse columns is read without densifying it.
    name : str
        Name used in error messages.
    one_based : bool, default False
        Count rows and columns from 1 in messages (X came from a file), else from 0 (numpy's
        indices).
    binarize : str, optional
        How the message about values other than 0 and 1 says to binarize X (after "e.g."),
        where ``name > 0`` is not an expression (``name`` names a file's part, say); default
        ``"with <name> > 0"``.

    Returns
    -------
    scipy.sparse.csr_array of shape (n, m)
        Sorted, deduplicated indices; ``data`` is an all-True bool array; ``indices`` and
        ``indptr`` share one integer dtype (int32 when it fits).

    Raises
    ------
    banmf.exceptions.InputError
        If X is not numeric (strings, objects, complex), is not 2-D, is empty, contains
        NaN/inf or values other than 0 and 1 (a ``ValueError`` and a ``TypeError``).
    """
    if X is None or isinstance(X, (str, bytes)):
        raise InputError(
            f"{name} must be a 2-D 0/1 array or scipy sparse matrix, got {type(X).__name__}"
        )
    if is_anndata(X):
        raise InputError(
            f"{name} is an AnnData: pass its matrix (adata.X or adata.layers[...]), or call "
            "banmf.factorize(adata, k), which reads it with its names and writes the result back"
        )
    if is_dataframe(X):
        # A frame of sparse columns stays sparse; any other is read as its values.
        sparse = len(X.columns) > 0 and all(type(d).__name__ == "SparseDtype" for d in X.dtypes)
        X = sp.coo_array(X.sparse.to_coo()) if sparse else X.to_numpy()
    if sp.issparse(X):
        if X.ndim != 2:
            raise InputError(f"{name} must be 2-D, got {X.ndim} dimensions")
        _check_numeric(X.dtype, name)
        if _is_support_mask(X):
            return (
                X if isinstance(X, sp.csr_array) else csr_from_parts(X.indptr, X.indices, X.shape)
            )
        coo = sp.coo_array(X)
        coo.sum_duplicates()
        values, rows, cols = coo.data, coo.row, coo.col
        shape = coo.shape
    else:
        try:
            arr = np.asarray(X)
        except Exception as exc:  # ragged lists and the like
            raise InputError(f"{name} could not be converted to an array: {exc}") from None
        _check_numeric(arr.dtype, name)
        if arr.ndim != 2:
            raise InputError(f"{name} must be 2-D, got an array of shape {arr.shape}")
        shape = arr.shape
        rows, cols = np.nonzero(arr)
        # NaN and inf are nonzero, so every non-finite value is among `values`.
        values = arr[rows, cols]
    if shape[0] == 0 or shape[1] == 0:
        raise InputError(
            f"{name} is empty (shape {shape}); it needs at least one row and one column"
        )
    if np.issubdtype(values.dtype, np.floating):
        finite = np.isfinite(values)
        if not finite.all():
            count = int((~finite).sum())
            first = int(np.flatnonzero(~finite)[0])
            example = "" if count == 1 else "e.g. "
            raise InputError(
                f"{name} has {entries(count, 'is NaN or infinite')} ({example}"
                f"{format_value(values[first])} at row {int(rows[first]) + one_based}, column "
                f"{int(cols[first]) + one_based})"
            )
    if values.dtype != np.bool_:
        if not ((values == 0) | (values == 1)).all():
            raise InputError(
                _describe_bad_values(values, rows, cols, name, int(one_based), binarize)
            )
        keep = values != 0
        rows, cols = rows[keep], cols[keep]
    return support_mask(rows, cols, shape)


def check_cells(rows, cols, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Validate cell coordinates (0-based, one row and one column index per cell) of a matrix
    of ``shape``; returns them as int64 arrays."""
    out = []
    for name, idx, size in (("rows", rows, shape[0]), ("cols", cols, shape[1])):
        arr = np.asarray(idx)
        if arr.ndim != 1:
            raise InputError(f"{name} must be 1-D, got shape {arr.shape}")
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise InputError(f"{name} must hold integers, got dtype {arr.dtype}")
        arr = arr.astype(np.int64)
        bad = (arr < 0) | (arr >= size)
        if bad.any():
            q = int(np.flatnonzero(bad)[0])
            raise InputError(
                f"{name}[{q}] = {int(arr[q])} is outside 0..{size - 1} (the matrix is "
                f"{shape[0]}×{shape[1]})"
            )
        out.append(arr)
    if len(out[0]) != len(out[1]):
        raise InputError(
            f"rows and cols must have one entry per cell, got {len(out[0])} and {len(out[1])}"
        )
    return out[0], out[1]


def _is_support_mask(X) -> bool:
    """Already canonical (e.g. our own output): skip the conversion, a large cost at scale."""
    return (
        X.format == "csr"
        and X.dtype == np.bool_
        and X.shape[0] > 0
        and X.shape[1] > 0
        and X.indices.dtype == X.indptr.dtype
        and X.has_canonical_format
        and bool(X.data.all())
    )


def check_n_components(n_components, shape: tuple[int, int]) -> int:
    """The rank ``k`` to fit: ``n_components``, capped at ``min(n, m)`` with a warning.

    The Boolean rank of an n×m matrix never exceeds ``min(n, m)`` (its rows, or its columns,
    are an exact factorization), so factors past it cannot lower the error; they would only
    cost time and memory (k² Gram matrices, 2^k patterns).
    """
    if isinstance(n_components, (bool, np.bool_)) or not isinstance(n_components, numbers.Integral):
        raise InvalidParameterError(
            f"n_components must be a positive integer, got {n_components!r}"
        )
    k = int(n_components)
    if k < 1:
        raise InvalidParameterError(f"n_components must be >= 1, got {k}")
    rank = min(shape)
    if k > rank:
        warnings.warn(
            f"n_components={k} exceeds min(n, m)={rank}: an exact factorization with {rank} "
            f"components always exists, so the fit uses {rank} (n_components_ is {rank})",
            UserWarning,
            stacklevel=3,
        )
        return rank
    return k


def check_random_state(random_state) -> np.random.Generator:
    """Turn None, an int or a Generator into a ``numpy.random.Generator``."""
    if random_state is None or isinstance(random_state, (numbers.Integral, np.random.SeedSequence)):
        return np.random.default_rng(random_state)
    if isinstance(random_state, np.random.Generator):
        return random_state
    raise InvalidParameterError(
        f"random_state must be None, an int or a numpy Generator, got {type(random_state).__name__}"
    )


def check_dense_budget(shape: tuple[int, int], budget, what: str) -> None:
    """Refuse an n×m problem that a dense method would hold in memory beyond ``budget`` entries."""
    n, m = shape
    if n * m > budget:
        raise InvalidParameterError(
            f"{what} needs dense n×m arrays: {n}×{m} = {n * m:,} entries exceeds "
            f"dense_budget={budget:,}; use BANMF or NMF, or raise dense_budget if the memory is there"
        )


#: Default ``work_budget``: estimated operations above which a fit is refused (about five
#: minutes at :data:`OPS_PER_SECOND`).
WORK_BUDGET = 6e10
#: The rate the estimates are turned into time with: operations (a row looked at, a group
#: counted) per second on the 2-core machine banmf was developed on (docs/decisions.md, "The
#: work estimates").
OPS_PER_SECOND = 2e8


def work_duration(work: float) -> str:
    """An estimate of operations as time on this project's 2-core machine, in words."""
    seconds = work / OPS_PER_SECOND
    if seconds < 1:
        return "under a second"
    if seconds < 120:
        return f"about {seconds:.0f} s"
    return f"about {seconds / 60:.0f} min" if seconds < 7200 else f"about {seconds / 3600:.0f} h"


def check_work(work: float, budget, what: str, fix: str) -> None:
    """Refuse, up front, a fit estimated at more than ``budget`` operations (None: no limit):
    a one-line ``ValueError`` with the estimate and what to change."""
    if budget is not None and work > budget:
        raise InvalidParameterError(
            f"{what} is estimated at {work:.3g} operations ({work_duration(work)} on 2 "
            f"cores), over work_budget={budget:.3g}; {fix}, or raise work_budget "
            "(None: no limit)"
        )


def check_dtype(dtype) -> np.dtype:
    """Accept float32 or float64 only (each kernel is compiled for these two)."""
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise InvalidParameterError(f"dtype must be float32 or float64, got {dt}")
    return dt


def check_boolean_factors(
    W, H, shape: tuple[int, int] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Validate Boolean factors W (n, k) and H (k, m); return C-contiguous bool arrays."""
    out = []
    for name, F in (("W", W), ("H", H)):
        if sp.issparse(F):
            F = F.toarray()
        arr = np.asarray(F)
        _check_numeric(arr.dtype, name)
        if arr.ndim != 2:
            raise InputError(f"{name} must be 2-D, got an array of shape {arr.shape}")
        if arr.dtype != np.bool_:
            if np.issubdtype(arr.dtype, np.floating) and not np.isfinite(arr).all():
                raise InputError(f"{name} contains NaN or infinite values")
            bad = ~((arr == 0) | (arr == 1))
            if bad.any():
                r, c = np.argwhere(bad)[0]
                count = int(bad.sum())
                raise InputError(
                    f"{name} has {entries(count, 'is not 0 or 1')} ({'' if count == 1 else 'e.g. '}"
                    f"{format_value(arr[r, c])} at row {r}, column {c}); threshold it first, e.g. "
                    f"with {name} > 0.5"
                )
        out.append(np.ascontiguousarray(arr, dtype=bool))
    Wb, Hb = out
    if Wb.shape[1] != Hb.shape[0]:
        raise InputError(
            f"W has {Wb.shape[1]} columns but H has {Hb.shape[0]} rows; they must match"
        )
    if shape is not None and (Wb.shape[0], Hb.shape[1]) != tuple(shape):
        raise InputError(
            f"W⊗H has shape {(Wb.shape[0], Hb.shape[1])} but X has shape {tuple(shape)}"
        )
    return Wb, Hb
