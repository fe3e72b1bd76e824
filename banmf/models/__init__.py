"""Factorization methods, one module each, behind one name → class registry."""

from .banmf import BANMF, ConvergenceWarning

METHODS: dict[str, type] = {
    "banmf": BANMF,
}

__all__ = ["BANMF", "ConvergenceWarning", "METHODS"]
