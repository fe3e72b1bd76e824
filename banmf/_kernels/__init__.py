"""Numba kernels over raw arrays. They never import scipy or the rest of banmf.

Conventions: CSR arrays come as ``(indptr, indices)``; factors are row-major with the rank
``k`` as the contiguous last axis (``W`` is (n, k), ``Ht`` is H transposed, (m, k)); outputs are
preallocated by the caller. Parallel loops write disjoint outputs only, so results do not depend
on the number of threads.
"""
