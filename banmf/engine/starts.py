"""How many random starts a BANMF fit runs with ``n_init="auto"``: as many as the cost of one
start allows (:func:`start_cost`). The driver decides it when the first start has run
(:func:`auto_n_init` at the iterations that start took); before then an estimator bounds the
starts begun beside it by the least that start could cost. The cost depends on the problem
only, so the number of starts is the same on any backend, machine or thread count."""

from __future__ import annotations

__all__ = ["AUTO_N_INIT", "auto_n_init", "start_cost"]

#: ``n_init="auto"``: (largest whole cost of a start, starts) tiers: 10 starts while a start
#: costs well under a second, 5 up to a few seconds, else 1. See :func:`start_cost`.
AUTO_N_INIT = ((10**9, 10), (10**10, 5))

# Costs of a start in multiply-adds, for n_init="auto": an iteration's fixed Python cost (about
# 50 µs, as much as 5·10⁴ multiply-adds), and the threshold search, per-factor thresholds and
# polish after the iterations (together about 200 iterations' worth) (docs/decisions.md, "The
# cost of a start").
_ITERATION_OVERHEAD = 50_000
_REFINEMENT_ITERATIONS = 200


def start_cost(n: int, m: int, nnz: int, k: int, max_iter: int) -> int:
    """Estimated work of one start, in multiply-adds: ``max_iter`` iterations of
    ``3·nnz·k + (n+m)·k²`` plus a fixed cost each, and the refinements after them. It decides
    ``n_init="auto"``; it depends on the problem only, so the number of starts never depends on
    the machine or the threads."""
    per_iteration = 3 * nnz * k + (n + m) * k * k + _ITERATION_OVERHEAD
    return per_iteration * (max_iter + _REFINEMENT_ITERATIONS)


def auto_n_init(p, n_iter: int) -> int:
    """``n_init="auto"``: the random starts that one start of ``n_iter`` iterations allows on
    the run's problem (``p``'s ``shape``, ``nnz`` and ``k``, a
    :class:`~banmf.engine.settings.RunSettings`): the tier of :data:`AUTO_N_INIT` of its
    whole cost (:func:`start_cost`)."""
    n, m = p.shape
    cost = start_cost(n, m, p.nnz, p.k, n_iter)
    tiers = [starts for limit, starts in AUTO_N_INIT if cost <= limit]
    return tiers[0] if tiers else 1
