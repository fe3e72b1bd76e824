"""Explicit short vectors for the kernels' inner loops over k.

With k known only at run time, LLVM vectorizes a loop over a factor row behind a run-time
alias check, a trip-count computation and a scalar remainder: at k = 32 that set-up costs more
than the four vector operations it guards, once per nonzero. Here a :class:`Vec` is an LLVM
vector of ``VBYTES`` bytes (8 float32 or 4 float64; lowered to two halves on 16-byte SIMD) held
in a register, so a kernel can keep a row chunk of a factor in registers across the nonzeros of
a row and write the vector operations itself. A :class:`Width` argument fixes a row's width at
compile time (a wider Vec spans several registers); otherwise kernels loop over whole vectors
and finish the last ``k % lanes`` entries with scalar code.

The kernels index their per-nonzero arrays with an unsigned index (``y[np.uintp(p)]``), which
Numba does not wrap, and which is as fast as intrinsics doing the same (docs/devices.md). Each
device here was A/B-tested against plain Numba (docs/devices.md): explicit vectors won
1.4-6.4× and the :class:`Width` specialization 1.1-4.8×.

Every function here is inlined into its caller; none checks bounds (the kernels' indices come
from validated CSR structure and the arrays' own shapes).

Portability: the vectors are plain LLVM vector types, not AVX2 instructions; on a target with
narrower SIMD (``NUMBA_CPU_NAME=generic``: SSE2) LLVM splits a 32-byte vector into halves, with
the same results (CI runs the kernel tests that way). With ``NUMBA_DISABLE_JIT=1`` Numba cannot
run an intrinsic, so each one here is then replaced by a plain-Python twin on numpy arrays (a
Vec is a 1-D array; :func:`python_twin`), and the kernels run as Python (CI runs the kernel
tests that way too).
"""

import numpy as np
from llvmlite import ir
from numba import config, types
from numba.core import cgutils
from numba.core.typing.templates import AttributeTemplate
from numba.extending import (
    NativeValue,
    infer_getattr,
    intrinsic,
    lower_getattr,
    models,
    register_model,
    typeof_impl,
    unbox,
)

#: Bytes per vector: one AVX2 register (two SSE registers, one half of an AVX-512 one: LLVM
#: lowers the type to whatever the target has).
VBYTES = 32


def python_twin(py):
    """Decorator: the intrinsic below it, or under ``NUMBA_DISABLE_JIT=1`` (where intrinsics
    cannot run) its plain-Python twin ``py``, which computes the same on numpy arrays."""

    def wrap(intr):
        return py if config.DISABLE_JIT else intr

    return wrap


def _py_lanes(arr):
    return VBYTES // arr.itemsize


def _py_width(width):
    return max(1, width.lanes)


_FLAGS = ("reassoc", "contract")  # lets LLVM fuse a multiply and an add into one FMA


class Vec(types.Type):
    """A vector of ``lanes`` values of a float dtype (default: one register, ``VBYTES``).

    Wider vectors are several registers that LLVM handles as one value: a whole factor row of
    up to four registers can be loaded, multiplied and accumulated in one expression. A lane
    count that is not a power of two is held as power-of-two vectors side by side (12: 8 and
    4; see ``_VecModel``).

    A Vec lives in local variables only (registers, or stack slots LLVM aligns itself): never
    put one in a list or another heap container, whose storage is not aligned to the vector
    (a segfault). Create them inside a ``prange`` body, not before it.
    """

    def __init__(self, dtype, lanes=None):
        self.dtype = dtype
        self.lanes = VBYTES // (dtype.bitwidth // 8) if lanes is None else lanes
        super().__init__(name=f"Vec({dtype}x{self.lanes})")


class Width:
    """A lane count that a kernel receives as part of its argument *types*: each value gets its
    own compiled (and cached) specialization, in which vectors of that width are constants."""

    def __init__(self, lanes: int):
        if lanes < 0:
            raise ValueError(f"a vector width must be nonnegative, got {lanes}")
        self.lanes = int(lanes)

    def __repr__(self):
        return f"Width({self.lanes})"


class WidthType(types.Type):
    def __init__(self, lanes):
        self.lanes = lanes
        super().__init__(name=f"Width({lanes})")


@typeof_impl.register(Width)
def _typeof_width(val, c):
    return WidthType(val.lanes)


register_model(WidthType)(models.OpaqueModel)


@unbox(WidthType)
def _unbox_width(typ, obj, c):
    # All there is to know is in the type.
    return NativeValue(c.context.get_constant_null(typ))


@infer_getattr
class _WidthAttributes(AttributeTemplate):
    key = WidthType

    def resolve_lanes(self, typ):
        return types.intp


@lower_getattr(WidthType, "lanes")
def _width_lanes(context, builder, typ, value):
    # A constant in the caller's own IR, so loops over it unroll and branches on it fold (an
    # overloaded attribute is a call that LLVM does not inline across Numba's libraries).
    return context.get_constant(types.intp, typ.lanes)


def _width(dtype, width):
    """The Vec type for an optional :class:`Width` (None: one register)."""
    if width is None:
        return Vec(dtype)
    if isinstance(width, WidthType):
        # Width(0) is a kernel's "no vector path" marker: its vectors are typed but never run.
        return Vec(dtype, max(1, width.lanes))
    return None


def _pieces(lanes: int) -> list[int]:
    """The power-of-two lane counts a Vec of ``lanes`` lanes is made of, widest first (12: 8
    and 4)."""
    return [1 << b for b in reversed(range(lanes.bit_length())) if lanes >> b & 1]


@register_model(Vec)
class _VecModel(models.PrimitiveModel):
    """An LLVM vector, or for a lane count that is not a power of two a struct of power-of-two
    vectors (:func:`_pieces`). LLVM widens a vector of 12 float64 to 16 lanes and, where it is
    carried around a loop (a row's sum in the Y pass), splits it into pairs of lanes shuffled
    through the stack: that pass ran 2.5× slower on rows of 12 than on rows of 16 (k = 10
    float64); as 8 and 4 lanes every operation is whole registers."""

    def __init__(self, dmm, fe_type):
        scalar = dmm.lookup(fe_type.dtype).get_value_type()
        parts = [ir.VectorType(scalar, n) for n in _pieces(fe_type.lanes)]
        super().__init__(dmm, fe_type, parts[0] if len(parts) == 1 else ir.LiteralStructType(parts))


def _parts(builder, v):
    """The power-of-two vectors of a Vec value, widest first."""
    if isinstance(v.type, ir.VectorType):
        return [v]
    return [builder.extract_value(v, r) for r in range(len(v.type.elements))]


def _whole(builder, ty, parts):
    """The Vec value of LLVM type ``ty`` made of ``parts`` (:func:`_parts`'s inverse)."""
    if isinstance(ty, ir.VectorType):
        return parts[0]
    v = ir.Constant(ty, ir.Undefined)
    for r, part in enumerate(parts):
        v = builder.insert_value(v, part, r)
    return v


def _piecewise(builder, op, *vecs):
    """``op(builder, *pieces)`` on the matching pieces of Vec values of one type."""
    pieces = [_parts(builder, v) for v in vecs]
    return _whole(builder, vecs[0].type, [op(builder, *ps) for ps in zip(*pieces)])


def _piece_pointers(context, builder, sig, args, ty):
    """Pointers to where each piece of a Vec of LLVM type ``ty`` goes in ``arr[i, l:]`` (the
    first three of ``args``)."""
    aryty, ity, lty = sig.args[:3]
    l = context.cast(builder, args[2], lty, types.intp)
    pointers, offset = [], 0
    for piece in ty.elements if isinstance(ty, ir.LiteralStructType) else [ty]:
        col = builder.add(l, context.get_constant(types.intp, offset))
        ptr = item_pointer(context, builder, aryty, args[0], (args[1], col), (ity, types.intp))
        pointers.append(builder.bitcast(ptr, piece.as_pointer()))
        offset += piece.count
    return pointers


def _float_array(arr, ndim):
    return isinstance(arr, types.Array) and arr.ndim == ndim and isinstance(arr.dtype, types.Float)


def item_pointer(context, builder, aryty, ary, index_vals, index_tys):
    """Address of ``ary[index]`` in generated code (no wraparound, no bounds check)."""
    ary = context.make_array(aryty)(context, builder, ary)
    index = [context.cast(builder, v, t, types.intp) for v, t in zip(index_vals, index_tys)]
    return cgutils.get_item_pointer2(
        context,
        builder,
        ary.data,
        cgutils.unpack_tuple(builder, ary.shape),
        cgutils.unpack_tuple(builder, ary.strides),
        aryty.layout,
        index,
        wraparound=False,
        boundscheck=False,
    )


@python_twin(_py_lanes)
@intrinsic
def lanes(typingctx, arr):
    """Values per vector for the dtype of ``arr`` (a compile-time constant)."""
    if not isinstance(arr, types.Array) or not isinstance(arr.dtype, types.Float):
        return None
    n = Vec(arr.dtype).lanes

    def codegen(context, builder, sig, args):
        return context.get_constant(types.intp, n)

    return types.intp(arr), codegen


def _load(arr, width):
    vt = _width(arr.dtype, width) if _float_array(arr, 2) else None
    if vt is None:
        return None

    def codegen(context, builder, sig, args):
        ty = context.get_value_type(vt)
        pointers = _piece_pointers(context, builder, sig, args, ty)
        align = arr.dtype.bitwidth // 8
        return _whole(builder, ty, [builder.load(ptr, align=align) for ptr in pointers])

    return vt, codegen


def _py_vload(arr, i, l):
    return arr[i, l : l + _py_lanes(arr)].copy()


@python_twin(_py_vload)
@intrinsic
def vload(typingctx, arr, i, l):
    """``arr[i, l : l + lanes]`` of a C-contiguous 2-D float array, one register."""
    vt, codegen = _load(arr, None)
    return None if vt is None else (vt(arr, i, l), codegen)


def _py_vloadw(arr, i, l, width):
    return arr[i, l : l + _py_width(width)].copy()


@python_twin(_py_vloadw)
@intrinsic
def vloadw(typingctx, arr, i, l, width):
    """``arr[i, l : l + width.lanes]`` as one vector (``width`` a :class:`Width`)."""
    vt, codegen = _load(arr, width) if isinstance(width, WidthType) else (None, None)
    if vt is None:
        return None
    return vt(arr, i, l, width), codegen


def _py_vstore(arr, i, l, v):
    arr[i, l : l + v.shape[0]] = v


@python_twin(_py_vstore)
@intrinsic
def vstore(typingctx, arr, i, l, v):
    """``arr[i, l : l + lanes] = v``."""
    if not _float_array(arr, 2) or not isinstance(v, Vec) or v.dtype != arr.dtype:
        return None

    def codegen(context, builder, sig, args):
        pointers = _piece_pointers(context, builder, sig, args, args[3].type)
        for part, ptr in zip(_parts(builder, args[3]), pointers):
            builder.store(part, ptr, align=arr.dtype.bitwidth // 8)
        return context.get_dummy_value()

    return types.void(arr, i, l, v), codegen


def _py_vaccumulate(arr, i, l, v):
    arr[i, l : l + v.shape[0]] += v.astype(np.float64)


@python_twin(_py_vaccumulate)
@intrinsic
def vaccumulate(typingctx, arr, i, l, v):
    """``arr[i, l : l + lanes] += v`` for a float64 ``arr``: float32 lanes are widened first, so
    float32 partial sums can be gathered into float64 totals a whole vector at a time."""
    if not _float_array(arr, 2) or arr.dtype != types.float64 or not isinstance(v, Vec):
        return None

    def codegen(context, builder, sig, args):
        parts = _parts(builder, args[3])
        wide = [ir.VectorType(ir.DoubleType(), part.type.count) for part in parts]
        ty = wide[0] if len(wide) == 1 else ir.LiteralStructType(wide)
        for part, w, ptr in zip(parts, wide, _piece_pointers(context, builder, sig, args, ty)):
            x = part if v.dtype == types.float64 else builder.fpext(part, w)
            builder.store(builder.fadd(builder.load(ptr, align=8), x), ptr, align=8)
        return context.get_dummy_value()

    return types.void(arr, i, l, v), codegen


def _splat(x, width):
    vt = _width(x, width) if isinstance(x, types.Float) else None

    def codegen(context, builder, sig, args):
        ty = context.get_value_type(vt)
        parts = []
        for piece in ty.elements if isinstance(ty, ir.LiteralStructType) else [ty]:
            v = builder.insert_element(
                ir.Constant(piece, ir.Undefined), args[0], ir.Constant(ir.IntType(32), 0)
            )
            zeros = ir.Constant(ir.VectorType(ir.IntType(32), piece.count), [0] * piece.count)
            parts.append(builder.shuffle_vector(v, ir.Constant(piece, ir.Undefined), zeros))
        return _whole(builder, ty, parts)

    return vt, codegen


def _py_vsplat(x):
    x = np.asarray(x)
    return np.full(VBYTES // x.itemsize, x, x.dtype)


@python_twin(_py_vsplat)
@intrinsic
def vsplat(typingctx, x):
    """A one-register vector with every lane ``x`` (a float32 or float64 scalar)."""
    vt, codegen = _splat(x, None)
    return None if vt is None else (vt(x), codegen)


def _py_vsplatw(x, width):
    x = np.asarray(x)
    return np.full(_py_width(width), x, x.dtype)


@python_twin(_py_vsplatw)
@intrinsic
def vsplatw(typingctx, x, width):
    """A vector of ``width.lanes`` lanes (``width`` a :class:`Width`), every lane ``x``."""
    if not isinstance(width, WidthType):
        return None
    vt, codegen = _splat(x, width)
    return None if vt is None else (vt(x, width), codegen)


def _py_vfma(a, b, c):
    return a * b + c


@python_twin(_py_vfma)
@intrinsic
def vfma(typingctx, a, b, c):
    """``a * b + c`` lane by lane (one FMA where the target has it)."""
    if not isinstance(a, Vec) or not (a == b == c):
        return None

    def codegen(context, builder, sig, args):
        def fma(builder, a, b, c):
            return builder.fadd(builder.fmul(a, b, flags=_FLAGS), c, flags=_FLAGS)

        return _piecewise(builder, fma, *args)

    return a(a, b, c), codegen


def _binary(name: str, symbol: str, py):
    """An intrinsic ``a <symbol> b`` lane by lane on two Vec values of one type (the IR
    instruction ``name``, with the module's flags), and ``py`` its plain-Python twin.

    A kernel spells out with these what LLVM would vectorize itself if it knew that the
    arrays do not overlap: in a serial kernel it does not know (a parallel kernel's loop body
    is compiled with no-alias arguments), and leaves the loop scalar."""

    def op(typingctx, a, b):
        if not isinstance(a, Vec) or a != b:
            return None

        def codegen(context, builder, sig, args):
            return _piecewise(
                builder, lambda bld, x, y: getattr(bld, name)(x, y, flags=_FLAGS), *args
            )

        return a(a, b), codegen

    # Each its own name: Numba tells intrinsics apart by it.
    op.__name__ = op.__qualname__ = f"v{name[1:]}"
    op.__doc__ = f"``a {symbol} b`` lane by lane."
    return python_twin(py)(intrinsic(op))


def _py_vdiv(a, b):
    with np.errstate(all="ignore"):  # as compiled: inf or nan, no warning
        return a / b


vadd = _binary("fadd", "+", lambda a, b: a + b)
vmul = _binary("fmul", "*", lambda a, b: a * b)
vdiv = _binary("fdiv", "/", _py_vdiv)


def _py_vlift(v, floor):
    return np.where((v < floor) & (v > 0), floor, v)


@python_twin(_py_vlift)
@intrinsic
def vlift(typingctx, v, floor):
    """``v`` (one register) with every lane in (0, ``floor``) raised to ``floor`` (a scalar of
    v's dtype); zeros, larger values and NaN stay."""
    vt, splat = _splat(floor, None) if isinstance(v, Vec) else (None, None)
    if vt is None or vt != v:  # one register, of floor's dtype
        return None

    def codegen(context, builder, sig, args):
        def lift(builder, x, fl):
            low = builder.fcmp_ordered("<", x, fl)
            pos = builder.fcmp_ordered(">", x, ir.Constant(x.type, None))
            return builder.select(builder.and_(low, pos), fl, x)

        return _piecewise(builder, lift, args[0], splat(context, builder, None, [args[1]]))

    return v(v, floor), codegen


def _pairwise_fold(builder, a, b, n):
    """From a and b, each holding ``n`` partial sums per term in ``t`` consecutive runs (one per
    term), the vector holding ``n / 2`` partial sums per term for the terms of a then of b."""
    lanes = a.type.count
    half, runs = n // 2, lanes // n
    lo, hi = [], []
    for src in (0, lanes):  # a's runs, then b's
        for r in range(runs):
            base = src + r * n
            lo += range(base, base + half)
            hi += range(base + half, base + n)
    i32 = ir.IntType(32)
    mask_lo = ir.Constant(ir.VectorType(i32, lanes), lo)
    mask_hi = ir.Constant(ir.VectorType(i32, lanes), hi)
    return builder.fadd(
        builder.shuffle_vector(a, b, mask_lo), builder.shuffle_vector(a, b, mask_hi), flags=_FLAGS
    )


def _to_register(builder, v, lanes):
    """A one-register vector with the same lane sum as the Vec value v: each of its
    power-of-two vectors folded so (:func:`_fold_to_register`), then added."""
    return _add_pairwise(
        builder, [_fold_to_register(builder, p, lanes) for p in _parts(builder, v)]
    )


def _add_pairwise(builder, pieces):
    """The sum of ``pieces`` (vectors of one type), pairwise so that the adds are independent."""
    while len(pieces) > 1:
        pieces = [
            builder.fadd(pieces[r], pieces[r + 1], flags=_FLAGS)
            if r + 1 < len(pieces)
            else pieces[r]
            for r in range(0, len(pieces), 2)
        ]
    return pieces[0]


def _fold_to_register(builder, v, lanes):
    """A one-register vector with the same lane sum as the LLVM vector v: v zero-padded to
    whole registers, whose pieces are then added."""
    i32 = ir.IntType(32)
    count = v.type.count
    total = -(-count // lanes) * lanes
    if total != count:  # index ``count`` is lane 0 of the zero operand
        zero = ir.Constant(v.type, [ir.Constant(v.type.element, 0.0)] * count)
        mask = [min(r, count) for r in range(total)]
        v = builder.shuffle_vector(v, zero, ir.Constant(ir.VectorType(i32, total), mask))
    pieces = (
        [
            builder.shuffle_vector(
                v, v, ir.Constant(ir.VectorType(i32, lanes), list(range(r, r + lanes)))
            )
            for r in range(0, total, lanes)
        ]
        if total > lanes
        else [v]
    )
    return _add_pairwise(builder, pieces)


def _py_vdot_partial(a, b):
    return a * b  # only its lane sum matters


@python_twin(_py_vdot_partial)
@intrinsic
def vdot_partial(typingctx, a, b):
    """``a * b`` folded to one register: a vector whose lane sum is the dot product of a and
    b. Folding each product as it is formed keeps wide rows from filling the registers."""
    if not isinstance(a, Vec) or a != b:
        return None
    rt = Vec(a.dtype)

    def codegen(context, builder, sig, args):
        def mul(builder, a, b):
            return builder.fmul(a, b, flags=_FLAGS)

        return _to_register(builder, _piecewise(builder, mul, args[0], args[1]), rt.lanes)

    return rt(a, b), codegen


def _py_hsum4(a, b, c, d):
    return a.sum(), b.sum(), c.sum(), d.sum()


@python_twin(_py_hsum4)
@intrinsic
def hsum4(typingctx, a, b, c, d):
    """The sums of the lanes of a, b, c and d, as a 4-tuple: a transposing add tree that
    shares its shuffles between the four (about a quarter of the work of four separate sums)."""
    if not isinstance(a, Vec) or not (a == b == c == d):
        return None
    rt = types.UniTuple(a.dtype, 4)

    def codegen(context, builder, sig, args):
        # Wide vectors: add their register-sized halves first (plain vertical adds).
        va, vb, vc, vd = (_to_register(builder, v, Vec(a.dtype).lanes) for v in args)
        n = va.type.count
        # Level 1: [a | b] and [c | d], n/2 partials per term; level 2: [a b c d], n/4 each.
        ab, cd = _pairwise_fold(builder, va, vb, n), _pairwise_fold(builder, vc, vd, n)
        abcd = _pairwise_fold(builder, ab, cd, n // 2)
        per = n // 4
        i32 = ir.IntType(32)
        sums = []
        for t in range(4):
            s = builder.extract_element(abcd, i32(t * per))
            for r in range(1, per):
                s = builder.fadd(s, builder.extract_element(abcd, i32(t * per + r)), flags=_FLAGS)
            sums.append(s)
        return context.make_tuple(builder, rt, sums)

    return rt(a, b, c, d), codegen
