"""The Dask backend of :mod:`banmf.engine.protocol`: row blocks of X on the workers.

:mod:`~banmf.engine.dask.blocks` lays X out as row blocks (files or slices in memory);
:mod:`~banmf.engine.dask.session` places them on the workers and runs each call on every
block, the sums over blocks by one fixed tree, and the repair of a lost worker;
:mod:`~banmf.engine.dask.worker` is the workers' side (each block's state and per-block
steps); :mod:`~banmf.engine.dask.backend` is the backend the driver talks to.
:mod:`banmf.distributed` is the public face (:class:`~banmf.distributed.BANMF` with a client,
:class:`~banmf.distributed.BlockMatrix`).
"""

from .backend import DaskBackend
from .blocks import BlockMatrix, read_blocks, write_blocks
from .session import Session, WorkerLost

__all__ = ["BlockMatrix", "DaskBackend", "Session", "WorkerLost", "read_blocks", "write_blocks"]
