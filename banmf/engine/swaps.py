"""Factor swaps: the factor whose removal costs least is replaced by the column with the most
uncovered ones while that lowers the error, each swap followed by the polish
(:func:`swap_factors`), written once over W's rows wherever they live
(:class:`~banmf.engine.protocol.Rows`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data.dataset import Dataset
from ..data.validation import check_boolean_factors
from ..exceptions import InvalidParameterError
from ..result import Factorization
from .polish import (
    EXACT_MAX_K,
    POLISH_METHODS,
    Rows,
    WholeRows,
    check_rounds,
    polish_over,
    resolve_polish,
)

__all__ = ["choose_swap", "swap_factors", "swap_steps", "swaps_over"]


def swaps_over(rows: Rows, Ht: np.ndarray, method: str, most: int):
    """The swaps of :func:`swap_factors` on W (``rows``) and H (``Ht``, in place): the best
    swap (:func:`choose_swap`) and the polish after it, while that lowers the error, at most
    ``most`` times (none more after a Ctrl-C). Yields ``(factor, column, error)`` after each."""
    for _ in range(most):
        if rows.stopped():
            return
        change, l, j = choose_swap(*rows.swap_costs(Ht))
        if change >= 0:
            return
        rows.swap_in(Ht, l, j)
        Ht[:, l] = False
        Ht[j, l] = True
        history = []
        polish_over(rows, Ht, method, history=history)
        # The polish never raises the error, so each swap lowers it strictly: this ends.
        yield l, j, history[-1]


@dataclass(frozen=True)
class _Swap:
    """One accepted factor swap and the polish after it (:func:`swap_steps` yields these).

    Attributes
    ----------
    W : ndarray of shape (n, k), bool
    H : ndarray of shape (k, m), bool
    error : int
        Hamming error after the swap and the polish.
    factor, column : int
        Factor ``factor`` was replaced by column ``column`` of X (with its uncovered ones).
    """

    W: np.ndarray
    H: np.ndarray
    error: int
    factor: int
    column: int


def choose_swap(removal: np.ndarray, cover: np.ndarray) -> tuple[int, int, int]:
    """The swap that lowers the error most, ``(change, factor, column)``, from
    :func:`factor_costs`' results (sums over rows, so row blocks' results added serve as well);
    ``change >= 0`` means no swap helps.

    Removing factor l changes the error by the sum over its rows of the error with bit l off
    minus with it on (rows are independent given H); column j then gains, as a factor of its
    own over the rows where its ones are left uncovered, exactly those ones. So the best swap
    over every (l, j) costs one pass over the rows and one over the columns: O(nnz·k), not a
    trial fit per pair. The new factor covers ones only, so unknown cells change the removal
    costs alone."""
    k = len(removal)
    # gain[j, l]: the ones of column j that nothing covers once factor l is gone.
    gain = cover[:, :k] + cover[:, k:]
    best_column = gain.argmax(axis=0) if len(gain) else np.zeros(k, dtype=np.intp)
    change = removal - (gain[best_column, np.arange(k)] if len(gain) else 0)
    l = int(np.argmin(change))
    return int(change[l]), l, int(best_column[l])


def swap_steps(data, Wb: np.ndarray, Hb: np.ndarray, method: str, max_swaps: int):
    """Apply the best swap (:func:`best_swap`) and polish, while that lowers the error, at
    most ``max_swaps`` times; yields a :class:`_Swap` after each (a caller that stops early
    keeps the last). Trusted inputs (``data`` a :class:`banmf.io.Dataset`); the caller's
    factors are not changed."""
    method = resolve_polish(method, data.shape, data.nnz, Wb.shape[1])
    rows = WholeRows(data, Wb.copy())
    Ht = np.array(Hb.T, order="C")
    for l, j, error in swaps_over(rows, Ht, method, max_swaps):
        # Copies: the caller keeps each step's factors while the next one changes these.
        yield _Swap(rows.W.copy(), np.ascontiguousarray(Ht.T), error, l, j)


def swap_factors(
    X,
    W,
    H,
    *,
    max_swaps: int | None = None,
    method: str = "auto",
    missing=None,
    observed=None,
) -> Factorization:
    """Replace weak factors by strong columns: a search over whole factors after the polish.

    Each step finds, over every factor l and column j, the swap that lowers the Hamming error
    most: drop factor l and put in its place column j alone, over the rows whose ones in
    column j are then uncovered. If it lowers the error, it is made and the factors are
    polished (:func:`polish`) so that the new factor grows to the rows and columns it fits;
    steps repeat until no swap helps (or ``max_swaps``). The error falls strictly at every
    step.

    Why: the polish moves single entries, so a factor that covers little — an empty one, or one
    of several that share the same heavy column, common after a relaxed fit of very sparse
    data — stays. On sparse data the factors that matter most are often single frequent
    columns, and a swap puts them in.

    Parameters
    ----------
    X : array-like or sparse of shape (n, m)
    W : array-like of shape (n, k), Boolean
    H : array-like of shape (k, m), Boolean
    max_swaps : int or None, default None
        None: until no swap lowers the error.
    method : {"auto", "exact", "flip"}, default "auto"
        The polish after each swap (see :func:`polish`).
    missing, observed : array-like or sparse of shape (n, m), optional
        Unknown cells, as in :meth:`banmf.BANMF.fit`: the errors count observed cells only.

    Returns
    -------
    Factorization
        ``method="swap_factors"``, ``n_iter`` the swaps made; its ``info`` holds ``history``
        (the error before the first swap and after each swap and polish) and ``swaps`` (the
        ``(factor, column)`` of each).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]])
    >>> res = swap_factors(X, [[1, 1], [1, 1], [0, 0]], [[1, 1, 0], [1, 1, 0]])
    >>> res.error, res.info["swaps"]
    (0, [(0, 2)])
    """
    data = Dataset.of(X, missing, observed)
    Wb, Hb = check_boolean_factors(W, H, data.shape)
    if method not in POLISH_METHODS:
        raise InvalidParameterError(f"method must be one of {POLISH_METHODS}, got {method!r}")
    if method == "exact" and Wb.shape[1] > EXACT_MAX_K:
        raise InvalidParameterError(
            f"the exact polish enumerates 2^k patterns per row: k={Wb.shape[1]} exceeds "
            f"{EXACT_MAX_K}; use method='flip'"
        )
    limit = np.iinfo(np.int64).max if max_swaps is None else check_rounds(max_swaps, "max_swaps")
    history, swaps = [data.error(Wb, Hb)], []
    W, H = Wb, Hb
    if Wb.shape[1]:
        for step in swap_steps(data, Wb, Hb, method, limit):
            W, H = step.W, step.H
            history.append(step.error)
            swaps.append((step.factor, step.column))
    return Factorization.from_factors(
        data,
        W,
        H,
        error=history[-1],
        method="swap_factors",
        n_iter=len(swaps),
        params={"max_swaps": max_swaps, "method": method},
        info={"history": history, "swaps": swaps},
    )
