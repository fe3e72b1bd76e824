"""BANMF on a Dask cluster: row blocks of X stay on the workers; sums over rows are reduced.

``pip install 'banmf[distributed]'`` brings Dask. See ``docs/SCALING.md``.

Examples
--------
>>> from dask.distributed import Client                     # doctest: +SKIP
>>> import banmf.distributed as bd                          # doctest: +SKIP
>>> client = Client()                                       # doctest: +SKIP
>>> X = bd.read_blocks("big/part-*.npz")                    # doctest: +SKIP
>>> model = bd.BANMF(n_components=32, random_state=0).fit(X)  # doctest: +SKIP
"""

try:
    import distributed as _distributed  # noqa: F401
except ImportError:  # pragma: no cover - exercised without the extra installed
    raise ImportError(
        "banmf.distributed needs Dask's distributed scheduler: pip install 'banmf[distributed]'"
    ) from None

from .blocks import BlockMatrix, read_blocks, write_blocks
from .estimator import BANMF, WorkerLost

__all__ = ["BANMF", "BlockMatrix", "WorkerLost", "read_blocks", "write_blocks"]
