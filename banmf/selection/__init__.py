"""Choosing the rank and predicting unknown cells: :mod:`~banmf.selection.ranks` (held-out
cells, folds, rank selection), :mod:`~banmf.selection.predictor` (the predictor of unknown
cells a fit chooses), :mod:`~banmf.selection.mdl` (the description length).

The public face is :mod:`banmf.model_selection`.
"""
