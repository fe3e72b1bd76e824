"""Kernels for a support mask as a linear operator: its products with dense vectors."""

from numba import prange

from .variants import kernel


@kernel()
def mask_product(indptr, indices, V, out):
    """``out = M @ V`` for the support mask M (CSR ``indptr``, ``indices``; every stored value
    1) and V (columns, c): ``out[i, c]`` sums ``V[j, c]`` over the columns j of row i in the
    order stored, from 0.0, as scipy's CSR product with values 1.0 does (the same float sums:
    the same bits). One row per output row: the same whatever the threads."""
    for i in prange(out.shape[0]):
        for c in range(out.shape[1]):
            total = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                total += V[indices[p], c]
            out[i, c] = total
