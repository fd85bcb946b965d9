"""Label-prior shift: the window's class priors and accuracy estimated from its predicted
classes alone (black-box shift estimation, BBSE: Lipton, Wang and Smola, ICML 2018), beside
the confidence-based estimate, which a label shift breaks (issue 47).

On the model's labelled reference rows (its hold-out, else its training part) the joint
confusion matrix C[i, j] = P(predicted i, true j) and the priors p_j = Σ_i C[i, j] are
counted. If the window differs from the reference only in its class priors q (P(x | y) fixed),
its share of predicted classes is μ = C w with w_j = q_j / p_j; so w solves C w = μ (least
squares, w ≥ 0), q = w p normalised, and the window's accuracy is Σ_j q_j · C[j, j] / p_j
(each class's recall on the reference, weighted by its estimated share). The 95 % interval
takes the spread of ``BOOTSTRAP`` seeded resamples of the reference rows and of the window's
predicted classes, and adds the window's own binomial spread â(1 − â)/n. It assumes P(x | y)
did not move; a covariate shift also moves μ, and then q and the estimate are off.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import stats

BOOTSTRAP = 200
SEED = 0


def _solve(C: np.ndarray, mu: np.ndarray) -> tuple[np.ndarray, float]:
    """(q, accuracy) for the joint confusion matrix C and the predicted shares mu."""
    p = C.sum(axis=0)
    w = np.clip(np.linalg.lstsq(C, mu, rcond=None)[0], 0.0, None)
    q = w * p
    q = q / q.sum() if q.sum() > 0 else p
    recall = np.divide(np.diag(C), p, out=np.zeros_like(p), where=p > 0)
    return q, float(np.sum(q * recall))


def _joint(predicted: np.ndarray, true: np.ndarray, k: int) -> np.ndarray:
    C = np.zeros((k, k))
    np.add.at(C, (predicted, true), 1.0)
    return C / max(len(predicted), 1)


def estimate(ref_predicted: np.ndarray, ref_true: np.ndarray, predicted: np.ndarray, k: int,
             alpha: float = 0.05) -> dict[str, Any] | None:
    """{"method": "bbse", estimate, low, high, priors_reference, priors_window} of a window
    whose rows were predicted ``predicted`` (class indices); None without rows."""
    n = predicted.size
    if n == 0 or ref_predicted.size == 0:
        return None
    C = _joint(ref_predicted, ref_true, k)
    mu = np.bincount(predicted, minlength=k)[:k] / n
    q, acc = _solve(C, mu)
    rng = np.random.default_rng(SEED)
    m = ref_predicted.size
    boot = []
    for _ in range(BOOTSTRAP):
        pick = rng.integers(0, m, m)
        Cb = _joint(ref_predicted[pick], ref_true[pick], k)
        boot.append(_solve(Cb, rng.multinomial(n, mu) / n)[1])
    var = float(np.var(boot)) + acc * (1.0 - acc) / n
    half = float(stats.norm.ppf(1.0 - alpha / 2.0)) * np.sqrt(var)
    return {"method": "bbse", "estimate": acc, "low": max(0.0, acc - half),
            "high": min(1.0, acc + half), "priors_reference": C.sum(axis=0).tolist(),
            "priors_window": q.tolist()}
