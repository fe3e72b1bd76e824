"""BANMF on Dask: the rows of X stay on the workers, the sums over rows are reduced."""

from __future__ import annotations

import time
import uuid
import warnings
from numbers import Integral, Real
from pathlib import Path
from typing import ClassVar

import numpy as np

from .._params import NONE, Interval, Kind, Options, subset_of
from .._progress import StartProgress
from .._signals import Interruptions
from .._validation import check_random_state
from ..booleanize import balance_scales, grid_points, grid_ranks, search_grid
from ..models._base import budgeted, store_params
from ..models.banmf import BANMF as _BANMF
from ..models.banmf import settled
from ..result import Factorization
from . import _worker
from .blocks import BlockMatrix

__all__ = ["BANMF"]

#: Seconds between two looks at the workers while waiting on a result: a task of a worker that
#: died never finishes, so the wait must notice the worker is gone.
WATCH_SECONDS = 1.0


class WorkerLost(Exception):
    """A worker holding row blocks died (or its blocks are gone) during the fit."""


def _lost_errors() -> tuple:
    """The exceptions that mean a worker (or what it held) is gone."""
    from distributed import KilledWorker
    from distributed.comm import CommClosedError

    try:
        from distributed.client import FutureCancelledError
    except ImportError:  # older distributed
        from concurrent.futures import CancelledError as FutureCancelledError
    return (LookupError, KilledWorker, CommClosedError, FutureCancelledError, OSError)


class _Session:
    """One fit's row blocks on the workers: where each lives, how to run a task on it, how to
    reduce the blocks' sums, and how to notice and repair a lost worker."""

    def __init__(self, client, blocks: BlockMatrix, budget, n_jobs):
        self.client, self.blocks = client, blocks
        self.fit = f"banmf-{uuid.uuid4().hex}"
        self.budget_param, self.n_jobs = budget, n_jobs
        self.where: dict[int, str] = {}
        self.threads: dict[int, int] = {}

    # -- placement ------------------------------------------------------------------------

    def _workers(self) -> dict[str, dict]:
        return self.client.scheduler_info(n_workers=-1)["workers"]

    def place(self, blocks) -> list:
        """Read ``blocks`` on the live workers (contiguous runs of blocks per worker, the
        others' placement unchanged); returns the load futures."""
        workers = self._workers()
        if not workers:
            raise RuntimeError("the Dask cluster has no workers")
        names = sorted(workers)
        blocks = list(blocks)
        for q, b in enumerate(blocks):
            self.where[b] = names[q * len(names) // len(blocks)]
        per_worker: dict[str, int] = {}
        for w in self.where.values():
            per_worker[w] = per_worker.get(w, 0) + 1
        for b, w in self.where.items():
            nthreads = int(workers[w].get("nthreads", 1))
            if self.n_jobs is not None and self.n_jobs > 0:
                nthreads = min(nthreads, self.n_jobs)
            # A worker runs up to nthreads tasks at once: its blocks share its threads.
            self.threads[b] = max(1, nthreads // min(nthreads, per_worker[w]))
        return [
            self.on(b, _worker.load, self.blocks.sources[b], self._budget(workers[self.where[b]]))
            for b in blocks
        ]

    def _budget(self, worker: dict) -> int | None:
        """Bytes of blocks a worker keeps in memory: ``block_memory`` as given, or for "auto"
        half the worker's memory limit (none without one)."""
        if self.budget_param != "auto":
            return None if self.budget_param is None else int(self.budget_param)
        limit = worker.get("memory_limit") or 0
        return int(limit) // 2 if limit else None

    def on(self, b: int, func, *args):
        """Run ``func(fit, b, *args)`` on block b's worker."""
        return self.client.submit(
            func,
            self.fit,
            b,
            *args,
            workers=[self.where[b]],
            allow_other_workers=False,
            pure=False,
        )

    def each(self, func, *args, threads: bool = False) -> list:
        """``func`` on every block (``threads``: with the block's thread share last)."""
        return [
            self.on(b, func, *args, *((self.threads[b],) if threads else ()))
            for b in range(self.blocks.n_blocks)
        ]

    def submit(self, func, *args):
        """A task anywhere (a reduction or the H step)."""
        return self.client.submit(func, *args, pure=False)

    def tree(self, futures: list):
        """The sum of the blocks' partials, by a binary tree over the block order: the same
        additions whichever workers hold the blocks."""
        level = list(futures)
        while len(level) > 1:
            pairs = [
                self.submit(_worker.add, level[q], level[q + 1])
                for q in range(0, len(level) - 1, 2)
            ]
            level = pairs + ([level[-1]] if len(level) % 2 else [])
        return level[0]

    # -- results --------------------------------------------------------------------------

    def result(self, futures):
        """The results of ``futures`` (one or a list); raises :class:`WorkerLost` if a worker
        holding blocks dies meanwhile (its tasks would never finish) or a block is gone."""
        from distributed import wait

        single = not isinstance(futures, list)
        items = [futures] if single else futures
        lost = _lost_errors()
        while True:
            try:
                wait(items, timeout=WATCH_SECONDS)
                break
            except TimeoutError:
                alive = set(self._workers())
                gone = sorted(set(self.where.values()) - alive)
                if gone:
                    raise WorkerLost(f"worker {gone[0]} left the cluster") from None
        try:
            values = self.client.gather(items)
        except lost as exc:
            raise WorkerLost(f"{type(exc).__name__}: {exc}") from None
        return values[0] if single else values

    def repair(self) -> None:
        """Read the blocks of workers that left again on the live ones."""
        alive = set(self._workers())
        lost = [b for b, w in self.where.items() if w not in alive]
        if not lost:
            # The blocks were lost without their worker leaving (it restarted in place): read
            # every block again.
            lost = list(self.where)
            self.client.run(_worker.forget, self.fit)
        for b in lost:
            del self.where[b]
        self.result(self.place(lost))

    def close(self) -> None:
        """Drop the fit's blocks from every worker."""
        try:
            self.client.run(_worker.forget, self.fit)
        except Exception:  # the cluster may be gone; there is nothing left to free then
            pass


class _Rows:
    """The rows' half of the threshold search (:class:`banmf.booleanize.GridRows`) summed over
    the row blocks on the workers."""

    def __init__(self, session: _Session, distinct: np.ndarray):
        self.s, self.distinct = session, distinct
        self.sizes = None

    def hit_diffs(self, vt, P):
        vt_f = self.s.client.scatter(vt, hash=False)
        hits, cells, sizes = self.s.result(
            self.s.tree(self.s.each(_worker.grid_sums, vt_f, P, threads=True))
        )
        self.sizes = sizes
        return hits, cells

    def active_counts(self, P):
        return self.sizes

    def distinct_ranks(self):
        return self.distinct

    def packed_bytes(self, P):
        return max(self.s.result(self.s.each(_worker.packed_bytes, P)))

    def covers(self, s, packed_h, cache):
        packed = self.s.client.scatter(packed_h, hash=False)
        parts = self.s.result(self.s.each(_worker.covers, s, packed, cache, threads=True))
        return [int(c) for c in np.sum(parts, axis=0)]


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
    thresholds : {"global"}, default "global"
        The grid's single pair of thresholds. Per-factor thresholds are not distributed yet.
    polish, swap : False
        The Boolean polish and the swaps are not distributed yet.
    extra_starts : tuple of {"columns"}, default ("columns",)
        "columns" as in :class:`banmf.BANMF` (without its polish). The "nmf" start needs a
        truncated SVD of the whole X and "grecond" whole columns: neither is distributed.
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
    recoveries_ : int
        Worker losses survived.
    peak_block_bytes_ : int
        The most bytes of row blocks one worker held in memory at once.

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
        thresholds="global",
        polish=False,
        swap=False,
        extra_starts=("columns",),
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
        "thresholds": [Options("global")],
        "polish": [Options(False)],
        "swap": [Options(False)],
        "extra_starts": [subset_of("columns")],
        "client": [NONE, Kind("a distributed.Client", lambda v: hasattr(v, "submit"))],
        "n_blocks": [NONE, Interval(Integral, 1, None)],
        "block_memory": [Options("auto"), NONE, Interval(Real, 0, None)],
        "max_recoveries": [Interval(Integral, 0, None)],
    }

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
        client = self._client()
        session = _Session(client, blocks, self.block_memory, self.n_jobs)
        try:
            self._fit_blocks(session, start)
        finally:
            session.close()
        return self

    def _fit_blocks(self, session: _Session, start: float) -> None:
        blocks = session.blocks
        n, m = blocks.shape
        k = self.n_components
        if k > min(n, m) and min(n, m) > 0:
            warnings.warn(
                f"n_components={k} exceeds min(n, m)={min(n, m)}", UserWarning, stacklevel=3
            )
        loads = session.result(session.place(range(blocks.n_blocks)))
        self._check_loaded(blocks, loads)
        nnz = sum(q[2] for q in loads)
        forms = {q[5] for q in loads} - {None}
        observed = bool(forms and forms.pop())
        p = self._check_params(k, (n, m), nnz + sum(q[3] for q in loads))
        p["observed"], p["nnz_ones"] = observed, nnz
        rng = check_random_state(self.random_state)
        interrupts = Interruptions()
        self.recoveries_ = 0
        runs: list[dict] = []
        best = None
        specs: dict = {}
        interrupted = False
        n_starts = p["n_init"]
        i = 0
        while i < n_starts:
            specs[i] = self._draw_start(rng, blocks, k, p)
            progress = StartProgress(i + 1, n_starts, p["max_iter"])
            run = self._recovering(
                session,
                lambda i=i, pr=progress: self._random_start(
                    session, i, specs[i], p, pr, interrupts
                ),
            )
            runs.append(run)
            if best is None or run["error"] < best["error"]:
                best = run
            session.result(session.each(_worker.keep_only, [best["start"]]))
            if i == 0 and p["auto_n_init"]:
                n_starts = self._auto_n_init(p, run)
            interrupted = run["interrupted"]
            if self._last_start(run):
                break
            i += 1
        self.extra_start_errors_ = {}
        if (
            "columns" in p["extra_starts"]
            and k > 0
            and not interrupted
            and not (best["error"] == 0 or best["stopped"])
        ):
            progress = StartProgress(len(runs) + 1, len(runs) + 1, p["max_iter"])
            run = self._recovering(session, lambda: self._columns_start(session, k, p, progress))
            self.extra_start_errors_["columns"] = run["error"]
            if run["error"] < best["error"]:
                best = run
        self.best_start_ = best["start"]
        self.init_errors_ = [run["error"] for run in runs]
        self.n_init_ = self._auto_n_init(p, runs[0]) if p["auto_n_init"] else p["n_init"]
        W_scaled, W = self._recovering(
            session, lambda: self._gather(session, best, specs, p, interrupts)
        )
        self.loss_curve_ = best["losses"]
        self.W_continuous_, self.H_continuous_ = W_scaled, best["H_continuous"]
        self.grid_thresholds_, self.thresholds_ = best["grid_thresholds"], best["thresholds"]
        self.booleanized_err_ = self.unpolished_err_ = best["error"]
        self.polish_rounds_, self.refinement_, self.swaps_ = 0, best["refinement"], []
        self.n_blocks_ = blocks.n_blocks
        self.peak_block_bytes_ = max(session.client.run(_worker.peak_bytes, session.fit).values())
        self._set_result(
            _Shape(n, m, nnz),
            W,
            best["H"],
            best["error"],
            best["n_iter"],
            start,
            interrupted or any(run["interrupted"] for run in runs),
        )
        self.n_observed_ = sum(q[4] for q in loads)
        if interrupts.count:
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
                    f"{lost}: its row blocks are read again on the live workers and the "
                    "current step runs again",
                    UserWarning,
                    stacklevel=4,
                )
                session.repair()

    def _draw_start(self, rng, blocks: BlockMatrix, k: int, p: dict) -> dict:
        """A random start as :meth:`banmf.BANMF._initial_factors` draws it from ``rng``: W's
        rows from the same stream (each worker jumps to its rows' place in it; with a bit
        generator that cannot jump, the rows are drawn here), then H."""
        n, m = blocks.shape
        dtype = p["dtype"]
        bitgen = rng.bit_generator
        spec = {
            "init_scale": float(self.init_scale),
            "project": self._project_y,
            "lower": float(self.lower),
            "upper": p["upper"],
            "eps": float(self.eps),
        }
        if hasattr(bitgen, "advance"):
            spec["stream"] = (type(bitgen).__name__, bitgen.state)
            H = _worker.draw(spec["stream"], n * k, (k, m))
            bitgen.advance(n * k + k * m)
        else:
            tiny = np.finfo(dtype).eps
            spec["rows"] = [
                np.maximum(rng.random((int(b1 - b0), k)) * self.init_scale, tiny).astype(dtype)
                for b0, b1 in zip(blocks.offsets[:-1], blocks.offsets[1:], strict=True)
            ]
            H = rng.random((k, m))
        H = H * self.init_scale
        spec["Ht"] = np.ascontiguousarray(np.maximum(H, np.finfo(dtype).eps).T, dtype=dtype)
        return spec

    def _random_start(self, session, i, spec, p, progress, interrupts) -> dict:
        """One random start: iterations, then the grid threshold search."""
        blocks = session.blocks
        Ht0 = session.client.scatter(spec["Ht"], hash=False)
        begins = []
        for b in range(blocks.n_blocks):
            own = {key: v for key, v in spec.items() if key not in ("rows", "Ht")}
            own["row0"] = int(blocks.offsets[b])
            if "rows" in spec:
                own["W"] = spec["rows"][b]
            begins.append(session.on(b, _worker.begin, own, Ht0, session.threads[b]))
        losses, interrupted, stopped, h = self._iterate(
            session, begins, Ht0, p, progress, interrupts
        )
        progress.phase("threshold search")
        run = self._search(session, i, h, p)
        run.update(
            losses=np.asarray(losses), n_iter=len(losses), interrupted=interrupted, stopped=stopped
        )
        progress.done(run["error"])
        return run

    def _iterate(self, session, begins, Ht0, p, progress, interrupts):
        """The iterations; returns (objectives, interrupted, stopped by the callback, the last
        H step's future)."""
        ys = begins
        h = session.submit(_as_h, Ht0)
        losses: list[float] = []
        every, max_iter = p["check_every"], p["max_iter"]
        # Iterations are sent a check apart (every one with a callback): the workers never
        # wait for the driver inside a group.
        chunk = every if self.callback is None else 1
        interrupted = stopped = False
        lams = p["lams"]
        threads = max(session.threads.values())
        while len(losses) < max_iter and not (interrupted or stopped):
            done = len(losses)
            count = min(chunk, max_iter - done, every - done % every)
            objectives = []
            for lam in lams[done : done + count]:
                lam = float(lam)
                ws = [
                    session.on(b, _worker.step_w, lam, session.threads[b], ys[b])
                    for b in range(len(ys))
                ]
                h = session.submit(_worker.update_h, h, session.tree(ws), lam, self.eps, threads)
                ys = session.each(_worker.step_y, h, threads=True)
                objectives.append(session.submit(_worker.objective, h, lam, p["observed"], *ys))
            try:
                values = session.result(objectives)
            except KeyboardInterrupt:
                if not interrupts.first():
                    raise
                warnings.warn(
                    f"interrupted after {done} iterations; booleanizing the factors so far",
                    UserWarning,
                    stacklevel=4,
                )
                interrupted = True
                # The group under way finishes, so that W and H agree (a second Ctrl-C aborts).
                values = session.result(objectives)
            for f in values:
                losses.append(f)
            progress.iteration(len(losses), losses[-1])
            if self.callback is not None and self.callback(len(losses), losses[-1]):
                stopped = True
            if settled(losses, p["tol"], every):
                break
        return losses, interrupted, stopped, h

    def _search(self, session: _Session, i: int, h, p: dict) -> dict:
        """The grid threshold search over the blocks (:func:`banmf.booleanize.search_grid`),
        keeping each block's Boolean rows."""
        P = p["n_thresholds"]
        Ht = session.result(session.submit(_first, h))
        H = Ht.T.astype(np.float64)
        factors = None
        if self.normalize == "balance":
            a = np.max(session.result(session.each(_worker.column_max)), axis=0)
            b = H.max(axis=1) if H.shape[1] else np.zeros(H.shape[0])
            factors, inv = balance_scales(a, b)
            H = H * inv[:, None]
        top = max(session.result(session.each(_worker.scale, factors)))
        w_points = grid_points(top, P)
        h_points = grid_points(H.max() if H.size else 0.0, P)
        vt = grid_ranks(np.ascontiguousarray(H.T), h_points)
        distinct = np.unique(np.concatenate(session.result(session.each(_worker.rank, w_points))))
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
        session.result(session.each(_worker.keep, i, s))
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

    def _columns_start(self, session: _Session, k: int, p: dict, progress) -> dict:
        """The "columns" start (:func:`banmf.polish.column_factors`) over the blocks."""
        progress.phase("columns start")
        counts = session.result(session.tree(session.each(_worker.column_counts)))
        m = counts.shape[0]
        top = np.argsort(-counts, kind="stable")[: min(k, m)]
        H = np.zeros((k, m), dtype=bool)
        H[np.arange(len(top)), top] = True
        session.result(session.each(_worker.keep_columns, "columns", top, k))
        parts = session.result(session.each(_worker.counts, "columns", H, threads=True))
        hits, cover = (sum(int(q[j]) for q in parts) for j in (0, 1))
        error = p["nnz_ones"] + cover - 2 * hits
        progress.done(error)
        return {
            "start": "columns",
            "losses": np.zeros(0),
            "n_iter": 0,
            "interrupted": False,
            "stopped": False,
            "H_continuous": H.astype(np.float64),
            "H": H,
            "grid_thresholds": (0.5, 0.5),
            "thresholds": (np.full(k, 0.5), np.full(k, 0.5)),
            "error": int(error),
            "refinement": {"columns": int(error)},
        }

    def _gather(self, session, best, specs, p, interrupts):
        """The kept start's rows from every block; a start a lost block no longer holds is
        run again first (from its seed: the same rows)."""
        if not all(session.result(session.each(_worker.holds, best["start"]))):
            i = best["start"]
            progress = StartProgress(1, 1, p["max_iter"])
            if i == "columns":
                self._columns_start(session, best["H"].shape[0], p, progress)
            else:
                # The same iterations: as many as the start ran (Ctrl-C or the callback may
                # have cut it short), with the same stopping rule.
                self._random_start(
                    session, i, specs[i], {**p, "max_iter": best["n_iter"]}, progress, interrupts
                )
        parts = session.result(session.each(_worker.rows_of, best["start"]))
        W_scaled = np.concatenate([q[0] for q in parts])
        W = np.concatenate([q[1] for q in parts])
        return W_scaled, W

    def save(self, path) -> None:
        """Save the fitted factorization (:meth:`banmf.Factorization.save`): W, H, the errors,
        the parameters (the client left out)."""
        self._check_fitted()
        result = Factorization.from_estimator(self, method="banmf")
        params = {k: v for k, v in result.params.items() if k != "client"}
        result.replace(params=params, estimator=None).save(path)


def _as_h(Ht: np.ndarray) -> tuple:
    """The starting H in the form of an H step's result."""
    return (Ht,)


def _first(h: tuple) -> np.ndarray:
    return h[0]


class _Shape:
    """The shape and nonzeros of the data, for the fitted attributes that read them."""

    def __init__(self, n: int, m: int, nnz: int):
        self.shape, self.nnz = (n, m), nnz
