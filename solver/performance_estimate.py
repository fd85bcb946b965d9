"""Label-free performance estimate: the accuracy expected from calibrated probabilities
(confidence-based, as NannyML's CBPE estimates accuracy).

If the probabilities are calibrated, row i's prediction is right with probability
c_i = P(predicted class of row i), independently across rows, so a window's realised accuracy
is a Poisson-binomial mean with

    E[accuracy] = mean(c_i),    Var[accuracy] = sum c_i (1 - c_i) / n^2.

The interval is that mean +- z_{1 - alpha/2} standard deviations (normal approximation),
clipped to [0, 1]: where the realised accuracy of the window is expected to fall, if the
calibration still holds on the window's rows. It says nothing about a shift of P(y | x),
which no label-free estimate can see."""

from __future__ import annotations

import numpy as np
from scipy import stats


def expected_accuracy(proba, y_pred_index=None,
                      alpha: float = 0.05) -> dict[str, float | int | None]:
    """{"estimate", "low", "high", "n"} for a window's probabilities proba (n, k) and the
    indices of its predicted classes (default: the most probable column). An empty window
    gives None for the three numbers."""
    P = np.asarray(proba, dtype=np.float64)
    if P.ndim != 2:
        raise ValueError(f"proba: expected shape (n, k), got {P.shape}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: must be in (0, 1), got {alpha!r}")
    n = P.shape[0]
    if n == 0:
        return {"estimate": None, "low": None, "high": None, "n": 0}
    pred = np.argmax(P, axis=1) if y_pred_index is None else np.asarray(y_pred_index)
    if pred.shape != (n,):
        raise ValueError(f"y_pred_index: expected {n} indices, got shape {pred.shape}")
    confidence = np.clip(P[np.arange(n), pred], 0.0, 1.0)
    estimate = float(confidence.mean())
    sd = float(np.sqrt(np.sum(confidence * (1.0 - confidence)))) / n
    z = float(stats.norm.ppf(1.0 - alpha / 2.0))
    return {"estimate": estimate, "low": max(0.0, estimate - z * sd),
            "high": min(1.0, estimate + z * sd), "n": int(n)}


__all__ = ["expected_accuracy"]
