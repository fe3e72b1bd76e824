"""Bad input is rejected at the boundary with a message that names the problem."""

import numpy as np
import pytest
import scipy.sparse as sp

from banmf import BANMF, boolean_error, booleanize
from banmf.data.masks import transpose_mask
from banmf.data.validation import check_binary_matrix


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo", "lil", "dok", "bsr"])
def test_every_sparse_format_gives_the_same_mask(fmt):
    Xd = (np.random.default_rng(0).random((7, 5)) < 0.4).astype(float)
    X = check_binary_matrix(sp.csr_matrix(Xd).asformat(fmt))
    np.testing.assert_array_equal(X.toarray(), Xd.astype(bool))
    assert X.has_sorted_indices and X.indices.dtype == np.int32 and X.data.dtype == bool


def test_explicit_zeros_and_bool_input():
    X = sp.csr_matrix(
        (np.array([1.0, 0.0, 1.0]), np.array([0, 1, 2]), np.array([0, 2, 3])), shape=(2, 3)
    )
    assert check_binary_matrix(X).nnz == 2
    assert check_binary_matrix(np.eye(3, dtype=bool)).nnz == 3


def test_non_binary_values_are_counted_and_located():
    X = np.zeros((5, 8))
    X[4, 7] = 2.5
    X[1, 1] = -1
    with pytest.raises(ValueError, match=r"2 entries that are not 0 or 1 .*row 1, column 1.*X > 0"):
        check_binary_matrix(X)


def test_duplicate_coo_entries_sum_to_non_binary():
    X = sp.coo_matrix((np.array([1, 1]), (np.array([0, 0]), np.array([1, 1]))), shape=(2, 2))
    with pytest.raises(ValueError, match="not 0 or 1"):
        check_binary_matrix(X)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_nan_and_inf(bad):
    X = np.zeros((3, 3))
    X[2, 1] = bad
    with pytest.raises(ValueError, match="NaN or infinite.*row 2, column 1"):
        check_binary_matrix(X)
    with pytest.raises(ValueError, match="NaN or infinite"):
        check_binary_matrix(sp.csr_matrix(X))


@pytest.mark.parametrize("X", [np.zeros(4), np.zeros((2, 2, 2)), 3.0])
def test_not_2d(X):
    with pytest.raises(ValueError, match="2-D"):
        check_binary_matrix(X)


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (0, 0)])
def test_empty(shape):
    with pytest.raises(ValueError, match="empty"):
        check_binary_matrix(np.zeros(shape))
    with pytest.raises(ValueError, match="empty"):
        check_binary_matrix(sp.csr_matrix(shape))


@pytest.mark.parametrize(
    "X",
    [
        None,
        "data.mtx",
        np.array([["a", "b"]]),
        np.array([[1j, 0]]),
        np.array([[{}, 1]], dtype=object),
    ],
)
def test_wrong_types(X):
    with pytest.raises(TypeError):
        check_binary_matrix(X)


@pytest.mark.parametrize("k", [0, -2, 2.5, "3", None, True])
def test_bad_n_components(k):
    with pytest.raises((ValueError, TypeError), match="n_components"):
        BANMF(k, max_iter=1).fit(np.eye(3))


@pytest.mark.parametrize(
    "params, match",
    [
        ({"regularization": "cubic"}, "regularization"),
        ({"regularization": -1.0}, "regularization"),
        ({"max_iter": 0}, "max_iter"),
        ({"tol": -1}, "tol"),
        ({"init": "nndsvd-ish"}, "init"),
        ({"upper": "max"}, "upper"),
        ({"upper": 0.5}, "upper"),
        ({"normalize": "l2"}, "normalize"),
        ({"dtype": np.int32}, "dtype"),
        ({"n_thresholds": 0}, "n_thresholds"),
        ({"random_state": "seed"}, "random_state"),
        ({"eps": -1.0}, "eps"),
    ],
)
def test_bad_parameters(params, match):
    with pytest.raises((ValueError, TypeError), match=match):
        BANMF(2, max_iter=2, **params).fit(np.eye(3))


def test_unknown_parameter_in_set_params():
    with pytest.raises(ValueError, match="no parameter 'alpha'"):
        BANMF().set_params(alpha=1)


def test_custom_init_checks():
    X = np.eye(3)
    with pytest.raises(ValueError, match="needs both W and H"):
        BANMF(2, init="custom", max_iter=1).fit(X)
    with pytest.raises(ValueError, match="shape"):
        BANMF(2, init="custom", max_iter=1).fit(X, W=np.ones((3, 3)), H=np.ones((2, 3)))
    with pytest.raises(ValueError, match="only used with init='custom'"):
        BANMF(2, max_iter=1).fit(X, W=np.ones((3, 2)), H=np.ones((2, 3)))


def test_factor_checks():
    X = np.eye(3)
    with pytest.raises(ValueError, match="W has 2 columns but H has 1 rows"):
        boolean_error(X, np.ones((3, 2)), np.ones((1, 3)))
    with pytest.raises(ValueError, match="shape"):
        boolean_error(X, np.ones((2, 1)), np.ones((1, 3)))
    with pytest.raises(ValueError, match="not 0 or 1"):
        boolean_error(X, np.full((3, 1), 0.7), np.ones((1, 3)))
    with pytest.raises(ValueError, match="negative"):
        booleanize(X, -np.ones((3, 1)), np.ones((1, 3)))
    with pytest.raises(ValueError, match="NaN"):
        booleanize(X, np.full((3, 1), np.nan), np.ones((1, 3)))
    with pytest.raises(ValueError, match="shapes do not fit"):
        booleanize(X, np.ones((3, 1)), np.ones((2, 3)))


def test_transform_before_fit():
    with pytest.raises(ValueError, match="not fitted"):
        BANMF(2).transform(np.eye(3))


def test_canonical_mask_passes_through_and_noncanonical_is_fixed():
    X = check_binary_matrix(np.eye(4))
    assert check_binary_matrix(X) is X
    unsorted = sp.csr_array(
        (np.ones(3, bool), np.array([2, 0, 1]), np.array([0, 2, 3])), shape=(2, 3)
    )
    Y = check_binary_matrix(unsorted)
    assert Y is not unsorted and Y.has_sorted_indices
    np.testing.assert_array_equal(Y.toarray(), unsorted.toarray())


@pytest.mark.parametrize("shape", [(1, 1), (7, 5), (3, 40), (40, 3)])
def test_transpose_mask_is_the_canonical_mask_of_the_transpose(shape):
    for density in (0.0, 0.3, 1.0):
        Xd = np.random.default_rng(1).random(shape) < density
        if not Xd.any():
            Xd[0, 0] = True
        X = check_binary_matrix(Xd)
        T = transpose_mask(X)
        ref = check_binary_matrix(Xd.T)
        assert T.shape == ref.shape and T.has_canonical_format
        np.testing.assert_array_equal(T.indptr, ref.indptr)
        np.testing.assert_array_equal(T.indices, ref.indices)


# --- banmf's own Dataset and pandas NA are accepted as X ---------------------------------------


def test_a_dataset_is_accepted_with_its_unknown_cells():
    import scipy.sparse as sp

    from banmf import BANMF, factorize
    from banmf.datasets import load_zoo
    from banmf.io import Dataset

    zoo = load_zoo()
    r = factorize(zoo, 3, random_state=0, max_iter=20)
    assert r.error == factorize(zoo.X, 3, random_state=0, max_iter=20).error
    assert r.row_labels == zoo.row_labels and r.col_labels == zoo.col_labels
    missing = sp.csr_array(np.eye(101, 15, dtype=bool))
    ds = Dataset(zoo.X, missing=missing)
    assert Dataset.of(ds) is ds  # validated once: passed on as it is
    assert (ds.X != (zoo.X.astype(bool) > missing)).nnz == 0  # the ones under the mask left
    assert (ds.unknown.cells != missing).nnz == 0 and not ds.unknown.observed
    a = BANMF(3, random_state=0, max_iter=20).fit(ds)
    b = BANMF(3, random_state=0, max_iter=20).fit(zoo.X, missing=missing)
    np.testing.assert_array_equal(a.components_, b.components_)
    # more unknown cells on top of a Dataset's own: both are unknown
    more = Dataset.of(ds, missing=sp.csr_array(np.eye(101, 15, k=1, dtype=bool)))
    assert more.unknown.cells.nnz == 29 and ds.unknown.cells.nnz == 15


def test_a_dataframe_with_nullable_na_reads_na_as_unknown():
    pd = pytest.importorskip("pandas")
    from banmf.io import Dataset

    frame = pd.DataFrame(
        {
            "a": pd.array([1, None, 0], dtype="Int64"),
            "b": pd.array([True, False, None]),
            "c": [0, 1, 1],
        }
    )
    data = Dataset.of(frame)
    assert data.X.toarray().astype(int).tolist() == [[1, 1, 0], [0, 0, 1], [0, 0, 1]]
    assert data.unknown.cells.toarray().tolist() == [[0, 0, 0], [1, 0, 0], [0, 1, 0]]
    assert data.col_labels == ["a", "b", "c"] and data.row_labels == ["0", "1", "2"]
    both = Dataset.of(frame, missing=np.eye(3))
    assert sorted(zip(*both.unknown.cells.nonzero())) == [(0, 0), (1, 0), (1, 1), (2, 1), (2, 2)]
