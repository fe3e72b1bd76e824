"""Estimator plumbing shared by every method: parameters, repr, fitted-state checks."""

from __future__ import annotations

import functools
import inspect
import time

import numpy as np

from .._threads import thread_budget
from ..exceptions import NotFittedError
from ..polish import EXACT_MAX_K, POLISH_METHODS, _polish


def relative_error(error: int, nnz: int) -> float:
    """Boolean relative error ``error / nnz(X)`` (0 for a perfect fit of an all-zero X)."""
    if nnz == 0:
        return 0.0 if error == 0 else float("inf")
    return error / nnz


def budgeted(method):
    """Run an estimator's method (``fit``, ``transform``) within its ``n_jobs`` thread budget
    (:func:`banmf._threads.thread_budget`)."""

    @functools.wraps(method)
    def within_budget(self, *args, **kwargs):
        with thread_budget(self.n_jobs):
            return method(self, *args, **kwargs)

    return within_budget


def fit_inner(estimator, X) -> bool:
    """Fit an estimator that a method runs inside its own fit (an NMF start). Returns whether
    the first Ctrl-C cut it short, leaving its best result so far; a Ctrl-C that left no
    result (or a second one) propagates."""
    try:
        estimator.fit(X)
    except KeyboardInterrupt:
        if not hasattr(estimator, "components_"):
            raise
        return True
    return False


class BaseFactorization:
    """scikit-learn style parameter handling: ``__init__`` only stores its keyword arguments."""

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values() if p.name != "self"]

    def get_params(self, deep: bool = True) -> dict:
        """Parameters of this estimator, as passed to ``__init__``."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params) -> BaseFactorization:
        """Set parameters; unknown names raise ``ValueError``."""
        valid = set(self._param_names())
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"{type(self).__name__} has no parameter {name!r}; valid: {sorted(valid)}")
            setattr(self, name, value)
        return self

    def __repr__(self) -> str:
        defaults = {
            p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()
        }
        changed = [
            f"{k}={v!r}" for k, v in self.get_params().items() if not _same(v, defaults.get(k))
        ]
        return f"{type(self).__name__}({', '.join(changed)})"

    def _set_result(self, X, W, H, error: int, n_iter: int, start: float, interrupted: bool = False) -> None:
        """The fitted attributes every method shares (``start``: ``time.perf_counter()`` at fit;
        ``interrupted``: Ctrl-C cut the fit short and this is the best result so far)."""
        self.interrupted_ = bool(interrupted)
        self.W_, self.components_ = W, np.ascontiguousarray(H)
        self.reconstruction_err_ = int(error)
        self.relative_error_ = relative_error(int(error), X.nnz)
        self.n_iter_ = int(n_iter)
        self.n_components_, self.n_features_in_, self.nnz_ = W.shape[1], X.shape[1], X.nnz
        self.fit_seconds_ = time.perf_counter() - start

    def _polish_method(self, k: int) -> str | None:
        """The validated ``polish`` parameter as a :func:`banmf.polish` method, or None (off)."""
        value = self.polish
        if isinstance(value, (bool, np.bool_)):
            return "auto" if value else None
        if value not in POLISH_METHODS:
            raise ValueError(f"polish must be True, False or one of {POLISH_METHODS}, got {value!r}")
        if value == "exact" and k > EXACT_MAX_K:
            raise ValueError(
                f"polish='exact' needs n_components <= {EXACT_MAX_K}, got {k}; use 'flip' or True"
            )
        return value

    def _finish(self, X, W, H, error: int, n_iter: int, start: float, method: str | None,
                interrupted: bool = False) -> None:
        """Polish (if ``method``) and set the fitted attributes; ``unpolished_err_`` keeps the
        error before the polish. After Ctrl-C (``interrupted``), the polish is left out and
        ``KeyboardInterrupt`` is raised again once the model is set: a loop of fits stops."""
        self.unpolished_err_ = int(error)
        self.polish_rounds_ = 0
        if method is not None and W.shape[1] > 0 and not interrupted:
            try:
                res = _polish(X, W, H, method)
                W, H, error, self.polish_rounds_ = res.W, res.H, res.error, res.rounds
            except KeyboardInterrupt:
                interrupted = True  # the first Ctrl-C: the unpolished factors stand
        self._set_result(X, W, H, error, n_iter, start, interrupted)
        if interrupted:
            raise KeyboardInterrupt

    def fit_transform(self, X, y=None) -> np.ndarray:
        """Fit to X and return the Boolean W of shape (n, k)."""
        return self.fit(X).W_

    def _check_fitted(self) -> None:
        if not hasattr(self, "components_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")


def _same(a, b) -> bool:
    try:
        return bool(a == b) if type(a) is type(b) else False
    except Exception:
        return a is b
