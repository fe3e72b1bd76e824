"""A/B of the kernels' LLVM devices against plain Numba code, interleaved in one process.

    python benchmarks/bench_devices.py [--quick] [--reps 15] [--dtypes float32 float64]
                                       [--ks 10 32] [--data 1e6 lucap0]

The MU kernels use four devices beyond plain Numba (``banmf/_kernels/simd.py`` and
``prefetch.py``):

* **Vec**: explicit LLVM vectors (rows held in registers in the Y pass and the scatter, 4×2
  register tiles in the row update); the plain alternative is the same algorithm written with
  loops over the row (of a compile-time width where there is one);
* **item / set_item**: 1-D loads and stores without Numba's negative-index wrap; the plain
  alternative indexes with an unsigned index (``a[np.uintp(p)]``, which Numba does not wrap);
* **prefetch**: software prefetch of the gathered rows a few nonzeros ahead (only for tables
  over 512 KiB); the plain alternative issues none;
* **Width**: the row width as part of the argument types, so the Y pass and the scatter are
  compiled per padded k; the plain alternative reads k at run time.

Each variant removes one device from the library kernel (``-Vec``: loops over a compile-time k,
keeping Width, item and prefetch; the scatter's vectors over a run-time k, measured before
their removal, are in docs/devices.md;
``-Width -Vec``: loops over a run-time k, with item and prefetch; ``plain``: none of the
four). Rows too wide for registers (float64 k = 32) have only the loops. Every variant is checked to give the
library kernel's result, then all are timed in turn, ``--reps`` times over (one sample: the
median of a few calls), serial variants (the parallel ones run the same per-thread code).
Printed: per variant, the median over the reps of time(variant) / time(library kernel) in the
same rep: > 1 means the device is faster. ``copy`` is the library's Y pass or scatter with rows
in registers rewritten here with item and prefetch as switches; ``-item`` and ``-prefetch``
are that copy without the one device, and "vs copy" is their ratio to it. A device is worth
keeping at ≥ 1.10.

Data: ``1e6``: ``make_sparse_uniform(100_000, 10_000, 10**6)`` (bench_core's size ii);
``lucap0``: the bundled LUCAP0 (2000×143, k = 10 only).
"""

from __future__ import annotations

import argparse
import re
import sys
import time

import numba
import numpy as np
from numba import njit, types
from numba.extending import intrinsic

import banmf
from banmf._kernels.mu import (
    _FAST,
    Factors,
    YSums,
    _project_spmm_loops,
    _project_spmm_registers,
    padded_width,
    row_width,
    scatter_rows,
    update_rows,
)
from banmf._kernels.prefetch import AHEAD, prefetch_row, prefetch_row_for_write, zeros_line_aligned
from banmf._kernels.simd import (
    Width,
    hsum4,
    item_pointer,
    vdot_partial,
    vfma,
    vloadw,
    vsplatw,
    vstore,
)
from banmf._kernels.sparse import Sparse

# --------------------------------------------------------------------------------------------
# The removed device item / set_item (banmf/_kernels/simd.py until the A/B): 1-D access without
# Numba's negative-index wrap. Its plain alternative, now in the kernels: an unsigned index,
# which Numba does not wrap either.


@intrinsic
def item(typingctx, arr, p):
    if not isinstance(arr, types.Array) or arr.ndim != 1 or not isinstance(p, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        return builder.load(
            item_pointer(context, builder, sig.args[0], args[0], args[1:], sig.args[1:])
        )

    return arr.dtype(arr, p), codegen


@intrinsic
def set_item(typingctx, arr, p, v):
    if (
        not isinstance(arr, types.Array)
        or arr.ndim != 1
        or not isinstance(p, types.Integer)
        or v != arr.dtype
    ):
        return None

    def codegen(context, builder, sig, args):
        builder.store(
            args[2], item_pointer(context, builder, sig.args[0], args[0], args[1:2], sig.args[1:2])
        )
        return context.get_dummy_value()

    return types.void(arr, p, v), codegen


def _accessors(factory):
    """``factory`` with its ``GET(a, p)`` / ``PUT(a, p, v)`` written out in its source: as
    ``item`` / ``set_item`` with ``use_item``, else as plain indexing by an unsigned index
    (written inline: a helper function would be a call that LLVM may not inline)."""
    import inspect

    src = inspect.getsource(factory)

    def build(*args, use_item=True, **kw):
        if use_item:
            text = re.sub(r"GET\((\w+), ([^)]*)\)", r"item(\1, \2)", src)
            text = re.sub(r"PUT\((\w+), ([^,]*), ([^)]*)\)", r"set_item(\1, \2, \3)", text)
        else:
            text = re.sub(r"GET\((\w+), ([^)]*)\)", r"\1[np.uintp(\2)]", src)
            text = re.sub(r"PUT\((\w+), ([^,]*), ([^)]*)\)", r"\1[np.uintp(\2)] = \3", text)
        scope = dict(globals())
        exec(compile(text, f"<{factory.__name__} use_item={use_item}>", "exec"), scope)
        return scope[factory.__name__](*args, **kw)

    return build


# --------------------------------------------------------------------------------------------
# The Y pass without Vec: mu._project_spmm_loops's body, with k a compile-time constant when
# ``fixed`` (the Width kept), and the accessors and prefetch as asked.


def make_ypass(fixed: bool, prefetch: bool):

    @njit(nogil=True, fastmath=_FAST)
    def ypass(indptr, indices, W, Ht, lower, upper, project, y, YHt, sq, width):
        n = W.shape[0]
        k = width.lanes if fixed else W.shape[1]
        pf = prefetch and Ht.shape[0] * Ht.shape[1] * Ht.itemsize > 512 * 1024
        zero = W.dtype.type(0)
        lo, up = W.dtype.type(lower), W.dtype.type(upper)
        nnz = indices.shape[0]
        for i in range(n):
            res = 0.0
            s2 = 0.0
            p, hi = indptr[i], indptr[i + 1]
            for l in range(k):
                YHt[i, l] = 0.0
            while p + 3 < hi:
                if pf and p + AHEAD + 4 <= nnz:
                    for r in range(4):
                        prefetch_row(Ht, GET(indices, p + AHEAD + r), k)
                j0, j1, j2, j3 = (
                    GET(indices, p),
                    GET(indices, p + 1),
                    GET(indices, p + 2),
                    GET(indices, p + 3),
                )
                a0 = a1 = a2 = a3 = zero
                for l in range(k):
                    wl = W[i, l]
                    a0 += wl * Ht[j0, l]
                    a1 += wl * Ht[j1, l]
                    a2 += wl * Ht[j2, l]
                    a3 += wl * Ht[j3, l]
                if project:
                    v0, v1 = min(up, max(lo, a0)), min(up, max(lo, a1))
                    v2, v3 = min(up, max(lo, a2)), min(up, max(lo, a3))
                    PUT(y, p, v0)
                    PUT(y, p + 1, v1)
                    PUT(y, p + 2, v2)
                    PUT(y, p + 3, v3)
                else:
                    v0, v1, v2, v3 = GET(y, p), GET(y, p + 1), GET(y, p + 2), GET(y, p + 3)
                res += (v0 - a0) ** 2 + (v1 - a1) ** 2 + (v2 - a2) ** 2 + (v3 - a3) ** 2
                s2 += a0 * a0 + a1 * a1 + a2 * a2 + a3 * a3
                for l in range(k):
                    YHt[i, l] += v0 * Ht[j0, l] + v1 * Ht[j1, l] + v2 * Ht[j2, l] + v3 * Ht[j3, l]
                p += 4
            while p < hi:
                j = GET(indices, p)
                s = zero
                for l in range(k):
                    s += W[i, l] * Ht[j, l]
                if project:
                    v = min(up, max(lo, s))
                    PUT(y, p, v)
                else:
                    v = GET(y, p)
                res += (v - s) * (v - s)
                s2 += s * s
                for l in range(k):
                    YHt[i, l] += v * Ht[j, l]
                p += 1
            sq[i, 0] = res
            sq[i, 1] = s2

    return ypass


# --------------------------------------------------------------------------------------------
# The library's Y pass and scatter with rows in registers (Vec and Width kept), with item and
# prefetch as asked: mu._project_spmm_registers's and mu._scatter_row's bodies.


def make_yreg(prefetch: bool):

    @njit(nogil=True, fastmath=_FAST)
    def ypass(indptr, indices, W, Ht, lower, upper, project, y, YHt, sq, width):
        pf = prefetch and Ht.shape[0] * Ht.shape[1] * Ht.itemsize > 512 * 1024
        lo, up = W.dtype.type(lower), W.dtype.type(upper)
        zero = W.dtype.type(0)
        nnz = indices.shape[0]
        for i in range(W.shape[0]):
            vz = vsplatw(zero, width)
            res = 0.0
            s2 = 0.0
            p, hi = indptr[i], indptr[i + 1]
            w, acc = vloadw(W, i, 0, width), vz
            while p + 1 < hi:
                if pf and p + AHEAD + 2 <= nnz:
                    prefetch_row(Ht, GET(indices, p + AHEAD), width.lanes)
                    prefetch_row(Ht, GET(indices, p + AHEAD + 1), width.lanes)
                h0, h1 = (
                    vloadw(Ht, GET(indices, p), 0, width),
                    vloadw(Ht, GET(indices, p + 1), 0, width),
                )
                d0, d1 = vdot_partial(w, h0), vdot_partial(w, h1)
                a0, a1, _, _ = hsum4(d0, d1, d0, d1)
                if project:
                    v0, v1 = min(up, max(lo, a0)), min(up, max(lo, a1))
                    PUT(y, p, v0)
                    PUT(y, p + 1, v1)
                else:
                    v0, v1 = GET(y, p), GET(y, p + 1)
                res += (v0 - a0) ** 2 + (v1 - a1) ** 2
                s2 += a0 * a0 + a1 * a1
                acc = vfma(vsplatw(v0, width), h0, vfma(vsplatw(v1, width), h1, acc))
                p += 2
            if p < hi:
                h0 = vloadw(Ht, GET(indices, p), 0, width)
                d0 = vdot_partial(w, h0)
                a0 = hsum4(d0, d0, d0, d0)[0]
                if project:
                    v = min(up, max(lo, a0))
                    PUT(y, p, v)
                else:
                    v = GET(y, p)
                res += (v - a0) * (v - a0)
                s2 += a0 * a0
                acc = vfma(vsplatw(v, width), h0, acc)
            vstore(YHt, i, 0, acc)
            sq[i, 0] = res
            sq[i, 1] = s2

    return ypass


def make_scatter_reg(prefetch: bool):

    @njit(nogil=True, fastmath=_FAST)
    def scatter(indptr, indices, y, W, scatter_blocks, out, width):
        part = scatter_blocks[0]
        part[:, :] = 0.0
        pf = prefetch and part.shape[0] * part.shape[1] * part.itemsize > 512 * 1024
        nnz = indices.shape[0]
        for i in range(W.shape[0]):
            p0, p1 = indptr[i], indptr[i + 1]
            w = vloadw(W, i, 0, width)
            p = p0
            while p + 1 < p1:
                if pf and p + AHEAD + 2 <= nnz:
                    prefetch_row_for_write(part, GET(indices, p + AHEAD), width.lanes)
                    prefetch_row_for_write(part, GET(indices, p + AHEAD + 1), width.lanes)
                j0, j1 = GET(indices, p), GET(indices, p + 1)
                a0, a1 = vloadw(part, j0, 0, width), vloadw(part, j1, 0, width)
                vstore(part, j0, 0, vfma(vsplatw(GET(y, p), width), w, a0))
                vstore(part, j1, 0, vfma(vsplatw(GET(y, p + 1), width), w, a1))
                p += 2
            if p < p1:
                j = GET(indices, p)
                vstore(part, j, 0, vfma(vsplatw(GET(y, p), width), w, vloadw(part, j, 0, width)))
        out[:, :] = part

    return scatter


# --------------------------------------------------------------------------------------------
# The scatter without Vec (one block; the library's block sum is the same in every variant).


def make_scatter(fixed: bool, prefetch: bool):

    @njit(nogil=True, fastmath=_FAST)
    def scatter(indptr, indices, y, W, scatter_blocks, out, width):
        n = W.shape[0]
        k = width.lanes if fixed else out.shape[1]
        part = scatter_blocks[0]
        part[:, :] = 0.0
        pf = prefetch and part.shape[0] * part.shape[1] * part.itemsize > 512 * 1024
        nnz = indices.shape[0]
        for i in range(n):
            for p in range(indptr[i], indptr[i + 1]):
                if pf and p + AHEAD < nnz:
                    prefetch_row_for_write(part, GET(indices, p + AHEAD), k)
                j, v = GET(indices, p), GET(y, p)
                for l in range(k):
                    part[j, l] += v * W[i, l]
        out[:, :] = part

    return scatter


# --------------------------------------------------------------------------------------------
# The row update without Vec: the same 4-row tiles and 16 KiB Gram chunks, with loops over the
# padded row (kp, a multiple of the vector width) and the tiles in a small scratch array.


@njit(nogil=True, fastmath=_FAST)
def update_rows_plain(F, numer, G, lam, eps, gram_blocks, numer_blocks):
    r = F.shape[0]
    k = G.shape[0]
    nb = gram_blocks.shape[0]
    kp = F.shape[1]
    Gp = np.zeros((kp, kp), F.dtype)
    Gp[:k, :k] = G
    chunk_rows = max(4, 16384 // (kp * F.itemsize) // 4 * 4)
    e = F.dtype.type(eps)
    for b in range(nb):
        chunk = np.zeros((chunk_rows, kp), F.dtype)
        lin = np.empty((4, kp), F.dtype)
        acc = np.zeros((kp, kp))
        lo, hi = b * r // nb, (b + 1) * r // nb
        cnt = 0
        for i0 in range(lo, hi, 4):
            c = min(4, hi - i0)
            for t in range(4):
                for l in range(kp):
                    chunk[cnt + t, l] = F[i0 + t, l] if t < c else 0.0
            lin[:, :] = 0.0
            for q in range(k):
                x0, x1, x2, x3 = (
                    chunk[cnt, q],
                    chunk[cnt + 1, q],
                    chunk[cnt + 2, q],
                    chunk[cnt + 3, q],
                )
                for l in range(kp):
                    g = Gp[q, l]
                    lin[0, l] += x0 * g
                    lin[1, l] += x1 * g
                    lin[2, l] += x2 * g
                    lin[3, l] += x3 * g
            for t in range(c):
                i = i0 + t
                for l in range(k):
                    f = chunk[cnt + t, l]
                    if lam == 0.0:
                        f = f * numer[i, l] / (lin[t, l] + e)
                    else:
                        f = (
                            f
                            * (numer[i, l] + 3.0 * lam * f * f)
                            / (lin[t, l] + 2.0 * lam * f * f * f + lam * f + eps)
                        )
                    chunk[cnt + t, l] = f
                    F[i, l] = f
            cnt += 4
            if cnt + 4 > chunk_rows or i0 + c >= hi:
                for q in range(k):
                    for s in range(cnt):
                        x = np.float64(chunk[s, q])
                        for l in range(q, k):
                            acc[q, l] += x * chunk[s, l]
                cnt = 0
        for q in range(k):
            for l in range(q, k):
                gram_blocks[b, q, l] = gram_blocks[b, l, q] = acc[q, l]


# --------------------------------------------------------------------------------------------


def _data(name):
    if name == "lucap0":
        from banmf.datasets import load_lucap0

        return load_lucap0().X
    return banmf.make_sparse_uniform(100_000, 10_000, 10**6, random_state=0)


def _state(X, k, dtype):
    """The solver's arrays (padded rows on cache lines) for one configuration."""
    n, m = X.shape
    kp = padded_width(k, dtype)
    rng = np.random.default_rng(0)
    W, Ht = zeros_line_aligned((n, kp), dtype), zeros_line_aligned((m, kp), dtype)
    W[:, :k], Ht[:, :k] = rng.random((n, k)), rng.random((m, k))
    G = (Ht[:, :k].T.astype(np.float64) @ Ht[:, :k]).astype(dtype)
    return {
        "k": k,
        "kp": kp,
        "width": row_width(kp, dtype),
        "W": W,
        "Ht": Ht,
        "G": G,
        "y": np.ones(X.nnz, dtype),
        "YHt": zeros_line_aligned((n, kp), dtype),
        "sq": np.empty((n, 2)),
        "blocks": zeros_line_aligned((1, m, kp), dtype),
        "out": zeros_line_aligned((m, kp), dtype),
        "gram": np.empty((4, k, k)),
        "numer": rng.random((n, kp)).astype(dtype) * (np.arange(kp) < k),
    }


def _variants(s):
    """name -> (device removed, kernel, function of the state giving its arguments)."""
    w, w0 = s["width"], Width(0)
    ya = lambda X, s, width: (  # noqa: E731
        X.indptr,
        X.indices,
        s["W"],
        s["Ht"],
        1.0,
        float(s["k"]),
        True,
        s["y"],
        s["YHt"],
        s["sq"],
        width,
    )
    sa = lambda X, s, width: (X.indptr, X.indices, s["y"], s["W"], s["blocks"], s["out"], width)  # noqa: E731
    # The library's kernels take their arrays in groups, and the unknown cells (None: none, as
    # the solver passes them); the copies below predate both.
    ya_lib = lambda X, s, width: (  # noqa: E731
        Sparse(X.indptr, X.indices),
        s["y"],
        Factors(s["W"], s["Ht"]),
        YSums(s["YHt"], s["sq"]),
        None,
        1.0,
        float(s["k"]),
        True,
        width,
    )
    sa_lib = lambda X, s, width: (  # noqa: E731
        Sparse(X.indptr, X.indices),
        s["y"],
        None,
        s["W"],
        s["blocks"],
        s["out"],
        width,
    )
    ref_y = _project_spmm_registers.serial if w.lanes else _project_spmm_loops.serial
    ypass, yreg = _accessors(make_ypass), _accessors(make_yreg)
    scat, sreg = _accessors(make_scatter), _accessors(make_scatter_reg)
    v = {
        ("Y pass", "library"): (ref_y, ya_lib, w),
        ("Y pass", "copy"): (yreg(True), ya, w),
        ("Y pass", "-Vec"): (ypass(True, True), ya, w),
        ("Y pass", "-Width -Vec"): (ypass(False, True), ya, w0),
        ("Y pass", "-item"): (yreg(True, use_item=False), ya, w),
        ("Y pass", "-prefetch"): (yreg(False), ya, w),
        ("Y pass", "plain"): (ypass(False, False, use_item=False), ya, w0),
        ("scatter", "library"): (scatter_rows(w).serial, sa_lib, w),
        ("scatter", "copy"): (sreg(True), sa, w),
        ("scatter", "-Vec"): (scat(True, True), sa, w),
        ("scatter", "-Width -Vec"): (scat(False, True), sa, w0),
        ("scatter", "-Width -Vec -prefetch"): (scat(False, False), sa, w0),
        ("Y pass", "-Width -Vec -prefetch"): (ypass(False, False), ya, w0),
        ("scatter", "-item"): (sreg(True, use_item=False), sa, w),
        ("scatter", "-prefetch"): (sreg(False), sa, w),
        ("scatter", "plain"): (scat(False, False, use_item=False), sa, w0),
    }
    if w.lanes == 0:  # rows too wide for registers: the library's kernels loop over k already
        v = {
            key: val
            for key, val in v.items()
            if key[1] not in ("copy", "-Vec", "-item", "-prefetch")
        }
    return v


def _check(X, s, variants):
    """Every variant leaves what the library kernel leaves (to rounding)."""
    outs = {}
    for (kern, name), (fn, args, width) in variants.items():
        s["y"][:] = 1.0
        fn(*args(X, s, width))
        key = "YHt" if kern == "Y pass" else "out"
        outs[kern, name] = (s[key].copy(), s["y"].copy())
    for (kern, name), (a, y) in outs.items():
        ra, ry = outs[kern, "library"]
        tol = 1e-4 if a.dtype == np.float32 else 1e-10
        np.testing.assert_allclose(a, ra, rtol=tol, atol=tol, err_msg=f"{kern} {name}")
        np.testing.assert_allclose(y, ry, rtol=tol, atol=tol, err_msg=f"{kern} {name}")
    F0 = s["W"].copy()
    res = []
    for fn in (update_rows.serial, update_rows_plain):
        np.copyto(s["W"], F0)
        fn(s["W"], s["numer"], s["G"], 0.0, 1e-12, s["gram"], None)
        res.append((s["W"].copy(), s["gram"].copy()))
    np.copyto(s["W"], F0)
    tol = 1e-4 if F0.dtype == np.float32 else 1e-10
    np.testing.assert_allclose(res[1][0], res[0][0], rtol=tol)
    np.testing.assert_allclose(res[1][1], res[0][1], rtol=tol)


def _sample(fn, args, calls, before=None):
    times = []
    for _ in range(calls):
        if before is not None:
            before()
        t = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def run(data, k, dtype, reps):
    X = _data(data)
    s = _state(X, k, dtype)
    variants = _variants(s)
    _check(X, s, variants)
    calls = 5 if X.nnz > 10**5 else 41
    F0 = s["W"].copy()
    restore = lambda: np.copyto(s["W"], F0)  # noqa: E731
    upd = {"library": update_rows.serial, "-Vec": update_rows_plain}
    uargs = (s["W"], s["numer"], s["G"], 0.0, 1e-12, s["gram"], None)
    times = {key: [] for key in list(variants) + [("update", n) for n in upd]}
    for _ in range(reps):  # interleaved: every variant once per rep
        for key, (fn, args, width) in variants.items():
            times[key].append(_sample(fn, args(X, s, width), calls))
        for name, fn in upd.items():
            times["update", name].append(_sample(fn, uargs, calls, restore))
    rows = []
    for (kern, name), t in times.items():
        t = np.array(t)
        ratio = float(np.median(t / np.array(times[kern, "library"])))
        # item and prefetch are removed from the copy: compared with it too.
        copy = times.get((kern, "copy"))
        vs_copy = (
            float(np.median(t / np.array(copy)))
            if copy and name in ("-item", "-prefetch")
            else None
        )
        rows.append((kern, name, float(np.median(t)) * 1e3, ratio, vs_copy))
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="5 reps, float32 k=10 at 10⁶ and LUCAP0")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    p.add_argument("--ks", nargs="+", type=int, default=[10, 32])
    p.add_argument("--data", nargs="+", default=["1e6", "lucap0"], choices=["1e6", "lucap0"])
    args = p.parse_args(argv)
    if args.quick:
        args.reps, args.dtypes, args.ks = 5, ["float32"], [10]
    print(
        f"numba {numba.__version__}, serial kernels, {args.reps} interleaved reps; ratio = "
        "median of time(variant) / time(library) per rep (> 1: the device wins)\n"
    )
    print("| data | dtype | k | kernel | variant | median ms | ratio | vs copy |")
    print("|---|---|---|---|---|---|---|---|", flush=True)
    for data in args.data:
        for dtype in args.dtypes:
            for k in args.ks if data == "1e6" else [10]:
                for kern, name, ms, ratio, vs_copy in run(data, k, np.dtype(dtype), args.reps):
                    cell = "" if vs_copy is None else f"{vs_copy:.2f}"
                    print(
                        f"| {data} | {dtype} | {k} | {kern} | {name} | {ms:.3f} | {ratio:.2f} "
                        f"| {cell} |",
                        flush=True,
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
