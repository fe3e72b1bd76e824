"""Software prefetch of a factor row, for the passes that gather rows by column index.

The rows a pass over the nonzeros reads (``Ht[j]`` in the Y pass) or updates (``WᵀY[j]`` in the
scatter) come in the random order of the column indices, which no hardware prefetcher can
predict: without help every row is a cache miss waited for in turn. Asking for the row a few
nonzeros ahead overlaps those misses (1.5× on a 1.3 MB factor, 3× on a 13 MB one, measured on
the project machine). A prefetch is only a hint: it never faults and never changes a result.
"""

from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

#: Bytes per cache line on every x86-64 and most ARM cores.
LINE = 64

#: Tables smaller than this stay in L2 once touched: prefetching them only costs instructions
#: (2× slower iterations at 500×500, k = 5).
MIN_BYTES = 512 * 1024

#: How many nonzeros ahead the passes ask for a row: far enough to cover a miss to L3 or
#: memory, near enough that the line is still there when used (4-16 measured equally well).
AHEAD = 8


def _make_prefetch(rw: int):
    @intrinsic
    def _prefetch(typingctx, arr, i, l):
        if not isinstance(arr, types.Array) or arr.ndim != 2:
            return None
        sig = types.void(arr, i, l)

        def codegen(context, builder, signature, args):
            aryty, ity, lty = signature.args
            ary = context.make_array(aryty)(context, builder, args[0])
            index = [context.cast(builder, args[1], ity, types.intp),
                     context.cast(builder, args[2], lty, types.intp)]
            ptr = cgutils.get_item_pointer2(
                context, builder, ary.data, cgutils.unpack_tuple(builder, ary.shape),
                cgutils.unpack_tuple(builder, ary.strides), aryty.layout, index,
                wraparound=False, boundscheck=False)
            i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
            fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
            fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
            # (address, read 0 / write 1, locality 3 = keep in all levels, data cache)
            builder.call(fn, [builder.bitcast(ptr, i8p), i32(rw), i32(3), i32(1)])
            return context.get_dummy_value()

        return sig, codegen

    return _prefetch


_prefetch_read = _make_prefetch(0)
_prefetch_write = _make_prefetch(1)


@njit(cache=True, nogil=True, inline="always")
def worth_prefetching(A):
    """Whether rows of A, gathered at random, are likely to miss L2 (A larger than MIN_BYTES)."""
    return A.shape[0] * A.shape[1] * A.itemsize > MIN_BYTES


@njit(cache=True, nogil=True, inline="always")
def prefetch_row(A, i):
    """Hint that row ``i`` of the C-contiguous 2-D array ``A`` will soon be read."""
    k = A.shape[1]
    for l in range(0, k, LINE // A.itemsize):
        _prefetch_read(A, i, l)
    _prefetch_read(A, i, k - 1)  # the row need not start on a line


@njit(cache=True, nogil=True, inline="always")
def prefetch_row_for_write(A, i):
    """Hint that row ``i`` of the C-contiguous 2-D array ``A`` will soon be updated."""
    k = A.shape[1]
    for l in range(0, k, LINE // A.itemsize):
        _prefetch_write(A, i, l)
    _prefetch_write(A, i, k - 1)


@njit(cache=True, nogil=True, inline="always")
def prefetch_ahead(A, indices, p, count, write):
    """Hint the rows ``A[indices[p + AHEAD + r]]``, r < count, that exist: the rows a pass over
    the nonzeros in ``indices`` reaches ``AHEAD`` steps after p. ``write``: they will be
    updated, not only read. (count and write are constants at every call: after inlining the
    loop unrolls and the branch folds away.)
    """
    q = p + AHEAD
    if q + count <= indices.shape[0]:
        for r in range(q, q + count):
            if write:
                prefetch_row_for_write(A, indices[r])
            else:
                prefetch_row(A, indices[r])
