"""ASSO and GreConD: their kernels against dense numpy oracles (written here from the
definitions in ALGORITHMS.md §4.1 and §5.1), the fits against the dense reference algorithms
(tests/reference.py) on inputs that take every path of the kernels, progress, Ctrl-C and the
work budget."""

import logging
import threading

import numpy as np
import pytest
import reference as ref
from conftest import binary_matrices, examples, run_both
from hypothesis import given, settings
from hypothesis import strategies as st

from banmf import ASSO, GreConD, boolean_error, make_boolean
from banmf._kernels.cover import (
    Concept,
    Cover,
    Packed,
    RowGroups,
    Sums,
    Weights,
    asso_scores,
    asso_scores_rowwise,
    asso_threshold,
    asso_usage,
    cover_concept,
    grecond_values,
    intent_of,
)
from banmf._kernels.sparse import Sparse
from banmf.data.masks import transpose_mask
from banmf.data.validation import check_binary_matrix
from banmf.io import Dataset
from banmf.models import asso as asso_module
from banmf.models import grecond as grecond_module
from banmf.models.asso import TAU_GRID, _Association, _Greedy, _Patterns
from banmf.runtime.threads import cancel_with

NO_BITS = np.zeros((0, 0), dtype=np.uint64)


pytestmark = pytest.mark.usefixtures("wrapping_integers")


def csr_order(X, M):
    """The entries of the dense M at the ones of X, in X's CSR order."""
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    return np.ascontiguousarray(M[rows, X.indices])


# ---------------------------------------------------------------------------------- oracles


def grecond_values_ref(Xd, extent, intent, U):
    """GreConD's value of each column j not in the intent: the uncovered ones (U) in C' × C'↑,
    C' = extent ∩ rows(j); -1 for intent columns, 0 when C' is empty."""
    out = np.zeros(Xd.shape[1], dtype=np.int64)
    for j in range(Xd.shape[1]):
        ext = extent & Xd[:, j]
        if intent[j]:
            out[j] = -1
        elif ext.any():
            out[j] = U[np.ix_(ext, Xd[ext].all(axis=0))].sum()
    return out


def asso_gains_ref(Xd, C, cand, w_pos, w_neg):
    """(a, b, gains) per row for the basis vector ``cand`` over the cover C."""
    free = cand[None, :] & ~C
    a = (free & Xd).sum(axis=1)
    b = (free & ~Xd).sum(axis=1)
    return a, b, w_pos * a - w_neg * b > 0


# ------------------------------------------------------------------------- GreConD kernels


def _grecond_inputs(Xd, seed, bits):
    rng = np.random.default_rng(seed)
    Xd = Xd.astype(bool)
    n, m = Xd.shape
    X = check_binary_matrix(Xd)
    Xt = transpose_mask(X)
    U = Xd & (rng.random((n, m)) < rng.choice([0.3, 1.0]))  # the ones still uncovered
    extent = rng.random(n) < rng.choice([0.5, 1.0])
    if bits:
        packed = (ref.pack_bits(Xd.T), ref.pack_bits(U.T), ref.pack_bits(extent[None, :])[0])
    else:
        packed = (NO_BITS, NO_BITS, np.zeros(0, dtype=np.uint64))
    return X, Xt, U, extent, packed


@examples(20)
@given(
    binary_matrices(max_n=150, max_m=10),
    st.integers(0, 2**32 - 1),
    st.booleans(),
    st.integers(1, 5),
)
def test_grecond_values(Xd, seed, bits, n_blocks):
    X, Xt, U, extent, (colbits, ubits, extent_bits) = _grecond_inputs(Xd, seed, bits)
    intent = np.random.default_rng(seed + 1).random(X.shape[1]) < 0.3
    values = np.empty(X.shape[1], dtype=np.int64)
    run_both(
        grecond_values,
        Sparse(X.indptr, X.indices),
        Sparse(Xt.indptr, Xt.indices),
        csr_order(X, U),
        Concept(extent, intent, extent_bits),
        Packed(colbits, ubits),
        n_blocks,
        values,
    )
    np.testing.assert_array_equal(values, grecond_values_ref(Xd.astype(bool), extent, intent, U))


@given(binary_matrices(max_n=150, max_m=10), st.integers(0, 2**32 - 1), st.booleans())
def test_intent_of(Xd, seed, bits):
    X, _, _, extent, (colbits, _, extent_bits) = _grecond_inputs(Xd, seed, bits)
    rows = np.flatnonzero(extent).astype(X.indices.dtype)
    out = np.zeros(X.shape[1], dtype=bool)
    intent_of(X.indptr, X.indices, rows, extent_bits, colbits, out)
    expected = Xd.astype(bool)[rows].all(axis=0) if len(rows) else np.ones(X.shape[1], dtype=bool)
    np.testing.assert_array_equal(out, expected)


@given(binary_matrices(max_n=150, max_m=10), st.integers(0, 2**32 - 1), st.booleans())
def test_cover_concept(Xd, seed, bits):
    X, _, U, extent, (_, ubits, _) = _grecond_inputs(Xd, seed, bits)
    intent = np.random.default_rng(seed + 1).random(X.shape[1]) < 0.5
    rows = np.flatnonzero(extent).astype(X.indices.dtype)
    uncov = csr_order(X, U)
    newly = cover_concept(X.indptr, X.indices, rows, intent, uncov, ubits)
    after = U & ~(extent[:, None] & intent[None, :])
    assert newly == U.sum() - after.sum()
    np.testing.assert_array_equal(uncov, csr_order(X, after))
    if bits:
        np.testing.assert_array_equal(ubits, ref.pack_bits(after.T))


# ---------------------------------------------------------------------------- ASSO kernels


@given(st.integers(0, 60), st.floats(0.05, 20), st.floats(0.05, 20))
def test_asso_threshold(s, w_pos, w_neg):
    expected = max(t for t in range(s + 1) if not w_pos * t - w_neg * (s - t) > 0)
    assert asso_threshold(s, w_pos, w_neg) == expected


def _asso_state(Xd, k, seed, heavy, tau):
    """Kernel inputs for the candidates of ``tau`` over a random cover of ``k`` factors, built
    the way the fit builds them; returns them with the dense cover C."""
    rng = np.random.default_rng(seed)
    Xd = Xd.astype(bool)
    n, m = Xd.shape
    X = check_binary_matrix(Xd)
    assoc = _Association(X, heavy)
    greedy = _Greedy(X, max(1, k), 1.0, 1.0, assoc)
    Wf = rng.random((n, k)) < 0.4
    Hf = rng.random((k, m)) < 0.4
    C = ref.boolean_product(Wf, Hf) if k else np.zeros((n, m), dtype=bool)
    words = max(1, -(-k // 64))
    used = np.zeros((n, words), dtype=np.uint64)
    fac_mask = np.zeros((m, words), dtype=np.uint64)
    patterns = _Patterns(n, words, greedy.xtop)
    fac_rows = []
    for l in range(k):
        bit = np.uint64(1) << np.uint64(l % 64)
        rows = np.flatnonzero(Wf[:, l])
        used[rows, l // 64] |= bit
        fac_mask[Hf[l], l // 64] |= bit
        hb = assoc.heavy_bit[np.flatnonzero(Hf[l])]
        patterns.add(
            rows,
            l // 64,
            bit,
            np.bitwise_or.reduce(
                np.uint64(1) << hb[hb >= 0].astype(np.uint64), initial=np.uint64(0)
            ),
        )
        fac_rows.append(rows)
    cands = assoc.candidates(tau)
    uncov = csr_order(X, Xd & ~C)
    return X, C, assoc, greedy, cands, used, fac_mask, patterns, uncov


def _candidate_masks(cands, m):
    ptr, cols = cands[0], cands[1]
    masks = np.zeros((len(ptr) - 1, m), dtype=bool)
    for c in range(len(ptr) - 1):
        masks[c, cols[ptr[c] : ptr[c + 1]]] = True
    return masks


weights = st.sampled_from([(1.0, 1.0), (1.0, 0.5), (1.0, 3.0), (0.7, 1.3)])


@given(
    binary_matrices(max_n=40, max_m=14),
    st.integers(0, 3),
    st.integers(0, 2**32 - 1),
    st.sampled_from([0, 1, 3, 32]),
    st.sampled_from([0.1, 0.4, 0.8, 1.0]),
    weights,
    st.integers(1, 4),
)
def test_asso_scores(Xd, k, seed, heavy, tau, w, n_blocks):
    X, C, assoc, greedy, cands, used, fac_mask, patterns, uncov = _asso_state(
        Xd, k, seed, heavy, tau
    )
    n_cand = len(cands.ptr) - 1
    todo = np.random.default_rng(seed).random(n_cand) < 0.8
    A = np.full(n_cand, -7, dtype=np.int64)
    B = np.full(n_cand, -7, dtype=np.int64)
    groups = RowGroups(
        assoc.coldeg,
        greedy.xtop,
        greedy.all_x,
        greedy.all_count,
        patterns.pat,
        patterns.used,
        patterns.ctop,
        patterns.g_ptr,
        patterns.g_x,
        patterns.g_count,
    )
    run_both(
        asso_scores,
        cands,
        todo,
        Sparse(X.indptr, X.indices),
        Sparse(assoc.colptr, assoc.colrows),
        Cover(uncov, used, fac_mask),
        groups,
        Weights(*w),
        min(n_blocks, max(1, n_cand)),
        Sums(A, B),
    )
    Xb = Xd.astype(bool)
    for c, cand in enumerate(_candidate_masks(cands, X.shape[1])):
        if not todo[c]:
            assert A[c] == B[c] == -7  # left as they were
            continue
        a, b, gains = asso_gains_ref(Xb, C, cand, *w)
        assert (A[c], B[c]) == (a[gains].sum(), b[gains].sum())


@given(binary_matrices(max_n=40, max_m=14), st.integers(0, 3), st.integers(0, 2**32 - 1), weights)
def test_asso_usage(Xd, k, seed, w):
    X, C, assoc, _, cands, used, fac_mask, _, uncov = _asso_state(Xd, k, seed, 0, 0.3)
    for c, cand in enumerate(_candidate_masks(cands, X.shape[1])):
        usage = np.zeros(X.shape[0], dtype=bool)
        got = asso_usage(
            cands.cols[cands.ptr[c] : cands.ptr[c + 1]],
            Sparse(X.indptr, X.indices),
            Sparse(assoc.colptr, assoc.colrows),
            Cover(uncov, used, fac_mask),
            np.zeros(0, dtype=bool),
            Weights(*w),
            usage,
        )
        a, b, gains = asso_gains_ref(Xd.astype(bool), C, cand, *w)
        np.testing.assert_array_equal(usage, gains)
        assert got == (a[gains].sum(), b[gains].sum())


@examples(20)
@given(
    binary_matrices(max_n=30, max_m=12),
    st.integers(0, 3),
    st.integers(0, 2**32 - 1),
    st.sampled_from([0.1, 0.5, 1.0]),
    weights,
    st.integers(1, 4),
)
def test_asso_scores_rowwise_with_dont_care_cells(Xd, k, seed, tau, w, n_blocks):
    """The scores with unknown cells in the relation: neither ones to gain nor zeros to pay."""
    X, C, assoc, _, cands, used, fac_mask, _, _ = _asso_state(Xd, k, seed, 0, tau)
    Xb = Xd.astype(bool)
    D = Xb & (np.random.default_rng(seed).random(Xb.shape) < 0.3)  # the "don't care" ones
    uncov = csr_order(X, Xb & ~C & ~D)
    dont_care = csr_order(X, D)
    ptr, cols = cands.ptr, cands.cols
    n_cand = len(ptr) - 1
    todo = np.random.default_rng(seed).random(n_cand) < 0.8
    A = np.full(n_cand, -7, dtype=np.int64)
    B = np.full(n_cand, -7, dtype=np.int64)
    data = (
        Sparse(X.indptr, X.indices),
        Sparse(assoc.colptr, assoc.colrows),
        Cover(uncov, used, fac_mask),
        dont_care,
        Weights(*w),
    )
    run_both(asso_scores_rowwise, cands, todo, *data, min(n_blocks, max(1, n_cand)), Sums(A, B))
    for c, cand in enumerate(_candidate_masks(cands, X.shape[1])):
        if not todo[c]:
            assert A[c] == B[c] == -7
            continue
        free = cand[None, :] & ~C
        a, b = (free & Xb & ~D).sum(axis=1), (free & ~Xb).sum(axis=1)
        gains = w[0] * a - w[1] * b > 0
        assert (A[c], B[c]) == (a[gains].sum(), b[gains].sum())
        usage = np.zeros(X.shape[0], dtype=bool)
        got = asso_usage(cols[ptr[c] : ptr[c + 1]], *data, usage)
        np.testing.assert_array_equal(usage, gains)
        assert got == (A[c], B[c])


# --------------------------------------------------------------------------------- the fits


@pytest.mark.filterwarnings("ignore:n_components=.*exceeds")
@settings(max_examples=60)
@given(
    binary_matrices(max_n=30, max_m=14),
    st.integers(1, 4),
    st.sampled_from([0.2, 0.5, 0.8, 1.0]),
    st.sampled_from([0, 1, 3, 32]),
    weights,
)
def test_asso_matches_the_dense_reference_with_any_number_of_heavy_columns(Xd, k, tau, heavy, w):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(asso_module, "HEAVY", heavy)
        est = ASSO(k, tau=tau, w_pos=w[0], w_neg=w[1]).fit(Xd)
    W, H = ref.asso(Xd, min(k, *Xd.shape), tau, *w)  # k past min(n, m) is capped
    np.testing.assert_array_equal(est.W_, W)
    np.testing.assert_array_equal(est.components_, H)
    assert est.reconstruction_err_ == ref.boolean_error(Xd, W, H)
    assert not est.interrupted_


@pytest.mark.parametrize("heavy", [0, 2, 32])
@pytest.mark.parametrize("seed", range(4))
def test_asso_sweep_equals_one_fit_per_tau(heavy, seed, monkeypatch):
    """The sweep reuses the scores of the last τ where it chose the same factors: each τ's
    error is still that of a fit at that τ alone, and the best τ's factors are its own."""
    monkeypatch.setattr(asso_module, "HEAVY", heavy)
    X, _, _ = make_boolean(70, 30, 4, 0.3, noise=0.05, random_state=seed)
    est = ASSO(5).fit(X)
    assert list(est.tau_errors_) == list(TAU_GRID)
    Xd = X.toarray().astype(bool)
    for tau in TAU_GRID:
        W, H = ref.asso(Xd, 5, tau)
        assert est.tau_errors_[tau] == ref.boolean_error(Xd, W, H)
    W, H = ref.asso(Xd, 5, est.tau_)
    np.testing.assert_array_equal(est.W_, W)
    np.testing.assert_array_equal(est.components_, H)


@pytest.mark.filterwarnings("ignore:n_components=.*exceeds")
@settings(max_examples=60)
@given(
    st.integers(1, 200),
    st.integers(1, 12),
    st.floats(0.02, 0.9),
    st.sampled_from([None, 1, 2, 5]),
    st.integers(0, 2**31),
)
def test_grecond_matches_the_dense_reference_on_sparse_and_dense_data(n, m, density, k, seed):
    """Sparse data takes the counting path, dense data (m·⌈n/64⌉ ≤ nnz) the packed columns."""
    Xd = np.random.default_rng(seed).random((n, m)) < density
    est = GreConD(k).fit(Xd)
    W, H = ref.grecond(Xd, k and min(k, n, m))  # k past min(n, m) is capped
    np.testing.assert_array_equal(est.W_, W)
    np.testing.assert_array_equal(est.components_, H)
    assert est.reconstruction_err_ == ref.boolean_error(Xd, W, H) and not est.interrupted_


# ------------------------------------------------------------------------------ progress


@pytest.fixture
def progress_records():
    logger = logging.getLogger("banmf.progress")
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.banmf)

    handler = Keep(level=logging.DEBUG)
    saved = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)
    logger.setLevel(saved)


@pytest.mark.parametrize(
    "make, max_iter",
    [(lambda: ASSO(3, tau=0.5), 3), (lambda: ASSO(3), 3 * len(TAU_GRID)), (lambda: GreConD(3), 3)],
)
def test_progress_per_factor(make, max_iter, progress_records):
    X, _, _ = make_boolean(60, 30, 3, 0.3, random_state=0)
    est = make().fit(X)
    steps = [r for r in progress_records if r["event"] == "iteration"]
    assert steps and all(r["max_iter"] == max_iter and r["n_starts"] == 1 for r in steps)
    assert [r["iteration"] for r in steps] == sorted(r["iteration"] for r in steps)
    assert steps[-1]["iteration"] == max_iter  # the last is always reported
    assert all(r["objective"] >= est.reconstruction_err_ for r in steps)
    assert progress_records[-1] == {
        "event": "done",
        "start": 1,
        "n_starts": 1,
        "error": est.reconstruction_err_,
    }


def test_grecond_reports_the_uncovered_ones(progress_records):
    X, _, _ = make_boolean(60, 30, 3, 0.3, random_state=0)
    est = GreConD(3).fit(X)
    assert [r for r in progress_records if r["event"] == "iteration"][-1][
        "objective"
    ] == est.reconstruction_err_


def test_an_unknown_total_and_the_setup_are_reported(progress_records):
    X, _, _ = make_boolean(60, 30, 3, 0.3, random_state=0)
    GreConD(None).fit(X)  # factors until X is covered: how many is not known in advance
    steps = [r for r in progress_records if r["event"] == "iteration"]
    assert steps and all(r["max_iter"] is None for r in steps)
    progress_records.clear()
    ASSO(3, tau=0.5).fit(X)
    assert progress_records[0]["event"] == "setup"
    assert "association" in progress_records[0]["setup"]


# ------------------------------------------------------------------------------- Ctrl-C


def interrupt_call(monkeypatch, module, name, when):
    """Make ``module.<name>`` raise KeyboardInterrupt from its call number ``when`` on."""
    real = getattr(module, name)
    calls = []

    def wrapped(*args, **kwargs):
        calls.append(1)
        if len(calls) >= when:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapped)
    return calls


@pytest.fixture
def planted():
    return make_boolean(60, 30, 4, 0.3, noise=0.02, random_state=0)[0]


def assert_usable(model, X, k, used):
    assert model.interrupted_ and model.n_iter_ == used
    assert model.W_.shape == (X.shape[0], k) and model.components_.shape == (k, X.shape[1])
    assert model.n_components_ == model.W_.shape[1]
    assert model.reconstruction_err_ == boolean_error(X, model.W_, model.components_)
    assert not model.W_[:, used:].any() and not model.components_[used:].any()


@pytest.mark.parametrize("tau", [0.5, None])
def test_ctrl_c_in_asso_keeps_the_factors_so_far(tau, planted, monkeypatch):
    whole = ASSO(4, tau=0.5).fit(planted)
    interrupt_call(monkeypatch, asso_module, "cover_concept", 2)  # while adding the second factor
    model = ASSO(4, tau=tau)
    with pytest.raises(KeyboardInterrupt):
        model.fit(planted)
    assert_usable(model, planted, 4, 1)
    np.testing.assert_array_equal(
        model.components_[0], whole.components_[0] if tau else model.components_[0]
    )
    assert model.reconstruction_err_ == model.tau_errors_[model.tau_]


def test_ctrl_c_in_a_later_tau_keeps_the_best_so_far(planted, monkeypatch):
    first = ASSO(4, tau=TAU_GRID[0]).fit(planted)
    interrupt_call(monkeypatch, asso_module, "cover_concept", first.n_iter_ + 2)  # in the second τ
    model = ASSO(4)
    with pytest.raises(KeyboardInterrupt):
        model.fit(planted)
    assert model.interrupted_ and list(model.tau_errors_) == list(TAU_GRID[:2])
    assert model.tau_errors_[TAU_GRID[0]] == first.reconstruction_err_
    assert model.reconstruction_err_ == min(model.tau_errors_.values())
    assert model.reconstruction_err_ == boolean_error(planted, model.W_, model.components_)


@pytest.mark.parametrize("k", [4, None])
def test_ctrl_c_in_grecond_keeps_the_factors_so_far(k, planted, monkeypatch):
    whole = GreConD(4).fit(planted)
    interrupt_call(monkeypatch, grecond_module, "cover_concept", 2)
    model = GreConD(k)
    with pytest.raises(KeyboardInterrupt):
        model.fit(planted)
    assert_usable(model, planted, k or 1, 1)
    np.testing.assert_array_equal(model.components_[0], whole.components_[0])


@pytest.mark.parametrize(
    "make, module", [(lambda: ASSO(4, tau=0.5), asso_module), (lambda: GreConD(4), grecond_module)]
)
def test_a_second_ctrl_c_while_finishing_aborts(make, module, planted, monkeypatch):
    interrupt_call(monkeypatch, module, "cover_concept", 2)
    interrupt_call(monkeypatch, Dataset, "error", 1)  # the error of the factors found
    model = make()
    with pytest.raises(KeyboardInterrupt):
        model.fit(planted)
    assert not hasattr(model, "components_")


def test_ctrl_c_skips_the_polish(planted, monkeypatch):
    interrupt_call(monkeypatch, grecond_module, "cover_concept", 3)
    model = GreConD(4, polish=True)
    with pytest.raises(KeyboardInterrupt):
        model.fit(planted)
    assert_usable(model, planted, 4, 2)
    assert model.polish_rounds_ == 0 and model.unpolished_err_ == model.reconstruction_err_


@pytest.mark.parametrize("make", [lambda: ASSO(4, tau=0.5), lambda: ASSO(4), lambda: GreConD(4)])
def test_a_cancelled_fit_stops_at_once_without_an_exception(make, planted):
    """What :func:`banmf.fit_many` does to the fits under way on Ctrl-C."""
    stop = threading.Event()
    stop.set()
    with cancel_with(stop):
        model = make().fit(planted)
    assert_usable(model, planted, 4, 0)
    assert model.reconstruction_err_ == planted.nnz


# -------------------------------------------------------------------------- work budget


def estimate(model, X):
    """The operations a refused fit was estimated at."""
    with pytest.raises(ValueError, match="work_budget") as info:
        model.fit(X)
    return float(str(info.value).split("estimated at ")[1].split(" operations")[0])


def test_work_over_budget_is_refused_up_front_in_one_line(planted, monkeypatch):
    gram = estimate(ASSO(3, work_budget=1.0), planted)  # the association matrix alone
    began = []  # the greedy loops that began
    run, greedy = _Greedy.run, GreConD._greedy
    monkeypatch.setattr(_Greedy, "run", lambda *args: began.append(1) or run(*args))
    monkeypatch.setattr(
        GreConD, "_greedy", staticmethod(lambda *args: began.append(1) or greedy(*args))
    )
    for model, words in [
        (ASSO(3, work_budget=1e3), ["ASSO", "XᵀX", "KB", "work_budget"]),
        (ASSO(3, work_budget=gram * 1.01), ["ASSO", "one tau", "n_components=3", "work_budget"]),
        (ASSO(3, tau=0.5, work_budget=gram * 1.01), ["ASSO", "higher tau", "work_budget"]),
        (GreConD(None, work_budget=1e3), ["GreConD", "set n_components", "KB", "work_budget"]),
        (GreConD(3, work_budget=1e3), ["GreConD", "smaller n_components", "work_budget"]),
    ]:
        with pytest.raises(ValueError, match="work_budget") as info:
            model.fit(planted)
        message = str(info.value)
        assert "\n" not in message and "operations" in message
        assert all(word in message for word in words), message
    assert not began
    ASSO(3, work_budget=None).fit(planted)
    GreConD(None, work_budget=None).fit(planted)
    assert len(began) == 1 + len(TAU_GRID)


def test_the_estimates_grow_with_the_work():
    X = make_boolean(200, 60, 4, 0.3, random_state=0)[0]
    assert (
        estimate(GreConD(2, work_budget=1.0), X)
        < estimate(GreConD(4, work_budget=1.0), X)
        < estimate(GreConD(None, work_budget=1.0), X)
    )
    gram = estimate(ASSO(4, work_budget=1.0), X)  # the association matrix alone
    sweep = estimate(ASSO(4, work_budget=gram * 1.01), X)
    assert gram < estimate(ASSO(2, work_budget=gram * 1.01), X) < sweep
    assert gram < estimate(ASSO(4, tau=0.5, work_budget=gram * 1.01), X) < sweep


# ----------------------------------------------------- GreConD on full rows, columns, blocks


@st.composite
def boolean_rank_matrices(draw):
    """W ∘ H of a random Boolean rank r, where a factor may span all rows, all columns or both
    (an all-ones X), and a column or row of X may be all ones."""
    n, m, r = draw(st.integers(1, 40)), draw(st.integers(1, 12)), draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    density = draw(st.sampled_from([0.1, 0.4, 0.8]))
    W, H = rng.random((n, r)) < density, rng.random((r, m)) < density
    for l in range(r):
        kind = draw(st.sampled_from(["random", "all rows", "all columns", "everything"]))
        W[:, l] |= kind in ("all rows", "everything")
        H[l] |= kind in ("all columns", "everything")
    X = ref.boolean_product(W, H)
    if draw(st.booleans()):
        X[:, rng.integers(m)] = True
    if draw(st.booleans()):
        X[rng.integers(n)] = True
    return X


@pytest.mark.filterwarnings("ignore:n_components=.*exceeds")
@examples(30)
@given(boolean_rank_matrices(), st.sampled_from([None, 1, 2, 4]))
def test_grecond_finds_concepts_of_full_columns_and_is_exact_when_unlimited(X, k):
    """The concept of all rows (whose intent holds the full columns) is a candidate: without it
    an all-ones X, or one with a full column, was left uncovered."""
    est = GreConD(k).fit(X)
    W, H = ref.grecond(X, k and min(k, *X.shape))  # k past min(n, m) is capped
    np.testing.assert_array_equal(est.W_, W)
    np.testing.assert_array_equal(est.components_, H)
    if k is None:
        assert est.reconstruction_err_ == 0
    # each factor covers new ones, and the first covers at least as many as any full column
    assert est.reconstruction_err_ <= X.sum() - (X.all(axis=0).sum() * len(X) if k else 0)


def test_grecond_covers_an_all_ones_matrix_and_full_columns():
    ones = np.ones((50, 40), dtype=bool)
    assert GreConD(2).fit(ones).reconstruction_err_ == 0
    assert GreConD(1).fit(ones).components_.all()
    column = np.zeros((10, 10), dtype=bool)
    column[:, 3] = True
    assert GreConD(2).fit(column).reconstruction_err_ == 0
    one_zero = ones.copy()
    one_zero[3, 5] = False
    assert GreConD(2).fit(one_zero).reconstruction_err_ == 0
