"""The explicit-vector intrinsics against numpy, on every width they are asked for.

The kernels only use whole-register widths (1, 2 or 4 registers); odd widths check that the
folding and the zero padding of the horizontal sums are right in general.
"""

import numpy as np
import pytest
from numba import njit

from banmf._kernels.simd import (
    VBYTES,
    Width,
    hsum4,
    lanes,
    vaccumulate,
    vadd,
    vdiv,
    vdot_partial,
    vfma,
    vlift,
    vload,
    vloadw,
    vmul,
    vsplat,
    vsplatw,
    vstore,
)


@njit(cache=True)
def _wide(A, B, x, width, out):
    """Row sums of A·B four rows at a time, and out[r] = x * A[r] + B[r], with vectors of width."""
    sums = np.empty(A.shape[0])
    for r in range(0, A.shape[0], 4):
        d0 = vdot_partial(vloadw(A, r, 0, width), vloadw(B, r, 0, width))
        d1 = vdot_partial(vloadw(A, r + 1, 0, width), vloadw(B, r + 1, 0, width))
        d2 = vdot_partial(vloadw(A, r + 2, 0, width), vloadw(B, r + 2, 0, width))
        d3 = vdot_partial(vloadw(A, r + 3, 0, width), vloadw(B, r + 3, 0, width))
        s0, s1, s2, s3 = hsum4(d0, d1, d2, d3)
        sums[r], sums[r + 1], sums[r + 2], sums[r + 3] = s0, s1, s2, s3
        for t in range(4):
            vstore(
                out,
                r + t,
                0,
                vfma(vsplatw(x, width), vloadw(A, r + t, 0, width), vloadw(B, r + t, 0, width)),
            )
    return sums


@njit(cache=True)
def _register(A, x, out):
    """out[r, :L] = x * A[r, :L] + A[r, :L] with one-register vectors; returns L."""
    for r in range(A.shape[0]):
        a = vload(A, r, 0)
        vstore(out, r, 0, vfma(vsplat(x), a, a))
    return lanes(A)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [1, 5, 8, 12, 24, 33])
def test_wide_vectors(dtype, k):
    rng = np.random.default_rng(k)
    A, B = rng.random((8, k)).astype(dtype), rng.random((8, k)).astype(dtype)
    out = np.full((8, k + 3), np.nan, dtype)  # columns past k must not be written
    x = dtype(0.5)
    sums = _wide(A, B, x, Width(k), out)
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(sums, (A.astype(float) * B).sum(axis=1), rtol=tol)
    np.testing.assert_allclose(out[:, :k], x * A + B, rtol=tol)
    assert np.isnan(out[:, k:]).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_register_vectors(dtype):
    L = VBYTES // np.dtype(dtype).itemsize
    A = np.random.default_rng(0).random((3, L + 2)).astype(dtype)
    out = np.full_like(A, np.nan)
    assert _register(A, dtype(2.0), out) == L
    np.testing.assert_allclose(out[:, :L], 3 * A[:, :L], rtol=1e-6)
    assert np.isnan(out[:, L:]).all()


@njit(cache=True)
def _accumulate(A, acc, width):
    """acc[r, 1 : 1 + width] += A[r, :width] (A's values widened to float64); returns width."""
    for r in range(A.shape[0]):
        vaccumulate(acc, r, 1, vloadw(A, r, 0, width))
    return width.lanes


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k", [1, 4, 8, 13])
def test_vaccumulate_widens_into_float64(dtype, k):
    A = np.random.default_rng(k).random((3, k)).astype(dtype)
    acc = np.random.default_rng(1).random((3, k + 3))
    expected = acc.copy()
    expected[:, 1 : 1 + k] += A.astype(np.float64)  # exactly: widening is exact
    assert _accumulate(A, acc, Width(k)) == k
    np.testing.assert_array_equal(acc, expected)


@njit(cache=True)
def _arithmetic(A, B, C, out):
    """out[r, :L] = A[r, :L] * B[r, :L] / (C[r, :L] + 0.5) and out[r, L:2L] = A + B, one
    register at a time."""
    for r in range(A.shape[0]):
        a, b, c = vload(A, r, 0), vload(B, r, 0), vload(C, r, 0)
        vstore(out, r, 0, vdiv(vmul(a, b), vadd(c, vsplat(A.dtype.type(0.5)))))
        vstore(out, r, lanes(A), vadd(a, b))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lane_arithmetic_matches_numpy_exactly(dtype):
    """One IEEE operation per lane, so the bits are numpy's (no contraction is possible)."""
    L = VBYTES // np.dtype(dtype).itemsize
    rng = np.random.default_rng(3)
    A, B, C = (rng.random((5, L)).astype(dtype) for _ in range(3))
    C[0, 0] = -0.5  # a zero denominator: inf, as numpy, no exception
    out = np.full((5, 2 * L + 1), np.nan, dtype)
    _arithmetic(A, B, C, out)
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(out[:, :L], A * B / (C + dtype(0.5)))
    np.testing.assert_array_equal(out[:, L : 2 * L], A + B)
    assert np.isnan(out[:, 2 * L]).all()


@njit(cache=True)
def _lift(A, floor, out):
    for r in range(A.shape[0]):
        vstore(out, r, 0, vlift(vload(A, r, 0), floor))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_vlift_raises_only_the_lanes_between_zero_and_the_floor(dtype):
    L = VBYTES // np.dtype(dtype).itemsize
    A = np.array([[0.0, 1e-3, 2.0, -1e-3] * (L // 4), [np.nan, 0.5, 1e-2, 0.0] * (L // 4)], dtype)
    out = np.empty_like(A)
    _lift(A, dtype(0.1), out)
    expected = np.where((A > 0) & (A < 0.1), dtype(0.1), A)
    np.testing.assert_array_equal(out, expected)


def test_width_is_a_type_and_checked():
    with pytest.raises(ValueError, match="nonnegative"):
        Width(-1)
    assert repr(Width(3)) == "Width(3)"
