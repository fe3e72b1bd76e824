"""The pictures explain themselves: a key for every colour, and no key over the data."""

import numpy as np
import pytest

from banmf import Factorization, make_boolean

pytest.importorskip("matplotlib")

from banmf.model_selection import STABLE, RankSelection
from banmf.report import plots as plotting


@pytest.fixture
def plt():
    plt = plotting._pyplot()
    yield plt
    plt.close("all")


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


@pytest.mark.parametrize("k", [3, 12])
def test_matrices_view_keys_the_outline_colours_and_keeps_its_keys_off_the_cells(plt, k):
    X, W, H = make_boolean(40, 30, k, 0.3, noise=0.05, random_state=2)
    res = Factorization.from_factors(X, W, H)
    fig, kind = plotting.result_figure(res, res.X, plt)
    assert kind == "matrices"
    fig.canvas.draw()
    legends = {legend.get_title().get_text(): legend for legend in fig.legends}
    outlines = next(legend for title, legend in legends.items() if title.startswith("tile"))
    # One entry per factor with a tile, in the colour of its outline.
    drawn = [l for l in range(k) if W[:, l].any() and H[l].any()]
    assert [t.get_text() for t in outlines.get_texts()] == [f"factor {l}" for l in drawn]
    cmap = plt.get_cmap("tab10")
    for l, handle in zip(drawn, outlines.legend_handles):
        assert np.allclose(handle.get_color(), cmap(l % 10))
    assert ("repeat" in outlines.get_title().get_text()) == (k > 10)
    errors = legends["errors"]
    assert [t.get_text() for t in errors.get_texts()] == [
        "missed one (X = 1, W⊗H = 0)",
        "covered zero (X = 0, W⊗H = 1)",
    ]
    # No legend inside an axes, and no figure legend over one.
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        assert ax.get_legend() is None
        for legend in fig.legends:
            box = legend.get_window_extent(renderer)
            assert not _overlaps(box, ax.get_window_extent(renderer)), legend.get_title()


def test_saving_the_matrices_view_keeps_its_layout(tmp_path):
    X, W, H = make_boolean(20, 10, 2, 0.3, random_state=0)
    res = Factorization.from_factors(X, W, H)
    assert plotting.plot_result(res, tmp_path / "m.svg", X=res.X) == "matrices"
    text = (tmp_path / "m.svg").read_text()
    assert "tile outlines" in text and "factor 1" in text and "covered zero" in text


def _selection(stability):
    ks = sorted(stability)
    curve = {k: 10.0 / k for k in ks}
    return RankSelection(
        ks=ks,
        training_error=curve,
        description_length=curve,
        held_out_error=curve,
        held_out_se={k: 0.01 for k in ks},
        stability=stability,
        choices={"mdl": ks[-1], "cv": ks[-1], "stability": 2},
        best_k=ks[-1],
        reason="test",
        fits={},
    )


def test_the_select_k_figure_draws_the_stability_threshold(plt, tmp_path):
    fig = plotting.rank_selection_figure(_selection({1: 0.9, 2: 0.85, 3: 0.4}), plt)
    (panel,) = [ax for ax in fig.axes if ax.get_title() == "agreement of fold fits"]
    lines = [line for line in panel.get_lines() if line.get_label().startswith("stable")]
    assert len(lines) == 1
    assert np.allclose(lines[0].get_ydata(), STABLE)
    assert f"{STABLE:g}" in lines[0].get_label()
    assert lines[0].get_label() in [t.get_text() for t in panel.get_legend().get_texts()]
    # Only the agreement panel has it.
    others = [ax for ax in fig.axes if ax is not panel]
    assert not any(
        line.get_label().startswith("stable") for ax in others for line in ax.get_lines()
    )
    plotting.plot_rank_selection(_selection({1: 0.9, 2: 0.85, 3: 0.4}), tmp_path / "k.svg")
    assert f"stable: ≥ {STABLE:g}" in (tmp_path / "k.svg").read_text()
