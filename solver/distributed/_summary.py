"""A fitted model's training-margin summary over a Dask cluster's row blocks, never gathering
the rows (issue 46): what ``solver.margins.margin_statistics`` and the model's Theorem 1 terms
give locally, reduced over the blocks.

Each block's margins m_i = y_i f(x_i) are computed once and kept on its worker (8 bytes a row);
two passes reduce them:

1. n, sum m, min, max, the count of m <= 0, the count predicted right, the Theorem 1 sums
   (largest ||x||^2, or the kernel diagonal's sum and largest), and a KLL sketch of the
   margins (Apache DataSketches' ``kll_doubles_sketch``, merged block by block);
2. given the mean, min and max: sum (m - mean)^2, sum min(m - mean, 0)^2, the histogram's
   counts over margin_statistics' bins and the CDF's counts m <= x at its points.

Everything but the quantiles is exact (sums, counts, extremes; the histogram and CDF counts are
counts over fixed edges, so they add exactly). The quantiles are the sketch's: each has
normalised rank error at most ``quantile_rank_error`` (the sketch's stated single-quantile
error for its k, with 99 % confidence): the share of margins below it is within that of the
level asked for.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..kernels import kernel_diagonal
from ..margins import QUANTILE_LEVELS
from ..msvmav import augment
from . import _blocks

#: the KLL sketch's accuracy parameter (normalised rank error about 0.28 % at k = 1000)
SKETCH_K = 1000


def _sketch(values: np.ndarray | None = None) -> Any:
    from datasketches import kll_doubles_sketch

    sketch = kll_doubles_sketch(SKETCH_K)
    if values is not None and values.size:
        sketch.update(np.ascontiguousarray(values, dtype=np.float64))
    return sketch


def rank_error() -> float:
    """The sketch's stated normalised rank error of one quantile (99 % confidence)."""
    from datasketches import kll_doubles_sketch

    return float(kll_doubles_sketch.get_normalized_rank_error(SKETCH_K, False))


def block_margins(model: Any, X: Any, y: Any) -> dict:
    """A block's margins, right predictions and Theorem 1 sums (kept on its worker)."""
    D = model.decision_function(X)
    m = np.asarray(model._margins_of(D, np.asarray(y)), dtype=np.float64)
    correct = int(np.count_nonzero(model.classes_[model.predicted_index(D)] == np.asarray(y)))
    if model.kernel_kind.primal:
        Xa = augment(X) if model.fit_intercept else X
        diag = kernel_diagonal(Xa, kernel="linear", gamma=1.0)
    else:
        diag = kernel_diagonal(X, **model._kernel_args())
    return {"m": m, "correct": correct, "diag_sum": float(diag.sum()),
            "diag_max": float(diag.max()) if diag.size else 0.0}


def first_pass(block: dict) -> dict:
    m = block["m"]
    return {"n": int(m.size), "sum": float(m.sum()),
            "min": float(m.min()) if m.size else math.inf,
            "max": float(m.max()) if m.size else -math.inf,
            "nonpositive": int(np.count_nonzero(m <= 0)), "correct": block["correct"],
            "diag_sum": block["diag_sum"], "diag_max": block["diag_max"],
            "sketch": _sketch(m).serialize()}


def merge_first(*parts: dict) -> dict:
    from datasketches import kll_doubles_sketch

    sketch = _sketch()
    for part in parts:
        sketch.merge(kll_doubles_sketch.deserialize(part["sketch"]))
    return {"n": sum(p["n"] for p in parts), "sum": sum(p["sum"] for p in parts),
            "min": min(p["min"] for p in parts), "max": max(p["max"] for p in parts),
            "nonpositive": sum(p["nonpositive"] for p in parts),
            "correct": sum(p["correct"] for p in parts),
            "diag_sum": sum(p["diag_sum"] for p in parts),
            "diag_max": max(p["diag_max"] for p in parts), "sketch": sketch.serialize()}


def second_pass(block: dict, mean: float, bins: int, span: tuple, xs: np.ndarray) -> dict:
    """(``span``, ``bins``: margin_statistics' own histogram call, so that each margin falls
    in the bin it falls in there.)"""
    m = block["m"]
    dev = m - mean
    below = np.minimum(dev, 0.0)
    counts, _ = np.histogram(m, bins=bins, range=span)
    return {"squares": float(dev @ dev), "below": float(below @ below),
            "counts": counts.astype(np.int64),
            "cdf": np.searchsorted(np.sort(m), xs, side="right").astype(np.int64)}


def _span(lo: float, hi: float) -> tuple[float, float]:
    """margin_statistics' histogram range."""
    return (lo, hi) if hi > lo else (lo - 0.5, hi + 0.5)


def cluster_margin_statistics(model: Any, X: Any, y: Any, *, client: Any, bins: int = 20,
                              cdf_points: int = 101) -> dict:
    """``margin_statistics`` of the fitted ``model``'s training margins on the row-chunked
    dask arrays X, y, plus accuracy, Theorem 1's terms (as ``model.margins`` adds them),
    ``quantile_rank_error`` and ``quantiles_sketch``; the rows stay on the workers."""
    with client.as_current():  # distributed.wait looks for the current client
        return _reduced(model, X, y, client, bins, cdf_points)


def _reduced(model: Any, X: Any, y: Any, client: Any, bins: int, cdf_points: int) -> dict:
    import dask

    from ._cluster import ClusterRows

    held = client.submit(_blocks.identity, model, pure=False)
    rows = ClusterRows(client, [], 0, 0)
    try:
        graph = [dask.delayed(block_margins, pure=False)(held, xb, yb) for xb, yb in zip(
            X.to_delayed(optimize_graph=False).ravel().tolist(),
            y.to_delayed(optimize_graph=False).ravel().tolist(), strict=True)]
        rows.parts = client.compute(graph, optimize_graph=False)
        rows.wait(rows.parts)
        first = rows.reduce(first_pass, combine=merge_first)
        return _statistics(model, rows, first, bins, cdf_points)
    finally:
        rows.release()
        held.release()


def _statistics(model: Any, rows: Any, first: dict, bins: int, cdf_points: int) -> dict:
    from datasketches import kll_doubles_sketch

    n = first["n"]
    if n == 0:
        raise ValueError("margins: need at least one margin")
    if not (math.isfinite(first["sum"]) and math.isfinite(first["min"])
            and math.isfinite(first["max"])):
        raise ValueError("margins: contain NaN or infinity")
    mean, lo, hi = first["sum"] / n, first["min"], first["max"]
    span = _span(lo, hi)
    edges = np.histogram_bin_edges(np.array([lo, hi]), bins=bins, range=span)
    xs = np.linspace(lo, hi, cdf_points) if hi > lo else np.array([lo])
    second = rows.reduce(second_pass, mean=mean, bins=bins, span=span, xs=xs)
    sv, var = second["below"] / n, second["squares"] / n
    sketch = kll_doubles_sketch.deserialize(first["sketch"])
    quantiles = sketch.get_quantiles([q / 100 for q in QUANTILE_LEVELS])
    out = {"n": int(n), "mean": mean, "semivariance": sv,
           "sv_ratio": sv / mean**2 if mean > 0 else None, "variance": var,
           "std": math.sqrt(var), "min": lo, "max": hi,
           "quantiles": {str(q): float(v) for q, v in zip(QUANTILE_LEVELS, quantiles,
                                                           strict=True)},
           "frac_nonpositive": first["nonpositive"] / n,
           "histogram": {"edges": edges.tolist(), "counts": second["counts"].tolist()},
           "cdf": {"x": xs.tolist(), "p": (second["cdf"] / n).tolist()},
           "accuracy": first["correct"] / n,
           "quantile_rank_error": rank_error(), "quantiles_sketch": f"kll(k={SKETCH_K})"}
    out.update(_theorem_terms(model, first, n))
    return out


def _theorem_terms(model: Any, first: dict, n: int) -> dict:
    """The model's Theorem 1 terms from the blocks' sums (``solver.margins``' linear and
    kernel forms)."""
    from ..margins import kernel_rademacher_sums, linear_rademacher_terms

    if model.kernel_kind.primal:
        return linear_rademacher_terms(np.array([math.sqrt(first["diag_max"])]), n)
    return kernel_rademacher_sums(first["diag_sum"], first["diag_max"], n)
