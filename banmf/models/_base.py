"""Estimator plumbing shared by every method: parameters, repr, fitted-state checks."""

from __future__ import annotations

import inspect


class NotFittedError(ValueError, AttributeError):
    """Raised when a fitted attribute or method is used before ``fit``."""


class BaseFactorization:
    """scikit-learn style parameter handling: ``__init__`` only stores its keyword arguments."""

    @classmethod
    def _param_names(cls) -> list[str]:
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values() if p.name != "self"]

    def get_params(self, deep: bool = True) -> dict:
        """Parameters of this estimator, as passed to ``__init__``."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params) -> "BaseFactorization":
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

    def _check_fitted(self) -> None:
        if not hasattr(self, "components_"):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")


def _same(a, b) -> bool:
    try:
        return bool(a == b) if type(a) is type(b) else False
    except Exception:
        return a is b
