"""Software prefetch of factor rows that a pass over the nonzeros reads or updates by index.

The rows of ``Ht`` the Y pass reads come in the random order of the column indices, which no
hardware prefetcher can predict: without help every row is a cache miss waited for in turn.
Asking for the row a few nonzeros ahead overlaps those misses. Who asks, and where:

- the Y pass, both variants, where Hᵀ is past L2 (:data:`MIN_BYTES`);
- the scatter of Wᵀ Y, both variants, where a partial is past :data:`SCATTER_MIN_BYTES` (from
  about 10⁷ nonzeros, 10⁶ for wide rows): below it the hints cost about what they save;
- the randomized SVD's product of X with a block (:func:`banmf._kernels.svd.mask_times`),
  whose gathered rows at 10⁸ nonzeros come from memory.

The bounds and distances are chosen in docs/decisions.md, "Prefetching".

A prefetch is only a hint: it never faults and never changes a result.

Also :func:`zeros_line_aligned`, the allocation that puts factor rows on cache lines.
"""

import llvmlite
import numpy as np
from llvmlite import binding, ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .simd import item_pointer, python_twin

#: Bytes per cache line on every x86-64 and most ARM cores.
LINE = 64

#: Tables smaller than this stay in L2 once touched: prefetching them only costs instructions
#: (docs/decisions.md, "Prefetching").
MIN_BYTES = 512 * 1024

#: How many nonzeros ahead the passes ask for a row: far enough to cover a miss to L3 or
#: memory, near enough that the line is still there when used; no distance that depends on
#: Hᵀ's size alone wins everywhere (docs/decisions.md, "Prefetching").
AHEAD = 8

#: Partials smaller than this, scattered into at random, stay in the caches: there the hints
#: for the rows about to be written cost about what they save, beyond it they win
#: (docs/decisions.md, "Prefetching").
SCATTER_MIN_BYTES = 2 * 1024 * 1024

#: How many nonzeros ahead the scatter asks for the partial's rows it will update, and the Y
#: pass's loops for wide rows for the rows they read: an update is a read and a write-back, and
#: a wide row several lines, whose misses need a longer lead than the Y pass's narrow reads
#: (docs/decisions.md, "Prefetching").
FAR_AHEAD = 16


#: The prefetch intrinsic is overloaded on its pointer argument, whose type is part of the name:
#: ``llvm.prefetch.p0i8`` with LLVM's typed pointers (llvmlite < 0.44: LLVM 14), ``.p0`` with
#: opaque pointers (llvmlite ≥ 0.45: LLVM 20 and later; 0.44 says which it uses). LLVM renames a
#: wrongly mangled declaration when it parses the module, so either name worked on both, but
#: the right one needs no such repair.
_OPAQUE_POINTERS = getattr(llvmlite, "opaque_pointers_enabled", binding.llvm_version_info[0] >= 16)
PREFETCH_INTRINSIC = "llvm.prefetch.p0" if _OPAQUE_POINTERS else "llvm.prefetch.p0i8"


def _py_prefetch(arr, i, l):
    pass  # a hint only: nothing to do in Python


def _make_prefetch(rw: int):
    @python_twin(_py_prefetch)
    @intrinsic
    def _prefetch(typingctx, arr, i, l):
        if not isinstance(arr, types.Array) or arr.ndim != 2:
            return None
        sig = types.void(arr, i, l)

        def codegen(context, builder, signature, args):
            aryty, ity, lty = signature.args
            ptr = item_pointer(context, builder, aryty, args[0], args[1:], (ity, lty))
            i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
            fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
            fn = cgutils.get_or_insert_function(builder.module, fnty, PREFETCH_INTRINSIC)
            # (address, read 0 / write 1, locality 3 = keep in all levels, data cache)
            builder.call(fn, [builder.bitcast(ptr, i8p), i32(rw), i32(3), i32(1)])
            return context.get_dummy_value()

        return sig, codegen

    return _prefetch


_prefetch_read = _make_prefetch(0)
_prefetch_write = _make_prefetch(1)


def _py_per_line(arr):
    return LINE // arr.itemsize


@python_twin(_py_per_line)
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
def worth_prefetching(A, min_bytes=MIN_BYTES):
    """Whether rows of A, reached at random, are likely to miss the caches: A larger than
    ``min_bytes`` (:data:`MIN_BYTES` for rows read, :data:`SCATTER_MIN_BYTES` for rows
    updated)."""
    return A.shape[0] * A.shape[1] * A.itemsize > min_bytes


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
def prefetch_ahead(A, indices, p, count, write, ncols, ahead=AHEAD):
    """Hint the rows ``A[indices[p + ahead + r], :ncols]``, r < count, that exist: the rows a
    pass over the nonzeros in ``indices`` reaches ``ahead`` steps after p. ``write``: they will
    be updated, not only read. (count and write are constants at every call, and ncols is where
    the caller knows the row width at compile time: after inlining the loops unroll and the
    branch folds away.)
    """
    q = p + ahead
    if q + count <= indices.shape[0]:
        for r in range(q, q + count):
            if write:
                prefetch_row_for_write(A, indices[np.uintp(r)], ncols)
            else:
                prefetch_row(A, indices[np.uintp(r)], ncols)


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
