"""One fit's row blocks on the Dask workers: placing them, calls on every block, the sums over
blocks by one fixed tree, and the repair of a lost worker."""

from __future__ import annotations

import contextvars
import time
import uuid
from collections import deque

import numpy as np

from ...runtime.signals import Interruptions
from . import worker
from .blocks import BlockMatrix

__all__ = ["Session", "WorkerLost"]

#: A round's deadline (docs/SCALING.md, "A hung worker"): DEADLINE_FACTOR times the median of
#: the last DEADLINE_HISTORY rounds of the same call, never less than DEADLINE_FLOOR seconds;
#: a call not timed yet (its first round, or its first after a repair) waits DEADLINE_FIRST
#: seconds, as it may read the blocks or compile the worker's kernels. A worker that has not
#: answered by then counts as lost.
DEADLINE_FACTOR = 10.0
DEADLINE_FLOOR = 60.0
DEADLINE_FIRST = 600.0
DEADLINE_HISTORY = 9

#: Calls whose last rounds took under LOOP_LIMIT seconds (their median) run on each worker's
#: event loop, not in its actor thread: two handoffs between threads fewer per worker and
#: round, and Dask's sampling profiler, which runs on that loop, stays off the core meanwhile.
#: Longer rounds stay in the thread: the worker's heartbeats wait while its loop computes, and
#: a handoff is nothing beside them (docs/decisions.md, "Dask deadlines and the event loop").
LOOP_LIMIT = 0.25


#: The workers an enclosing fit lost (a hung worker, still listed by the scheduler): a fit run
#: inside it (the inner fit that chooses the predictor of unknown cells) leaves them alone from
#: the start instead of waiting on them again.
lost_before: contextvars.ContextVar[frozenset] = contextvars.ContextVar(
    "banmf_lost_workers", default=frozenset()
)


class WorkerLost(Exception):
    """A worker holding row blocks died, hung (missed a round's deadline) or lost its blocks
    during the fit."""


def _is_lost(exc: BaseException) -> bool:
    """Whether ``exc`` means a worker (or the blocks it held) is gone, rather than an error in
    the work itself (a file that cannot be read, a full disk: those are raised as they are)."""
    from distributed import KilledWorker
    from distributed.comm import CommClosedError

    if isinstance(exc, (worker.BlockLost, KilledWorker, CommClosedError)):
        return True
    # What an actor's call raises when its worker is gone.
    return isinstance(exc, (OSError, RuntimeError)) and "Actor" in str(exc)


class Session:
    """One fit's row blocks on the workers: one :class:`BlockServer` actor per worker holding
    blocks, calls on every block, the sums over blocks, and the repair of a lost worker.

    Every call waits for its answers: a worker's death fails its actor's call at once, a
    worker that does not answer by the round's deadline (:meth:`deadline`) counts as lost
    from then on, and :class:`WorkerLost` says so."""

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
        self.times: dict[str, deque] = {}  # call → its last rounds' times (seconds)
        # Workers that missed a deadline (or could not be reached): lost to this fit, and to
        # the fits it runs inside its own (:data:`lost_before`).
        self.hung: set[str] = set(lost_before.get())

    def _workers(self) -> dict[str, dict]:
        """The live workers: the scheduler's, but those lost to this fit (:attr:`hung`)."""
        try:
            info = self.client.scheduler_info(n_workers=-1)
        except TypeError:  # distributed before 2025 lists every worker anyway
            info = self.client.scheduler_info()
        return {w: v for w, v in info["workers"].items() if w not in self.hung}

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
                worker.BlockServer,
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
                self.servers[w] = self._wait({w: future}, "BlockServer")[0]
        by_worker = self._by_worker(blocks)
        calls = {
            w: self.servers[w].each(
                worker.load,
                mine,
                own={b: (self.blocks.sources[b], self._budget(workers[w])) for b in mine},
            )
            for w, mine in by_worker.items()
        }
        for w, values in self._answers(calls, "load").items():
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

    def deadline(self, kind: str) -> float:
        """Seconds a round of the call ``kind`` may take (module constants ``DEADLINE_*``)."""
        times = self.times.get(kind)
        if not times:
            return DEADLINE_FIRST
        return max(DEADLINE_FLOOR, DEADLINE_FACTOR * float(np.median(times)))

    def _wait(self, futures: dict, kind: str) -> list:
        """The results of ``futures`` (worker → its call of ``kind``), timed for the deadline
        of the next such round. Workers that have not answered by this one's are lost to the
        fit (:attr:`hung`). A first Ctrl-C is noted (the fit then stops at its next step) and
        the wait goes on, so that no block is left half-way through a step."""
        began = time.monotonic()
        limit = self.deadline(kind)
        values = []
        for future in futures.values():
            while True:
                try:
                    values.append(_result(future, began + limit))
                    break
                except _Late:
                    late = sorted(w for w, f in futures.items() if not f.done())
                    self.hung.update(late)
                    raise WorkerLost(
                        f"{', '.join(late)} did not answer a round of {kind} within its "
                        f"deadline, {limit:.3g} s; counted as lost"
                    ) from None
                except KeyboardInterrupt:
                    if self.interrupts is None or not self.interrupts.first():
                        raise
                except Exception as exc:
                    if _is_lost(exc):
                        raise WorkerLost(f"{type(exc).__name__}: {exc}") from None
                    raise
        self.times.setdefault(kind, deque(maxlen=DEADLINE_HISTORY)).append(time.monotonic() - began)
        return values

    def _dispatch(self, kind: str) -> dict:
        """How a round of ``kind`` runs on the workers (:data:`LOOP_LIMIT`): the keywords of
        the actor calls. Workers in this process share one event loop with each other and the
        client, so their calls always run in their threads."""
        times = self.times.get(kind)
        if not times or float(np.median(times)) >= LOOP_LIMIT:
            return {}
        if any(w.startswith("inproc://") for w in self.servers):
            return {}
        return {"separate_thread": False}

    def _answers(self, calls: dict, kind: str, args=(), own=None) -> dict:
        """Each worker's answer to its call of ``kind``; counts the arrays sent (``args`` to
        each worker, ``own`` once: each block's to its worker) and received."""
        answers = dict(zip(calls, self._wait(calls, kind), strict=True))
        self.sent += len(calls) * _payload(args) + _payload(own)
        self.received += _payload(list(answers.values()))
        self.calls += 1
        return answers

    def each(self, func, *args, own: dict | None = None) -> list:
        """``func(fit, b, *args)`` on every block, results in block order."""
        by_worker, how = self._by_worker(), self._dispatch(func.__name__)
        calls = {
            w: self.servers[w].each(
                func, mine, args, {b: own[b] for b in mine} if own else None, **how
            )
            for w, mine in by_worker.items()
        }
        out = {}
        for w, values in self._answers(calls, func.__name__, args, own).items():
            out.update(zip(by_worker[w], values, strict=True))
        return [out[b] for b in range(self.blocks.n_blocks)]

    def sum(self, func, *args):
        """The sum over all blocks of ``func(fit, b, *args)``, by the fixed tree over blocks
        (:func:`banmf.distributed.worker.node_sum`): each worker adds the nodes within its
        blocks, the driver the rest."""
        n_blocks, how = self.blocks.n_blocks, self._dispatch(func.__name__)
        calls = {
            w: self.servers[w].sums(func, mine, n_blocks, args, **how)
            for w, mine in self._by_worker().items()
        }
        nodes = {}
        for part in self._answers(calls, func.__name__, args).values():
            nodes.update(part)
        # Every block lies in a node some worker added.
        return worker.node_sum(0, n_blocks, None, nodes)

    def repair(self) -> None:
        """Read the blocks of workers that left (or hung) again on the live ones."""
        alive = set(self._workers())
        for w in [w for w in self.servers if w not in alive]:
            del self.servers[w]
        lost = [b for b, w in self.where.items() if w not in alive]
        if not lost:
            # The blocks were lost without their worker leaving (it restarted in place):
            # read every block again.
            lost = list(self.where)
            self.servers.clear()
            # Or it died a moment ago and the scheduler still lists it: one that cannot be
            # reached is lost to this fit, as a hung one is.
            answers = self.client.run(
                worker.forget, self.fit, workers=sorted(alive), on_error="return"
            )
            self.hung.update(w for w, answer in answers.items() if isinstance(answer, Exception))
        for b in lost:
            del self.where[b]
        # The workers now hold more blocks each: their rounds are timed again.
        self.times.clear()
        self.place(lost)

    def peak_bytes(self) -> int:
        """The most bytes of the fit's blocks a live worker held in memory at once."""
        return max(
            self.client.run(worker.peak_bytes, self.fit, workers=sorted(self.servers)).values()
        )

    def close(self) -> None:
        """Drop the fit's blocks from every live worker. (A hung worker is not asked: the
        call would hang too. It keeps them until it restarts.)"""
        self.servers.clear()
        try:
            live = sorted(self._workers())
            if live:
                self.client.run(worker.forget, self.fit, workers=live)
        except Exception:  # the cluster may be gone; there is nothing left to free then
            pass


class _Late(Exception):
    """A call not answered by its round's deadline."""


def _result(future, limit: float):
    """``future``'s result, waiting until ``limit`` (a ``time.monotonic()``) at most; raises
    :class:`_Late` if it is not done by then."""
    remaining = limit - time.monotonic()
    if future.done():
        return future.result()
    if remaining > 0:
        try:
            return future.result(timeout=remaining)
        except TimeoutError:
            # Done as the wait ended, or its work raised TimeoutError: result() says which.
            if future.done():
                return future.result()
    raise _Late


def _payload(obj) -> int:
    """Bytes of the arrays in ``obj`` (nested tuples, lists, dicts)."""
    if isinstance(obj, np.ndarray) or hasattr(obj, "nbytes"):  # arrays, packed factors
        return int(obj.nbytes)
    if isinstance(obj, (tuple, list)):
        return sum(_payload(v) for v in obj)
    if isinstance(obj, dict):
        return sum(_payload(v) for v in obj.values())
    return 0
