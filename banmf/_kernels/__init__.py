"""Numba kernels over raw arrays. They never import scipy or the rest of banmf.

Conventions: CSR arrays come as ``(indptr, indices)``, as a :class:`~.sparse.Sparse` group in
the kernels that take groups; factors are row-major with the rank ``k`` as the contiguous last
axis (``W`` is (n, k), ``Ht`` is H transposed, (m, k)); outputs are preallocated by the caller.
Parallel loops write disjoint outputs only, so results do not depend on the number of threads.

A kernel of many arrays takes them in a few named groups: ``typing.NamedTuple`` classes defined
beside it, whose fields name the arrays (and scalars). A kernel unpacks its groups once, at the
top, so that its loops read plain locals. Numba types a named tuple argument on its slow path,
so each group adds a little to every call from Python: groups suit kernels whose calls are
long, not the shortest ones made by the thousand.
"""
