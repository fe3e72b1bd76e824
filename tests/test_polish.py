"""Per-factor thresholds and the Boolean polish: kernels against brute force, errors never rise."""

import contextlib

import numpy as np
import pytest
import reference as ref
from conftest import binary_matrices, observed_and_unknown, run_both
from hypothesis import assume, given
from hypothesis import strategies as st

import banmf.engine.changes as bc
import banmf.engine.polish as bp
import banmf.engine.refine as br
import banmf.engine.swaps as bs
from banmf import ASSO, BANMF, NMF, GreConD, PaNDa, boolean_error, make_boolean, refine_thresholds
from banmf._kernels.polish import (
    SLACK_MAX,
    best_flips,
    best_row_codes,
    changed_bits,
    cut_sums,
    descending_keys,
    drift_bounds,
    lone_bit_lines,
    order_ties,
    rank_buckets,
    subset_sums,
    table_changes,
    table_uncovered,
    uncovered_by_codes,
    unpack_keys,
)
from banmf._kernels.sparse import Sparse
from banmf.data.masks import pack_rows, row_codes
from banmf.data.validation import check_binary_matrix
from banmf.engine.polish import _bit_changes, _Fixed, polish
from banmf.engine.refine import best_cut
from banmf.io import Dataset


@given(st.integers(1, 5), st.integers(0, 2**31))
def test_subset_sums(k, seed):
    counts = np.random.default_rng(seed).integers(0, 5, size=1 << k).astype(np.int64)
    expected = ref.subset_sums(counts, k)
    subset_sums(counts, k)
    np.testing.assert_array_equal(counts, expected)


@given(
    binary_matrices(max_n=10, max_m=10),
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(0, 2**31),
    st.sampled_from([None, "missing", "observed"]),
)
@pytest.mark.filterwarnings("ignore:the unknown cells hide all")
def test_best_row_codes_is_the_brute_force_row_optimum(Xd, k, n_blocks, seed, form):
    rng = np.random.default_rng(seed)
    n, m = Xd.shape
    W, H = rng.random((n, k)) < 0.4, rng.random((k, m)) < 0.4
    unknown = rng.random((n, m)) < (0.0 if form is None else 0.3)
    assume(not unknown.all())  # an all-unknown X is refused: there is nothing to fit
    mask = {} if form is None else {form: unknown if form == "missing" else ~unknown}
    X, unk = observed_and_unknown(Xd, **mask)
    C = X[:0] if unk is None else unk.cells  # (an empty mask when every cell is observed)
    cindptr = np.zeros(n + 1, X.indptr.dtype) if unk is None else C.indptr
    observed = unk is not None and unk.observed
    b, a = row_codes(H.T), row_codes(W)
    F = np.bincount(b, minlength=1 << k).astype(np.int64)
    subset_sums(F, k)
    before = a.copy()
    changed = run_both(
        best_row_codes,
        Sparse(X.indptr, X.indices),
        Sparse(cindptr, C.indices),
        observed,
        b,
        F,
        k,
        m,
        a,
        min(n_blocks, n),
    )
    errs = ref.row_errors(Xd, H, None if unk is None else ~unknown)
    rows = np.arange(n)
    np.testing.assert_array_equal(errs[rows, a], errs.min(axis=1))
    # a row moves only on a strict improvement
    same = errs[rows, before] == errs.min(axis=1)
    np.testing.assert_array_equal(a[same], before[same])
    assert changed == int((a != before).sum())


@given(binary_matrices(max_n=12, max_m=12), st.integers(1, 3), st.integers(0, 2**31))
def test_polish_never_increases_the_error_and_ends_at_a_fixed_point(Xd, k, seed):
    rng = np.random.default_rng(seed)
    n, m = Xd.shape
    W, H = rng.random((n, k)) < 0.4, rng.random((k, m)) < 0.4
    res = polish(Xd, W, H, method="exact")
    assert res.info["method"] == "exact"
    assert res.info["history"][0] == ref.boolean_error(Xd, W, H)
    assert all(b <= a for a, b in zip(res.info["history"], res.info["history"][1:]))
    assert res.error == boolean_error(Xd, res.W, res.H) == ref.boolean_error(Xd, res.W, res.H)
    # converged: no single row of W nor column of H can do better (brute force)
    row_best = ref.row_errors(Xd, res.H).min(axis=1)
    np.testing.assert_array_equal(
        ref.row_errors(Xd, res.H)[np.arange(n), row_codes(res.W)], row_best
    )
    col_errs = ref.row_errors(Xd.T, res.W.T)
    np.testing.assert_array_equal(col_errs[np.arange(m), row_codes(res.H.T)], col_errs.min(axis=1))


def test_polish_repairs_a_damaged_planted_factorization():
    X, W, H = make_boolean(60, 50, 4, 0.4, random_state=3)
    W2 = W.copy()
    W2[:10] = ~W2[:10]  # spoil ten rows
    res = polish(X, W2, H)
    assert res.info["history"][0] > 0 and res.error == 0


@contextlib.contextmanager
def _tables(on: bool):
    """Force the off-support counts through tables (k <= TABLE_MAX_K) or bitsets, whatever
    their work."""
    saved = bc.TABLE_WORK_RATIO
    bc.TABLE_WORK_RATIO = np.inf if on else 0
    try:
        yield
    finally:
        bc.TABLE_WORK_RATIO = saved


def _flip_oracle(Xd, W, H, observed=None):
    """d[i, l] = error with W[i, l] on minus error with it off, over the ``observed`` cells
    (dense bool; None: all), by dense brute force."""
    n, k = W.shape
    d = np.zeros((n, k), dtype=np.int64)
    for i in range(n):
        for l in range(k):
            on, off = W.copy(), W.copy()
            on[i, l], off[i, l] = True, False
            d[i, l] = ref.boolean_error(Xd, on, H, observed) - ref.boolean_error(
                Xd, off, H, observed
            )
    return d


@pytest.mark.parametrize("tables", [True, False])
@given(binary_matrices(max_n=9, max_m=9), st.sampled_from([1, 2, 3, 66]), st.integers(0, 2**31))
def test_bit_changes_equal_the_dense_oracle(tables, Xd, k, seed):
    """Both off-support paths (subset-sum tables, bitsets per distinct pattern), any word count."""
    if tables and k > bc.TABLE_MAX_K:
        return
    rng = np.random.default_rng(seed)
    n, m = Xd.shape
    W, H = rng.random((n, k)) < 0.3, rng.random((k, m)) < 0.3
    X = check_binary_matrix(Xd)
    expected = _flip_oracle(Xd, W, H)
    rows = np.arange(n)
    with _tables(tables):
        fixed = _Fixed(np.ascontiguousarray(H.T), n)
        assert (fixed.tables is not None) == tables
        A = pack_rows(W)
        np.testing.assert_array_equal(_bit_changes(Dataset.of(X), A, fixed, rows), expected)
        for l in range(k):
            np.testing.assert_array_equal(
                _bit_changes(Dataset.of(X), A, fixed, rows, l)[:, 0], expected[:, l]
            )
        sub = rows[::2]
        np.testing.assert_array_equal(_bit_changes(Dataset.of(X), A, fixed, sub), expected[sub])


@pytest.mark.parametrize("tables", [True, False])
@given(binary_matrices(max_n=10, max_m=10), st.integers(1, 3), st.integers(0, 2**31))
def test_flip_polish_ends_where_no_single_flip_helps(tables, Xd, k, seed):
    rng = np.random.default_rng(seed)
    n, m = Xd.shape
    W, H = rng.random((n, k)) < 0.4, rng.random((k, m)) < 0.4
    with _tables(tables):
        res = polish(Xd, W, H, method="flip")
    assert res.info["method"] == "flip"
    assert res.info["history"][0] == ref.boolean_error(Xd, W, H)
    assert all(b <= a for a, b in zip(res.info["history"], res.info["history"][1:]))
    assert res.error == ref.boolean_error(Xd, res.W, res.H)
    # local optimum of both half-steps (brute force over every single flip)
    d_w = _flip_oracle(Xd, res.W, res.H)
    assert (np.where(res.W, -d_w, d_w) >= 0).all()
    d_h = _flip_oracle(Xd.T, res.H.T, res.W.T)
    assert (np.where(res.H.T, -d_h, d_h) >= 0).all()


@given(
    binary_matrices(min_n=1, max_n=4, min_m=1, max_m=4), st.integers(1, 2), st.integers(0, 2**31)
)
def test_polish_on_tiny_cases_against_exhaustive_enumeration(Xd, k, seed):
    """Tiny X, k <= 2: enumerate every factor pair. Exact polish reaches a pair that no change of
    one row of W or one column of H improves; its error is at least the global optimum, and from
    the global optimum itself neither polish moves."""
    n, m = Xd.shape
    pats_w = (
        ((np.arange(1 << (n * k))[:, None] >> np.arange(n * k)) & 1).astype(bool).reshape(-1, n, k)
    )
    pats_h = (
        ((np.arange(1 << (k * m))[:, None] >> np.arange(k * m)) & 1).astype(bool).reshape(-1, k, m)
    )
    errs = np.array([[ref.boolean_error(Xd, W, H) for H in pats_h] for W in pats_w])
    best = errs.min()
    iw, ih = np.unravel_index(errs.argmin(), errs.shape)
    rng = np.random.default_rng(seed)
    W, H = rng.random((n, k)) < 0.5, rng.random((k, m)) < 0.5
    for method in ("exact", "flip"):
        assert polish(Xd, W, H, method=method).error >= best
        at_best = polish(Xd, pats_w[iw], pats_h[ih], method=method)
        assert at_best.error == best and at_best.info["history"] == [best, best]


def test_polish_repairs_a_damaged_planted_factorization_with_flips_at_large_k():
    X, W, H = make_boolean(80, 70, 20, 0.1, random_state=2)
    W2 = W.copy()
    W2[:10, 0] = ~W2[:10, 0]
    res = polish(X, W2, H)
    assert res.info["method"] == "flip" and res.info["history"][0] > 0 and res.error == 0


def test_polish_checks_its_inputs():
    with pytest.raises(ValueError, match="exceeds 16"):
        polish(np.eye(20), np.eye(20), np.eye(20), method="exact")
    with pytest.raises(ValueError, match="method"):
        polish(np.eye(3), np.eye(3), np.eye(3), method="greedy")
    with pytest.raises(ValueError, match="max_rounds"):
        polish(np.eye(3), np.eye(3), np.eye(3), max_rounds=-1)
    with pytest.raises(ValueError, match="shape"):
        polish(np.eye(3), np.eye(2), np.eye(2))
    W, H = np.eye(3, dtype=bool), np.eye(3, dtype=bool)
    polish(np.ones((3, 3)), W, H)
    assert (W == np.eye(3)).all() and (H == np.eye(3)).all()  # inputs untouched


@given(binary_matrices(max_n=10, max_m=10), st.integers(1, 3), st.integers(0, 2**31))
def test_refined_thresholds_are_never_worse_and_coordinatewise_optimal(Xd, k, seed):
    rng = np.random.default_rng(seed)
    n, m = Xd.shape
    W = rng.random((n, k)).round(1)  # ties between values are common
    H = rng.random((k, m)).round(1)
    res = refine_thresholds(Xd, W, H, 0.5, 0.5)
    start = ref.boolean_error(Xd, W > 0.5, H > 0.5)
    assert res.info["history"][0] == start and res.error <= start
    assert all(b <= a for a, b in zip(res.info["history"], res.info["history"][1:]))
    np.testing.assert_array_equal(res.W, W > res.info["threshold_w"])
    np.testing.assert_array_equal(res.H, H > res.info["threshold_h"][:, None])
    assert res.error == ref.boolean_error(Xd, res.W, res.H)
    # at the end no single threshold can do better (every cut of every factor, brute force)
    for l in range(k):
        for t in np.concatenate(([-1.0], np.unique(W[:, l]))):
            B = res.W.copy()
            B[:, l] = W[:, l] > t
            assert ref.boolean_error(Xd, B, res.H) >= res.error
        for t in np.concatenate(([-1.0], np.unique(H[l]))):
            B = res.H.copy()
            B[l] = H[l] > t
            assert ref.boolean_error(Xd, res.W, B) >= res.error


def test_refine_thresholds_checks_its_inputs():
    with pytest.raises(ValueError, match="shapes"):
        refine_thresholds(np.eye(3), np.ones((3, 2)), np.ones((3, 3)), 0.5, 0.5)
    with pytest.raises(ValueError, match="finite"):
        refine_thresholds(np.eye(2), np.full((2, 1), np.nan), np.ones((1, 2)), 0.5, 0.5)


def test_estimator_options():
    X, _, _ = make_boolean(50, 50, 5, 0.8, random_state=1)
    # The steps of one start: without the combination, which may keep another choice.
    one = {"random_state": 1, "n_init": 1, "combine": False}
    paper = BANMF(5, **one, tol=None, thresholds="global", polish=False).fit(X)
    assert paper.reconstruction_err_ == paper.booleanized_err_ == paper.unpolished_err_
    thr = BANMF(5, **one, polish=False).fit(X)
    assert thr.booleanized_err_ == paper.reconstruction_err_
    assert thr.reconstruction_err_ == thr.unpolished_err_ <= paper.reconstruction_err_
    full = BANMF(5, **one).fit(X)
    assert full.unpolished_err_ == thr.reconstruction_err_
    assert full.reconstruction_err_ <= thr.reconstruction_err_
    assert full.reconstruction_err_ == boolean_error(X, full.W_, full.components_)
    for method in ("exact", "flip"):
        fit = BANMF(5, random_state=1, n_init=1, polish=method).fit(X)
        assert fit.reconstruction_err_ <= thr.reconstruction_err_
    np.testing.assert_array_equal(paper.W_, paper.W_continuous_ > paper.thresholds_[0])
    # NMF is a baseline: the paper's configuration unless asked
    nmf = NMF(5, random_state=1, max_iter=200).fit(X)
    assert nmf.reconstruction_err_ == nmf.booleanized_err_
    assert (
        NMF(5, random_state=1, max_iter=200, polish=True).fit(X).reconstruction_err_
        <= nmf.reconstruction_err_
    )
    with pytest.raises(ValueError, match="polish='exact' needs"):
        BANMF(17, polish="exact", max_iter=2).fit(np.ones((20, 20)))
    for cls in (GreConD, PaNDa):  # n_components=None: refused before the work, not after
        with pytest.raises(ValueError, match="needs a fixed n_components"):
            cls(None, polish="exact").fit(np.ones((20, 20)))
    with pytest.raises(ValueError, match="polish must be"):
        BANMF(2, polish="yes", max_iter=2).fit(np.eye(3))
    with pytest.raises(ValueError, match="thresholds must be"):
        BANMF(2, thresholds="each", max_iter=2).fit(np.eye(3))


def test_restarts_keep_the_best_and_are_reproducible():
    X, _, _ = make_boolean(40, 40, 5, 0.8, random_state=4)
    params = {
        "max_iter": 100,
        "polish": False,
        "thresholds": "global",
        "random_state": 7,
        "combine": False,
    }
    one = BANMF(5, n_init=1, **params).fit(X)
    assert BANMF(5, **params).fit(X).n_init_ == 10  # "auto" on a small problem
    many = BANMF(5, n_init=4, **params).fit(X)
    assert many.init_errors_[0] == one.reconstruction_err_
    assert many.reconstruction_err_ == min(many.init_errors_)
    again = BANMF(5, n_init=4, **params).fit(X)
    np.testing.assert_array_equal(again.W_, many.W_)
    assert again.init_errors_ == many.init_errors_
    # The combination of the same starts: never worse than the best, here lower (8 < 10).
    combined = BANMF(5, n_init=4, **{**params, "combine": True}).fit(X)
    assert combined.init_errors_ == many.init_errors_
    assert combined.reconstruction_err_ <= many.reconstruction_err_
    with pytest.raises(ValueError, match="n_init"):
        BANMF(5, n_init=0).fit(X)
    with pytest.raises(ValueError, match="n_init > 1"):
        BANMF(2, n_init=2, init="custom").fit(np.eye(3), W=np.ones((3, 2)), H=np.ones((2, 3)))


def test_transform_polishes_new_rows_against_the_fitted_H():
    X, _, _ = make_boolean(60, 30, 3, 0.5, random_state=5)
    model = BANMF(3, random_state=0, max_iter=300).fit(X)
    W_new = model.transform(X)
    H = model.components_
    d = _flip_oracle(X.toarray(), W_new, H)
    assert (np.where(W_new, -d, d) >= 0).all()  # every new row is at least flip-optimal


@pytest.mark.parametrize("cls", [ASSO, GreConD])
def test_baselines_take_the_polish_option(cls):
    X, _, _ = make_boolean(40, 30, 4, 0.6, noise=0.05, random_state=3)
    plain = cls(4).fit(X)
    polished = cls(4, polish=True).fit(X)
    assert polished.unpolished_err_ == plain.reconstruction_err_
    assert polished.reconstruction_err_ <= plain.reconstruction_err_
    assert polished.reconstruction_err_ == boolean_error(X, polished.W_, polished.components_)


@given(st.integers(1, 6), st.integers(0, 40), st.integers(0, 2**31))
def test_bit_tables_count_the_columns_each_bit_covers_under_every_pattern(k, m, seed):
    codes = np.random.default_rng(seed).integers(0, 1 << k, size=m)
    T = bc.bit_tables(codes, k)
    for l in range(k):
        for s in range(1 << k):
            assert T[l, s] == sum(1 for c in codes if (c >> l) & 1 and c & ~s == 0)


@given(st.integers(0, 12), st.integers(1, 6), st.data(), st.integers(0, 2**31))
def test_table_uncovered_against_numpy(r, k, data, seed):
    """The tables read per row and bit (every bit, or one), as numpy's gather reads them."""
    rng = np.random.default_rng(seed)
    T = bc.bit_tables(rng.integers(0, 1 << k, size=20), k)
    A = pack_rows(rng.random((r, k)) < 0.4)
    only = data.draw(st.integers(-1, k - 1))
    bits = np.arange(k) if only < 0 else np.array([only])
    a = A[:, 0].astype(np.int64)
    expected = T[bits, ((1 << k) - 1) & ~(a[:, None] & ~(1 << bits))]
    out = np.full(expected.shape, -1, dtype=np.int64)
    run_both(table_uncovered, A, T, only, out)
    np.testing.assert_array_equal(out, expected)


@given(st.integers(0, 12), st.integers(1, 6), st.data(), st.integers(0, 2**31))
def test_table_changes_against_numpy(r, k, data, seed):
    """The tables read for the rows named (or all), minus twice the ones each bit alone covers,
    in place."""
    rng = np.random.default_rng(seed)
    T = bc.bit_tables(rng.integers(0, 1 << k, size=20), k)
    A = pack_rows(rng.random((r + 3, k)) < 0.4)
    rows = rng.permutation(r + 3)[:r]
    only = data.draw(st.integers(-1, k - 1))
    bits = np.arange(k) if only < 0 else np.array([only])
    alone = rng.integers(0, 9, size=(r, len(bits)))
    a = A[rows, 0].astype(np.int64)
    expected = T[bits, ((1 << k) - 1) & ~(a[:, None] & ~(1 << bits))] - 2 * alone
    run_both(table_changes, A, rows, T, only, alone)
    np.testing.assert_array_equal(alone, expected)
    every = rng.integers(0, 9, size=(r + 3, len(bits)))  # rows None: every row of A
    a = A[:, 0].astype(np.int64)
    expected = T[bits, ((1 << k) - 1) & ~(a[:, None] & ~(1 << bits))] - 2 * every
    run_both(table_changes, A, None, T, only, every)
    np.testing.assert_array_equal(every, expected)


@given(
    st.integers(0, 12),
    st.sampled_from([1, 2, 5, 66]),
    st.booleans(),
    st.integers(0, 2**31),
)
def test_best_flips_against_numpy(r, k, bounded, seed):
    """Each row's least change, first bit on ties, flipped in the bools and the packed words
    when negative; the other rows' changes left as bounds (capped); the sum of those made."""
    rng = np.random.default_rng(seed)
    n = r + 3
    free = rng.random((n, k)) < 0.4
    rows = np.sort(rng.permutation(n)[:r])
    d = rng.integers(-3, 4, size=(r, k)) * rng.choice([1, 20000], size=(r, k))
    slack = np.full((n, k), -7, dtype=np.int16)
    change = np.where(free[rows], -d, d)
    best = change.argmin(axis=1) if r else np.zeros(0, dtype=int)
    least = change[np.arange(r), best]
    move = least < 0
    expected_free, expected_slack = free.copy(), slack.copy()
    expected_free[rows[move], best[move]] ^= True
    if bounded:
        expected_slack[rows[~move]] = np.minimum(change[~move], SLACK_MAX)
    A = pack_rows(free)
    moved = np.zeros(r, dtype=bool)
    total = run_both(best_flips, d, rows, free, A, slack, bounded, moved)
    assert total == least[move].sum()
    np.testing.assert_array_equal(moved, move)
    np.testing.assert_array_equal(free, expected_free)
    np.testing.assert_array_equal(A, pack_rows(expected_free))
    np.testing.assert_array_equal(slack, expected_slack)


@given(st.integers(0, 12), st.sampled_from([1, 3, 66]), st.integers(0, 2**31))
def test_drift_bounds_against_numpy(n, k, seed):
    """Bounds lowered (clipped at -1, from anywhere in int16's range), rows with one below 0."""
    rng = np.random.default_rng(seed)
    slack = rng.integers(-1, SLACK_MAX + 1, size=(n, k)).astype(np.int16)
    drop = rng.integers(0, SLACK_MAX + 1, size=k) * (rng.random(k) < 0.5)
    expected = np.maximum(slack.astype(np.int64) - drop, -1)
    negative = np.zeros(n, dtype=bool)
    run_both(drift_bounds, slack, drop.astype(np.int64), negative)
    np.testing.assert_array_equal(slack, expected)
    np.testing.assert_array_equal(negative, (expected < 0).any(axis=1))


@given(st.integers(0, 12), st.sampled_from([1, 3, 66]), st.integers(1, 5), st.integers(0, 2**31))
def test_changed_bits_against_numpy(n, k, n_blocks, seed):
    rng = np.random.default_rng(seed)
    before = rng.random((n, k)) < 0.4
    after = before ^ (rng.random((n, k)) < 0.1)
    changed = (before != after).any(axis=1)
    out = np.full((min(n_blocks, max(n, 1)), k), -1, dtype=np.int64)
    run_both(changed_bits, before, after, len(out), out)
    np.testing.assert_array_equal(
        out.sum(axis=0), np.count_nonzero(before[changed] | after[changed], axis=0)
    )


def test_tables_only_where_their_build_pays():
    """k·2^k counts for 232 rows against 16 columns (votes at k = 16) cost 37× the bitsets; on
    wide data with many rows the tables stay (issue 30: k = 16 was a cliff)."""
    assert not bc.use_tables(16, 16, 232) and not bc.use_tables(15, 232, 16)
    assert bc.use_tables(16, 16470, 88162) and bc.use_tables(8, 143, 2000)
    assert not bc.use_tables(17, 16470, 88162)  # past TABLE_MAX_K: bitsets whatever the work
    H = np.random.default_rng(0).random((16, 16)) < 0.2
    assert _Fixed(H.T.copy(), 232).tables is None


def test_auto_takes_the_exact_update_by_its_work_not_by_k():
    """On votes (232×16) the exact update costs (n+m)·k·2^k: within the budget up to k = 14
    (it used to stop at k = 11, costing 63 against 75 errors at k = 13), flips past it."""
    from banmf.datasets import load_votes

    X = check_binary_matrix(load_votes().X)
    assert [bp.resolve_polish("auto", X.shape, X.nnz, k) for k in (11, 14, 15, 16)] == [
        "exact",
        "exact",
        "flip",
        "flip",
    ]
    wide = check_binary_matrix(np.eye(2, 4000, dtype=int))
    assert bp.resolve_polish("auto", wide.shape, wide.nnz, 12) == "flip"  # 4002·12·4096 > 10⁸


@contextlib.contextmanager
def _paths(lines: bool, codes: bool):
    """Force the per-factor thresholds' counts (:func:`banmf.engine.polish.lone_changes`) through
    the fixed factor's lines or every free row, and through the distinct codes or the
    bitsets (where there are no tables), whatever their work."""
    saved = bp.LINE_COST, bp.CODES_PER_SORT
    bp.LINE_COST = 0 if lines else 10**9
    bp.CODES_PER_SORT = 10**9 if codes else -1
    try:
        yield
    finally:
        bp.LINE_COST, bp.CODES_PER_SORT = saved


@pytest.mark.parametrize(("lines", "codes"), [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("tables", [True, False])
@given(
    binary_matrices(max_n=9, max_m=9),
    st.sampled_from([1, 2, 3, 66]),
    st.integers(0, 2**31),
    st.sampled_from([None, "missing", "observed"]),
)
@pytest.mark.filterwarnings("ignore:the unknown cells hide all")
def test_one_factors_bit_changes_equal_the_dense_oracle(lines, codes, tables, Xd, k, seed, form):
    """:func:`banmf.engine.polish.lone_changes`, both sides (W's rows against H, H's columns against
    W), every way of counting, with unknown cells either way, any word count."""
    if tables and k > bc.TABLE_MAX_K:
        return
    rng = np.random.default_rng(seed)
    n, m = Xd.shape
    W, H = rng.random((n, k)) < 0.3, rng.random((k, m)) < 0.3
    unknown = rng.random((n, m)) < (0.0 if form is None else 0.3)
    assume(not unknown.all())
    mask = {} if form is None else {form: unknown if form == "missing" else ~unknown}
    data = Dataset.of(check_binary_matrix(Xd), **mask)
    observed = None if form is None else ~unknown
    Ht = np.ascontiguousarray(H.T)
    sides = [
        (data, data.T, W, Ht, _flip_oracle(Xd, W, H, observed)),
        (
            data.T,
            data,
            Ht,
            W,
            _flip_oracle(Xd.T, Ht, W.T, None if form is None else ~unknown.T),
        ),
    ]
    with _tables(tables), _paths(lines, codes):
        for free_data, other, free, fixed_bool, expected in sides:
            fixed = _Fixed(fixed_bool, free.shape[0])
            A = pack_rows(free)
            for l in range(k):
                got = bp.lone_changes(
                    free_data, other, A, fixed, np.flatnonzero(fixed_bool[:, l]), l
                )
                np.testing.assert_array_equal(got, expected[:, l])


@given(
    binary_matrices(max_n=9, max_m=9),
    st.sampled_from([1, 2, 66]),
    st.integers(1, 3),
    st.integers(0, 2**31),
)
def test_lone_bit_lines_against_numpy(Md, k, parts, seed):
    """Per free row, the ones of the fixed rows ``lines`` (those with bit l) whose code meets
    the row's pattern in no bit but l; any split of the free rows into blocks, empty ones
    included."""
    rng = np.random.default_rng(seed)
    c, r = Md.shape  # one line per fixed row, listing free rows
    A, B = rng.random((r, k)) < 0.4, rng.random((c, k)) < 0.4
    l = int(rng.integers(k))
    lines = np.flatnonzero(B[:, l])
    others = np.ones(k, dtype=bool)
    others[l] = False
    shared = ((A & others).astype(int) @ (B & others).T.astype(int)) > 0  # (r, c)
    expected = (Md[lines].T.astype(bool) & ~shared[:, lines]).sum(axis=1)
    inner = np.sort(rng.integers(0, r + 1, size=parts - 1))
    cuts = np.concatenate(([0], inner, [r])).astype(np.int64)
    Mt = check_binary_matrix(Md)
    out = np.full(r, -1, dtype=np.int64)
    run_both(lone_bit_lines, Mt.indptr, Mt.indices, lines, cuts, pack_rows(A), pack_rows(B), l, out)
    np.testing.assert_array_equal(out, expected)


@given(st.integers(0, 12), st.integers(0, 6), st.sampled_from([1, 2, 66]), st.integers(0, 2**31))
def test_uncovered_by_codes_against_numpy(r, c, k, seed):
    """The counts of the codes that meet each row's pattern in no bit (none: zeros)."""
    rng = np.random.default_rng(seed)
    A, C = rng.random((r, k)) < 0.3, rng.random((c, k)) < 0.3
    counts = rng.integers(1, 5, size=c).astype(np.int64)
    meets = (A.astype(int) @ C.T.astype(int)) > 0
    expected = (~meets * counts).sum(axis=1)
    out = np.full(r, -1, dtype=np.int64)
    run_both(uncovered_by_codes, pack_rows(A), pack_rows(C), counts, out)
    np.testing.assert_array_equal(out, expected)


@given(binary_matrices(max_n=10, max_m=10), st.integers(1, 3), st.integers(0, 2**31))
def test_refined_thresholds_whatever_the_way_of_counting(Xd, k, seed):
    """The fixed factor's lines and distinct codes give the very thresholds of the pass over
    every free row with bitsets (the counts are the same integers)."""
    rng = np.random.default_rng(seed)
    n, m = Xd.shape
    W, H = rng.random((n, k)).round(1), rng.random((k, m)).round(1)
    results = []
    for lines, codes in [(False, False), (True, True), (True, False)]:
        with _tables(False), _paths(lines, codes):
            res = refine_thresholds(Xd, W, H, 0.5, 0.5)
        results.append((res.info["history"], res.info["threshold_w"], res.info["threshold_h"]))
    for history, tw, th in results[1:]:
        assert history == results[0][0]
        np.testing.assert_array_equal(tw, results[0][1])
        np.testing.assert_array_equal(th, results[0][2])


@given(
    binary_matrices(max_n=10, max_m=10),
    st.sampled_from([1, 2, 3, 66]),
    st.integers(0, 2**31),
    st.sampled_from([None, "missing", "observed"]),
)
@pytest.mark.filterwarnings("ignore:the unknown cells hide all")
def test_flip_bounds_skip_only_rows_that_would_not_move(Xd, k, seed, form):
    # The polish keeps bounds on each row's flips over the rounds and counts only rows that
    # may move; rounds that count every row must give the same flips, rounds and errors.
    rng = np.random.default_rng(seed)
    n, m = Xd.shape
    W, H = rng.random((n, k)) < 0.4, rng.random((k, m)) < 0.4
    unknown = rng.random((n, m)) < (0.0 if form is None else 0.3)
    assume(not unknown.all())
    mask = {} if form is None else {form: unknown if form == "missing" else ~unknown}
    data = Dataset.of(Xd, **mask)
    res = bp.polish_factors(data, W, H, "flip")
    Wr, Htr = W.copy(), np.array(H.T, order="C")
    history = [data.error(Wr, Htr.T)]
    for _ in range(100):
        moves = bp.polish_rows(data, Wr, Htr, "flip")
        moves += bp.flip_rows(Htr, lambda A, c: bc.bit_changes(data.T, A, Wr, c))[0]
        history.append(data.error(Wr, Htr.T))
        if moves == 0:
            break
    np.testing.assert_array_equal(res.W, Wr)
    np.testing.assert_array_equal(res.H, Htr.T)
    assert res.history == history
    # After each swap the polish's errors are added up from the flips' changes as well.
    swapped = bs.swap_factors(Xd, W, H, method="flip", **mask)
    assert swapped.info["history"][-1] == data.error(swapped.W, swapped.H)


@given(binary_matrices(max_n=10, max_m=10), st.sampled_from([1, 2, 66]), st.integers(0, 2**31))
def test_a_flips_change_moves_by_at_most_the_fixed_rows_that_moved_with_its_bit(Xd, k, seed):
    # The bound behind the skipped rows (bp.drifted): the change from flipping bit l moves by
    # at most the fixed rows that changed and hold bit l before or after.
    rng = np.random.default_rng(seed)
    n, m = Xd.shape
    W, H = rng.random((n, k)) < 0.4, rng.random((k, m)) < 0.4
    H2 = H ^ (rng.random((k, m)) < 0.2)
    data = Dataset.of(Xd)
    A, rows = pack_rows(W), np.arange(n)
    before = bc.bit_changes(data, A, H.T, rows)
    after = bc.bit_changes(data, A, H2.T, rows)
    moved = bp.moved_bits(H.T, H2.T)
    assert (np.abs(after - before) <= moved).all()
    slack = bp.drifted(None, W.shape, None)
    assert (slack == -1).all()
    slack[:] = np.minimum(np.where(W, -before, before), SLACK_MAX)
    bp.drifted(slack, W.shape, moved)
    # Negative bounds are kept as -1: all that counts is that a flip may lower the error.
    assert ((slack == -1) | ((slack >= 0) & (slack <= np.where(W, -after, after)))).all()


def sort_values(n, distinct, form, seed):
    """Values to sort: ties (few distinct), negatives and zeros of both signs, values that
    share the top bits of their sort keys (1 + tiny), float32."""
    rng = np.random.default_rng(seed)
    values = rng.integers(0, distinct, n) + rng.choice([0.0, 0.5], n)
    if form == "signed":
        values = (values - distinct / 2) * rng.choice([1.0, -1.0], n)
        values[rng.random(n) < 0.2] = -0.0
    elif form == "close":
        values = 1 + values * 2.0**-45
    return values.astype(np.float32) if form == "float32" else values


forms = st.sampled_from(["plain", "signed", "close", "float32"])


@contextlib.contextmanager
def _small_cuts(small: bool):
    """Force the thresholds' sort and cuts (:func:`banmf.engine.refine.descending`,
    ``cut_layout``, ``best_cut``) through numpy or through the kernels, whatever the size."""
    saved = br.SMALL_CUTS
    br.SMALL_CUTS = 2**62 if small else 0
    try:
        yield
    finally:
        br.SMALL_CUTS = saved


@given(st.integers(0, 80), st.integers(1, 9), forms, st.booleans(), st.integers(0, 2**31))
def test_descending_is_a_sort(n, distinct, form, small, seed):
    """The values in decreasing order, in their dtype, and positions that give them."""
    values = sort_values(n, distinct, form, seed)
    with _small_cuts(small):
        ordered, at = br.descending(values)
    np.testing.assert_array_equal(ordered, -np.sort(-values), strict=True)
    np.testing.assert_array_equal(np.sort(at), np.arange(n))
    np.testing.assert_array_equal(values[at], ordered)


@given(st.integers(0, 80), st.integers(1, 9), forms, st.integers(0, 2**31))
def test_sort_keys_against_numpy(n, distinct, form, seed):
    """The keys, their unpacking and the runs' order, each as its reference; the runs are
    put in order when the keys keep few bits of the values (a shift past the positions')."""
    values = sort_values(n, distinct, form, seed)
    for shift in {max(n - 1, 0).bit_length(), 60}:
        keys = np.empty(n, dtype=np.uint64)
        bits = np.asarray(values, dtype=np.float64).view(np.uint64)
        run_both(descending_keys, bits, np.uint64(shift), keys)
        np.testing.assert_array_equal(keys, ref.descending_keys(values, shift), strict=True)
        keys.sort()
        vals, order = np.empty(n, dtype=values.dtype), np.empty(n, dtype=np.intp)
        run_both(unpack_keys, keys, np.uint64(shift), values, vals, order)
        expected = ref.unpack_keys(keys, shift, values)
        np.testing.assert_array_equal(vals, expected[0], strict=True)
        np.testing.assert_array_equal(order, expected[1], strict=True)
        expected = ref.order_ties(vals, order)
        order_ties(keys, np.uint64(shift), vals, order)
        np.testing.assert_array_equal(vals, expected[0], strict=True)
        np.testing.assert_array_equal(order, expected[1], strict=True)


@given(st.integers(0, 60), st.integers(0, 7), st.integers(0, 2**31))
def test_rank_buckets_against_numpy(n, shift, seed):
    """Each row's place among its bucket's rows (in increasing order of row), and at each
    place the low bits of that row's rank."""
    order = np.random.default_rng(seed).permutation(n)
    rank = np.argsort(order)
    arrival = np.argsort(rank >> shift, kind="stable")  # the rows, bucket by bucket
    pos, low = np.full(n, -1, dtype=np.int32), np.full(n, -1, dtype=np.int32)
    rank_buckets(order, shift, pos, low)
    np.testing.assert_array_equal(pos[arrival], np.arange(n))
    np.testing.assert_array_equal(low, rank[arrival] & ((1 << shift) - 1))


@given(
    st.integers(0, 60),
    st.integers(1, 9),
    st.integers(0, 7),
    st.integers(-1, 10),
    st.integers(0, 2**31),
)
def test_cut_sums_is_the_least_prefix_sum_at_the_cuts(n, distinct, shift, t, seed):
    # Few distinct values (ties across buckets), n = 0 (no rows), a bucket per row and more.
    rng = np.random.default_rng(seed)
    vals = -np.sort(-rng.integers(0, distinct, n).astype(np.float64))
    d = rng.integers(-3, 3, n).astype(np.int64)
    order = rng.permutation(n)
    current = int(np.count_nonzero(vals > t))
    pos, low = np.empty(n, dtype=np.int32), np.empty(n, dtype=np.int32)
    rank_buckets(order, shift, pos, low)
    out = np.empty(3, dtype=np.int64)
    sums = np.empty(((n - 1) >> shift) + 1 if n else 0, dtype=np.int64)
    scratch = np.empty((2, n), dtype=np.int64)
    run_both(cut_sums, vals, d, pos, low, shift, current, scratch[0], scratch[1], sums, out)
    assert tuple(out) == ref.cut_sums(vals, d, order, current)
    best, least, now = ref.cut_sums(vals, d, order, current)
    for small in (False, True):
        with _small_cuts(small):
            better = best_cut(vals, br.cut_layout(order), d, float(t), scratch)
        if least >= now:
            assert better is None
        else:
            cut = vals[best] if best < n else np.nextafter(vals[-1], -np.inf)
            assert better == (cut, least - now)


def _cuts(values, d, t, small=None):
    """The thresholds' sort (values, positions) and best cut at ``t`` for changes ``d``, by
    numpy (``small``), by the kernels, or (None) by the path their size takes."""
    with contextlib.nullcontext() if small is None else _small_cuts(small):
        vals, at = br.descending(values)
        layout = br.cut_layout(at)
        # The path asked for, or numpy's below SMALL_CUTS values.
        assert isinstance(layout, np.ndarray) == (len(values) < br.SMALL_CUTS)
        cut = best_cut(vals, layout, d, t, np.empty((2, len(values)), dtype=np.int64))
        again = br.sorted_cuts(values)
        np.testing.assert_array_equal(again[0], vals, strict=True)
    return vals, at, cut


def _same_cuts(first, second):
    """The same sort and cut, to the bit: -0.0 is not +0.0, nor float32 float64."""
    (vals, at, cut), (vals2, at2, cut2) = first, second
    assert vals.dtype == vals2.dtype and vals.tobytes() == vals2.tobytes()
    np.testing.assert_array_equal(at, at2, strict=True)
    if cut is None or cut2 is None:
        assert cut is cut2
        return
    assert type(cut[0]) is type(cut2[0]) and np.signbit(cut[0]) == np.signbit(cut2[0])
    assert cut[0] == cut2[0] and cut[1] == cut2[1]


def _changes(rng, n, dtype):
    """Changes of both signs, half of them 0: the least sum is often reached at several cuts."""
    return (rng.integers(-2, 3, n) * (rng.random(n) < 0.5)).astype(dtype)


def _threshold(values, where, rng):
    """A threshold at one of ``values``, just above or below one, or above or below them all."""
    if where in ("low", "high") or not len(values):
        return -1e9 if where == "low" else 1e9
    v = float(values[rng.integers(len(values))])
    return {"at": v, "above": np.nextafter(v, np.inf), "below": np.nextafter(v, -np.inf)}[where]


@given(
    st.sampled_from([0, 1, 2, 3, 5, 17, 64, 200]),
    st.integers(1, 9),
    forms,
    st.sampled_from(["at", "above", "below", "low", "high"]),
    st.sampled_from([np.int64, np.int32]),
    st.integers(0, 2**31),
)
def test_small_cuts_are_the_kernels(n, distinct, form, where, dtype, seed):
    """numpy's sort and least prefix sum (below SMALL_CUTS) give the kernels' results to the
    bit: the values and their positions in the same order (ties by row, -0.0 after +0.0),
    the same threshold and change, or None from both. Few distinct values (long ties, zeros
    of both signs with "signed"), changes of both signs."""
    values = sort_values(n, distinct, form, seed)
    rng = np.random.default_rng(seed)
    d = _changes(rng, n, dtype)
    t = _threshold(values, where, rng)
    _same_cuts(_cuts(values, d, t, small=True), _cuts(values, d, t, small=False))


@pytest.mark.parametrize("offset", [-1, 0, 1])
@pytest.mark.parametrize("form", ["plain", "signed", "close", "float32"])
def test_cuts_at_the_small_size(offset, form):
    """Either side of SMALL_CUTS (numpy below it, the kernels from it on) the same results as
    the other path, on values with ties that need the tie order."""
    n = br.SMALL_CUTS + offset
    values = sort_values(n, 50, form, n)
    rng = np.random.default_rng(n)
    d = _changes(rng, n, np.int64)
    for where in ("at", "below", "low"):
        t = _threshold(values, where, rng)
        _same_cuts(_cuts(values, d, t), _cuts(values, d, t, small=n >= br.SMALL_CUTS))
