"""One call for every method: :func:`factorize` and its result type."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .models import METHODS

__all__ = ["Factorization", "factorize"]


@dataclass(frozen=True)
class Factorization:
    """A Boolean factorization X ≈ W⊗H and how it was obtained.

    Attributes
    ----------
    W : ndarray of shape (n, k), bool
    H : ndarray of shape (k, m), bool
    error : int
        Hamming error ``|X − W⊗H|``.
    relative_error : float
        ``error / nnz(X)``.
    seconds : float
        Wall time of the fit.
    n_iter : int
        Iterations (or greedy steps) the method ran.
    method : str
    params : dict
        Every parameter of the estimator, defaults included.
    estimator : object
        The fitted estimator, for method-specific attributes.
    """

    W: np.ndarray
    H: np.ndarray
    error: int
    relative_error: float
    seconds: float
    n_iter: int
    method: str
    params: dict = field(default_factory=dict)
    estimator: object = None


def factorize(X, n_components, method: str = "banmf", *, random_state=None, **method_params) -> Factorization:
    """Factorize the 0/1 matrix X with any registered method.

    Parameters
    ----------
    X : array-like or sparse of shape (n, m)
    n_components : int or None
        Rank k (None only for methods that choose it, e.g. ``"grecond"``).
    method : str, default "banmf"
        A key of :data:`banmf.METHODS`.
    random_state : None, int or Generator
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
        raise ValueError(f"unknown method {method!r}; choose one of {sorted(METHODS)}")
    cls = METHODS[method]
    valid = set(cls._param_names())
    unknown = set(method_params) - valid
    if unknown:
        raise ValueError(f"method {method!r} has no parameter(s) {sorted(unknown)}; valid: {sorted(valid)}")
    est = cls(n_components=n_components, random_state=random_state, **method_params)
    start = time.perf_counter()
    est.fit(X)
    seconds = time.perf_counter() - start
    return Factorization(
        W=est.W_,
        H=est.components_,
        error=int(est.reconstruction_err_),
        relative_error=float(est.relative_error_),
        seconds=seconds,
        n_iter=int(est.n_iter_),
        method=method,
        params=est.get_params(),
        estimator=est,
    )
