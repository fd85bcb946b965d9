"""margin_statistics against values computed by hand on a small vector."""

import math

import numpy as np
import pytest
from sklearn.datasets import make_classification

from solver import MSVMAv, margin_statistics


def test_hand_computed_statistics():
    m = [-1.0, 0.0, 1.0, 2.0, 3.0]
    s = margin_statistics(m, bins=4, cdf_points=5)
    assert s["n"] == 5
    assert s["mean"] == 1.0
    # below-mean deviations: -2, -1 -> (4 + 1) / 5
    assert s["semivariance"] == pytest.approx(1.0)
    assert s["sv_ratio"] == pytest.approx(1.0)
    assert s["variance"] == pytest.approx(2.0)
    assert s["std"] == pytest.approx(math.sqrt(2.0))
    assert (s["min"], s["max"]) == (-1.0, 3.0)
    # linear interpolation between order statistics: q-th percentile at position q/100 * 4
    assert s["quantiles"]["50"] == 1.0
    assert s["quantiles"]["25"] == 0.0
    assert s["quantiles"]["5"] == pytest.approx(-0.8)
    assert s["quantiles"]["95"] == pytest.approx(2.8)
    assert s["frac_nonpositive"] == pytest.approx(2 / 5)
    assert s["histogram"]["edges"] == [-1.0, 0.0, 1.0, 2.0, 3.0]
    assert s["histogram"]["counts"] == [1, 1, 1, 2]
    assert s["cdf"]["x"] == [-1.0, 0.0, 1.0, 2.0, 3.0]
    assert s["cdf"]["p"] == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])


def test_non_positive_mean_has_no_ratio():
    s = margin_statistics([-2.0, 1.0])
    assert s["mean"] == -0.5 and s["sv_ratio"] is None


def test_constant_margins():
    s = margin_statistics([0.5, 0.5, 0.5])
    assert s["semivariance"] == 0.0 and s["variance"] == 0.0
    assert sum(s["histogram"]["counts"]) == 3 and s["cdf"]["p"] == [1.0]


@pytest.mark.parametrize("bad", [[], [1.0, np.nan], [np.inf]])
def test_bad_margins_rejected(bad):
    with pytest.raises(ValueError, match="margins"):
        margin_statistics(bad)


def test_estimator_margins_and_theorem_terms():
    X, y = make_classification(n_samples=120, n_features=5, random_state=3)
    m = MSVMAv().fit(X, y)
    stats = m.margins(X, y)
    f = X @ m.coef_[0] + m.intercept_[0]
    margins = np.where(y == 1, 1.0, -1.0) * f
    assert stats["mean"] == pytest.approx(margins.mean())
    assert stats["semivariance"] == pytest.approx(
        np.mean(np.minimum(margins - margins.mean(), 0) ** 2))
    assert stats["accuracy"] == pytest.approx(np.mean((f > 0) == (y == 1)))
    radius = np.sqrt((X**2).sum(axis=1) + 1.0).max()  # augmented rows (x; 1)
    assert stats["radius"] == pytest.approx(radius)
    assert stats["rademacher_bound"] == pytest.approx(radius / np.sqrt(120))
    k = MSVMAv(kernel="rbf", max_iter=5).fit(X, y).margins(X, y)
    assert k["rademacher_bound"] == pytest.approx(2 / 120 * np.sqrt(120))  # K_ii = 1 for RBF
    # decision values the caller already has give the same statistics
    again = m.margins(X, y, decision=f)
    assert set(again) == set(stats)
    for key in ("mean", "semivariance", "sv_ratio", "std", "min", "max", "accuracy", "radius"):
        assert again[key] == pytest.approx(stats[key]), key
    assert again["quantiles"] == pytest.approx(stats["quantiles"])
