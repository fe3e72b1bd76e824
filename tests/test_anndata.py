"""AnnData in and out: factorize(adata) reads X or a layer with its names and unknown cells, and
writes W, Hᵀ and the fit's record where scanpy's tools write theirs; all of it survives .h5ad."""

import numpy as np
import pytest
import scipy.sparse as sp

from banmf import InputError, InvalidParameterError, factorize, make_boolean
from banmf.io import Dataset, read_dataset

anndata = pytest.importorskip("anndata")


def make_adata(seed=0):
    X, _, _ = make_boolean(30, 20, 3, density=0.3, random_state=seed)
    counts = X * np.random.default_rng(seed).integers(1, 5, size=X.shape)  # not 0/1
    adata = anndata.AnnData(X=sp.csr_matrix(counts.astype(np.float32)))
    adata.obs_names = [f"cell{i}" for i in range(30)]
    adata.var_names = [f"gene{j}" for j in range(20)]
    adata.layers["binary"] = sp.csr_matrix(X.astype(np.uint8))
    return adata, X


def test_result_goes_where_scanpy_users_look_and_survives_h5ad(tmp_path):
    adata, X = make_adata()
    res = factorize(adata, 3, random_state=0, layer="binary", max_iter=200)
    same = factorize(X, 3, random_state=0, max_iter=200)
    assert np.array_equal(res.W, same.W) and np.array_equal(res.H, same.H)
    assert res.row_labels[0] == "cell0" and res.col_labels[-1] == "gene19"
    assert np.array_equal(adata.obsm["X_banmf"], res.W)
    assert np.array_equal(adata.varm["banmf_H"], res.H.T)
    record = adata.uns["banmf"]
    assert record["k"] == 3 and record["error"] == res.error and record["method"] == "banmf"
    assert record["params"]["random_state"] == 0 and "regularization" not in record["params"]
    path = tmp_path / "cells.h5ad"
    adata.write_h5ad(path)
    back = anndata.read_h5ad(path)
    assert np.array_equal(back.obsm["X_banmf"], res.W)
    assert np.array_equal(back.varm["banmf_H"], res.H.T)
    assert back.uns["banmf"]["error"] == res.error
    assert back.uns["banmf"]["params"]["max_iter"] == 200
    assert list(back.uns["banmf"]["params"]["extra_starts"]) == ["nmf", "columns"]


def test_key_added_keeps_several_results_apart():
    adata, _ = make_adata(1)
    factorize(adata, 2, method="asso", layer="binary", key_added="asso")
    factorize(adata, 3, random_state=0, layer="binary", max_iter=50)
    assert adata.obsm["X_asso"].shape == (30, 2) and adata.obsm["X_banmf"].shape == (30, 3)
    assert adata.varm["asso_H"].shape == (20, 2) and adata.uns["asso"]["method"] == "asso"


def test_x_layers_and_unknown_cells():
    adata, X = make_adata(2)
    with pytest.raises(InputError, match="^X "):  # counts are not 0/1: say it, name the matrix
        factorize(adata, 2, method="asso")
    with pytest.raises(InputError, match="no layer 'counts'.*'binary'"):
        factorize(adata, 2, method="asso", layer="counts")
    missing = np.zeros(X.shape, dtype=np.uint8)
    missing[0, :5] = 1
    adata.layers["missing"] = sp.csr_matrix(missing)
    res = factorize(adata, 2, method="asso", layer="binary")
    assert res.missing is not None and res.missing.nnz == 5
    with pytest.raises(InvalidParameterError, match="AnnData"):
        factorize(X, 2, method="asso", key_added="x")
    with pytest.raises(InvalidParameterError, match="AnnData"):
        factorize(X, 2, method="asso", layer="binary")


def test_a_file_and_its_object_give_the_same_data(tmp_path):
    adata, X = make_adata(3)
    adata.X = adata.layers["binary"]
    path = tmp_path / "x.h5ad"
    adata.write_h5ad(path)
    ds = read_dataset(path)
    assert (ds.X != sp.csr_array(X)).nnz == 0 and ds.row_labels == list(adata.obs_names)
    a = factorize(ds, 2, method="asso")
    b = factorize(adata, 2, method="asso")
    assert np.array_equal(a.W, b.W) and a.col_labels == b.col_labels


def test_entries_banmf_did_not_write_are_kept_unless_overwrite():
    adata, _ = make_adata(4)
    pca = np.arange(30 * 5, dtype=np.float32).reshape(30, 5)
    adata.obsm["X_pca"] = pca
    adata.uns["pca"] = {"params": {"zero_center": True}}
    with pytest.raises(InvalidParameterError, match=r'obsm\["X_pca"\].*overwrite=True'):
        factorize(adata, 3, method="asso", layer="binary", key_added="pca")
    assert adata.obsm["X_pca"] is pca and "pca_H" not in adata.varm  # checked before the fit
    adata.varm["mine_H"] = np.zeros((20, 2))
    with pytest.raises(InvalidParameterError, match=r'varm\["mine_H"\]'):
        factorize(adata, 3, method="asso", layer="binary", key_added="mine")
    factorize(adata, 3, method="asso", layer="binary", key_added="pca", overwrite=True)
    assert adata.obsm["X_pca"].shape == (30, 3) and adata.uns["pca"]["written_by"] == "banmf"
    factorize(adata, 2, method="asso", layer="binary", key_added="pca")  # banmf's own: replaced
    assert adata.obsm["X_pca"].shape == (30, 2)
    for bad in (123, "", "a/b"):
        with pytest.raises(InvalidParameterError, match="key_added must be a non-empty string"):
            factorize(adata, 2, method="asso", layer="binary", key_added=bad)


def test_estimators_take_an_anndata_as_factorize_reads_it():
    from banmf import BANMF, boolean_error

    adata, X = make_adata(5)
    adata.X = adata.layers["binary"]
    est = BANMF(3, random_state=0, max_iter=50).fit(adata)
    same = BANMF(3, random_state=0, max_iter=50).fit(X)
    assert np.array_equal(est.W_, same.W_) and np.array_equal(est.components_, same.components_)
    assert "X_banmf" not in adata.obsm  # only factorize writes back
    assert boolean_error(adata, est.W_, est.components_) == est.reconstruction_err_
    with pytest.raises(InputError, match="is an AnnData: pass its matrix.*banmf.factorize"):
        Dataset(adata)  # the one door that builds from a matrix only


def test_values_other_than_0_or_1_say_how_to_binarize_the_anndata(tmp_path):
    adata, _ = make_adata(6)  # X holds counts
    with pytest.raises(InputError, match=r"binarize first, e\.g\. adata\.X = adata\.X > 0$"):
        factorize(adata, 2, method="asso")
    adata.layers["counts"] = adata.X
    with pytest.raises(InputError, match=r"e\.g\. adata\.layers\['counts'\] = adata\.layers"):
        factorize(adata, 2, method="asso", layer="counts")
    path = tmp_path / "nb.h5ad"
    adata.write_h5ad(path)
    with pytest.raises(InputError, match=r"nb\.h5ad: X has .*adata\.X > 0 in Python, then write"):
        read_dataset(path)
