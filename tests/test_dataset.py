"""The one data type: built and validated once, then trusted by every layer."""

import pickle

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given
from hypothesis import strategies as st

from banmf.io import Dataset


@st.composite
def masked(draw, max_n=8, max_m=8):
    """A dense 0/1 matrix, a dense mask of unknown cells, and the form to give it in."""
    n, m = draw(st.integers(1, max_n)), draw(st.integers(1, max_m))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    Xd = rng.random((n, m)) < draw(st.sampled_from([0.0, 0.3, 0.8]))
    unknown = rng.random((n, m)) < draw(st.sampled_from([0.0, 0.2, 0.7]))
    return Xd, unknown, draw(st.sampled_from(["missing", "observed"]))


def _given(Xd, unknown, form):
    if form == "missing":
        return Dataset(Xd, missing=unknown)
    return Dataset(Xd, observed=~unknown | Xd)  # the ones are observed with observed=


def _unknown_dense(data) -> np.ndarray:
    n, m = data.shape
    if data.unknown is None:
        return np.zeros((n, m), dtype=bool)
    cells = data.unknown.cells.toarray()
    return cells if not data.unknown.observed else ~(cells | data.X.toarray())


@given(masked())
def test_the_observed_ones_and_unknown_cells_agree_with_the_dense_oracle(problem):
    Xd, unknown, form = problem
    data = _given(Xd, unknown, form)
    hidden = unknown & ~Xd if form == "observed" else unknown
    assert data.X.toarray().tolist() == (Xd & ~hidden).tolist()
    assert _unknown_dense(data).tolist() == hidden.tolist()
    assert data.n_observed == Xd.size - hidden.sum()
    assert data.nnz == (Xd & ~hidden).sum() and data.ones_given == Xd.sum()
    assert (data.missing is None) == (form == "observed" or not hidden.any())
    if data.observed is not None:
        assert data.observed.toarray().tolist() == (~hidden).tolist()


@given(masked())
def test_of_passes_a_dataset_on_and_joins_more_cells_in_its_form(problem):
    Xd, unknown, form = problem
    data = _given(Xd, unknown, form)
    assert Dataset.of(data) is data
    more = np.eye(*Xd.shape, dtype=bool)
    hidden = unknown & ~Xd if form == "observed" else unknown
    for joined in (Dataset.of(data, missing=more), Dataset.of(data, observed=~more)):
        assert _unknown_dense(joined).tolist() == (hidden | more).tolist()
        assert joined.X.toarray().tolist() == (Xd & ~(hidden | more)).tolist()
    # The form stays (no unknown cells yet: the form of the cells given)
    form_kept = data.unknown is not None and data.unknown.observed
    assert Dataset.of(data, missing=more).unknown.observed == form_kept
    assert data.hide(sp.csr_array(more)).unknown.observed == form_kept


@given(masked(), st.data())
def test_row_blocks_and_the_transpose_are_views_of_the_same_data(problem, draw):
    Xd, unknown, form = problem
    data = _given(Xd, unknown, form)
    n = Xd.shape[0]
    cuts = sorted({0, n, *draw.draw(st.lists(st.integers(0, n), max_size=3))})
    blocks = [data.rows(a, b) for a, b in zip(cuts[:-1], cuts[1:])]
    assert sp.vstack([b.X for b in blocks]).toarray().tolist() == data.X.toarray().tolist()
    assert np.vstack([_unknown_dense(b) for b in blocks]).tolist() == _unknown_dense(data).tolist()
    assert sum(b.n_observed for b in blocks) == data.n_observed
    assert data.T.X.toarray().tolist() == data.X.toarray().T.tolist()
    assert _unknown_dense(data.T).tolist() == _unknown_dense(data).T.tolist()
    assert data.T.n_observed == data.n_observed


def test_it_is_validated_once_read_only_and_pickles():
    data = Dataset([[1, 0], [1, 1]], ["a", "b"], ["x", "y"], name="t", missing=[[0, 1], [0, 0]])
    with pytest.raises(AttributeError, match="read-only"):
        data.X = None
    back = pickle.loads(pickle.dumps(data))
    assert (back.X != data.X).nnz == 0 and (back.missing != data.missing).nnz == 0
    assert (back.row_labels, back.col_labels, back.name) == (["a", "b"], ["x", "y"], "t")
    assert data.replace(name="u").missing.nnz == 1
    assert data.replace(X=np.eye(2)).unknown is None
    assert "unknown=1" in repr(data) and repr(data).startswith("Dataset('t'")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"missing": np.eye(3), "observed": np.eye(3)}, "give missing or observed, not both"),
        ({"missing": np.ones((2, 3))}, r"missing has shape \(2, 3\) but X has shape \(3, 3\)"),
        ({"observed": np.diag([1, 2, 1])}, "observed has 1 entry that is not 0 or 1"),
        ({"row_labels": ["a"]}, "row_labels has 1 entries but the data has 3"),
    ],
)
def test_bad_arguments_are_refused_with_their_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Dataset(np.eye(3), **kwargs)


def test_a_fit_refuses_data_with_nothing_observed_and_warns_when_no_one_is_left():
    from banmf import BANMF

    with pytest.raises(ValueError, match="every cell of X is unknown"):
        BANMF(1).fit(np.eye(3), missing=np.ones((3, 3)))
    with pytest.warns(UserWarning, match="hide all 3 ones"):
        BANMF(1, max_iter=5).fit(Dataset(np.eye(3), missing=np.eye(3)))
