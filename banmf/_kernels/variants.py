"""Kernels compiled twice from one body: a serial variant and a parallel one.

A parallel kernel pays a fork and a join of the thread team on every call; on small work that
costs more than the work, and when the machine is busy (other fits, other processes) every join
waits for a descheduled thread. So each kernel exists as ``kernel.serial`` (``prange`` runs as
``range``) and ``kernel.parallel``, compiled from the same Python function: the arithmetic, and
so the results, are the same. Which one runs is the caller's choice (:mod:`banmf.runtime.threads`).

Each variant is compiled lazily, on its first call: a run that never goes parallel never
compiles a parallel kernel.
"""

import types

from numba import njit


def _renamed(body, suffix: str):
    """A copy of ``body`` under its own qualified name.

    Numba names a kernel's cache files after the function's qualified name and keys them by
    signature and bytecode only, not by the ``parallel`` flag: without distinct names the two
    variants would read each other's cached machine code.
    """
    func = types.FunctionType(
        body.__code__, body.__globals__, body.__name__, body.__defaults__, body.__closure__
    )
    func.__qualname__ = f"{body.__qualname__}__{suffix}"
    func.__module__, func.__doc__ = body.__module__, body.__doc__
    return func


class Kernel:
    """A serial and a parallel dispatcher of one kernel body.

    Attributes
    ----------
    serial, parallel : numba dispatchers
        ``parallel`` runs the body's ``prange`` loops on Numba's threads; ``serial`` runs them
        in the calling thread (and releases the GIL, so that several threads can each run one).
    one_thread : {"serial", "parallel"}
        The variant a call on one thread should run: "parallel" for a body that runs faster
        as a parallel kernel on one Numba thread than compiled serially
        (:func:`banmf.runtime.threads.pick` decides where that is allowed).
    py_func : function
        The body, plain Python (for tests and debugging).
    """

    def __init__(self, body, options: dict, one_thread: str = "serial"):
        self.py_func = body
        self.__doc__, self.__name__ = body.__doc__, body.__name__
        self.one_thread = one_thread
        self.serial = njit(**options)(_renamed(body, "serial"))
        self.parallel = njit(parallel=True, **options)(_renamed(body, "parallel"))

    def __repr__(self) -> str:
        return f"<kernel {self.__name__}: serial and parallel>"


def kernel(*, one_thread: str = "serial", **options):
    """Decorator: a :class:`Kernel` from a body with ``prange`` loops (``options`` go to
    ``numba.njit``; ``cache=True, nogil=True`` unless given; ``one_thread``: see
    :attr:`Kernel.one_thread`)."""
    if one_thread not in ("serial", "parallel"):
        raise ValueError(f"one_thread must be 'serial' or 'parallel', got {one_thread!r}")
    options = {"cache": True, "nogil": True, **options}

    def wrap(body) -> Kernel:
        return Kernel(body, options, one_thread)

    return wrap
