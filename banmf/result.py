"""The one result type: :class:`Factorization`, which every method's fit gives, every
refinement returns, and which saves and loads as itself."""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .data.dataset import Dataset
from .data.masks import (
    cell_keys,
    hits_and_cover,
    in_sorted,
    mask_union,
    product_at,
    product_mask,
    support_mask_from_keys,
)
from .data.validation import check_binary_matrix, check_boolean_factors, check_cells
from .exceptions import InputError
from .runtime.files import (
    atomic_path,
    jsonable,
    nbytes,
    npz_array,
    open_npz,
    reason_of,
    signed,
    stored_pattern,
    versions,
)
from .runtime.memory import check_memory
from .selection.predictor import FOLDS, KINDS, MAJORITY, Predictor

__all__ = ["Factorization", "relative_error"]

#: The result file: a compressed ``.npz`` of W, H (bits packed), the loss curve, the data's
#: masks and JSON metadata, told by its ``format`` and ``format_version``.
RESULT_FORMAT = "banmf-factorization"
RESULT_VERSION = 1
#: Store X's support inside a result (for `banmf plot` and `banmf evaluate`) up to this size.
EMBED_MAX_NNZ = 2_000_000

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
#: The one registry of methods by name (:data:`banmf.METHODS`), read here for the names
#: :meth:`Factorization.from_estimator` gives: :mod:`banmf.models` fills it with its
#: estimators when it is imported (as it is before any of them exists), so that the result
#: type imports no model.
METHODS: dict[str, type] = {}
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
    predictor : Predictor or None
        How :meth:`predict`, :meth:`complete` and :meth:`filled` guess unknown cells, when the
        fit chose one (BANMF with unknown cells: its ``predictor_``; saved): ``kind``
        ("product", "vote", "nmf", "majority" (the column majority, which reads no factor),
        or "folds" with ``n_components="auto"``), ``threshold``,
        and the calibration behind
        :meth:`predict_proba` with its ``report``. None: ``W⊗H``.
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
    predictor: Predictor | None = None

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
        estimator._check_fitted()
        if method is None:
            # Its class, or the registered class it extends (banmf.distributed.BANMF: "banmf").
            method = next(
                (
                    name
                    for kind in type(estimator).__mro__
                    for name, cls_ in METHODS.items()
                    if kind is cls_
                ),
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
            # A callback and a Dask client are handles of this process, not settings of the fit.
            params={
                k: v
                for k, v in estimator.get_params(deep=False).items()
                if k not in ("callback", "client")
            },
            n_iter=int(estimator.n_iter_),
            seconds=float(estimator.fit_seconds_ if seconds is None else seconds),
            interrupted=bool(getattr(estimator, "interrupted_", False)),
            loss_curve=getattr(estimator, "loss_curve_", None),
            info=info,
            X=X,
            estimator=estimator,
            predictor=getattr(estimator, "predictor_", None),
            **fields,
        )

    @classmethod
    def from_factors(cls, X, W, H, *, error: int | None = None, **fields) -> Factorization:
        """The result of Boolean factors W (n, k) and H (k, m) of the 0/1 matrix X (its
        observed ones kept in :attr:`X`; ``missing`` or ``observed`` among ``fields`` mark
        unknown cells); ``error`` is computed unless given (by a caller that knows it)."""
        data = Dataset.of(X, fields.pop("missing", None), fields.pop("observed", None))
        W, H = check_boolean_factors(W, H, data.shape)
        error = data.error(W, H) if error is None else int(error)
        return cls(
            W=W,
            H=H,
            error=error,
            relative_error=relative_error(error, data.nnz),
            X=data.X,
            missing=data.missing,
            observed=data.observed,
            **fields,
        )

    @property
    def n_observed(self) -> int:
        """Observed cells (every cell when nothing was unknown)."""
        from .data.masks import count_unknown

        n, m = self.shape
        return n * m - count_unknown(self.shape, self.missing, self.observed)

    def data(self, X=None) -> Dataset:
        """The data as the fit saw it: X (default :attr:`X`) with this result's unknown cells
        (:attr:`missing` / :attr:`observed`), as a :class:`banmf.io.Dataset`."""
        return Dataset.of(self._data(X), self.missing, self.observed)

    def evaluate(self, X=None) -> dict:
        """The errors of these factors on the data X with this result's unknown cells
        (:attr:`missing` / :attr:`observed`; :meth:`replace` them to score against others).

        Parameters
        ----------
        X : array-like or sparse of shape (n, m), optional
            The 0/1 data (default :attr:`X`); its values on unknown cells are not counted.

        Returns
        -------
        dict
            ``error`` (the Hamming error on the observed cells), ``relative_error`` (error /
            observed ones), ``false_negatives`` (ones missed), ``false_positives`` (zeros
            covered) and ``unknown_cells`` (cells not counted).

        Examples
        --------
        >>> from banmf import Factorization
        >>> X = [[1, 1, 0], [0, 1, 1]]
        >>> res = Factorization.from_factors(X, [[1], [1]], [[0, 1, 1]])
        >>> scores = res.evaluate()
        >>> scores["error"], scores["false_negatives"], scores["false_positives"]
        (2, 1, 1)
        >>> res.replace(missing=[[1, 0, 1], [0, 0, 0]]).evaluate(X)["error"]
        0
        """
        data = self.data(X)
        X, unknown = data.X, data.unknown
        hits, cover = hits_and_cover(X, *check_boolean_factors(self.W, self.H, X.shape), unknown)
        missed, covered = X.nnz - hits, cover - hits
        return {
            "error": missed + covered,
            "relative_error": relative_error(missed + covered, X.nnz),
            "false_negatives": missed,
            "false_positives": covered,
            "unknown_cells": X.shape[0] * X.shape[1] - data.n_observed,
        }

    def _data(self, X):
        if X is None:
            if self.X is None:
                raise InputError("this result holds no data (too large to embed); pass X")
            return self.X
        return X

    def predict(self, rows, cols) -> np.ndarray:
        """The guess (bool) at the cells ``(rows[q], cols[q])`` for cells whose value was
        unknown: by :attr:`predictor` when the fit chose one, else the Boolean product
        ``W⊗H`` (:func:`banmf.predict_cells`)."""
        Wb, Hb = check_boolean_factors(self.W, self.H)
        rows, cols = check_cells(rows, cols, self.shape)
        if self.predictor is None:
            return product_at(Wb, Hb, rows, cols)
        return self.predictor.predict(Wb, Hb, rows, cols)

    def predict_proba(self, rows, cols) -> np.ndarray:
        """The probability that each cell ``(rows[q], cols[q])`` is 1: the :attr:`predictor`'s
        score calibrated on the observed cells its choice left out (docs/missing.md).

        Raises
        ------
        banmf.exceptions.InputError
            The result has no predictor (a fit without unknown cells, a method other than
            BANMF, or a result saved before banmf had them).

        Examples
        --------
        >>> import banmf
        >>> from banmf.model_selection import hold_out
        >>> X, _, _ = banmf.make_boolean(60, 40, 3, density=0.3, noise=0.05, random_state=0)
        >>> masks, hidden = hold_out(X, 0.1, random_state=0)
        >>> res = banmf.factorize(X, 3, random_state=0, **masks)
        >>> p = res.predict_proba([0, 1], [0, 0])
        >>> bool(((p >= 0) & (p <= 1)).all())
        True
        """
        if self.predictor is None:
            raise InputError(
                "this result has no calibrated predictor: fit BANMF with unknown cells "
                "(missing= or observed=)"
            )
        Wb, Hb = check_boolean_factors(self.W, self.H)
        return self.predictor.predict_proba(Wb, Hb, *check_cells(rows, cols, self.shape))

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
        X, unknown, keys, values = self._guesses(X)
        if unknown is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
        if unknown.observed:
            return keys[~in_sorted(keys, cell_keys(X))], None
        return keys, values

    def _guesses(self, X):
        """``(X, unknown, keys, values)``: the data's observed ones and unknown cells (as
        :meth:`data`), and the product's guesses there: every unknown cell's key and value,
        or, with ``observed=`` data, the keys of the product's ones off the observed zeros
        (values None)."""
        data = self.data(X)
        X, unknown = data.X, data.unknown
        if unknown is None:
            return X, None, None, None
        if unknown.observed and self.predictor is not None and self.predictor.kind == MAJORITY:
            # The column majority: every cell of the columns whose share is above one half.
            n, m = X.shape
            cols = np.flatnonzero(self.predictor.factors[0] > self.predictor.threshold)
            keys = (np.arange(n, dtype=np.int64)[:, None] * m + cols[None, :]).ravel()
            keys = np.sort(keys)
            return X, unknown, keys[~in_sorted(keys, cell_keys(unknown.cells))], None
        if unknown.observed:
            # Cells no start covers score 0 in a vote: the candidates are the products' ones.
            factors = [check_boolean_factors(self.W, self.H)]
            if self.predictor is not None:
                factors = self.predictor.boolean_factors(*factors[0])
            product = np.unique(np.concatenate([cell_keys(product_mask(*f)) for f in factors]))
            product = product[~in_sorted(product, cell_keys(unknown.cells))]
            if self.predictor is not None and self.predictor.votes:
                m = X.shape[1]
                product = product[self.predict(product // m, product % m)]
            return X, unknown, product, None
        keys = cell_keys(unknown.cells)
        m = X.shape[1]
        return X, unknown, keys, self.predict(keys // m, keys % m)

    def patterns(self, X=None, *, top: int | None = None) -> list:
        """Every factor as a pattern, largest contribution first: :func:`banmf.patterns`."""
        from .report.patterns import patterns

        return patterns(self, X, top=top)

    def report(self, path, X=None, *, selection=None, title: str | None = None) -> None:
        """Write a self-contained HTML report of this factorization to ``path`` (atomically;
        the destination is checked first): a summary, the data reordered by factor as an
        image, one card per pattern and, with ``selection`` (a :class:`banmf.RankSelection`
        or the JSON of ``banmf select-k --json``), its criteria against k.
        ``banmf.report.write_report`` describes the parameters.

        Examples
        --------
        >>> import tempfile, pathlib
        >>> from banmf import factorize, make_boolean
        >>> X, _, _ = make_boolean(40, 30, 3, density=0.3, random_state=0)
        >>> res = factorize(X, 3, random_state=0)
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     res.report(pathlib.Path(folder) / "report.html")
        """
        from .report.html import write_report

        write_report(self, path, X, selection=selection, title=title)

    def replace(self, **changes) -> Factorization:
        """A copy with some fields changed (e.g. ``meta``)."""
        return dataclasses.replace(self, **changes)

    def save(self, path) -> None:
        """Write this result to ``path`` (a compressed ``.npz``), atomically; :meth:`load`
        reads it back (everything but :attr:`estimator`)."""
        _write(self, path)

    @classmethod
    def load(cls, path) -> Factorization:
        """Read a result written by :meth:`save`.

        Raises
        ------
        FileNotFoundError
            The file does not exist.
        banmf.exceptions.InputError
            In one line, ``"<path>: not a banmf result file (<reason>)"`` for anything else, or
            a result written by a newer banmf (a ``ValueError``).
        """
        return _read(path)

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


#: Keys of a result's metadata that are fields of :class:`banmf.Factorization` (the rest is
#: its ``meta``), and the keys of the format itself.
_FIELD_KEYS = (
    "method",
    "params",
    "error",
    "relative_error",
    "n_iter",
    "seconds",
    "interrupted",
    "info",
)
_FORMAT_KEYS = ("format", "format_version", "shape", "n_components", "labels", "predictor")


def _write(result, path) -> None:
    """Write ``result`` as :meth:`Factorization.save` does."""
    W, H = check_boolean_factors(result.W, result.H)
    n, m = W.shape[0], H.shape[1]
    meta = {
        **result.meta,
        "format": RESULT_FORMAT,
        "format_version": RESULT_VERSION,
        "shape": [int(n), int(m)],
        "n_components": int(W.shape[1]),
        **{key: getattr(result, key) for key in _FIELD_KEYS},
        "info": result.savable_info(),
        "versions": versions(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    if result.row_labels is not None or result.col_labels is not None:
        meta["labels"] = {"rows": result.row_labels, "cols": result.col_labels}
    arrays = {"W": np.packbits(W, axis=1), "H": np.packbits(H, axis=1)}
    if result.loss_curve is not None:
        arrays["loss_curve"] = np.asarray(result.loss_curve, dtype=np.float64)
    if result.predictor is not None:
        meta["predictor"] = result.predictor.to_json()
        for name, factor in zip(("W", "H"), result.predictor.factors):
            # The starts' stacked Boolean factors as bits; continuous ones as float64.
            vote = result.predictor.votes
            arrays[f"predictor_{name}"] = np.packbits(factor, axis=-1) if vote else factor
    for name, M in (("X", result.X), ("missing", result.missing), ("observed", result.observed)):
        if M is None:
            continue
        M = check_binary_matrix(M)
        if M.shape != (n, m):
            raise InputError(f"{name} has shape {M.shape}, the factors give {(n, m)}")
        if name == "X":
            meta["nnz"] = int(M.nnz)
        if name != "X" or M.nnz <= EMBED_MAX_NNZ:
            arrays[f"{name}_indptr"], arrays[f"{name}_indices"] = M.indptr, M.indices
    arrays["meta"] = np.frombuffer(json.dumps(jsonable(meta)).encode("utf-8"), dtype=np.uint8)
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        np.savez_compressed(fh, **arrays)


def _positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _read(path) -> Factorization:
    """The result in the file ``path`` (:meth:`Factorization.load`)."""
    path = Path(path)

    def not_result(reason):
        return InputError(f"{path}: not a banmf result file ({reason})")

    zf, headers = open_npz(path, not_result)
    with zf:
        if "meta" not in headers:
            raise not_result("no metadata")
        shape_, dtype = headers["meta"]
        if len(shape_) != 1 or dtype != np.uint8 or shape_[0] > 1 << 26:
            raise not_result("no metadata")
        try:
            meta = json.loads(bytes(npz_array(zf, "meta")).decode("utf-8"))
        except (ValueError, RecursionError):
            raise not_result("corrupt metadata") from None
        except Exception as exc:  # the archive's own damage (CRC, zlib, truncation)
            raise not_result(f"damaged: {reason_of(exc)}") from None
        if not isinstance(meta, dict) or meta.get("format") != RESULT_FORMAT:
            raise not_result("no banmf metadata")
        version = meta.get("format_version", 0)
        if not isinstance(version, int) or isinstance(version, bool):
            raise not_result("corrupt metadata: format_version")
        if version > RESULT_VERSION:
            raise InputError(f"{path}: written by a newer banmf (format version {version})")
        shape, k = meta.get("shape"), meta.get("n_components")
        if not (
            isinstance(shape, list)
            and len(shape) == 2
            and all(map(_positive_int, shape))
            and _positive_int(k)
        ):
            raise not_result("corrupt metadata: shape or n_components")
        n, m = shape
        expected = {"W": (n, -(-k // 8)), "H": (k, -(-m // 8))}
        for key, want in expected.items():
            if key not in headers:
                raise not_result(f"no {key}")
            if headers[key] != (want, np.dtype(np.uint8)):
                raise not_result(f"{key} does not match the recorded shape")
        if "loss_curve" in headers and (
            len(headers["loss_curve"][0]) != 1 or headers["loss_curve"][1].kind != "f"
        ):
            raise not_result("the loss curve is not a list of numbers")
        predictor = _predictor_of(meta, headers, (n, m, k), not_result)
        matrices = [
            name
            for name in ("X", "missing", "observed")
            if {f"{name}_indptr", f"{name}_indices"} & set(headers)
        ]
        embedded = [f"{name}_{part}" for name in matrices for part in ("indptr", "indices")]
        if any(
            key not in headers or len(headers[key][0]) != 1 or headers[key][1].kind not in "iu"
            for key in embedded
        ):
            raise not_result("damaged embedded matrix")
        parts = ("W", "H", "loss_curve", "predictor_W", "predictor_H", *embedded)
        stored = sum(nbytes(headers[key]) for key in parts if key in headers)
        nnz = sum(int(headers[f"{name}_indices"][0][0]) for name in matrices)
        # The packed arrays, the unpacked factors (a byte per entry), the embedded matrices.
        check_memory(stored + (n + m) * k + 8 * (nnz + 2 * (n + 1)), f"{path}: the factorization")
        try:
            data = {key: npz_array(zf, key) for key in parts if key in headers}
        except Exception as exc:
            raise not_result(f"damaged: {reason_of(exc)}") from None
    W = np.unpackbits(data["W"], axis=1, count=k).astype(bool)
    H = np.unpackbits(data["H"], axis=1, count=m).astype(bool)
    supports = {}
    for name in matrices:
        indptr, indices = signed(data[f"{name}_indptr"]), signed(data[f"{name}_indices"])
        supports[name] = stored_pattern(indptr, indices, (n, m))
        if supports[name] is None:
            raise not_result("damaged embedded matrix")
    if predictor is not None:
        kind = predictor["kind"]
        if kind == "product":
            factors = ()
        elif kind == MAJORITY:  # the columns' shares of ones
            factors = (data["predictor_W"],)
        else:
            factors = (data["predictor_W"], data["predictor_H"])
        predictor = Predictor(
            predictor["kind"],
            predictor["threshold"],
            np.asarray(predictor["edges"], dtype=np.float64),
            np.asarray(predictor["probabilities"], dtype=np.float64),
            predictor["report"],
            factors,
            predictor.get("member_kind", ""),
            tuple(predictor.get("sizes", ())),
        )
        if predictor.votes:
            factors = tuple(
                np.unpackbits(f, axis=2, count=count).astype(bool)
                for f, count in zip(factors, (k, m))
            )
            predictor = dataclasses.replace(predictor, factors=factors)
    result = _factorization_of(meta, W, H, data.get("loss_curve"), supports, not_result)
    return result if predictor is None else result.replace(predictor=predictor)


def _predictor_of(meta: dict, headers: dict, nmk: tuple, not_result) -> dict | None:
    """A result file's predictor metadata, checked against its arrays' headers (None when the
    file has none, as every file before banmf had predictors)."""
    saved = meta.get("predictor")
    if saved is None:
        return None
    n, m, k = nmk
    if not (
        isinstance(saved, dict)
        and saved.get("kind") in (*KINDS, FOLDS)
        and isinstance(saved.get("threshold"), (int, float))
        and isinstance(saved.get("edges"), list)
        and isinstance(saved.get("probabilities"), list)
        and len(saved["probabilities"]) == len(saved["edges"]) + 1
        and all(isinstance(v, (int, float)) for v in saved["edges"] + saved["probabilities"])
        and isinstance(saved.get("report"), dict)
    ):
        raise not_result("corrupt metadata: predictor")
    kind, sizes = saved["kind"], saved.get("sizes")
    if kind == FOLDS and not (
        saved.get("member_kind") in ("vote", "nmf")
        and isinstance(sizes, list)
        and sizes
        and all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes)
        and (saved["member_kind"] == "vote" or set(sizes) == {1})
    ):
        raise not_result("corrupt metadata: predictor")
    if kind == "product":
        want = {}
    elif kind == MAJORITY:
        want = {"W": ((m,), "f")}
    elif "vote" in (kind, saved.get("member_kind")):
        stacked = headers.get("predictor_W", ((),))[0]
        s = stacked[0] if len(stacked) == 3 else -1
        if kind == FOLDS and s != sum(sizes):
            s = -1
        want = {"W": ((s, n, -(-k // 8)), "u"), "H": ((s, k, -(-m // 8)), "u")}
    elif kind == FOLDS:  # each member's continuous factors, stacked
        want = {"W": ((len(sizes), n, k), "f"), "H": ((len(sizes), k, m), "f")}
    else:
        want = {"W": ((n, k), "f"), "H": ((k, m), "f")}
    for name, (shape, dtype_kind) in want.items():
        header = headers.get(f"predictor_{name}")
        if header is None or header[0] != shape or header[1].kind != dtype_kind:
            raise not_result(f"damaged predictor: {name}")
    return saved


def _factorization_of(meta: dict, W, H, loss_curve, supports: dict, not_result):
    """The :class:`banmf.Factorization` of a result file's parts (metadata checked here)."""
    labels = meta.get("labels") or {}
    fields = {key: meta[key] for key in _FIELD_KEYS if key in meta}
    kinds = {"method": str, "params": dict, "info": dict, "interrupted": bool}
    for key, kind in kinds.items():
        if key in fields and not isinstance(fields[key], kind):
            raise not_result(f"corrupt metadata: {key}")
    for key in ("error", "n_iter"):
        if key in fields and (not isinstance(fields[key], int) or isinstance(fields[key], bool)):
            raise not_result(f"corrupt metadata: {key}")
    for key in ("relative_error", "seconds"):
        if key in fields and (
            fields[key] is None
            or not isinstance(fields[key], (int, float))
            or isinstance(fields[key], bool)
        ):
            fields.pop(key)
    rows, cols = (labels.get(key) if isinstance(labels, dict) else None for key in ("rows", "cols"))
    for what, names, size in (("row", rows, W.shape[0]), ("column", cols, H.shape[1])):
        if names is not None and (not isinstance(names, list) or len(names) != size):
            raise not_result(f"corrupt metadata: {what} labels")
    provenance = {
        key: value for key, value in meta.items() if key not in _FIELD_KEYS + _FORMAT_KEYS
    }
    error = fields.pop("error", None)
    if error is None:
        raise not_result("corrupt metadata: error")
    return Factorization(
        W=W,
        H=H,
        error=error,
        relative_error=fields.pop("relative_error", float("nan")),
        **fields,
        loss_curve=loss_curve,
        meta=provenance,
        X=supports.get("X"),
        missing=supports.get("missing"),
        observed=supports.get("observed"),
        row_labels=rows,
        col_labels=cols,
    )
