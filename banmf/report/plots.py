"""Pictures of a factorization (needs matplotlib: ``pip install banmf[plot]``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..engine.booleanize import boolean_product
from ..exceptions import InputError, MissingDependencyError
from ..io import atomic_path
from ..result import Factorization

__all__ = ["plot_rank_selection", "plot_result", "rank_selection_figure", "result_figure"]

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
        raise MissingDependencyError(
            "plotting needs matplotlib: pip install matplotlib (or banmf[plot])"
        ) from None
    return plt


def factor_order(F: np.ndarray) -> np.ndarray:
    """Order of the rows of a Boolean factor F (r, k): grouped by their first factor, then the next."""
    keys = [~F[:, l] for l in reversed(range(F.shape[1]))]
    return np.lexsort(keys) if keys else np.arange(F.shape[0])


#: Rows or columns up to this many get their names on the axes.
MAX_NAMED = 60
#: Columns shown in the patterns view (each pattern's best fitting first).
PATTERN_COLUMNS = 40


def _image_format(path) -> str:
    fmt = Path(path).suffix.lower().lstrip(".")
    if fmt not in IMAGE_FORMATS:
        raise InputError(
            f"{path}: an image must end in {', '.join('.' + f for f in IMAGE_FORMATS)}"
        )
    return fmt


def _save(fig, path, fmt: str, plt) -> None:
    if fig.get_layout_engine() is None:  # figures with legends outside the axes lay out themselves
        fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=fmt, dpi=100)
    plt.close(fig)


def plot_rank_selection(selection, path) -> None:
    """Write a picture of a :class:`banmf.RankSelection`: every criterion it has against k
    (training error, description length, held-out error with its standard error, the
    agreement of the fold fits with the stability threshold :data:`banmf.model_selection.STABLE`
    as a line), each criterion's choice marked, and the chosen k as a line across all. Format
    by the extension of ``path`` (.png, .pdf, .svg)."""
    fmt = _image_format(path)
    plt = _pyplot()
    with plt.rc_context({"svg.fonttype": "none"}):
        fig = rank_selection_figure(selection, plt)
        _save(fig, path, fmt, plt)


def rank_selection_figure(selection, plt=None):
    """The figure :func:`plot_rank_selection` writes, as a matplotlib ``Figure`` (not saved)."""
    plt = plt or _pyplot()
    from matplotlib.ticker import MaxNLocator

    from ..model_selection import STABLE

    panels = [("training error (observed cells)", selection.training_error, None, None)]
    if selection.description_length is not None:
        panels.append(("description length (bits)", selection.description_length, None, "mdl"))
    if selection.held_out_error is not None:
        panels.append(
            ("held-out error rate", selection.held_out_error, selection.held_out_se, "cv")
        )
    if selection.stability is not None:
        panels.append(("agreement of fold fits", selection.stability, None, "stability"))
    ks = list(selection.ks)
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.6), squeeze=False)
    for ax, (title, values, errors, criterion) in zip(axes[0], panels):
        y = [values[k] for k in ks]
        if errors is not None:
            ax.errorbar(ks, y, yerr=[errors[k] for k in ks], marker="o", capsize=3)
        else:
            ax.plot(ks, y, marker="o")
        ax.axvline(selection.best_k, color="tab:red", linestyle="--", label="chosen k")
        if criterion == "stability":
            # The largest k whose fold fits agree at least this well is stability's choice.
            ax.axhline(STABLE, color="tab:gray", linestyle=":", label=f"stable: ≥ {STABLE:g}")
        if criterion in selection.choices:
            choice = selection.choices[criterion]
            ax.plot(
                [choice],
                [values[choice]],
                "s",
                color="tab:orange",
                ms=10,
                mfc="none",
                label=f"{criterion}: k={choice}",
            )
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("k")
        ax.set_title(title)
        ax.legend(fontsize="small")
    fig.suptitle(f"k = {selection.best_k}: {selection.reason}", fontsize="small")
    return fig


def plot_result(saved: Factorization, path, X=None) -> str:
    """Write a picture of a saved factorization; returns the kind of view: "matrices",
    "patterns" or "summary". The format follows the extension of ``path``: .png, .pdf or .svg
    (in an SVG the names stay text, so they can be searched and selected).

    - "matrices", with X at hand and at most 250,000 entries: X, the reconstruction W⊗H and the
      errors side by side (a legend tells missed ones from covered zeros), rows and columns
      ordered by factor, each factor's tile outlined, and rows and columns named (by the
      data's labels, else their indices) when there are at most 60 of them. This view
      densifies X, which is small by then.
    - "patterns", with X at hand but larger: a factor × column heat map, the share of each
      factor's rows that have each column in X, over the columns of the patterns (up to 40,
      by name), factors named with their size (:func:`banmf.patterns`).
    - "summary", without X: factor sizes and the objective curve.
    """
    fmt = _image_format(path)
    plt = _pyplot()
    with plt.rc_context({"svg.fonttype": "none"}):
        fig, kind = result_figure(saved, X, plt)
        _save(fig, path, fmt, plt)
    return kind


def result_figure(saved: Factorization, X=None, plt=None):
    """The figure :func:`plot_result` writes and its kind, as ``(Figure, kind)`` (not saved)."""
    plt = plt or _pyplot()
    W, H = saved.W, saved.H
    n, m = W.shape[0], H.shape[1]
    if X is not None and n * m <= SMALL_ENTRIES:
        fig, kind = _matrices(plt, saved, X), "matrices"
    elif X is not None and W.shape[1] > 0:
        fig, kind = _patterns_view(plt, saved, X), "patterns"
    else:
        fig, kind = _summary(plt, saved), "summary"
    fig.suptitle(f"{saved.method}, k={W.shape[1]}, error {saved.error}")
    return fig, kind


def _labels(labels, idx) -> list:
    return [str(labels[i]) for i in idx] if labels is not None else [str(i) for i in idx]


def _matrices(plt, saved: Factorization, X):
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    W, H = saved.W, saved.H
    n, m = W.shape[0], H.shape[1]
    rows, cols = factor_order(W), factor_order(H.T)
    D = X.toarray()[np.ix_(rows, cols)]
    R = boolean_product(W, H).toarray()[np.ix_(rows, cols)]
    E = np.ones((n, m, 3))
    missed, covered = (0.15, 0.35, 0.9), (0.9, 0.2, 0.15)
    E[D & ~R] = missed
    E[~D & R] = covered
    k = W.shape[1]
    # The keys go below the axes (constrained layout makes room for them), never over cells.
    fig, axes = plt.subplots(
        1,
        3,
        figsize=(13, max(5.0, min(12.5, 0.16 * n + 2.5))),
        sharey=True,
        layout="constrained",
    )
    colours = plt.get_cmap("tab10")
    outlined = []
    for ax, img, name in zip(axes, (D, R, E), ("data X", "reconstruction W⊗H", "errors")):
        ax.imshow(
            img if img.ndim == 3 else ~img,
            cmap=None if img.ndim == 3 else "gray",
            aspect="auto",
            interpolation="nearest",
        )
        # Each factor's tile (its rows × its columns, in the display order), outlined.
        for l in range(k):
            tile = np.outer(W[rows, l], H[l, cols])
            if tile.any():
                ax.contour(tile, levels=[0.5], colors=[colours(l % 10)], linewidths=1.2)
                if ax is axes[0]:
                    outlined.append(l)
        ax.set_title(name)
        if m <= MAX_NAMED:
            ax.set_xticks(range(m), _labels(saved.col_labels, cols), rotation=90, fontsize=7)
        else:
            ax.set_xlabel("columns (ordered by factor)")
    if n <= MAX_NAMED:
        axes[0].set_yticks(range(n), _labels(saved.row_labels, rows), fontsize=7)
    else:
        axes[0].set_ylabel("rows (ordered by factor)")
    if outlined:
        fig.legend(
            handles=[
                Line2D([], [], color=colours(l % 10), linewidth=1.5, label=f"factor {l}")
                for l in outlined
            ],
            title="tile outlines (colours repeat after 10)" if k > 10 else "tile outlines",
            loc="outside lower left",
            ncols=min(len(outlined), 10),
            fontsize=8,
            title_fontsize=8,
        )
    fig.legend(
        handles=[
            Patch(color=missed, label="missed one (X = 1, W⊗H = 0)"),
            Patch(color=covered, label="covered zero (X = 0, W⊗H = 1)"),
        ],
        title="errors",
        loc="outside lower right",
        ncols=2,
        fontsize=8,
        title_fontsize=8,
    )
    return fig


def _patterns_view(plt, saved: Factorization, X):
    from .patterns import patterns

    found = [p for p in patterns(saved, X) if p.cells]
    if not found:
        return _summary(plt, saved)
    # The columns of the patterns, the most important patterns' first, each once.
    cols = list(dict.fromkeys(int(j) for p in found for j in p.cols))[:PATTERN_COLUMNS]
    X = X.tocsr() if hasattr(X, "tocsr") else X
    share = np.zeros((len(found), len(cols)))
    for r, p in enumerate(found):
        rows = np.flatnonzero(saved.W[:, p.factor])
        share[r] = np.asarray(X[rows][:, cols].sum(axis=0)).ravel() / len(rows)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.22 * len(cols) + 3), max(3.0, 0.3 * len(found) + 2)))
    image = ax.imshow(share, cmap="viridis", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    for r, p in enumerate(found):  # the pattern's own columns, marked
        own = [c for c, j in enumerate(cols) if saved.H[p.factor, j]]
        ax.scatter(own, [r] * len(own), marker="s", s=12, facecolors="none", edgecolors="white")
    ax.set_xticks(range(len(cols)), _labels(saved.col_labels, cols), rotation=90, fontsize=7)
    ax.set_yticks(
        range(len(found)),
        [f"factor {p.factor} ({p.n_rows} rows)" for p in found],
        fontsize=7,
    )
    ax.set_title("share of each factor's rows with the column (□: the factor's columns)")
    fig.colorbar(image, ax=ax, fraction=0.03)
    return fig


def _summary(plt, saved: Factorization):
    W, H = saved.W, saved.H
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
    return fig
