"""The one data type: a 0/1 matrix's observed ones, its unknown cells and its labels.

A :class:`Dataset` is built and validated once, where data enters banmf (a reader, a fit, a
public function given ``missing=`` / ``observed=``: :meth:`Dataset.of`), and every layer below
takes it and trusts it: ``X`` is a canonical support mask of the observed ones, ``unknown`` the
unknown cells in whichever sparse form is small, and the row-block views (:meth:`Dataset.rows`)
are what a block backend's workers hold.
"""

from __future__ import annotations

import functools

import numpy as np
import scipy.sparse as sp

from ..exceptions import InputError
from .masks import (
    Unknown,
    cell_keys,
    csr_from_parts,
    in_sorted,
    mask_difference,
    mask_union,
    mismatches,
    support_mask_from_keys,
    transpose_mask,
)
from .validation import (
    check_binary_matrix,
    frame_labels,
    frame_na,
    is_anndata,
    is_dataframe,
)

__all__ = ["Dataset"]

_FIELDS = ("X", "row_labels", "col_labels", "name", "meta", "missing", "observed")


class Dataset:
    """A 0/1 matrix with its unknown cells, labels and description.

    Built once and then read-only: the constructor validates its arguments (as a fit does)
    and every banmf function given a Dataset trusts it, so a Dataset passed to many fits is
    checked once.

    Parameters
    ----------
    X : array-like, scipy sparse or pandas DataFrame of shape (n, m)
        0/1 values (booleans accepted). A DataFrame's NA cells are unknown cells.
    row_labels, col_labels : list of str, optional
        One name per row / column (default: a DataFrame's index and columns).
    name : str, default ""
        Where the data came from (a file's name), for messages and reports.
    meta : dict, optional
        Sidecar metadata (source, license, transformation, ...).
    missing : array-like or sparse of shape (n, m), optional
        1 marks a cell whose value is unknown (an unrecorded vote, ``?`` in a file).
    observed : array-like or sparse of shape (n, m), optional
        The complement, for data where most cells are unknown (user-item logs): 1 marks an
        observed cell. Give ``missing`` or ``observed``, not both.

    Attributes
    ----------
    X : csr_array of shape (n, m), bool
        The observed ones, as a canonical support mask (a one given on an unknown cell is
        dropped: its value is not used).
    missing, observed : csr_array of shape (n, m), bool, or None
        The unknown cells in the form they were given (a DataFrame's NA and a file's unknown
        cells as ``missing``); both None when every cell is observed.
    unknown : banmf.data.masks.Unknown or None
        The same cells in the form banmf's layers read them (the unknown cells, or the
        observed zeros when most cells are unknown).
    ones_given : int
        The ones of the input, those on unknown cells included (a fit warns when the unknown
        cells hide all of them).
    row_labels, col_labels, name, meta
        As given.

    Examples
    --------
    >>> import numpy as np
    >>> from banmf.io import Dataset
    >>> data = Dataset(np.array([[1, 0], [1, 1]]), missing=np.array([[0, 1], [0, 0]]))
    >>> data.shape, data.nnz, data.n_observed
    ((2, 2), 3, 3)
    """

    X: sp.csr_array
    unknown: Unknown | None
    ones_given: int
    row_labels: list | None
    col_labels: list | None
    name: str
    meta: dict

    def __init__(
        self,
        X,
        row_labels=None,
        col_labels=None,
        name: str = "",
        meta: dict | None = None,
        missing=None,
        observed=None,
    ):
        if isinstance(X, Dataset):
            raise InputError("X is already a Dataset; use Dataset.of(X, ...) to add unknown cells")
        frame_rows, frame_cols = frame_labels(X)
        X, unknown, ones = _build(X, missing, observed)
        self._init(
            X,
            unknown,
            _labels(frame_rows if row_labels is None else row_labels, X.shape[0], "row_labels"),
            _labels(frame_cols if col_labels is None else col_labels, X.shape[1], "col_labels"),
            str(name),
            {} if meta is None else dict(meta),
            ones,
        )

    def _init(self, X, unknown, row_labels, col_labels, name, meta, ones=None) -> None:
        # The ones given, before those on unknown cells left X: a fit warns when none is left.
        object.__setattr__(self, "ones_given", X.nnz if ones is None else int(ones))
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "unknown", unknown)
        object.__setattr__(self, "row_labels", row_labels)
        object.__setattr__(self, "col_labels", col_labels)
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "meta", meta)

    @classmethod
    def trusted(
        cls, X, unknown=None, row_labels=None, col_labels=None, name="", meta=None, ones=None
    ) -> Dataset:
        """A Dataset of parts that are already canonical (a canonical support mask of the
        observed ones, an :class:`Unknown` that never meets it, labels of the right lengths):
        the views and derived data inside banmf, built without checking them again."""
        data = object.__new__(cls)
        data._init(X, unknown, row_labels, col_labels, name, {} if meta is None else meta, ones)
        return data

    @classmethod
    def of(cls, X, missing=None, observed=None) -> Dataset:
        """The boundary of every public function: ``X`` as a Dataset, validated once.

        A Dataset is returned as it is (it was validated when built); with ``missing`` or
        ``observed`` too, those cells become unknown as well. An AnnData is read as
        :func:`banmf.factorize` reads it (its ``X``, obs and var names, and layer ``missing``),
        then taken as a Dataset. Anything else (an array, a sparse matrix, a DataFrame) is
        built as :class:`Dataset` builds it.
        """
        if is_anndata(X):
            from ..io.anndata import anndata_parts  # anndata's own import waits for its first use

            X = cls(**anndata_parts(X))
        if not isinstance(X, cls):
            return cls(X, missing=missing, observed=observed)
        if missing is None and observed is None:
            return X
        if observed is None:
            return X.hide(_mask(missing, "missing", X.shape))
        if missing is not None:
            raise InputError("give missing or observed, not both (one is the other's complement)")
        O = _mask(observed, "observed", X.shape)
        if X.unknown is not None:  # what was unknown stays so
            O = (
                _intersection(O, X.observed)
                if X.unknown.observed
                else mask_difference(O, X.unknown.cells)
            )
        Xo, unknown, _ = _build(X.X, None, O)
        return cls.trusted(Xo, unknown, X.row_labels, X.col_labels, X.name, X.meta, X.ones_given)

    def __setattr__(self, name, value):
        raise AttributeError(f"a Dataset is read-only; use .replace({name}=...)")

    def __reduce__(self):
        return (
            _rebuild,
            (
                self.X,
                self.unknown,
                self.row_labels,
                self.col_labels,
                self.name,
                self.meta,
                self.ones_given,
            ),
        )

    def __repr__(self) -> str:
        n, m = self.shape
        parts = [f"shape=({n}, {m})", f"nnz={self.nnz}"]
        if self.unknown is not None:
            parts.append(f"unknown={n * m - self.n_observed}")
        if self.name:
            parts.insert(0, repr(self.name))
        return f"Dataset({', '.join(parts)})"

    # -- what every layer reads -----------------------------------------------------------

    @property
    def shape(self) -> tuple[int, int]:
        """``(n, m)``."""
        return self.X.shape

    @property
    def nnz(self) -> int:
        """Observed ones."""
        return int(self.X.nnz)

    @property
    def n_observed(self) -> int:
        """Observed cells (every cell when none is unknown)."""
        n, m = self.shape
        return n * m if self.unknown is None else self.unknown.observed_count(self.X.nnz)

    @functools.cached_property
    def missing(self) -> sp.csr_array | None:
        """The unknown cells as a mask, when they were given that way (else None)."""
        u = self.unknown
        return None if u is None or u.observed else u.cells

    @functools.cached_property
    def observed(self) -> sp.csr_array | None:
        """The observed cells as a mask, when most cells are unknown (else None)."""
        u = self.unknown
        return None if u is None or not u.observed else mask_union(self.X, u.cells)

    @functools.cached_property
    def T(self) -> Dataset:
        """The transpose (labels swapped), its unknown cells with it."""
        return Dataset.trusted(
            transpose_mask(self.X),
            None if self.unknown is None else self.unknown.T,
            self.col_labels,
            self.row_labels,
            self.name,
            self.meta,
        )

    def error(self, W: np.ndarray, H: np.ndarray) -> int:
        """The Hamming error of Boolean factors W (n, k) and H (k, m) on the observed cells,
        counted on the support (trusted factors: bool, of this data's shape)."""
        return mismatches(self.X, W, H, self.unknown)

    def rows(self, start: int, stop: int) -> Dataset:
        """Rows ``start`` to ``stop`` (a row block) with their unknown cells, as a view of the
        same arrays; without labels (a block is for computing, and is sent to a worker)."""
        return Dataset.trusted(
            _row_slice(self.X, start, stop),
            None
            if self.unknown is None
            else Unknown(_row_slice(self.unknown.cells, start, stop), self.unknown.observed),
        )

    def hide(self, cells: sp.csr_array) -> Dataset:
        """This data with the cells of the canonical mask ``cells`` unknown as well (held-out
        cells, a hold-out fold, a user's ``--missing`` on top of a file's ``?``): their ones
        leave X, and the unknown cells keep their form."""
        if cells.nnz == 0:
            return self
        u = self.unknown
        if u is not None and u.observed:
            # Observed zeros that are now hidden stop being observed.
            unknown = Unknown(mask_difference(u.cells, cells), observed=True)
        else:
            unknown = Unknown(cells if u is None else mask_union(u.cells, cells), observed=False)
        return Dataset.trusted(
            mask_difference(self.X, cells),
            unknown,
            self.row_labels,
            self.col_labels,
            self.name,
            self.meta,
            self.ones_given,
        )

    def replace(self, **changes) -> Dataset:
        """A copy with some of the constructor's arguments changed (validated again). A new
        ``X`` without new ``missing`` / ``observed`` has no unknown cells."""
        unknown_given = "missing" in changes or "observed" in changes
        args = {name: getattr(self, name) for name in _FIELDS}
        if unknown_given:
            args["missing"] = changes.pop("missing", None)
            args["observed"] = changes.pop("observed", None)
        args.update(changes)
        if not unknown_given and "X" in changes:
            args["missing"] = args["observed"] = None
        return Dataset(**args)


def _rebuild(X, unknown, row_labels, col_labels, name, meta, ones) -> Dataset:
    return Dataset.trusted(X, unknown, row_labels, col_labels, name, meta, ones)


def _row_slice(M: sp.csr_array, start: int, stop: int) -> sp.csr_array:
    a, b = M.indptr[start], M.indptr[stop]
    return csr_from_parts(
        M.indptr[start : stop + 1] - a, M.indices[a:b], (stop - start, M.shape[1])
    )


def _labels(labels, size: int, name: str) -> list | None:
    if labels is None:
        return None
    labels = [str(v) for v in labels]
    if len(labels) != size:
        raise InputError(f"{name} has {len(labels)} entries but the data has {size}")
    return labels


def _mask(mask, name: str, shape: tuple[int, int]) -> sp.csr_array:
    M = check_binary_matrix(mask, name)
    if M.shape != shape:
        raise InputError(f"{name} has shape {M.shape} but X has shape {shape}; they must match")
    return M


def _intersection(A: sp.csr_array, B: sp.csr_array) -> sp.csr_array:
    keys = cell_keys(A)
    return support_mask_from_keys(keys[in_sorted(keys, cell_keys(B))], A.shape)


def _build(X, missing, observed) -> tuple[sp.csr_array, Unknown | None, int]:
    """Validate X and its unknown cells: ``(observed ones, Unknown or None, ones given)``."""
    if missing is not None and observed is not None:
        raise InputError("give missing or observed, not both (one is the other's complement)")
    na = None
    if is_dataframe(X) and (found := frame_na(X)) is not None:
        X, na = found
    X = check_binary_matrix(X)
    ones = X.nnz
    n, m = X.shape
    if observed is not None:
        O = _mask(observed, "observed", X.shape)
        if na is not None:
            O = mask_difference(O, na)
        if O.nnz == n * m:
            return X, None, ones
        return _intersection(X, O), Unknown(mask_difference(O, X), observed=True), ones
    M = None if missing is None else _mask(missing, "missing", X.shape)
    if na is not None:
        M = na if M is None else mask_union(M, na)
    if M is None or M.nnz == 0:
        return X, None, ones
    return mask_difference(X, M), Unknown(M, observed=False), ones
