"""Factors as patterns: which rows and columns each factor ties together, and what it is worth.

A factor l of W⊗H is a tile, the rows of column l of W times the columns of row l of H. Read as
a pattern it is a set of columns (traits, items, tags) shared by a set of rows (animals,
baskets, documents). :func:`patterns` lists every factor that way, by name when the data has
labels, with the numbers that say how much to trust it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data.validation import check_boolean_factors
from ..engine.changes import factor_costs
from ..exceptions import InputError, InvalidParameterError

__all__ = ["Pattern", "patterns"]


@dataclass(frozen=True)
class Pattern:
    """One factor read as a pattern (:func:`patterns` makes these).

    Attributes
    ----------
    factor : int
        Its index l: column l of W, row l of H.
    rows, cols : ndarray of int
        Its rows and columns, the best fitting first: rows by how many of the pattern's columns
        they have in X, columns by how many of the pattern's rows have them (ties: index
        order). Cut to the first ``top`` when :func:`patterns` was given ``top``.
    row_names, col_names : list of str
        Their labels (the indices as text when the data has none).
    n_rows, n_cols : int
        The pattern's full size (``rows`` may be cut).
    ones : int
        Ones of X inside the tile.
    ones_alone : int
        Ones of X that this factor covers and no other does.
    contribution : int
        How much the Hamming error would rise without this factor (ones covered by it alone,
        minus zeros covered by it alone; observed cells only); patterns are listed by it,
        largest first.
    unknown : int
        Cells of the tile whose value is unknown (data fitted with ``missing=`` or
        ``observed=``).
    """

    factor: int
    rows: np.ndarray
    cols: np.ndarray
    row_names: list
    col_names: list
    n_rows: int
    n_cols: int
    ones: int
    ones_alone: int
    contribution: int
    unknown: int = 0

    @property
    def cells(self) -> int:
        """Cells of the tile: ``n_rows * n_cols``."""
        return self.n_rows * self.n_cols

    @property
    def precision(self) -> float:
        """Share of the tile's observed cells that are ones of X (NaN for a tile with none:
        an empty factor, or one whose cells are all unknown)."""
        observed = self.cells - self.unknown
        return self.ones / observed if observed else float("nan")

    def to_dict(self) -> dict:
        """Plain values (for JSON): sizes, counts, precision (None where it is NaN) and the
        listed rows and columns by index and name."""
        precision = self.precision
        return {
            "factor": self.factor,
            "n_rows": self.n_rows,
            "n_cols": self.n_cols,
            "cells": self.cells,
            "unknown": self.unknown,
            "ones": self.ones,
            "ones_alone": self.ones_alone,
            "precision": None if np.isnan(precision) else precision,
            "contribution": self.contribution,
            "cols": self.cols.tolist(),
            "col_names": list(self.col_names),
            "rows": self.rows.tolist(),
            "row_names": list(self.row_names),
        }


def patterns(result, X=None, *, top: int | None = None) -> list[Pattern]:
    """Every factor of a factorization as a pattern, largest contribution first.

    Parameters
    ----------
    result : Factorization
        Boolean W and H, with the data's labels if it had them.
    X : array-like or sparse of shape (n, m), optional
        The factorized data; default ``result.X`` (a result keeps it when it is small enough,
        see :class:`banmf.Factorization`).
    top : int or None, default None
        Keep only the first ``top`` rows and columns of each pattern (the best fitting);
        sizes and counts are of the whole pattern.

    Returns
    -------
    list of Pattern
        One per factor (empty ones included, last), ordered by ``contribution`` (ties: factor
        order). Cost O(nnz·k).

    Raises
    ------
    banmf.exceptions.InputError
        No data (``X`` not given and not kept in the result), or data of another shape (a
        ``ValueError``).
    banmf.exceptions.InvalidParameterError
        A bad ``top`` (a ``ValueError``).

    Examples
    --------
    >>> import numpy as np
    >>> from banmf import Factorization
    >>> X = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]])
    >>> res = Factorization.from_factors(X, [[1, 0], [1, 0], [0, 1]], [[1, 1, 0], [0, 0, 1]])
    >>> [(p.factor, p.rows.tolist(), p.cols.tolist(), p.contribution) for p in patterns(res)]
    [(0, [0, 1], [0, 1], 4), (1, [2], [2], 1)]
    """
    if X is None:
        X = result.X
    if X is None:
        raise InputError(
            "patterns need the data: pass X (this result holds no copy of it; results keep "
            "their data up to 2,000,000 nonzeros)"
        )
    if top is not None and (
        isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1
    ):
        raise InvalidParameterError(f"top must be a positive integer or None, got {top!r}")
    data = result.data(X)
    if data.shape != result.shape:
        raise InputError(
            f"X is {data.shape[0]}×{data.shape[1]} but the factorization is of a "
            f"{result.shape[0]}×{result.shape[1]} matrix"
        )
    X, unknown = data.X, data.unknown
    W, H = check_boolean_factors(result.W, result.H, X.shape)
    k = W.shape[1]
    if k == 0:
        return []
    removal, cover = factor_costs(data, W, np.ascontiguousarray(H.T))
    alone = cover[:, :k].sum(axis=0)
    row_labels, col_labels = result.row_labels, result.col_labels
    out = []
    for l in range(k):
        rows, cols = np.flatnonzero(W[:, l]), np.flatnonzero(H[l])
        tile = X[rows][:, cols]
        cells_tile = 0 if unknown is None else unknown.cells[rows][:, cols].nnz
        # Unknown cells of the tile: those listed, or (few observed) all but the observed ones.
        n_unknown = (
            len(rows) * len(cols) - tile.nnz - cells_tile
            if unknown is not None and unknown.observed
            else cells_tile
        )
        row_hits = np.asarray(tile.sum(axis=1)).ravel()
        col_hits = np.asarray(tile.sum(axis=0)).ravel()
        rows = rows[np.argsort(-row_hits, kind="stable")][:top]
        cols = cols[np.argsort(-col_hits, kind="stable")][:top]
        out.append(
            Pattern(
                factor=l,
                rows=rows,
                cols=cols,
                row_names=_names(row_labels, rows),
                col_names=_names(col_labels, cols),
                n_rows=int(W[:, l].sum()),
                n_cols=int(H[l].sum()),
                ones=int(tile.nnz),
                ones_alone=int(alone[l]),
                contribution=int(removal[l]),
                unknown=int(n_unknown),
            )
        )
    # Empty factors last; otherwise by what the error would lose without them.
    out.sort(key=lambda p: (p.cells == 0, -p.contribution, p.factor))
    return out


def _names(labels, idx: np.ndarray) -> list:
    return [str(labels[i]) for i in idx] if labels is not None else [str(i) for i in idx]
