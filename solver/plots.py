"""Figures: the cumulative margin distribution of several models (the paper's Figure 1).

Margins m_i = y_i f(x_i) of different models live on different scales (MSVMAv's w has unit
norm, an SVM's does not), so each model's margins are divided by that model's largest |m_i|:
the x axis is m / max|m| in [-1, 1], and the share of points at or left of 0 is the error rate.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

X_LABEL = "normalised margin  y·f(x) / max |y·f(x)|"
Y_LABEL = "cumulative frequency"


def _curve(values: Any) -> tuple[np.ndarray, np.ndarray]:
    """(x, p) of the normalised empirical CDF from raw margins or {"x", "p"} CDF points."""
    if isinstance(values, Mapping):
        x = np.asarray(values["x"], dtype=float)
        p = np.asarray(values["p"], dtype=float)
        if x.shape != p.shape or x.size == 0:
            raise ValueError("curves: a CDF needs equally long, non-empty 'x' and 'p'")
    else:
        m = np.sort(np.asarray(values, dtype=float).ravel())
        if m.size == 0:
            raise ValueError("curves: empty margin vector")
        x = m
        p = np.arange(1, m.size + 1) / m.size
    if not np.all(np.isfinite(x)):
        raise ValueError("curves: margins must be finite")
    scale = float(np.max(np.abs(x)))
    return (x / scale if scale > 0 else x), p


def margin_cdf_figure(curves: Mapping[str, Any], *, title: str = "Cumulative margin distribution",
                      width: float = 7.0, height: float = 4.5) -> Figure:
    """The matplotlib Figure behind ``plot_margin_cdf`` (for inspection and tests)."""
    if not curves:
        raise ValueError("curves: need at least one model")
    fig, ax = plt.subplots(figsize=(width, height), dpi=120)
    styles = ["-", "--", "-.", ":"]
    for k, (name, values) in enumerate(curves.items()):
        x, p = _curve(values)
        # a step function: the CDF jumps at each margin
        xs = np.concatenate([[-1.0], x, [1.0]])
        ps = np.concatenate([[0.0], p, [1.0]])
        # the first model (MSVMAv in the experiments) thick and underneath, the others in
        # varied dash patterns on top, so that coinciding curves stay visible
        ax.step(xs, ps, where="post", linewidth=3.2 if k == 0 else 1.4,
                zorder=2 if k == 0 else 3, alpha=0.75 if k == 0 else 1.0,
                linestyle="-" if k == 0 else styles[k % len(styles)], label=str(name))
    ax.axvline(0.0, color="0.4", linewidth=0.8)
    ax.set_xlim(-1.02, 1.02)
    ax.set_ylim(-0.01, 1.01)
    ax.set_xlabel(X_LABEL)
    ax.set_ylabel(Y_LABEL)
    ax.set_title(title)
    ax.grid(True, alpha=0.35)
    ax.legend(loc="upper left", fontsize=9, frameon=True)
    fig.tight_layout()
    return fig


def plot_margin_cdf(curves: Mapping[str, Any], title: str = "Cumulative margin distribution",
                    fmt: str = "png") -> bytes:
    """Render the cumulative margin distribution of several models as PNG or SVG bytes.

    Parameters
    ----------
    curves : {model name: margins (array-like) or {"x": [...], "p": [...]}} — raw margins
        y_i f(x_i), or CDF points as in ``margin_statistics(...)["cdf"]``. Each curve is divided
        by its own max |margin| (stated on the x axis).
    title : figure title
    fmt : "png" or "svg"
    """
    if fmt not in ("png", "svg"):
        raise ValueError(f"fmt: use 'png' or 'svg', got {fmt!r}")
    fig = margin_cdf_figure(curves, title=title)
    try:
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt)
        return buf.getvalue()
    finally:
        plt.close(fig)


__all__ = ["margin_cdf_figure", "plot_margin_cdf"]
