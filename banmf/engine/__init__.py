"""BANMF's one driver and the row-block protocol it talks to the data through.

:mod:`banmf.engine.protocol` names what the driver asks of the data (a :class:`Backend` and
the :class:`Start` it begins); :mod:`banmf.engine.driver` runs a fit over any backend: the
starts and extra starts, the iterations and their stopping, the thresholds, the polish and
the swaps, progress and Ctrl-C. One machine (:class:`banmf.BANMF`) and Dask
(:class:`banmf.distributed.BANMF`) are two backends of the same protocol; what a backend cannot
do (:attr:`Backend.whole_columns`), the driver refuses (:func:`check_backend`).

This package imports nothing from :mod:`banmf.models` or :mod:`banmf.distributed`: both
import it.
"""

from .driver import Driver, Outcome, check_backend, settled
from .protocol import Backend, Start

__all__ = ["Backend", "Driver", "Outcome", "Start", "check_backend", "settled"]
