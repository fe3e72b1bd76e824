"""NMF (Lee-Seung) and the regularized variants: BANMF's engine with Y frozen at X, or λ preset."""

from __future__ import annotations

from ._base import declared_init
from .banmf import BANMF, BANMF_DEFAULTS, PAPER_CONFIG

__all__ = ["NMF", "RegularizedBANMF", "RegularizedNMF"]

# The variants differ from BANMF in their defaults only: BANMF's declaration with other values.


class RegularizedBANMF(BANMF):
    """:class:`BANMF` with the paper's log-space λ ramp by default (paper Algorithm 3).

    All parameters and attributes are those of :class:`BANMF`; only the default of
    ``regularization`` differs (``"logspace"``).
    """

    __init__ = declared_init({**BANMF_DEFAULTS, "regularization": "logspace"})


class NMF(BANMF):
    """Lee-Seung NMF of X (``½‖X − WH‖²``) followed by BANMF's booleanization.

    This is BANMF with Y frozen at X (no projection), sharing its sparse kernels: O(nnz·k)
    per iteration. Parameters and attributes are those of :class:`BANMF` (``lower`` and
    ``upper`` are unused), but as a baseline it defaults to the paper's configuration:
    ``thresholds="global"``, ``polish=False``, ``swap=False``, ``extra_starts=()``, ``combine=False``,
    ``n_init=1``, ``tol=None``. ``regularization``
    adds Zhang et al.'s penalty ``(λ/2)(‖W²−W‖² + ‖H²−H‖²)``.

    References
    ----------
    Lee & Seung, "Algorithms for non-negative matrix factorization", NIPS 2001.
    Zhang, Li, Ding, Zhang, "Binary matrix factorization with applications", ICDM 2007.
    """

    _project_y = False

    __init__ = declared_init({**BANMF_DEFAULTS, **PAPER_CONFIG})


class RegularizedNMF(NMF):
    """:class:`NMF` with the log-space λ ramp by default (Zhang et al.'s penalty method)."""

    __init__ = declared_init({**BANMF_DEFAULTS, **PAPER_CONFIG, "regularization": "logspace"})
