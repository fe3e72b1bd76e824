"""Pictures of a factorization (needs matplotlib: ``pip install banmf[plot]``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .booleanize import boolean_product
from .io import atomic_path
from .result import Factorization

__all__ = ["plot_result"]

#: The image formats written, by extension (matplotlib's own writers, no extra package).
IMAGE_FORMATS = ("png", "pdf", "svg")

#: Above this many entries the data/reconstruction/error view would not be readable.
SMALL_ENTRIES = 250_000


def _pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError(
            "plotting needs matplotlib: pip install matplotlib (or banmf[plot])"
        ) from None
    return plt


def factor_order(F: np.ndarray) -> np.ndarray:
    """Order of the rows of a Boolean factor F (r, k): grouped by their first factor, then the next."""
    keys = [~F[:, l] for l in reversed(range(F.shape[1]))]
    return np.lexsort(keys) if keys else np.arange(F.shape[0])


def plot_result(saved: Factorization, path, X=None) -> str:
    """Write a picture of a saved factorization; returns the kind of view ("matrices" or
    "summary"). The format follows the extension of ``path``: .png, .pdf or .svg.

    With X at hand and at most 250,000 entries: X, the reconstruction W⊗H and the errors side
    by side (missed ones in blue, covered zeros in red), rows and columns ordered by factor;
    this view densifies X, which is small by then. Otherwise: factor sizes and the objective
    curve.
    """
    fmt = Path(path).suffix.lower().lstrip(".")
    if fmt not in IMAGE_FORMATS:
        raise ValueError(
            f"{path}: an image must end in {', '.join('.' + f for f in IMAGE_FORMATS)}"
        )
    plt = _pyplot()
    W, H = saved.W, saved.H
    n, m = W.shape[0], H.shape[1]
    title = f"{saved.method}, k={W.shape[1]}, error {saved.error}"
    if X is not None and n * m <= SMALL_ENTRIES:
        rows, cols = factor_order(W), factor_order(H.T)
        D = X.toarray()[np.ix_(rows, cols)]
        R = boolean_product(W, H).toarray()[np.ix_(rows, cols)]
        E = np.zeros((n, m, 3))
        E[...] = 1.0
        E[D & ~R] = (0.15, 0.35, 0.9)  # missed ones
        E[~D & R] = (0.9, 0.2, 0.15)  # covered zeros
        fig, axes = plt.subplots(1, 3, figsize=(12, 4.5), sharey=True)
        for ax, img, name in zip(axes, (D, R, E), ("data X", "reconstruction W⊗H", "errors")):
            ax.imshow(
                img if img.ndim == 3 else ~img,
                cmap=None if img.ndim == 3 else "gray",
                aspect="auto",
                interpolation="nearest",
            )
            ax.set_title(name)
            ax.set_xlabel("columns (ordered by factor)")
        axes[0].set_ylabel("rows (ordered by factor)")
        kind = "matrices"
    else:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        idx = np.arange(W.shape[1])
        axes[0].bar(idx - 0.2, W.sum(axis=0), width=0.4, label="rows in factor (W)")
        axes[0].bar(idx + 0.2, H.sum(axis=1), width=0.4, label="columns in factor (H)")
        axes[0].set_yscale("symlog")
        axes[0].set_xlabel("factor")
        axes[0].legend()
        axes[0].set_title("factor sizes")
        if saved.loss_curve is not None and len(saved.loss_curve):
            axes[1].semilogy(
                np.arange(1, len(saved.loss_curve) + 1), np.maximum(saved.loss_curve, 1e-300)
            )
            axes[1].set_xlabel("iteration")
            axes[1].set_title("relaxed objective")
        else:
            axes[1].text(
                0.5, 0.5, "no objective curve\n(not an iterative method)", ha="center", va="center"
            )
            axes[1].set_axis_off()
        kind = "summary"
    fig.suptitle(title)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=fmt, dpi=100)
    plt.close(fig)
    return kind
