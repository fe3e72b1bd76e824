"""Software prefetch of a factor row, for the passes that gather rows by column index.

The rows a pass over the nonzeros reads (``Ht[j]`` in the Y pass) or updates (``WᵀY[j]`` in the
scatter) come in the random order of the column indices, which no hardware prefetcher can
predict: without help every row is a cache miss waited for in turn. Asking for the row a few
nonzeros ahead overlaps those misses (1.5× on a 1.3 MB factor, 3× on a 13 MB one, measured on
the project machine). A prefetch is only a hint: it never faults and never changes a result.
"""

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .simd import item

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


@intrinsic
def _per_line(typingctx, arr):
    """Elements of ``arr`` per cache line, as a compile-time constant (``arr.itemsize`` is read
    at run time, which keeps the loops over a row's lines from unrolling)."""
    if not isinstance(arr, types.Array):
        return None
    n = LINE // (arr.dtype.bitwidth // 8)

    def codegen(context, builder, signature, args):
        return context.get_constant(types.intp, n)

    return types.intp(arr), codegen


@njit(cache=True, nogil=True, inline="always")
def worth_prefetching(A):
    """Whether rows of A, gathered at random, are likely to miss L2 (A larger than MIN_BYTES)."""
    return A.shape[0] * A.shape[1] * A.itemsize > MIN_BYTES


@njit(cache=True, nogil=True, inline="always")
def prefetch_row(A, i, ncols):
    """Hint that ``A[i, :ncols]`` (A C-contiguous and 2-D) will soon be read: one hint per cache
    line, from the row's start. For the rows of a :func:`zeros_line_aligned` array of a multiple
    of 32 bytes that covers the row exactly (a row starts on a line, or halfway into one when it
    is an odd number of half lines long); for others the last line may go unhinted."""
    for l in range(0, ncols, _per_line(A)):
        _prefetch_read(A, i, l)


@njit(cache=True, nogil=True, inline="always")
def prefetch_row_for_write(A, i, ncols):
    """:func:`prefetch_row` for a row that will soon be updated."""
    for l in range(0, ncols, _per_line(A)):
        _prefetch_write(A, i, l)


@njit(cache=True, nogil=True, inline="always")
def prefetch_ahead(A, indices, p, count, write, ncols):
    """Hint the rows ``A[indices[p + AHEAD + r], :ncols]``, r < count, that exist: the rows a pass
    over the nonzeros in ``indices`` reaches ``AHEAD`` steps after p. ``write``: they will be
    updated, not only read. (count and write are constants at every call, and ncols is where the
    caller knows the row width at compile time: after inlining the loops unroll and the branch
    folds away.)
    """
    q = p + AHEAD
    if q + count <= indices.shape[0]:
        for r in range(q, q + count):
            if write:
                prefetch_row_for_write(A, item(indices, r), ncols)
            else:
                prefetch_row(A, item(indices, r), ncols)


def zeros_line_aligned(shape, dtype) -> np.ndarray:
    """``np.zeros(shape, dtype)`` whose data starts on a cache line.

    numpy only promises 16 bytes, so a 128-byte factor row usually spans three lines: a third
    more traffic for every row a pass gathers or scatters at random, and vector loads split
    across lines (the Y pass 1.2× and the scatter 1.1× slower at 10⁶ nonzeros, k = 32 float32).
    """
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    buf = np.zeros(nbytes + LINE, np.uint8)
    start = -buf.ctypes.data % LINE
    return buf[start : start + nbytes].view(dtype).reshape(shape)
