"""The data and its validation: :class:`~banmf.data.dataset.Dataset`, the one data type
(observed ones as a CSR support mask, unknown cells, labels, row blocks);
:mod:`~banmf.data.masks` (support masks, packed bits, unknown cells, Boolean error counts);
:mod:`~banmf.data.validation` (matrices, factors, cells and random states checked once, at the
boundary); :mod:`~banmf.data.params` (the estimators' declared parameter constraints).

The public face is :class:`banmf.io.Dataset`; the modules here are what the other layers
share.
"""
