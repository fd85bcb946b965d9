"""Margin CDF figure: formats, legend, normalisation."""

from __future__ import annotations

import numpy as np
import pytest

from solver.margins import margin_statistics
from solver.plots import X_LABEL, margin_cdf_figure, plot_margin_cdf


@pytest.fixture
def curves():
    rng = np.random.default_rng(0)
    return {"MSVMAv": rng.normal(0.3, 0.2, 200), "SVM": rng.normal(2.0, 1.5, 200),
            "MAMC": margin_statistics(rng.normal(0.1, 0.3, 50))["cdf"]}


def test_png_and_svg_bytes(curves):
    assert plot_margin_cdf(curves, fmt="png")[:8] == b"\x89PNG\r\n\x1a\n"
    svg = plot_margin_cdf(curves, title="toy", fmt="svg")
    assert svg.lstrip().startswith(b"<?xml") and b"<svg" in svg[:2000]
    with pytest.raises(ValueError, match="fmt"):
        plot_margin_cdf(curves, fmt="gif")
    with pytest.raises(ValueError, match="curves"):
        plot_margin_cdf({})


def test_figure_has_legend_labels_and_normalised_axis(curves):
    fig = margin_cdf_figure(curves, title="toy")
    ax = fig.axes[0]
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["MSVMAv", "SVM", "MAMC"]
    assert ax.get_xlabel() == X_LABEL and "max" in X_LABEL
    assert ax.get_ylabel() == "cumulative frequency"
    assert ax.get_title() == "toy"
    for line in ax.get_lines()[:3]:
        x, p = line.get_xdata(), line.get_ydata()
        assert np.max(np.abs(x)) <= 1.0 + 1e-12
        assert p[0] == 0.0 and p[-1] == 1.0 and np.all(np.diff(p) >= 0)
    import matplotlib.pyplot as plt

    plt.close(fig)
