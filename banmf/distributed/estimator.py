"""BANMF on Dask: the rows of X stay on the workers, the sums over rows are reduced.

The estimator holds the parameters and opens the Dask backend
(:class:`banmf.engine.dask.backend.DaskBackend`) over the client's workers; the fit is
:class:`banmf.BANMF`'s own, the same driver and the same choice of the predictor of unknown
cells over this backend.
"""

from __future__ import annotations

import copy
import time
from contextlib import contextmanager
from numbers import Integral, Real
from typing import ClassVar

from ..data.params import BOOLEAN, NONE, Interval, Kind, Options
from ..data.validation import check_random_state
from ..engine import check_backend
from ..engine.dask import BlockMatrix, DaskBackend, Session
from ..exceptions import InputError, InvalidParameterError, MissingDependencyError
from ..io import Dataset
from ..models import declared_init
from ..models.banmf import BANMF as _BANMF
from ..models.banmf import BANMF_DEFAULTS
from ..result import Factorization
from ..runtime.signals import Interruptions, deferred_interrupts

__all__ = ["BANMF"]


class BANMF(_BANMF):
    """:class:`banmf.BANMF` on a Dask cluster, for data larger than one machine's memory.

    X is given as row blocks (:func:`read_blocks`, or a matrix in memory cut into blocks).
    Each block is read once by one worker and stays there with its rows of W and Y for the
    whole fit. An iteration runs the single-machine kernels on every block (the W step and
    its partial sums Wᵀ·Y and WᵀW; then, with the new H, the Y projection and Y·Hᵀ); the
    partial sums are added by a binary tree over the blocks, H is updated from them in one
    task and sent to the blocks. The grid threshold search, the "columns" start, restarts and
    the Boolean error are the same kind of sums over blocks. Only k×m and k×k arrays and
    grid counts travel; W's rows come back once, at the end.

    Parameters
    ----------
    n_components : int, default 10
        Rank k of the factorization. ``"auto"`` is refused: choosing k fits eleven models per
        rank tried; choose it on a sample with :class:`banmf.BANMF` or :func:`banmf.select_rank`.
    regularization, max_iter, tol, check_every, init_scale, lower, upper, eps, n_thresholds, \
normalize, n_init, dtype, random_state, verbose, callback
        As in :class:`banmf.BANMF`.
    init : {"random"}, default "random"
    thresholds : {"per-factor", "global"}, default "per-factor"
        As in :class:`banmf.BANMF`. Per-factor thresholds move each row's value and bit
        change for a column of W to the driver once per sweep (16 bytes a row and factor).
    polish : bool or "flip", default True
        True or "flip": the Boolean polish with single-bit flips (:func:`banmf.polish`,
        ``method="flip"``): rows of W on their blocks, columns of H from bit changes summed
        over the blocks. The exact polish, and "auto" which may pick it, need whole columns
        of X, which the blocks do not have: the driver refuses them
        (:func:`banmf.engine.check_backend`), as it refuses ``swap=True`` with
        ``polish=False`` (:class:`banmf.BANMF` then polishes with "auto" after each swap).
    swap : bool, default True
        The factor swaps of :class:`banmf.BANMF` (:func:`banmf.swap_factors`): each factor's
        cost and each column's gain summed over the blocks, the new factor's rows found on
        their blocks, then the polish again.
    extra_starts : tuple of {"nmf", "columns"}, default ("nmf", "columns")
        As in :class:`banmf.BANMF`. "nmf": its NNDSVDa, a truncated SVD of X computed as
        scipy's ``svds`` does with every product summed over the blocks. "grecond" needs
        whole columns and is refused as the exact polish is.
    combine : bool, default True
        As in :class:`banmf.BANMF`, over the blocks: they keep every start's Boolean rows
        (k bits a row and start, counted in ``block_memory``) until the combination, each
        candidate factor's rows are built on them, and the choice's error changes are sums
        over them. Where one machine pools GreConD's factors too (narrow data), they are
        found here on X gathered from the blocks. The same factors as one machine's.
    n_jobs : int or None, default None
        Threads per worker for the fit (None: each worker's own thread count). A worker's
        blocks share them.
    client : distributed.Client or None, default None
        The cluster. None: the current client (``distributed.get_client()``). Kept by
        reference: ``sklearn.base.clone`` and ``copy.deepcopy`` give a model sharing this
        client; a pickled model leaves it out (None once loaded).
    n_blocks : int or None, default None
        Blocks to cut a matrix given in memory into (:meth:`BlockMatrix.from_matrix`); row
        blocks read from files are used as they are.
    block_memory : "auto", int or None, default "auto"
        Bytes of row blocks a worker keeps in memory; the least recently used others wait in
        its local folder (out of core). "auto": half the worker's memory limit, none without
        one. None: no limit.
    max_recoveries : int, default 3
        Worker losses a fit survives: a worker that died, or that did not answer a round
        within its deadline (a hung worker: docs/SCALING.md), which the fit then leaves
        alone. After a loss, the lost blocks are read again on the live workers and the
        start under way runs again from its beginning (its starting factors come from the
        seed, so the result is the same); one more loss raises ``RuntimeError``.

    Attributes
    ----------
    As :class:`banmf.BANMF`, and
    n_blocks_ : int
    false_negatives_, false_positives_ : int
        The error's two parts: ones of X that W⊗H misses and observed zeros it covers
        (:func:`banmf.engine.booleanize.error_counts` on one machine).
    recoveries_ : int
        Worker losses survived.
    peak_block_bytes_ : int
        The most bytes of row blocks one worker held in memory at once.
    traffic_ : dict
        What the fit moved between the driver and the workers: ``sent_bytes`` and
        ``received_bytes`` (the arrays in the calls and their answers; the blocks' own
        reading from files is not counted, nor blocks sent in memory once) and
        ``round_trips`` (calls to all workers that the driver waited for).

    Notes
    -----
    Same seed and same blocks, same result on any number of workers: every sum over blocks
    is added in the same order. Against :class:`banmf.BANMF` with the same parameters the
    continuous factors agree to rounding (the sums over rows are grouped differently: about
    1e-12 relative after a few hundred iterations in float64), and so the Boolean factors
    agree unless a factor's value lies within rounding of a threshold.

    Examples
    --------
    >>> from dask.distributed import Client, LocalCluster       # doctest: +SKIP
    >>> import banmf.distributed as bd                          # doctest: +SKIP
    >>> client = Client(LocalCluster(n_workers=2))              # doctest: +SKIP
    >>> X = bd.read_blocks("big/part-*.npz")                    # doctest: +SKIP
    >>> model = bd.BANMF(n_components=32, random_state=0).fit(X)  # doctest: +SKIP
    >>> model.save("big_k32.npz")                               # doctest: +SKIP
    """

    __init__ = declared_init(
        {
            **BANMF_DEFAULTS,
            "client": None,
            "n_blocks": None,
            "block_memory": "auto",
            "max_recoveries": 3,
        }
    )

    _parameter_constraints: ClassVar[dict] = {
        **_BANMF._parameter_constraints,
        "init": [Options("random")],
        "thresholds": [Options("per-factor", "global")],
        "swap": [BOOLEAN],
        "client": [NONE, Kind("a distributed.Client", lambda v: hasattr(v, "submit"))],
        "n_blocks": [NONE, Interval(Integral, 1, None)],
        "block_memory": [Options("auto"), NONE, Interval(Real, 0, None)],
        "max_recoveries": [Interval(Integral, 0, None)],
    }

    def __getstate__(self) -> dict:
        # A client holds sockets and threads, and means nothing in another process: a pickled
        # model leaves it out (loaded, it predicts without a cluster; fitted again, it uses
        # the current client).
        return {**self.__dict__, "client": None}

    def __copy__(self) -> BANMF:
        copied = type(self).__new__(type(self))
        copied.__dict__.update(self.__dict__)
        return copied

    def __deepcopy__(self, memo: dict) -> BANMF:
        # In the same process the client is a handle to the same cluster, not a value: the
        # copy shares it (deep-copying it would copy its sockets).
        if self.client is not None:
            memo.setdefault(id(self.client), self.client)
        copied = type(self).__new__(type(self))
        memo[id(self)] = copied
        copied.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return copied

    def __sklearn_clone__(self) -> BANMF:
        """An unfitted model with the same parameters, as ``sklearn.base.clone`` makes one:
        each parameter deep-copied, but the client, which the clone shares."""
        return type(self)(
            **copy.deepcopy(self.get_params(deep=False), {id(self.client): self.client})
        )

    def _client(self):
        if self.client is not None:
            return self.client
        try:
            from distributed import get_client
        except ImportError:
            raise MissingDependencyError(
                "banmf.distributed needs Dask: pip install 'banmf[distributed]'"
            ) from None
        try:
            return get_client()
        except ValueError:
            raise InvalidParameterError(
                "no Dask client: start one (distributed.Client() for a local cluster, or "
                "Client('tcp://host:8786')) or pass client="
            ) from None

    @contextmanager
    def _open(self, X, missing, observed, W=None, H=None):
        """The Dask backend of a fit of X (:class:`banmf.engine.dask.backend.DaskBackend`):
        X given as row blocks, or in memory and cut into ``n_blocks``; the blocks placed on
        the client's workers for the length of the fit, Ctrl-C deferred to the steps' safe
        points. What the blocks cannot do is refused first, before the cluster works."""
        start = time.perf_counter()
        if isinstance(self.n_components, str):
            # Choosing k fits eleven models per rank tried: hours on data that needs a cluster.
            raise InvalidParameterError(
                "banmf.distributed.BANMF fits a given k: n_components='auto' would fit eleven "
                "models per rank tried on the cluster. Choose k on a sample of the rows with "
                "banmf.BANMF(n_components='auto') or banmf.select_rank, and pass it"
            )
        if W is not None or H is not None:
            raise InputError("W and H are only used with init='custom', which needs one machine")
        check_backend(self, DaskBackend)
        data = None
        if isinstance(X, BlockMatrix):
            if missing is not None or observed is not None:
                raise InputError("row blocks carry their unknown cells: pass no missing/observed")
            blocks = X
        else:
            data = Dataset.of(X, missing, observed)
            blocks = BlockMatrix.from_matrix(data, n_blocks=self.n_blocks)
        session = Session(self._client(), blocks, self.block_memory, self.n_jobs)
        session.interrupts = Interruptions()
        # The first Ctrl-C (or SIGTERM under the banmf command) stops the fit at its next safe
        # point, with the best result so far; the second aborts.
        try:
            with deferred_interrupts(session.interrupts):
                rng = check_random_state(self.random_state)
                yield DaskBackend.open(self, session, data, rng), start
        finally:
            session.close()

    def save(self, path) -> None:
        """Save the fitted factorization (:meth:`banmf.Factorization.save`): W, H, the errors,
        the parameters (the client left out)."""
        self._check_fitted()
        Factorization.from_estimator(self).replace(estimator=None).save(path)
