"""The side-by-side runner: results in task order, budget shares, failures, early ends, and
Ctrl-C from the calling thread or from a task."""

import _thread
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from banmf.runtime.runner import Run, run_side_by_side
from banmf.runtime.signals import Interruptions
from banmf.runtime.threads import cancel_with, cancelled, current_threads


def stepper(i, steps=1000, log=None):
    """A task that works ``steps`` steps of 1 ms unless cancelled; returns (i, steps done,
    cancelled)."""

    def task():
        if log is not None:
            log.append(i)
        for done in range(steps):
            if cancelled():
                return i, done, True
            time.sleep(0.001)
        return i, steps, False

    return task


@settings(max_examples=20)
@given(
    st.lists(st.integers(0, 5), min_size=0, max_size=8),
    st.integers(1, 4),
    st.sampled_from([None, 1, 2, 3]),
)
def test_results_come_in_task_order_whatever_the_workers(sleeps, n_jobs, workers):
    def task(i, ms):
        def run():
            time.sleep(ms / 1000)
            return i * i

        return run

    ended = []
    run = run_side_by_side(
        [task(i, ms) for i, ms in enumerate(sleeps)],
        n_jobs=n_jobs,
        workers=workers,
        on_done=lambda i, result, run: ended.append(i),
    )
    assert run.ordered() == [i * i for i in range(len(sleeps))]
    assert list(run.results) == list(range(len(sleeps)))
    assert sorted(ended) == list(range(len(sleeps)))
    assert not run.interrupted and not run.stopped
    assert run.workers == max(1, min(n_jobs, workers or n_jobs, len(sleeps)))


def test_each_task_runs_on_its_share_of_the_budget():
    def threads():
        return current_threads(), threading.current_thread().name

    run = run_side_by_side([threads] * 4, n_jobs=5, workers=2, name="banmf-test")
    assert run.workers == 2 and run.threads_each == 2
    assert all(n == 2 and name.startswith("banmf-test-") for n, name in run.ordered())
    inline = run_side_by_side([threads] * 4, n_jobs=3, workers=1)
    me = threading.current_thread().name
    assert inline.threads_each == 3 and inline.ordered() == [(3, me)] * 4
    assert current_threads() == run_side_by_side([current_threads]).ordered()[0]


def test_tasks_are_drawn_only_when_they_can_run():
    drawn = []

    def tasks():
        for i in range(10):
            drawn.append(i)
            yield stepper(i, steps=2)

    for workers in (1, 2):
        drawn.clear()
        run = run_side_by_side(
            tasks(),
            n_jobs=2,
            workers=workers,
            on_done=lambda i, result, run: run.keep_first(3) if i == 0 else None,
        )
        assert [r[0] for r in run.ordered()] == [0, 1, 2]
        assert max(drawn) <= 2 + workers - 1  # at most one drawn ahead per other worker


def test_the_first_failure_stops_the_others_and_is_raised():
    log = []

    def fails():
        time.sleep(0.02)
        raise ValueError("task 1 failed")

    tasks = [stepper(0, log=log), fails, stepper(2, log=log), stepper(3, log=log)]
    start = time.monotonic()
    with pytest.raises(ValueError, match="task 1 failed"):
        run_side_by_side(tasks, n_jobs=2)
    assert time.monotonic() - start < 0.8  # task 0 stopped long before its 1000 steps
    assert 3 not in log  # never begun
    with pytest.raises(ValueError, match="task 1 failed"):
        run_side_by_side(tasks, n_jobs=2, workers=1)


def test_keyboard_interrupt_from_a_task_thread_is_raised_once_the_others_stopped():
    seen = []

    def interrupts():
        time.sleep(0.02)
        raise KeyboardInterrupt

    def long():
        result = stepper(0)()
        seen.append(result)
        return result

    count = Interruptions()
    with pytest.raises(KeyboardInterrupt):
        run_side_by_side([long, interrupts], n_jobs=2, interrupts=count)
    assert seen and seen[0][2]  # cancelled, and ended before the exception came out
    assert count.count == 0  # not a Ctrl-C: Ctrl-C reaches the calling thread only


def test_ctrl_c_in_the_calling_thread_cancels_the_running_tasks_and_keeps_their_results():
    log = []

    def ctrl_c():
        time.sleep(0.02)
        _thread.interrupt_main()  # as if Ctrl-C arrived
        return stepper(1)()

    told = []
    count = Interruptions()
    run = run_side_by_side(
        [stepper(0, log=log), ctrl_c, stepper(2, log=log)],
        n_jobs=2,
        interrupts=count,
        on_interrupt=lambda run: told.append(run.interrupted),
    )
    assert run.interrupted and run.stopped and told == [True] and count.count == 1
    assert [r[0] for r in run.ordered()] == [0, 1]
    assert all(cancelled for _, _, cancelled in run.ordered())  # partial results kept
    assert 2 not in log


def test_a_second_ctrl_c_aborts():
    count = Interruptions()
    count.first()  # the first landed elsewhere in the caller's work

    def ctrl_c():
        time.sleep(0.02)
        _thread.interrupt_main()
        return stepper(1)()

    with pytest.raises(KeyboardInterrupt):
        run_side_by_side([stepper(0), ctrl_c], n_jobs=2, interrupts=count)
    assert count.count == 2


def test_in_the_calling_thread_a_task_s_keyboard_interrupt_is_an_interruption():
    def ctrl_c():
        raise KeyboardInterrupt

    log = []
    run = run_side_by_side([stepper(0, steps=1), ctrl_c, stepper(2, log=log)], workers=1)
    assert run.interrupted and run.ordered() == [(0, 1, False)] and not log
    count = Interruptions()
    count.first()
    with pytest.raises(KeyboardInterrupt):
        run_side_by_side([ctrl_c], workers=1, interrupts=count)


@pytest.mark.parametrize("workers", [1, 2])
def test_stop_keeps_the_running_tasks_results_and_starts_no_other(workers):
    log = []

    def stop_after_0(i, result, run):
        if i == 0:
            run.stop()

    tasks = [stepper(0, steps=1), stepper(1, log=log), stepper(2, log=log), stepper(3, log=log)]
    run = run_side_by_side(tasks, n_jobs=2, workers=workers, on_done=stop_after_0)
    assert run.stopped and not run.interrupted
    ids = [r[0] for r in run.ordered()]
    if workers == 1:
        assert ids == [0] and not log
    else:  # task 1 ran beside task 0 and was stopped: its result stays
        assert ids == [0, 1] and run.ordered()[1][2] and log == [1]


def test_keep_first_drops_later_tasks_and_lets_earlier_ones_end():
    def limit(i, result, run):
        if i == 1:
            run.keep_first(2)

    # Task 1 ends first; task 0 runs on to its end, task 2 is stopped and dropped.
    tasks = [stepper(0, steps=60), stepper(1, steps=1), stepper(2), stepper(3)]
    run = run_side_by_side(tasks, n_jobs=3, on_done=limit)
    assert run.limit == 2 and not run.stopped
    assert run.ordered() == [(0, 60, False), (1, 1, False)]


def test_a_caller_s_cancel_reaches_tasks_under_their_own():
    outer = threading.Event()

    def cancels():
        outer.set()
        return cancelled()

    def checks_later():
        time.sleep(0.05)
        return cancelled()

    for workers in (1, 2):  # in the calling thread, and in threads under their own cancel
        outer.clear()
        with cancel_with(outer):
            run = run_side_by_side([cancels, checks_later], n_jobs=2, workers=workers)
        assert run.ordered() == [True, True]
    assert not cancelled()


def test_run_ordered_follows_the_indices():
    run = Run(2, 1)
    run.results = {2: "c", 0: "a"}
    assert run.ordered() == ["a", "c"] and run.wanted(5)
    run.keep_first(1)
    assert run.ordered() == ["a"] and not run.wanted(1)
