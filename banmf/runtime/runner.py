"""Work run side by side on the thread budget, with one place for Ctrl-C and SIGTERM.

Fits of a sweep (:func:`banmf.fit_many`, :func:`banmf.select_rank`), the starts of one fit and
the randomised rounds of one PaNDa pattern are tasks: callables without arguments, each
returning its result. :func:`run_side_by_side` runs them on at most ``workers`` threads, each
task with an equal share of the thread budget, and gives their results in task order, so that
the thread count never changes what a caller computes from them.

Interruptions follow :mod:`banmf.runtime.signals`: Ctrl-C (and SIGTERM under
:func:`banmf.runtime.signals.signals_interrupt`) reaches the calling thread only; the first one
cancels the running tasks (they stop at their next iteration through
:func:`banmf.runtime.threads.cancelled` and return their partial result, which is kept), starts no
other, and returns with ``Run.interrupted`` set: the caller finishes the best result so far. A
second one aborts (``KeyboardInterrupt`` propagates).
"""

from __future__ import annotations

import contextvars
import functools
import queue
import threading
from collections.abc import Callable, Iterable, Sized
from typing import Generic, TypeVar

from .progress import fit_label
from .signals import Interruptions
from .threads import cancel_with, thread_budget

__all__ = ["Run", "fit_tasks", "run_side_by_side"]

T = TypeVar("T")

#: Seconds the calling thread waits for a task at a time: Python runs signal handlers only in
#: the main thread and between waits, so that a Ctrl-C delivered while it waits is seen within
#: this delay.
POLL_SECONDS = 0.1


class Run(Generic[T]):
    """One call of :func:`run_side_by_side`: its results, how it ended, and (from ``on_done``)
    the way to end it early.

    Attributes
    ----------
    results : dict of int to result
        The tasks that finished and are still wanted (below :attr:`limit`), by index, in task
        order. A task cancelled part-way keeps its partial result here.
    interrupted : bool
        The first Ctrl-C (or SIGTERM) ended the run.
    stopped : bool
        :meth:`stop` was called, by ``on_done`` or by the first interruption.
    limit : int or None
        Tasks from this index on are not wanted (:meth:`keep_first`); None: every task is.
    workers : int
        Tasks run at a time; 1 runs them in the calling thread.
    threads_each : int
        Each task's share of the thread budget.
    """

    def __init__(self, workers: int, threads_each: int):
        self.results: dict[int, T] = {}
        self.interrupted = False
        self.stopped = False
        self.limit: int | None = None
        self.workers = workers
        self.threads_each = threads_each
        self._cancels: dict[int, threading.Event] = {}  # the tasks handed to a thread

    def stop(self) -> None:
        """Start no other task; the running ones stop at their next iteration, as on Ctrl-C,
        and their results are kept."""
        self.stopped = True
        for event in list(self._cancels.values()):
            event.set()

    def keep_first(self, n: int) -> None:
        """Only the first ``n`` tasks are wanted (a limit only ever comes down): later ones
        never start, the running ones stop at their next iteration and their results are
        dropped; earlier ones run to their end."""
        self.limit = n if self.limit is None else min(self.limit, n)
        for i, event in list(self._cancels.items()):
            if i >= self.limit:
                event.set()
        self.results = {i: result for i, result in self.results.items() if i < self.limit}

    def wanted(self, i: int) -> bool:
        """Is task ``i`` below the limit?"""
        return self.limit is None or i < self.limit

    def ordered(self) -> list[T]:
        """The results kept, in task order."""
        return [self.results[i] for i in sorted(self.results)]


def run_side_by_side(
    tasks: Iterable[Callable[[], T]],
    *,
    n_jobs: int | None = None,
    workers: int | None = None,
    on_done: Callable[[int, T, Run[T]], None] | None = None,
    on_interrupt: Callable[[Run[T]], None] | None = None,
    interrupts: Interruptions | None = None,
    name: str = "banmf-task",
) -> Run[T]:
    """Run ``tasks`` side by side within the thread budget; their results in task order.

    Parameters
    ----------
    tasks : iterable of callables
        Each called without arguments, in a worker thread (or in the calling thread when one
        worker runs them) whose thread budget (:func:`banmf.runtime.threads.current_threads`) is its
        share and that is cancelled (:func:`banmf.runtime.threads.cancelled`) when the task is no
        longer wanted. Drawn in order, in the calling thread, only when a worker is free to run
        it: a generator that draws random starts draws the same ones whatever the thread
        count, and none past the last that runs.
    n_jobs : int or None, default None
        The budget (:func:`banmf.runtime.threads.effective_n_jobs`); None: the one in force.
    workers : int or None, default None
        At most this many tasks at a time (besides the budget and the number of tasks, when
        ``tasks`` has a length); 1 runs them one after the other in the calling thread. Each
        task gets ``budget // workers`` threads (at least one).
    on_done : callable, optional
        ``on_done(index, result, run)`` in the calling thread as each wanted task ends (in the
        order they end; not after an interruption). It may end the run early with
        :meth:`Run.stop` or :meth:`Run.keep_first`.
    on_interrupt : callable, optional
        ``on_interrupt(run)`` in the calling thread at the first interruption, before the
        running tasks are waited for (to say at once what happens next).
    interrupts : Interruptions, optional
        The interruptions of the caller's work, shared with its tasks (so that a second Ctrl-C
        aborts wherever the first landed); a new count by default.

    Returns
    -------
    Run
        ``results`` in task order. After the first Ctrl-C, ``interrupted`` is True and the
        results are those the tasks had: the caller decides, per :mod:`banmf.runtime.signals`, what
        to finish and whether to raise ``KeyboardInterrupt`` again.

    Raises
    ------
    KeyboardInterrupt
        A second interruption (the running tasks are cancelled and waited for; a further one
        stops the wait).
    BaseException
        The first exception a task raised, once the other tasks are cancelled and have
        stopped. A task's ``KeyboardInterrupt`` is such an exception when the task runs in a
        thread of its own (Ctrl-C reaches the calling thread only, so it comes from the task
        itself, e.g. a fit whose callback interrupted it); in the calling thread it counts as
        an interruption, as Ctrl-C does.
    """
    interrupts = Interruptions() if interrupts is None else interrupts
    with thread_budget(n_jobs) as budget:
        count = min(budget, budget if workers is None else workers)
        if isinstance(tasks, Sized):
            count = min(count, len(tasks))
        count = max(1, count)
        run: Run[T] = Run(count, max(1, budget // count))
        if count == 1:
            _one_by_one(iter(tasks), run, on_done, on_interrupt, interrupts)
        else:
            _in_threads(iter(tasks), run, on_done, on_interrupt, interrupts, name)
    return run


def _interrupted(run: Run, on_interrupt, interrupts: Interruptions) -> None:
    """The rule, called in an ``except KeyboardInterrupt`` block: the first stops the run, a
    second propagates (the bare ``raise`` re-raises the exception being handled)."""
    if not interrupts.first():
        raise
    run.interrupted = True
    run.stop()
    if on_interrupt is not None:
        on_interrupt(run)


def _one_by_one(tasks, run: Run, on_done, on_interrupt, interrupts: Interruptions) -> None:
    """The tasks in the calling thread, on the whole budget."""
    i = 0
    try:
        while not run.stopped and run.wanted(i):
            task = next(tasks, None)
            if task is None:
                return
            run.results[i] = result = task()
            if on_done is not None:
                on_done(i, result, run)
            i += 1
    except KeyboardInterrupt:
        _interrupted(run, on_interrupt, interrupts)


def _in_threads(tasks, run: Run, on_done, on_interrupt, interrupts, name: str) -> None:
    """The tasks on ``run.workers`` threads, each on its share of the budget."""
    waiting: queue.SimpleQueue = queue.SimpleQueue()  # (index, task, cancel), None: quit
    ended: queue.SimpleQueue = queue.SimpleQueue()  # indices of the tasks that ended
    # Written by the workers themselves: a Ctrl-C may land anywhere in the calling thread, and
    # nothing a task computed is lost.
    finished: dict[int, object] = {}
    failed: dict[int, BaseException] = {}

    def work() -> None:
        while (item := waiting.get()) is not None:
            i, task, cancel = item
            try:
                if not cancel.is_set():  # not dropped while it waited
                    with cancel_with(cancel), thread_budget(run.threads_each):
                        finished[i] = task()
            except BaseException as exc:  # raised in the calling thread
                failed[i] = exc
            finally:
                ended.put(i)

    # Each thread runs in a copy of this thread's context: the budget, and a caller's cancel.
    threads = [
        threading.Thread(
            target=contextvars.copy_context().run, args=(work,), daemon=True, name=f"{name}-{w}"
        )
        for w in range(run.workers)
    ]
    drawn = running = 0
    exhausted = False
    try:
        for thread in threads:
            thread.start()
        while True:
            while running < run.workers and not (exhausted or run.stopped) and run.wanted(drawn):
                task = next(tasks, None)
                if task is None:
                    exhausted = True
                    break
                run._cancels[drawn] = threading.Event()
                waiting.put((drawn, task, run._cancels[drawn]))
                drawn, running = drawn + 1, running + 1
            if running == 0 or failed:
                break
            try:
                i = ended.get(timeout=POLL_SECONDS)
            except queue.Empty:
                continue
            running -= 1
            run._cancels.pop(i, None)
            if i in finished and run.wanted(i) and on_done is not None:
                on_done(i, finished[i], run)
    except KeyboardInterrupt:
        _interrupted(run, on_interrupt, interrupts)
    finally:
        # Whatever ended the run, no task is left running: the others stop at their next
        # iteration.
        for event in list(run._cancels.values()):
            event.set()
        for _ in threads:
            waiting.put(None)
        _join(threads, run, on_interrupt, interrupts)
    if failed:
        raise next(iter(failed.values()))  # the first to fail (a dict keeps the order of writes)
    run.results = {i: finished[i] for i in sorted(finished) if run.wanted(i)}


def fit_tasks(tasks, n_jobs=None, fitted=None, labels=None) -> list:
    """:func:`banmf.fit_many` for fits that each have their own data (:func:`banmf.select_rank`'s
    folds): ``tasks`` are ``(estimator, data)`` with ``data`` a :class:`banmf.io.Dataset`.
    ``fitted()``, if given, is called (in the calling thread) as each fit ends; ``labels``, if
    given, name the fits in their progress records (:func:`banmf.runtime.progress.fit_label`).
    Returns the estimators, fitted, in order; on Ctrl-C, once the fits under way have
    stopped, raises KeyboardInterrupt."""
    tasks = list(tasks)
    labels = [None] * len(tasks) if labels is None else list(labels)
    run = run_side_by_side(
        [functools.partial(_fit, *task, label) for task, label in zip(tasks, labels)],
        n_jobs=n_jobs,
        on_done=None if fitted is None else lambda i, est, run: fitted(),
        name="banmf-fit",
    )
    if run.interrupted:
        raise KeyboardInterrupt  # a loop of fits stops
    return [est for est, _ in tasks]


def _fit(est, data, label=None):
    with fit_label(label):
        return est.fit(data)


def _join(threads: list[threading.Thread], run: Run, on_interrupt, interrupts) -> None:
    """Wait for the threads to end; Ctrl-C while waiting follows the rule too."""
    for thread in threads:
        while thread.is_alive():
            try:
                thread.join(timeout=POLL_SECONDS)
            except KeyboardInterrupt:
                _interrupted(run, on_interrupt, interrupts)
