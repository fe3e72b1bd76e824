"""BANMF on Dask: the rows of X stay on the workers, the sums over rows are reduced."""

from __future__ import annotations

import time
import uuid
import warnings
from numbers import Integral, Real
from pathlib import Path
from typing import ClassVar

import numpy as np

from .._boolean import pack_rows
from .._params import BOOLEAN, NONE, Interval, Kind, Options, subset_of
from .._progress import StartProgress
from .._signals import Interruptions, deferred_interrupts
from .._validation import check_n_components, check_random_state
from ..booleanize import balance_scales, grid_points, grid_ranks, search_grid
from ..engine.driver import last_start, settled
from ..models import budgeted, h_step, objective_value, store_params
from ..models.banmf import BANMF as _BANMF
from ..polish import best_cut, choose_swap, flip_rows, top_columns
from ..result import Factorization
from . import _worker
from .blocks import BlockMatrix

__all__ = ["BANMF"]


class WorkerLost(Exception):
    """A worker holding row blocks died (or its blocks are gone) during the fit."""


def _is_lost(exc: BaseException) -> bool:
    """Whether ``exc`` means a worker (or the blocks it held) is gone, rather than an error in
    the work itself (a file that cannot be read, a full disk: those are raised as they are)."""
    from distributed import KilledWorker
    from distributed.comm import CommClosedError

    if isinstance(exc, (_worker.BlockLost, KilledWorker, CommClosedError)):
        return True
    # What an actor's call raises when its worker is gone.
    return isinstance(exc, (OSError, RuntimeError)) and "Actor" in str(exc)


class _Session:
    """One fit's row blocks on the workers: one :class:`BlockServer` actor per worker holding
    blocks, calls on every block, the sums over blocks, and the repair of a lost worker.

    Every call waits for its answers: a worker's death fails its actor's call at once, and
    :class:`WorkerLost` says so."""

    def __init__(self, client, blocks: BlockMatrix, budget, n_jobs):
        self.client, self.blocks = client, blocks
        self.fit = f"banmf-{uuid.uuid4().hex}"
        self.budget_param, self.n_jobs = budget, n_jobs
        self.where: dict[int, str] = {}  # block → worker
        self.servers: dict[str, object] = {}  # worker → its actor
        self.interrupts: Interruptions | None = None
        # Bytes of arrays sent to and received from the workers, and round trips.
        self.sent = self.received = self.calls = 0
        self.loads: dict[int, tuple] = {}  # block → what its load reported

    def _workers(self) -> dict[str, dict]:
        try:
            info = self.client.scheduler_info(n_workers=-1)
        except TypeError:  # distributed before 2025 lists every worker anyway
            info = self.client.scheduler_info()
        return info["workers"]

    def place(self, blocks) -> None:
        """Read ``blocks`` on the live workers, in contiguous runs (the other blocks stay)."""
        workers = self._workers()
        if not workers:
            raise RuntimeError("the Dask cluster has no workers")
        names = sorted(workers)
        blocks = list(blocks)
        for q, b in enumerate(blocks):
            self.where[b] = names[q * len(names) // len(blocks)]
        for w in sorted(set(self.where.values()) - set(self.servers)):
            threads = int(workers[w].get("nthreads", 1))
            if self.n_jobs is not None and self.n_jobs > 0:
                threads = min(threads, self.n_jobs)
            future = self.client.submit(
                _worker.BlockServer,
                self.fit,
                threads,
                workers=[w],
                allow_other_workers=False,
                actor=True,
                pure=False,
            )
            # An actor's handle binds to the current client when it arrives: this fit's, even
            # when another client is the default.
            with self.client.as_current():
                self.servers[w] = self._wait([future])[0]
        by_worker = self._by_worker(blocks)
        calls = {
            w: self.servers[w].each(
                _worker.load,
                mine,
                own={b: (self.blocks.sources[b], self._budget(workers[w])) for b in mine},
            )
            for w, mine in by_worker.items()
        }
        for w, values in self._answers(calls).items():
            self.loads.update(zip(by_worker[w], values, strict=True))

    def _budget(self, worker: dict) -> int | None:
        """Bytes of blocks a worker keeps in memory: ``block_memory`` as given, or for "auto"
        half the worker's memory limit (none without one)."""
        if self.budget_param != "auto":
            return None if self.budget_param is None else int(self.budget_param)
        limit = worker.get("memory_limit") or 0
        return int(limit) // 2 if limit else None

    def _by_worker(self, blocks=None) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for b in sorted(self.where if blocks is None else blocks):
            out.setdefault(self.where[b], []).append(b)
        return out

    def _wait(self, futures: list) -> list:
        """The futures' results; a first Ctrl-C is noted (the fit then stops at its next
        step) and the wait goes on, so that no block is left half-way through a step."""
        values = []
        for future in futures:
            while True:
                try:
                    values.append(future.result())
                    break
                except KeyboardInterrupt:
                    if self.interrupts is None or not self.interrupts.first():
                        raise
                except Exception as exc:
                    if _is_lost(exc):
                        raise WorkerLost(f"{type(exc).__name__}: {exc}") from None
                    raise
        return values

    def _answers(self, calls: dict, args=(), own=None) -> dict:
        """Each worker's answer to its call; counts the arrays sent (``args`` to each worker,
        ``own`` once: each block's to its worker) and received."""
        answers = dict(zip(calls, self._wait(list(calls.values())), strict=True))
        self.sent += len(calls) * _payload(args) + _payload(own)
        self.received += _payload(list(answers.values()))
        self.calls += 1
        return answers

    def each(self, func, *args, own: dict | None = None) -> list:
        """``func(fit, b, *args)`` on every block, results in block order."""
        by_worker = self._by_worker()
        calls = {
            w: self.servers[w].each(func, mine, args, {b: own[b] for b in mine} if own else None)
            for w, mine in by_worker.items()
        }
        out = {}
        for w, values in self._answers(calls, args, own).items():
            out.update(zip(by_worker[w], values, strict=True))
        return [out[b] for b in range(self.blocks.n_blocks)]

    def sum(self, func, *args):
        """The sum over all blocks of ``func(fit, b, *args)``, by the fixed tree over blocks
        (:func:`banmf.distributed._worker.node_sum`): each worker adds the nodes within its
        blocks, the driver the rest."""
        n_blocks = self.blocks.n_blocks
        calls = {
            w: self.servers[w].sums(func, mine, n_blocks, args)
            for w, mine in self._by_worker().items()
        }
        nodes = {}
        for part in self._answers(calls, args).values():
            nodes.update(part)
        # Every block lies in a node some worker added.
        return _worker.node_sum(0, n_blocks, None, nodes)

    def repair(self) -> None:
        """Read the blocks of workers that left again on the live ones."""
        alive = set(self._workers())
        for w in [w for w in self.servers if w not in alive]:
            del self.servers[w]
        lost = [b for b, w in self.where.items() if w not in alive]
        if not lost:
            # The blocks were lost without their worker leaving (it restarted in place):
            # read every block again.
            lost = list(self.where)
            self.servers.clear()
            self.client.run(_worker.forget, self.fit)
        for b in lost:
            del self.where[b]
        self.place(lost)

    def close(self) -> None:
        """Drop the fit's blocks from every worker."""
        self.servers.clear()
        try:
            self.client.run(_worker.forget, self.fit)
        except Exception:  # the cluster may be gone; there is nothing left to free then
            pass


def _payload(obj) -> int:
    """Bytes of the arrays in ``obj`` (nested tuples, lists, dicts)."""
    if isinstance(obj, np.ndarray) or hasattr(obj, "nbytes"):  # arrays, packed factors
        return int(obj.nbytes)
    if isinstance(obj, (tuple, list)):
        return sum(_payload(v) for v in obj)
    if isinstance(obj, dict):
        return sum(_payload(v) for v in obj.values())
    return 0


class _Rows:
    """The rows' half of the threshold search (:class:`banmf.booleanize.GridRows`) summed over
    the row blocks on the workers."""

    #: Coverages asked for in one round trip (:func:`banmf.booleanize.search_grid`).
    batch = 16

    def __init__(self, session: _Session, distinct: np.ndarray):
        self.s, self.distinct = session, distinct
        self.sizes = None

    def hit_diffs(self, vt, P):
        hits, cells, self.sizes = self.s.sum(_worker.grid_sums, vt, P)
        return hits, cells

    def active_counts(self, P):
        # search_grid asks for the hit counts first: the same sums brought these.
        return self.sizes

    def distinct_ranks(self):
        return self.distinct

    def packed_bytes(self, P):
        return max(self.s.each(_worker.packed_bytes, P))

    def covers(self, requests, cache):
        counts = self.s.sum(_worker.covers, requests, cache)
        out, at = [], 0
        for _, packed_h in requests:
            out.append([int(c) for c in counts[at : at + len(packed_h)]])
            at += len(packed_h)
        return out


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
    n_components, regularization, max_iter, tol, check_every, init_scale, lower, upper, eps, \
n_thresholds, normalize, n_init, dtype, random_state, verbose, callback
        As in :class:`banmf.BANMF`.
    init : {"random"}, default "random"
    thresholds : {"per-factor", "global"}, default "per-factor"
        As in :class:`banmf.BANMF`. Per-factor thresholds move each row's value and bit
        change for a column of W to the driver once per sweep (16 bytes a row and factor).
    polish : bool or "flip", default True
        True or "flip": the Boolean polish with single-bit flips (:func:`banmf.polish`,
        ``method="flip"``): rows of W on their blocks, columns of H from bit changes summed
        over the blocks. The exact polish is not distributed.
    swap : bool, default True
        The factor swaps of :class:`banmf.BANMF` (:func:`banmf.swap_factors`): each factor's
        cost and each column's gain summed over the blocks, the new factor's rows found on
        their blocks, then the polish again.
    extra_starts : tuple of {"nmf", "columns"}, default ("nmf", "columns")
        As in :class:`banmf.BANMF`. "nmf": its NNDSVDa, a truncated SVD of X computed as
        scipy's ``svds`` does with every product summed over the blocks. "grecond" needs
        whole columns and is not distributed.
    n_jobs : int or None, default None
        Threads per worker for the fit (None: each worker's own thread count). A worker's
        blocks share them.
    client : distributed.Client or None, default None
        The cluster. None: the current client (``distributed.get_client()``).
    n_blocks : int or None, default None
        Blocks to cut a matrix given in memory into (:meth:`BlockMatrix.from_matrix`); row
        blocks read from files are used as they are.
    block_memory : "auto", int or None, default "auto"
        Bytes of row blocks a worker keeps in memory; the least recently used others wait in
        its local folder (out of core). "auto": half the worker's memory limit, none without
        one. None: no limit.
    max_recoveries : int, default 3
        Worker losses a fit survives. After one, the lost blocks are read again on the live
        workers and the start under way runs again from its beginning (its starting factors
        come from the seed, so the result is the same); one more loss raises ``RuntimeError``.

    Attributes
    ----------
    As :class:`banmf.BANMF`, and
    n_blocks_ : int
    false_negatives_, false_positives_ : int
        The error's two parts: ones of X that W⊗H misses and observed zeros it covers
        (:func:`banmf.booleanize.error_counts` on one machine).
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

    def __init__(
        self,
        n_components=10,
        *,
        regularization=None,
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
        n_init="auto",
        dtype=np.float64,
        n_jobs=None,
        random_state=None,
        verbose=0,
        callback=None,
        client=None,
        n_blocks=None,
        block_memory="auto",
        max_recoveries=3,
    ):
        store_params(self, locals())

    _parameter_constraints: ClassVar[dict] = {
        **_BANMF._parameter_constraints,
        "init": [Options("random")],
        "thresholds": [Options("per-factor", "global")],
        "polish": [Options(False, True, "flip")],
        "swap": [BOOLEAN],
        "extra_starts": [subset_of("nmf", "columns")],
        "client": [NONE, Kind("a distributed.Client", lambda v: hasattr(v, "submit"))],
        "n_blocks": [NONE, Interval(Integral, 1, None)],
        "block_memory": [Options("auto"), NONE, Interval(Real, 0, None)],
        "max_recoveries": [Interval(Integral, 0, None)],
    }

    def __getstate__(self) -> dict:
        # A client holds sockets and threads: a pickled or copied model leaves it out.
        return {**self.__dict__, "client": None}

    def _client(self):
        if self.client is not None:
            return self.client
        try:
            from distributed import get_client
        except ImportError:
            raise ImportError(
                "banmf.distributed needs Dask: pip install 'banmf[distributed]'"
            ) from None
        try:
            return get_client()
        except ValueError:
            raise ValueError(
                "no Dask client: start one (distributed.Client() for a local cluster, or "
                "Client('tcp://host:8786')) or pass client="
            ) from None

    @budgeted
    def fit(self, X, y=None, *, missing=None, observed=None) -> BANMF:
        """Fit the model to X.

        Parameters
        ----------
        X : BlockMatrix, or array-like or sparse of shape (n, m)
            Row blocks (:func:`read_blocks`), or 0/1 data in memory, cut into ``n_blocks``.
        y : ignored
        missing, observed : array-like or sparse of shape (n, m), optional
            Unknown cells of data in memory, as in :meth:`banmf.BANMF.fit`. Row-block files
            carry theirs.

        Returns
        -------
        self
        """
        start = time.perf_counter()
        if isinstance(X, BlockMatrix):
            if missing is not None or observed is not None:
                raise ValueError("row blocks carry their unknown cells: pass no missing/observed")
            blocks = X
        else:
            blocks = BlockMatrix.from_matrix(
                X, n_blocks=self.n_blocks, missing=missing, observed=observed
            )
        if self.swap and self.polish is False:
            raise ValueError(
                "swap=True polishes after each swap, and with polish=False banmf.BANMF uses its "
                "'auto' polish there, whose exact form is not distributed: set polish=True "
                "(flips) or swap=False"
            )
        client = self._client()
        session = _Session(client, blocks, self.block_memory, self.n_jobs)
        session.interrupts = Interruptions()
        # The first Ctrl-C (or SIGTERM under the banmf command) stops the fit at its next safe
        # point, with the best result so far; the second aborts.
        try:
            with deferred_interrupts(session.interrupts):
                self._fit_blocks(session, start)
        finally:
            session.close()
        return self

    def _fit_blocks(self, session: _Session, start: float) -> None:
        blocks = session.blocks
        n, m = blocks.shape
        k = check_n_components(self.n_components, (n, m))
        interrupts = session.interrupts
        session.place(range(blocks.n_blocks))
        loads = [session.loads[b] for b in range(blocks.n_blocks)]
        self._check_loaded(blocks, loads)
        nnz = sum(q[2] for q in loads)
        if nnz == 0:
            warnings.warn(
                "X has no nonzeros: the factorization is all zeros", UserWarning, stacklevel=4
            )
        forms = {q[5] for q in loads} - {None}
        observed = bool(forms and forms.pop())
        p = self._check_params(k, (n, m), nnz + sum(q[3] for q in loads))
        p["observed"], p["nnz_ones"] = observed, nnz
        rng = check_random_state(self.random_state)
        self.recoveries_ = 0
        specs: dict = {}
        names = list(p["extra_starts"])
        # As on one machine: the starts without iterations run first: when one is exact,
        # nothing can beat it and no other start runs. They still rank after the random starts
        # (ties: the earlier start, in the order random, then as named).
        greedy = [name for name in names if name != "nmf"]
        later = [name for name in names if name == "nmf"]
        runs: list[dict] = []
        extra_runs: dict[str, dict] = {}

        def ranked() -> list[dict]:
            return [*runs, *(extra_runs[name] for name in names if name in extra_runs)]

        def keep_best() -> None:
            # Only the best start so far keeps its rows on the blocks (ties: the first ranked).
            best = [min(ranked(), key=lambda run: run["error"])["start"]]
            self._recovering(session, lambda: session.each(_worker.keep_only, best))

        def extra_start(name: str, progress) -> dict:
            def work() -> dict:
                if name == "columns":
                    return self._columns_start(session, k, p, progress)
                return self._nmf_start(session, specs, p, progress)

            extra_runs[name] = run = self._recovering(session, work)
            keep_best()
            return run

        for j, name in enumerate(greedy):
            if interrupts.count:  # Ctrl-C before the first start: none runs
                break
            total = len(greedy) + p["n_init"] + len(later)
            run = extra_start(name, StartProgress(j + 1, total, p["max_iter"], name))
            if interrupts.count or run["error"] == 0:
                break
        n_starts = p["n_init"]
        i = 0
        exact = any(run["error"] == 0 for run in extra_runs.values())
        while i < n_starts and not interrupts.count and not exact:
            specs[i] = self._draw_start(rng, blocks, k, p)
            total = len(greedy) + n_starts + len(later)
            progress = StartProgress(len(greedy) + i + 1, total, p["max_iter"])
            run = self._recovering(
                session,
                lambda i=i, progress=progress: self._random_start(
                    session, i, specs[i], p, progress
                ),
            )
            runs.append(run)
            keep_best()
            if i == 0 and p["auto_n_init"]:
                n_starts = self._auto_n_init(p, run)
            if last_start(run):
                break
            i += 1
        # Ctrl-C and the callback end the fit; nothing beats an exact fit.
        ended = bool(interrupts.count) or any(map(last_start, ranked()))
        for name in later:
            if ended:
                break
            number = len(greedy) + len(runs) + 1
            extra_start(name, StartProgress(number, number, p["max_iter"], name))
            ended = bool(interrupts.count)
        kept = ranked()
        if not kept:  # Ctrl-C before any start had factors: nothing to keep
            raise KeyboardInterrupt
        best = min(kept, key=lambda run: run["error"])  # ties: the first
        self.best_start_ = best["start"]
        self.init_errors_ = [run["error"] for run in runs]
        self.extra_start_errors_ = {run["start"]: run["error"] for run in kept[len(runs) :]}
        self.n_starts_ = len(kept)
        self.n_init_ = self._auto_n_init(p, runs[0]) if p["auto_n_init"] and runs else p["n_init"]
        # The kept rows, and the error's two parts as banmf.booleanize.error_counts gives
        # them on one machine (after a lost worker, both again: the start runs again first).
        (W_scaled, W), (hits, cover) = self._recovering(
            session,
            lambda: (
                self._gather(session, best, specs, p),
                session.sum(_worker.counts, best["start"], best["H"]),
            ),
        )
        self.false_negatives_, self.false_positives_ = int(nnz - hits), int(cover - hits)
        self.loss_curve_ = best["losses"]
        self.W_continuous_, self.H_continuous_ = W_scaled, best["H_continuous"]
        self.grid_thresholds_, self.thresholds_ = best["grid_thresholds"], best["thresholds"]
        self.booleanized_err_ = best["refinement"].get("grid", best["unpolished_err"])
        self.unpolished_err_ = best["unpolished_err"]
        self.polish_rounds_, self.refinement_, self.swaps_ = (
            best["polish_rounds"],
            best["refinement"],
            best["swaps"],
        )
        self.n_blocks_ = blocks.n_blocks
        self.peak_block_bytes_ = max(session.client.run(_worker.peak_bytes, session.fit).values())
        self._set_result(
            _Shape(n, m, nnz),
            W,
            best["H"],
            best["error"],
            best["n_iter"],
            start,
            bool(interrupts.count) or any(run["interrupted"] for run in kept),
        )
        self.n_observed_ = sum(q[4] for q in loads)
        self.traffic_ = {
            "sent_bytes": session.sent,
            "received_bytes": session.received,
            "round_trips": session.calls,
        }
        if interrupts.count:
            # The model holds the best result so far; a caller's loop of fits must stop too.
            raise KeyboardInterrupt

    @staticmethod
    def _check_loaded(blocks: BlockMatrix, loads: list) -> None:
        """The blocks as read agree with the layout (files may change after read_blocks)."""
        for b, (rows, cols, *_rest) in enumerate(loads):
            expected = int(blocks.offsets[b + 1] - blocks.offsets[b])
            if (rows, cols) != (expected, blocks.n_cols):
                where = blocks.sources[b] if isinstance(blocks.sources[b], Path) else "in memory"
                raise ValueError(
                    f"row block {b} ({where}) has shape {(rows, cols)}, expected "
                    f"{(expected, blocks.n_cols)}: did the files change after read_blocks?"
                )
        forms = {q[5] for q in loads} - {None}
        if len(forms) > 1:
            raise ValueError("row blocks mix both forms of unknown cells (missing and observed)")

    def _recovering(self, session: _Session, work):
        """``work()``, run again after repairing the cluster each time a worker is lost (up to
        ``max_recoveries`` in the whole fit)."""
        while True:
            try:
                return work()
            except WorkerLost as lost:
                if self.recoveries_ >= self.max_recoveries:
                    raise RuntimeError(
                        f"the fit lost a worker {self.recoveries_ + 1} times "
                        f"(max_recoveries={self.max_recoveries}); last: {lost}"
                    ) from None
                self.recoveries_ += 1
                warnings.warn(
                    f"a worker was lost ({lost}): its row blocks are read again on the live "
                    "workers and the step under way runs again",
                    UserWarning,
                    stacklevel=2,
                )
                session.repair()

    def _draw_start(self, rng, blocks: BlockMatrix, k: int, p: dict) -> dict:
        """A random start as :meth:`banmf.BANMF._initial_factors` draws it from ``rng``: W's
        rows from the same stream (each worker jumps to its rows' place in it; with a bit
        generator other than PCG64, the rows are drawn here), then H."""
        n, m = blocks.shape
        dtype = p["dtype"]
        tiny = np.finfo(dtype).eps
        bitgen = rng.bit_generator
        spec = {
            "init_scale": float(self.init_scale),
            "project": self._project_y,
            "lower": float(self.lower),
            "upper": p["upper"],
            "eps": float(self.eps),
        }
        # PCG64's advance counts draws (Philox's counts blocks of four): jump only there.
        if isinstance(bitgen, (np.random.PCG64, np.random.PCG64DXSM)):
            spec["stream"] = (type(bitgen).__name__, bitgen.state)
            H = _worker.draw(spec["stream"], n * k, (k, m))
            bitgen.advance(n * k + k * m)
        else:
            spec["rows"] = [
                np.maximum(rng.random((int(b1 - b0), k)) * self.init_scale, tiny).astype(dtype)
                for b0, b1 in zip(blocks.offsets[:-1], blocks.offsets[1:], strict=True)
            ]
            H = rng.random((k, m))
        spec["Ht"] = np.ascontiguousarray(np.maximum(H * self.init_scale, tiny).T, dtype=dtype)
        return spec

    def _random_start(self, session: _Session, i: int, spec: dict, p: dict, progress) -> dict:
        """One random start: iterations, then the grid threshold search."""
        offsets = session.blocks.offsets
        own = {}
        for b in range(session.blocks.n_blocks):
            start = {key: v for key, v in spec.items() if key not in ("rows", "Ht")}
            start["row0"] = int(offsets[b])
            if "rows" in spec:
                start["W"] = spec["rows"][b]
            own[b] = (start,)
        session.each(_worker.begin, spec["Ht"], own=own)
        losses, interrupted, stopped, Ht = self._iterate(session, spec["Ht"], p, progress)
        progress.phase("threshold search")
        run = self._search(session, i, Ht, p)
        run.update(
            losses=np.asarray(losses), n_iter=len(losses), interrupted=interrupted, stopped=stopped
        )
        if self.thresholds == "per-factor":
            progress.phase("per-factor thresholds")
            self._refine_thresholds(session, run, p)
        self._polish(session, run, p, progress)
        progress.done(run["error"])
        return run

    def _iterate(self, session: _Session, Ht: np.ndarray, p: dict, progress):
        """The iterations; returns (objectives, interrupted, stopped by the callback, Hᵀ).

        Each block runs the Y pass of one iteration and the W step of the next in one call; the
        Y pass runs alone where the fit may stop after it (every ``check_every`` iterations,
        every iteration with a callback, the last). The H step runs here, on the summed
        partials."""
        every, max_iter, lams = p["check_every"], p["max_iter"], p["lams"]
        interrupts = session.interrupts
        losses: list[float] = []
        interrupted = stopped = False
        sums = session.sum(_worker.step, None, float(lams[0]))
        while True:
            t = len(losses)
            lam = float(lams[t])
            Ht, HHt = h_step(Ht, sums[0].astype(Ht.dtype), sums[1], lam, self.eps)
            penalties = (sums[2], float(np.sum((Ht * Ht - Ht) ** 2)) if lam else 0.0)
            WtW = sums[1]
            # The fit may stop after this iteration: its Y pass runs alone.
            may_stop = (
                (self.callback is not None and not p.get("rerun"))
                or t + 1 == max_iter
                or ((t + 1) % every == 0 and p["tol"] is not None)
                or interrupts.count
            )
            after = None if may_stop else float(lams[t + 1])
            sums = session.sum(_worker.step, (Ht, HHt), after)
            res, s2, observed_s2 = sums[3:]
            covered = observed_s2 if p["observed"] else float(np.sum(WtW * HHt))
            f = objective_value(res, s2, covered, lam, penalties[0] + penalties[1])
            losses.append(f)
            if may_stop or (t + 1) % every == 0:
                progress.iteration(len(losses), f)
            if interrupts.count:
                interrupted = True
                warnings.warn(
                    f"interrupted after {len(losses)} iterations; booleanizing the factors so far",
                    UserWarning,
                    stacklevel=4,
                )
                break
            if self.callback is not None and not p.get("rerun"):
                try:
                    if self.callback(len(losses), f):
                        stopped = True
                        break
                except KeyboardInterrupt:  # raised by the callback: as Ctrl-C
                    if not interrupts.first():
                        raise
                    interrupted = True
                    break
            if len(losses) == max_iter or settled(losses, p["tol"], every):
                break
            if may_stop:
                sums = session.sum(_worker.step, None, float(lams[t + 1]))
        return losses, interrupted, stopped, Ht

    def _search(self, session: _Session, i: int, Ht: np.ndarray, p: dict) -> dict:
        """The grid threshold search over the blocks (:func:`banmf.booleanize.search_grid`),
        keeping each block's Boolean rows."""
        P = p["n_thresholds"]
        H = Ht.T.astype(np.float64)
        factors = None
        if self.normalize == "balance":
            a = np.max(session.each(_worker.column_max), axis=0)
            b = H.max(axis=1) if H.shape[1] else np.zeros(H.shape[0])
            factors, inv = balance_scales(a, b)
            H = H * inv[:, None]
        top = max(session.each(_worker.scale, factors))
        w_points = grid_points(top, P)
        h_points = grid_points(H.max() if H.size else 0.0, P)
        vt = grid_ranks(np.ascontiguousarray(H.T), h_points)
        distinct = np.unique(np.concatenate(session.each(_worker.rank, w_points)))
        s, t, error, _, _ = search_grid(
            _Rows(session, distinct),
            vt,
            P,
            p["nnz_ones"],
            "pruned",
            w_points,
            h_points,
            self.normalize,
            p["observed"],
        )
        session.each(_worker.keep, i, s)
        k = H.shape[0]
        return {
            "start": i,
            "H_continuous": H,
            "H": np.ascontiguousarray((vt > t).T),
            "grid_thresholds": (float(w_points[s]), float(h_points[t])),
            "thresholds": (np.full(k, float(w_points[s])), np.full(k, float(h_points[t]))),
            "error": int(error),
            "refinement": {"grid": int(error)},
        }

    def _nmf_start(self, session: _Session, specs: dict, p: dict, progress) -> dict:
        """The "nmf" start (:class:`banmf.BANMF`'s): Lee-Seung iterations (Y held at X) from
        NNDSVDa factors of X, computed over the blocks (:meth:`_nndsvd`), or from the first
        random start's factors if the SVD cannot be computed; then refined as every start."""
        progress.setup("NNDSVD")
        Ht = self._nndsvd(session, p)
        first = specs[0]
        if Ht is None:
            spec = {**first, "project": False}
        else:
            spec = {key: v for key, v in first.items() if key not in ("stream", "rows")}
            spec.update(project=False, stored="nmf", Ht=Ht)
        return self._random_start(session, "nmf", spec, p, progress)

    def _nndsvd(self, session: _Session, p: dict) -> np.ndarray | None:
        """:func:`banmf.models._nndsvd.nndsvda` over the blocks: returns Hᵀ (m, k) and keeps
        each block's rows of W on it (as "nmf"); None when the SVD cannot be computed.

        The truncated SVD is scipy's ``svds`` (ARPACK) step by step: the Lanczos iterations
        on XᵀX (m ≥ n: on XXᵀ) with each product summed over the blocks, the same fixed start
        vector, then the left vectors from ``X V`` (their Gram summed over the blocks). The
        factors agree with one machine's to rounding."""
        from scipy.sparse.linalg import ArpackError, ArpackNoConvergence, LinearOperator, eigsh

        n, m = session.blocks.shape
        k = p["k"]
        r = min(k, min(n, m) - 1)
        if r < 1 or p["nnz_ones"] == 0:
            return None
        offsets = session.blocks.offsets

        def gram(V):
            if n >= m:
                return session.sum(_worker.gram_apply, V)
            return np.concatenate(
                session.each(_worker.rows_apply, session.sum(_worker.cols_apply, V, offsets))
            )

        size = min(n, m)
        operator = LinearOperator(
            (size, size),
            matvec=lambda v: gram(v.reshape(-1, 1))[:, 0],
            matmat=gram,
            dtype=np.float64,
        )
        try:
            _, eigvec = eigsh(operator, k=r, tol=0, v0=np.full(size, 1.0 / np.sqrt(size)))
        except (ArpackError, ArpackNoConvergence):
            return None
        eigvec, _ = np.linalg.qr(eigvec)
        if n >= m:
            # svd(X V) from the Gram of X V (r×r): ascending singular values, as svds gives.
            values, V = np.linalg.eigh(session.sum(_worker.rows_apply, eigvec, True))
            S = np.sqrt(np.maximum(values, 0.0))
            Vt = V.T @ eigvec.T
            squares = session.sum(_worker.keep_left, None, V, np.where(S > 0, S, 1.0))
        else:
            Av = session.sum(_worker.cols_apply, eigvec, offsets)
            u, S, vh = np.linalg.svd(Av, full_matrices=False)
            u, S, vh = u[:, ::-1], S[::-1], vh[::-1]
            U, Vt = eigvec @ vh.T, u.T
            own = {b: (U[offsets[b] : offsets[b + 1]], None, None) for b in range(len(offsets) - 1)}
            squares = sum(session.each(_worker.keep_left, own=own))
        Ht = np.zeros((m, k))
        picks: list = [None] * k
        for l, j in enumerate(np.argsort(-S, kind="stable")):
            y = Vt[j]
            yp, yn = np.maximum(y, 0), np.maximum(-y, 0)
            na_p, na_n = np.sqrt(squares[0, j]), np.sqrt(squares[1, j])
            nb_p, nb_n = np.linalg.norm(yp), np.linalg.norm(yn)
            positive, negative = na_p * nb_p, na_n * nb_n
            if positive >= negative:
                side, b, na, nb, sigma = True, yp, na_p, nb_p, positive
            else:
                side, b, na, nb, sigma = False, yn, na_n, nb_n, negative
            if sigma > 0:
                scale = np.sqrt(max(S[j], 0.0) * sigma)
                Ht[:, l] = scale * b / nb
                picks[l] = (int(j), side, scale / na)
        top = max(session.each(_worker.nndsvd_rows, k, picks))
        fill = p["nnz_ones"] / (n * m)
        dtype = p["dtype"]
        floor = np.finfo(dtype).eps
        session.each(_worker.nndsvd_fill, 1e-12 * max(top, 1.0), fill, dtype, floor)
        Ht[Ht <= 1e-12 * max(Ht.max(), 1.0)] = fill
        return np.maximum(Ht, floor).astype(dtype, order="C")

    def _columns_start(self, session: _Session, k: int, p: dict, progress) -> dict:
        """The "columns" start (:func:`banmf.polish.column_factors`) over the blocks."""
        progress.phase("greedy factors")
        counts = session.sum(_worker.column_counts)
        top = top_columns(counts, k)
        H = np.zeros((k, counts.shape[0]), dtype=bool)
        H[np.arange(len(top)), top] = True
        session.each(_worker.keep_columns, "columns", top, k)
        error = self._error(session, "columns", H, p)
        run = {
            "start": "columns",
            "losses": np.zeros(0),
            "n_iter": 0,
            "interrupted": False,
            "stopped": False,
            "H_continuous": H.astype(np.float64),
            "H": H,
            "grid_thresholds": (0.5, 0.5),
            "thresholds": (np.full(k, 0.5), np.full(k, 0.5)),
            "error": error,
            "refinement": {"columns": error},
        }
        self._polish(session, run, p, progress)
        progress.done(run["error"])
        return run

    @staticmethod
    def _error(session: _Session, start, H: np.ndarray, p: dict) -> int:
        """The Hamming error (observed cells) of the start's kept rows times H."""
        hits, cover = session.sum(_worker.counts, start, H)
        return int(p["nnz_ones"] + cover - 2 * hits)

    def _refine_thresholds(self, session: _Session, run: dict, p: dict) -> None:
        """Per-factor thresholds over the blocks (:func:`banmf.refine_thresholds`), exactly
        as on one machine: for a column of W, each block sends its rows' values and bit
        changes (16 bytes a row) and the cut is chosen here; for a row of H, the bit changes
        are summed over the blocks. Sweeps until no threshold moves (Ctrl-C: after the
        sweep under way)."""
        i = run["start"]
        tw, th = (t.copy() for t in run["thresholds"])
        Ht = np.ascontiguousarray(run["H_continuous"].T)
        Htb = Ht > th
        m, k = Ht.shape
        columns = np.arange(m)
        h_order = [np.argsort(-Ht[:, l]) for l in range(k)]
        error = run["error"]
        for _ in range(100):
            moved = 0
            for l in range(k):
                parts = session.each(_worker.row_changes, i, Htb, l)
                vals = np.concatenate([q[0] for q in parts])
                d = np.concatenate([q[1] for q in parts])
                order = np.argsort(-vals)
                better = best_cut(vals[order], d[order], tw[l])
                if better is not None:
                    tw[l] = better
                    session.each(_worker.set_threshold, i, l, float(better))
                    moved += 1
            A = pack_rows(Htb)
            for l in range(k):
                d = session.sum(_worker.column_changes, i, A, columns, l)[:, 0]
                better = best_cut(Ht[h_order[l], l], d[h_order[l]], th[l])
                if better is not None:
                    th[l] = better
                    Htb[:, l] = Ht[:, l] > better
                    A = pack_rows(Htb)
                    moved += 1
            error = self._error(session, i, Htb.T, p)
            if moved == 0 or session.interrupts.count:
                break
        run.update(
            H=np.ascontiguousarray(Htb.T),
            error=error,
            thresholds=(tw, th),
            refinement={**run["refinement"], "per-factor thresholds": error},
        )

    def _polish(self, session: _Session, run: dict, p: dict, progress) -> None:
        """The polish and the swaps of a start's Boolean factors, as :meth:`banmf.BANMF`
        runs them (its ``_boolean_steps``), over the blocks."""
        run["unpolished_err"], run["polish_rounds"], run["swaps"] = run["error"], 0, []
        i = run["start"]
        Ht = np.array(run["H"].T, order="C")
        if p["polish"] is not None:
            progress.phase("polish")
            run["error"], run["polish_rounds"] = self._polish_rounds(session, i, Ht, p)
            run.update(
                H=np.ascontiguousarray(Ht.T),
                refinement={**run["refinement"], "polish": run["error"]},
            )
        k = Ht.shape[1]
        if not p["swap"] or run["error"] == 0 or k == 0:
            return
        progress.phase("swaps")
        # At most one swap per factor on average, as on one machine.
        for _ in range(k):
            if session.interrupts.count:
                break
            change, l, j = choose_swap(*session.sum(_worker.swap_costs, i, Ht))
            if change >= 0:
                break
            session.each(_worker.swap_in, i, Ht, l, j)
            Ht[:, l] = False
            Ht[j, l] = True
            error, _ = self._polish_rounds(session, i, Ht, p)
            run.update(
                H=np.ascontiguousarray(Ht.T),
                error=error,
                swaps=[*run["swaps"], (l, j)],
                refinement={**run["refinement"], "swaps": error},
            )

    def _polish_rounds(self, session: _Session, i, Ht: np.ndarray, p: dict) -> tuple[int, int]:
        """The Boolean polish over the blocks (:func:`banmf.polish.polish_factors`, "flip"):
        every row of W against H on its own block, then every column of H (``Ht``, in place)
        against W with its bit changes summed over the blocks; rounds until nothing moves
        (Ctrl-C: after the round under way). Returns ``(error, rounds)``."""
        for rounds in range(1, 101):
            changed = sum(session.each(_worker.polish_rows_of, i, Ht))
            changed += flip_rows(
                Ht, lambda A, columns: session.sum(_worker.column_changes, i, A, columns)
            )
            error = self._error(session, i, Ht.T, p)
            if changed == 0 or session.interrupts.count:
                break
        return error, rounds

    def _gather(self, session: _Session, best: dict, specs: dict, p: dict):
        """The kept start's rows from every block; a start that a block read again (after a
        worker was lost) no longer holds runs again first, from its seed: the same rows."""
        i = best["start"]
        if not all(session.each(_worker.holds, i)):
            progress = StartProgress(1, 1, p["max_iter"], i if isinstance(i, str) else None)
            # Exactly the iterations the start ran (Ctrl-C, the callback or the tolerance may
            # have ended it), with neither the callback nor Ctrl-C cutting the run short.
            again = {**p, "max_iter": best["n_iter"], "tol": None, "rerun": True}
            interrupts, session.interrupts = session.interrupts, Interruptions()
            try:
                if i == "columns":
                    run = self._columns_start(session, best["H"].shape[0], again, progress)
                elif i == "nmf":
                    run = self._nmf_start(session, specs, again, progress)
                else:
                    run = self._random_start(session, i, specs[i], again, progress)
            finally:
                session.interrupts = interrupts
            if run["error"] != best["error"] or not np.array_equal(run["H"], best["H"]):
                raise RuntimeError(
                    f"start {i} ran again after a lost worker and ended elsewhere (error "
                    f"{run['error']}, not {best['error']}): the result would not be consistent"
                )
        parts = session.each(_worker.rows_of, i)
        return np.concatenate([q[0] for q in parts]), np.concatenate([q[1] for q in parts])

    def save(self, path) -> None:
        """Save the fitted factorization (:meth:`banmf.Factorization.save`): W, H, the errors,
        the parameters (the client left out)."""
        self._check_fitted()
        result = Factorization.from_estimator(self, method="banmf")
        params = {k: v for k, v in result.params.items() if k != "client"}
        result.replace(params=params, estimator=None).save(path)


class _Shape:
    """The shape and nonzeros of the data, for the fitted attributes that read them."""

    def __init__(self, n: int, m: int, nnz: int):
        self.shape, self.nnz = (n, m), nnz
