"""NMF (Lee-Seung) and the regularized variants: BANMF's engine with Y frozen at X, or λ preset."""

from __future__ import annotations

import numpy as np

from ._base import store_params
from .banmf import BANMF

__all__ = ["NMF", "RegularizedBANMF", "RegularizedNMF"]

# The variants differ from BANMF in their defaults only; each spells out its signature, as
# scikit-learn's get_params and clone read it.


class RegularizedBANMF(BANMF):
    """:class:`BANMF` with the paper's log-space λ ramp by default (paper Algorithm 3).

    All parameters and attributes are those of :class:`BANMF`; only the default of
    ``regularization`` differs (``"logspace"``).
    """

    def __init__(
        self,
        n_components=10,
        *,
        regularization="logspace",
        max_iter=1000,
        tol="auto",
        check_every=10,
        init="random",
        init_scale=1.0,
        lower=1.0,
        upper="k",
        eps=1e-12,
        n_thresholds=100,
        normalize="balance",
        thresholds="per-factor",
        polish=True,
        swap=True,
        extra_starts=("nmf", "columns"),
        combine=True,
        n_init="auto",
        dtype=np.float64,
        n_jobs=None,
        random_state=None,
        verbose=0,
        callback=None,
    ):
        store_params(self, locals())


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

    def __init__(
        self,
        n_components=10,
        *,
        regularization=None,
        max_iter=1000,
        tol=None,
        check_every=10,
        init="random",
        init_scale=1.0,
        lower=1.0,
        upper="k",
        eps=1e-12,
        n_thresholds=100,
        normalize="balance",
        thresholds="global",
        polish=False,
        swap=False,
        extra_starts=(),
        combine=False,
        n_init=1,
        dtype=np.float64,
        n_jobs=None,
        random_state=None,
        verbose=0,
        callback=None,
    ):
        store_params(self, locals())


class RegularizedNMF(NMF):
    """:class:`NMF` with the log-space λ ramp by default (Zhang et al.'s penalty method)."""

    def __init__(
        self,
        n_components=10,
        *,
        regularization="logspace",
        max_iter=1000,
        tol=None,
        check_every=10,
        init="random",
        init_scale=1.0,
        lower=1.0,
        upper="k",
        eps=1e-12,
        n_thresholds=100,
        normalize="balance",
        thresholds="global",
        polish=False,
        swap=False,
        extra_starts=(),
        combine=False,
        n_init=1,
        dtype=np.float64,
        n_jobs=None,
        random_state=None,
        verbose=0,
        callback=None,
    ):
        store_params(self, locals())
