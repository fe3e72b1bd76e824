"""BANMF's one driver and the row-block protocol it talks to the data through.

:mod:`banmf.engine.protocol` names what the driver asks of the data (a :class:`Backend` and
the :class:`Start` it begins); :mod:`banmf.engine.driver` runs a fit over any backend: the
starts and extra starts, the iterations and their stopping, the thresholds, the polish and
the swaps, progress and Ctrl-C; :mod:`banmf.engine.starts` how many random starts
``n_init="auto"`` runs. One machine (:class:`banmf.BANMF`) and Dask
(:class:`banmf.distributed.BANMF`) are two backends of the same protocol; what a backend cannot
do (:attr:`Backend.whole_columns`), the driver refuses (:func:`check_backend`).

This package imports nothing from :mod:`banmf.models` or :mod:`banmf.distributed`: both
import it.
"""

from .driver import Driver, Outcome, check_backend, settled
from .protocol import Backend, Start
from .starts import auto_n_init, start_cost

__all__ = [
    "Backend",
    "Driver",
    "Outcome",
    "Start",
    "auto_n_init",
    "check_backend",
    "settled",
    "start_cost",
]
