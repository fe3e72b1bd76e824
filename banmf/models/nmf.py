"""NMF (Lee-Seung) and the regularized variants: BANMF's engine with Y frozen at X, or λ preset."""

from __future__ import annotations

import types

from .banmf import BANMF

__all__ = ["NMF", "RegularizedBANMF", "RegularizedNMF"]


def _with_defaults(init, **defaults):
    """A copy of ``init`` whose keyword-only defaults are changed (so get_params/repr follow)."""
    func = types.FunctionType(init.__code__, init.__globals__, init.__name__, init.__defaults__, init.__closure__)
    func.__kwdefaults__ = {**init.__kwdefaults__, **defaults}
    func.__doc__ = init.__doc__
    return func


class RegularizedBANMF(BANMF):
    """:class:`BANMF` with the paper's log-space λ ramp by default (paper Algorithm 3).

    All parameters and attributes are those of :class:`BANMF`; only the default of
    ``regularization`` differs (``"logspace"``).
    """

    __init__ = _with_defaults(BANMF.__init__, regularization="logspace")


class NMF(BANMF):
    """Lee-Seung NMF of X (``½‖X − WH‖²``) followed by BANMF's booleanization.

    This is BANMF with Y frozen at X (no projection), sharing its sparse kernels: O(nnz·k)
    per iteration. Parameters and attributes are those of :class:`BANMF` (``lower`` and
    ``upper`` are unused), but as a baseline it defaults to the paper's configuration:
    ``thresholds="global"``, ``polish=False``, ``n_init=1``. ``regularization`` adds Zhang et
    al.'s penalty ``(λ/2)(‖W²−W‖² + ‖H²−H‖²)``.

    References
    ----------
    Lee & Seung, "Algorithms for non-negative matrix factorization", NIPS 2001.
    Zhang, Li, Ding, Zhang, "Binary matrix factorization with applications", ICDM 2007.
    """

    _project_y = False
    # A baseline: the paper's configuration by default (global grid thresholds, no polish, all
    # max_iter iterations).
    __init__ = _with_defaults(BANMF.__init__, thresholds="global", polish=False, n_init=1, tol=None)


class RegularizedNMF(NMF):
    """:class:`NMF` with the log-space λ ramp by default (Zhang et al.'s penalty method)."""

    __init__ = _with_defaults(NMF.__init__, regularization="logspace")
