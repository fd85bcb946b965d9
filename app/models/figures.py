"""An evaluation's curves drawn: ROC, precision-recall and reliability side by side, as PNG or
SVG bytes. matplotlib's object API on a figure of its own (no pyplot, so no global state
shared between the route handlers' threads). matplotlib is imported on the first figure drawn, not
with the app: it is a quarter of a second of every process's start (the server, each worker)."""

from __future__ import annotations

import io
from typing import Any


def _roc(ax: Any, roc: list[dict[str, Any]]) -> None:
    for curve in roc:
        ax.plot(curve["fpr"], curve["tpr"], label=str(curve["label"]))
    ax.plot([0, 1], [0, 1], color="0.6", linewidth=0.8, linestyle="--")
    ax.set(xlabel="false positive rate", ylabel="true positive rate", title="ROC")


def _pr(ax: Any, pr: list[dict[str, Any]]) -> None:
    for curve in pr:
        ax.step(curve["recall"], curve["precision"], where="post", label=str(curve["label"]))
    ax.set(xlabel="recall", ylabel="precision", title="precision-recall")


def _reliability(ax: Any, reliability: list[dict[str, Any]]) -> None:
    for curve in reliability:
        ax.plot(
            curve["mean_predicted"],
            curve["fraction_positive"],
            marker="o",
            label=str(curve["label"]),
        )
    ax.plot([0, 1], [0, 1], color="0.6", linewidth=0.8, linestyle="--")
    title = "reliability" if reliability else "reliability (no probabilities)"
    ax.set(xlabel="mean predicted probability", ylabel="fraction positive", title=title)


def render_curves(curves: dict[str, Any], *, title: str, fmt: str) -> bytes:
    """``curves`` (solver.evaluation.curves' JSON) as one PNG or SVG figure of three panels."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(13.5, 4.2), dpi=110)
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 3)
    _roc(axes[0], curves["roc"])
    _pr(axes[1], curves["pr"])
    _reliability(axes[2], curves["reliability"])
    for ax in axes:
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(True, alpha=0.35)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="best", fontsize=8, title="class", title_fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt)
    return buf.getvalue()


def render_threshold_curve(curve: dict[str, Any], *, title: str, fmt: str) -> bytes:
    """A decision rule's curve (app.predict.thresholds: the objective against the threshold on
    the out-of-fold and the hold-out probabilities, the chosen threshold marked) as PNG or
    SVG bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.2), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    labels = {"oof": "out of fold (fitted on)", "holdout": "hold-out"}
    for part, label in labels.items():
        if curve.get(part) is not None:
            values = [float("nan") if v is None else v for v in curve[part]]
            ax.plot(curve["threshold"], values, label=label)
    ax.axvline(curve["chosen"], color="0.3", linewidth=0.9, linestyle="--",
               label=f"chosen {curve['chosen']:.4g}")
    ax.set(xlabel="threshold on the class's probability", ylabel=curve["measure"], title=title)
    ax.set_xlim(-0.02, 1.02)
    ax.grid(True, alpha=0.35)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format=fmt)
    return buf.getvalue()
