"""A BANMF fit's run settings: what the driver and the backends read of the parameters."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["RunSettings"]


@dataclass(frozen=True)
class RunSettings:
    """The settings of one BANMF fit, derived once from the estimator's parameters (checked
    against their constraints) and the data's size by ``BANMF._check_params``.

    Attributes
    ----------
    k : int
        The rank fitted.
    shape : tuple of int
        ``(n, m)``.
    nnz : int
        The cells an iteration's pass visits: the observed ones, and the unknown cells it reads.
    max_iter, check_every, n_thresholds : int
        As the parameters.
    tol : float or None
        The tolerance in force (``"auto"`` resolved; None: every iteration runs).
    upper : float
        Y's cap on the support (``"k"`` and None resolved).
    polish : {"auto", "exact", "flip"} or None
        The polish method; None: off.
    swap, combine : bool
        As the parameters.
    extra_starts : tuple of str
        As the parameter.
    n_init : int
        The random starts begun at most (with ``auto_n_init``, the tier of a start's least
        cost until the first start decides).
    auto_n_init : bool
        ``n_init="auto"`` with random starts: the first start decides their number.
    dtype : numpy.dtype
        The factors' and Y's floating type.
    lams : ndarray
        λ of every iteration (zeros without regularization).
    rerun : bool
        A start run again exactly (after a lost worker): no callback.
    observed : bool
        The unknown cells are given in the observed form (the Dask backend reads it).
    nnz_ones : int
        The observed ones (the Dask backend reads it; ``nnz`` counts the unknown cells too).
    """

    k: int
    shape: tuple[int, int]
    nnz: int
    max_iter: int
    check_every: int
    n_thresholds: int
    tol: float | None
    upper: float
    polish: str | None
    swap: bool
    extra_starts: tuple
    combine: bool
    n_init: int
    auto_n_init: bool
    dtype: np.dtype
    lams: np.ndarray
    rerun: bool = False
    observed: bool = False
    nnz_ones: int = 0
