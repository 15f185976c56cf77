"""The figures' defects stay fixed: units and plain names in every axis label, legends outside the
data, whiskers inside the frame (or marked where cut), more than one tick label on the model-size
axis, no interval at the baseline."""

import numpy as np
import pytest
from matplotlib.collections import LineCollection
from report_fixture import SETTINGS, study_tables
from scaling.report import plotkit
from scaling.report.plots import FIGURES, plot_figures


@pytest.fixture(scope="module")
def figures(tmp_path_factory):
    """{name: matplotlib figure} of the hand-built study, captured before they are written."""
    kept = {}
    real = plotkit.save

    def keep(fig, folder, name):
        kept[name] = fig
        fig.canvas.draw()
        return real(fig, folder, name)

    mp = pytest.MonkeyPatch()
    mp.setattr(plotkit, "save", keep)
    try:
        manifest = plot_figures(study_tables(), tmp_path_factory.mktemp("plots"), None, SETTINGS)
    finally:
        mp.undo()
    assert all("file" in manifest[n] for n in FIGURES), manifest
    return kept


def axes_of(fig):
    return [ax for ax in fig.axes if ax.get_visible()]


def test_axis_labels_have_units_and_plain_names(figures):
    for name, fig in figures.items():
        for ax in axes_of(fig):
            x, y = ax.get_xlabel(), ax.get_ylabel()
            assert x and y, name
            assert "_" not in x + y, f"{name}: internal name in {x!r} / {y!r}"
            assert "(" in y, f"{name}: no unit in the y label {y!r}"


def test_legends_below_the_data(figures):
    for name, fig in figures.items():
        assert all(ax.get_legend() is None for ax in fig.axes), name
        assert fig.legends, name


def test_whiskers_inside_the_frame(figures):
    for name, fig in figures.items():
        for ax in axes_of(fig):
            lo, hi = ax.get_ylim()
            for coll in (c for c in ax.collections if isinstance(c, LineCollection)):
                for seg in coll.get_segments():
                    ys = np.asarray(seg)[:, 1]
                    assert ys.max() <= hi * (1 + 1e-9) and ys.min() >= lo - 1e-9 * abs(lo), name


def test_no_interval_at_the_baseline(figures):
    ax = figures["strong_efficiency"].axes[0]
    for coll in (c for c in ax.collections if isinstance(c, LineCollection)):
        for seg in coll.get_segments():
            seg = np.asarray(seg)
            if np.isclose(seg[0, 0], 1.0):
                assert np.isclose(seg[0, 1], seg[1, 1]), "a whisker at the baseline"


def test_model_size_axis_has_several_tick_labels(figures):
    for name in ("model_size_memory", "model_size_throughput"):
        ax = figures[name].axes[0]
        lo, hi = ax.get_xlim()
        shown = [t.get_text() for t in ax.get_xticklabels() if t.get_text() and lo <= t.get_position()[0] <= hi]
        assert len(shown) >= 3, shown
        assert "cpu_peak_rss" not in ax.get_ylabel() + ax.get_title()


def test_limits_cut_only_very_wide_intervals():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    top = plotkit.limits(ax, [1.0, 2.0], highs=[2.5, 3.0])
    assert top >= 3.0  # within reach: the whole interval is shown
    top = plotkit.limits(ax, [1.0, 2.0], highs=[2.5, 50.0])
    assert 2.5 <= top < 50 and plotkit.mark_cut(ax, [1], [50.0], top, "k")
    assert not plotkit.mark_cut(ax, [1], [2.0], top, "k")
    plt.close(fig)


def test_a_model_named_by_its_source_is_not_compared_with_the_paper():
    """An imported table's model column ("resnet50") has no KAN widths: the weak figures once failed
    with a TypeError there ('NoneType' object is not iterable); now the overlay says why it is off."""
    import pandas as pd
    from scaling.report.reference import comparable
    t = pd.DataFrame({"model": ["resnet50"] * 2, "world_size": [1, 2], "samples": [100, 200], "n_ok": [1, 1],
                      "grid_size": [None, None]})
    out = comparable("weak", t)
    assert not out["comparable"] and any(w.startswith("models resnet50 (paper: KAN widths") for w in out["why_not"])
