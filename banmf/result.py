"""The one result type: :class:`Factorization`, which every method's fit gives, every
refinement returns, and which saves and loads as itself."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

__all__ = ["Factorization", "relative_error"]

#: Fitted attributes that a Factorization holds as fields of its own, or that are too large to
#: keep in ``info`` (the continuous factors stay on the estimator).
_NOT_INFO = frozenset(
    {
        "W_",
        "components_",
        "reconstruction_err_",
        "relative_error_",
        "n_iter_",
        "fit_seconds_",
        "interrupted_",
        "loss_curve_",
        "W_continuous_",
        "H_continuous_",
        "n_features_in_",
        "nnz_",
        "n_components_",
    }
)
#: Larger arrays are left out of ``info`` (it is saved as JSON).
_INFO_MAX_SIZE = 10_000


def relative_error(error: int, nnz: int) -> float:
    """Boolean relative error ``error / nnz(X)`` (0 for a perfect fit of an all-zero X)."""
    if nnz == 0:
        return 0.0 if error == 0 else float("inf")
    return error / nnz


@dataclass(frozen=True, eq=False)
class Factorization:
    """A Boolean factorization X ≈ W⊗H: the factors, how good they are, how they were made,
    and what they are a factorization of.

    Attributes
    ----------
    W : ndarray of shape (n, k), bool
    H : ndarray of shape (k, m), bool
    error : int
        Hamming error ``|X − W⊗H|`` over the observed cells.
    relative_error : float
        ``error / nnz(X)`` (the observed ones).
    method : str
        The registry name (:data:`banmf.METHODS`) of the method, or the step that made it
        (``"booleanize"``, ``"refine_thresholds"``, ``"polish"``, ``"planted"``).
    params : dict
        Every parameter of the method, defaults included.
    n_iter : int
        Iterations, greedy steps or rounds the method ran.
    seconds : float
        Wall time of the fit.
    interrupted : bool
        Ctrl-C cut the fit short: this is the best result it had.
    loss_curve : ndarray or None
        The relaxed objective per iteration (iterative methods).
    info : dict
        What the method found besides the factors: thresholds, the errors of the refinement
        steps, of every start, ... (the estimator's small fitted attributes, by name).
    meta : dict
        Provenance: library versions, creation time, the input file and its sha256, the seed;
        whatever the writer added.
    X : csr_array or None
        The factorized 0/1 matrix (its observed ones), when known; saved with the result up
        to 2,000,000 nonzeros.
    row_labels, col_labels : list of str or None
        Names of the rows (of W) and columns (of H), when the data had them.
    missing : csr_array or None
        The cells whose value was unknown, for data fitted with ``missing=`` (saved).
    observed : csr_array or None
        The cells that were observed, for data fitted with ``observed=`` (saved); every other
        cell was unknown. At most one of the two is set; neither: every cell was observed.
    estimator : object or None
        The fitted estimator (not saved).
    """

    W: np.ndarray
    H: np.ndarray
    error: int
    relative_error: float
    method: str = ""
    params: dict = field(default_factory=dict)
    n_iter: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    loss_curve: np.ndarray | None = None
    info: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    X: sp.csr_array | None = None
    row_labels: list | None = None
    col_labels: list | None = None
    missing: sp.csr_array | None = None
    observed: sp.csr_array | None = None
    estimator: object = None

    @property
    def shape(self) -> tuple[int, int]:
        """``(n, m)``: the shape of the factorized matrix."""
        return self.W.shape[0], self.H.shape[1]

    @property
    def n_components(self) -> int:
        """The rank k."""
        return self.W.shape[1]

    @classmethod
    def from_estimator(
        cls, estimator, *, method: str | None = None, X=None, seconds: float | None = None, **fields
    ) -> Factorization:
        """The result of a fitted estimator.

        Parameters
        ----------
        estimator : fitted banmf estimator
        method : str, optional
            Its registry name (default: found in :data:`banmf.METHODS` by class).
        X : csr_array, optional
            The matrix it was fitted to (kept in :attr:`X`).
        seconds : float, optional
            Wall time (default: the estimator's ``fit_seconds_``).
        **fields
            Other fields (``meta``, ``row_labels``, ...).
        """
        from .models import METHODS

        estimator._check_fitted()
        if method is None:
            method = next(
                (name for name, cls_ in METHODS.items() if type(estimator) is cls_),
                type(estimator).__name__,
            )
        info = {
            name: value
            for name, value in vars(estimator).items()
            if name.endswith("_")
            and not name.startswith("_")
            and name not in _NOT_INFO
            and _small(value)
        }
        return cls(
            W=estimator.W_,
            H=estimator.components_,
            error=int(estimator.reconstruction_err_),
            relative_error=float(estimator.relative_error_),
            method=method,
            params={k: v for k, v in estimator.get_params(deep=False).items() if k != "callback"},
            n_iter=int(estimator.n_iter_),
            seconds=float(estimator.fit_seconds_ if seconds is None else seconds),
            interrupted=bool(getattr(estimator, "interrupted_", False)),
            loss_curve=getattr(estimator, "loss_curve_", None),
            info=info,
            X=X,
            estimator=estimator,
            **fields,
        )

    @classmethod
    def from_factors(cls, X, W, H, *, error: int | None = None, **fields) -> Factorization:
        """The result of Boolean factors W (n, k) and H (k, m) of the 0/1 matrix X (its
        observed ones kept in :attr:`X`; ``missing`` or ``observed`` among ``fields`` mark
        unknown cells); ``error`` is computed unless given (by a caller that knows it)."""
        from ._boolean import mismatches
        from ._validation import check_binary_matrix, check_boolean_factors, check_unknown

        X = check_binary_matrix(X)
        W, H = check_boolean_factors(W, H, X.shape)
        for name in ("missing", "observed"):
            if fields.get(name) is not None:
                fields[name] = check_binary_matrix(fields[name], name)
        X, unknown = check_unknown(X, fields.get("missing"), fields.get("observed"))
        error = mismatches(X, W, H, unknown) if error is None else int(error)
        return cls(
            W=W, H=H, error=error, relative_error=relative_error(error, X.nnz), X=X, **fields
        )

    @property
    def n_observed(self) -> int:
        """Observed cells (every cell when nothing was unknown)."""
        from ._boolean import count_unknown

        n, m = self.shape
        return n * m - count_unknown(self.shape, self.missing, self.observed)

    def unknown(self, X=None):
        """The data's observed ones and its unknown cells as the fit saw them:
        ``(X, Unknown or None)`` (X: the data, default :attr:`X`)."""
        from ._validation import check_binary_matrix, check_unknown

        X = self._data(X)
        return check_unknown(check_binary_matrix(X), self.missing, self.observed)

    def _data(self, X):
        if X is None:
            if self.X is None:
                raise ValueError("this result holds no data (too large to embed); pass X")
            return self.X
        return X

    def predict(self, rows, cols) -> np.ndarray:
        """The Boolean product ``W⊗H`` at the cells ``(rows[q], cols[q])``: the factorization's
        guess for cells whose value was unknown (:func:`banmf.predict_cells`)."""
        from .booleanize import predict_cells

        return predict_cells(self.W, self.H, rows, cols)

    def complete(self, X=None) -> sp.csr_array:
        """The data with its unknown cells filled in by ``W⊗H``: observed cells keep their
        values, unknown ones take the prediction.

        Parameters
        ----------
        X : array-like or sparse, optional
            The data (default :attr:`X`, the observed ones the fit saw).

        Returns
        -------
        scipy.sparse.csr_array, bool
            With ``observed=`` data this holds every predicted one off the observed cells: as
            large as the product's ones there.
        """
        from ._boolean import mask_union, support_mask_from_keys

        X, unknown, keys, values = self._guesses(X)
        if unknown is None:
            return X
        guessed = keys if values is None else keys[values]
        return mask_union(X, support_mask_from_keys(guessed, X.shape))

    def filled(self, X=None) -> tuple[np.ndarray, np.ndarray | None]:
        """The cells :meth:`complete` fills in, as sorted row-major keys ``i * m + j``, and
        their predicted values (bool).

        With ``missing=`` data: every unknown cell and its value. With ``observed=`` data, where
        most cells are unknown: only those predicted 1 (that are not ones of X), and values
        None: a list of recommendations, not n·m cells. Nothing is unknown: none.
        """
        from ._boolean import cell_keys, in_sorted
        from ._validation import check_binary_matrix

        data = check_binary_matrix(self._data(X))
        _, unknown, keys, values = self._guesses(data)
        if unknown is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
        if unknown.observed:
            return keys[~in_sorted(keys, cell_keys(data))], None
        return keys, values

    def _guesses(self, X):
        """``(X, unknown, keys, values)``: the data's observed ones and unknown cells (as
        :meth:`unknown`), and the product's guesses there: every unknown cell's key and value,
        or, with ``observed=`` data, the keys of the product's ones off the observed zeros
        (values None)."""
        from ._boolean import cell_keys, in_sorted
        from .booleanize import boolean_product

        X, unknown = self.unknown(X)
        if unknown is None:
            return X, None, None, None
        if unknown.observed:
            product = cell_keys(boolean_product(self.W, self.H))
            return X, unknown, product[~in_sorted(product, cell_keys(unknown.cells))], None
        keys = cell_keys(unknown.cells)
        m = X.shape[1]
        return X, unknown, keys, self.predict(keys // m, keys % m)

    def patterns(self, X=None, *, top: int | None = None) -> list:
        """Every factor as a pattern, largest contribution first: :func:`banmf.patterns`."""
        from .patterns import patterns

        return patterns(self, X, top=top)

    def replace(self, **changes) -> Factorization:
        """A copy with some fields changed (e.g. ``meta``)."""
        return dataclasses.replace(self, **changes)

    def save(self, path) -> None:
        """Write this result to ``path`` (a compressed ``.npz``), atomically; :meth:`load`
        reads it back (everything but :attr:`estimator`)."""
        from .io import save_result

        save_result(self, path)

    @classmethod
    def load(cls, path) -> Factorization:
        """Read a result written by :meth:`save`.

        Raises
        ------
        FileNotFoundError
            The file does not exist.
        ValueError
            In one line, ``"<path>: not a banmf result file (<reason>)"`` for anything else, or
            a result written by a newer banmf.
        """
        from .io import load_result

        return load_result(path)

    def savable_info(self) -> dict:
        """The part of :attr:`info` that :meth:`save` keeps: values small enough for its JSON
        metadata (arrays up to 10,000 values); the scaled factors of a booleanization are not."""
        return {key: value for key, value in self.info.items() if _small(value)}

    def __repr__(self) -> str:
        n, m = self.shape
        return (
            f"Factorization({self.method or 'unknown'}, {n}×{m}, k={self.n_components}, "
            f"error={self.error}{', interrupted' if self.interrupted else ''})"
        )


def _small(value) -> bool:
    """Whether a fitted attribute is small enough to keep (and save) in ``info``."""
    if isinstance(value, np.ndarray):
        return value.size <= _INFO_MAX_SIZE
    if isinstance(value, (list, tuple)):
        return len(value) <= _INFO_MAX_SIZE and all(_small(v) for v in value)
    if isinstance(value, dict):
        return len(value) <= _INFO_MAX_SIZE and all(_small(v) for v in value.values())
    return isinstance(value, (int, float, str, bool, np.number, np.bool_)) or value is None
