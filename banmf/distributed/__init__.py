"""BANMF on a Dask cluster: row blocks of X stay on the workers; sums over rows are reduced.

``pip install 'banmf[distributed]'`` brings Dask (the row-block files can be written and
read without it; a fit needs it). See ``docs/SCALING.md``.

Examples
--------
>>> from dask.distributed import Client                     # doctest: +SKIP
>>> import banmf.distributed as bd                          # doctest: +SKIP
>>> client = Client()                                       # doctest: +SKIP
>>> X = bd.read_blocks("big/part-*.npz")                    # doctest: +SKIP
>>> model = bd.BANMF(n_components=32, random_state=0).fit(X)  # doctest: +SKIP
"""

from ..engine.dask import BlockMatrix, WorkerLost, read_blocks, write_blocks
from .estimator import BANMF

__all__ = ["BANMF", "BlockMatrix", "WorkerLost", "read_blocks", "write_blocks"]
